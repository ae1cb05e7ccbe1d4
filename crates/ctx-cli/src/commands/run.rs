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

use ctx_deps::{InferenceEngine, ProgressEvent, RunReport};
use ctx_model::TaskStatus;
use ctx_run::request::RunRequest;
use ctx_run::settings::StoreChoice;
use ctx_run::{RunSession, RunSettings, RunStore};
use ctx_tokens::Tokenizer;
use ctx_worker::SharedSettings;

use super::run_request::Asked;
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

    /// Most tasks in flight at once; 0 means unlimited. With --batch: the
    /// real-time calls (a batch takes a map's ready items whatever this says).
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

    /// When at least K calls ready at once share a prompt prefix the
    /// provider can cache (a map's items), send one first and the others
    /// when its first token arrives (overrides config.cache_warm_up; at
    /// least 2).
    #[arg(long, value_name = "K", help_heading = heading::PROMPTS)]
    pub cache_warm_up: Option<usize>,

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
    /// params changed runs again, with its dependents. A plan with
    /// variables is filled again with the run's stored values and digest
    /// (--var changes one, a digest flag recomputes the digest; a secret
    /// must be given again). Give the engine flags again.
    #[arg(long, value_name = "RUN", help_heading = heading::STORE)]
    pub resume: Option<String>,

    /// With --resume: run TASK again, and everything below it (its
    /// dependents, transitively, through maps), though their stored
    /// results would be reused. Repeatable. Compare the run before and
    /// after with `ctx runs diff RUN@N RUN` (N: the session before).
    #[arg(long, value_name = "TASK", requires = "resume", help_heading = heading::STORE)]
    pub rerun: Vec<String>,

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

    /// When the run has nothing left to do but wait for decisions on its
    /// approval gates, keep waiting up to DURATION (`90s`, `30m`, `2h`),
    /// reading the decisions every 500 ms, and go on as soon as one is
    /// stored (`ctx runs approve` from any shell); past it, exit 6.
    #[arg(long, value_name = "DURATION", value_parser = wait_duration, help_heading = heading::STORE)]
    pub wait_approval: Option<Duration>,

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

    /// A budget shared by every run that names it over a calendar period
    /// (UTC): NAME=USD/PERIOD, PERIOD day, week or month (overrides
    /// config.budget). The run holds its high end of what the period has
    /// left before any call, or is refused (exit 3); the plan's
    /// config.budget.fallback tiers stay. On a postgres:// store the
    /// ledger is the database's.
    #[arg(long, value_name = "NAME=USD/PERIOD", allow_hyphen_values = true, help_heading = heading::COST)]
    pub budget: Option<ctx_model::PeriodBudget>,

    /// Warn once per threshold the run crosses, as fractions of the period
    /// budget (else of --max-cost): 0.5,0.8,0.95. On stderr, as GitHub
    /// Actions annotations under GITHUB_ACTIONS=true (`::error::` from
    /// 0.95), and in --format json's `alerts`.
    #[arg(long, value_name = "F,F,...", allow_hyphen_values = true, help_heading = heading::COST)]
    pub alert_at: Option<String>,

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

    /// `--otlp URL`: the run's trace to an OpenTelemetry collector.
    #[command(flatten)]
    pub otlp: crate::telemetry::OtlpFlag,
}

pub use crate::format::Format;

/// `--wait-approval DURATION`, read.
fn wait_duration(text: &str) -> Result<Duration, String> {
    crate::engines::openai::parse_duration(text).ok_or_else(|| {
        format!("expected a whole number and a unit (ms, s, m, h, d), as `30m`; got {text:?}")
    })
}

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

/// Runs the command: flags → the library's one run request (resolved
/// once, [`super::run_request`]) → the session of the store it names →
/// the summary printed.
pub fn run(args: Args) -> CliResult {
    let Asked {
        request,
        engine,
        notices,
        plan_path,
    } = super::run_request::resolve(&args)?;
    if let (Some(run), true) = (&args.resume, args.dry_run) {
        return resume_listing(run, &request, &plan_path, engine.as_ref());
    }
    let output = Output {
        plan_path: &plan_path,
        out: args.out.as_deref(),
        format: args.format,
    };
    match request.store.clone() {
        StoreChoice::Local(store) => {
            let (plan, settings) = request.into_local(store);
            run_local(plan, engine, settings, &output, &notices)
        }
        StoreChoice::Shared(store) => {
            let (plan, settings) = SharedSettings::from_request(request, store);
            super::shared_run::run(plan, engine, settings, &output)
        }
    }
}

/// `--resume RUN --dry-run`: what a resume with the plan on `engine` would
/// reuse and run again, and why, from either store; nothing is written.
/// A plan the engine cannot judge is refused as the run would refuse it.
fn resume_listing(
    run: &str,
    request: &RunRequest,
    plan_path: &Path,
    engine: &dyn InferenceEngine,
) -> CliResult {
    let plan = &request.plan;
    ctx_run::refuse_unjudgeable(plan, engine).map_err(|e| CliError::run(e, plan_path))?;
    ctx_run::check_rerun_ids(plan, &request.rerun).map_err(CliError::usage)?;
    let label = engine.label();
    let (run_id, resume) = match &request.store {
        StoreChoice::Local(RunStore::Sqlite { root, .. }) => {
            let view = root.open(run)?;
            let mut resume = view.resume_plan(plan, &label)?;
            resume.force(plan, &request.rerun);
            (view.run_id().to_string(), resume)
        }
        StoreChoice::Shared(s) => {
            let resume = ctx_worker::runs::resume_plan(&s.url, run, plan, &label, &request.rerun)
                .map_err(|e| CliError::shared(e, plan_path))?;
            (run.to_string(), resume)
        }
        StoreChoice::Local(RunStore::Memory) => return Err(super::run_request::needs_stored_run()),
    };
    crate::io::print_stdout(&runs::resume_listing(&run_id, &resume))?;
    Ok(Exit::Ok)
}

/// A run in memory or in a run directory: started (a resume decided),
/// executed with the progress bar and the stop signals, reported.
fn run_local(
    plan: ctx_model::Plan,
    engine: Arc<dyn InferenceEngine>,
    settings: RunSettings,
    output: &Output<'_>,
    notices: &engines::Notices,
) -> CliResult {
    let total = plan.sub_tasks.len();
    let session = RunSession::start(plan, engine, settings).map_err(|e| {
        if let ctx_run::RunError::PeriodBudget(refused) = &e {
            annotate_refusal(refused);
        }
        CliError::run(e, output.plan_path)
    })?;
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
    let (outcome, signal) = drive(total, notices, |cancel, progress| {
        session.execute_with(cancel, progress)
    })?;
    let outcome = outcome.map_err(|e| CliError::run(e, output.plan_path))?;
    // Every result is committed already; a failure to record the session's
    // end only makes the run look crashed, so the summary still comes first.
    let executed = Executed {
        report: outcome.report,
        signal,
        published: outcome.published,
        unpublished: outcome.publish_error,
        alerts: outcome.alerts,
        fallback: outcome.fallback,
        waiting: outcome.waiting,
        withheld: outcome.withheld,
    };
    let exit = report_run(&executed, output)?;
    if let Some(stored) = &outcome.stored {
        if executed.report.all_completed() && executed.waiting.is_empty() {
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
        return Err(e.into());
    }
    Ok(exit)
}

// The bounds on one task's engine call that `ctx run`, `ctx eval` and
// `ctx worker` take, with the library's defaults.
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
            task_timeout: ctx_run::settings::task_timeout_from_secs(self.task_timeout)?,
            max_output_bytes: ctx_run::settings::max_output_bytes(self.max_output_bytes)?,
        })
    }
}

// The plan limits `ctx run` and `ctx eval` can override.
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
        .apply(plan)?;
        Ok(())
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
}

pub(crate) use crate::runtime::StopSignal;

/// What [`execute`] returns: the executor's report and the signal that
/// stopped the run, if one did.
pub struct Executed {
    /// Every task's final result.
    pub report: RunReport,
    /// The signal that interrupted the run.
    pub signal: Option<StopSignal>,
    /// The files published after it (`--publish-root`).
    pub published: Vec<ctx_run::publish::Published>,
    /// The publish that failed, after those written.
    pub unpublished: Option<ctx_run::publish::PublishError>,
    /// The `--alert-at` thresholds the run crossed.
    pub alerts: Vec<ctx_run::alerts::Alert>,
    /// The cheaper tier of its period budget the run ran on.
    pub fallback: Option<ctx_model::FallbackChoice>,
    /// The approval gates left waiting, each with its approve command.
    pub waiting: Vec<ctx_run::gates::Waiting>,
    /// The outputs publishing held back (waiting, or rejected).
    pub withheld: Vec<ctx_run::gates::Withheld>,
}

/// Whether stderr speaks GitHub Actions' workflow commands.
fn in_github_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// Prints each alert on stderr: `warning: ...`, or under GitHub Actions
/// a `::warning::` (`::error::` from `ERROR_AT`) annotation.
fn print_alerts(alerts: &[ctx_run::alerts::Alert]) {
    use ctx_run::alerts::AlertLevel;
    let gha = in_github_actions();
    for a in alerts {
        match (gha, a.level) {
            (true, AlertLevel::Warning) => eprintln!("::warning title=ctx budget::{a}"),
            (true, AlertLevel::Error) => eprintln!("::error title=ctx budget::{a}"),
            (false, _) => eprintln!("warning: {a}"),
        }
    }
}

/// Under GitHub Actions, a run refused by its period budget is an
/// `::error::` annotation too (the error itself is printed as always).
pub(crate) fn annotate_refusal(e: &ctx_run::period_budget::PeriodBudgetError) {
    if in_github_actions() && matches!(e, ctx_run::period_budget::PeriodBudgetError::Refused(_)) {
        eprintln!("::error title=ctx budget::{e}");
    }
}

/// What [`drive`] hands its work: a future that resolves on the first
/// stop signal, and the progress bar's event sink.
pub(crate) type Cancel = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
/// See [`Cancel`].
pub(crate) type Progress = Box<dyn FnMut(&ProgressEvent) + Send>;

/// Runs `work` to its end on a new multi-threaded runtime, with SIGINT,
/// SIGTERM and SIGHUP turned into its cancel future (installed before the
/// work starts, see [`crate::runtime::until_stopped`]) and, on a terminal,
/// a progress bar of `total` tasks fed by its progress sink, which also
/// shows the engine's events (`notices`). Returns what the work returned
/// and the signal that stopped it, if one did.
pub(crate) fn drive<T, F, Fut>(
    total: usize,
    notices: &engines::Notices,
    work: F,
) -> Result<(T, Option<StopSignal>), CliError>
where
    F: FnOnce(Cancel, Progress) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let bar = progress_bar(total);
    if let Some(bar) = &bar {
        // Retry, pacing and streaming notices of the HTTP engine go to the
        // bar's message line instead of breaking it with raw lines.
        notices.attach(bar);
    }
    let stopped = Arc::new(std::sync::OnceLock::new());
    let seen = Arc::clone(&stopped);
    let shown = bar.clone();
    let out = crate::runtime::until_stopped(|stop| {
        let cancel: Cancel = Box::pin(async move {
            let _ = seen.set(stop.await);
        });
        let mut in_flight = 0usize;
        let progress: Progress = Box::new(move |event| {
            if let Some(bar) = &shown {
                update_bar(bar, &mut in_flight, event);
            }
        });
        work(cancel, progress)
    })?;
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
    let (published, unpublished) = (&executed.published, &executed.unpublished);
    match output.format {
        Format::Json => {
            let mut json = ctx_run::ResultsJson::of(report);
            json.published = published.clone();
            json.waiting = executed.waiting.clone();
            json.alerts = executed.alerts.clone();
            json.fallback = executed
                .fallback
                .as_ref()
                .map(ctx_run::period_budget::FallbackJson::of);
            crate::io::print_stdout(&crate::io::json_text(&json)?)?;
        }
        Format::Text => crate::io::print_stdout(&format!(
            "{}{}{}{}{}",
            ctx_run::summary_text::summary_text(report),
            executed
                .fallback
                .as_ref()
                .map(ctx_run::period_budget::fallback_text)
                .unwrap_or_default(),
            ctx_run::publish::published_text(published),
            ctx_run::gates::rejected_text(&executed.withheld),
            ctx_run::gates::waiting_text(&executed.waiting),
        ))?,
    }
    print_alerts(&executed.alerts);
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
    Ok(if !report.only_waiting() {
        Exit::Findings
    } else if !executed.waiting.is_empty() {
        Exit::AwaitingApproval
    } else if report.all_completed() {
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
        ProgressEvent::Expanded { task_id, items } => {
            // The items are tasks the plan did not list.
            bar.inc_length(*items as u64);
            bar.set_message(format!("{task_id} expanded into {items} items"));
        }
        ProgressEvent::AwaitingApproval { task_id, .. } => {
            bar.println(format!("task {task_id}: waiting for approval"));
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
