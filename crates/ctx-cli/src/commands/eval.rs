//! `ctx eval PLAN`: does the injected context help? The plan runs in
//! variants that leave parts of the context out, and the checks that pass
//! are counted per variant and per task.
//!
//! * `full`: prompts as designed; `no-entities`: without the entity block;
//!   `no-dependencies`: without the dependency outputs; `bare`: the task's
//!   own prompt alone ([`ContextVariant`]). A variant changes only the
//!   prompt: the checks (the `entities` check too) and the schedule are
//!   the same in all of them.
//! * `--repeat N` runs each variant N times (sampled models vary). All the
//!   variant x repeat runs execute at once on one runtime, each with its
//!   own ready queue, and `--concurrency` is shared by all of them: one
//!   [`ExecutorOptions::dispatch_gate`] holds that many permits, and a
//!   task holds one for its engine work, so the engine never sees more
//!   than `--concurrency` calls in flight, whichever runs they belong to.
//!   Waiting for a permit does not count against `--task-timeout`. The
//!   report lists variants in their fixed order whatever order the runs
//!   finished in; a variant's `wall_ms` is the time from the eval's start
//!   to the end of its last run, and `task_ms` the tasks' own time (from
//!   their permit on), which does not depend on what else was running.
//! * Ctrl-C, SIGTERM or SIGHUP stops every run: each stores its in-flight
//!   tasks as interrupted and is closed as an interrupted run.
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
use std::time::{Duration, Instant};

use ctx_deps::{
    ContextVariant, ExecError, ExecutionStore, Executor, ExecutorOptions, MemoryStore, RunReport,
};
use ctx_model::{Plan, TaskStatus};
use ctx_store_sqlite::{NewRun, RunRoot, SessionEnd, SqliteStore, StartAt};
use serde::Serialize;
use tokio::sync::Semaphore;

use super::run::{StopSignal, StopSignals, task_timeout};
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

    /// Most engine calls in flight at once, shared by all the variant and
    /// repeat runs; 0 means unlimited.
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
    /// From the eval's start to the end of this variant's last run (the
    /// runs of all variants overlap).
    wall_ms: u64,
    /// The tasks' own time summed over the variant's runs (from holding a
    /// slot of the shared `--concurrency` to their result): what the
    /// variant cost in engine time, whatever it waited for.
    task_ms: u64,
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
    let label = engine.label();
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
    // Every variant x repeat run, in report order: variant, then repeat.
    let mut planned: Vec<Planned> = Vec::new();
    let gate = (args.concurrency > 0).then(|| Arc::new(Semaphore::new(args.concurrency)));
    for (v, &variant) in variants.iter().enumerate() {
        let name = variant.context().as_str();
        for k in 1..=args.repeat {
            let options = ExecutorOptions {
                concurrency: args.concurrency,
                task_timeout: timeout,
                max_output_bytes: args.max_output_bytes,
                context: variant.context(),
                dispatch_gate: gate.clone(),
                ..ExecutorOptions::default()
            };
            let (store, sqlite): (Arc<dyn ExecutionStore>, _) = if args.no_store {
                (Arc::new(MemoryStore::new()), None)
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
                (Arc::clone(&store) as Arc<dyn ExecutionStore>, Some(store))
            };
            let executor = Executor::new(plan.clone(), Arc::clone(&engine), store, options)
                .map_err(|e| CliError::usage(format!("{}: {e}", args.plan.display())))?;
            planned.push(Planned {
                variant: v,
                executor: Arc::new(executor),
                store: sqlite,
            });
        }
    }

    let (outcomes, signal) = run_all(planned.iter().map(|p| Arc::clone(&p.executor)))?;

    // Each stored run is closed (finished or interrupted) whatever became
    // of the others; the first failure is reported after.
    let mut failure = None;
    let mut interrupted = false;
    let mut reports = Vec::with_capacity(planned.len());
    for (p, (outcome, wall)) in planned.iter().zip(outcomes) {
        match outcome {
            Ok(report) => {
                if let Some(store) = &p.store {
                    let end = if report.interrupted {
                        SessionEnd::Interrupted
                    } else {
                        SessionEnd::Finished
                    };
                    if let Err(e) = store.finish(end) {
                        failure.get_or_insert(runs::store_error(e));
                    }
                }
                interrupted |= report.interrupted;
                reports.push((p, report, wall));
            }
            Err(e) => {
                if let Some(store) = &p.store {
                    // The run stopped on a store error; closing it may
                    // fail the same way, and the first error is the one
                    // reported.
                    let _ = store.finish(SessionEnd::Interrupted);
                }
                failure.get_or_insert(match e {
                    ExecError::Graph(e) => CliError::usage(e),
                    store @ ExecError::Store { .. } => CliError::with(Exit::Store, store),
                });
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if interrupted || signal.is_some() {
        let by = signal.map_or_else(String::new, |s| format!(" by {}", s.name()));
        eprintln!("eval interrupted{by}; the runs so far are stored");
        return Ok(signal.map_or(Exit::Interrupted, StopSignal::exit));
    }

    // Per variant: its totals and (passed, total) per task.
    let mut rows: Vec<(VariantJson, Vec<(u64, u64)>)> = variants
        .iter()
        .map(|variant| {
            let v = VariantJson {
                name: variant.context().as_str(),
                runs: 0,
                checks_passed: 0,
                checks_total: 0,
                pass_rate: 0.0,
                tasks_passing: 0,
                tasks_checked: 0,
                prompt_tokens: 0,
                completion_tokens: 0,
                wall_ms: 0,
                task_ms: 0,
                run_ids: Vec::new(),
            };
            (v, vec![(0u64, 0u64); plan.sub_tasks.len()])
        })
        .collect();
    for (p, report, wall) in &reports {
        let (v, per_task) = &mut rows[p.variant];
        if let Some(store) = &p.store {
            v.run_ids.push(store.run_id().to_string());
        }
        // The runs overlap: a variant's wall time is the eval's, up to
        // the end of its last run.
        v.wall_ms = v
            .wall_ms
            .max(u64::try_from(wall.as_millis()).unwrap_or(u64::MAX));
        v.runs += 1;
        tally(&plan, &counts, report, v, per_task);
    }
    for (v, _) in &mut rows {
        v.pass_rate = rate(v.checks_passed, v.checks_total);
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

/// Adds one run's checks, tokens, task time and passing tasks to its
/// variant.
fn tally(
    plan: &Plan,
    counts: &[usize],
    report: &RunReport,
    v: &mut VariantJson,
    per_task: &mut [(u64, u64)],
) {
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        let result = report.results.iter().find(|r| r.task_id == task.id);
        if let Some(u) = result.and_then(|r| r.metadata.tokens_used) {
            v.prompt_tokens = v.prompt_tokens.saturating_add(u.prompt_tokens);
            v.completion_tokens = v.completion_tokens.saturating_add(u.completion_tokens);
        }
        if let Some(ms) = result.and_then(|r| r.metadata.execution_time_ms) {
            v.task_ms = v.task_ms.saturating_add(ms);
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

/// One variant run: which variant it belongs to, its executor, and its
/// durable store (none with `--no-store`).
struct Planned {
    variant: usize,
    executor: Arc<Executor>,
    store: Option<Arc<SqliteStore>>,
}

/// What one run came to, and when it ended (from the eval's start).
type Outcome = (Result<RunReport, ExecError>, Duration);

/// Runs every executor at once on one runtime, each with its own ready
/// queue; their shared [`ExecutorOptions::dispatch_gate`] keeps the engine
/// calls in flight within `--concurrency` in total. The first stop signal,
/// or the first run to fail on its store, cancels all of them (each stores
/// its in-flight tasks as interrupted and returns its report). Outcomes come back in the executors' order,
/// whatever order they finished in.
fn run_all(
    executors: impl Iterator<Item = Arc<Executor>>,
) -> Result<(Vec<Outcome>, Option<StopSignal>), CliError> {
    let runtime = crate::runtime::runtime()?;
    let mut signal = None;
    let outcomes = runtime.block_on(async {
        // Before any task starts (see `StopSignals`).
        let signals = StopSignals::install();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let started = Instant::now();
        let mut jobs = tokio::task::JoinSet::new();
        let mut outcomes: Vec<Option<Outcome>> = Vec::new();
        for (k, executor) in executors.enumerate() {
            outcomes.push(None);
            let mut stopped = stopped.clone();
            jobs.spawn(async move {
                let cancel = async move {
                    // Resolves once the stop is sent (or, never here, its
                    // sender is dropped).
                    let _ = stopped.wait_for(|&s| s).await;
                };
                let report = executor.run_with(cancel, |_| {}).await;
                (k, report, started.elapsed())
            });
        }
        let first = signals.first();
        tokio::pin!(first);
        loop {
            tokio::select! {
                s = &mut first, if signal.is_none() => {
                    signal = Some(s);
                    // Every run stops; a run that has ended ignores it.
                    let _ = stop.send(true);
                }
                joined = jobs.join_next() => match joined {
                    None => break,
                    Some(Ok((k, report, ended))) => {
                        if report.is_err() {
                            // A run whose store failed ends the eval: the
                            // others stop rather than spend engine calls
                            // on a measurement that will not be reported.
                            let _ = stop.send(true);
                        }
                        if let Some(slot) = outcomes.get_mut(k) {
                            *slot = Some((report, ended));
                        }
                    }
                    Some(Err(e)) => {
                        return Err(CliError::with(
                            Exit::Store,
                            format!("an eval run stopped unexpectedly: {e}"),
                        ));
                    }
                },
            }
        }
        Ok(outcomes.into_iter().flatten().collect::<Vec<_>>())
    })?;
    Ok((outcomes, signal))
}
