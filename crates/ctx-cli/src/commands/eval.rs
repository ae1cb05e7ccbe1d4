//! `ctx eval PLAN`: does the injected context help? The plan runs in
//! variants that leave parts of the context out, and the checks that pass
//! are counted per variant and per task.
//!
//! * `full`: prompts as designed; `no-entities`: without the entity block;
//!   `no-dependencies`: without the dependency outputs; `bare`: the task's
//!   own prompt alone ([`ContextVariant`]). A variant changes only the
//!   prompt: the checks (the `entities` check too) and the schedule are
//!   the same in all of them.
//! * `--repeat N` runs each variant N times (sampled models vary), one run
//!   after another, each with `--concurrency` tasks in flight. Running
//!   them concurrently under one shared limit (issue 11) is not done yet:
//!   docs/evaluation.md says what it needs.
//! * Every run is an ordinary stored run, labelled `[eval VARIANT K/N]`
//!   after its plan path (`ctx runs list`) and its engine (`ctx runs
//!   show`), so each can be inspected and resumed with `ctx run --resume`.
//!
//! A task's checks count in every run: a task that failed for another
//! reason or was skipped passes none of them, so a variant that breaks a
//! dependency loses its dependents' checks too. `tasks_passing` counts
//! the (run, task) pairs whose checks all passed, over tasks with checks.
//!
//! Exit codes: 0 when every variant ran (whatever the pass rates: they are
//! a measurement, not a verdict), 2 on bad usage (no checks in the plan, an
//! engine that cannot answer, an unknown variant), 4 when a store fails,
//! 128 + N when a signal stops it (the runs so far are stored).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ctx_deps::{ContextVariant, ExecutionStore, ExecutorOptions, MemoryStore};
use ctx_model::{Plan, TaskStatus};
use ctx_store_sqlite::{NewRun, RunRoot, SessionEnd, StartAt};
use serde::Serialize;

use super::run::{Executed, Output, execute, task_timeout};
use super::runs;
use crate::engines::{self, EngineArgs};
use crate::exit::{CliError, CliResult, Exit};
pub use crate::format::Format;

/// `--ablate` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Variant {
    /// Prompts as designed.
    Full,
    /// Without the entity block.
    NoEntities,
    /// Without the dependency outputs.
    NoDependencies,
    /// The task's own prompt alone.
    Bare,
}

impl Variant {
    fn context(self) -> ContextVariant {
        match self {
            Variant::Full => ContextVariant::Full,
            Variant::NoEntities => ContextVariant::NoEntities,
            Variant::NoDependencies => ContextVariant::NoDependencies,
            Variant::Bare => ContextVariant::Bare,
        }
    }
}

/// Arguments of `ctx eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON or YAML by extension); it must have checks.
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// The variants to run, comma-separated [default: all four].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VARIANTS")]
    pub ablate: Vec<Variant>,

    /// Runs of each variant.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,

    /// Most tasks in flight at once in each run; 0 means unlimited.
    #[arg(long, value_name = "N", default_value_t = ctx_deps::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,

    /// As for `ctx run`: seconds one task's engine call may take; 0 = none.
    #[arg(long, value_name = "SECS", default_value_t = ctx_deps::DEFAULT_TASK_TIMEOUT.as_secs_f64())]
    pub task_timeout: f64,

    /// As for `ctx run`: most bytes one task's output may have.
    #[arg(long, value_name = "BYTES", default_value_t = ctx_deps::DEFAULT_MAX_OUTPUT_BYTES)]
    pub max_output_bytes: usize,

    /// Cap on each assembled prompt, in tokens (overrides
    /// config.max_prompt_tokens).
    #[arg(long, value_name = "N")]
    pub max_prompt_tokens: Option<usize>,

    /// Attempts per checked task, retries with feedback included
    /// (overrides config.max_check_attempts).
    #[arg(long, value_name = "N")]
    pub max_check_attempts: Option<u32>,

    /// The store root the variant runs are recorded under [default:
    /// .ctx/runs].
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Keep the runs in memory only.
    #[arg(long, conflicts_with = "root")]
    pub no_store: bool,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// The `--format json` object.
#[derive(Debug, Serialize)]
struct EvalJson {
    variants: Vec<VariantJson>,
    tasks: Vec<TaskRates>,
}

#[derive(Debug, Serialize)]
struct VariantJson {
    name: &'static str,
    runs: u32,
    checks_passed: u64,
    checks_total: u64,
    pass_rate: f64,
    tasks_passing: u64,
    tasks_checked: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    wall_ms: u64,
    run_ids: Vec<String>,
}

#[derive(Debug, Serialize)]
struct TaskRates {
    task_id: String,
    checks: usize,
    pass_rate: std::collections::BTreeMap<&'static str, f64>,
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let mut plan = super::plan_check::load_valid_plan(&args.plan)?;
    super::run::override_limits(&mut plan, args.max_prompt_tokens, args.max_check_attempts)?;
    if args.repeat == 0 {
        return Err(CliError::usage("--repeat must be at least 1"));
    }
    let timeout = task_timeout(args.task_timeout)?;
    super::run::check_max_output_bytes(args.max_output_bytes)?;
    // Checks per task (compiled as the executor will: config's, then the
    // task's own).
    let counts: Vec<usize> = plan
        .sub_tasks
        .iter()
        .map(|t| ctx_model::task_checks(&plan, t).len())
        .collect();
    if counts.iter().all(|&n| n == 0) {
        return Err(CliError::usage(format!(
            "{}: the plan has no checks, so there is nothing to measure (add `checks:` to tasks or `config.checks`)",
            args.plan.display()
        )));
    }
    let engine = engines::build(&args.engine)?;
    if !engine.answers_prompts() {
        return Err(CliError::usage(format!(
            "ctx eval needs an engine that answers prompts: the {} engine's outputs are placeholders (use --engine command or --engine openai)",
            engine.name()
        )));
    }
    super::run::refuse_unjudgeable(&plan, engine.as_ref(), &args.plan)?;
    let label = engines::label(&args.engine);
    let mut variants = args.ablate.clone();
    if variants.is_empty() {
        variants = vec![
            Variant::Full,
            Variant::NoEntities,
            Variant::NoDependencies,
            Variant::Bare,
        ];
    }
    variants.sort();
    variants.dedup();
    let root = RunRoot::new(
        args.root
            .clone()
            .unwrap_or_else(|| PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT)),
    );
    let output = Output {
        plan_path: &args.plan,
        out: None,
        format: Format::Text,
    };

    // Per variant: its totals and (passed, total) per task.
    let mut rows: Vec<(VariantJson, Vec<(u64, u64)>)> = Vec::new();
    for &variant in &variants {
        let name = variant.context().as_str();
        let mut v = VariantJson {
            name,
            runs: 0,
            checks_passed: 0,
            checks_total: 0,
            pass_rate: 0.0,
            tasks_passing: 0,
            tasks_checked: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            wall_ms: 0,
            run_ids: Vec::new(),
        };
        let mut per_task = vec![(0u64, 0u64); plan.sub_tasks.len()];
        for k in 1..=args.repeat {
            let options = ExecutorOptions {
                concurrency: args.concurrency,
                task_timeout: timeout,
                max_output_bytes: args.max_output_bytes,
                context: variant.context(),
                ..ExecutorOptions::default()
            };
            let started = Instant::now();
            let executed = if args.no_store {
                execute(
                    plan.clone(),
                    Arc::clone(&engine),
                    Arc::new(MemoryStore::new()),
                    options,
                    &output,
                )?
            } else {
                // The label shows in `ctx runs list` (its PLAN column) and
                // `ctx runs show` (the engine).
                let tag = format!("[eval {name} {k}/{}]", args.repeat);
                let run_label = format!("{label} {tag}");
                let source = format!("{} {tag}", args.plan.display());
                let new = NewRun {
                    plan: &plan,
                    engine: &run_label,
                    plan_source: Some(&source),
                };
                let (store, _) = root
                    .start(StartAt::NewRun, &new)
                    .map_err(runs::store_error)?;
                let store = Arc::new(store);
                eprintln!("eval {name} {k}/{}: run {}", args.repeat, store.run_id());
                let executed = execute(
                    plan.clone(),
                    Arc::clone(&engine),
                    Arc::clone(&store) as Arc<dyn ExecutionStore>,
                    options,
                    &output,
                )?;
                store
                    .finish(if executed.report.interrupted {
                        SessionEnd::Interrupted
                    } else {
                        SessionEnd::Finished
                    })
                    .map_err(runs::store_error)?;
                v.run_ids.push(store.run_id().to_string());
                executed
            };
            v.wall_ms = v
                .wall_ms
                .saturating_add(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
            v.runs += 1;
            tally(&plan, &counts, &executed, &mut v, &mut per_task);
            if executed.report.interrupted {
                let exit = executed.signal.map_or(Exit::Interrupted, |s| s.exit());
                eprintln!(
                    "eval interrupted during {name} {k}/{}; the runs so far are stored",
                    args.repeat
                );
                return Ok(exit);
            }
        }
        v.pass_rate = rate(v.checks_passed, v.checks_total);
        rows.push((v, per_task));
    }

    let tasks: Vec<TaskRates> = plan
        .sub_tasks
        .iter()
        .enumerate()
        .filter(|(i, _)| counts[*i] > 0)
        .map(|(i, t)| TaskRates {
            task_id: t.id.clone(),
            checks: counts[i],
            pass_rate: rows
                .iter()
                .map(|(v, per)| (v.name, rate(per[i].0, per[i].1)))
                .collect(),
        })
        .collect();
    let json = EvalJson {
        variants: rows.into_iter().map(|(v, _)| v).collect(),
        tasks,
    };
    match args.format {
        Format::Json => crate::io::print_stdout(&crate::io::json_text(&json)?)?,
        Format::Text => crate::io::print_stdout(&text(&json))?,
    }
    Ok(Exit::Ok)
}

/// Adds one run's checks, tokens and passing tasks to its variant.
fn tally(
    plan: &Plan,
    counts: &[usize],
    executed: &Executed,
    v: &mut VariantJson,
    per_task: &mut [(u64, u64)],
) {
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        let result = executed
            .report
            .results
            .iter()
            .find(|r| r.task_id == task.id);
        if let Some(u) = result.and_then(|r| r.metadata.tokens_used) {
            v.prompt_tokens = v.prompt_tokens.saturating_add(u.prompt_tokens);
            v.completion_tokens = v.completion_tokens.saturating_add(u.completion_tokens);
        }
        let total = counts[i] as u64;
        if total == 0 {
            continue;
        }
        // Checks only count when they ran: a task that failed otherwise or
        // was skipped passes none.
        let passed = result
            .filter(|r| matches!(r.status, TaskStatus::Completed | TaskStatus::Failed))
            .map_or(0, |r| r.metadata.checks.iter().filter(|c| c.passed).count())
            as u64;
        v.checks_total += total;
        v.checks_passed += passed;
        v.tasks_checked += 1;
        if passed == total {
            v.tasks_passing += 1;
        }
        per_task[i].0 += passed;
        per_task[i].1 += total;
    }
}

fn rate(passed: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        // Rounded to 4 places so the JSON is stable to read and compare.
        ((passed as f64 / total as f64) * 10_000.0).round() / 10_000.0
    }
}

fn percent(r: f64) -> String {
    format!("{:.0} %", r * 100.0)
}

fn text(json: &EvalJson) -> String {
    let mut out = String::new();
    let rows: Vec<Vec<String>> = json
        .variants
        .iter()
        .map(|v| {
            vec![
                v.name.to_string(),
                v.runs.to_string(),
                format!("{}/{}", v.checks_passed, v.checks_total),
                percent(v.pass_rate),
                format!("{}/{}", v.tasks_passing, v.tasks_checked),
                v.prompt_tokens.to_string(),
                v.completion_tokens.to_string(),
                format!("{:.1} s", v.wall_ms as f64 / 1000.0),
            ]
        })
        .collect();
    out.push_str(&runs::table(
        &[
            "VARIANT",
            "RUNS",
            "CHECKS",
            "PASS",
            "TASKS PASSING",
            "PROMPT TOK",
            "COMPL TOK",
            "WALL",
        ],
        &[false, true, true, true, true, true, true, true],
        &rows,
    ));
    out.push('\n');
    let mut header = vec!["TASK", "CHECKS"];
    header.extend(json.variants.iter().map(|v| v.name));
    let right: Vec<bool> = header.iter().enumerate().map(|(i, _)| i > 0).collect();
    let rows: Vec<Vec<String>> = json
        .tasks
        .iter()
        .map(|t| {
            let mut row = vec![t.task_id.clone(), t.checks.to_string()];
            row.extend(json.variants.iter().map(|v| {
                t.pass_rate
                    .get(v.name)
                    .map_or_else(String::new, |r| percent(*r))
            }));
            row
        })
        .collect();
    out.push_str(&runs::table(&header, &right, &rows));
    let ids: Vec<String> = json
        .variants
        .iter()
        .filter(|v| !v.run_ids.is_empty())
        .map(|v| format!("{}: {}", v.name, v.run_ids.join(", ")))
        .collect();
    if !ids.is_empty() {
        out.push_str("\nruns: ");
        out.push_str(&ids.join("; "));
        out.push('\n');
    }
    out
}
