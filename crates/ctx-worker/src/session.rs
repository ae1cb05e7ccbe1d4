//! One run on the shared store, as one library session: what `ctx run
//! PLAN --store postgres://…` computes, shaped like `ctx_run::RunSession`
//! for a local run. [`SharedSession::start`] opens the store, registers the
//! plan (or resumes a run by the local rules), and
//! [`SharedSession::execute_with`] works on it here as one worker, or only
//! follows it while other workers finish it; the outcome's report reads
//! like a local run's, every task priced as a local run prices it.
//!
//! The session knows no terminal, flag or exit code: claims and progress
//! go to the caller's [`SharedEvent`] callback, and errors are
//! [`SharedError`]s.

use std::sync::Arc;
use std::time::Duration;

use ctx_cost::Usd;
use ctx_deps::{ExecutorOptions, InferenceEngine, RunReport};
use ctx_model::{Plan, TaskStatus};
use ctx_run::run_costs::RunPricing;
use ctx_store::{ResumePlan, StatusCounts};
use ctx_store_postgres::PgStore;
use ctx_store_sqlite::RunRoot;
use tracing::Instrument;

use crate::runs::open;
use crate::shared::{Resume, SharedError, StartBudget, report, start};
use crate::{DEFAULT_LEASE, DEFAULT_POLL, Worker, WorkerEvent};

/// Everything a shared run needs besides the plan and the engine. The
/// default is a new run at no URL, followed only, with the executor's
/// defaults and no prices: name the URL and what differs.
#[derive(Debug, Clone, Default)]
pub struct SharedSettings {
    /// The store's postgres:// URL (the PG* variables fill what it leaves
    /// out).
    pub url: String,
    /// Resume this run instead of registering a new one.
    pub resume: Option<String>,
    /// With `resume`: tasks to run again with everything below them,
    /// though their stored results would be reused (`ctx run --resume RUN
    /// --rerun TASK`), as a local resume forces them
    /// ([`crate::shared::start`]). Refused without `resume`, or naming a
    /// task the plan does not have.
    pub rerun: Vec<String>,
    /// Work on the run here, as one worker; `false`: only follow it
    /// (`ctx run --no-local`).
    pub work_here: bool,
    /// Concurrency and the task bounds of the local worker. Its `cost` is
    /// not used: `pricing` prices each task.
    pub executor: ExecutorOptions,
    /// What each task's `cost_usd` is priced by (no budget: a budget's
    /// ledger lives in one process).
    pub pricing: RunPricing,
    /// Where the plan came from (the path as given), recorded for `ctx
    /// runs list`.
    pub plan_source: Option<String>,
    /// Answer identical requests from the input-hash cache under this
    /// root (this machine's, as for a local run).
    pub cache: Option<RunRoot>,
    /// The `--out` directory, created when the run starts (after the plan
    /// is found runnable, before the store is opened), as a local run's.
    pub out: Option<std::path::PathBuf>,
    /// What the plan was filled from ([`ctx_run::inputs`]), recorded with
    /// the run. A shared run holds no secret (workers run the stored
    /// plan), so its mask is empty.
    pub inputs: Option<ctx_store::RunInputs>,
    /// Where completed outputs are published once the run completes:
    /// this session writes them (whichever workers ran the tasks), from
    /// the final results read back from the store.
    pub publish: Option<ctx_run::publish::PublishTo>,
    /// `--alert-at`: the fractions of the period budget (else of
    /// `--max-cost`) to alert at when the run crosses them.
    pub alert_at: Vec<f64>,
    /// `--wait-approval`: how long the session keeps waiting for decisions
    /// when the run's open tasks all wait on approval gates.
    pub approval_wait: Option<std::time::Duration>,
}

impl SharedSettings {
    /// The plan and the shared session's settings of a resolved request
    /// ([`ctx_run::request`]) bound for the shared store `store`: the same
    /// request a local run starts from. Its refusals of what a shared
    /// store cannot keep were made when the request was resolved; its
    /// prices and budget are the workers' (each claim reserves its task's
    /// high end in the store).
    pub fn from_request(
        request: ctx_run::request::RunRequest,
        store: ctx_run::settings::SharedStore,
    ) -> (Plan, SharedSettings) {
        let settings = SharedSettings {
            url: store.url,
            resume: store.resume,
            rerun: request.rerun,
            work_here: store.work_here,
            executor: request.executor,
            pricing: request.pricing,
            plan_source: request.plan_source,
            cache: store.cache,
            out: request.out,
            publish: request.publish,
            inputs: request.inputs,
            alert_at: request.alert_at,
            approval_wait: request.approval_wait,
        };
        (request.plan, settings)
    }
}

/// What a caller hears while a shared run is worked on or followed.
#[derive(Debug)]
pub enum SharedEvent<'a> {
    /// What became of one of the local worker's claims.
    Claim(WorkerEvent<'a>),
    /// The run's counts changed (following only): told once per change.
    Progress {
        /// The run's tasks per status.
        counts: StatusCounts,
        /// The run's task count.
        tasks: usize,
    },
}

/// What a shared session produced.
#[derive(Debug)]
pub struct SharedOutcome<S> {
    /// Every task's latest result, read back from the store, in the shape
    /// a local run reports.
    pub report: RunReport,
    /// What stopped it, when the caller's stop future did.
    pub stopped: Option<S>,
    /// Statements this process sent (registration, claims, reads,
    /// commits, or the follower's polls).
    pub round_trips: u64,
    /// The files this session published once the run completed (none
    /// without [`SharedSettings::publish`], or when it was stopped).
    pub published: Vec<ctx_run::publish::Published>,
    /// The publish that failed, after those written.
    pub publish_error: Option<ctx_run::publish::PublishError>,
    /// The `--alert-at` thresholds the run crossed.
    pub alerts: Vec<ctx_run::alerts::Alert>,
    /// The cheaper tier of its period budget the run ran on.
    pub fallback: Option<ctx_model::FallbackChoice>,
    /// The approval gates left waiting: `before: run` tasks with no
    /// decision, then (when this session publishes) outputs no decision
    /// approved.
    pub waiting: Vec<ctx_run::gates::Waiting>,
    /// The outputs publishing held back (waiting, or rejected).
    pub withheld: Vec<ctx_run::gates::Withheld>,
}

/// `--rerun` ids are refused before the store is opened, as for a local
/// run: outside a resume, or naming a task the plan does not have.
fn check_rerun(plan: &Plan, settings: &SharedSettings) -> Result<(), SharedError> {
    if settings.rerun.is_empty() {
        return Ok(());
    }
    if settings.resume.is_none() {
        return Err(ctx_run::RunError::RerunWithoutResume.into());
    }
    ctx_store::check_rerun_ids(plan, &settings.rerun).map_err(|e| ctx_run::RunError::from(e).into())
}

/// A shared run that is registered (or resumed) and not yet worked on.
pub struct SharedSession {
    store: PgStore,
    run_id: String,
    resumed: Option<ResumePlan>,
    engine: Arc<dyn InferenceEngine>,
    settings: SharedSettings,
    /// The run's name in its trace (`ctx_run::workflow_name`).
    workflow: String,
    /// Its hold on its period budget.
    hold: Option<crate::period::SharedHold>,
    /// The cheaper tier it runs on.
    fallback: Option<ctx_model::FallbackChoice>,
    /// What the run's budget row held when this session started.
    held_start: Usd,
}

impl std::fmt::Debug for SharedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSession")
            .field("store", &self.store.display_url())
            .field("run_id", &self.run_id)
            .field("resumed", &self.resumed)
            .finish_non_exhaustive()
    }
}

impl SharedSession {
    /// Refuses a plan the engine cannot judge (as a local run does),
    /// opens the store, and registers `plan` or reopens the run to resume
    /// under it. The plan is stored redacted, as in run directories:
    /// workers run exactly what is stored. `plan` is the plan as it will
    /// run (overrides applied).
    pub async fn start(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        settings: SharedSettings,
    ) -> Result<SharedSession, SharedError> {
        ctx_run::refuse_unjudgeable(&plan, engine.as_ref())?;
        check_rerun(&plan, &settings)?;
        // A map's items are appended to the stored plan as it expands; a
        // run starts (or resumes) from the plan as written, and its maps
        // expand again.
        let plan = ctx_model::map::without_items(&plan);
        if let Some(dir) = &settings.out {
            ctx_run::out_dir::prepare(dir).map_err(ctx_run::RunError::Out)?;
        }
        let label = engine.label();
        let url = settings.url.clone();
        let store = tokio::task::spawn_blocking(move || open(&url))
            .await??
            .with_engine(&label);
        let engine = match &settings.cache {
            Some(root) => with_local_cache(engine, root)?,
            None => engine,
        };
        let mut plan = ctx_store::redact_plan(&plan);
        let mut settings = settings;
        let (fallback, hold) = take_period(&store, &mut plan, &mut settings, &label).await?;
        let workflow = ctx_run::workflow_name(&plan, settings.plan_source.as_deref());
        // Each task's high end, priced here once, so that a claim reserves
        // it in its own statement (a plan the budget cannot bound is
        // refused before this; its workers would refuse it too).
        let highs = match (
            settings.pricing.max_cost,
            settings.pricing.cost_options(&plan),
        ) {
            (Some(_), Ok(cost)) => crate::shared::high_ends(&plan, cost.model.as_ref()),
            _ => Vec::new(),
        };
        let started = start(
            &store,
            &plan,
            settings.plan_source.as_deref(),
            &label,
            settings.resume.as_deref().map(|run| Resume {
                run,
                rerun: &settings.rerun,
            }),
            settings.inputs.as_ref(),
            settings.pricing.max_cost.map(|max_cost| StartBudget {
                max_cost,
                highs: &highs,
            }),
        )
        .await;
        let started = match (started, &hold) {
            (Ok(started), _) => started,
            (Err(e), Some(h)) => {
                h.settle(&store, Usd::ZERO).await?;
                return Err(e);
            }
            (Err(e), None) => return Err(e),
        };
        if let Some(f) = &fallback {
            store.record_fallback(&started.run_id, f).await?;
        }
        let held_start = held(&store, &started.run_id).await?;
        Ok(SharedSession {
            store,
            run_id: started.run_id,
            resumed: started.resumed,
            engine,
            settings,
            workflow,
            hold,
            fallback,
            held_start,
        })
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The store's URL without its password.
    pub fn display_url(&self) -> &str {
        self.store.display_url()
    }

    /// The resume decisions, when this session resumes a run.
    pub fn resumed(&self) -> Option<&ResumePlan> {
        self.resumed.as_ref()
    }

    /// Works on the run here (or only follows it) until every task is
    /// terminal or `stop` resolves, telling `on_event` what happens; then
    /// reads the run's report back from the store. Fails only when the
    /// store does.
    pub async fn execute_with<F, S, E>(
        mut self,
        stop: F,
        mut on_event: E,
    ) -> Result<SharedOutcome<S>, SharedError>
    where
        F: std::future::Future<Output = S>,
        E: FnMut(SharedEvent<'_>),
    {
        // The run's root span (or, resumed, a child of it); the claims of
        // every worker, here or elsewhere, join the same trace.
        let span = ctx_deps::spans::workflow_span(
            &self.workflow,
            Some(&self.run_id),
            self.resumed.is_some(),
        );
        let stopped = if self.settings.work_here {
            self.worker()
                .run(stop, |e| on_event(SharedEvent::Claim(e)))
                .instrument(span)
                .await?
                .stopped
        } else {
            let wait = self.settings.approval_wait;
            follow(&self.store, &self.run_id, stop, wait, |counts, tasks| {
                on_event(SharedEvent::Progress { counts, tasks })
            })
            .instrument(span)
            .await?
        };
        let rows = self.store.tasks(&self.run_id).await?;
        let alerts = self.settle().await?;
        let reused = self.resumed.take().map(|r| r.reuse).unwrap_or_default();
        let mut report = report(&rows, reused, stopped.is_some());
        if let Some(budget) = self.settings.pricing.max_cost {
            budget_summary(
                &self.store,
                &self.run_id,
                &self.settings.pricing,
                budget,
                &mut report,
            )
            .await?;
        }
        // The run is complete (no open task is left, or only gated ones)
        // unless it was stopped: this session publishes its outputs, once,
        // as a local run's session does, but for those its gates hold
        // back, and records what it wrote with the run.
        let mut waiting = self.waiting_to_run(&mut report).await?;
        let gated = self.publish_gated(&report).await?;
        waiting.extend(ctx_run::gates::awaiting(&gated.withheld));
        let (published, publish_error) = (gated.published, gated.error);
        self.store
            .record_published(&self.run_id, &published)
            .await?;
        Ok(SharedOutcome {
            report,
            stopped,
            round_trips: self.store.round_trips(),
            published,
            publish_error,
            alerts,
            fallback: self.fallback,
            waiting,
            withheld: gated.withheld,
        })
    }

    /// The run's `before: run` gates with no decision (their tasks still
    /// `pending`), listed in `report.awaiting` too.
    async fn waiting_to_run(
        &self,
        report: &mut RunReport,
    ) -> Result<Vec<ctx_run::gates::Waiting>, SharedError> {
        // Only a task left pending can be held (and only then is the plan
        // read again).
        let pending = report
            .results
            .iter()
            .any(|r| r.status == TaskStatus::Pending);
        if report.interrupted || !pending {
            return Ok(Vec::new());
        }
        let plan = self.store.plan(&self.run_id).await?;
        let decisions = self.store.decisions(&self.run_id).await?;
        let waiting: Vec<_> =
            ctx_run::gates::waiting_in(&plan, &report.results, &decisions, &self.run_id)
                .into_iter()
                .filter(|w| w.stage == ctx_model::approval::GateStage::Run)
                .collect();
        report.awaiting = waiting.iter().map(|w| w.task_id.clone()).collect();
        Ok(waiting)
    }

    /// Publishes the run's completed outputs (with `--publish-root`) but
    /// those its `before: publish` gates hold back
    /// ([`ctx_run::gates::withhold`]); with `--wait-approval`, an output
    /// that waits is waited for, woken by each decision's notification,
    /// until the wait's end. What a file replaces is kept in the database
    /// first (a call that waits for the store: off the runtime's workers).
    async fn publish_gated(&self, report: &RunReport) -> Result<Gated, SharedError> {
        let Some(p) = &self.settings.publish else {
            return Ok(Gated::default());
        };
        let plan = self.store.plan(&self.run_id).await?;
        let listener = self.store.listen();
        let until = self
            .settings
            .approval_wait
            .map(|w| tokio::time::Instant::now() + w);
        loop {
            let decisions = self.store.decisions(&self.run_id).await?;
            let (open, withheld) = ctx_run::gates::withhold(
                &plan,
                &p.targets,
                &report.results,
                &decisions,
                Some(&self.run_id),
            );
            let waits = !ctx_run::gates::awaiting(&withheld).is_empty();
            if let Some(until) =
                until.filter(|u| waits && !report.interrupted && *u > tokio::time::Instant::now())
            {
                tokio::select! {
                    () = listener.ready() => {}
                    () = tokio::time::sleep_until(until) => {}
                }
                continue;
            }
            let (p, results) = (p.clone(), report.results.clone());
            let backups = crate::publish::PgBackups::new(self.store.clone(), &self.run_id);
            let interrupted = report.interrupted;
            let (published, error) = tokio::task::spawn_blocking(move || {
                ctx_run::publish::publish(&p.root, &open, &results, interrupted, Some(&backups))
            })
            .await?;
            return Ok(Gated {
                published,
                error,
                withheld,
            });
        }
    }

    /// Settles the hold on the period budget, if any, once the run is
    /// closed (a run still open may spend more under other workers: its
    /// hold stays), at what the run's budget row took since the session
    /// started; and returns the `--alert-at` thresholds crossed: of the
    /// period, else of `--max-cost`.
    async fn settle(&self) -> Result<Vec<ctx_run::alerts::Alert>, SharedError> {
        let alert_at = &self.settings.alert_at;
        let of_max_cost = self
            .settings
            .pricing
            .max_cost
            .filter(|_| !alert_at.is_empty());
        if self.hold.is_none() && of_max_cost.is_none() {
            return Ok(Vec::new());
        }
        let now = held(&self.store, &self.run_id).await?;
        let Some(hold) = &self.hold else {
            return Ok(of_max_cost.map_or_else(Vec::new, |max| {
                ctx_run::alerts::crossed(alert_at, self.held_start, now, max, "--max-cost")
            }));
        };
        let open = self
            .store
            .runs(Some(&self.run_id))
            .await?
            .first()
            .is_some_and(|r| r.open);
        if !open {
            hold.settle(&self.store, now.saturating_sub(self.held_start))
                .await?;
        }
        hold.alerts(&self.store, alert_at).await
    }

    /// The one worker of `ctx run --store`: this run only, until it is
    /// idle, with the run's concurrency.
    fn worker(&self) -> Worker {
        let options = &self.settings.executor;
        Worker {
            store: self.store.clone(),
            engine: Arc::clone(&self.engine),
            options: options.clone(),
            pricing: self.settings.pricing.clone(),
            run: Some(self.run_id.clone()),
            worker: worker_id(),
            concurrency: options.concurrency,
            lease: DEFAULT_LEASE,
            until_idle: true,
            // The run was registered by this session: it is open.
            first_run_wait: Duration::ZERO,
            poll: DEFAULT_POLL,
            approval_wait: self.settings.approval_wait,
        }
    }
}

/// The tier and the hold of a run under a period budget
/// ([`crate::period`]), taken before the run is registered: the tier is
/// applied to `plan`, and the run's budget in `settings` bounded by the
/// hold.
async fn take_period(
    store: &PgStore,
    plan: &mut Plan,
    settings: &mut SharedSettings,
    label: &str,
) -> Result<
    (
        Option<ctx_model::FallbackChoice>,
        Option<crate::period::SharedHold>,
    ),
    SharedError,
> {
    let source = settings.plan_source.clone();
    let resume = settings.resume.clone();
    let fallback = crate::period::tier(store, plan, source.as_deref(), resume.as_deref()).await?;
    let reused = match (&resume, &plan.config.budget) {
        (Some(run), Some(_)) => {
            crate::period::reused_by(store, run, plan, label, &settings.rerun).await?
        }
        _ => std::collections::HashSet::new(),
    };
    let hold =
        crate::period::hold(store, plan, source.as_deref(), &settings.pricing, &reused).await?;
    if let Some(h) = &hold {
        limit_to_hold(store, settings, h.high).await?;
    }
    Ok((fallback, hold))
}

/// What `run_id`'s budget row holds: every reservation still open and
/// every cost a commit settled (zero without a budget).
async fn held(store: &PgStore, run_id: &str) -> Result<Usd, SharedError> {
    Ok(store
        .budget(run_id)
        .await?
        .map_or(Usd::ZERO, |(_, held)| held))
}

/// Bounds the run by its hold on its period: the run's budget in the
/// store becomes what it held before this session (a resume's) plus the
/// hold, or stays the smaller `--max-cost` given.
async fn limit_to_hold(
    store: &PgStore,
    settings: &mut SharedSettings,
    high: Usd,
) -> Result<(), SharedError> {
    let before = match &settings.resume {
        Some(run) => held(store, run).await?,
        None => Usd::ZERO,
    };
    let limit = before.saturating_add(high);
    settings.pricing.max_cost = Some(settings.pricing.max_cost.map_or(limit, |m| m.min(limit)));
    Ok(())
}

/// How often a follower reads the run's counts.
const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// Tells `on_change` the run's counts whenever they change, until it is
/// closed (or removed), its open tasks all wait on approval gates (past
/// `approval_wait`, counted from then) or `stop` resolves, whose output
/// is returned.
async fn follow<F, S>(
    store: &PgStore,
    run_id: &str,
    stop: F,
    approval_wait: Option<Duration>,
    mut on_change: impl FnMut(StatusCounts, usize),
) -> Result<Option<S>, SharedError>
where
    F: std::future::Future<Output = S>,
{
    tokio::pin!(stop);
    let mut last = None;
    let mut waiting_since: Option<tokio::time::Instant> = None;
    loop {
        let Some(info) = store.runs(Some(run_id)).await?.into_iter().next() else {
            return Ok(None);
        };
        // What a follower shows: a change of pending alone is none.
        let c = info.counts;
        let now = (c.completed, c.failed, c.skipped, c.in_progress);
        if last != Some(now) {
            on_change(c, info.task_count);
            last = Some(now);
        }
        if !info.open {
            return Ok(None);
        }
        if !store.has_open_runs(Some(run_id), false).await? {
            let since = *waiting_since.get_or_insert_with(tokio::time::Instant::now);
            if approval_wait.is_none_or(|w| since.elapsed() >= w) {
                return Ok(None);
            }
        }
        tokio::select! {
            s = &mut stop => return Ok(Some(s)),
            () = tokio::time::sleep(FOLLOW_POLL) => {}
        }
    }
}

/// What [`SharedSession::publish_gated`] did.
#[derive(Default)]
struct Gated {
    published: Vec<ctx_run::publish::Published>,
    error: Option<ctx_run::publish::PublishError>,
    withheld: Vec<ctx_run::gates::Withheld>,
}

/// A worker's id: host, process, and a random suffix, so two workers on
/// one host (or a restarted one) are told apart in the claims.
pub fn worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    let mut b = [0u8; 2];
    let _ = getrandom::fill(&mut b);
    format!(
        "{host}-{}-{:04x}",
        std::process::id(),
        u16::from_be_bytes(b)
    )
}

/// `engine` answering identical requests from the input-hash cache under
/// `root` (`ctx run --cache`'s, this machine's): a worker's cache is its
/// own, as its rate limits are.
pub fn with_local_cache(
    engine: Arc<dyn InferenceEngine>,
    root: &RunRoot,
) -> Result<Arc<dyn InferenceEngine>, ctx_store_sqlite::Error> {
    let cache = root.cache()?;
    let identity = engine.cache_identity();
    Ok(Arc::new(ctx_store_sqlite::CachingEngine::new(
        engine,
        Arc::new(cache),
        identity,
        None,
    )))
}

/// The budget in the report's cost summary, as a local run shows it:
/// the run's budget, and what the tasks it skipped (their dependents
/// included) need by their high ends, priced by this session.
async fn budget_summary(
    store: &PgStore,
    run_id: &str,
    pricing: &RunPricing,
    budget: Usd,
    report: &mut RunReport,
) -> Result<(), SharedError> {
    let Some(cost) = report.cost.as_mut() else {
        return Ok(());
    };
    cost.budget = Some(budget);
    let skipped: std::collections::HashSet<&str> = report
        .results
        .iter()
        .filter(|r| ctx_deps::is_budget_skip(r))
        .map(|r| r.task_id.as_str())
        .collect();
    if skipped.is_empty() {
        return Ok(());
    }
    let (plan, _) = store.plan_and_hash(run_id).await?;
    if let Ok(options) = pricing.cost_options(&plan) {
        cost.needed = plan
            .sub_tasks
            .iter()
            .filter(|t| skipped.contains(&t.id.as_str()))
            .filter_map(|t| options.model.bound(t))
            .sum();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library caller's `--rerun` is refused as the CLI's is: outside a
    /// resume, or naming a task the plan does not have (before the store
    /// at the URL, here unreachable, is opened).
    #[test]
    fn a_rerun_needs_a_resume_and_a_task_of_the_plan() {
        let plan = ctx_test_support::plan(&[("a", &[]), ("b", &["a"])]);
        let mut settings = SharedSettings {
            url: "postgres://nobody@127.0.0.1:1/none".into(),
            rerun: vec!["b".into()],
            ..SharedSettings::default()
        };
        let said = |s: &SharedSettings| check_rerun(&plan, s).map_err(|e| e.to_string());
        assert_eq!(
            said(&settings),
            Err("--rerun needs a stored run to resume (--resume RUN)".into())
        );
        settings.resume = Some("r1".into());
        assert_eq!(said(&settings), Ok(()));
        settings.rerun = vec!["B".into()];
        assert_eq!(
            said(&settings),
            Err("--rerun B: no such task in the plan (near: b)".into())
        );
    }

    /// Two workers on one host are told apart: host, process, a random
    /// suffix of four hex digits.
    #[test]
    fn a_worker_id_names_host_process_and_a_random_suffix() {
        let id = worker_id();
        let (rest, suffix) = id.rsplit_once('-').unwrap();
        assert_eq!(suffix.len(), 4);
        assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert!(rest.ends_with(&format!("-{}", std::process::id())), "{id}");
    }

    /// The cached engine answers under the engine's own label (what a
    /// resume compares) and keeps the cache index under the root.
    #[test]
    fn a_local_cache_wraps_the_engine_under_the_root() {
        let dir = std::env::temp_dir().join(format!("ctx-worker-cache-{}", std::process::id()));
        let root = RunRoot::new(&dir);
        let engine: Arc<dyn InferenceEngine> = Arc::new(ctx_deps::DryRunEngine);
        let cached = with_local_cache(Arc::clone(&engine), &root).unwrap();
        assert_eq!(cached.label(), engine.label());
        assert!(dir.join("cache.sqlite").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
