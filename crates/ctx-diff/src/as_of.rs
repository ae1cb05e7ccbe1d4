//! A run as it stood after one of its sessions: `ctx runs diff RUN@N RUN`
//! compares a run before and after a resume (`ctx run --resume RUN
//! --rerun TASK` resumes in place, so the run before it is the same run
//! up to its previous session). Every result carries the session that
//! stored it, so the run as of session N is its history cut after N: no
//! new storage.
//!
//! The plan and the inputs read are the run's latest (a store keeps the
//! last session's); the results, and with them each task's fingerprint,
//! are those of session N. A `--rerun` keeps the plan and the inputs, so
//! for it the cut is exact.

use std::collections::BTreeMap;

use ctx_model::{Plan, TaskStatus};
use ctx_store::{Published, ResultRecord, RunHeader, RunHistory, RunInputs, StoreError};

/// `ID@N`: the run `ID` as of session `N`, or `ID` alone. A suffix that
/// is not a positive number is part of the id (a directory may hold `@`).
pub fn parse_run_ref(text: &str) -> (&str, Option<i64>) {
    match text.rsplit_once('@') {
        Some((id, n)) if !id.is_empty() => match n.parse::<i64>() {
            Ok(n) if n > 0 => (id, Some(n)),
            _ => (text, None),
        },
        _ => (text, None),
    }
}

/// `inner` as it stood when session `session` ended.
pub struct AsOfSession<'a> {
    inner: &'a dyn RunHistory,
    session: i64,
    history: Vec<ResultRecord>,
}

impl<'a> AsOfSession<'a> {
    /// Reads `inner`'s history once and cuts it after `session`; a session
    /// the run does not have is [`crate::DiffError::NoSession`].
    pub fn new(inner: &'a dyn RunHistory, session: i64) -> Result<Self, crate::DiffError> {
        let run = inner
            .header()
            .map(|h| h.run_id)
            .unwrap_or_else(|_| "(its header unreadable)".into());
        let all = inner
            .every_history()
            .map_err(crate::DiffError::read(&run))?;
        let last = all.iter().map(|r| r.session).max().unwrap_or(0);
        if session > last {
            return Err(crate::DiffError::NoSession {
                run,
                session,
                sessions: last,
            });
        }
        let history = all.into_iter().filter(|r| r.session <= session).collect();
        Ok(AsOfSession {
            inner,
            session,
            history,
        })
    }
}

impl RunHistory for AsOfSession<'_> {
    fn header(&self) -> Result<RunHeader, StoreError> {
        let mut h = self.inner.header()?;
        h.run_id = format!("{}@{}", h.run_id, self.session);
        Ok(h)
    }

    fn plan(&self) -> Result<Plan, StoreError> {
        self.inner.plan()
    }

    fn latest(&self) -> Result<Vec<ResultRecord>, StoreError> {
        let mut by_task: BTreeMap<&str, Vec<&ResultRecord>> = BTreeMap::new();
        for r in &self.history {
            by_task.entry(&r.result.task_id).or_default().push(r);
        }
        Ok(by_task.into_values().filter_map(latest_of).collect())
    }

    fn history(&self, task_id: &str) -> Result<Vec<ResultRecord>, StoreError> {
        Ok(self
            .history
            .iter()
            .filter(|r| r.result.task_id == task_id)
            .cloned()
            .collect())
    }

    fn inputs(&self) -> Result<Option<RunInputs>, StoreError> {
        self.inner.inputs()
    }

    fn published(&self) -> Result<Vec<Published>, StoreError> {
        self.inner.published()
    }
}

/// A task's latest result among its rows (oldest first), with where its
/// execution started: the `in_progress` row just before it, or itself.
fn latest_of(rows: Vec<&ResultRecord>) -> Option<ResultRecord> {
    let (last, before) = rows.split_last()?;
    let mut out = (*last).clone();
    let started = before
        .last()
        .filter(|r| r.result.status == TaskStatus::InProgress)
        .copied()
        .or_else(|| (last.result.status != TaskStatus::Pending).then_some(*last));
    out.started_seq = started.map(|r| r.seq);
    out.started_at = started.map(|r| r.recorded_at.clone());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::parse_run_ref;

    #[test]
    fn a_session_suffix_is_a_positive_number() {
        assert_eq!(parse_run_ref("r1@2"), ("r1", Some(2)));
        assert_eq!(parse_run_ref("r1"), ("r1", None));
        assert_eq!(parse_run_ref("r1@0"), ("r1@0", None));
        assert_eq!(parse_run_ref("dir@x"), ("dir@x", None));
        assert_eq!(parse_run_ref("@3"), ("@3", None));
    }
}
