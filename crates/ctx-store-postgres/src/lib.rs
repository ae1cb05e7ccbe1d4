//! # ctx-store-postgres: one plan, many workers
//!
//! A shared execution store on PostgreSQL, so that several `ctx worker`
//! processes, on one machine or many, execute the tasks of one run (or of
//! many runs) together. docs/scaling.md has the design and the figures;
//! docs/runs.md the commands.
//!
//! - **Runs** are registered once ([`PgStore::register_run`]): the plan
//!   (as run), one row per task with its ready counter (dependencies not
//!   yet completed) and its priority (remaining path length), and the
//!   edges.
//! - **Claims** ([`PgStore::claim`], [`PgStore::claim_many`]) take the
//!   ready tasks with the longest remaining path with `FOR UPDATE SKIP
//!   LOCKED`: concurrent workers never get the same task and never wait on
//!   each other's rows. A claim returns each task's dependency results, so
//!   a worker starts the prompt without another round trip.
//! - **Leases**: a claim carries a lease that the worker renews
//!   ([`PgStore::heartbeat`]) and a fencing token (the task's `attempt`).
//!   A worker that dies loses the task when its lease lapses, and the next
//!   claim re-runs it. A result commits ([`PgStore::complete`]) only under
//!   a live lease with the current token: a worker that was only slow
//!   cannot overwrite the re-run; its late commit is refused, counted and
//!   kept in the history. Execution is at least once; every task has
//!   exactly one committed result.
//! - **Readiness** travels with the commit: a completion decrements its
//!   dependents' ready counters (a failure skips its transitive
//!   dependents, which the store reads from the run's edges, so they are
//!   skipped even when no worker could load the plan) in the same
//!   transaction that makes the result visible.
//! - The seam: [`RunStore`] is the [`ExecutionStore`] of one run for one
//!   writer; [`ClaimStore`] is the one a worker hands the task runner for a
//!   claimed task: dependency results are read from the database (no
//!   in-memory hand-off between workers), the `in_progress` prompt and the
//!   final result are written under the claim.
//!
//! - **Maps** (issue 23): a map task is claimed when its source is
//!   ready, and the worker holding the claim registers its items as
//!   tasks of the run ([`PgStore::expand_map`], one transaction under the
//!   claim's fence); many workers then claim the items, and the map task
//!   is claimed again, for its join, once every item ended.
//!
//! - Reading a run back for reports, exports and resume planning goes
//!   through the shared [`RunHistory`](ctx_store::RunHistory) seam
//!   ([`PgRunView`]), so those rules are written once for both stores.
//!   Resuming ([`PgStore::reopen_run`]) applies the shared
//!   [`ResumePlan`](ctx_store::ResumePlan); old runs are removed only by
//!   [`PgStore::gc`] (`ctx runs gc`), never by a worker.
//!
//! Schema versions, a newer schema and a foreign database: [`schema`].
//! Passwords in URLs are never printed: [`StoreUrl::display`].
//!
//! [`ExecutionStore`]: ctx_store::ExecutionStore

mod claims;
mod connection;
mod decisions;
mod error;
mod listener;
mod maps;
mod periods;
mod publishes;
mod purses;
mod reads;
mod rows;
mod runs;
pub mod schema;
mod store;
mod url;
mod view;

use std::sync::Mutex;

use ctx_model::{TaskExecutionResult, TaskStatus};
use ctx_store::{ExecutionStore, StoreError};

pub use claims::{Claim, Claimed, Commit, MAX_CLAIM_BATCH, Reservation};
pub use error::{Error, Result};
pub use listener::Listener;
pub use maps::{Expanded, Expansion, ItemRow};
pub use rows::{AttemptRow, DroppedRow, GcReport, RunInfo, TaskRow};
pub use runs::{RegisterRun, Reopen};
pub use schema::{APPLICATION, MIGRATIONS, Migration, SCHEMA_VERSION};
pub use store::{PgStore, StoreOptions};
pub use url::{StoreUrl, redact};
pub use view::PgRunView;

pub use ctx_store::url::is_postgres_url;

/// The [`ExecutionStore`] of one run, for a single writer: `store` makes a
/// result the task's whatever claim it has (a completion still releases
/// its dependents). Workers use [`ClaimStore`] instead.
#[derive(Debug, Clone)]
pub struct RunStore {
    store: PgStore,
    run_id: String,
}

impl RunStore {
    pub(crate) fn new(store: PgStore, run_id: String) -> RunStore {
        RunStore { store, run_id }
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }
}

fn in_order(ids: &[String], mut found: Vec<TaskExecutionResult>) -> Vec<TaskExecutionResult> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(i) = found.iter().position(|r| &r.task_id == id) {
            out.push(found.swap_remove(i));
        }
    }
    out
}

impl ExecutionStore for RunStore {
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        let mut found = self
            .store
            .blocking_results(&self.run_id, Some(vec![task_id.to_string()]))?;
        Ok(found.pop())
    }

    fn get_by_dependency_ids(
        &self,
        ids: &[String],
    ) -> Result<Vec<TaskExecutionResult>, StoreError> {
        let found = self
            .store
            .blocking_results(&self.run_id, Some(ids.to_vec()))?;
        Ok(in_order(ids, found))
    }

    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
        Ok(self.store.blocking_store(&self.run_id, &result)?)
    }

    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        Ok(self.store.blocking_results(&self.run_id, None)?)
    }

    fn decisions(&self) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        Ok(self
            .store
            .blocking(async move { store.decisions(&id).await })?)
    }
}

/// The [`ExecutionStore`] a worker gives the task runner for one claimed
/// task. Reads are the run's; writes go under the claim:
///
/// - the dependencies' results the claim read ([`Claimed::inputs`]) are
///   answered from memory (they cannot change while the claim is live);
///   any other read goes to the database;
/// - the `in_progress` result (the exact prompt) is saved while the lease
///   is live, without holding up the task, once the call has run for
///   [`PROGRESS_AFTER`]: the write waits on its own while the engine is
///   called, and a call that ends sooner (most, under a fast model) writes
///   nothing but its terminal result, which holds the prompt too. The
///   next write under the claim stops a write still waiting, or waits
///   for one under way, so they land in order;
/// - the terminal result is committed with [`PgStore::complete`]: only
///   under a live lease, releasing or skipping dependents in the same
///   transaction. A refused (late) commit is not an error of the store —
///   `store` returns `Ok` so the task body ends normally — and
///   [`ClaimStore::outcome`] tells the worker what happened.
#[derive(Debug)]
pub struct ClaimStore {
    store: PgStore,
    /// The run's reads, which a claim does not change.
    reads: RunStore,
    claim: Claim,
    /// The claimed task's dependencies' results, read with the claim.
    inputs: Vec<TaskExecutionResult>,
    outcome: Mutex<Option<Commit>>,
    /// Held for the whole of every write under the claim; `closed` once
    /// the worker has [closed](ClaimStore::close) the claim. The task
    /// body's writes run on a blocking thread (ctx-deps moves store calls
    /// off the async runtime), so dropping the body when the lease is lost
    /// does not stop a write already under way: closing waits for it, and
    /// a write that starts later does nothing. Each attempt then makes at
    /// most one terminal commit, and a late one is counted once.
    writes: Mutex<Writes>,
}

/// How long a claimed task's call runs before its `in_progress` prompt
/// is written (for `ctx runs show` while it runs). A call that ends
/// sooner is not written twice: the server's CPU per task is what
/// bounds a map of many short items (docs/scaling.md).
pub const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The writes under a claim: whether it was closed, and the `in_progress`
/// write still waiting or under way, with what stops it while it waits.
#[derive(Debug, Default)]
struct Writes {
    closed: bool,
    progress: Option<tokio::task::JoinHandle<Result<bool>>>,
    stop_progress: Option<tokio::sync::oneshot::Sender<()>>,
}

impl ClaimStore {
    /// A store for `claim`, whose dependencies' results are read from the
    /// database.
    pub fn new(store: PgStore, claim: Claim) -> Self {
        ClaimStore::with_inputs(
            store,
            Claimed {
                claim,
                inputs: Vec::new(),
                kept: None,
            },
        )
    }

    /// A store for a claim and the dependencies' results it read.
    pub fn with_inputs(store: PgStore, claimed: Claimed) -> Self {
        ClaimStore {
            reads: RunStore::new(store.clone(), claimed.claim.run_id.clone()),
            store,
            claim: claimed.claim,
            inputs: claimed.inputs,
            outcome: Mutex::new(None),
            writes: Mutex::new(Writes::default()),
        }
    }

    /// Ends the task body's writes under this claim (the worker lost the
    /// lease and stopped the body): waits for a write under way, refuses
    /// later ones, and says what became of the terminal result, if one
    /// was stored.
    pub fn close(&self) -> Option<Commit> {
        if let Ok(mut w) = self.writes.lock() {
            w.closed = true;
            let _ = self.settle_progress(&mut w);
        }
        self.outcome()
    }

    /// The claim.
    pub fn claim(&self) -> &Claim {
        &self.claim
    }

    /// What became of the terminal result: `None` before it was stored,
    /// or when the claim was lost before the task ended.
    pub fn outcome(&self) -> Option<Commit> {
        self.outcome.lock().ok().and_then(|o| *o)
    }

    fn set(&self, c: Commit) {
        if let Ok(mut o) = self.outcome.lock() {
            *o = Some(c);
        }
    }

    /// Waits for the `in_progress` write under way, if any: a lost claim
    /// is recorded as a refused outcome; the store's error is returned.
    fn settle_progress(&self, w: &mut Writes) -> Result<(), StoreError> {
        // A write still waiting ends without writing; one under way is
        // waited for.
        if let Some(stop) = w.stop_progress.take() {
            let _ = stop.send(());
        }
        let Some(handle) = w.progress.take() else {
            return Ok(());
        };
        let live = self
            .store
            .blocking(async move { handle.await.map_err(|e| Error::Runtime(e.to_string()))? })?;
        if !live {
            self.set(Commit::Refused);
        }
        Ok(())
    }

    /// The inputs read with the claim, in the order of `ids`, when they
    /// hold every one of `ids`.
    fn read_with_claim(&self, ids: &[String]) -> Option<Vec<TaskExecutionResult>> {
        ids.iter()
            .map(|id| self.inputs.iter().find(|r| &r.task_id == id).cloned())
            .collect()
    }
}

impl ExecutionStore for ClaimStore {
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        if let Some(mut found) = self.read_with_claim(&[task_id.to_string()]) {
            return Ok(found.pop());
        }
        self.reads.get_by_task_id(task_id)
    }

    fn get_by_dependency_ids(
        &self,
        ids: &[String],
    ) -> Result<Vec<TaskExecutionResult>, StoreError> {
        match self.read_with_claim(ids) {
            Some(found) => Ok(found),
            None => self.reads.get_by_dependency_ids(ids),
        }
    }

    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
        if result.task_id != self.claim.task_id {
            return Err(StoreError::new(format!(
                "a claim on task `{}` cannot store task `{}`",
                self.claim.task_id, result.task_id
            )));
        }
        let Ok(mut w) = self.writes.lock() else {
            return Err(StoreError::new("the claim's write lock is poisoned"));
        };
        if w.closed {
            // The worker gave the claim up; nothing more is written.
            return Ok(());
        }
        let store = self.store.clone();
        let claim = self.claim.clone();
        match result.status {
            TaskStatus::Pending => Ok(()),
            TaskStatus::InProgress => {
                // The previous attempt's prompt lands before this one.
                self.settle_progress(&mut w)?;
                let Some(handle) = self.store.rt.handle() else {
                    return Err(Error::Runtime("stopped".into()).into());
                };
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                w.progress = Some(handle.spawn(async move {
                    tokio::select! {
                        biased;
                        // Stopped (or the claim's store dropped): the task
                        // ended, or asked again, first.
                        _ = stopped => return Ok(true),
                        () = tokio::time::sleep(PROGRESS_AFTER) => {}
                    }
                    store.save_progress(&claim, &result).await
                }));
                w.stop_progress = Some(stop);
                Ok(())
            }
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Skipped => {
                // A prompt that could not be saved is no reason to lose the
                // result: the commit is tried whatever became of it.
                let _ = self.settle_progress(&mut w);
                let outcome = self
                    .store
                    .blocking(async move { store.complete(&claim, &result).await })?;
                self.set(outcome);
                Ok(())
            }
        }
    }

    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        self.reads.all_results()
    }

    fn decisions(&self) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
        self.reads.decisions()
    }
}
