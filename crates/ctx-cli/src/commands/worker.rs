//! `ctx worker --store URL`: work on the runs of a shared PostgreSQL store,
//! and the shared-store side of `ctx run --store URL` and `ctx runs`.
//!
//! A worker waits for work on `LISTEN ctx_ready` (a registration, a
//! resume, a release, or a commit that makes a task ready wakes it at
//! once), polling every 100 ms as well, since a lapsed lease notifies
//! nobody.
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
//! Exit codes: 0 stopped because `--until-idle` found no open run left
//! (tasks that failed are their runs' outcome, which the `ctx run` that
//! registered each run reports with 1; a worker goes on past them),
//! 2 usage (a bad `--store`, an unknown `--run`), 4 the store could not be
//! opened or stopped answering (unreachable, authentication refused, a
//! newer schema, a foreign database), 129 / 130 / 143 stopped by SIGHUP /
//! SIGINT / SIGTERM after releasing its claims.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ctx_deps::{ExecutorOptions, InferenceEngine};
use ctx_model::Plan;
use ctx_store_postgres::{Error as PgError, PgStore, StoreOptions, StoreUrl};
use ctx_worker::shared::SharedError;
use ctx_worker::{Worker, WorkerEvent};

use super::run::{Executed, Output, StopSignal, StopSignals};
use crate::engines::{self, EngineArgs};
use crate::exit::{CliError, CliResult, Exit};
use crate::heading;
use crate::runtime::runtime;

/// Arguments of `ctx worker`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shared store: postgres://USER:PASSWORD@HOST:PORT/DB (the PG*
    /// variables fill what it leaves out). Default: $CTX_STORE.
    #[arg(long, value_name = "URL", help_heading = heading::SHARED)]
    pub store: Option<String>,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Work on this run only (default: every open run, critical path first).
    #[arg(long, value_name = "RUN", help_heading = heading::SHARED)]
    pub run: Option<String>,

    /// Most tasks this worker runs at once; 0 means no limit.
    #[arg(long, value_name = "N", default_value_t = ctx_deps::DEFAULT_CONCURRENCY, help_heading = heading::BOUNDS)]
    pub concurrency: usize,

    /// Exit once no open run is left (every task of every run it may work
    /// on is terminal) instead of waiting for new runs.
    #[arg(long, help_heading = heading::SHARED)]
    pub until_idle: bool,

    /// With --until-idle: wait up to SECS for a first open run before
    /// calling the store idle, so a worker started together with the
    /// `ctx run --no-local` that registers its run does not exit first.
    /// Once a run was seen, the worker exits as soon as none is left.
    #[arg(long, value_name = "SECS", default_value_t = 0.0, requires = "until_idle", help_heading = heading::SHARED)]
    pub wait: f64,

    /// A claim's lease in seconds: renewed every third of it while the
    /// task runs; a worker that stops renewing (killed, partitioned) loses
    /// its tasks to other workers after this long.
    #[arg(long, value_name = "SECS", default_value_t = ctx_worker::DEFAULT_LEASE.as_secs_f64(), help_heading = heading::SHARED)]
    pub lease: f64,

    #[command(flatten)]
    pub bounds: super::run::TaskBoundArgs,

    #[command(flatten, next_help_heading = heading::COST)]
    pub prices: super::prices::PriceArgs,

    /// Reuse outputs of identical requests (engine, model, params, final
    /// prompt) from this machine's cache (ROOT/cache.sqlite, the one local
    /// runs use): each worker has its own, as its own rate limits.
    #[arg(long, help_heading = heading::CACHE)]
    pub cache: bool,

    /// Where the local cache lives [default: .ctx/runs].
    #[arg(long, value_name = "DIR", requires = "cache", help_heading = heading::CACHE)]
    pub root: Option<PathBuf>,

    /// How long to wait between claims when nothing is ready, in
    /// milliseconds.
    #[arg(long, value_name = "MS", default_value_t = ctx_worker::DEFAULT_POLL.as_millis() as u64, hide = true)]
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
        // As a local run that another process holds: the store is busy.
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
    let lease = secs("--lease", args.lease)?
        .ok_or_else(|| CliError::usage("--lease must be more than 0 seconds"))?;
    let bounds = args.bounds.resolve()?;
    let options = ExecutorOptions {
        task_timeout: bounds.task_timeout,
        max_output_bytes: bounds.max_output_bytes,
        ..ExecutorOptions::default()
    };
    let engine = engines::build(&args.engine)?;
    // Each run's tasks are priced by its own plan's config.prices too.
    let pricing = args
        .prices
        .pricing(super::run_cost::engine_costs(&args.engine), None)?;
    let engine = if args.cache {
        with_local_cache(engine, args.root.as_deref())?
    } else {
        engine
    };
    // Its claims record this worker's engine: what a resume compares.
    let store = open_store(&url)?.with_engine(&engine.label());
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
    let work = Worker {
        store,
        engine,
        options,
        pricing,
        run: args.run,
        worker: me,
        concurrency: args.concurrency,
        lease,
        until_idle: args.until_idle,
        first_run_wait: secs("--wait", args.wait)?.unwrap_or(Duration::ZERO),
        poll: Duration::from_millis(args.poll_ms.max(1)),
    };
    let outcome = rt
        .block_on(async {
            let signals = StopSignals::install();
            work.run(signals.first(), |e| log_event(&work.worker, true, &e))
                .await
        })
        .map_err(pg_error)?;
    eprintln!(
        "worker {}: {} committed, {} late (refused), {} released, {} round trips",
        work.worker,
        outcome.committed,
        outcome.refused,
        outcome.released,
        work.store.round_trips()
    );
    Ok(outcome.stopped.map_or(Exit::Ok, StopSignal::exit))
}

/// What became of a claim, on stderr: every event when `verbose` (`ctx
/// worker`), only the refused late commits otherwise (`ctx run`'s local
/// worker), since those mean work was done twice.
fn log_event(worker: &str, verbose: bool, event: &WorkerEvent<'_>) {
    let what = |c: &ctx_store_postgres::Claim| {
        format!(
            "task `{}` of run {} (attempt {})",
            c.task_id, c.run_id, c.attempt
        )
    };
    let line = match event {
        WorkerEvent::Refused { claim } => {
            eprintln!(
                "worker {worker}: {}: late commit refused: the lease lapsed and the task belongs to another claim now",
                what(claim)
            );
            return;
        }
        _ if !verbose => return,
        WorkerEvent::Committed { claim, status } => format!("{}: {}", what(claim), status.as_str()),
        WorkerEvent::EndedWithoutResult { claim } => {
            format!("{}: ended without a result", what(claim))
        }
        WorkerEvent::StoreFailed { claim, error } => {
            format!(
                "{}: store error, the claim will lapse: {error}",
                what(claim)
            )
        }
        WorkerEvent::Panicked { claim } => {
            format!("task `{}` of run {} panicked", claim.task_id, claim.run_id)
        }
        WorkerEvent::Released { claim } => format!(
            "released task `{}` of run {} (attempt {})",
            claim.task_id, claim.run_id, claim.attempt
        ),
    };
    // Task ids and store errors are someone else's text.
    eprintln!("worker {worker}: {}", ctx_table::printable_lines(&line));
}

/// `engine` answering identical requests from the local cache under
/// `root` (`.ctx/runs` by default), as `ctx run --cache` does.
pub fn with_local_cache(
    engine: Arc<dyn InferenceEngine>,
    root: Option<&std::path::Path>,
) -> Result<Arc<dyn InferenceEngine>, CliError> {
    let root = ctx_store_sqlite::RunRoot::new(root.map_or_else(
        || PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT),
        PathBuf::from,
    ));
    let cache = root.cache().map_err(super::runs::store_error)?;
    let identity = engine.cache_identity();
    Ok(Arc::new(ctx_store_sqlite::CachingEngine::new(
        engine,
        Arc::new(cache),
        identity,
        None,
    )))
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
    pricing: ctx_run::run_costs::RunPricing,
    output: &Output<'_>,
    no_local: bool,
    resume: Option<&str>,
) -> CliResult {
    let store = open_store(url)?.with_engine(label);
    // Workers run the stored plan: secrets are redacted as in run directories.
    let plan = ctx_store_sqlite::redact_plan(&plan);
    let rt = runtime()?;
    let started = rt
        .block_on(ctx_worker::shared::start(
            &store,
            &plan,
            plan_source,
            label,
            resume,
        ))
        .map_err(|e| match e {
            SharedError::Store(e) => pg_error(e),
            SharedError::Graph(e) => {
                CliError::usage(format!("{}: {e}", output.plan_path.display()))
            }
            SharedError::Read(e) => super::runs::read_error(e),
            e @ SharedError::Blocking(_) => CliError::with(Exit::Store, e),
        })?;
    let run_id = started.run_id;
    let reused = match started.resumed {
        Some(resume) => {
            eprintln!(
                "resuming run {run_id} in {}: {} reused, {} to run again",
                store.display_url(),
                resume.reuse.len(),
                resume.rerun.len()
            );
            resume.reuse
        }
        None => {
            eprintln!("run {run_id} registered in {}", store.display_url());
            Vec::new()
        }
    };
    let signal = if no_local {
        rt.block_on(async {
            let signals = StopSignals::install();
            follow(&store, &run_id, signals.first()).await
        })?
    } else {
        let work = Worker {
            store: store.clone(),
            engine,
            options: options.clone(),
            pricing,
            run: Some(run_id.clone()),
            worker: worker_id(),
            concurrency: options.concurrency,
            lease: ctx_worker::DEFAULT_LEASE,
            until_idle: true,
            // The run was registered just above: it is open.
            first_run_wait: Duration::ZERO,
            poll: ctx_worker::DEFAULT_POLL,
        };
        rt.block_on(async {
            let signals = StopSignals::install();
            work.run(signals.first(), |e| log_event(&work.worker, false, &e))
                .await
        })
        .map_err(pg_error)?
        .stopped
    };
    let rows = rt.block_on(store.tasks(&run_id)).map_err(pg_error)?;
    let report = ctx_worker::shared::report(&rows, reused, signal.is_some());
    let executed = Executed { report, signal };
    let exit = super::run::report_run(&executed, output)?;
    // The statements this process sent (registration, claims, reads,
    // commits, or the follower's polls), as `ctx worker` reports them:
    // what scripts/bench-workers.sh adds up per task.
    let trips = store.round_trips();
    if signal.is_some() {
        eprintln!(
            "run {run_id} stays open in {}: workers can finish it ({trips} round trips)",
            store.display_url()
        );
    } else {
        eprintln!(
            "run {run_id} stored in {} ({trips} round trips)",
            store.display_url()
        );
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
    let list = ctx_run::list::RunList::new(
        runs.into_iter().map(run_row).collect(),
        store.display_url().to_string(),
        true,
    );
    crate::commands::runs::print_list(&list, format)?;
    Ok(Exit::Ok)
}

fn run_row(r: ctx_store_postgres::RunInfo) -> ctx_run::list::RunRow {
    ctx_run::list::RunRow {
        state: r.listed_state().to_string(),
        id: r.run_id,
        created_at: r.created_at,
        plan: r.plan_source,
        counts: r.counts,
        facts: ctx_run::list::RowFacts::Shared {
            finished_at: r.finished_at,
            engine: r.engine,
            plan_hash: r.plan_hash,
            late_commits: r.late_commits,
            reclaims: r.reclaims,
        },
    }
}

/// `ctx runs show RUN --store URL [--task ID]`: the same page as for a
/// local run, read through the seam both stores share, with the run's
/// claims in place of sessions.
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
    let info = info.into_iter().next().ok_or_else(|| {
        pg_error(ctx_store_postgres::Error::NoRun {
            url: store.display_url().to_string(),
            run_id: run_id.to_string(),
        })
    })?;
    let facts = ctx_run::show::StoreFacts::Shared {
        created_at: info.created_at,
        late_commits: info.late_commits,
        reclaims: info.reclaims,
        claims: rows.into_iter().map(|r| (r.task_id, r.attempt)).collect(),
    };
    let view = store.view(run_id).map_err(pg_error)?;
    super::runs::print_show(&view, facts, task, format)
}

/// The run `run_id` of the shared store at `url`, for reading through the
/// seam both stores share (`ctx runs report|export`, resume planning).
pub fn open_view(url: &str, run_id: &str) -> Result<ctx_store_postgres::PgRunView, CliError> {
    open_store(url)?.view(run_id).map_err(pg_error)
}

/// `ctx runs gc --store URL --keep N [--force]`: removes the closed runs
/// beyond the newest N (and the open ones too with `--force`), printing
/// what it did as the local store's `gc` does.
pub fn runs_gc(url: &str, keep: usize, force: bool) -> CliResult {
    let store = open_store(url)?;
    let report = runtime()?
        .block_on(store.gc(keep, force))
        .map_err(pg_error)?;
    let mut out = String::new();
    for id in &report.removed {
        out.push_str(&format!("removed {id}\n"));
    }
    for id in &report.open {
        out.push_str(&format!("kept {id} (open, --force removes it)\n"));
    }
    out.push_str(&format!(
        "{} removed, {} kept{}\n",
        report.removed.len(),
        report.kept.len() + report.open.len(),
        if report.open.is_empty() {
            String::new()
        } else {
            format!(" ({} open)", report.open.len())
        }
    ));
    crate::io::print_stdout(&out)?;
    Ok(Exit::Ok)
}

/// `ctx run --store URL --resume RUN --dry-run`: what a resume with `plan`
/// on the engine `label` would reuse and re-run, and why, listed as for a
/// local run; nothing is written.
pub fn shared_resume_dry_run(url: &str, run: &str, plan: &Plan, label: &str) -> CliResult {
    use ctx_deps::RunHistory;
    let view = open_view(url, run)?;
    let plan = ctx_store_sqlite::redact_plan(plan);
    let resume = view
        .resume_plan(&plan, label)
        .map_err(super::runs::read_error)?;
    crate::io::print_stdout(&super::runs::resume_listing(run, &resume))?;
    Ok(Exit::Ok)
}

/// Refuses `--run-dir`, which exists only for the local SQLite store, when
/// the store is a shared one (exit 2), rather than ignoring it silently.
pub fn refuse_local_flags(run_dir: Option<&PathBuf>) -> Result<(), CliError> {
    match run_dir {
        None => Ok(()),
        Some(_) => Err(CliError::usage(
            "--run-dir works only with the local SQLite store, not with a postgres:// --store",
        )),
    }
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
