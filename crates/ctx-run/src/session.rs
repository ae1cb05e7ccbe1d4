//! One run of a plan, durable or in memory: [`run_plan`], or
//! [`RunSession`] for a caller that reports between starting and
//! executing.
//!
//! The rules here are the ones `ctx run` documents (docs/runs.md):
//! - a durable run lives in a run directory under a [`RunRoot`]; a resume
//!   reuses every stored completed result whose fingerprint and engine
//!   label still match, and runs again the rest together with everything
//!   downstream of it ([`ResumePlan`]);
//! - the engine's [`label`](ctx_engine::InferenceEngine::label) is what a
//!   resume compares, its
//!   [`cache_identity`](ctx_engine::InferenceEngine::cache_identity) what
//!   the input-hash cache keys by;
//! - the cache index is opened before the run directory is created, so a
//!   bad `cache.sqlite` leaves no started run behind;
//! - a resumed run's budget covers the whole run: what earlier sessions
//!   spent counts;
//! - every result is committed before any dependent starts; the session's
//!   end is recorded last, and a failure to record it does not lose the
//!   report (it only makes the run look crashed).
//!
//! Store calls are synchronous SQLite: [`RunSession::start`] blocks, and
//! [`run_plan`] and [`RunSession::execute_with`] run every store call on
//! the blocking pool, never on a runtime worker.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctx_deps::{
    ExecutionStore, Executor, ExecutorOptions, InferenceEngine, MemoryStore, ProgressEvent,
    RunReport,
};
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::ResumePlan;
use ctx_store_sqlite::{CachingEngine, NewRun, RunRoot, SessionEnd, SqliteStore, StartAt};
use tracing::Instrument;

use crate::RunError;

/// Where a run keeps its results.
#[derive(Debug, Clone)]
pub enum RunStore {
    /// In memory: nothing outlives the call (`ctx run --no-store`).
    Memory,
    /// A durable run directory under `root` (`ctx run`, the default).
    Sqlite {
        /// The store root (`ctx run --root`, default
        /// [`ctx_store_sqlite::DEFAULT_ROOT`]); also where the cache index
        /// lives.
        root: RunRoot,
        /// A new run or a resume.
        start: Start,
        /// Answer identical requests from the input-hash cache under
        /// `root`, and record new answers in it.
        cache: bool,
    },
}

/// Which run a durable [`RunStore::Sqlite`] writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// A new run in `root/{new run id}`.
    New,
    /// A new run in this directory.
    NewIn(PathBuf),
    /// Resume this run: a run id under the root, or a run directory.
    Resume(String),
}

/// Everything a run needs besides the plan and the engine. The defaults
/// are the executor's (`ExecutorOptions::default()`) in memory.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Concurrency, schedule, time and output bounds, prices. Its
    /// `reuse_completed` and `force_rerun` are set by the session from the
    /// resume decisions; their values here are ignored.
    pub executor: ExecutorOptions,
    /// Where results go.
    pub store: RunStore,
    /// Where the plan came from (the path as given), recorded for `ctx
    /// runs list`.
    pub plan_source: Option<String>,
    /// The `--out` directory, created ([`crate::out_dir::prepare`]) when
    /// the run starts: after the plan is found runnable, before any run
    /// directory exists or anything is spent. Writing it at the end is
    /// the caller's ([`crate::out_dir::write`]).
    pub out: Option<PathBuf>,
    /// What the plan was filled from ([`crate::inputs`]), recorded with a
    /// durable run; its secrets are hidden in every stored prompt and in
    /// the prompts of the outcome's report.
    pub inputs: Option<ctx_store::RunInputs>,
    /// Where completed outputs are published once the run ends
    /// ([`crate::publish`]); the files written are recorded with a
    /// durable run before its session's end.
    pub publish: Option<crate::publish::PublishTo>,
    /// Tasks to run again on resume, with everything below them, though
    /// their stored results would be reused (`ctx run --resume RUN --rerun
    /// TASK`): added to the resume's decisions ([`ResumePlan::force`]), so
    /// they reach the executor as every other forced re-run does. Only
    /// with [`Start::Resume`].
    pub rerun: Vec<String>,
    /// `--alert-at`: the fractions of the period budget (else of
    /// `--max-cost`) to alert at when the run crosses them
    /// ([`crate::alerts::parse_thresholds`]).
    pub alert_at: Vec<f64>,
    /// The cheaper tier of its period budget the run starts on, already
    /// applied to the plan ([`crate::period_budget::choose_tier`]):
    /// recorded with a durable run, and given back in the outcome.
    pub fallback: Option<ctx_model::FallbackChoice>,
    /// `--wait-approval`: how long a durable run keeps waiting for
    /// decisions on its gates when nothing else can run (its `before:
    /// run` gates, then its `before: publish` outputs), reading them every
    /// [`ctx_deps::gates::POLL_INTERVAL`]. `None`: it ends waiting.
    pub approval_wait: Option<std::time::Duration>,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            executor: ExecutorOptions::default(),
            store: RunStore::Memory,
            plan_source: None,
            out: None,
            inputs: None,
            publish: None,
            rerun: Vec::new(),
            alert_at: Vec::new(),
            fallback: None,
            approval_wait: None,
        }
    }
}

/// `--rerun` ids are refused before anything is opened: outside a resume,
/// or when one is not a task of the plan.
fn check_rerun(plan: &Plan, store: &RunStore, rerun: &[String]) -> Result<(), RunError> {
    if rerun.is_empty() {
        return Ok(());
    }
    if !matches!(
        store,
        RunStore::Sqlite {
            start: Start::Resume(_),
            ..
        }
    ) {
        return Err(RunError::RerunWithoutResume);
    }
    Ok(ctx_store::check_rerun_ids(plan, rerun)?)
}

/// Refuses (before anything is opened for writing) to resume run `run`
/// with an engine that does not take up provider batches while the run
/// holds batches that may still answer: their requests would be paid
/// again.
fn refuse_live_batches(
    root: &RunRoot,
    run: &str,
    engine: &dyn InferenceEngine,
) -> Result<(), RunError> {
    if engine.sends_batches() {
        return Ok(());
    }
    let batches: Vec<String> = root
        .open(run)?
        .batches()?
        .into_iter()
        .filter(|b| b.collected_at.is_none() && b.cancel_requested_at.is_none())
        .filter_map(|b| b.id)
        .collect();
    if batches.is_empty() {
        return Ok(());
    }
    Err(RunError::LiveBatches {
        run: run.to_string(),
        batches,
    })
}

/// A run that is stored: its id and directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRun {
    /// The run's id.
    pub run_id: String,
    /// The run's directory.
    pub dir: PathBuf,
}

/// What a finished (or interrupted) run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// Every task's final result; [`crate::ResultsJson::of`] turns it into
    /// results.json.
    pub report: RunReport,
    /// The durable run, when there is one.
    pub stored: Option<StoredRun>,
    /// The resume decisions, when this session resumed a run.
    pub resumed: Option<ResumePlan>,
    /// The session's end could not be recorded: every result is committed,
    /// but the run will look crashed to `ctx runs list`.
    pub finish_error: Option<ctx_store_sqlite::Error>,
    /// The files published, in plan order (none without
    /// [`RunSettings::publish`], or when the run was interrupted).
    pub published: Vec<crate::publish::Published>,
    /// The publish that failed, after those that were written.
    pub publish_error: Option<crate::publish::PublishError>,
    /// The `--alert-at` thresholds this session crossed.
    pub alerts: Vec<crate::alerts::Alert>,
    /// The cheaper tier of its period budget the run ran on.
    pub fallback: Option<ctx_model::FallbackChoice>,
    /// The gates left waiting for a decision: `before: run` tasks held,
    /// then (when the session publishes) `before: publish` outputs.
    pub waiting: Vec<crate::gates::Waiting>,
    /// The outputs publishing held back (waiting, or rejected).
    pub withheld: Vec<crate::gates::Withheld>,
}

/// A run that has started (its store is open, a resume decided) and not
/// yet executed.
pub struct RunSession {
    executor: Executor,
    durable: Option<Arc<SqliteStore>>,
    resumed: Option<ResumePlan>,
    publish: Option<crate::publish::PublishTo>,
    /// The run's name in its trace ([`workflow_name`]).
    workflow: String,
    /// Its hold on its period budget.
    hold: Option<crate::period_budget::PeriodHold>,
    /// What the run had spent before this session.
    spent_before: ctx_cost::Usd,
    /// `--alert-at`, and the `--max-cost` it is of without a hold.
    alert_at: Vec<f64>,
    max_cost: Option<ctx_cost::Usd>,
    /// The cheaper tier the run is on.
    fallback: Option<ctx_model::FallbackChoice>,
    /// `--wait-approval`, shared with the executor (one deadline).
    approval_wait: Option<ctx_deps::gates::ApprovalWait>,
}

impl std::fmt::Debug for RunSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSession")
            .field("stored", &self.stored())
            .field("resumed", &self.resumed)
            .finish_non_exhaustive()
    }
}

impl RunSession {
    /// Opens the run's store: creates the run directory, or opens the run
    /// to resume and decides what it reuses. Blocks on SQLite and the disk;
    /// from async code use [`run_plan`], or call this on the blocking pool.
    ///
    /// `plan` is the plan as it will run (overrides applied): resume
    /// fingerprints are taken from it.
    pub fn start(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        settings: RunSettings,
    ) -> Result<RunSession, RunError> {
        refuse_unjudgeable(&plan, engine.as_ref())?;
        let RunSettings {
            executor: mut options,
            store,
            plan_source,
            out,
            inputs,
            publish,
            rerun,
            alert_at,
            fallback,
            approval_wait,
        } = settings;
        check_rerun(&plan, &store, &rerun)?;
        // No `prompt_cache_key` is computed from a secret's text, and
        // every result is masked at the store's and the report's door.
        options.secret_mask = inputs.as_ref().map(|i| i.mask.clone()).unwrap_or_default();
        if let Some(dir) = &out {
            crate::out_dir::prepare(dir).map_err(RunError::Out)?;
        }
        options.reuse_completed = false;
        options.force_rerun.clear();
        // A dry run's outputs are placeholders, never long: summarise them
        // all under `summarize_strategy: llm`, so its prompts show where
        // each summary goes.
        if !engine.answers_prompts() {
            options.summarize_every_output = true;
        }
        let workflow = workflow_name(&plan, plan_source.as_deref());
        let (root, start, cache) = match store {
            RunStore::Memory if plan.config.budget.is_some() => {
                return Err(crate::period_budget::PeriodBudgetError::NoStore.into());
            }
            RunStore::Memory => {
                let executor = Executor::new(plan, engine, Arc::new(MemoryStore::new()), options)?;
                return Ok(RunSession {
                    executor,
                    durable: None,
                    resumed: None,
                    publish,
                    workflow,
                    hold: None,
                    spent_before: ctx_cost::Usd::ZERO,
                    alert_at,
                    max_cost: None,
                    fallback,
                    approval_wait: None,
                });
            }
            RunStore::Sqlite { root, start, cache } => (root, start, cache),
        };
        // The cache index first: a bad cache.sqlite must not leave behind
        // a started run.
        let cache = if cache {
            Some(Arc::new(root.cache()?))
        } else {
            None
        };
        let label = engine.label();
        let new = NewRun {
            plan: &plan,
            engine: &label,
            plan_source: plan_source.as_deref(),
            inputs: inputs.as_ref(),
        };
        let at = match &start {
            Start::New => StartAt::NewRun,
            Start::NewIn(dir) => StartAt::NewRunIn(dir),
            Start::Resume(run) => StartAt::Resume(run),
        };
        if let Start::Resume(run) = &start {
            refuse_live_batches(&root, run, engine.as_ref())?;
        }
        // Held before the run directory exists: a refused run leaves
        // nothing behind. A resume holds what is left to run.
        let reused = match (&start, &plan.config.budget) {
            (Start::Resume(run), Some(_)) => reused_by(&root, run, &plan, &label, &rerun)?,
            _ => HashSet::new(),
        };
        let hold =
            crate::period_budget::reserve(&root, &plan, plan_source.as_deref(), &options, &reused)?;
        let (store, resumed) = match root.start(at, &new) {
            Ok(started) => started,
            Err(e) => {
                if let Some(h) = &hold {
                    h.settle(ctx_cost::Usd::ZERO)?;
                }
                return Err(e.into());
            }
        };
        if let Some(Err(e)) = fallback.as_ref().map(|f| store.record_fallback(f)) {
            if let Some(h) = &hold {
                h.settle(ctx_cost::Usd::ZERO)?;
            }
            return Err(e.into());
        }
        if let (Some(_), Some(cost)) = (&resumed, options.cost.as_mut()) {
            cost.already_spent = spent(store.view())?;
        }
        if let Some(h) = &hold {
            h.limit(&mut options);
        }
        let before = options
            .cost
            .as_ref()
            .map_or(ctx_cost::Usd::ZERO, |c| c.already_spent);
        let max_cost = options.cost.as_ref().and_then(|c| c.max_cost);
        let mut resumed = resumed;
        if let Some(r) = &mut resumed {
            r.force(&plan, &rerun);
            options.reuse_completed = true;
            options.force_rerun = r.forced_ids();
            options.rerun_requested = rerun.into_iter().collect();
        }
        let store = Arc::new(store);
        let approval_wait = approval_wait.map(|within| {
            ctx_deps::gates::ApprovalWait::polling(within, ctx_deps::gates::POLL_INTERVAL)
        });
        options.approval_wait = approval_wait.clone();
        // A batching engine journals its batches in the run's store, and
        // takes up what a dead session left in flight (docs/runs.md).
        engine.keep_batches(Arc::clone(&store) as Arc<dyn ctx_engine::BatchLedger>);
        let engine: Arc<dyn InferenceEngine> = match cache {
            Some(cache) => {
                let identity = engine.cache_identity();
                Arc::new(CachingEngine::new(
                    engine,
                    cache,
                    identity,
                    Some(store.run_id().to_string()),
                ))
            }
            None => engine,
        };
        let executor = Executor::new(
            plan,
            engine,
            Arc::clone(&store) as Arc<dyn ExecutionStore>,
            options,
        )?;
        Ok(RunSession {
            executor,
            durable: Some(store),
            resumed,
            publish,
            workflow,
            hold,
            spent_before: before,
            alert_at,
            max_cost,
            fallback,
            approval_wait,
        })
    }

    /// The durable run, when there is one.
    pub fn stored(&self) -> Option<StoredRun> {
        self.durable.as_ref().map(|s| StoredRun {
            run_id: s.run_id().to_string(),
            dir: s.dir().to_path_buf(),
        })
    }

    /// The run's id, when it is durable.
    pub fn run_id(&self) -> Option<&str> {
        self.durable.as_ref().map(|s| s.run_id())
    }

    /// The run's directory, when it is durable.
    pub fn dir(&self) -> Option<&Path> {
        self.durable.as_ref().map(|s| s.dir())
    }

    /// The resume decisions, when this session resumes a run.
    pub fn resumed(&self) -> Option<&ResumePlan> {
        self.resumed.as_ref()
    }

    /// Executes the run to its end.
    pub async fn execute(self) -> Result<RunOutcome, RunError> {
        self.execute_with(std::future::pending(), |_| {}).await
    }

    /// Executes the run until every task is terminal or `cancel` resolves
    /// (then the run is stored as interrupted), reporting each start and
    /// finish to `progress`. Must be awaited inside a multi-threaded Tokio
    /// runtime with the time driver enabled.
    pub async fn execute_with<C, P>(
        mut self,
        cancel: C,
        progress: P,
    ) -> Result<RunOutcome, RunError>
    where
        C: Future<Output = ()> + Send,
        P: FnMut(&ProgressEvent) + Send,
    {
        let stored = self.stored();
        let span = ctx_deps::spans::workflow_span(
            &self.workflow,
            stored.as_ref().map(|s| s.run_id.as_str()),
            self.resumed.is_some(),
        );
        let mut cancel = std::pin::pin!(cancel);
        let report = self
            .executor
            .run_with(cancel.as_mut(), progress)
            .instrument(span)
            .await;
        let settling = Settling {
            store: self.durable.clone(),
            hold: self.hold.take(),
            spent_before: self.spent_before,
            alert_at: std::mem::take(&mut self.alert_at),
            max_cost: self.max_cost,
        };
        let alerts = tokio::task::spawn_blocking(move || settling.settle()).await??;
        let mut report = report?;
        // The report comes masked (the executor's report door): a
        // secret's text shows as `[secret NAME]` in all it prints.
        let gated = self.publish_gated(&mut report, cancel.as_mut()).await?;
        let (published, publish_error) = (gated.published, gated.error);
        let mut waiting =
            crate::gates::waiting_to_run(self.executor.plan(), &report.awaiting, self.run_id());
        waiting.extend(crate::gates::awaiting(&gated.withheld));
        let finish_error = match self.durable {
            Some(store) => {
                let end = if report.interrupted {
                    SessionEnd::Interrupted
                } else {
                    SessionEnd::Finished
                };
                let written = published.clone();
                tokio::task::spawn_blocking(move || {
                    store.record_published(&written)?;
                    store.finish(end)
                })
                .await?
                .err()
            }
            None => None,
        };
        Ok(RunOutcome {
            report,
            stored,
            resumed: self.resumed,
            finish_error,
            published,
            publish_error,
            alerts,
            fallback: self.fallback,
            waiting,
            withheld: gated.withheld,
        })
    }

    /// Publishes the completed outputs (with `--publish-root`), holding
    /// back each `before: publish` output no decision approves
    /// ([`crate::gates::withhold`]). With `--wait-approval`, an output
    /// that waits is waited for (the decisions read again at each
    /// wake-up) until the wait's deadline; a stop signal meanwhile
    /// publishes nothing and marks the report interrupted. `cancel` has
    /// not resolved when the report is not interrupted.
    async fn publish_gated<C>(
        &self,
        report: &mut RunReport,
        mut cancel: std::pin::Pin<&mut C>,
    ) -> Result<Gated, RunError>
    where
        C: Future<Output = ()>,
    {
        let Some(p) = &self.publish else {
            return Ok(Gated::default());
        };
        loop {
            let decisions = match &self.durable {
                Some(s) => {
                    let s = Arc::clone(s);
                    tokio::task::spawn_blocking(move || s.view().decisions()).await??
                }
                None => Vec::new(),
            };
            let plan = self.executor.plan();
            let (open, withheld) = crate::gates::withhold(
                plan,
                &p.targets,
                &report.results,
                &decisions,
                self.run_id(),
            );
            let waits = !crate::gates::awaiting(&withheld).is_empty();
            if let (true, false, Some(wait)) = (waits, report.interrupted, &self.approval_wait) {
                tokio::select! {
                    biased;
                    () = &mut cancel => report.interrupted = true,
                    woken = wait.wait_once() => if woken { continue },
                }
            }
            // A durable run keeps what it replaces in its directory, for
            // `ctx runs unpublish`; one in memory keeps nothing.
            let backups = self
                .durable
                .as_ref()
                .map(|s| crate::publish::BackupDir::of_run(s.dir()));
            let (published, error) = crate::publish::publish(
                &p.root,
                &open,
                &report.results,
                report.interrupted,
                backups.as_ref().map(|b| b as &dyn crate::publish::Backups),
            );
            return Ok(Gated {
                published,
                error,
                withheld,
            });
        }
    }
}

/// What [`RunSession::publish_gated`] did.
#[derive(Default)]
struct Gated {
    published: Vec<crate::publish::Published>,
    error: Option<crate::publish::PublishError>,
    withheld: Vec<crate::gates::Withheld>,
}

/// The tasks a resume of `run` with `plan` on the engine `label` would
/// reuse (its `--rerun` ids forced), decided as the resume itself decides
/// them, read before anything is written: what a period budget's hold
/// leaves out.
fn reused_by(
    root: &RunRoot,
    run: &str,
    plan: &Plan,
    label: &str,
    rerun: &[String],
) -> Result<HashSet<String>, RunError> {
    let view = root.open(run)?;
    let mut decided = ctx_store::RunHistory::resume_plan(&view, plan, label)?;
    decided.force(plan, rerun);
    Ok(decided.reuse.into_iter().collect())
}

/// What a session settles when it ends: its hold on its period budget,
/// and the `--alert-at` thresholds it crossed.
struct Settling {
    store: Option<Arc<SqliteStore>>,
    hold: Option<crate::period_budget::PeriodHold>,
    spent_before: ctx_cost::Usd,
    alert_at: Vec<f64>,
    max_cost: Option<ctx_cost::Usd>,
}

impl Settling {
    /// Replaces the hold, if any, by what this session spent (the run's
    /// stored costs, less what it had spent before), whether the executor
    /// finished or stopped on an error, and returns the thresholds the
    /// session crossed. Reads the run's history only when there is a hold
    /// or an alert to give. Blocks on SQLite.
    fn settle(self) -> Result<Vec<crate::alerts::Alert>, RunError> {
        let Some(store) = &self.store else {
            return Ok(Vec::new());
        };
        let of_max_cost = self.max_cost.filter(|_| !self.alert_at.is_empty());
        if self.hold.is_none() && of_max_cost.is_none() {
            return Ok(Vec::new());
        }
        let now = spent(store.view())?;
        let before = self.spent_before;
        let Some(hold) = &self.hold else {
            return Ok(match of_max_cost {
                Some(max) => crate::alerts::crossed(&self.alert_at, before, now, max, "--max-cost"),
                None => Vec::new(),
            });
        };
        hold.settle(now.saturating_sub(before))?;
        Ok(hold.alerts(&self.alert_at)?)
    }
}

/// A run's name in its trace (`gen_ai.workflow.name`), as a live session
/// and `ctx runs export --format otlp` both give it: the plan's goal, else
/// its file as given, else `plan`.
pub fn workflow_name(plan: &Plan, source: Option<&str>) -> String {
    plan.goal
        .clone()
        .or_else(|| source.map(str::to_string))
        .unwrap_or_else(|| "plan".to_string())
}

/// Runs `plan` on `engine` as `settings` say: one call for what `ctx run`
/// computes. Opens (or resumes) the store on the blocking pool, executes,
/// and records the session's end; the outcome's report is results.json
/// through [`crate::ResultsJson::of`], and [`crate::out_dir::write`] writes
/// the `--out` layout.
///
/// ```no_run
/// # async fn demo() -> Result<(), ctx_run::RunError> {
/// use std::sync::Arc;
/// let plan = ctx_checks::load_valid_plan(std::path::Path::new("plan.yaml")).unwrap();
/// let settings = ctx_run::RunSettings {
///     store: ctx_run::RunStore::Sqlite {
///         root: ctx_store_sqlite::RunRoot::new(".ctx/runs"),
///         start: ctx_run::Start::New,
///         cache: false,
///     },
///     ..ctx_run::RunSettings::default()
/// };
/// let outcome = ctx_run::run_plan(plan, Arc::new(ctx_deps::DryRunEngine), settings).await?;
/// assert!(outcome.report.all_completed());
/// # Ok(()) }
/// ```
pub async fn run_plan(
    plan: Plan,
    engine: Arc<dyn InferenceEngine>,
    settings: RunSettings,
) -> Result<RunOutcome, RunError> {
    tokio::task::spawn_blocking(move || RunSession::start(plan, engine, settings))
        .await??
        .execute()
        .await
}

/// What a run has spent over all its sessions, in either store: the
/// `cost_usd` of every result it ever recorded ([`total_cost`] of its whole
/// history). A task run again in a later session counts each time; a
/// reused task is not recorded again, so it counts once; in a shared store
/// a late commit refused by the fence counts too (its engine call was
/// made and paid for). A resumed run's budget starts from this.
pub fn spent(run: &dyn ctx_store::RunHistory) -> Result<ctx_cost::Usd, ctx_store::StoreError> {
    Ok(total_cost(&run.every_history()?))
}

/// The one rule for what a run spent, whatever stores it: the sum of the
/// known `cost_usd` of every result it recorded (a result without a price
/// adds nothing; [`ResultCost`]).
pub fn total_cost(rows: &[ctx_store::ResultRecord]) -> ctx_cost::Usd {
    rows.iter()
        .filter_map(|r| match ResultCost::of(&r.result) {
            ResultCost::Priced(c) | ResultCost::Added(c) => Some(c),
            ResultCost::Unpriced | ResultCost::AddedUnpriced | ResultCost::NoCost => None,
        })
        .fold(ctx_cost::Usd::ZERO, ctx_cost::Usd::saturating_add)
}

/// What one stored result says it cost: the rule [`total_cost`] sums a run
/// by and `ctx spend` ([`crate::spend`]) sums many runs by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultCost {
    /// Its stored `cost_usd`: what its calls cost, exactly ($0 for a
    /// cached output, a dry run, or a failure before any call).
    Priced(ctx_cost::Usd),
    /// A completed or failed execution with no `cost_usd`: the executor
    /// priced every call it could, so one of its models had no known price
    /// (or a failed call had no `max_tokens` to charge). Its cost is
    /// unknown, never $0.
    Unpriced,
    /// A row that records no execution's end (`in_progress`, `pending`,
    /// `skipped`) and no cost, or restates an unpriced row with nothing
    /// priced added.
    NoCost,
    /// A row restating the task's previous row with its `llm` summary
    /// calls added ([`ctx_model::ResultMetadata::restated`]): not another
    /// execution, and only what those calls cost, since the rest of its
    /// `cost_usd` was counted with the row it restates.
    Added(ctx_cost::Usd),
    /// A restating row whose summary calls could not be priced, the row
    /// restated being priced: the execution's cost is unknown.
    AddedUnpriced,
}

impl ResultCost {
    /// What `result` says it cost.
    pub fn of(result: &TaskExecutionResult) -> ResultCost {
        if let Some(r) = result.metadata.restated {
            return match (r.restated_usd, r.added_usd) {
                (_, Some(c)) => ResultCost::Added(c),
                (Some(_), None) => ResultCost::AddedUnpriced,
                (None, None) => ResultCost::NoCost,
            };
        }
        match (result.metadata.cost_usd, result.status) {
            (Some(c), _) => ResultCost::Priced(c),
            (None, TaskStatus::Completed | TaskStatus::Failed) => ResultCost::Unpriced,
            (None, _) => ResultCost::NoCost,
        }
    }
}

/// Refuses a plan with `judge` checks on an engine whose outputs are
/// placeholders: a judge needs a model to answer it, and a dry run would
/// otherwise pass over those checks without a word. Every session calls
/// it first ([`RunSession::start`], ctx-worker's shared session, the
/// eval): a front end makes no refusal of its own, it only says this
/// error well.
pub fn refuse_unjudgeable(plan: &Plan, engine: &dyn InferenceEngine) -> Result<(), RunError> {
    let checks = ctx_model::judge_checks(plan);
    if checks.is_empty() || engine.answers_prompts() {
        return Ok(());
    }
    Err(RunError::Unjudgeable {
        engine: engine.name().to_string(),
        checks,
    })
}
