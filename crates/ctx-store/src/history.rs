//! [`RunHistory`]: the read side every durable store offers for one stored
//! run, so that `ctx runs report`, `ctx runs export` (JSON and CSV), what a
//! run has spent, and resume planning are written once and read the same
//! from a run directory (`ctx-store-sqlite`) and from a shared database
//! (`ctx-store-postgres`).
//!
//! The shape is the one the SQLite store has always had — latest results
//! as [`ResultRecord`]s (with the start of the execution that produced
//! each), every result ever recorded per task, and a few facts about the
//! run as a whole ([`RunHeader`]) — because everything that reads a run was
//! written against it. A store maps its own tables onto it; the rules that
//! read it (task times, costs, [`ResumePlan`]) stay in one place.

use std::collections::BTreeMap;

use ctx_model::{Plan, TaskStatus};

use crate::StoreError;
use crate::record::ResultRecord;
use crate::resume::ResumePlan;

/// Where a stored run stands as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// It is being executed now (a local process holds its lock; or, in a
    /// shared store, it is open: tasks remain for workers).
    Running,
    /// Every task of the plan completed.
    Completed,
    /// It finished with failed, skipped or unrun tasks.
    Failed,
    /// Its last session was stopped by a signal.
    Interrupted,
    /// Its last session never recorded an end and nobody executes it.
    Crashed,
}

impl RunState {
    /// The state as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Interrupted => "interrupted",
            RunState::Crashed => "crashed",
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many of a plan's tasks are in each status: one count for both
/// stores and every listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// Never started (no stored result, or a stored `pending`).
    pub pending: usize,
    /// Started, no result (running, or crashed).
    pub in_progress: usize,
    /// Completed.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
}

impl StatusCounts {
    /// Counts one task in `status`.
    pub fn add(&mut self, status: TaskStatus) {
        match status {
            TaskStatus::Pending => self.pending += 1,
            TaskStatus::InProgress => self.in_progress += 1,
            TaskStatus::Completed => self.completed += 1,
            TaskStatus::Failed => self.failed += 1,
            TaskStatus::Skipped => self.skipped += 1,
        }
    }

    /// Every task counted.
    pub fn total(&self) -> usize {
        self.pending + self.in_progress + self.completed + self.failed + self.skipped
    }
}

/// As JSON: `total` first, then the terminal statuses, then the rest, the
/// order every listing prints them in.
impl serde::Serialize for StatusCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut m = s.serialize_struct("StatusCounts", 6)?;
        m.serialize_field("total", &self.total())?;
        m.serialize_field("completed", &self.completed)?;
        m.serialize_field("failed", &self.failed)?;
        m.serialize_field("skipped", &self.skipped)?;
        m.serialize_field("in_progress", &self.in_progress)?;
        m.serialize_field("pending", &self.pending)?;
        m.end()
    }
}

/// What a store tells about a run as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHeader {
    /// The run's id.
    pub run_id: String,
    /// Where it stands.
    pub state: RunState,
    /// When its first session started (RFC 3339, UTC).
    pub started_at: Option<String>,
    /// When its last session ended; `None` while it runs or after a crash.
    pub finished_at: Option<String>,
    /// The plan's path as given to its last session, if known.
    pub plan_source: Option<String>,
    /// Where it is stored, for messages: a file path, or a URL without
    /// its password.
    pub location: String,
}

/// One published output and its manifest line (the vocabulary's type).
pub use ctx_model::Published;

/// One provider batch of a run (`ctx run --batch`), as `ctx runs show`
/// lists it: an input file uploaded, the batch created from it, and how
/// far it got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunBatch {
    /// The batch's id; `None` for a file whose batch was never created
    /// (its process died between the upload and the create).
    pub id: Option<String>,
    /// The status last read (`None` before the batch was created).
    pub status: Option<String>,
    /// The requests the file holds.
    pub requests: u64,
    /// `request_counts.total` as last read.
    pub total: u64,
    /// `request_counts.completed` as last read.
    pub completed: u64,
    /// `request_counts.failed` as last read.
    pub failed: u64,
    /// The model its requests ask for.
    pub model: String,
    /// The uploaded input file's id.
    pub input_file_id: String,
    /// When the file was uploaded (RFC 3339, UTC).
    pub uploaded_at: String,
    /// When the batch was created.
    pub created_at: Option<String>,
    /// When it was first read in a final status.
    pub ended_at: Option<String>,
    /// When every answer was handed to its task.
    pub collected_at: Option<String>,
    /// When an input file that never became a batch was deleted.
    pub file_deleted_at: Option<String>,
    /// When `ctx runs cancel` cancelled it.
    pub cancel_requested_at: Option<String>,
}

impl RunBatch {
    /// Whether the provider may still be working on it: created, and its
    /// status not final.
    pub fn is_live(&self) -> bool {
        self.id.is_some()
            && !self
                .status
                .as_deref()
                .is_some_and(ctx_model::batch_status::is_final)
    }
}

/// One publish or its undo, as a store records it: every `ctx run
/// --publish-root` session that wrote something, every `ctx runs
/// publish`, every `ctx runs unpublish`, in the order they happened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PublishEvent {
    /// Its order in the run (1 = the first).
    pub seq: i64,
    /// What it was.
    pub kind: PublishKind,
    /// When it was recorded (RFC 3339, UTC).
    pub at: String,
    /// The files written (for an undo: restored, or removed when
    /// `sha256` is `None`).
    pub files: Vec<Published>,
    /// For a publish: the `seq` of the undo that reverted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undone_by: Option<i64>,
}

/// The files of the latest publish among `events` (a run's, oldest
/// first) that no undo reverted: what a run has published now, by the
/// one rule both stores read it by.
pub fn in_effect(events: Vec<PublishEvent>) -> Vec<Published> {
    events
        .into_iter()
        .rev()
        .find(|e| e.kind == PublishKind::Publish && e.undone_by.is_none())
        .map(|e| e.files)
        .unwrap_or_default()
}

/// Whether a [`PublishEvent`] wrote outputs or undid earlier writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PublishKind {
    /// Outputs written (`ctx run --publish-root`, `ctx runs publish`).
    Publish,
    /// Earlier publishes undone (`ctx runs unpublish`).
    Unpublish,
}

impl PublishKind {
    /// The word stored and shown: `publish` or `unpublish`.
    pub fn as_str(self) -> &'static str {
        match self {
            PublishKind::Publish => "publish",
            PublishKind::Unpublish => "unpublish",
        }
    }

    /// The kind `s` names, if any.
    pub fn parse(s: &str) -> Option<PublishKind> {
        match s {
            "publish" => Some(PublishKind::Publish),
            "unpublish" => Some(PublishKind::Unpublish),
            _ => None,
        }
    }
}

/// The read side of one stored run. Reads take no lock and write nothing:
/// a run that is executing reads as its last committed state.
pub trait RunHistory {
    /// The run as a whole.
    fn header(&self) -> Result<RunHeader, StoreError>;

    /// The plan as last run (secret-looking `params` keys redacted).
    fn plan(&self) -> Result<Plan, StoreError>;

    /// Every task's latest result, ordered by task id, with
    /// `started_seq`/`started_at` set for tasks whose latest result came
    /// from an execution that started (tasks of earlier plans included
    /// where the store keeps them).
    fn latest(&self) -> Result<Vec<ResultRecord>, StoreError>;

    /// Every result ever recorded for `task_id`, oldest first.
    fn history(&self, task_id: &str) -> Result<Vec<ResultRecord>, StoreError>;

    /// Every result ever recorded for any task, each task's oldest first.
    /// The default asks [`history`](Self::history) once per task with a
    /// latest result; a networked store answers it in one query.
    fn every_history(&self) -> Result<Vec<ResultRecord>, StoreError> {
        let mut out = Vec::new();
        for latest in self.latest()? {
            out.extend(self.history(&latest.result.task_id)?);
        }
        Ok(out)
    }

    /// What the run's plan was filled from (its templates before filling,
    /// the `--var` values, the digest), when it had anything to fill. The
    /// default, for a store that keeps none (and a run stored before
    /// inputs were kept), is `None`: `ctx runs diff` then says a
    /// variable's part in a change is not recorded.
    fn inputs(&self) -> Result<Option<crate::RunInputs>, StoreError> {
        Ok(None)
    }

    /// The files the run's last publishing session wrote, in plan order.
    /// The default, for a store that never publishes (a shared store:
    /// `--publish-root` is refused there), is none.
    fn published(&self) -> Result<Vec<Published>, StoreError> {
        Ok(Vec::new())
    }

    /// Every publish and undo of the run, oldest first (the manifest
    /// `ctx runs show` lists). The default, for a store that keeps none,
    /// is none.
    fn publish_events(&self) -> Result<Vec<PublishEvent>, StoreError> {
        Ok(Vec::new())
    }

    /// Every decision on the run's approval gates, oldest first. The
    /// default, for a store that keeps none, is none.
    fn decisions(&self) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
        Ok(Vec::new())
    }

    /// The run's provider batches, oldest first (none on a store that
    /// keeps none).
    fn batches(&self) -> Result<Vec<RunBatch>, StoreError> {
        Ok(Vec::new())
    }

    /// The cheaper tier of its period budget the run was started on
    /// (`config.budget.fallback`); `None` on the standard tier, and for a
    /// store that keeps no period budget (a shared store).
    fn fallback(&self) -> Result<Option<ctx_model::FallbackChoice>, StoreError> {
        Ok(None)
    }

    /// What a resume with `plan` on `engine` would reuse and re-run, and
    /// why: [`ResumePlan::compute`] over [`latest`](Self::latest).
    fn resume_plan(&self, plan: &Plan, engine: &str) -> Result<ResumePlan, StoreError> {
        let stored: BTreeMap<String, ResultRecord> = self
            .latest()?
            .into_iter()
            .map(|r| (r.result.task_id.clone(), r))
            .collect();
        Ok(ResumePlan::compute(plan, &stored, engine))
    }
}
