//! What the store's reads return: runs, tasks, attempts and dropped
//! results as rows, with times as RFC 3339 UTC text.

use ctx_model::{TaskExecutionResult, TaskStatus};
use ctx_store::{RunState, StatusCounts};

/// A run as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    /// Its id.
    pub run_id: String,
    /// When it was registered (RFC 3339, UTC).
    pub created_at: String,
    /// When its last task became terminal.
    pub finished_at: Option<String>,
    /// Whether tasks remain to run.
    pub open: bool,
    /// The engine label given at registration.
    pub engine: String,
    /// The plan's path as given.
    pub plan_source: Option<String>,
    /// SHA-256 of the stored plan JSON.
    pub plan_hash: String,
    /// Tasks in the plan.
    pub task_count: usize,
    /// Tasks per status.
    pub counts: StatusCounts,
    /// Results refused because their lease had lapsed.
    pub late_commits: i64,
    /// Claims beyond the first, summed over tasks: re-runs after a lapsed
    /// lease or a release.
    pub reclaims: i64,
}

impl RunInfo {
    /// Where the run stands: an open run (tasks remain for workers) is
    /// running; a closed one completed when every task did, else failed.
    /// What `ctx runs show` and the report say.
    pub fn state(&self) -> RunState {
        if self.open {
            RunState::Running
        } else if self.counts.completed == self.task_count {
            RunState::Completed
        } else {
            RunState::Failed
        }
    }

    /// The state `ctx runs list` prints: `open` for an open run no worker
    /// is executing (registered, or between claims), else [`Self::state`].
    pub fn listed_state(&self) -> &'static str {
        if self.open && self.counts.in_progress == 0 {
            "open"
        } else {
            self.state().as_str()
        }
    }
}

/// One task's row.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// The task.
    pub task_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// Claims so far.
    pub attempt: i32,
    /// Its latest result, once it has one.
    pub result: Option<TaskExecutionResult>,
    /// When its current or last claim started (RFC 3339, UTC).
    pub started_at: Option<String>,
    /// When it became terminal.
    pub finished_at: Option<String>,
    /// Its last claim's place in the order of all claims: sorting by it
    /// gives the dispatch order.
    pub claim_seq: Option<i64>,
    /// The engine label of the worker that claimed it last, when that
    /// worker gave one ([`PgStore::with_engine`](crate::PgStore::with_engine)).
    pub engine: Option<String>,
    /// Its result is the one it had before the latest resume, taken as
    /// stored by its claim because the items of the maps above it came
    /// back unchanged ([`PgStore::complete_taken`](crate::PgStore::complete_taken)):
    /// reused, not run.
    pub taken: bool,
}

/// What [`PgStore::gc`](crate::PgStore::gc) did, each list oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Runs deleted.
    pub removed: Vec<String>,
    /// Runs kept because they are among the newest `keep`.
    pub kept: Vec<String>,
    /// Runs beyond `keep` kept because they are open (tasks remain for
    /// workers); `force` removes them.
    pub open: Vec<String>,
}

/// One terminal result a worker committed, or tried to: a row of the
/// run's history.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRow {
    /// Its place in the order of all recorded results.
    pub seq: i64,
    /// The task.
    pub task_id: String,
    /// The claim's fencing token.
    pub attempt: i32,
    /// The worker that sent it.
    pub worker: Option<String>,
    /// `false` for a late commit the fence refused.
    pub committed: bool,
    /// The result.
    pub result: TaskExecutionResult,
    /// When it was recorded (RFC 3339, UTC).
    pub recorded_at: String,
    /// The run's session when it was recorded: 1 from registration, one
    /// more at each resume (schema 8; 1 for attempts recorded before).
    pub session: i32,
}

/// A kept result of a task a resume dropped from the run (see
/// [`PgStore::dropped`](crate::PgStore::dropped)).
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedRow {
    /// The task.
    pub task_id: String,
    /// Its status when it was dropped.
    pub status: TaskStatus,
    /// Its latest result then.
    pub result: TaskExecutionResult,
    /// The engine label it was produced under.
    pub engine: String,
    /// Its fingerprint under the plan it was produced under.
    pub fingerprint: ctx_store::TaskFingerprint,
    /// Its claim's place in the order of all claims.
    pub claim_seq: Option<i64>,
    /// When that claim started (RFC 3339, UTC).
    pub started_at: Option<String>,
    /// When it became terminal.
    pub finished_at: Option<String>,
}

/// A task status as stored (`TaskStatus::as_str`).
pub(crate) fn parse_status(s: &str) -> TaskStatus {
    match s {
        "in_progress" => TaskStatus::InProgress,
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "skipped" => TaskStatus::Skipped,
        _ => TaskStatus::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(open: bool, counts: StatusCounts) -> RunInfo {
        RunInfo {
            run_id: "r".into(),
            created_at: "2026-12-01T00:00:00Z".into(),
            finished_at: None,
            open,
            engine: "dry-run".into(),
            plan_source: None,
            plan_hash: String::new(),
            task_count: counts.total(),
            counts,
            late_commits: 0,
            reclaims: 0,
        }
    }

    #[test]
    fn a_run_is_open_until_claimed_running_while_claimed_then_completed_or_failed() {
        let waiting = info(
            true,
            StatusCounts {
                pending: 2,
                ..StatusCounts::default()
            },
        );
        assert_eq!(waiting.state(), RunState::Running);
        assert_eq!(waiting.listed_state(), "open");
        let claimed = info(
            true,
            StatusCounts {
                pending: 1,
                in_progress: 1,
                ..StatusCounts::default()
            },
        );
        assert_eq!(claimed.listed_state(), "running");
        let done = info(
            false,
            StatusCounts {
                completed: 2,
                ..StatusCounts::default()
            },
        );
        assert_eq!(done.listed_state(), "completed");
        let failed = info(
            false,
            StatusCounts {
                completed: 1,
                skipped: 1,
                ..StatusCounts::default()
            },
        );
        assert_eq!(failed.state(), RunState::Failed);
        assert_eq!(failed.listed_state(), "failed");
    }
}
