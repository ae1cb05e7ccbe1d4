//! [`ResultRecord`]: a stored result with what a durable store keeps
//! beside it (the engine, the task's fingerprint, when and in which session
//! it was stored). Every durable store reads these back for `ctx runs` and
//! for [`ResumePlan::compute`](crate::ResumePlan::compute).

use ctx_model::TaskExecutionResult;

use crate::fingerprint::TaskFingerprint;

/// One stored result: a row of the attempts history, or a task's latest.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRecord {
    /// The result as the executor stored it.
    pub result: TaskExecutionResult,
    /// SHA-256 of `result.prompt`.
    pub prompt_hash: Option<String>,
    /// The engine of the session that stored it.
    pub engine: String,
    /// The task's fingerprint under the plan of that session (`None` when
    /// the task was not in that plan).
    pub fingerprint: Option<TaskFingerprint>,
    /// The session (1 = first run) that stored it.
    pub session: i64,
    /// When it was stored (RFC 3339, UTC).
    pub recorded_at: String,
    /// Its position in the run's history (increasing).
    pub seq: i64,
    /// For a task's latest result: the history position where the execution
    /// that produced it started (its `in_progress` row, or the result itself
    /// when there was none); `None` for tasks that never started (skipped,
    /// pending) and for history rows. Sorting by it gives the start order.
    pub started_seq: Option<i64>,
    /// The `recorded_at` of the row `started_seq` points at: when the
    /// execution that produced this result started (RFC 3339, UTC). `None`
    /// exactly when `started_seq` is. Read in the same query so a report of
    /// a 2,000-task run does not look up 2,000 history rows one by one.
    pub started_at: Option<String>,
}
