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
use std::time::Duration;

use ctx_deps::ExecutorOptions;
use ctx_store_sqlite::RunRoot;
use ctx_worker::{Worker, WorkerEvent};

use super::run::StopSignal;
use crate::engines::{self, EngineArgs};
use crate::exit::{CliError, CliResult, Exit};
use crate::heading;

// Arguments of `ctx worker`.
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

    /// `--otlp URL`: the run's trace to an OpenTelemetry collector.
    #[command(flatten)]
    pub otlp: crate::telemetry::OtlpFlag,
}

/// `--lease` and `--wait` in seconds: `0` is none.
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

/// Runs `ctx worker`.
pub fn run(args: Args) -> CliResult {
    if args.engine.openai.batch {
        return Err(ctx_run::settings::StoreError::BatchOnShared.into());
    }
    let url = ctx_run::settings::shared_url(args.store.as_deref(), |k| std::env::var(k).ok())?
        .ok_or(ctx_run::settings::StoreError::NoSharedStore)?;
    let lease = secs("--lease", args.lease)?
        .ok_or_else(|| CliError::usage("--lease must be more than 0 seconds"))?;
    let bounds = args.bounds.resolve()?;
    let options = ExecutorOptions {
        task_timeout: bounds.task_timeout,
        max_output_bytes: bounds.max_output_bytes,
        ..ExecutorOptions::default()
    };
    // No progress bar: the engine's retries are lines on stderr.
    let engine = engines::build(&args.engine, &engines::Notices::default(), args.concurrency)?;
    // Each run's tasks are priced by its own plan's config.prices too.
    let pricing = args.prices.pricing(args.engine.costs(), None)?;
    let engine = if args.cache {
        let root = args
            .root
            .clone()
            .unwrap_or_else(|| PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT));
        ctx_worker::with_local_cache(engine, &RunRoot::new(root))?
    } else {
        engine
    };
    // Its claims record this worker's engine: what a resume compares. It
    // is opened in the process's runtime, which then drives its
    // connections (one runtime per process).
    let store = {
        let _in_runtime = crate::runtime::handle()?.enter();
        ctx_worker::runs::open(&url)?
    };
    let store = store.with_engine(&engine.label());
    if let Some(run) = &args.run {
        crate::runtime::block_on(store.runs(Some(run)))??;
    }
    let work = Worker {
        store,
        engine,
        options,
        pricing,
        run: args.run,
        worker: ctx_worker::worker_id(),
        concurrency: args.concurrency,
        lease,
        until_idle: args.until_idle,
        first_run_wait: secs("--wait", args.wait)?.unwrap_or(Duration::ZERO),
        poll: Duration::from_millis(args.poll_ms.max(1)),
        approval_wait: None,
    };
    eprintln!(
        "worker {} on {}{}",
        work.worker,
        work.store.display_url(),
        work.run
            .as_ref()
            .map_or_else(String::new, |r| format!(", run {r}"))
    );
    let outcome = crate::runtime::until_stopped(|stop| work.run(stop, |e| log_event(true, &e)))??;
    eprintln!(
        "worker {}: {} committed, {} late (refused), {} released, {} round trips",
        work.worker,
        outcome.committed,
        outcome.refused,
        outcome.released,
        work.store.round_trips()
    );
    if args.until_idle && args.wait == 0.0 && outcome.committed == 0 && outcome.stopped.is_none() {
        // The README's shared-store tour, pasted without `--wait`: a
        // worker that looked before `ctx run --no-local &` registered its
        // run finds nothing and exits, and the run waits for ever.
        eprintln!(
            "worker {}: nothing to do: --until-idle exits once no open run is left;              for a run that is not registered yet, --wait SECS waits for it",
            work.worker
        );
    }
    Ok(outcome.stopped.map_or(Exit::Ok, StopSignal::exit))
}

/// What became of a claim, on stderr, named by the worker that held it:
/// every event when `verbose` (`ctx worker`), only the refused late
/// commits otherwise (`ctx run`'s local worker), since those mean work was
/// done twice.
pub(crate) fn log_event(verbose: bool, event: &WorkerEvent<'_>) {
    let worker = claim_of(event).worker.as_str();
    let what = |c: &ctx_worker::Claim| {
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
        WorkerEvent::Expanded { claim, items } => {
            format!("{}: expanded, {items} item(s) to run", what(claim))
        }
        WorkerEvent::Reused { claim } => format!(
            "{}: reused: the items it receives came back unchanged",
            what(claim)
        ),
        WorkerEvent::WaitingForBudget { claim } => format!(
            "{}: given back: its high end does not fit what is left of the budget until running tasks settle",
            what(claim)
        ),
    };
    // Task ids and store errors are someone else's text.
    eprintln!("worker {worker}: {}", ctx_table::printable_lines(&line));
}

/// The claim an event is about.
fn claim_of<'a>(event: &WorkerEvent<'a>) -> &'a ctx_worker::Claim {
    match event {
        WorkerEvent::Committed { claim, .. }
        | WorkerEvent::Refused { claim }
        | WorkerEvent::EndedWithoutResult { claim }
        | WorkerEvent::StoreFailed { claim, .. }
        | WorkerEvent::Panicked { claim }
        | WorkerEvent::Released { claim }
        | WorkerEvent::Expanded { claim, .. }
        | WorkerEvent::Reused { claim }
        | WorkerEvent::WaitingForBudget { claim } => claim,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
