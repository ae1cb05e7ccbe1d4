//! # ctx-worker: the claim loop of a shared-store worker
//!
//! What `ctx worker` and `ctx run --store postgres://…` compute, as a
//! library: [`Worker::run`] claims the ready tasks with the longest
//! remaining path (in one run, or in any open run; as many as it has free
//! slots, in one statement that also returns each task's dependency
//! results), runs each with the
//! executor's own task body (`ctx_deps::TaskRunner`: dependency results
//! read from the store, the prompt assembled under the cap, the engine
//! bounded in time and output), renews the claim's lease while the engine
//! runs, and commits the result under the claim. Up to `concurrency`
//! tasks are in flight. A claim whose lease is lost stops its task; a late
//! result is refused by the store's fence, counted and reported. When the
//! caller's stop future resolves, no new claims are made, the tasks in
//! flight are stopped and their claims released, so another worker takes
//! them at once instead of after the lease.
//!
//! A claimed map task calls no engine: the worker expands it with
//! ctx-deps' `map` functions and registers its items as tasks of the run
//! under the claim, or, once every item ended, joins them (the
//! `map_turn` module; docs/scaling.md, "Maps on the shared store").
//!
//! [`shared`] registers or resumes a run in the shared store by the rules
//! a local run follows, and reads a run's report back from it.
//!
//! The crate knows no terminal, flag or exit code: what became of each
//! claim goes to the caller's [`WorkerEvent`] callback, and errors are the
//! store's. Why a crate of its own: `ctx-run` must not reach the Postgres
//! driver (a program that only runs plans locally pays for none of it),
//! and the store adapter must not reach the executor.
//!
//! ```no_run
//! # async fn demo(store: ctx_store_postgres::PgStore) -> Result<(), ctx_store_postgres::Error> {
//! use std::{sync::Arc, time::Duration};
//! let worker = ctx_worker::Worker {
//!     store,
//!     engine: Arc::new(ctx_engine_command::CommandEngine::new("llm -m local")),
//!     options: ctx_deps::ExecutorOptions::default(),
//!     pricing: ctx_run::run_costs::RunPricing::default(),
//!     run: None,
//!     worker: "gpu-box-1".into(),
//!     concurrency: 4,
//!     lease: Duration::from_secs(60),
//!     until_idle: true,
//!     first_run_wait: Duration::from_secs(30),
//!     poll: Duration::from_millis(100),
//!     approval_wait: None,
//! };
//! let worked = worker
//!     .run(std::future::pending::<()>(), |event| eprintln!("{event:?}"))
//!     .await?;
//! eprintln!("{} committed, {} refused as late", worked.committed, worked.refused);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ctx_deps::{CostModel, ExecutorOptions, InferenceEngine, TaskRunner, concurrency_limit};
use ctx_model::money::Usd;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_run::run_costs::RunPricing;
use ctx_store_postgres::{ClaimStore, Commit, PgStore, Reservation};
use tracing::Instrument;

mod map_turn;
mod period;
pub mod publish;
pub mod runs;
mod session;
pub mod shared;

/// The shared store's types a front end names: a claim in a
/// [`WorkerEvent`], the store's error, `gc`'s report, a run read through
/// the seam both stores share, and the URL rules (a front end needs no
/// dependency on the store adapter itself).
pub use ctx_store_postgres::{
    Claim, Error as PgError, GcReport, PgRunView, is_postgres_url, redact,
};
pub use session::{
    SharedEvent, SharedOutcome, SharedSession, SharedSettings, with_local_cache, worker_id,
};
pub use shared::SharedError;

/// What a worker loop did; `S` is what stopped it (the caller's stop
/// future's output: a signal, for the CLI).
#[derive(Debug)]
pub struct Worked<S> {
    /// Results committed.
    pub committed: usize,
    /// Results refused as late.
    pub refused: usize,
    /// Claims given back when it was stopped.
    pub released: usize,
    /// What stopped it, when something did (`None`: `until_idle` found
    /// no open run left).
    pub stopped: Option<S>,
}

/// What happened to one claim, for the caller to log.
#[derive(Debug)]
pub enum WorkerEvent<'a> {
    /// The task's result was committed under its claim.
    Committed {
        /// The claim.
        claim: &'a Claim,
        /// The task's final status.
        status: TaskStatus,
    },
    /// The result came after the lease lapsed: the store refused it (the
    /// task belongs to another claim now). Counted in [`Worked::refused`].
    Refused {
        /// The claim.
        claim: &'a Claim,
    },
    /// The task body ended without a result to commit.
    EndedWithoutResult {
        /// The claim.
        claim: &'a Claim,
    },
    /// The store failed while the task was settled; the claim will lapse.
    StoreFailed {
        /// The claim.
        claim: &'a Claim,
        /// The store's error.
        error: &'a ctx_deps::StoreError,
    },
    /// The task body panicked (an engine bug); its claim is released at
    /// the stop, or lapses.
    Panicked {
        /// The claim.
        claim: &'a Claim,
    },
    /// A claim was given back when the worker was stopped.
    Released {
        /// The claim.
        claim: &'a Claim,
    },
    /// The task's result from before the run was resumed was committed
    /// as is, without calling the engine: the items of the maps above it
    /// came back unchanged (and what else it depends on was taken as
    /// stored too). Counted in [`Worked::committed`].
    Reused {
        /// The claim.
        claim: &'a Claim,
    },
    /// The task's high end did not fit what its run's budget has left
    /// while other claims hold reservations: its claim was given back, and
    /// the worker claims again once something settles (or at its poll).
    WaitingForBudget {
        /// The claim given back.
        claim: &'a Claim,
    },
    /// A map task's items were registered as tasks of its run, and the
    /// map task given back until they end (its next claim joins them).
    Expanded {
        /// The claim on the map task.
        claim: &'a Claim,
        /// How many items wait to run.
        items: usize,
    },
}

/// One worker: its store connection, engine and limits.
pub struct Worker {
    /// The shared store (with this worker's engine label, for claims).
    pub store: PgStore,
    /// The engine tasks run on (this worker's own flags, rate limits and
    /// cache).
    pub engine: Arc<dyn InferenceEngine>,
    /// The task bounds (timeout, output bound) the task body applies.
    /// Its `cost` is not used: each run's tasks are priced by `pricing`
    /// and that run's own plan.
    pub options: ExecutorOptions,
    /// What each task's `cost_usd` is priced by: this worker's engine and
    /// price tables, with the `config.prices` of the plan of the run the
    /// task belongs to, as `ctx run` prices a local run. No budget: a
    /// budget's ledger lives in one process.
    pub pricing: RunPricing,
    /// Work on this run only, or on any open run.
    pub run: Option<String>,
    /// This worker's id, recorded with its claims.
    pub worker: String,
    /// Most tasks in flight at once; `0` means no limit, as for the
    /// executor ([`concurrency_limit`]).
    pub concurrency: usize,
    /// A claim's lease, renewed every third of it while the task runs
    /// ([`DEFAULT_LEASE`] unless the caller knows better).
    pub lease: Duration,
    /// Stop when no open run is left (instead of waiting for new ones).
    pub until_idle: bool,
    /// With `until_idle`: how long a worker that has not yet seen an open
    /// run waits for one before it calls the store idle. A worker started
    /// in the same breath as the `ctx run --no-local` that registers its
    /// run (the README's shared-store tour) would otherwise find nothing,
    /// exit at once, and leave the run waiting for ever. Once it has seen
    /// an open run it stops as soon as none is left. `Duration::ZERO`: no
    /// wait.
    pub first_run_wait: Duration,
    /// The fallback poll between claims when nothing is ready
    /// (notifications wake the worker at once; a lapsed lease notifies
    /// nobody; [`DEFAULT_POLL`]).
    pub poll: Duration,
    /// With `until_idle`: a run whose open tasks all wait on an approval
    /// gate keeps the worker waiting for a decision (from any machine:
    /// the decision's `NOTIFY ctx_ready` wakes it), for at most this long
    /// counted from the first time it had nothing else to do
    /// (`--wait-approval`). `None`: such a run is idle.
    pub approval_wait: Option<Duration>,
}

/// A claim's lease by default: long enough that a heartbeat every third of
/// it survives a slow network or a paused VM, short enough that a killed
/// worker's task is taken over within a minute.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// How often an idle worker looks for work when no notification came: a
/// lapsed lease notifies nobody, so this bounds how long its task waits.
pub const DEFAULT_POLL: Duration = Duration::from_millis(100);

enum TaskEnd {
    /// The task body ended; the store's word on its commit.
    Done(
        Box<Result<TaskExecutionResult, ctx_deps::StoreError>>,
        Option<Commit>,
    ),
    /// The lease was lost while the engine ran: the task was stopped.
    Lost,
    /// A map task's items were registered; the map task waits for them.
    Expanded(usize),
    /// The result a resume kept was taken as stored; the store's word on
    /// its commit.
    Reused(Commit),
    /// The task's high end did not fit what the run's budget has left
    /// while other claims held reservations: its claim was given back, to
    /// be claimed again once they settle.
    BudgetWait,
}

/// The task runner of one run's stored plan, by run (a map's expansion
/// changes the plan, and a resume may change the budget: a claim made
/// under another hash or budget loads it again).
type Runners = HashMap<String, Loaded>;

/// One run's stored plan as a worker runs it.
#[derive(Clone)]
struct Loaded {
    /// The plan's hash.
    hash: String,
    /// The run's budget the runner was made for.
    budget: Option<Usd>,
    runner: Arc<TaskRunner>,
    /// What a task may cost (its high end is what a claim reserves).
    model: Option<Arc<dyn CostModel>>,
}

impl Worker {
    /// Whether the worker's run (or any run) has something to work on;
    /// with [`Self::approval_wait`], a run that waits only on approval
    /// gates counts until the wait's end, counted from `waiting_since`
    /// (set at the first such answer).
    async fn has_work(
        &self,
        waiting_since: &mut Option<tokio::time::Instant>,
    ) -> Result<bool, PgError> {
        let run = self.run.as_deref();
        if self.store.has_open_runs(run, false).await? {
            return Ok(true);
        }
        let Some(within) = self.approval_wait else {
            return Ok(false);
        };
        if !self.store.has_open_runs(run, true).await? {
            return Ok(false);
        }
        let since = *waiting_since.get_or_insert_with(tokio::time::Instant::now);
        Ok(since.elapsed() < within)
    }

    /// The runner of the claimed task's run's stored plan, loaded once
    /// per worker and plan (a map's expansion changes the plan, and the
    /// claim says under which plan it was made), with the plan's hash.
    /// `Ok(Err(message))`: a plan no worker can run (it does not read
    /// back, or its graph is invalid), which fails the task; `Ok(Ok(None))`:
    /// the run was removed under the claim (`ctx runs gc --force`), which
    /// is then gone too. Any other store error is the store's, and the
    /// worker's: a task must not fail because a read did.
    async fn runner_of(
        &self,
        runners: &mut Runners,
        claim: &Claim,
    ) -> Result<Result<Option<Loaded>, String>, PgError> {
        let run_id = claim.run_id.as_str();
        if let Some(loaded) = runners.get(run_id)
            && loaded.hash == claim.plan_hash
            && loaded.budget == claim.budget
        {
            return Ok(Ok(Some(loaded.clone())));
        }
        let (plan, hash): (Plan, String) = match self.store.plan_and_hash(run_id).await {
            Ok(p) => p,
            Err(e @ PgError::Corrupt { .. }) => return Ok(Err(e.to_string())),
            Err(PgError::NoRun { .. }) => return Ok(Ok(None)),
            Err(e) => return Err(e),
        };
        // Under a budget the task body holds each call to its bounds (a
        // judge's or a summary's prompt, a command's output at
        // `max_tokens`), as a local budgeted run does; the ledger is the
        // store's.
        let pricing = RunPricing {
            max_cost: claim.budget,
            ..self.pricing.clone()
        };
        let options = match pricing.cost_options(&plan) {
            Ok(cost) => ExecutorOptions {
                cost: Some(cost),
                ..self.options.clone()
            },
            Err(e) => return Ok(Err(format!("run `{run_id}`: the stored plan's costs: {e}"))),
        };
        // The items' content hashes, recorded with their results.
        let hashes = if plan.sub_tasks.iter().any(|t| t.map.is_some()) {
            match self.store.item_hashes(run_id).await {
                Ok(h) => h,
                Err(PgError::NoRun { .. }) => return Ok(Ok(None)),
                Err(e) => return Err(e),
            }
        } else {
            Vec::new()
        };
        let model = options.cost.as_ref().map(|c| Arc::clone(&c.model));
        let runner = match TaskRunner::new(plan, Arc::clone(&self.engine), &options) {
            Ok(r) => Arc::new(r.with_item_hashes(hashes)),
            Err(e) => return Ok(Err(format!("run `{run_id}`: the stored plan: {e}"))),
        };
        let loaded = Loaded {
            hash,
            budget: claim.budget,
            runner,
            model,
        };
        runners.insert(run_id.to_string(), loaded.clone());
        Ok(Ok(Some(loaded)))
    }

    /// Claims and runs tasks until `until_idle` finds no open run or
    /// `stop` resolves (then in-flight tasks are stopped and their claims
    /// released), telling `on_event` what became of each claim. Fails only
    /// when the store stops answering for longer than its reconnect
    /// window.
    pub async fn run<F, S, E>(&self, stop: F, mut on_event: E) -> Result<Worked<S>, PgError>
    where
        F: std::future::Future<Output = S>,
        E: FnMut(WorkerEvent<'_>),
    {
        let mut runners: Runners = HashMap::new();
        let label = self.engine.label();
        let mut running: tokio::task::JoinSet<(Claim, TaskEnd)> = tokio::task::JoinSet::new();
        let mut held: HashMap<tokio::task::Id, Claim> = HashMap::new();
        let mut worked = Worked {
            committed: 0,
            refused: 0,
            released: 0,
            stopped: None,
        };
        // Woken when a task becomes ready anywhere in the store; the poll
        // stays as the fallback (lapsed leases notify nobody).
        let wake = self.store.listen();
        tokio::pin!(stop);
        let started = tokio::time::Instant::now();
        let mut seen_open = false;
        // Since when only approval gates are left (`approval_wait`).
        let mut waiting_since = None;
        // A task gave its claim back to wait for the budget: no claim
        // until something settles, a notification comes or the poll ends
        // (else the worker would claim the same task again at once).
        let mut budget_wait = false;
        loop {
            let mut claimed_any = false;
            while !std::mem::take(&mut budget_wait)
                && running.len() < concurrency_limit(self.concurrency)
            {
                // Every free slot in one claim, each task with its
                // dependencies' results.
                let free = concurrency_limit(self.concurrency) - running.len();
                let batch = self
                    .store
                    .claim_many(self.run.as_deref(), &self.worker, self.lease, free)
                    .await?;
                if batch.is_empty() {
                    break;
                }
                claimed_any = true;
                for mut claimed in batch {
                    let claim = claimed.claim.clone();
                    let kept = claimed.kept.take();
                    let loaded = match self.runner_of(&mut runners, &claim).await? {
                        Ok(Some(r)) => r,
                        Ok(None) => continue,
                        Err(message) => {
                            // A stored plan no worker can run: the task fails
                            // with the reason (its dependents skipped in the
                            // commit), and the worker goes on.
                            let r = failed(&claim.task_id, message);
                            if self.store.complete(&claim, &r).await? == Commit::Committed {
                                worked.committed += 1;
                                on_event(WorkerEvent::Committed {
                                    claim: &claim,
                                    status: TaskStatus::Failed,
                                });
                            }
                            continue;
                        }
                    };
                    let (plan_hash, runner) = (loaded.hash.clone(), Arc::clone(&loaded.runner));
                    let reservation = reservation_of(&loaded, &claim);
                    let store = self.store.clone();
                    let lease = self.lease;
                    let c = claim.clone();
                    let label = label.clone();
                    let handle = running.spawn(async move {
                        // The claim reserved the high end the run
                        // recorded; a larger one of this worker's prices
                        // is topped up.
                        if let Some(amount) = reservation
                            && c.reserved.is_none_or(|r| r < amount)
                            && let Some(end) = reserve(&store, &c, amount).await
                        {
                            return (c, end);
                        }
                        let cs = Arc::new(ClaimStore::with_inputs(store.clone(), claimed));
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
                        let span = ctx_deps::spans::claim_span(&c.run_id, &c.task_id, &c.worker);
                        let is_map = runner
                            .graph()
                            .index_of(&c.task_id)
                            .is_some_and(|i| runner.plan().sub_tasks[i].map.is_some());
                        // Whether the engine was called: a claim lost while
                        // it only checked or committed a kept result has no
                        // call to record.
                        let called = std::sync::atomic::AtomicBool::new(false);
                        let end = if is_map {
                            // A map task calls no engine: it expands or joins.
                            tokio::select! {
                                biased;
                                r = map_turn::map_turn(&store, &runner, &plan_hash, &c, &label)
                                    .instrument(span) => map_end(r),
                                () = beat => TaskEnd::Lost,
                            }
                        } else {
                            tokio::select! {
                                biased;
                                end = run_claimed(&store, &runner, &c, &cs, kept, &called)
                                    .instrument(span) => end,
                                () = beat => TaskEnd::Lost,
                            }
                        };
                        // A map task's turn wrote nothing once its claim was
                        // lost, nor did a kept result's check: there is no
                        // engine call to record.
                        let called = called.load(std::sync::atomic::Ordering::Acquire);
                        if matches!(end, TaskEnd::Lost) && !is_map && called {
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
                                let _ = store.complete(&c, &lease_lost(&c)).await;
                            }
                        }
                        (c, end)
                    });
                    held.insert(handle.id(), claim);
                }
            }
            seen_open |= claimed_any;
            if running.is_empty() && !claimed_any && self.until_idle {
                let open = self.has_work(&mut waiting_since).await?;
                seen_open |= open;
                if !open && (seen_open || started.elapsed() >= self.first_run_wait) {
                    break;
                }
            }
            let joined = tokio::select! {
                biased;
                s = &mut stop => {
                    worked.stopped = Some(s);
                    break;
                }
                Some(j) = running.join_next_with_id(), if !running.is_empty() => Some(j),
                () = wake.ready(), if !claimed_any => None,
                () = tokio::time::sleep(self.poll), if !claimed_any => None,
                // Claimed something and has room: try to claim more at once.
                () = std::future::ready(()), if claimed_any && running.len() < self.concurrency => None,
                else => None,
            };
            if let Some(j) = joined {
                budget_wait = settle(j, &mut held, &mut worked, &mut on_event);
            }
        }
        // Stopped by a signal: stop what runs and give the claims back.
        // A task that ended before the abort took effect is settled as
        // usual; an aborted one keeps its claim in `held`.
        running.abort_all();
        while let Some(j) = running.join_next_with_id().await {
            if j.is_ok() {
                settle(j, &mut held, &mut worked, &mut on_event);
            }
        }
        for (_, claim) in held.drain() {
            if self.store.release(&claim).await.unwrap_or(false) {
                worked.released += 1;
                on_event(WorkerEvent::Released { claim: &claim });
            }
        }
        Ok(worked)
    }
}

/// What `claim` reserves in its run's budget before its engine runs: its
/// task's high end, by the worker's own prices. `None`: the run has no
/// budget, the task is a map task (which calls no engine), or it costs
/// nothing (the dry run).
fn reservation_of(loaded: &Loaded, claim: &Claim) -> Option<Usd> {
    claim.budget?;
    let runner = &loaded.runner;
    let task = &runner.plan().sub_tasks[runner.graph().index_of(&claim.task_id)?];
    high_end(loaded.model.as_deref()?, task)
}

/// What a claim of `task` reserves under a budget, by `model`'s prices:
/// its high end. `None`: a map task (which calls no engine), or one that
/// costs nothing (the dry run).
pub fn high_end(model: &dyn CostModel, task: &ctx_model::SubTask) -> Option<Usd> {
    if task.map.is_some() {
        return None;
    }
    model.bound(task).filter(|a| *a > Usd::ZERO)
}

/// Reserves `amount` for `claim` ([`PgStore::reserve`]). `None`: reserved,
/// the task runs. Otherwise how the task ends without running: its claim
/// lost; given back to wait for reservations that may free room; or,
/// when nothing will, skipped with the budget's reason (its dependents
/// skipped in the commit), as a local run skips a task that does not fit.
async fn reserve(store: &PgStore, claim: &Claim, amount: Usd) -> Option<TaskEnd> {
    let skip = match store.reserve(claim, amount).await {
        Ok(Reservation::Reserved) => return None,
        Ok(Reservation::Lost) => return Some(TaskEnd::Lost),
        Ok(Reservation::Full { waiting: true }) => {
            // Given back at once, waking nobody (the commit that settles
            // a reservation does); lost already if this fails.
            let _ = store.release_for_budget(claim).await;
            return Some(TaskEnd::BudgetWait);
        }
        Ok(Reservation::Full { waiting: false }) => store.budget(&claim.run_id).await,
        Err(e) => Err(e),
    };
    let (budget, held) = match skip {
        Ok(Some(b)) => b,
        // The budget went (a resume without one): nothing to hold to now,
        // but this claim reserved nothing; it runs at its next claim.
        Ok(None) => {
            let _ = store.release_for_budget(claim).await;
            return Some(TaskEnd::BudgetWait);
        }
        Err(e) => return Some(TaskEnd::Done(Box::new(Err(e.into())), None)),
    };
    let mut r = TaskExecutionResult::new(&claim.task_id, TaskStatus::Skipped);
    r.error = Some(ctx_deps::budget_skip_reason(
        amount,
        budget.saturating_sub(held),
        budget,
    ));
    Some(match store.complete(claim, &r).await {
        Ok(commit) => TaskEnd::Done(Box::new(Ok(r)), Some(commit)),
        Err(e) => TaskEnd::Done(Box::new(Err(e.into())), None),
    })
}

/// Runs the claimed task `claim` on `runner` through its claim's store
/// `cs`, or, when its resume kept its previous result (`kept`) and the
/// items it would receive came back unchanged
/// ([`TaskRunner::kept_result_holds`]), commits that result as is.
/// `called` is set just before the task body (and its engine call)
/// starts.
async fn run_claimed(
    store: &PgStore,
    runner: &TaskRunner,
    claim: &Claim,
    cs: &Arc<ClaimStore>,
    kept: Option<TaskExecutionResult>,
    called: &std::sync::atomic::AtomicBool,
) -> TaskEnd {
    if let Some(kept) = kept {
        let reads: Arc<dyn ctx_deps::ExecutionStore> = cs.clone();
        match runner.kept_result_holds(&claim.task_id, reads, &kept).await {
            Ok(true) => {
                return match store.complete_taken(claim, &kept).await {
                    Ok(commit) => TaskEnd::Reused(commit),
                    Err(e) => TaskEnd::Done(Box::new(Err(e.into())), None),
                };
            }
            Ok(false) => {}
            Err(e) => return TaskEnd::Done(Box::new(Err(e)), None),
        }
    }
    called.store(true, std::sync::atomic::Ordering::Release);
    let r = runner.run_task(&claim.task_id, cs.clone()).await;
    TaskEnd::Done(Box::new(r), cs.outcome())
}

/// What a map task's turn counts as: its commit like a task's, its
/// expansion as such, a lost claim as a lost lease, and a store error as
/// the task body's.
fn map_end(r: Result<map_turn::MapEnd, PgError>) -> TaskEnd {
    match r {
        Ok(map_turn::MapEnd::Expanded(n)) => TaskEnd::Expanded(n),
        Ok(map_turn::MapEnd::Done(result, commit)) => {
            TaskEnd::Done(Box::new(Ok(*result)), Some(commit))
        }
        Ok(map_turn::MapEnd::Lost) => TaskEnd::Lost,
        Err(e) => TaskEnd::Done(Box::new(Err(ctx_deps::StoreError::from(e))), None),
    }
}

/// A failed result of `task_id`, saying why.
fn failed(task_id: &str, error: String) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(task_id, TaskStatus::Failed);
    r.error = Some(error);
    r
}

/// What a task whose lease was lost while its engine ran is recorded as
/// (the store's fence then refuses it as late).
fn lease_lost(claim: &Claim) -> TaskExecutionResult {
    failed(
        &claim.task_id,
        format!(
            "lease lost: the engine call was stopped (worker {})",
            claim.worker
        ),
    )
}

/// Accounts for one joined task: counts what the store did with its result
/// in `worked`, tells `on_event`, and drops its claim from `held` (a task
/// that panicked keeps it, to be released at the stop or to lapse).
/// `true`: the task waits for the budget ([`TaskEnd::BudgetWait`]), and
/// the worker claims again only once something settles or at its poll.
fn settle<S>(
    joined: Result<(tokio::task::Id, (Claim, TaskEnd)), tokio::task::JoinError>,
    held: &mut HashMap<tokio::task::Id, Claim>,
    worked: &mut Worked<S>,
    on_event: &mut impl FnMut(WorkerEvent<'_>),
) -> bool {
    let (id, (claim, end)) = match joined {
        Ok(v) => v,
        Err(e) => {
            // The task body panicked (an engine bug): its claim stays
            // held and is released at the stop, or lapses.
            if let Some(claim) = held.get(&e.id()) {
                on_event(WorkerEvent::Panicked { claim });
            }
            return false;
        }
    };
    held.remove(&id);
    let end = match end {
        TaskEnd::Done(r, c) => Some((*r, c)),
        TaskEnd::Lost => None,
        TaskEnd::Expanded(items) => {
            on_event(WorkerEvent::Expanded {
                claim: &claim,
                items,
            });
            return false;
        }
        TaskEnd::Reused(Commit::Committed) => {
            worked.committed += 1;
            on_event(WorkerEvent::Reused { claim: &claim });
            return false;
        }
        TaskEnd::BudgetWait => {
            on_event(WorkerEvent::WaitingForBudget { claim: &claim });
            return true;
        }
        TaskEnd::Reused(Commit::Refused) => None,
    };
    match end {
        Some((Ok(result), Some(Commit::Committed))) => {
            worked.committed += 1;
            on_event(WorkerEvent::Committed {
                claim: &claim,
                status: result.status,
            });
        }
        Some((Ok(_), Some(Commit::Refused))) | None => {
            worked.refused += 1;
            on_event(WorkerEvent::Refused { claim: &claim });
        }
        Some((Ok(_), None)) => on_event(WorkerEvent::EndedWithoutResult { claim: &claim }),
        Some((Err(error), _)) => on_event(WorkerEvent::StoreFailed {
            claim: &claim,
            error: &error,
        }),
    }
    false
}

/// The loop's bookkeeping, without PostgreSQL: what each way a task can end
/// counts as and tells the caller. The claim loop itself (claims, leases,
/// the fence) is tested against a real server in ctx-store-postgres's and
/// ctx-cli's store tests.
#[cfg(test)]
mod tests {
    use super::*;

    fn claim(task: &str) -> Claim {
        Claim {
            run_id: "run-1".into(),
            task_id: task.into(),
            attempt: 2,
            worker: "box-1".into(),
            plan_hash: "h".into(),
            budget: None,
            reserved: None,
        }
    }

    fn result(
        task: &str,
        status: TaskStatus,
    ) -> Box<Result<TaskExecutionResult, ctx_deps::StoreError>> {
        Box::new(Ok(TaskExecutionResult::new(task, status)))
    }

    fn said(event: &WorkerEvent<'_>) -> String {
        match event {
            WorkerEvent::Committed { claim, status } => {
                format!("committed {} {status:?}", claim.task_id)
            }
            WorkerEvent::Refused { claim } => format!("refused {}", claim.task_id),
            WorkerEvent::EndedWithoutResult { claim } => format!("no result {}", claim.task_id),
            WorkerEvent::StoreFailed { claim, error } => {
                format!("store failed {}: {error}", claim.task_id)
            }
            WorkerEvent::Panicked { claim } => format!("panicked {}", claim.task_id),
            WorkerEvent::Released { claim } => format!("released {}", claim.task_id),
            WorkerEvent::Expanded { claim, items } => {
                format!("expanded {} into {items}", claim.task_id)
            }
            WorkerEvent::Reused { claim } => format!("reused {}", claim.task_id),
            WorkerEvent::WaitingForBudget { claim } => format!("waits {}", claim.task_id),
        }
    }

    /// Runs `body` as a task of a `JoinSet` holding `claim`, as the loop
    /// does, and settles it.
    fn settle_one(
        claim: Claim,
        body: impl std::future::Future<Output = (Claim, TaskEnd)> + Send + 'static,
        held: &mut HashMap<tokio::task::Id, Claim>,
        worked: &mut Worked<()>,
        events: &mut Vec<String>,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let joined = rt.block_on(async {
            let mut running = tokio::task::JoinSet::new();
            let handle = running.spawn(body);
            held.insert(handle.id(), claim);
            running.join_next_with_id().await.expect("one task")
        });
        let waits = settle(joined, held, worked, &mut |e| events.push(said(&e)));
        if waits {
            events.push("(no claim until something settles)".into());
        }
    }

    #[test]
    fn each_end_is_counted_and_told_and_its_claim_dropped() {
        let mut held = HashMap::new();
        let mut worked = Worked {
            committed: 0,
            refused: 0,
            released: 0,
            stopped: None,
        };
        let mut events = Vec::new();
        let ends: Vec<(&str, TaskEnd)> = vec![
            (
                "a",
                TaskEnd::Done(result("a", TaskStatus::Completed), Some(Commit::Committed)),
            ),
            (
                "b",
                TaskEnd::Done(result("b", TaskStatus::Failed), Some(Commit::Committed)),
            ),
            (
                "c",
                TaskEnd::Done(result("c", TaskStatus::Completed), Some(Commit::Refused)),
            ),
            ("d", TaskEnd::Lost),
            ("e", TaskEnd::Done(result("e", TaskStatus::Completed), None)),
            (
                "f",
                TaskEnd::Done(
                    Box::new(Err(ctx_deps::StoreError::new("disk full"))),
                    Some(Commit::Committed),
                ),
            ),
            ("g", TaskEnd::BudgetWait),
        ];
        for (task, end) in ends {
            let c = claim(task);
            let body_claim = c.clone();
            settle_one(
                c,
                async move { (body_claim, end) },
                &mut held,
                &mut worked,
                &mut events,
            );
        }
        assert_eq!(
            events,
            [
                "committed a Completed",
                "committed b Failed",
                "refused c",
                "refused d",
                "no result e",
                "store failed f: execution store: disk full",
                "waits g",
                "(no claim until something settles)",
            ]
        );
        assert_eq!(
            (worked.committed, worked.refused, worked.released),
            (2, 2, 0)
        );
        assert!(held.is_empty(), "{held:?}");
    }

    /// A task body that panics (an engine bug) is told, and its claim is
    /// kept for the release at the stop; nothing is counted.
    #[test]
    fn a_panicked_task_keeps_its_claim() {
        let mut held = HashMap::new();
        let mut worked = Worked {
            committed: 0,
            refused: 0,
            released: 0,
            stopped: None,
        };
        let mut events = Vec::new();
        settle_one(
            claim("p"),
            async { panic!("an engine bug") },
            &mut held,
            &mut worked,
            &mut events,
        );
        assert_eq!(events, ["panicked p"]);
        assert_eq!((worked.committed, worked.refused), (0, 0));
        assert_eq!(held.values().collect::<Vec<_>>(), [&claim("p")]);
    }

    #[test]
    fn a_lost_lease_is_a_failure_naming_the_worker() {
        let r = lease_lost(&claim("t"));
        assert_eq!(r.task_id, "t");
        assert_eq!(r.status, TaskStatus::Failed);
        assert_eq!(
            r.error.as_deref(),
            Some("lease lost: the engine call was stopped (worker box-1)")
        );
    }
}
