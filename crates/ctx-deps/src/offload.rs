//! Store calls, off the async runtime.
//!
//! [`ExecutionStore`] is synchronous on purpose (every backend we ship
//! answers in microseconds to milliseconds, and a synchronous trait is the
//! easiest to implement). But "milliseconds" includes an fsync per commit
//! in the durable SQLite store, and a networked store may wait on a round
//! trip: run on a Tokio worker thread, such a call stalls every task that
//! thread would otherwise poll, and on a current-thread runtime the whole
//! executor, dispatching included. So the executor never calls the store
//! directly: each call goes through these functions, which run it on
//! Tokio's blocking pool with [`ctx_store::off_runtime`] (the one helper,
//! which the output cache of ctx-store-sqlite uses too) and await it. The
//! cost is one thread hand-off per call, nothing next to an fsync or an LLM
//! call.

use std::sync::Arc;

use ctx_model::TaskExecutionResult;
use ctx_store::{ExecutionStore, StoreError};

/// Runs `call` with the store on the blocking pool
/// ([`ctx_store::off_runtime`]).
async fn with_store<T, F>(store: &Arc<dyn ExecutionStore>, call: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce(&dyn ExecutionStore) -> Result<T, StoreError> + Send + 'static,
{
    let store = Arc::clone(store);
    ctx_store::off_runtime(move || call(store.as_ref()))
        .await
        .unwrap_or_else(|e| {
            Err(StoreError::new(format!(
                "the store call did not finish: {e}"
            )))
        })
}

/// [`ExecutionStore::store`], off the runtime.
pub(crate) async fn store(
    store: &Arc<dyn ExecutionStore>,
    result: TaskExecutionResult,
) -> Result<(), StoreError> {
    with_store(store, move |s| s.store(result)).await
}

/// [`ExecutionStore::decisions`], off the runtime.
pub(crate) async fn decisions(
    store: &Arc<dyn ExecutionStore>,
) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
    with_store(store, |s| s.decisions()).await
}

/// [`ExecutionStore::get_by_task_id`], off the runtime.
pub(crate) async fn get_by_task_id(
    store: &Arc<dyn ExecutionStore>,
    task_id: &str,
) -> Result<Option<TaskExecutionResult>, StoreError> {
    let id = task_id.to_string();
    with_store(store, move |s| s.get_by_task_id(&id)).await
}

/// [`ExecutionStore::get_by_dependency_ids`], off the runtime.
pub(crate) async fn get_by_dependency_ids(
    store: &Arc<dyn ExecutionStore>,
    ids: &[String],
) -> Result<Vec<TaskExecutionResult>, StoreError> {
    let ids = ids.to_vec();
    with_store(store, move |s| s.get_by_dependency_ids(&ids)).await
}

/// [`ExecutionStore::all_results`], off the runtime: a resumed map's
/// stored items are looked up among them.
pub(crate) async fn all_results(
    store: &Arc<dyn ExecutionStore>,
) -> Result<Vec<TaskExecutionResult>, StoreError> {
    with_store(store, |s| s.all_results()).await
}
