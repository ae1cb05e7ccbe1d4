//! # ctx-store-sqlite: durable runs
//!
//! A plan run can take an hour and cost money; this crate makes it durable.
//! [`SqliteStore`] implements ctx-deps' [`ExecutionStore`] on one SQLite
//! file per run (`{root}/{run-id}/store.sqlite`, WAL, `synchronous=FULL`):
//! every result is committed before `store` returns, with its full history.
//! On top of it:
//!
//! - **one writer**: a run's lock (`run.lock`, an OS file lock) is held for
//!   as long as its [`SqliteStore`] lives and vanishes with the process;
//! - **resume**: [`ResumePlan`] decides per task whether the stored result
//!   can be reused or why it must run again, `make`-style;
//! - **cache** (opt-in): [`CachingEngine`] answers an identical request
//!   (engine, model, params, final prompt) from any earlier run under the
//!   same root;
//! - **inspection**: [`RunRoot`] lists and garbage-collects runs,
//!   [`RunView`] reads one without locking it.
//!
//! Layout, schema, rules and guarantees: docs/runs.md.
//!
//! ```
//! use ctx_store::ExecutionStore;
//! use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
//! use ctx_store_sqlite::{NewRun, RunRoot, SessionEnd, SqliteStore};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let plan: Plan = serde_json::from_str(r#"{"schema_version": 1, "sub_tasks": [
//!   {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Hi"}}},
//!   {"id": "b", "description": "B", "dependencies": ["a"],
//!    "tool_or_prompt": {"name": "inference", "params": {"prompt": "Then"}}}]}"#)?;
//! let root = RunRoot::new(tmp.path().join(".ctx/runs"));
//! let new = NewRun { plan: &plan, engine: "dry-run", plan_source: Some("plan.json"), inputs: None };
//!
//! // A first run stores `a`, then dies before `b` finishes.
//! let store = root.create(&new)?;
//! let mut a = TaskExecutionResult::new("a", TaskStatus::Completed);
//! a.output = "out a".into();
//! store.store(a)?;
//! store.store(TaskExecutionResult::new("b", TaskStatus::InProgress))?;
//! let id = store.run_id().to_string();
//! drop(store); // the lock goes with it, as with a killed process
//!
//! // Resume: `a` is reused, `b` runs again.
//! let (store, plan_of_resume) = SqliteStore::resume(&root.resolve(&id)?, &new)?;
//! assert_eq!(plan_of_resume.reuse, ["a"]);
//! assert_eq!(plan_of_resume.rerun[0].1.to_string(), "in_progress (crashed)");
//! store.store(TaskExecutionResult::new("b", TaskStatus::Completed))?;
//! store.finish(SessionEnd::Finished)?;
//! assert_eq!(store.view().status_counts()?.completed, 2);
//! # Ok(()) }
//! ```
//!
//! [`ExecutionStore`]: ctx_store::ExecutionStore

mod batches;
mod budgets;
mod cache;
mod decisions;
mod error;
mod history;
mod id;
mod lock;
mod publishes;
mod root;
mod rows;
mod schema;
mod store;
mod view;

pub use batches::BatchLog;
pub use budgets::{BUDGET_FILE, PeriodGrant, PeriodKey, PeriodLedger, PeriodState};
pub use cache::{CACHE_FILE, CacheStats, CachedOutput, CachingEngine, ResultCache, cache_key};
pub use decisions::decide;
pub use error::{Error, Result};
// The rules every durable store shares live in ctx-store; re-exported so
// that users of this store find them here too.
pub use ctx_store::{
    RerunReason, ResultRecord, ResumePlan, TaskFingerprint, fingerprint, is_secret_key,
    redact_plan, sha256_hex,
};
pub use id::{is_run_id, new_run_id};
pub use lock::LOCK_FILE;
pub use publishes::PublishLog;
pub use root::{DEFAULT_ROOT, GcReport, RunRoot, RunSummary, StartAt, UnreadableRun};
pub use schema::{
    CACHE_APPLICATION_ID, Migration, RUN_APPLICATION_ID, RUN_MIGRATIONS, RUN_SCHEMA_VERSION,
    STORE_FILE, migrate,
};
pub use store::{NewRun, SessionEnd, SqliteStore};
pub use view::{RunState, RunView, SessionInfo, StatusCounts};
