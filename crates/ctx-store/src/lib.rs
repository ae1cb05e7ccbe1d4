//! # ctx-store: the `ExecutionStore` seam
//!
//! Where results live. The executor in `ctx-deps` never knows whether
//! results sit in a `HashMap` or a SQLite file; it calls these methods and
//! nothing else. The operations are the originating design's
//! (`getByTaskId`, `getByDependencyIds`, `store`) plus `all_results`, which
//! a summary and a resume need.
//!
//! The trait lives in a crate of its own, apart from the durable
//! implementations (`ctx-store-sqlite`, `ctx-store-postgres`), so that a
//! store depends on the plan model and this crate only, never on prompt
//! assembly or the executor. The in-memory [`MemoryStore`] lives here,
//! beside the trait, because it needs nothing else.
//!
//! Beside the trait sit the rules every *durable* store shares, so that
//! two stores cannot disagree on them: what a task's result depends on
//! ([`mod@fingerprint`]), the record a store keeps per result
//! ([`ResultRecord`]), and which tasks a resume reuses and which it runs
//! again, and why ([`ResumePlan`]), and the read side of a stored run that
//! reports, exports and resume planning use ([`RunHistory`]).
//!
//! Methods take `&self`: stores use interior mutability so that one store
//! can be shared (`Arc<dyn ExecutionStore>`) between the executor and a
//! progress reporter. They are synchronous because every backend we ship
//! answers in microseconds to milliseconds; a networked backend would do its
//! own blocking inside.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Mutex;
//! use ctx_model::{TaskExecutionResult, TaskStatus};
//! use ctx_store::{ExecutionStore, StoreError};
//!
//! /// Results in a sorted map.
//! #[derive(Default)]
//! struct MapStore(Mutex<BTreeMap<String, TaskExecutionResult>>);
//!
//! impl ExecutionStore for MapStore {
//!     fn get_by_task_id(&self, id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
//!         let map = self.0.lock().map_err(|_| StoreError::new("poisoned"))?;
//!         Ok(map.get(id).cloned())
//!     }
//!     fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
//!         let mut map = self.0.lock().map_err(|_| StoreError::new("poisoned"))?;
//!         map.insert(result.task_id.clone(), result);
//!         Ok(())
//!     }
//!     fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
//!         let map = self.0.lock().map_err(|_| StoreError::new("poisoned"))?;
//!         Ok(map.values().cloned().collect())
//!     }
//! }
//!
//! let store = MapStore::default();
//! store.store(TaskExecutionResult::new("html", TaskStatus::Completed)).unwrap();
//! let found = store.get_by_dependency_ids(&["html".into(), "css".into()]).unwrap();
//! assert_eq!(found.len(), 1); // `css` has no result yet
//! ```

pub mod fingerprint;
pub mod gates;
pub mod history;
pub mod inputs;
pub mod memory;
#[cfg(feature = "tokio")]
mod offload;
pub mod period;
pub mod record;
pub mod resume;
pub mod secret_mask;
pub mod trace_ids;
pub mod url;

pub use fingerprint::{
    TaskFingerprint, fingerprint, fingerprint_all, is_secret_key, redact_plan, sha256_hex,
};
pub use gates::{DecisionRefused, DecisionRequest, check_decision};
pub use history::{
    PublishEvent, PublishKind, Published, RunBatch, RunHeader, RunHistory, RunState, StatusCounts,
    in_effect,
};
pub use inputs::{RunInputs, StoredValue, secret_hash};
pub use memory::MemoryStore;
#[cfg(feature = "tokio")]
pub use offload::off_runtime;
pub use record::ResultRecord;
pub use resume::{RerunReason, ResumePlan, UnknownRerunTask, check_rerun_ids};
pub use secret_mask::{MaskedStore, SecretMask, masked_store};
pub use trace_ids::RunTraceIds;

use ctx_model::TaskExecutionResult;

/// Why a task is skipped: its direct dependency, or a task further up,
/// failed. Here, beside the store seam, so that the executor and the
/// shared store (which skips a failed task's dependents in the commit
/// transaction, computed from its own edges) word it the same way.
pub fn skip_reason(failed: &str, direct: bool) -> String {
    if direct {
        format!("dependency `{failed}` failed")
    } else {
        format!("upstream task `{failed}` failed")
    }
}

/// Why a dependent of `skipped`, a task the run's budget could not fit
/// (`--max-cost`), is skipped too (`direct`: it depends on it itself).
/// Starts with `budget`, as the skipped task's own reason does, which is
/// how the reports count both as the budget's. One text for every store:
/// the executor writes it for a local run, the shared store's commit for
/// a shared one.
pub fn over_budget_reason(skipped: &str, direct: bool) -> String {
    if direct {
        format!("budget: dependency `{skipped}` was not run (over budget)")
    } else {
        format!("budget: upstream task `{skipped}` was not run (over budget)")
    }
}

/// A backend failed to read or write.
///
/// The message is what a person reads (it names the task or file where
/// known, and already says what the backend said); a backend's own typed
/// error is kept as the [source](std::error::Error::source), so an embedder
/// can downcast it (`ctx_store_sqlite::Error::is_not_found`, a Postgres
/// connection error) instead of matching on text.
#[derive(Debug, thiserror::Error)]
#[error("execution store: {message}")]
pub struct StoreError {
    /// What went wrong, naming the task or file where known.
    pub message: String,
    /// The backend's own error, when there is one.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StoreError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            source: None,
        }
    }

    /// A backend's error, said in its own words and kept as the source.
    pub fn wrap(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError {
            message: source.to_string(),
            source: Some(Box::new(source)),
        }
    }
}

/// Holds task results for one run.
pub trait ExecutionStore: Send + Sync {
    /// The latest result recorded for `task_id`.
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError>;

    /// The latest results for `ids`, in the order of `ids`, leaving out ids
    /// with no result.
    fn get_by_dependency_ids(
        &self,
        ids: &[String],
    ) -> Result<Vec<TaskExecutionResult>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(r) = self.get_by_task_id(id)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Records `result` as the task's latest. A durable store must have
    /// committed it when this returns: the executor starts dependents only
    /// after `store` of a completed result has returned `Ok`.
    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError>;

    /// Every task's latest result, ordered by task id.
    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError>;

    /// Every decision recorded on the run's approval gates (`ctx runs
    /// approve`, `ctx runs reject`), oldest first: the executor reads it
    /// each time a gated task is ready, so a decision recorded before the
    /// run reaches its gate counts. The default, for a store that keeps
    /// none (in memory), is none.
    fn decisions(&self) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
        Ok(Vec::new())
    }
}
