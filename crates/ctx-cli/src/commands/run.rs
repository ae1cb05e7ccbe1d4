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
//! `DIR/prompts/{id}.md`, `DIR/outputs/{id}.md` and `DIR/results.json`,
//! with file names by [`ctx_run::out_dir::file_stem`] (injective by
//! construction; the layout and the rule are documented there).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ctx_deps::{ExecError, ExecutorOptions, InferenceEngine, ProgressEvent, RunReport, Schedule};
use ctx_model::TaskStatus;
use ctx_run::{RunSession, RunSettings, RunStore, Start};
use ctx_store_sqlite::RunRoot;
use ctx_tokens::Tokenizer;

use super::runs;
use crate::engines::{self, EngineArgs};
use crate::exit::{CliError, CliResult, Exit};
use crate::heading;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON or YAML by extension; `-` reads JSON from stdin).
    /// With --resume it may be left out: the run's stored plan is resumed.
    #[arg(value_name = "PLAN", required_unless_present = "resume")]
    pub plan: Option<PathBuf>,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Most tasks in flight at once; 0 means unlimited.
    #[arg(long, value_name = "N", default_value_t = ctx_deps::DEFAULT_CONCURRENCY, help_heading = heading::BOUNDS)]
    pub concurrency: usize,

    #[command(flatten)]
    pub bounds: TaskBoundArgs,

    /// Write prompts/{id}.md, outputs/{id}.md and results.json under DIR
    /// (created if missing).
    #[arg(short = 'o', long, value_name = "DIR", help_heading = heading::OUTPUT)]
    pub out: Option<PathBuf>,

    /// Summary format on stdout.
    #[arg(long, value_enum, default_value = "text", help_heading = heading::OUTPUT)]
    pub format: Format,

    #[command(flatten)]
    pub limits: PlanLimitArgs,

    #[command(flatten)]
    pub inputs: super::plan_inputs::RunInputArgs,

    /// Tokenizer for every task (overrides config.tokenizer).
    #[arg(long, value_name = "T", value_parser = crate::tokenizer_flag::parser(), ignore_case = true, help_heading = heading::PROMPTS)]
    pub tokenizer: Option<Tokenizer>,

    /// How long dependency outputs are shortened, for every task
    /// (overrides config.dependency.summarize_strategy and the tasks' own):
    /// `llm` asks the engine for a summary when a task completes.
    #[arg(long, value_enum, value_name = "STRATEGY", help_heading = heading::PROMPTS)]
    pub summarize_strategy: Option<StrategyArg>,

    /// Scheduling policy; `levels` (batch by dependency level) exists only
    /// for the benchmark comparison.
    #[arg(long, value_enum, default_value = "ready", hide = true)]
    pub schedule: ScheduleArg,

    /// The store root: each run is recorded in ROOT/{run-id}/store.sqlite
    /// [default: .ctx/runs]; `--cache` keeps its index here too.
    #[arg(long, value_name = "DIR", help_heading = heading::STORE)]
    pub root: Option<PathBuf>,

    /// Record this run in DIR instead of ROOT/{run-id} (DIR must not hold
    /// a run already).
    #[arg(long, value_name = "DIR", conflicts_with = "resume", help_heading = heading::STORE)]
    pub run_dir: Option<PathBuf>,

    /// Resume RUN (a run id under the root, or a run directory): tasks
    /// completed before are reused, the others run. Without PLAN the run's
    /// stored plan is resumed; with PLAN, every task whose prompt, model or
    /// params changed runs again, with its dependents. Give the engine
    /// flags again.
    #[arg(long, value_name = "RUN", help_heading = heading::STORE)]
    pub resume: Option<String>,

    /// With --resume: list what would be reused and what would run, and
    /// why; execute nothing. (`--engine dry-run` is the run without a
    /// model.)
    #[arg(long, requires = "resume", help_heading = heading::STORE)]
    pub dry_run: bool,

    /// Reuse outputs of identical requests (engine, model, params, final
    /// prompt) from earlier runs under the same root. Off by default: a
    /// sampled output is one draw, not a function of the prompt.
    #[arg(long, help_heading = heading::CACHE)]
    pub cache: bool,

    /// Keep the run in memory only: no run directory, no resume.
    #[arg(long, conflicts_with_all = ["root", "run_dir", "resume", "cache"], help_heading = heading::STORE)]
    pub no_store: bool,

    /// A budget in US dollars the run never exceeds: each task reserves
    /// its high end (as `ctx plan cost` prints it) before it starts, and a
    /// task that can never fit is skipped with reason `budget`. Every task
    /// needs max_tokens (params or --max-tokens) and a known price. A
    /// resumed run's budget counts what earlier sessions spent.
    #[arg(long, value_name = "USD", allow_hyphen_values = true, help_heading = heading::COST)]
    pub max_cost: Option<String>,

    #[command(flatten, next_help_heading = heading::COST)]
    pub prices: super::prices::PriceArgs,

    /// The store: `sqlite` (run directories under --root, the default) or
    /// a shared PostgreSQL store, postgres://USER:PASSWORD@HOST/DB, where
    /// the run is registered for `ctx worker`s and worked on here too.
    /// Default: $CTX_STORE.
    #[arg(long, value_name = "URL", conflicts_with = "no_store", help_heading = heading::SHARED)]
    pub store: Option<String>,

    /// With a postgres:// --store: only register the run and follow its
    /// progress until workers finish it; run nothing here.
    #[arg(long, help_heading = heading::SHARED)]
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
            super::plan_check::load_valid_plan_given(
                path,
                args.inputs.plan.content_root.is_some(),
            )?,
            path.clone(),
            path.to_str().map(str::to_string),
        ),
        (None, Some(run)) if shared.is_some() => {
            super::worker::shared_plan(shared.as_deref().unwrap_or_default(), run)?
        }
        (None, Some(run)) => stored_plan(&root, run)?,
        (None, None) => return Err(CliError::usage("a PLAN is needed unless --resume is given")),
    };
    ctx_run::settings::PlanOverrides {
        max_prompt_tokens: args.limits.max_prompt_tokens,
        max_check_attempts: args.limits.max_check_attempts,
        tokenizer: args.tokenizer,
        summarize_strategy: args.summarize_strategy.map(Into::into),
    }
    .apply(&mut plan)
    .map_err(setting_error)?;
    let plan = args.inputs.prepare(
        plan,
        args.plan.as_deref(),
        &super::plan_inputs::RunKind {
            dry_run_engine: args.engine.kind() == engines::EngineKind::DryRun,
            shared: shared.is_some(),
            durable: !args.no_store,
        },
    )?;
    let bounds = args.bounds.resolve()?;
    let max_cost = super::run_cost::max_cost(args.max_cost.as_deref(), &args.engine)?;
    let engine = engines::build(&args.engine)?;
    refuse_unjudgeable(&plan, engine.as_ref(), &plan_path)?;
    let label = engine.label();
    let book = args.prices.run_book(&plan, &args.engine, max_cost)?;
    let plan_source = plan_source.as_deref();

    if let (Some(run), true, None) = (&args.resume, args.dry_run, &shared) {
        let view = root.open(run).map_err(runs::store_error)?;
        let resume = view.resume_plan(&plan, &label).map_err(runs::store_error)?;
        crate::io::print_stdout(&runs::resume_listing(view.run_id(), &resume))?;
        return Ok(Exit::Ok);
    }

    if let Some(dir) = &args.out {
        // Before anything runs or is spent; exit 5, as for any file ctx
        // cannot write.
        ctx_run::out_dir::prepare(dir)
            .map_err(|e| CliError::with(Exit::OutWrite, format!("--out: {e}")))?;
    }
    let options = ExecutorOptions {
        concurrency: args.concurrency,
        schedule: match args.schedule {
            ScheduleArg::Ready => Schedule::ReadyQueue,
            ScheduleArg::Levels => Schedule::Levels,
        },
        task_timeout: bounds.task_timeout,
        max_output_bytes: bounds.max_output_bytes,
        ..ExecutorOptions::default()
    };
    let output = Output {
        plan_path: &plan_path,
        out: args.out.as_deref(),
        format: args.format,
        publish: args.inputs.publish(&plan),
    };

    if let Some(url) = shared {
        if let (Some(run), true) = (&args.resume, args.dry_run) {
            return super::worker::shared_resume_dry_run(&url, run, &plan, &label);
        }
        super::worker::refuse_local_flags(args.run_dir.as_ref())?;
        if max_cost.is_some() {
            // The ledger lives in one process; workers on other machines
            // could not share it.
            return Err(CliError::usage(
                "--max-cost is not supported with a shared --store: the budget ledger lives in one process",
            ));
        }
        // The cache is this machine's, as for a local run.
        let engine = if args.cache {
            super::worker::with_local_cache(engine, args.root.as_deref())?
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

    // Refuse an unbounded budget before a run directory is created.
    let cost = super::run_cost::options(&plan, &args.engine, book, max_cost)?;
    let store = if args.no_store {
        RunStore::Memory
    } else {
        RunStore::Sqlite {
            root,
            start: match (&args.resume, &args.run_dir) {
                (Some(run), _) => Start::Resume(run.clone()),
                (None, Some(dir)) => Start::NewIn(dir.clone()),
                (None, None) => Start::New,
            },
            cache: args.cache,
        }
    };
    let settings = RunSettings {
        executor: ExecutorOptions {
            cost: Some(cost),
            ..options
        },
        store,
        plan_source: plan_source.map(str::to_string),
    };
    let total = plan.sub_tasks.len();
    let session = RunSession::start(plan, engine, settings).map_err(run_error)?;
    if let Some(stored) = session.stored() {
        match session.resumed() {
            Some(r) => eprintln!(
                "resuming run {} in {}: {} reused, {} to run",
                stored.run_id,
                stored.dir.display(),
                r.reuse.len(),
                r.rerun.len()
            ),
            None => eprintln!("run {} in {}", stored.run_id, stored.dir.display()),
        }
    }
    let (outcome, signal) = drive(total, |cancel, progress| {
        session.execute_with(cancel, progress)
    })?;
    let outcome = outcome.map_err(run_error)?;
    // Every result is committed already; a failure to record the session's
    // end only makes the run look crashed, so the summary still comes first.
    let executed = Executed {
        report: outcome.report,
        signal,
    };
    let exit = report_run(&executed, &output)?;
    if let Some(stored) = &outcome.stored {
        if executed.report.all_completed() {
            eprintln!("run {} stored in {}", stored.run_id, stored.dir.display());
        } else {
            // The run stores its plan: resuming needs no plan path.
            eprintln!(
                "run {} stored in {}; resume with: ctx run --resume {}",
                stored.run_id,
                stored.dir.display(),
                stored.run_id
            );
        }
    }
    if let Some(e) = outcome.finish_error {
        return Err(runs::store_error(e));
    }
    Ok(exit)
}

/// [`ctx_run::refuse_unjudgeable`], said with where each judge check is
/// written in the plan (`FILE:LINE:COL: task "ID": FIELD: a judge check`,
/// one line each) and the engine flags that can run it.
pub fn refuse_unjudgeable(
    plan: &ctx_model::Plan,
    engine: &dyn InferenceEngine,
    plan_path: &Path,
) -> Result<(), CliError> {
    let Err(e) = ctx_run::refuse_unjudgeable(plan, engine) else {
        return Ok(());
    };
    let ctx_run::RunError::Unjudgeable { engine, checks } = &e else {
        return Err(CliError::usage(e));
    };
    let source = ctx_model::read_plan_source(plan_path).ok();
    let locator = source
        .as_ref()
        .map(|s| ctx_model::FieldLocator::new(&s.text))
        .unwrap_or_default();
    let origin = source
        .as_ref()
        .map_or("<stored plan>", |s| s.origin.as_str());
    let mut message = format!(
        "the {engine} engine cannot run `judge` checks (they need a model): use --engine command or --engine openai"
    );
    for (task_id, field) in checks {
        let at = locator
            .locate(field)
            .map(|(l, c)| format!("{origin}:{l}:{c}: "))
            .unwrap_or_else(|| format!("{origin}: "));
        let task = task_id
            .as_ref()
            .map(|t| format!("task {t:?}: "))
            .unwrap_or_default();
        message.push_str(&format!("\n{at}{task}{field}: a judge check"));
    }
    Err(CliError::usage(message))
}

/// The bounds on one task's engine call that `ctx run`, `ctx eval` and
/// `ctx worker` take, with the library's defaults.
#[derive(Debug, clap::Args)]
pub struct TaskBoundArgs {
    /// Stop a task's engine call after this many seconds (fractions
    /// allowed; retries included): the command's process group is killed
    /// or the request aborted, and the task fails. 0 means no limit.
    #[arg(long, value_name = "SECS", default_value_t = ctx_deps::DEFAULT_TASK_TIMEOUT.as_secs_f64(), help_heading = heading::BOUNDS)]
    pub task_timeout: f64,

    /// Most bytes one task's output may have: past it the engine stops
    /// reading (the command is killed, the stream dropped) and the task
    /// fails.
    #[arg(long, value_name = "BYTES", default_value_t = ctx_deps::DEFAULT_MAX_OUTPUT_BYTES, help_heading = heading::BOUNDS)]
    pub max_output_bytes: usize,
}

/// [`TaskBoundArgs`] checked by the library's rules.
pub(crate) struct TaskBounds {
    pub task_timeout: Option<Duration>,
    pub max_output_bytes: usize,
}

impl TaskBoundArgs {
    /// The bounds, or the library's refusal named by its flag.
    pub(crate) fn resolve(&self) -> Result<TaskBounds, CliError> {
        Ok(TaskBounds {
            // `0` is no bound.
            task_timeout: ctx_run::settings::task_timeout_from_secs(self.task_timeout)
                .map_err(setting_error)?,
            max_output_bytes: ctx_run::settings::max_output_bytes(self.max_output_bytes)
                .map_err(setting_error)?,
        })
    }
}

/// The plan limits `ctx run` and `ctx eval` can override.
#[derive(Debug, clap::Args)]
pub struct PlanLimitArgs {
    /// Cap on each assembled prompt, in tokens (overrides
    /// config.max_prompt_tokens).
    #[arg(long, value_name = "N", help_heading = heading::BOUNDS)]
    pub max_prompt_tokens: Option<usize>,

    /// How many times in all a task with checks is tried, retries with
    /// feedback included (overrides config.max_check_attempts; at least 1).
    #[arg(long, value_name = "N", help_heading = heading::CHECKS)]
    pub max_check_attempts: Option<u32>,
}

impl PlanLimitArgs {
    /// These overrides over the plan's config.
    pub(crate) fn apply(&self, plan: &mut ctx_model::Plan) -> Result<(), CliError> {
        ctx_run::settings::PlanOverrides {
            max_prompt_tokens: self.max_prompt_tokens,
            max_check_attempts: self.max_check_attempts,
            ..Default::default()
        }
        .apply(plan)
        .map_err(setting_error)
    }
}

/// A setting out of range, named by its flag (exit 2).
fn setting_error(e: ctx_run::settings::SettingError) -> CliError {
    use ctx_run::settings::Setting;
    let flag = match e.setting() {
        Setting::MaxPromptTokens => "--max-prompt-tokens",
        Setting::MaxCheckAttempts => "--max-check-attempts",
        Setting::MaxOutputBytes => "--max-output-bytes",
        Setting::TaskTimeout => "--task-timeout",
    };
    CliError::usage(e.message(flag))
}

/// `--resume RUN` without a PLAN: the plan the run stored at its last
/// session ([`ctx_run::stored_plan`]), shown as its path as then given.
fn stored_plan(
    root: &RunRoot,
    run: &str,
) -> Result<(ctx_model::Plan, PathBuf, Option<String>), CliError> {
    let stored = ctx_run::stored_plan(root, run).map_err(|e| match e {
        ctx_run::RunError::RedactedPlan { .. } => {
            CliError::usage(format!("{e}: ctx run PLAN --resume {run}"))
        }
        e => run_error(e),
    })?;
    let shown = PathBuf::from(format!(
        "{} (the plan stored in run {})",
        stored.source.as_deref().unwrap_or("<plan>"),
        stored.run_id
    ));
    Ok((stored.plan, shown, stored.source))
}

/// A run's error as the CLI reports it: a run that does not exist and a
/// plan that is not a DAG are usage errors (2), a store that fails is 4.
pub(crate) fn run_error(e: ctx_run::RunError) -> CliError {
    use ctx_run::RunError;
    match e {
        RunError::Store(e @ ctx_store_sqlite::Error::AlreadyExists { .. }) => CliError::with(
            Exit::Store,
            format!("{e} (ctx run --resume DIR, or another --run-dir)"),
        ),
        RunError::Store(e) => runs::store_error(e),
        RunError::Graph(e) | RunError::Exec(ExecError::Graph(e)) => CliError::usage(e),
        e @ (RunError::Exec(ExecError::Store { .. })
        | RunError::History(_)
        | RunError::Blocking(_)) => CliError::with(Exit::Store, e),
        e @ (RunError::RedactedPlan { .. } | RunError::Unjudgeable { .. }) => CliError::usage(e),
    }
}

/// Where and how a run's results are reported.
pub struct Output<'a> {
    /// The plan's path, for messages.
    pub plan_path: &'a Path,
    /// `--out DIR` (already created).
    pub out: Option<&'a Path>,
    /// `--format`.
    pub format: Format,
    /// `--publish-root` and the plan's publish paths.
    pub publish: Option<Publish<'a>>,
}

/// Where a run's completed outputs are published after it.
pub struct Publish<'a> {
    /// `--publish-root DIR`.
    pub root: &'a Path,
    /// Each task's path under it.
    pub targets: Vec<ctx_run::publish::PublishTarget>,
}

pub(crate) use crate::runtime::{StopSignal, StopSignals};

/// What [`execute`] returns: the executor's report and the signal that
/// stopped the run, if one did.
pub struct Executed {
    /// Every task's final result.
    pub report: RunReport,
    /// The signal that interrupted the run.
    pub signal: Option<StopSignal>,
}

/// What [`drive`] hands its work: a future that resolves on the first
/// stop signal, and the progress bar's event sink.
pub(crate) type Cancel = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
/// See [`Cancel`].
pub(crate) type Progress = Box<dyn FnMut(&ProgressEvent) + Send>;

/// Runs `work` to its end on a new multi-threaded runtime, with SIGINT,
/// SIGTERM and SIGHUP turned into its cancel future (installed before the
/// work starts, see [`StopSignals`]) and, on a terminal, a progress bar of
/// `total` tasks fed by its progress sink. Returns what the work returned
/// and the signal that stopped it, if one did.
pub(crate) fn drive<T, F, Fut>(total: usize, work: F) -> Result<(T, Option<StopSignal>), CliError>
where
    F: FnOnce(Cancel, Progress) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let runtime = crate::runtime::runtime()?;
    let bar = progress_bar(total);
    if let Some(bar) = &bar {
        // Retry, pacing and streaming notices of the HTTP engine go to the
        // bar's message line instead of breaking it with raw lines.
        engines::openai::attach_progress_bar(bar);
    }
    let stopped = Arc::new(std::sync::OnceLock::new());
    let out = runtime.block_on(async {
        // Before any task starts (see `StopSignals`).
        let signals = StopSignals::install();
        let seen = Arc::clone(&stopped);
        let cancel: Cancel = Box::pin(async move {
            let _ = seen.set(signals.first().await);
        });
        let mut in_flight = 0usize;
        let shown = bar.clone();
        let progress: Progress = Box::new(move |event| {
            if let Some(bar) = &shown {
                update_bar(bar, &mut in_flight, event);
            }
        });
        work(cancel, progress).await
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    Ok((out, stopped.get().copied()))
}

/// Reports a run: the summary on stdout, then `--out`, then the exit code.
///
/// The tasks have run (and a durable run is stored) by now, so nothing
/// here is a usage error: the summary is printed first, and a failure to
/// write `--out` is reported and exits [`Exit::OutWrite`] (5), unless a
/// signal stopped the run, whose code wins.
pub fn report_run(executed: &Executed, output: &Output<'_>) -> CliResult {
    let report = &executed.report;
    let (published, unpublished) = match &output.publish {
        Some(p) => {
            ctx_run::publish::publish(p.root, &p.targets, &report.results, report.interrupted)
        }
        None => (Vec::new(), None),
    };
    match output.format {
        Format::Json => {
            let mut json = ctx_run::ResultsJson::of(report);
            json.published = published;
            crate::io::print_stdout(&crate::io::json_text(&json)?)?;
        }
        Format::Text => crate::io::print_stdout(&format!(
            "{}{}",
            ctx_run::summary_text::summary_text(report),
            ctx_run::publish::published_text(&published)
        ))?,
    }
    if let Some(e) = &unpublished {
        eprintln!("error: --publish-root: {e}");
    }
    let written = match output.out {
        Some(dir) => ctx_run::out_dir::write(dir, report),
        None => Ok(()),
    };
    if let Err(e) = &written {
        eprintln!("error: --out: {e}");
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
    if written.is_err() || unpublished.is_some() {
        return Ok(Exit::OutWrite);
    }
    Ok(if report.all_completed() {
        Exit::Ok
    } else {
        Exit::Findings
    })
}

pub use ctx_run::summary_text::tasks;

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
