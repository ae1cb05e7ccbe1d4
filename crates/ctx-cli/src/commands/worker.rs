//! `ctx worker --store URL`: work on the runs of a shared PostgreSQL store,
//! and the shared-store side of `ctx run --store URL` and `ctx runs`.
//!
//! A worker loops: claim the ready task with the longest remaining path
//! (in `--run RUN`, or in any open run), run it with the executor's own task
//! body (`ctx_deps::TaskRunner`: dependency results read from the store,
//! prompt assembled under the cap, the engine bounded in time and output),
//! renew the claim's lease while the engine runs, and commit the result
//! under the claim. Up to `--concurrency` tasks are in flight. A claim
//! whose lease is lost (the worker was too slow, the network partitioned)
//! stops its task; a late result is refused by the store, counted and
//! logged. Engine flags, rate limits and caches are this worker's own.
//!
//! SIGTERM, SIGINT or SIGHUP: no new claims; the tasks in flight are
//! stopped (commands killed, requests aborted) and their claims released,
//! so another worker takes them at once instead of after the lease.
//!
//! Exit codes: 0 stopped because `--until-idle` found no open run left,
//! 2 usage (a bad `--store`, an unknown `--run`), 4 the store could not be
//! opened or stopped answering (unreachable, authentication refused, a
//! newer schema, a foreign database), 129 / 130 / 143 stopped by SIGHUP /
//! SIGINT / SIGTERM after releasing its claims.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ctx_deps::{ExecutorOptions, InferenceEngine, PlanGraph, RunReport, TaskRunner};
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store_postgres::{
    Claim, ClaimStore, Commit, Error as PgError, PgStore, RegisterRun, StoreOptions, StoreUrl,
};

use super::run::{Executed, Output, StopSignal, StopSignals};
use crate::engines::{self, EngineArgs};
use crate::exit::{CliError, CliResult, Exit};

/// The default lease of a claim.
pub const DEFAULT_LEASE_SECS: f64 = 60.0;

/// Arguments of `ctx worker`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shared store: postgres://USER:PASSWORD@HOST:PORT/DB (the PG*
    /// variables fill what it leaves out). Default: $CTX_STORE.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Work on this run only (default: every open run, critical path first).
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,

    /// Most tasks this worker runs at once.
    #[arg(long, value_name = "N", default_value_t = ctx_deps::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,

    /// Exit once no open run is left (every task of every run it may work
    /// on is terminal) instead of waiting for new runs.
    #[arg(long)]
    pub until_idle: bool,

    /// A claim's lease in seconds: renewed every third of it while the
    /// task runs; a worker that stops renewing (killed, partitioned) loses
    /// its tasks to other workers after this long.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_LEASE_SECS)]
    pub lease: f64,

    /// Stop a task's engine call after this many seconds; 0 means no limit.
    #[arg(long, value_name = "SECS", default_value_t = ctx_deps::DEFAULT_TASK_TIMEOUT.as_secs_f64())]
    pub task_timeout: f64,

    /// Most bytes one task's output may have.
    #[arg(long, value_name = "BYTES", default_value_t = ctx_deps::DEFAULT_MAX_OUTPUT_BYTES)]
    pub max_output_bytes: usize,

    /// Reuse outputs of identical requests (engine, model, params, final
    /// prompt) from this machine's cache (ROOT/cache.sqlite, the one local
    /// runs use): each worker has its own, as its own rate limits.
    #[arg(long)]
    pub cache: bool,

    /// Where the local cache lives [default: .ctx/runs].
    #[arg(long, value_name = "DIR", requires = "cache")]
    pub root: Option<PathBuf>,

    /// How long to wait between claims when nothing is ready, in
    /// milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100, hide = true)]
    pub poll_ms: u64,
}

/// `--store URL` or `$CTX_STORE`: `None` for the local SQLite store
/// (`sqlite`, or neither given), the URL of a PostgreSQL store, or a usage
/// error for anything else.
pub fn shared_store_url(flag: Option<&str>) -> Result<Option<String>, CliError> {
    let value = match flag {
        Some(v) => Some(v.to_string()),
        None => std::env::var("CTX_STORE").ok().filter(|v| !v.is_empty()),
    };
    match value {
        None => Ok(None),
        Some(v) if v == "sqlite" => Ok(None),
        Some(v) if ctx_store_postgres::is_postgres_url(&v) => Ok(Some(v)),
        Some(v) => Err(CliError::usage(format!(
            "--store: `{}` is neither `sqlite` nor a postgres:// URL",
            ctx_store_postgres::redact(&v)
        ))),
    }
}

/// Opens the store at `url`: exit 2 for a URL that cannot be read, 4 when
/// it cannot be opened.
pub fn open_store(url: &str) -> Result<PgStore, CliError> {
    let parsed = StoreUrl::parse(url, |k| std::env::var(k).ok()).map_err(pg_error)?;
    PgStore::open(&parsed, StoreOptions::default()).map_err(pg_error)
}

/// A store error as a CLI error: a bad URL or an unknown run is usage
/// (2), everything else a store failure (4).
pub fn pg_error(e: PgError) -> CliError {
    match e {
        PgError::Url { .. } | PgError::NoRun { .. } => CliError::usage(e),
        e => CliError::with(Exit::Store, e),
    }
}

fn secs(flag: &str, s: f64) -> Result<Option<Duration>, CliError> {
    if !s.is_finite() || s < 0.0 {
        return Err(CliError::usage(format!(
            "{flag}: `{s}` is not a number of seconds"
        )));
    }
    if s == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(s)
        .map(Some)
        .map_err(|e| CliError::usage(format!("{flag} {s}: {e}")))
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::with(Exit::Store, format!("cannot start the async runtime: {e}")))
}

/// This worker's id: host, process, and a random suffix.
fn worker_id() -> String {
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

/// Runs `ctx worker`.
pub fn run(args: Args) -> CliResult {
    let Some(url) = shared_store_url(args.store.as_deref())? else {
        return Err(CliError::usage(
            "ctx worker needs a shared store: --store postgres://... (or CTX_STORE)",
        ));
    };
    if args.concurrency == 0 {
        return Err(CliError::usage("--concurrency must be at least 1"));
    }
    let lease = secs("--lease", args.lease)?
        .ok_or_else(|| CliError::usage("--lease must be more than 0 seconds"))?;
    super::run::check_max_output_bytes(args.max_output_bytes)?;
    let options = ExecutorOptions {
        task_timeout: super::run::task_timeout(args.task_timeout)?,
        max_output_bytes: args.max_output_bytes,
        ..ExecutorOptions::default()
    };
    let engine = engines::build(&args.engine)?;
    let engine = if args.cache {
        with_local_cache(engine, &args.engine, args.root.as_deref())?
    } else {
        engine
    };
    let store = open_store(&url)?;
    let rt = runtime()?;
    let me = worker_id();
    if let Some(run) = &args.run {
        rt.block_on(store.runs(Some(run))).map_err(pg_error)?;
    }
    eprintln!(
        "worker {me} on {}{}",
        store.display_url(),
        args.run
            .as_ref()
            .map_or_else(String::new, |r| format!(", run {r}"))
    );
    let work = Work {
        store,
        engine,
        options,
        run: args.run,
        worker: me,
        concurrency: args.concurrency,
        lease,
        until_idle: args.until_idle,
        poll: Duration::from_millis(args.poll_ms.max(1)),
        log: true,
    };
    let outcome = rt.block_on(async {
        let signals = StopSignals::install();
        work.run(signals.first()).await
    })?;
    eprintln!(
        "worker {}: {} committed, {} late (refused), {} released, {} round trips",
        work.worker,
        outcome.committed,
        outcome.refused,
        outcome.released,
        work.store.round_trips()
    );
    Ok(outcome.signal.map_or(Exit::Ok, StopSignal::exit))
}

/// `engine` answering identical requests from the local cache under
/// `root` (`.ctx/runs` by default), as `ctx run --cache` does.
pub fn with_local_cache(
    engine: Arc<dyn InferenceEngine>,
    args: &EngineArgs,
    root: Option<&std::path::Path>,
) -> Result<Arc<dyn InferenceEngine>, CliError> {
    let root = ctx_store_sqlite::RunRoot::new(root.map_or_else(
        || PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT),
        PathBuf::from,
    ));
    let cache = root.cache().map_err(super::runs::store_error)?;
    Ok(Arc::new(ctx_store_sqlite::CachingEngine::new(
        engine,
        Arc::new(cache),
        engines::cache_identity(args),
        None,
    )))
}

/// What a worker loop did.
#[derive(Debug, Default)]
pub struct Worked {
    /// Results committed.
    pub committed: usize,
    /// Results refused as late.
    pub refused: usize,
    /// Claims given back on a stop signal.
    pub released: usize,
    /// The signal that stopped it.
    pub signal: Option<StopSignal>,
}

/// One worker loop's settings.
pub struct Work {
    store: PgStore,
    engine: Arc<dyn InferenceEngine>,
    options: ExecutorOptions,
    run: Option<String>,
    worker: String,
    concurrency: usize,
    lease: Duration,
    until_idle: bool,
    poll: Duration,
    log: bool,
}

/// A run's plan, loaded once per worker.
struct RunPlan {
    runner: TaskRunner,
}

impl RunPlan {
    /// The transitive dependents of `task` with the reason each is
    /// skipped when it fails, worded as the local executor words it.
    fn skips(&self, task: &str) -> Vec<(String, String)> {
        let g: &PlanGraph = self.runner.graph();
        let Some(i) = g.index_of(task) else {
            return Vec::new();
        };
        g.transitive_dependents(i)
            .into_iter()
            .map(|d| {
                (
                    g.id(d).to_string(),
                    ctx_deps::skip_reason(task, g.dependencies(d).contains(&i)),
                )
            })
            .collect()
    }
}

enum TaskEnd {
    /// The task body ended; the store's word on its commit.
    Done(
        Box<Result<TaskExecutionResult, ctx_deps::StoreError>>,
        Option<Commit>,
    ),
    /// The lease was lost while the engine ran: the task was stopped.
    Lost,
}

impl Work {
    fn say(&self, line: &str) {
        if self.log {
            eprintln!("worker {}: {line}", self.worker);
        }
    }

    async fn plan_of(
        &self,
        plans: &mut HashMap<String, Arc<RunPlan>>,
        run_id: &str,
    ) -> Result<Arc<RunPlan>, String> {
        if let Some(p) = plans.get(run_id) {
            return Ok(Arc::clone(p));
        }
        let plan: Plan = self.store.plan(run_id).await.map_err(|e| e.to_string())?;
        let runner = TaskRunner::new(plan, Arc::clone(&self.engine), &self.options)
            .map_err(|e| format!("run `{run_id}`: {e}"))?;
        let p = Arc::new(RunPlan { runner });
        plans.insert(run_id.to_string(), Arc::clone(&p));
        Ok(p)
    }

    /// Claims and runs tasks until `--until-idle` finds no open run or
    /// `stop` resolves (then in-flight tasks are stopped and released).
    pub async fn run<S>(&self, stop: S) -> Result<Worked, CliError>
    where
        S: std::future::Future<Output = StopSignal>,
    {
        let mut plans: HashMap<String, Arc<RunPlan>> = HashMap::new();
        let mut running: tokio::task::JoinSet<(Claim, TaskEnd)> = tokio::task::JoinSet::new();
        let mut held: HashMap<tokio::task::Id, Claim> = HashMap::new();
        let mut worked = Worked::default();
        tokio::pin!(stop);
        loop {
            let mut claimed_any = false;
            while running.len() < self.concurrency {
                let claim = self
                    .store
                    .claim(self.run.as_deref(), &self.worker, self.lease)
                    .await
                    .map_err(pg_error)?;
                let Some(claim) = claim else { break };
                claimed_any = true;
                let plan = match self.plan_of(&mut plans, &claim.run_id).await {
                    Ok(p) => p,
                    Err(message) => {
                        // A stored plan this worker cannot run: the task
                        // fails with the reason, and the worker goes on.
                        let mut r = TaskExecutionResult::new(&claim.task_id, TaskStatus::Failed);
                        r.error = Some(message);
                        self.store
                            .complete(&claim, &r, &[])
                            .await
                            .map_err(pg_error)?;
                        continue;
                    }
                };
                let skips = plan.skips(&claim.task_id);
                let store = self.store.clone();
                let lease = self.lease;
                let c = claim.clone();
                let handle = running.spawn(async move {
                    let cs = Arc::new(ClaimStore::new(store.clone(), c.clone(), skips));
                    let beat = async {
                        loop {
                            tokio::time::sleep(lease / 3).await;
                            match store.heartbeat(&c, lease).await {
                                Ok(true) => {}
                                Ok(false) => return,
                                // The store retries within its reconnect
                                // window; past it the lease will lapse.
                                Err(_) => {}
                            }
                        }
                    };
                    let end = tokio::select! {
                        biased;
                        r = plan.runner.run_task(&c.task_id, cs.clone()) => TaskEnd::Done(Box::new(r), cs.outcome()),
                        () = beat => TaskEnd::Lost,
                    };
                    if let TaskEnd::Lost = end {
                        // The engine call was stopped (dropped). What it
                        // was doing is recorded as this attempt's result,
                        // which the fence refuses: a late commit, counted
                        // and kept in the history like any other.
                        // A terminal write of the body may still be under
                        // way on a blocking thread: closing waits for it,
                        // and when it happened there is nothing to record.
                        let closer = Arc::clone(&cs);
                        let recorded = tokio::task::spawn_blocking(move || closer.close())
                            .await
                            .ok()
                            .flatten();
                        if recorded.is_none() {
                            let mut r =
                                TaskExecutionResult::new(&c.task_id, TaskStatus::Failed);
                            r.error = Some(format!(
                                "lease lost: the engine call was stopped (worker {})",
                                c.worker
                            ));
                            let _ = store.complete(&c, &r, &[]).await;
                        }
                    }
                    (c, end)
                });
                held.insert(handle.id(), claim);
            }
            if running.is_empty() && !claimed_any && self.until_idle {
                let open = self
                    .store
                    .has_open_runs(self.run.as_deref())
                    .await
                    .map_err(pg_error)?;
                if !open {
                    break;
                }
            }
            let joined = tokio::select! {
                biased;
                sig = &mut stop => {
                    worked.signal = Some(sig);
                    break;
                }
                Some(j) = running.join_next_with_id(), if !running.is_empty() => Some(j),
                () = tokio::time::sleep(self.poll), if !claimed_any => None,
                // Claimed something and has room: try to claim more at once.
                () = std::future::ready(()), if claimed_any && running.len() < self.concurrency => None,
                else => None,
            };
            if let Some(j) = joined {
                self.settle(j, &mut held, &mut worked);
            }
        }
        // Stopped by a signal: stop what runs and give the claims back.
        // A task that ended before the abort took effect is settled as
        // usual; an aborted one keeps its claim in `held`.
        running.abort_all();
        while let Some(j) = running.join_next_with_id().await {
            if j.is_ok() {
                self.settle(j, &mut held, &mut worked);
            }
        }
        for (_, claim) in held.drain() {
            if self.store.release(&claim).await.unwrap_or(false) {
                worked.released += 1;
                self.say(&format!(
                    "released task `{}` of run {} (attempt {})",
                    claim.task_id, claim.run_id, claim.attempt
                ));
            }
        }
        Ok(worked)
    }

    fn settle(
        &self,
        joined: Result<(tokio::task::Id, (Claim, TaskEnd)), tokio::task::JoinError>,
        held: &mut HashMap<tokio::task::Id, Claim>,
        worked: &mut Worked,
    ) {
        let (id, (claim, end)) = match joined {
            Ok(v) => v,
            Err(e) => {
                // The task body panicked (an engine bug): its claim stays
                // held and is released at the stop, or lapses.
                let claim = held.get(&e.id()).cloned();
                if let Some(c) = claim {
                    self.say(&format!(
                        "task `{}` of run {} panicked",
                        c.task_id, c.run_id
                    ));
                }
                return;
            }
        };
        held.remove(&id);
        let what = format!(
            "task `{}` of run {} (attempt {})",
            claim.task_id, claim.run_id, claim.attempt
        );
        let end = match end {
            TaskEnd::Done(r, c) => Some((*r, c)),
            TaskEnd::Lost => None,
        };
        match end {
            Some((Ok(result), Some(Commit::Committed))) => {
                worked.committed += 1;
                self.say(&format!("{what}: {}", result.status.as_str()));
            }
            Some((Ok(_), Some(Commit::Refused))) | None => {
                worked.refused += 1;
                // Always said, even by `ctx run`'s quiet local worker.
                eprintln!(
                    "worker {}: {what}: late commit refused: the lease lapsed and the task belongs to another claim now",
                    self.worker
                );
            }
            Some((Ok(_), None)) => {
                self.say(&format!("{what}: ended without a result"));
            }
            Some((Err(e), _)) => {
                self.say(&format!("{what}: store error, the claim will lapse: {e}"));
            }
        }
    }
}

/// `ctx run PLAN --store URL`: registers the run, then works on it here
/// (as one worker with `--concurrency`) unless `no_local`, in which case it
/// follows the run's progress until workers finish it; prints the summary
/// from the store as `ctx run` does.
#[allow(clippy::too_many_arguments)]
pub fn run_on_shared_store(
    url: &str,
    plan: Plan,
    plan_source: Option<&str>,
    label: &str,
    engine: Arc<dyn InferenceEngine>,
    options: ExecutorOptions,
    output: &Output<'_>,
    no_local: bool,
    resume: Option<&str>,
) -> CliResult {
    let store = open_store(url)?;
    let graph = PlanGraph::new(&plan)
        .map_err(|e| CliError::usage(format!("{}: {e}", output.plan_path.display())))?;
    let priorities: Vec<u64> = (0..graph.len()).map(|i| graph.remaining_path(i)).collect();
    // Workers run the stored plan: secrets are redacted as in run directories.
    let plan = ctx_store_sqlite::redact_plan(&plan);
    let rt = runtime()?;
    let run_id = match resume {
        Some(run) => {
            // A shared run is resumed as stored: failed and skipped tasks
            // run again, completed ones are reused. A changed plan would
            // need the fingerprint comparison of the local store.
            let stored = rt.block_on(store.runs(Some(run))).map_err(pg_error)?;
            let hash = stored.first().map(|r| r.plan_hash.as_str());
            if PgStore::plan_hash(&plan).as_deref() != hash {
                return Err(CliError::usage(format!(
                    "run {run}: the plan differs from the one stored (a changed file, or --max-prompt-tokens or --tokenizer); a shared run resumes its stored plan only: leave out PLAN and those flags"
                )));
            }
            let (rerun, _) = rt.block_on(store.reopen_run(run)).map_err(pg_error)?;
            eprintln!(
                "resuming run {run} in {}: {rerun} to run again",
                store.display_url()
            );
            run.to_string()
        }
        None => {
            let id = rt
                .block_on(store.register_run(&RegisterRun {
                    plan: &plan,
                    priorities: &priorities,
                    engine: label,
                    plan_source,
                }))
                .map_err(pg_error)?;
            eprintln!("run {id} registered in {}", store.display_url());
            id
        }
    };
    let signal = if no_local {
        rt.block_on(async {
            let signals = StopSignals::install();
            follow(&store, &run_id, signals.first()).await
        })?
    } else {
        let work = Work {
            store: store.clone(),
            engine,
            options: options.clone(),
            run: Some(run_id.clone()),
            worker: worker_id(),
            concurrency: if options.concurrency == 0 {
                usize::MAX
            } else {
                options.concurrency
            },
            lease: Duration::from_secs_f64(DEFAULT_LEASE_SECS),
            until_idle: true,
            poll: Duration::from_millis(100),
            log: false,
        };
        rt.block_on(async {
            let signals = StopSignals::install();
            work.run(signals.first()).await
        })?
        .signal
    };
    let rows = rt.block_on(store.tasks(&run_id)).map_err(pg_error)?;
    let mut started: Vec<(i64, &str)> = rows
        .iter()
        .filter_map(|r| Some((r.claim_seq?, r.task_id.as_str())))
        .collect();
    started.sort_unstable();
    let report = RunReport {
        order: started.iter().map(|(_, id)| id.to_string()).collect(),
        results: rows
            .iter()
            .map(|r| {
                r.result
                    .clone()
                    .filter(|_| r.status != TaskStatus::Pending)
                    .unwrap_or_else(|| TaskExecutionResult::new(&r.task_id, r.status))
            })
            .collect(),
        reused: Vec::new(),
        interrupted: signal.is_some(),
        makespan: Duration::ZERO,
        // As a local run sums them: the known costs of the tasks that ran
        // (a budget spans one process, so there is none here).
        cost: Some(shared_cost(&rows)),
    };
    let executed = Executed { report, signal };
    let exit = super::run::report_run(&executed, output)?;
    if signal.is_some() {
        eprintln!(
            "run {run_id} stays open in {}: workers can finish it",
            store.display_url()
        );
    } else {
        eprintln!("run {run_id} stored in {}", store.display_url());
    }
    Ok(exit)
}

/// The plan stored for `run` in the shared store at `url`, named for
/// messages, for `ctx run --store URL --resume RUN` without a PLAN.
pub fn shared_plan(url: &str, run: &str) -> Result<(Plan, PathBuf, Option<String>), CliError> {
    let store = open_store(url)?;
    let rt = runtime()?;
    let plan = rt.block_on(store.plan(run)).map_err(pg_error)?;
    let source = rt
        .block_on(store.runs(Some(run)))
        .map_err(pg_error)?
        .into_iter()
        .next()
        .and_then(|r| r.plan_source);
    let shown = PathBuf::from(format!(
        "{} (the plan stored in run {run})",
        source.as_deref().unwrap_or("<plan>")
    ));
    Ok((plan, shown, source))
}

/// Prints a line to stderr whenever the run's counts change, until it is
/// closed or `stop` resolves.
async fn follow<S>(store: &PgStore, run_id: &str, stop: S) -> Result<Option<StopSignal>, CliError>
where
    S: std::future::Future<Output = StopSignal>,
{
    tokio::pin!(stop);
    let mut last = None;
    loop {
        let info = store.runs(Some(run_id)).await.map_err(pg_error)?;
        let Some(info) = info.into_iter().next() else {
            return Ok(None);
        };
        let c = info.counts;
        let now = (c.completed, c.failed, c.skipped, c.in_progress);
        if last != Some(now) {
            eprintln!(
                "run {run_id}: {} of {} completed, {} failed, {} skipped, {} running",
                c.completed, info.task_count, c.failed, c.skipped, c.in_progress
            );
            last = Some(now);
        }
        if !info.open {
            return Ok(None);
        }
        tokio::select! {
            sig = &mut stop => return Ok(Some(sig)),
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

/// `ctx runs list --store URL`.
pub fn runs_list(url: &str, format: crate::format::Format) -> CliResult {
    let store = open_store(url)?;
    let runs = runtime()?.block_on(store.runs(None)).map_err(pg_error)?;
    match format {
        crate::format::Format::Json => {
            let v: Vec<serde_json::Value> = runs.iter().map(run_json).collect();
            crate::io::print_stdout(&crate::io::json_text(&v)?)?;
        }
        crate::format::Format::Text => {
            let mut out = String::new();
            if runs.is_empty() {
                out.push_str(&format!("no runs in {}\n", store.display_url()));
            }
            for r in &runs {
                let c = r.counts;
                out.push_str(&format!(
                    "{}  {:<9}  {}  {}/{} completed  {} failed  {} skipped  {} running  {} late  {}  {}\n",
                    r.run_id,
                    run_state(r),
                    r.created_at,
                    c.completed,
                    r.task_count,
                    c.failed,
                    c.skipped,
                    c.in_progress,
                    r.late_commits,
                    r.engine,
                    r.plan_source.as_deref().unwrap_or("-"),
                ));
            }
            crate::io::print_stdout(&out)?;
        }
    }
    Ok(Exit::Ok)
}

fn run_state(r: &ctx_store_postgres::RunInfo) -> &'static str {
    if r.open {
        if r.counts.in_progress > 0 {
            "running"
        } else {
            "open"
        }
    } else if r.counts.completed == r.task_count {
        "completed"
    } else {
        "failed"
    }
}

fn run_json(r: &ctx_store_postgres::RunInfo) -> serde_json::Value {
    let c = r.counts;
    serde_json::json!({
        "run_id": r.run_id,
        "state": run_state(r),
        "created_at": r.created_at,
        "finished_at": r.finished_at,
        "engine": r.engine,
        "plan_source": r.plan_source,
        "plan_hash": r.plan_hash,
        "tasks": r.task_count,
        "counts": {"pending": c.pending, "in_progress": c.in_progress, "completed": c.completed,
                   "failed": c.failed, "skipped": c.skipped},
        "late_commits": r.late_commits,
        "reclaims": r.reclaims,
    })
}

/// `ctx runs show RUN --store URL [--task ID]`.
pub fn runs_show(
    url: &str,
    run_id: &str,
    task: Option<&str>,
    format: crate::format::Format,
) -> CliResult {
    let store = open_store(url)?;
    let rt = runtime()?;
    let info = rt.block_on(store.runs(Some(run_id))).map_err(pg_error)?;
    let rows = rt.block_on(store.tasks(run_id)).map_err(pg_error)?;
    let json = matches!(format, crate::format::Format::Json);
    if let Some(id) = task {
        let Some(row) = rows.iter().find(|r| r.task_id == id) else {
            return Err(CliError::usage(format!("run {run_id} has no task `{id}`")));
        };
        let result = row
            .result
            .clone()
            .unwrap_or_else(|| TaskExecutionResult::new(&row.task_id, row.status));
        if json {
            let mut v = serde_json::to_value(super::run::TaskJson::of(&result))
                .unwrap_or(serde_json::Value::Null);
            v["attempt"] = row.attempt.into();
            crate::io::print_stdout(&crate::io::json_text(&v)?)?;
        } else {
            let mut out = format!(
                "task {}: {} (attempt {})\n",
                row.task_id,
                row.status.as_str(),
                row.attempt
            );
            if let Some(e) = &result.error {
                out.push_str(&format!("error: {e}\n"));
            }
            if let Some(p) = &result.prompt {
                out.push_str(&format!("--- prompt ---\n{p}\n"));
            }
            if result.status == TaskStatus::Completed {
                out.push_str(&format!("--- output ---\n{}\n", result.output));
            }
            crate::io::print_stdout(&out)?;
        }
        return Ok(Exit::Ok);
    }
    if json {
        let tasks: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"task_id": r.task_id, "status": r.status.as_str(),
                    "attempt": r.attempt, "started_at": r.started_at, "finished_at": r.finished_at,
                    "error": r.result.as_ref().and_then(|x| x.error.clone())})
            })
            .collect();
        let mut v = info.first().map(run_json).unwrap_or_default();
        v["task_rows"] = tasks.into();
        crate::io::print_stdout(&crate::io::json_text(&v)?)?;
    } else {
        let mut out = String::new();
        if let Some(r) = info.first() {
            out.push_str(&format!(
                "run {} ({}) in {}: {} late commits refused\n",
                r.run_id,
                run_state(r),
                store.display_url(),
                r.late_commits
            ));
        }
        for r in &rows {
            let err = r
                .result
                .as_ref()
                .and_then(|x| x.error.as_deref())
                .map(|e| format!("  {}", e.lines().next().unwrap_or_default()))
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<24} {:<11} attempt {}{err}\n",
                r.task_id,
                r.status.as_str(),
                r.attempt
            ));
        }
        crate::io::print_stdout(&out)?;
    }
    Ok(Exit::Ok)
}

/// `ctx runs export RUN --store URL`: the object `ctx run --format json`
/// prints (`order`, `tasks`), each task with its start and end.
pub fn runs_export(url: &str, run_id: &str) -> CliResult {
    let store = open_store(url)?;
    let rows = runtime()?.block_on(store.tasks(run_id)).map_err(pg_error)?;
    let mut started: Vec<(i64, &str)> = rows
        .iter()
        .filter_map(|r| Some((r.claim_seq?, r.task_id.as_str())))
        .collect();
    started.sort_unstable();
    let results: Vec<TaskExecutionResult> = rows
        .iter()
        .map(|r| {
            r.result
                .clone()
                .unwrap_or_else(|| TaskExecutionResult::new(&r.task_id, r.status))
        })
        .collect();
    let tasks: Vec<serde_json::Value> = results
        .iter()
        .zip(&rows)
        .map(|(res, row)| {
            let mut v = serde_json::to_value(super::run::TaskJson::of(res))
                .unwrap_or(serde_json::Value::Null);
            v["started_at"] = row.started_at.clone().into();
            v["ended_at"] = row.finished_at.clone().into();
            v
        })
        .collect();
    let v = serde_json::json!({
        "order": started.iter().map(|(_, id)| *id).collect::<Vec<_>>(),
        "tasks": tasks,
    });
    crate::io::print_stdout(&crate::io::json_text(&v)?)?;
    Ok(Exit::Ok)
}

/// Refuses the `ctx run` flags that exist only for the local SQLite store
/// when the store is a shared one, naming them (exit 2), rather than
/// ignoring them silently.
pub fn refuse_local_flags(dry_run: bool, run_dir: Option<&PathBuf>) -> Result<(), CliError> {
    let mut bad = Vec::new();
    if dry_run {
        bad.push("--dry-run");
    }
    if run_dir.is_some() {
        bad.push("--run-dir");
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(CliError::usage(format!(
            "{} work only with the local SQLite store, not with a postgres:// --store",
            bad.join(", ")
        )))
    }
}

/// The cost summary of a shared run: the known `cost_usd` of every task
/// that was claimed, and how many claimed tasks have none.
fn shared_cost(rows: &[ctx_store_postgres::TaskRow]) -> ctx_deps::CostSummary {
    let mut summary = ctx_deps::CostSummary {
        spent: ctx_cost::Usd::ZERO,
        earlier: ctx_cost::Usd::ZERO,
        budget: None,
        needed: ctx_cost::Usd::ZERO,
        unknown: 0,
    };
    for row in rows.iter().filter(|r| r.claim_seq.is_some()) {
        match &row.result {
            Some(result) => summary.add_executed(result),
            None => summary.unknown += 1,
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_flags_pick_the_store_and_never_echo_a_password() {
        assert_eq!(shared_store_url(Some("sqlite")).unwrap(), None);
        assert_eq!(
            shared_store_url(Some("postgres://u:p@h/d"))
                .unwrap()
                .as_deref(),
            Some("postgres://u:p@h/d")
        );
        assert!(
            shared_store_url(Some("postgresql://h/d"))
                .unwrap()
                .is_some()
        );
        let e = shared_store_url(Some("mysql://u:hunter2@h/d")).unwrap_err();
        assert_eq!(e.exit, Exit::Usage);
        assert!(e.message.contains("mysql://u@h/d"), "{}", e.message);
        assert!(!e.message.contains("hunter2"));
    }

    #[test]
    fn lease_and_timeout_seconds_are_checked() {
        assert_eq!(secs("--lease", 0.0).unwrap(), None);
        assert_eq!(
            secs("--lease", 1.5).unwrap(),
            Some(Duration::from_millis(1500))
        );
        // 1e30 s does not fit a Duration: an error, not a panic.
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e30] {
            assert_eq!(secs("--lease", bad).unwrap_err().exit, Exit::Usage);
        }
    }

    #[test]
    fn bad_store_errors_map_to_their_exit_codes() {
        let e = pg_error(PgError::NoRun {
            url: "postgres://u@h/d".into(),
            run_id: "r".into(),
        });
        assert_eq!(e.exit, Exit::Usage);
        let e = pg_error(PgError::NewerSchema {
            url: "postgres://u@h/d".into(),
            found: 2,
            known: 1,
        });
        assert_eq!(e.exit, Exit::Store);
        let e = pg_error(PgError::Foreign {
            url: "postgres://u@h/d".into(),
            reason: "x".into(),
        });
        assert_eq!(e.exit, Exit::Store);
    }
}
