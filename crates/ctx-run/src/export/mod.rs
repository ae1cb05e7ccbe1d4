//! A stored run read back for export: the mapping from a stored run onto
//! the report's input (`ctx runs report` draws it with ctx-report), and the
//! JSON and CSV exports built on it (`ctx runs export --format json|csv`).
//!
//! The mapping is the only place that decides what a task's times are, so
//! the page, the JSON export and the CSV export always agree:
//!
//! - a task's **start** is the `recorded_at` of the history row its
//!   `started_seq` points at (its first `in_progress` row, or the result
//!   itself when the executor stored no `in_progress` row): the stores keep
//!   the first one's when a retry after a failed check stores another, so
//!   a retried task starts at its first attempt;
//! - its **end** is the `recorded_at` of its latest row, except while it is
//!   in progress or was interrupted by a crash (its latest row is its
//!   `in_progress` row: no end was stored) or never started (skipped,
//!   pending);
//! - the run's start is its first session's start, its end the last
//!   session's end (absent while running or after a crash);
//! - a task's cost is its stored `metadata.cost_usd`; dependency cuts are
//!   not stored yet, so they stay unknown.
//!
//! The run is read through the shared [`RunHistory`] seam, so a run of a
//! shared PostgreSQL store (`--store postgres://...`) maps onto the page by
//! these same rules; there, a run's start is its registration and its end
//! the moment its last task became terminal, and an open run is drawn as
//! running.
//!
//! Reading takes no lock and writes nothing (a store from an older ctx is
//! migrated on open, as every `ctx runs` reader does), so a report of a run
//! that is still executing is a snapshot: the run is drawn as in progress up
//! to the moment it was read.

pub(crate) mod csv;
mod json;

use std::collections::HashMap;

use ctx_model::TaskStatus;
use ctx_report::{RunReportInput, RunStatus, TaskReport, Timestamp, TimestampError};
use ctx_store::{ResultRecord, RunHistory, RunState, StoreError};

pub use csv::{COLUMNS, export_csv};
pub use json::export_json;

/// Why a stored run could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] StoreError),
    /// A stored time is not RFC 3339 (a damaged or foreign store).
    #[error("{location}: {what}: {source}")]
    Time {
        /// The store, as its header names it.
        location: String,
        /// Which time.
        what: String,
        /// The parse error.
        #[source]
        source: TimestampError,
    },
}

/// A stored run read once: the report's input, and beside each of its
/// tasks (same order: plan order) the stored latest result it came from.
pub struct StoredRun {
    /// What the page is drawn from.
    pub input: RunReportInput,
    /// Each task's latest stored result; `None` for a task never recorded.
    pub records: Vec<Option<ResultRecord>>,
}

/// Reads `view` as the report's input. `now` is used only while the run is
/// executing (as the snapshot time), so a finished run reads to the same
/// input, and renders to the same bytes, every time.
pub fn read_run(view: &dyn RunHistory, now: Timestamp) -> Result<StoredRun, ExportError> {
    let plan = view.plan()?;
    let header = view.header()?;
    let status = status_of(header.state);
    let time = |text: &str, what: &str| {
        Timestamp::parse_rfc3339(text).map_err(|source| ExportError::Time {
            location: header.location.clone(),
            what: what.to_string(),
            source,
        })
    };
    let entries = entries(&plan, view.latest()?);
    let mut tasks = Vec::with_capacity(entries.len());
    let mut records = Vec::with_capacity(entries.len());
    for Entry {
        task,
        record,
        item_of,
    } in entries
    {
        let (started, ended) = match &record {
            Some(r) => (
                r.started_at
                    .as_deref()
                    .map(|t| time(t, &format!("task `{}`: start time", task.id)))
                    .transpose()?,
                // A latest row that is the `in_progress` row itself marks
                // a start, not an end: the task is running, or its process
                // died under it (no end was ever stored).
                (r.result.status != TaskStatus::InProgress)
                    .then(|| time(&r.recorded_at, &format!("task `{}`: recorded_at", task.id)))
                    .transpose()?,
            ),
            None => (None, None),
        };
        let result = record.as_ref().map(|r| &r.result);
        let mut report = TaskReport::from_model(&task, result, started, ended, status);
        report.item_of = item_of;
        tasks.push(report);
        records.push(record);
    }
    let started_at = header
        .started_at
        .as_deref()
        .map(|t| time(t, "the run's start"))
        .transpose()?;
    let ended_at = match status {
        RunStatus::Running => None,
        _ => header
            .finished_at
            .as_deref()
            .map(|t| time(t, "the run's end"))
            .transpose()?,
    };
    let plan_name = header
        .plan_source
        .clone()
        .or_else(|| plan.goal.clone())
        .unwrap_or_default();
    Ok(StoredRun {
        input: RunReportInput {
            run_id: header.run_id.clone(),
            plan: plan_name,
            status,
            started_at,
            ended_at,
            as_of: (status == RunStatus::Running).then_some(now),
            tasks,
            published: view.published()?,
            fallback: view.fallback()?.map(fallback_note),
            decisions: view.decisions()?,
        },
        records,
    })
}

/// The report's section on a run's cheaper tier.
fn fallback_note(f: ctx_model::FallbackChoice) -> ctx_report::FallbackNote {
    ctx_report::FallbackNote {
        reason: f.reason(),
        model: f.model,
        tasks: f
            .tasks
            .into_iter()
            .map(|t| ctx_report::FallbackTaskNote {
                task_id: t.task_id,
                from: t.from,
            })
            .collect(),
    }
}

/// The report's word for a stored run's state.
fn status_of(state: RunState) -> RunStatus {
    match state {
        RunState::Running => RunStatus::Running,
        RunState::Completed => RunStatus::Completed,
        RunState::Failed => RunStatus::Failed,
        RunState::Interrupted => RunStatus::Interrupted,
        RunState::Crashed => RunStatus::Crashed,
    }
}

/// A row of the stored run: a plan task, or an item of a map task.
struct Entry {
    task: ctx_model::SubTask,
    record: Option<ResultRecord>,
    /// The map task it is an item of.
    item_of: Option<String>,
}

/// Each plan task with its latest stored result, and after a map task its
/// stored items (in item order), each an entry of its own. The run's
/// items only: those an earlier, longer list left stored beyond the map's
/// count are not listed.
fn entries(plan: &ctx_model::Plan, latest: Vec<ResultRecord>) -> Vec<Entry> {
    let mut stored: HashMap<String, ResultRecord> = latest
        .into_iter()
        .map(|r| (r.result.task_id.clone(), r))
        .collect();
    let mut entries = Vec::with_capacity(plan.sub_tasks.len());
    for task in &plan.sub_tasks {
        let own = stored.remove(&task.id);
        let Some(m) = &task.map else {
            entries.push(Entry {
                task: task.clone(),
                record: own,
                item_of: None,
            });
            continue;
        };
        let map_row = own.as_ref().map(|r| &r.result);
        let mut items: Vec<(usize, String)> = stored
            .keys()
            .filter_map(|id| {
                let (map_id, i) = ctx_model::map::parse_item_id(id)?;
                (map_id == task.id && ctx_model::map::is_current_item(map_row, i))
                    .then(|| (i, id.clone()))
            })
            .collect();
        entries.push(Entry {
            task: task.clone(),
            record: own,
            item_of: None,
        });
        items.sort_unstable();
        for (i, id) in items {
            entries.push(Entry {
                task: ctx_deps::map::item_task(task, m, i, ""),
                record: stored.remove(&id),
                item_of: Some(task.id.clone()),
            });
        }
    }
    entries
}

/// The time of reading, in milliseconds since the Unix epoch.
pub fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Timestamp::from_unix_ms(ms)
}
