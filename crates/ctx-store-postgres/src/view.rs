//! [`PgRunView`]: one shared run read through the [`RunHistory`] seam, so
//! that `ctx runs report`, `ctx runs export` (JSON and CSV), what a run has
//! spent and resume planning read a shared run with the same code, and the
//! same rules, as a run directory.
//!
//! The mapping from this store's tables onto the seam's shape:
//!
//! - a task's **latest result** is its row's `result_json`, for a task
//!   that is not `pending` (a released or reset task is pending again and
//!   has none); a claimed task whose worker has not stored its prompt yet
//!   reads as a bare `in_progress` result;
//! - it **started** at its current claim (`started_at`, ordered by
//!   `claim_seq`) when its latest result came from a claim (`in_progress`,
//!   `completed`, `failed`); a task skipped by a failure never started;
//! - it was **recorded** when it became terminal (`finished_at`), or, while
//!   it runs, when it was claimed;
//! - its **fingerprint** is the one under the run's stored plan: a resume
//!   replaces the plan only together with re-running every task whose
//!   fingerprint changed, so it is the one its result was produced under;
//! - its **engine** is the label of the worker that claimed it
//!   ([`PgStore::with_engine`]), or the run's label (given by the `ctx run`
//!   that registered or last resumed it) when that worker gave none;
//! - its **history** is every terminal result a worker committed or tried
//!   to commit (a late commit refused by the fence cost an engine call
//!   too, so it counts in what the run spent), and, from schema 8, each
//!   skip a failure's commit wrote, as a run directory keeps it;
//! - the run's **state** is `running` while it is open (tasks remain for
//!   workers), else `completed` or `failed`; it started when it was
//!   registered and ended when its last task became terminal.
//!
//! A task that a resume dropped from the plan keeps its latest result in
//! `ctx_dropped`, with the fingerprint and engine it was produced under, and
//! reads as a latest result too (as a run directory keeps it): a resume
//! plan names it, and reuses it if a later plan brings it back unchanged.
//!
//! A task a resume left waiting on a map above it keeps its previous
//! completed result aside (`kept_json`, schema 6) until its claim takes
//! it or runs the task: for the next **resume plan** (and only there)
//! that kept result is the task's latest, completed under the engine of
//! the resume that kept it, as a run directory still holds a result
//! until the task runs again. A session that dies after the resume
//! reopened the run therefore loses no result a later resume can take.
//!
//! The run's **plan** reads as written: the stored plan is the one the
//! workers run, with the items of each expanded map appended
//! ([`PgStore::expand_map`]); they are left out, and read as results, as
//! in a run directory.
//!
//! A run's **sessions** are counted as in a run directory: registration
//! opens session 1, each resume the next (schema 8). Each result of the
//! **history** carries the session its run was in when it was recorded,
//! so the run as of session N (`ctx runs diff RUN@N RUN`) is its history
//! cut after N; attempts recorded before schema 8 read as session 1. A
//! latest result, read from its task's row, reads as session 1: what
//! reads sessions reads them from the history.

use std::collections::HashMap;

use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::{
    ResultRecord, ResumePlan, RunHeader, RunHistory, StoreError, TaskFingerprint, fingerprint_all,
    sha256_hex,
};

use crate::PgStore;
use crate::error::Result;
use crate::rows::{AttemptRow, DroppedRow, RunInfo, TaskRow};

/// One run of a [`PgStore`], read through [`RunHistory`]. Each read is a
/// fresh query: a run that workers are executing reads as its last
/// committed state.
#[derive(Debug, Clone)]
pub struct PgRunView {
    store: PgStore,
    run_id: String,
}

impl PgStore {
    /// The run `run_id` for reading; [`Error::NoRun`](crate::Error::NoRun)
    /// when the store has no such run. Waits on the calling thread (not
    /// from inside an async task).
    pub fn view(&self, run_id: &str) -> Result<PgRunView> {
        let view = PgRunView {
            store: self.clone(),
            run_id: run_id.to_string(),
        };
        view.info()?;
        Ok(view)
    }
}

impl PgRunView {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run as listed (counts, late commits, reclaims).
    pub fn info(&self) -> Result<RunInfo> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        let mut runs = self
            .store
            .blocking(async move { store.runs(Some(&id)).await })?;
        runs.pop().ok_or_else(|| crate::Error::NoRun {
            url: self.store.display_url().to_string(),
            run_id: self.run_id.clone(),
        })
    }

    fn rows(&self) -> Result<Vec<TaskRow>> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        self.store.blocking(async move { store.tasks(&id).await })
    }

    fn stored_plan(&self) -> Result<Plan> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        self.store.blocking(async move { store.plan(&id).await })
    }

    fn attempts(&self, task: Option<&str>) -> Result<Vec<AttemptRow>> {
        let (store, id, task) = (
            self.store.clone(),
            self.run_id.clone(),
            task.map(str::to_string),
        );
        self.store
            .blocking(async move { store.attempts(&id, task.as_deref()).await })
    }

    fn history_of(
        &self,
        rows: Vec<AttemptRow>,
        fingerprints: &HashMap<String, TaskFingerprint>,
        engine: &str,
    ) -> Vec<ResultRecord> {
        rows.into_iter()
            .map(|a| ResultRecord {
                prompt_hash: prompt_hash(&a.result),
                engine: engine.to_string(),
                fingerprint: fingerprints.get(&a.task_id).cloned(),
                session: i64::from(a.session),
                recorded_at: a.recorded_at,
                seq: a.seq,
                started_seq: None,
                started_at: None,
                result: a.result,
            })
            .collect()
    }
}

/// `latest` with each kept result (see the module docs) as its task's
/// latest, completed under `engine` (the label of the resume that kept
/// it, which compared equal to the one it was produced under), with the
/// task's fingerprint under the stored plan; recorded when the run was
/// (the row no longer says when it was).
fn with_kept(
    mut latest: Vec<ResultRecord>,
    kept: Vec<TaskExecutionResult>,
    fingerprints: &HashMap<String, TaskFingerprint>,
    engine: &str,
    created_at: &str,
) -> Vec<ResultRecord> {
    for mut result in kept {
        result.status = TaskStatus::Completed;
        let record = ResultRecord {
            prompt_hash: prompt_hash(&result),
            engine: engine.to_string(),
            fingerprint: fingerprints.get(&result.task_id).cloned(),
            session: 1,
            recorded_at: created_at.to_string(),
            seq: 0,
            started_seq: None,
            started_at: None,
            result,
        };
        match latest
            .iter_mut()
            .find(|r| r.result.task_id == record.result.task_id)
        {
            Some(r) => *r = record,
            None => latest.push(record),
        }
    }
    latest
}

fn prompt_hash(r: &TaskExecutionResult) -> Option<String> {
    r.prompt.as_deref().map(|p| sha256_hex(p.as_bytes()))
}

/// A task row's latest result as a record (see the module docs), or `None`
/// for a task that has none (pending).
fn latest_record(
    row: TaskRow,
    created_at: &str,
    fingerprint: Option<TaskFingerprint>,
    engine: &str,
) -> Option<ResultRecord> {
    if row.status == TaskStatus::Pending {
        return None;
    }
    let mut result = row
        .result
        .unwrap_or_else(|| TaskExecutionResult::new(&row.task_id, row.status));
    // The row's status is the truth (a claim without a stored prompt yet).
    result.status = row.status;
    let started = matches!(
        row.status,
        TaskStatus::InProgress | TaskStatus::Completed | TaskStatus::Failed
    ) && row.claim_seq.is_some()
        && row.started_at.is_some();
    let (started_seq, started_at) = if started {
        (row.claim_seq, row.started_at.clone())
    } else {
        (None, None)
    };
    let engine = row.engine.clone().unwrap_or_else(|| engine.to_string());
    let recorded_at = if row.status == TaskStatus::InProgress {
        row.started_at.clone()
    } else {
        row.finished_at.clone()
    }
    .or_else(|| row.started_at.clone())
    .unwrap_or_else(|| created_at.to_string());
    Some(ResultRecord {
        prompt_hash: prompt_hash(&result),
        engine,
        fingerprint,
        session: 1,
        recorded_at,
        seq: row.claim_seq.unwrap_or(0),
        started_seq,
        started_at,
        result,
    })
}

/// A kept result of a task no longer in the plan, with the fingerprint and
/// engine it was produced under.
fn dropped_record(d: DroppedRow) -> ResultRecord {
    let mut result = d.result;
    result.status = d.status;
    let started = matches!(
        d.status,
        TaskStatus::InProgress | TaskStatus::Completed | TaskStatus::Failed
    ) && d.claim_seq.is_some()
        && d.started_at.is_some();
    ResultRecord {
        prompt_hash: prompt_hash(&result),
        engine: d.engine,
        fingerprint: Some(d.fingerprint),
        session: 1,
        recorded_at: d
            .finished_at
            .clone()
            .or_else(|| d.started_at.clone())
            .unwrap_or_default(),
        seq: d.claim_seq.unwrap_or(0),
        started_seq: if started { d.claim_seq } else { None },
        started_at: if started { d.started_at } else { None },
        result,
    }
}

fn store_error(e: crate::Error) -> StoreError {
    StoreError::from(e)
}

impl RunHistory for PgRunView {
    fn header(&self) -> std::result::Result<RunHeader, StoreError> {
        let info = self.info().map_err(store_error)?;
        Ok(RunHeader {
            state: info.state(),
            run_id: info.run_id,
            started_at: Some(info.created_at),
            finished_at: if info.open { None } else { info.finished_at },
            plan_source: info.plan_source,
            location: self.store.display_url().to_string(),
        })
    }

    /// The plan as written: without the items its maps' expansions
    /// appended to the stored plan (a run directory keeps the plan as
    /// written; the items are listed from their results, as there).
    fn plan(&self) -> std::result::Result<Plan, StoreError> {
        let stored = self.stored_plan().map_err(store_error)?;
        Ok(ctx_model::map::without_items(&stored))
    }

    fn inputs(&self) -> std::result::Result<Option<ctx_store::RunInputs>, StoreError> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        self.store
            .blocking(async move { store.inputs(&id).await })
            .map_err(store_error)
    }

    fn published(&self) -> std::result::Result<Vec<ctx_store::Published>, StoreError> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        self.store
            .blocking(async move { store.published(&id).await })
            .map_err(store_error)
    }

    fn publish_events(&self) -> std::result::Result<Vec<ctx_store::PublishEvent>, StoreError> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        self.store
            .blocking(async move { store.publish_events(&id).await })
            .map_err(store_error)
    }

    fn fallback(&self) -> std::result::Result<Option<ctx_model::FallbackChoice>, StoreError> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        self.store
            .blocking(async move { store.fallback(&id).await })
            .map_err(store_error)
    }

    fn decisions(&self) -> std::result::Result<Vec<ctx_model::approval::Decision>, StoreError> {
        let (store, id) = (self.store.clone(), self.run_id.clone());
        self.store
            .blocking(async move { store.decisions(&id).await })
            .map_err(store_error)
    }

    fn latest(&self) -> std::result::Result<Vec<ResultRecord>, StoreError> {
        let info = self.info().map_err(store_error)?;
        let plan = self.stored_plan().map_err(store_error)?;
        let mut fingerprints = fingerprint_all(&plan);
        let mut out: Vec<ResultRecord> = self
            .rows()
            .map_err(store_error)?
            .into_iter()
            .filter_map(|row| {
                let f = fingerprints.remove(&row.task_id);
                latest_record(row, &info.created_at, f, &info.engine)
            })
            .collect();
        let (store, id) = (self.store.clone(), self.run_id.clone());
        let dropped = self
            .store
            .blocking(async move { store.dropped(&id).await })
            .map_err(store_error)?;
        out.extend(dropped.into_iter().map(dropped_record));
        out.sort_by(|a, b| a.result.task_id.cmp(&b.result.task_id));
        Ok(out)
    }

    /// [`ResumePlan::compute`] over [`latest`](Self::latest) with each
    /// kept result read as its task's latest (see the module docs).
    fn resume_plan(
        &self,
        plan: &Plan,
        engine: &str,
    ) -> std::result::Result<ResumePlan, StoreError> {
        let info = self.info().map_err(store_error)?;
        let stored_plan = self.stored_plan().map_err(store_error)?;
        let (store, id) = (self.store.clone(), self.run_id.clone());
        let kept = self
            .store
            .blocking(async move { store.kept(&id).await })
            .map_err(store_error)?;
        let latest = with_kept(
            self.latest()?,
            kept,
            &fingerprint_all(&stored_plan),
            &info.engine,
            &info.created_at,
        );
        let stored = latest
            .into_iter()
            .map(|r| (r.result.task_id.clone(), r))
            .collect();
        Ok(ResumePlan::compute(plan, &stored, engine))
    }

    fn history(&self, task_id: &str) -> std::result::Result<Vec<ResultRecord>, StoreError> {
        let info = self.info().map_err(store_error)?;
        let plan = self.stored_plan().map_err(store_error)?;
        let rows = self.attempts(Some(task_id)).map_err(store_error)?;
        Ok(self.history_of(rows, &fingerprint_all(&plan), &info.engine))
    }

    fn every_history(&self) -> std::result::Result<Vec<ResultRecord>, StoreError> {
        let info = self.info().map_err(store_error)?;
        let plan = self.stored_plan().map_err(store_error)?;
        let rows = self.attempts(None).map_err(store_error)?;
        Ok(self.history_of(rows, &fingerprint_all(&plan), &info.engine))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: TaskStatus, result: Option<TaskStatus>, claim: Option<i64>) -> TaskRow {
        TaskRow {
            task_id: "t".into(),
            status,
            attempt: 1,
            result: result.map(|s| TaskExecutionResult::new("t", s)),
            started_at: claim.map(|_| "2026-12-01T10:00:00.000Z".into()),
            finished_at: matches!(
                status,
                TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Skipped
            )
            .then(|| "2026-12-01T10:00:05.000Z".into()),
            claim_seq: claim,
            engine: None,
            taken: false,
        }
    }

    const CREATED: &str = "2026-12-01T09:00:00.000Z";

    #[test]
    fn a_pending_task_has_no_latest_result_even_with_a_released_prompt() {
        let r = row(TaskStatus::Pending, Some(TaskStatus::InProgress), Some(3));
        assert_eq!(latest_record(r, CREATED, None, "e"), None);
    }

    #[test]
    fn a_completed_task_started_at_its_claim_and_ended_at_its_commit() {
        let r = row(TaskStatus::Completed, Some(TaskStatus::Completed), Some(7));
        let rec = latest_record(r, CREATED, None, "e").unwrap();
        assert_eq!(rec.started_seq, Some(7));
        assert_eq!(rec.started_at.as_deref(), Some("2026-12-01T10:00:00.000Z"));
        assert_eq!(rec.recorded_at, "2026-12-01T10:00:05.000Z");
        assert_eq!(rec.engine, "e");
        // The claiming worker's engine, when it gave one, over the run's.
        let mut r = row(TaskStatus::Completed, Some(TaskStatus::Completed), Some(7));
        r.engine = Some("openai model=m".into());
        let rec = latest_record(r, CREATED, None, "e").unwrap();
        assert_eq!(rec.engine, "openai model=m");
    }

    #[test]
    fn a_claim_without_a_stored_prompt_reads_as_in_progress_since_the_claim() {
        let r = row(TaskStatus::InProgress, None, Some(2));
        let rec = latest_record(r, CREATED, None, "e").unwrap();
        assert_eq!(rec.result.status, TaskStatus::InProgress);
        assert_eq!(rec.recorded_at, "2026-12-01T10:00:00.000Z");
        assert_eq!(rec.started_seq, Some(2));
    }

    #[test]
    fn a_skipped_task_never_started_even_after_an_earlier_claim() {
        let r = row(TaskStatus::Skipped, Some(TaskStatus::Skipped), Some(4));
        let rec = latest_record(r, CREATED, None, "e").unwrap();
        assert_eq!((rec.started_seq, rec.started_at), (None, None));
        assert_eq!(rec.recorded_at, "2026-12-01T10:00:05.000Z");
    }
}
