//! `ctx run PLAN`: validate a plan, then execute it on an engine.
//!
//! Validation runs first and nothing executes on an invalid plan (exit 2).
//! Tasks run on the ready-queue executor of `ctx-deps`; every result is
//! committed to a durable SQLite store (`ctx-store-sqlite`) before any
//! dependent starts: a new run in `ROOT/{run-id}/` (`--root`, default
//! `.ctx/runs`) or `--run-dir DIR`, or the run named by `--resume RUN`
//! (completed tasks reused; `--dry-run` lists the decisions). `--cache`
//! answers identical requests from earlier runs under the root;
//! `--no-store` keeps the run in memory. The run id and directory go to
//! stderr; the summary (a table, or JSON with `--format json`) to stdout, a
//! progress bar to stderr when stderr is a terminal. docs/runs.md has the
//! rules.
//!
//! Exit codes: 0 every task completed, 1 a task failed or was skipped,
//! 2 usage or validation error (a `--resume` run that does not exist),
//! 4 the store failed (locked by another process, corrupt, newer schema),
//! 130 interrupted by Ctrl-C (the summary is still printed and `--out`
//! still written).
//!
//! ## `--out DIR`
//!
//! ```text
//! DIR/prompts/{id}.md   the exact prompt sent (tasks that got one)
//! DIR/outputs/{id}.md   the output (completed tasks)
//! DIR/results.json      the same object as --format json
//! ```
//!
//! A task id becomes a file name as it is when it uses only ASCII letters,
//! digits, `.`, `_` and `-`, does not start with `.`, and is at most 100
//! bytes. Any other id (`../x`, `a/b`, `ü`, an empty id) has every other
//! character replaced by `_`, a leading `.` too, and gets `-` plus 8 hex
//! digits of a hash of the id appended, so two ids never share a file and
//! no id can name a path outside `DIR`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use ctx_deps::{
    ExecError, ExecutionStore, Executor, ExecutorOptions, InferenceEngine, MemoryStore,
    ProgressEvent, RunReport, Schedule,
};
use ctx_model::{ResultMetadata, TaskExecutionResult, TaskStatus};
use ctx_tokens::Tokenizer;

use ctx_store_sqlite::{CachingEngine, NewRun, ResumePlan, RunRoot, SessionEnd, StartAt};

use super::runs;
use crate::engines::{self, EngineArgs};
use crate::exit::{CliError, CliResult, Exit};
use crate::io::write_atomic;

/// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON or YAML by extension; `-` reads JSON from stdin).
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Most tasks in flight at once; 0 means unlimited.
    #[arg(long, value_name = "N", default_value_t = ctx_deps::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,

    /// Write prompts/{id}.md, outputs/{id}.md and results.json under DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Summary format on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,

    /// Cap on each assembled prompt, in tokens (overrides
    /// config.max_prompt_tokens).
    #[arg(long, value_name = "N")]
    pub max_prompt_tokens: Option<usize>,

    /// Tokenizer for every task (overrides config.tokenizer): cl100k_base,
    /// o200k_base, o200k_harmony, p50k_base, r50k_base, estimate.
    #[arg(long, value_name = "T")]
    pub tokenizer: Option<String>,

    /// Scheduling policy; `levels` (batch by dependency level) exists only
    /// for the benchmark comparison.
    #[arg(long, value_enum, default_value = "ready", hide = true)]
    pub schedule: ScheduleArg,

    /// The store root: each run is recorded in ROOT/{run-id}/store.sqlite
    /// [default: .ctx/runs]; `--cache` keeps its index here too.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Record this run in DIR instead of ROOT/{run-id} (DIR must not hold
    /// a run already).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub run_dir: Option<PathBuf>,

    /// Resume RUN (a run id under the root, or a run directory): tasks
    /// completed before are reused, the others run, and so does every task
    /// whose prompt, model or params changed, with its dependents. Give the
    /// engine flags again.
    #[arg(long, value_name = "RUN")]
    pub resume: Option<String>,

    /// With --resume: list what would be reused and what would run, and
    /// why; execute nothing. (`--engine dry-run` is the run without a
    /// model.)
    #[arg(long, requires = "resume")]
    pub dry_run: bool,

    /// Reuse outputs of identical requests (engine, model, params, final
    /// prompt) from earlier runs under the same root. Off by default: a
    /// sampled output is one draw, not a function of the prompt.
    #[arg(long)]
    pub cache: bool,

    /// Keep the run in memory only: no run directory, no resume.
    #[arg(long, conflicts_with_all = ["root", "run_dir", "resume", "cache"])]
    pub no_store: bool,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table: id, status, prompt tokens, time.
    Text,
    /// One JSON object: `{"order": [...], "tasks": [...]}`.
    Json,
}

/// `--schedule` (hidden).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScheduleArg {
    /// Ready queue, longest remaining path first.
    Ready,
    /// Level batches.
    Levels,
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let mut plan = super::plan_check::load_valid_plan(&args.plan)?;
    if let Some(n) = args.max_prompt_tokens {
        if n == 0 {
            return Err(CliError::usage("--max-prompt-tokens must be at least 1"));
        }
        plan.config.max_prompt_tokens = n;
    }
    if let Some(t) = &args.tokenizer {
        let tokenizer: Tokenizer = t
            .parse()
            .map_err(|e| CliError::usage(format!("--tokenizer: {e}")))?;
        plan.config.tokenizer = Some(tokenizer.as_str().to_string());
    }
    let engine = engines::build(&args.engine)?;
    let label = engines::label(&args.engine);
    let root = RunRoot::new(
        args.root
            .clone()
            .unwrap_or_else(|| PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT)),
    );
    let plan_source = args.plan.to_str();

    if let (Some(run), true) = (&args.resume, args.dry_run) {
        let view = root.open(run).map_err(runs::store_error)?;
        let resume = view.resume_plan(&plan, &label).map_err(runs::store_error)?;
        crate::io::print_stdout(&runs::resume_listing(view.run_id(), &resume))?;
        return Ok(Exit::Ok);
    }

    if let Some(dir) = &args.out {
        for sub in ["prompts", "outputs"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d)
                .map_err(|e| CliError::usage(format!("--out: {}: {e}", d.display())))?;
        }
    }
    let options = ExecutorOptions {
        concurrency: args.concurrency,
        schedule: match args.schedule {
            ScheduleArg::Ready => Schedule::ReadyQueue,
            ScheduleArg::Levels => Schedule::Levels,
        },
        ..ExecutorOptions::default()
    };
    let output = Output {
        plan_path: &args.plan,
        out: args.out.as_deref(),
        format: args.format,
    };

    if args.no_store {
        let report = execute(plan, engine, Arc::new(MemoryStore::new()), options, &output)?;
        return report_run(&report, &output);
    }

    let new = NewRun {
        plan: &plan,
        engine: &label,
        plan_source,
    };
    let at = match (&args.resume, &args.run_dir) {
        (Some(run), _) => StartAt::Resume(run),
        (None, Some(dir)) => StartAt::NewRunIn(dir),
        (None, None) => StartAt::NewRun,
    };
    // The cache index first: a bad cache.sqlite must not leave behind a
    // started run.
    let cache = if args.cache {
        Some(Arc::new(root.cache().map_err(runs::store_error)?))
    } else {
        None
    };
    let (store, resume) = root.start(at, &new).map_err(runs::store_error)?;
    let store = Arc::new(store);
    match &resume {
        Some(r) => eprintln!(
            "resuming run {} in {}: {} reused, {} to run",
            store.run_id(),
            store.dir().display(),
            r.reuse.len(),
            r.rerun.len()
        ),
        None => eprintln!("run {} in {}", store.run_id(), store.dir().display()),
    }
    let engine: Arc<dyn InferenceEngine> = match cache {
        Some(cache) => Arc::new(CachingEngine::new(
            engine,
            cache,
            engines::cache_identity(&args.engine),
            Some(store.run_id().to_string()),
        )),
        None => engine,
    };
    let options = ExecutorOptions {
        reuse_completed: resume.is_some(),
        force_rerun: resume
            .as_ref()
            .map(ResumePlan::rerun_ids)
            .unwrap_or_default(),
        ..options
    };
    let report = execute(
        plan,
        engine,
        Arc::clone(&store) as Arc<dyn ExecutionStore>,
        options,
        &output,
    )?;
    // Every result is committed already; a failure to record the session's
    // end only makes the run look crashed, so the summary still comes first.
    let finished = store.finish(if report.interrupted {
        SessionEnd::Interrupted
    } else {
        SessionEnd::Finished
    });
    let exit = report_run(&report, &output)?;
    if report.all_completed() {
        eprintln!("run {} stored in {}", store.run_id(), store.dir().display());
    } else {
        eprintln!(
            "run {} stored in {}; resume with: ctx run {} --resume {}",
            store.run_id(),
            store.dir().display(),
            args.plan.display(),
            store.run_id()
        );
    }
    finished.map_err(runs::store_error)?;
    Ok(exit)
}

/// Where and how a run's results are reported.
pub struct Output<'a> {
    /// The plan's path, for messages.
    pub plan_path: &'a Path,
    /// `--out DIR` (already created).
    pub out: Option<&'a Path>,
    /// `--format`.
    pub format: Format,
}

/// Runs a validated plan against `store`: progress bar and Ctrl-C
/// included. The store may be in memory (`--no-store`) or durable (then
/// with `ExecutorOptions::reuse_completed` for `--resume`); [`report_run`]
/// prints what came out.
pub fn execute(
    plan: ctx_model::Plan,
    engine: Arc<dyn InferenceEngine>,
    store: Arc<dyn ExecutionStore>,
    options: ExecutorOptions,
    output: &Output<'_>,
) -> Result<RunReport, CliError> {
    let total = plan.sub_tasks.len();
    let executor = Executor::new(plan, engine, store, options)
        .map_err(|e| CliError::usage(format!("{}: {e}", output.plan_path.display())))?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::with(Exit::Store, format!("cannot start the async runtime: {e}")))?;
    let bar = progress_bar(total);
    if let Some(bar) = &bar {
        // Retry, pacing and streaming notices of the HTTP engine go to the
        // bar's message line instead of breaking it with raw lines.
        engines::openai::attach_progress_bar(bar);
    }
    let mut in_flight = 0usize;
    let report = runtime.block_on(async {
        let cancel = async {
            // If no handler can be installed, the run is simply not
            // cancellable.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        executor
            .run_with(cancel, |event| {
                if let Some(bar) = &bar {
                    update_bar(bar, &mut in_flight, event);
                }
            })
            .await
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    report.map_err(|e| match e {
        ExecError::Graph(e) => CliError::usage(e),
        store @ ExecError::Store { .. } => CliError::with(Exit::Store, store),
    })
}

/// Reports a run: `--out`, the summary on stdout, the exit code.
pub fn report_run(report: &RunReport, output: &Output<'_>) -> CliResult {
    let json = RunJson::of(report);
    if let Some(dir) = output.out {
        write_out_dir(dir, report, &json)?;
    }
    match output.format {
        Format::Json => {
            crate::io::print_stdout(&crate::io::json_text(&json)?)?;
        }
        Format::Text => crate::io::print_stdout(&summary_table(report))?,
    }
    if report.interrupted {
        eprintln!(
            "interrupted: {} of {} tasks completed",
            report.count(TaskStatus::Completed),
            report.results.len()
        );
        return Ok(Exit::Interrupted);
    }
    Ok(if report.all_completed() {
        Exit::Ok
    } else {
        Exit::Findings
    })
}

fn progress_bar(total: usize) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    Some(bar)
}

fn update_bar(bar: &indicatif::ProgressBar, in_flight: &mut usize, event: &ProgressEvent) {
    match event {
        ProgressEvent::Started { task_id } => {
            *in_flight += 1;
            bar.set_message(format!("{in_flight} running; started {task_id}"));
        }
        ProgressEvent::Reused { task_id } => {
            bar.inc(1);
            bar.set_message(format!("reused {task_id}"));
        }
        ProgressEvent::Finished {
            task_id, status, ..
        } => {
            bar.inc(1);
            // Skips are settled without ever starting.
            if *status != TaskStatus::Skipped {
                *in_flight = in_flight.saturating_sub(1);
            }
            if *status != TaskStatus::Completed {
                bar.println(format!("task {task_id}: {status}"));
            }
            bar.set_message(format!("{in_flight} running; {status} {task_id}"));
        }
    }
}

/// The `--format json` object (also `DIR/results.json`, and what `ctx runs
/// export` prints). Structs rather than a `serde_json::Map` so keys keep
/// this documented order; `ctx runs export` builds the same struct from a
/// store, so the two are byte-identical.
#[derive(serde::Serialize)]
pub(crate) struct RunJson<'a> {
    /// Ids of the tasks started, in start order.
    pub order: Vec<&'a str>,
    /// Every task of the plan, in plan order.
    pub tasks: Vec<TaskJson<'a>>,
}

/// One task of [`RunJson`].
#[derive(serde::Serialize)]
pub(crate) struct TaskJson<'a> {
    task_id: &'a str,
    status: &'static str,
    output: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    prompt: Option<&'a str>,
    metadata: &'a ResultMetadata,
}

impl<'a> TaskJson<'a> {
    /// A result as JSON.
    pub(crate) fn of(r: &'a TaskExecutionResult) -> Self {
        TaskJson {
            task_id: &r.task_id,
            status: r.status.as_str(),
            output: &r.output,
            error: r.error.as_deref(),
            prompt: r.prompt.as_deref(),
            metadata: &r.metadata,
        }
    }
}

impl<'a> RunJson<'a> {
    fn of(report: &'a RunReport) -> Self {
        RunJson {
            order: report.order.iter().map(String::as_str).collect(),
            tasks: report.results.iter().map(TaskJson::of).collect(),
        }
    }
}

fn summary_table(report: &RunReport) -> String {
    let reused: std::collections::HashSet<&str> =
        report.reused.iter().map(String::as_str).collect();
    let cached = report
        .results
        .iter()
        .filter(|r| {
            r.metadata.cached
                && r.status == TaskStatus::Completed
                && !reused.contains(r.task_id.as_str())
        })
        .count();
    let rows: Vec<[String; 4]> = report
        .results
        .iter()
        .map(|r| {
            [
                printable(&r.task_id),
                if reused.contains(r.task_id.as_str()) {
                    format!("{} (reused)", r.status)
                } else if r.metadata.cached && r.status == TaskStatus::Completed {
                    format!("{} (cached)", r.status)
                } else if cut_by_max_tokens(r) {
                    format!("{} (cut at max_tokens)", r.status)
                } else {
                    r.status.to_string()
                },
                r.metadata
                    .prompt_tokens
                    .map_or_else(|| "-".to_string(), |t| t.to_string()),
                r.metadata
                    .execution_time_ms
                    .map_or_else(|| "-".to_string(), |ms| format!("{ms} ms")),
            ]
        })
        .collect();
    let header = ["TASK", "STATUS", "PROMPT TOKENS", "TIME"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: [&str; 4], out: &mut String| {
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}\n",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        ));
    };
    line(header, &mut out);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3]], &mut out);
    }
    let problems: Vec<&TaskExecutionResult> = report
        .results
        .iter()
        .filter(|r| r.error.is_some())
        .collect();
    if !problems.is_empty() {
        out.push('\n');
        for r in problems {
            let err = r.error.as_deref().unwrap_or_default();
            let mut lines = err.lines();
            out.push_str(&format!(
                "{} {}: {}\n",
                r.status,
                printable(&r.task_id),
                lines.next().unwrap_or_default()
            ));
            for l in lines {
                out.push_str(&format!("    {l}\n"));
            }
        }
    }
    let cut: Vec<String> = report
        .results
        .iter()
        .filter(|r| cut_by_max_tokens(r))
        .map(|r| printable(&r.task_id))
        .collect();
    if !cut.is_empty() {
        out.push_str(&format!(
            "\nwarning: output cut short by max_tokens (finish_reason \"length\"): {}\n",
            cut.join(", ")
        ));
    }
    out.push_str(&format!(
        "\n{} tasks: {} completed, {} failed, {} skipped{}\n",
        report.results.len(),
        report.count(TaskStatus::Completed),
        report.count(TaskStatus::Failed),
        report.count(TaskStatus::Skipped),
        match (report.reused.len(), cached) {
            (0, 0) => String::new(),
            (r, 0) => format!(" ({r} reused)"),
            (0, c) => format!(" ({c} cached)"),
            (r, c) => format!(" ({r} reused, {c} cached)"),
        }
    ));
    out
}

/// Whether the engine stopped because it hit `max_tokens`: the output is
/// complete as far as ctx knows, but probably not as far as the user wants.
fn cut_by_max_tokens(r: &TaskExecutionResult) -> bool {
    r.status == TaskStatus::Completed && r.metadata.finish_reason.as_deref() == Some("length")
}

/// An id as shown in a table: control characters escaped.
fn printable(id: &str) -> String {
    if id.chars().any(char::is_control) {
        format!("{id:?}")
    } else {
        id.to_string()
    }
}

fn write_out_dir(dir: &Path, report: &RunReport, json: &RunJson<'_>) -> Result<(), CliError> {
    for r in &report.results {
        let stem = file_stem(&r.task_id);
        if let Some(prompt) = &r.prompt {
            write_atomic(
                &dir.join("prompts").join(format!("{stem}.md")),
                prompt.as_bytes(),
            )?;
        }
        if r.status == TaskStatus::Completed {
            write_atomic(
                &dir.join("outputs").join(format!("{stem}.md")),
                r.output.as_bytes(),
            )?;
        }
    }
    write_atomic(
        &dir.join("results.json"),
        crate::io::json_text(json)?.as_bytes(),
    )
}

/// The file name stem for a task id; see the module docs.
pub fn file_stem(id: &str) -> String {
    let safe = !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if safe {
        return id.to_string();
    }
    let mut stem: String = id
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.starts_with('.') {
        stem.replace_range(0..1, "_");
    }
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{stem}-{:08x}", h as u32)
}

#[cfg(test)]
mod tests {
    use super::file_stem;

    #[test]
    fn file_stems_stay_inside_the_directory() {
        assert_eq!(file_stem("1"), "1");
        assert_eq!(file_stem("css-v2.final"), "css-v2.final");
        for id in [
            "../x",
            "a/b",
            "..",
            ".",
            "",
            "/etc/passwd",
            "a\\b",
            "ü",
            "a b",
            &"x".repeat(300),
        ] {
            let s = file_stem(id);
            assert!(!s.contains('/') && !s.contains('\\'), "{id:?} -> {s}");
            assert!(!s.starts_with('.'), "{id:?} -> {s}");
            assert!(!s.is_empty());
            assert!(s.len() <= 100, "{id:?}");
        }
        assert_ne!(file_stem("a/b"), file_stem("a_b"));
        assert_ne!(file_stem("a/b"), file_stem("a\\b"));
        assert_eq!(file_stem("a/b"), file_stem("a/b"));
    }
}
