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
//! Every task's engine call is bounded in time (`--task-timeout`, default
//! one hour, `0` = none) and in output (`--max-output-bytes`, default 64
//! MiB); both defaults are ctx-deps' and hold for every engine.
//!
//! Exit codes: 0 every task completed, 1 a task failed or was skipped,
//! 2 usage or validation error (a `--resume` run that does not exist;
//! nothing was executed), 4 the store failed (locked by another process,
//! corrupt, newer schema), 5 the run is stored and summarised but the
//! `--out` files could not be written, 129 / 130 / 143 stopped by SIGHUP /
//! Ctrl-C (SIGINT) / SIGTERM. A stop signal is handled like Ctrl-C: the
//! commands' process groups are killed, requests aborted, the run stored
//! as interrupted, the summary printed and `--out` written.
//!
//! ## `--out DIR`
//!
//! ```text
//! DIR/prompts/{id}.md   the exact prompt sent (tasks that got one)
//! DIR/outputs/{id}.md   the output (completed tasks)
//! DIR/results.json      the same object as --format json
//! ```
//!
//! A task id becomes a file name by [`file_stem`], which is injective by
//! construction, so two tasks never share a file:
//!
//! * **plain**: an id of 1 to 120 bytes made only of ASCII letters, digits,
//!   `.`, `_` and `-`, not starting with `.`, is its own name;
//! * **escaped**: any other id has each byte outside that set (and a
//!   leading `.`) written as `%XX` (upper-case hex), so `a b*` is
//!   `a%20b%2A` and `.hidden` is `%2Ehidden`. Percent-encoding is
//!   reversible, and an escaped name always holds a `%`, which no plain
//!   name does;
//! * **hashed**: when the escaped name would be longer than 120 bytes (or
//!   empty), it is cut after 56 bytes (at a whole `%XX`) and followed by
//!   `~` and the id's full SHA-256 in hex. Only hashed names hold a `~`
//!   (an id's own `~` is escaped as `%7E`), and the hash is not truncated.
//!
//! No name contains a path separator or starts with `.`, so no id can name
//! a path outside `DIR`. (On a case-insensitive file system ids differing
//! only in case, `A` and `a`, still share a file; the name rule cannot see
//! the file system.)

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use ctx_cost::Usd;
use ctx_deps::{
    ExecError, ExecutionStore, Executor, ExecutorOptions, InferenceEngine, MemoryStore,
    ProgressEvent, RunReport, Schedule, SummaryTotals,
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
    /// With --resume it may be left out: the run's stored plan is resumed.
    #[arg(value_name = "PLAN", required_unless_present = "resume")]
    pub plan: Option<PathBuf>,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Most tasks in flight at once; 0 means unlimited.
    #[arg(long, value_name = "N", default_value_t = ctx_deps::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,

    /// Stop a task's engine call after this many seconds (fractions
    /// allowed; retries included): the command's process group is killed
    /// or the request aborted, and the task fails. 0 means no limit.
    #[arg(long, value_name = "SECS", default_value_t = ctx_deps::DEFAULT_TASK_TIMEOUT.as_secs_f64())]
    pub task_timeout: f64,

    /// Most bytes one task's output may have: past it the engine stops
    /// reading (the command is killed, the stream dropped) and the task
    /// fails.
    #[arg(long, value_name = "BYTES", default_value_t = ctx_deps::DEFAULT_MAX_OUTPUT_BYTES)]
    pub max_output_bytes: usize,

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

    /// How many times in all a task with checks is tried, retries with
    /// feedback included (overrides config.max_check_attempts; at least 1).
    #[arg(long, value_name = "N")]
    pub max_check_attempts: Option<u32>,

    /// Tokenizer for every task (overrides config.tokenizer): cl100k_base,
    /// o200k_base, o200k_harmony, p50k_base, r50k_base, estimate.
    #[arg(long, value_name = "T")]
    pub tokenizer: Option<String>,

    /// How long dependency outputs are shortened, for every task
    /// (overrides config.dependency.summarize_strategy and the tasks' own):
    /// `llm` asks the engine for a summary when a task completes.
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub summarize_strategy: Option<StrategyArg>,

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
    /// completed before are reused, the others run. Without PLAN the run's
    /// stored plan is resumed; with PLAN, every task whose prompt, model or
    /// params changed runs again, with its dependents. Give the engine
    /// flags again.
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

    /// A budget in US dollars the run never exceeds: each task reserves
    /// its high end (as `ctx plan cost` prints it) before it starts, and a
    /// task that can never fit is skipped with reason `budget`. Every task
    /// needs max_tokens (params or --max-tokens) and a known price. A
    /// resumed run's budget counts what earlier sessions spent.
    #[arg(long, value_name = "USD", allow_hyphen_values = true)]
    pub max_cost: Option<String>,

    #[command(flatten)]
    pub prices: super::prices::PriceArgs,

    /// The store: `sqlite` (run directories under --root, the default) or
    /// a shared PostgreSQL store, postgres://USER:PASSWORD@HOST/DB, where
    /// the run is registered for `ctx worker`s and worked on here too.
    /// Default: $CTX_STORE.
    #[arg(long, value_name = "URL", conflicts_with = "no_store")]
    pub store: Option<String>,

    /// With a postgres:// --store: only register the run and follow its
    /// progress until workers finish it; run nothing here.
    #[arg(long)]
    pub no_local: bool,
}

pub use crate::format::Format;

/// `--summarize-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    /// First half of max_output_length, then `...`.
    Truncate,
    /// Headings with the first paragraph under each.
    #[value(name = "extract_key_sections", alias = "extract-key-sections")]
    ExtractKeySections,
    /// Never shortened (max_prompt_tokens still applies).
    None,
    /// A summary written by the engine (config.dependency.summary_*).
    Llm,
}

impl From<StrategyArg> for ctx_model::SummarizeStrategy {
    fn from(a: StrategyArg) -> Self {
        match a {
            StrategyArg::Truncate => ctx_model::SummarizeStrategy::Truncate,
            StrategyArg::ExtractKeySections => ctx_model::SummarizeStrategy::ExtractKeySections,
            StrategyArg::None => ctx_model::SummarizeStrategy::None,
            StrategyArg::Llm => ctx_model::SummarizeStrategy::Llm,
        }
    }
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
    let root = RunRoot::new(
        args.root
            .clone()
            .unwrap_or_else(|| PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT)),
    );
    let shared = if args.no_store {
        None
    } else {
        super::worker::shared_store_url(args.store.as_deref())?
    };
    let (mut plan, plan_path, plan_source) = match (&args.plan, &args.resume) {
        (Some(path), _) => (
            super::plan_check::load_valid_plan(path)?,
            path.clone(),
            path.to_str().map(str::to_string),
        ),
        (None, Some(run)) if shared.is_some() => {
            super::worker::shared_plan(shared.as_deref().unwrap_or_default(), run)?
        }
        (None, Some(run)) => stored_plan(&root, run)?,
        (None, None) => return Err(CliError::usage("a PLAN is needed unless --resume is given")),
    };
    override_limits(&mut plan, args.max_prompt_tokens, args.max_check_attempts)?;
    if let Some(t) = &args.tokenizer {
        let tokenizer: Tokenizer = t
            .parse()
            .map_err(|e| CliError::usage(format!("--tokenizer: {e}")))?;
        plan.config.tokenizer = Some(tokenizer.as_str().to_string());
    }
    if let Some(strategy) = args.summarize_strategy {
        plan.config.dependency.summarize_strategy = strategy.into();
        for t in &mut plan.sub_tasks {
            t.dependency.summarize_strategy = None;
        }
    }
    let task_timeout = task_timeout(args.task_timeout)?;
    check_max_output_bytes(args.max_output_bytes)?;
    let max_cost = match &args.max_cost {
        Some(text) => {
            Some(ctx_cost::parse_max_cost(text).map_err(|e| CliError::usage(e.to_string()))?)
        }
        None => None,
    };
    if args.engine.kind() == engines::EngineKind::Command
        && args.engine.openai.max_tokens.is_some()
        && max_cost.is_none()
    {
        return Err(CliError::usage(
            "--max-tokens is used by the command engine only with --max-cost (ctx cuts each output there)",
        ));
    }
    if args.engine.openai.max_tokens == Some(0) {
        return Err(CliError::usage("--max-tokens must be at least 1"));
    }
    let engine = engines::build(&args.engine)?;
    refuse_unjudgeable(&plan, engine.as_ref(), &plan_path)?;
    let label = engines::label(&args.engine);
    let book = args.prices.book(Some(&plan.config.prices))?;
    let plan_source = plan_source.as_deref();

    if let (Some(run), true, None) = (&args.resume, args.dry_run, &shared) {
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
        task_timeout,
        max_output_bytes: args.max_output_bytes,
        // A dry run's outputs are placeholders, never long: summarise them
        // all, so its prompts show where each summary goes.
        summarize_every_output: engine.name() == ctx_deps::DryRunEngine::NAME,
        ..ExecutorOptions::default()
    };
    let output = Output {
        plan_path: &plan_path,
        out: args.out.as_deref(),
        format: args.format,
    };

    if let Some(url) = shared {
        super::worker::refuse_local_flags(args.dry_run, args.run_dir.as_ref())?;
        if max_cost.is_some() {
            // The ledger lives in one process; workers on other machines
            // could not share it.
            return Err(CliError::usage(
                "--max-cost is not supported with a shared --store: the budget ledger lives in one process",
            ));
        }
        // The cache is this machine's, as for a local run.
        let engine = if args.cache {
            super::worker::with_local_cache(engine, &args.engine, args.root.as_deref())?
        } else {
            engine
        };
        return super::worker::run_on_shared_store(
            &url,
            plan,
            plan_source,
            &label,
            engine,
            options,
            &output,
            args.no_local,
            args.resume.as_deref(),
        );
    }
    if args.no_local {
        return Err(CliError::usage("--no-local needs a postgres:// --store"));
    }

    if args.no_store {
        let cost = super::run_cost::options(&plan, &args.engine, book, max_cost, Usd::ZERO)?;
        let options = ExecutorOptions {
            cost: Some(cost),
            ..options
        };
        let run = execute(plan, engine, Arc::new(MemoryStore::new()), options, &output)?;
        return report_run(&run, &output);
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
    // Refuse an unbounded budget before a run directory is created.
    let cost = super::run_cost::options(&plan, &args.engine, book, max_cost, Usd::ZERO)?;
    let (store, resume) = root.start(at, &new).map_err(runs::store_error)?;
    // A resumed run's budget covers the whole run: what earlier sessions
    // spent counts (docs/cost.md).
    let cost = match &resume {
        Some(_) => ctx_deps::CostOptions {
            already_spent: runs::spent(store.view()).map_err(runs::store_error)?,
            ..cost
        },
        None => cost,
    };
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
        cost: Some(cost),
        reuse_completed: resume.is_some(),
        force_rerun: resume
            .as_ref()
            .map(ResumePlan::rerun_ids)
            .unwrap_or_default(),
        ..options
    };
    let executed = execute(
        plan,
        engine,
        Arc::clone(&store) as Arc<dyn ExecutionStore>,
        options,
        &output,
    )?;
    // Every result is committed already; a failure to record the session's
    // end only makes the run look crashed, so the summary still comes first.
    let finished = store.finish(if executed.report.interrupted {
        SessionEnd::Interrupted
    } else {
        SessionEnd::Finished
    });
    let exit = report_run(&executed, &output)?;
    if executed.report.all_completed() {
        eprintln!("run {} stored in {}", store.run_id(), store.dir().display());
    } else {
        // The run stores its plan: resuming needs no plan path.
        eprintln!(
            "run {} stored in {}; resume with: ctx run --resume {}",
            store.run_id(),
            store.dir().display(),
            store.run_id()
        );
    }
    finished.map_err(runs::store_error)?;
    Ok(exit)
}

/// A plan with `judge` checks needs an engine that answers prompts: the
/// dry-run engine cannot judge, so the run is refused before it starts,
/// naming each judge check by file, line, task and field.
pub fn refuse_unjudgeable(
    plan: &ctx_model::Plan,
    engine: &dyn InferenceEngine,
    plan_path: &Path,
) -> Result<(), CliError> {
    let judges = ctx_model::judge_checks(plan);
    if judges.is_empty() || engine.answers_prompts() {
        return Ok(());
    }
    let source = ctx_model::read_plan_source(plan_path).ok();
    let locator = source
        .as_ref()
        .map(|s| ctx_model::FieldLocator::new(&s.text))
        .unwrap_or_default();
    let origin = source
        .as_ref()
        .map_or("<stored plan>", |s| s.origin.as_str());
    let mut message = format!(
        "the {} engine cannot run `judge` checks (they need a model): use --engine command or --engine openai",
        engine.name()
    );
    for (task_id, field) in judges {
        let at = locator
            .locate(&field)
            .map(|(l, c)| format!("{origin}:{l}:{c}: "))
            .unwrap_or_else(|| format!("{origin}: "));
        let task = task_id.map(|t| format!("task {t:?}: ")).unwrap_or_default();
        message.push_str(&format!("\n{at}{task}{field}: a judge check"));
    }
    Err(CliError::usage(message))
}

/// `--max-prompt-tokens` and `--max-check-attempts` over the plan's
/// config: what `ctx run` and `ctx eval` both take.
pub(crate) fn override_limits(
    plan: &mut ctx_model::Plan,
    max_prompt_tokens: Option<usize>,
    max_check_attempts: Option<u32>,
) -> Result<(), CliError> {
    if let Some(n) = max_prompt_tokens {
        if n == 0 {
            return Err(CliError::usage("--max-prompt-tokens must be at least 1"));
        }
        plan.config.max_prompt_tokens = n;
    }
    if let Some(n) = max_check_attempts {
        if n == 0 {
            return Err(CliError::usage(
                "--max-check-attempts must be at least 1 (the first attempt counts)",
            ));
        }
        plan.config.max_check_attempts = n;
    }
    Ok(())
}

/// `--max-output-bytes N`: at least 1.
pub(crate) fn check_max_output_bytes(n: usize) -> Result<(), CliError> {
    if n == 0 {
        return Err(CliError::usage("--max-output-bytes must be at least 1"));
    }
    Ok(())
}

/// `--task-timeout SECS` as the executor's bound: `0` is none.
pub(crate) fn task_timeout(secs: f64) -> Result<Option<Duration>, CliError> {
    if secs == 0.0 {
        return Ok(None);
    }
    if !secs.is_finite() || secs < 0.0 {
        return Err(CliError::usage(format!(
            "--task-timeout {secs}: must be a positive number of seconds, or 0 for none"
        )));
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|e| CliError::usage(format!("--task-timeout {secs}: {e}")))
}

/// `--resume RUN` without a PLAN: the plan the run stored at its last
/// session, its path as then given (for messages and the next session's
/// record).
///
/// The store writes plans with secret-looking `params` keys redacted; a
/// plan holding such a key cannot be resumed from the store (the task
/// would be sent `[redacted]`), so the plan file must be given again.
fn stored_plan(
    root: &RunRoot,
    run: &str,
) -> Result<(ctx_model::Plan, PathBuf, Option<String>), CliError> {
    let view = root.open(run).map_err(runs::store_error)?;
    let plan = view.plan().map_err(runs::store_error)?;
    let source = view
        .sessions()
        .map_err(runs::store_error)?
        .last()
        .and_then(|s| s.plan_source.clone());
    let secrets = redacted_params(&plan);
    if !secrets.is_empty() {
        return Err(CliError::usage(format!(
            "run {}: the stored plan has redacted secrets ({}); give the plan file: ctx run PLAN --resume {run}",
            view.run_id(),
            secrets.join(", ")
        )));
    }
    let shown = PathBuf::from(format!(
        "{} (the plan stored in run {})",
        source.as_deref().unwrap_or("<plan>"),
        view.run_id()
    ));
    Ok((plan, shown, source))
}

/// `task.params.KEY` for every secret-looking key in the tasks' params,
/// at any depth (what the store redacts).
fn redacted_params(plan: &ctx_model::Plan) -> Vec<String> {
    fn walk(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, val) in map {
                    let here = format!("{path}.{k}");
                    if ctx_store_sqlite::is_secret_key(k) {
                        out.push(here);
                    } else {
                        walk(val, &here, out);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|x| walk(x, path, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for task in &plan.sub_tasks {
        for (k, v) in &task.tool_or_prompt.params.extra {
            let here = format!("{}.params.{k}", task.id);
            if ctx_store_sqlite::is_secret_key(k) {
                out.push(here);
            } else {
                walk(v, &here, &mut out);
            }
        }
    }
    out
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

/// A signal that stops a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (cron, systemd, Kubernetes, CI runners, `timeout`).
    Terminate,
    /// SIGHUP (the terminal went away).
    Hangup,
}

impl StopSignal {
    /// The signal's name.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }

    /// The conventional exit code: 128 + the signal's number.
    pub fn exit(self) -> Exit {
        match self {
            StopSignal::Interrupt => Exit::Interrupted,
            StopSignal::Terminate => Exit::Terminated,
            StopSignal::Hangup => Exit::Hangup,
        }
    }
}

/// The handlers of SIGINT, SIGTERM and SIGHUP, installed before the first
/// task is dispatched: from then on none of them can end ctx before its
/// children (the default action would, leaving them orphaned). Once
/// installed, tokio keeps them for the process's life, so a second signal
/// during the clean-up does not kill ctx half-way either. A signal whose
/// handler cannot be installed is simply not waited for.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Installs the handlers; must run inside the runtime.
    pub(crate) fn install() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
                hangup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// Resolves with the first of the signals to arrive.
    pub(crate) async fn first(mut self) -> StopSignal {
        #[cfg(unix)]
        {
            async fn arrival(s: &mut Option<tokio::signal::unix::Signal>) {
                let arrived = match s {
                    Some(s) => s.recv().await.is_some(),
                    None => false,
                };
                if !arrived {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = arrival(&mut self.interrupt) => StopSignal::Interrupt,
                () = arrival(&mut self.terminate) => StopSignal::Terminate,
                () = arrival(&mut self.hangup) => StopSignal::Hangup,
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            StopSignal::Interrupt
        }
    }
}

/// What [`execute`] returns: the executor's report and the signal that
/// stopped the run, if one did.
pub struct Executed {
    /// Every task's final result.
    pub report: RunReport,
    /// The signal that interrupted the run.
    pub signal: Option<StopSignal>,
}

/// Runs a validated plan against `store`: progress bar and stop signals
/// included. The store may be in memory (`--no-store`) or durable (then
/// with `ExecutorOptions::reuse_completed` for `--resume`); [`report_run`]
/// prints what came out.
pub fn execute(
    plan: ctx_model::Plan,
    engine: Arc<dyn InferenceEngine>,
    store: Arc<dyn ExecutionStore>,
    options: ExecutorOptions,
    output: &Output<'_>,
) -> Result<Executed, CliError> {
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
    let mut signal = None;
    let report = runtime.block_on(async {
        // Before any task starts (see `StopSignals`).
        let signals = StopSignals::install();
        let cancel = async {
            signal = Some(signals.first().await);
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
    let report = report.map_err(|e| match e {
        ExecError::Graph(e) => CliError::usage(e),
        store @ ExecError::Store { .. } => CliError::with(Exit::Store, store),
    })?;
    Ok(Executed { report, signal })
}

/// Reports a run: the summary on stdout, then `--out`, then the exit code.
///
/// The tasks have run (and a durable run is stored) by now, so nothing
/// here is a usage error: the summary is printed first, and a failure to
/// write `--out` is reported and exits [`Exit::OutWrite`] (5), unless a
/// signal stopped the run, whose code wins.
pub fn report_run(executed: &Executed, output: &Output<'_>) -> CliResult {
    let report = &executed.report;
    let json = RunJson::of(report);
    match output.format {
        Format::Json => {
            crate::io::print_stdout(&crate::io::json_text(&json)?)?;
        }
        Format::Text => crate::io::print_stdout(&summary_table(report))?,
    }
    let written = match output.out {
        Some(dir) => write_out_dir(dir, report, &json),
        None => Ok(()),
    };
    if let Err(e) = &written {
        eprintln!("error: --out: {}", e.message);
    }
    if report.interrupted {
        let by = executed
            .signal
            .map_or_else(String::new, |s| format!(" by {}", s.name()));
        eprintln!(
            "interrupted{by}: {} of {} completed",
            report.count(TaskStatus::Completed),
            tasks(report.results.len())
        );
        return Ok(executed.signal.map_or(Exit::Interrupted, StopSignal::exit));
    }
    if written.is_err() {
        return Ok(Exit::OutWrite);
    }
    Ok(if report.all_completed() {
        Exit::Ok
    } else {
        Exit::Findings
    })
}

/// `1 task`, `4 tasks`.
pub fn tasks(n: usize) -> String {
    if n == 1 {
        "1 task".to_string()
    } else {
        format!("{n} tasks")
    }
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

/// The `--format json` object (also `DIR/results.json`). Structs rather
/// than a `serde_json::Map` so keys keep this documented order; `ctx runs
/// export` prints the same tasks from a store, byte-identical but for the
/// `started_at` and `ended_at` it adds after each task's keys.
#[derive(serde::Serialize)]
pub(crate) struct RunJson<'a> {
    /// Ids of the tasks started, in start order.
    pub order: Vec<&'a str>,
    /// Every task of the plan, in plan order.
    pub tasks: Vec<TaskJson<'a>>,
    /// What the run has spent in US dollars, earlier sessions of a resumed
    /// run included (the sum of the known `cost_usd`).
    pub spent_usd: Option<Usd>,
    /// `--max-cost`, when given (absent otherwise, so that `ctx runs
    /// export` of the run, which does not know the budget, matches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<Usd>,
    /// With a budget: the high ends of the tasks it skipped, what the rest
    /// of the run may need.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needed_usd: Option<Usd>,
    /// The `summarize_strategy: llm` calls, when any were made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summaries: Option<SummariesJson>,
}

/// The totals of a run's summary calls in [`RunJson`].
#[derive(serde::Serialize)]
pub(crate) struct SummariesJson {
    calls: u64,
    cached: u64,
    fallbacks: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    time_ms: u64,
}

impl SummariesJson {
    /// The totals, or `None` when no summary call was made.
    pub(crate) fn of(t: SummaryTotals) -> Option<Self> {
        (t.calls > 0).then_some(SummariesJson {
            calls: t.calls,
            cached: t.cached,
            fallbacks: t.fallbacks,
            prompt_tokens: t.prompt_tokens,
            completion_tokens: t.completion_tokens,
            time_ms: t.time_ms,
        })
    }
}

/// One task of [`RunJson`].
#[derive(serde::Serialize)]
pub(crate) struct TaskJson<'a> {
    task_id: &'a str,
    status: &'static str,
    output: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    prompt: Option<&'a str>,
    /// The final attempt's check results (`kind`, `passed`, `message`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    checks: &'a [ctx_checks::CheckResult],
    /// How many attempts the checks took (0, left out, without checks).
    #[serde(skip_serializing_if = "is_zero")]
    check_attempts: usize,
    metadata: &'a ResultMetadata,
    /// `metadata.cost_usd`, repeated at the top for tools that read only
    /// the top level; null when unknown.
    cost_usd: Option<Usd>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl<'a> TaskJson<'a> {
    /// A result as JSON.
    pub(crate) fn of(r: &'a TaskExecutionResult) -> Self {
        TaskJson {
            task_id: &r.task_id,
            status: r.status.as_str(),
            output: &r.output,
            summary: r.summary.as_deref(),
            error: r.error.as_deref(),
            prompt: r.prompt.as_deref(),
            checks: &r.metadata.checks,
            check_attempts: r.metadata.check_attempts.len(),
            metadata: &r.metadata,
            cost_usd: r.metadata.cost_usd,
        }
    }
}

impl<'a> RunJson<'a> {
    fn of(report: &'a RunReport) -> Self {
        RunJson {
            order: report.order.iter().map(String::as_str).collect(),
            tasks: report.results.iter().map(TaskJson::of).collect(),
            spent_usd: report.cost.map(|c| c.total()),
            budget_usd: report.cost.and_then(|c| c.budget),
            needed_usd: report.cost.and_then(|c| c.budget.map(|_| c.needed)),
            summaries: SummariesJson::of(SummaryTotals::of(&report.results)),
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
    let show_cost = shows_cost(report);
    let rows: Vec<[String; 5]> = report
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
                } else if summary_fell_back(r) {
                    format!("{} (summary fell back)", r.status)
                } else {
                    r.status.to_string()
                },
                r.metadata
                    .prompt_tokens
                    .map_or_else(|| "-".to_string(), |t| t.to_string()),
                r.metadata
                    .execution_time_ms
                    .map_or_else(|| "-".to_string(), |ms| format!("{ms} ms")),
                r.metadata
                    .cost_usd
                    .map_or_else(|| "-".to_string(), ctx_deps::dollars),
            ]
        })
        .collect();
    let header = ["TASK", "STATUS", "PROMPT TOKENS", "TIME", "COST"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: [&str; 5], out: &mut String| {
        let mut text = format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
        if show_cost {
            text.push_str(&format!("  {:>w4$}", cells[4], w4 = widths[4]));
        }
        out.push_str(&text);
        out.push('\n');
    };
    line(header, &mut out);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3], &row[4]], &mut out);
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
    let fell_back: Vec<&TaskExecutionResult> = report
        .results
        .iter()
        .filter(|r| summary_fell_back(r))
        .collect();
    if !fell_back.is_empty() {
        out.push('\n');
        for r in fell_back {
            let why = r
                .metadata
                .summary
                .iter()
                .flat_map(|s| &s.calls)
                .find_map(|c| c.error.as_deref())
                .unwrap_or("the call failed");
            let mut lines = why.lines();
            out.push_str(&format!(
                "summary of {} fell back to truncate: {}\n",
                printable(&r.task_id),
                lines.next().unwrap_or_default()
            ));
            for l in lines {
                out.push_str(&format!("    {l}\n"));
            }
        }
    }
    let totals = SummaryTotals::of(&report.results);
    if totals.calls > 0 {
        let mut notes = Vec::new();
        if totals.cached > 0 {
            notes.push(format!("{} cached", totals.cached));
        }
        if totals.fallbacks > 0 {
            notes.push(format!("{} fell back to truncate", totals.fallbacks));
        }
        // A command engine reports no usage: say nothing rather than 0.
        let tokens = if totals.prompt_tokens + totals.completion_tokens > 0 {
            format!(
                ", {} prompt + {} completion tokens",
                totals.prompt_tokens, totals.completion_tokens
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "\nsummaries: {} call{}{}{tokens}, {} ms\n",
            totals.calls,
            if totals.calls == 1 { "" } else { "s" },
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            },
            totals.time_ms
        ));
    }
    out.push_str(&format!(
        "\n{}: {} completed, {} failed, {} skipped{}\n",
        tasks(report.results.len()),
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
    if show_cost && let Some(c) = report.cost {
        out.push_str(&cost_line(&c));
    }
    out
}

/// Whether an `llm` summary of this task's output failed, so its
/// dependents got the `truncate` form.
fn summary_fell_back(r: &TaskExecutionResult) -> bool {
    r.metadata.summary.as_ref().is_some_and(|s| s.fallback())
}

/// Whether the summary shows costs: a budget was set or something cost
/// money (a dry run's zeros are left out).
fn shows_cost(report: &RunReport) -> bool {
    report
        .cost
        .is_some_and(|c| c.budget.is_some() || c.total() > Usd::ZERO)
}

/// `spent $0.0012 of the $0.01 budget; 3 tasks skipped by the budget need
/// up to $0.004 more`.
fn cost_line(c: &ctx_deps::CostSummary) -> String {
    use ctx_deps::dollars;
    let mut line = format!("spent {}", dollars(c.total()));
    if c.earlier > Usd::ZERO {
        line.push_str(&format!(
            " ({} in this session, {} before)",
            dollars(c.spent),
            dollars(c.earlier)
        ));
    }
    if let Some(budget) = c.budget {
        line.push_str(&format!(" of the {} budget", dollars(budget)));
        if c.needed > Usd::ZERO {
            line.push_str(&format!(
                "; the tasks skipped by the budget need up to {} more",
                dollars(c.needed)
            ));
        }
    }
    if c.unknown > 0 {
        line.push_str(&format!(
            "; {} of unknown cost (no price, or interrupted)",
            tasks(c.unknown)
        ));
    }
    line.push('\n');
    line
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

/// Writes every `--out` file. One file that cannot be written does not
/// stop the others (a directory in the way of one output leaves the rest
/// useful); the error names the first failure and how many others failed.
fn write_out_dir(dir: &Path, report: &RunReport, json: &RunJson<'_>) -> Result<(), CliError> {
    let mut files: Vec<(PathBuf, &[u8])> = Vec::new();
    for r in &report.results {
        let stem = file_stem(&r.task_id);
        if let Some(prompt) = &r.prompt {
            files.push((
                dir.join("prompts").join(format!("{stem}.md")),
                prompt.as_bytes(),
            ));
        }
        if r.status == TaskStatus::Completed {
            files.push((
                dir.join("outputs").join(format!("{stem}.md")),
                r.output.as_bytes(),
            ));
        }
    }
    let results = crate::io::json_text(json)?;
    files.push((dir.join("results.json"), results.as_bytes()));
    let mut failures = files
        .iter()
        .filter_map(|(path, bytes)| write_atomic(path, bytes).err());
    let Some(first) = failures.next() else {
        return Ok(());
    };
    let more = failures.count();
    Err(if more == 0 {
        first
    } else {
        CliError::usage(format!(
            "{} (and {more} more file{} not written)",
            first.message,
            if more == 1 { "" } else { "s" }
        ))
    })
}

/// The longest stem a plain or escaped name may have (bytes).
const MAX_STEM: usize = 120;
/// How much of the escaped id a hashed name keeps before `~` and the hash.
const HASHED_PREFIX: usize = 56;

/// Bytes an id may keep as they are in a file name.
fn plain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

/// The file name stem for a task id: plain, escaped or hashed, as the
/// module docs describe. Distinct ids always get distinct stems.
pub fn file_stem(id: &str) -> String {
    if !id.is_empty() && id.len() <= MAX_STEM && !id.starts_with('.') && id.bytes().all(plain_byte)
    {
        return id.to_string();
    }
    let mut escaped = String::with_capacity(id.len() * 3);
    for (i, b) in id.bytes().enumerate() {
        if plain_byte(b) && !(i == 0 && b == b'.') {
            escaped.push(char::from(b));
        } else {
            escaped.push_str(&format!("%{b:02X}"));
        }
    }
    if !escaped.is_empty() && escaped.len() <= MAX_STEM {
        return escaped;
    }
    // Cut at a whole `%XX`: every `%` in `escaped` starts one.
    let bytes = escaped.as_bytes();
    let mut cut = HASHED_PREFIX.min(bytes.len());
    if let Some(p) = bytes[cut.saturating_sub(2)..cut]
        .iter()
        .position(|&b| b == b'%')
    {
        cut = cut.saturating_sub(2) + p;
    }
    format!(
        "{}~{}",
        &escaped[..cut],
        ctx_store_sqlite::sha256_hex(id.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Undoes the escaping of an escaped (not hashed) stem.
    fn unescape(stem: &str) -> Vec<u8> {
        let b = stem.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                out.push(u8::from_str_radix(&stem[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    fn check_shape(id: &str, s: &str) {
        assert!(!s.is_empty(), "{id:?}");
        assert!(!s.starts_with('.'), "{id:?} -> {s}");
        assert!(s.len() <= MAX_STEM + 1, "{id:?} -> {s}");
        assert!(
            s.bytes().all(|b| plain_byte(b) || b == b'%' || b == b'~'),
            "{id:?} -> {s}"
        );
        if s.contains('~') {
            let (_, hash) = s.split_once('~').unwrap();
            assert_eq!(hash, ctx_store_sqlite::sha256_hex(id.as_bytes()));
        } else if s.contains('%') {
            assert_eq!(unescape(s), id.as_bytes(), "{s}");
        } else {
            assert_eq!(s, id);
        }
    }

    #[test]
    fn file_stems_stay_inside_the_directory() {
        assert_eq!(file_stem("1"), "1");
        assert_eq!(file_stem("css-v2.final"), "css-v2.final");
        assert_eq!(file_stem("a b*"), "a%20b%2A");
        assert_eq!(file_stem(".hidden"), "%2Ehidden");
        assert_eq!(file_stem("ü"), "%C3%BC");
        assert_eq!(file_stem("a%20b%2A"), "a%2520b%252A");
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
            "~",
            &"x".repeat(300),
            &"ü".repeat(100),
        ] {
            check_shape(id, &file_stem(id));
        }
    }

    #[test]
    fn the_collisions_of_the_old_rule_are_gone() {
        // Issue 8: both pairs shared one file under the truncated-hash rule.
        assert_ne!(file_stem("a b*"), file_stem("a_b_-aaf960a8"));
        assert_ne!(file_stem(".hidden"), file_stem("_hidden-cdcb6865"));
        // Every escaped or hashed name, used as an id, is its own name.
        for id in ["a b*", ".hidden", "", &"y".repeat(200)] {
            let s = file_stem(id);
            assert_ne!(file_stem(&s), s, "{id:?}");
        }
        // Long ids sharing a prefix differ by their full hash.
        let a = format!("{}a", "x".repeat(200));
        let b = format!("{}b", "x".repeat(200));
        assert_ne!(file_stem(&a), file_stem(&b));
        // A cut never splits a `%XX`.
        let s = file_stem(&"ü".repeat(60));
        let (prefix, _) = s.split_once('~').unwrap();
        assert_eq!(prefix.len() % 3, 0, "{s}");
    }

    fn id() -> impl Strategy<Value = String> {
        // A small alphabet of the characters each rule treats differently,
        // and lengths around the 120-byte limits, so near-misses are common.
        prop_oneof![
            "[a._%~ /ü-]{0,8}",
            "[a_%.-]{110,130}",
            "[aü ]{35,45}",
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn distinct_ids_get_distinct_file_names(ids in proptest::collection::vec(id(), 1..40)) {
            let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
            let stems: std::collections::BTreeSet<String> =
                unique.iter().map(|id| file_stem(id)).collect();
            prop_assert_eq!(stems.len(), unique.len());
        }

        #[test]
        fn an_id_spelled_like_another_ids_file_name_gets_another(id in id()) {
            let s = file_stem(&id);
            check_shape(&id, &s);
            // The old rule's collision: the escaped name, taken as an id.
            prop_assert_eq!(file_stem(&s) == s, s == id);
        }
    }
}
