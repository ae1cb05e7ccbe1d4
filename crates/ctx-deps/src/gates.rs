//! Approval gates in the executor (docs/runs.md, "Approval gates").
//!
//! A task with `approval: {before: run}` is checked when it is ready: the
//! store's decisions ([`ExecutionStore::decisions`](ctx_store::ExecutionStore::decisions))
//! are read then, so a decision recorded before the run reached the gate
//! counts. Approved, it runs (the decision becomes a `ctx.approval`
//! event on its task span); rejected, it fails with the note and its
//! dependents are skipped; undecided, it is held and the other branches
//! go on. When nothing else can run the run ends, each held task and
//! everything below it stored as `pending` with the reason, and the
//! report lists the held tasks ([`RunReport::awaiting`](crate::RunReport::awaiting)),
//! unless an [`ApprovalWait`] keeps the run waiting: then it sleeps until
//! its wake-up fires (a poll interval, or a notification) and reads the
//! decisions again, until its deadline.
//!
//! `before: publish` is not the executor's: the task runs as any other,
//! and publishing (ctx-run) holds its output.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ctx_model::approval::{Approval, Decision};

/// What wakes a wait for a decision: a future that resolves when a
/// decision may have been recorded (after a poll interval, or on a
/// store's notification).
pub type Wake = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How long a run keeps waiting for decisions when nothing else can run,
/// and what wakes it to read them again. Clones share one deadline.
#[derive(Clone)]
pub struct ApprovalWait {
    /// The longest the run waits in all, counted from the first time it
    /// has nothing to do but wait ([`Self::deadline`]).
    pub within: Duration,
    /// Resolves when the decisions are worth reading again.
    pub wake: Wake,
    started: Arc<OnceLock<tokio::time::Instant>>,
}

impl ApprovalWait {
    /// A wait of at most `within`, woken by `wake`.
    pub fn new(within: Duration, wake: Wake) -> ApprovalWait {
        ApprovalWait {
            within,
            wake,
            started: Arc::new(OnceLock::new()),
        }
    }

    /// A wait of at most `within` that reads the decisions again every
    /// `every` (a store with no notifications: SQLite).
    pub fn polling(within: Duration, every: Duration) -> ApprovalWait {
        ApprovalWait::new(
            within,
            Arc::new(move || Box::pin(tokio::time::sleep(every))),
        )
    }

    /// When the wait ends: `within` after the first call.
    pub fn deadline(&self) -> tokio::time::Instant {
        *self.started.get_or_init(tokio::time::Instant::now) + self.within
    }

    /// Sleeps until the wake-up or the deadline; `false` (at once) when
    /// the deadline has passed.
    pub async fn wait_once(&self) -> bool {
        let until = self.deadline();
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::select! {
            () = (self.wake)() => {}
            () = tokio::time::sleep_until(until) => {}
        }
        true
    }
}

impl std::fmt::Debug for ApprovalWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalWait")
            .field("within", &self.within)
            .finish_non_exhaustive()
    }
}

/// How often a SQLite run waiting with `--wait-approval` reads its
/// decisions again (docs/runs.md).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The error of a task whose `before: run` gate was rejected.
pub fn rejected_reason(d: &Decision) -> String {
    let note = d.note.as_deref().unwrap_or("no note");
    format!("rejected by {} at {}: {note}", d.by, d.at)
}

/// The error stored with a held task (status `pending`).
pub fn awaiting_reason(approval: &Approval) -> String {
    match &approval.message {
        Some(m) => format!("awaiting approval (before: {}): {m}", approval.before),
        None => format!("awaiting approval (before: {})", approval.before),
    }
}

/// The error stored with a task below a held one (status `pending`).
pub fn below_awaiting_reason(held: &str, direct: bool) -> String {
    if direct {
        format!("waiting: dependency `{held}` awaits approval")
    } else {
        format!("waiting: upstream task `{held}` awaits approval")
    }
}

/// The failed result of task `task_id`, whose `before: run` gate `d`
/// rejected, its task span recorded with the decision: the executor's
/// and a shared store's worker's alike.
pub fn rejected_result(task_id: &str, d: &Decision) -> ctx_model::TaskExecutionResult {
    let mut r = ctx_model::TaskExecutionResult::new(task_id, ctx_model::TaskStatus::Failed);
    r.error = Some(rejected_reason(d));
    let span = crate::spans::task_span(task_id);
    span.in_scope(|| decision_event(d));
    crate::spans::record_task(&span, &r);
    r
}

/// Task `task_id`'s span, opened with the approval `d` its `before: run`
/// gate was opened by as an event on it: a map task's, which no job
/// holds (the executor keeps it open to the map's join; a shared store's
/// worker closes it when the expansion's turn ends).
pub fn approved_span(task_id: &str, d: Option<&Decision>) -> tracing::Span {
    let span = crate::spans::task_span(task_id);
    if let Some(d) = d {
        span.in_scope(|| decision_event(d));
    }
    span
}

/// A decision as an event on the task's span (`ctx.approval`).
pub(crate) fn decision_event(d: &Decision) {
    tracing::info!(
        "event.name" = "ctx.approval",
        "ctx.approval.stage" = d.stage.as_str(),
        "ctx.approval.verdict" = d.verdict.as_str(),
        "ctx.approval.by" = d.by.as_str(),
        "ctx.approval.at" = d.at.as_str(),
        "ctx.approval.note" = d.note.as_deref(),
        "ctx.approval.output_sha256" = d.output_sha256.as_deref(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::approval::{GateStage, Verdict};

    #[test]
    fn the_reasons_name_the_gate_the_person_and_the_note() {
        let a = Approval {
            before: GateStage::Run,
            message: Some("Check the sources".into()),
        };
        assert_eq!(
            awaiting_reason(&a),
            "awaiting approval (before: run): Check the sources"
        );
        let d = Decision {
            task_id: "t".into(),
            stage: GateStage::Run,
            verdict: Verdict::Reject,
            by: "ana".into(),
            at: "2026-12-06T05:00:00Z".into(),
            note: Some("sources are stale".into()),
            output_sha256: None,
        };
        assert_eq!(
            rejected_reason(&d),
            "rejected by ana at 2026-12-06T05:00:00Z: sources are stale"
        );
        assert_eq!(
            below_awaiting_reason("t", true),
            "waiting: dependency `t` awaits approval"
        );
    }
}
