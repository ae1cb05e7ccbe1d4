//! `ctx runs report RUN [-o FILE]`: a stored run as one self-contained HTML
//! page (drawn by `ctx-report`), and the mapping from a stored run onto the
//! report's input that `export --format json|csv` also uses for task times.
//!
//! The mapping is the only place that decides what a task's times are, so
//! the page, the JSON export and the CSV export always agree:
//!
//! - a task's **start** is the `recorded_at` of the history row its
//!   `started_seq` points at (its `in_progress` row, or the result itself
//!   when the executor stored no `in_progress` row);
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

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ctx_deps::{RunHistory, RunState};
use ctx_model::TaskStatus;
use ctx_report::{RunReportInput, RunStatus, TaskReport, Timestamp, render_html};
use ctx_store_sqlite::ResultRecord;

use super::{RootArg, open, read_error};
use crate::exit::{CliError, CliResult, Exit};
use crate::io::{print_stdout, write_atomic};

/// `ctx runs report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    pub(super) run: String,
    /// Write the HTML here (replaced atomically) instead of to standard
    /// output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
    #[command(flatten)]
    pub(super) root: RootArg,
}

/// A stored run read once: the report's input, and beside each of its
/// tasks (same order: plan order) the stored latest result it came from.
pub(super) struct StoredRun {
    /// What the page is drawn from.
    pub input: RunReportInput,
    /// Each task's latest stored result; `None` for a task never recorded.
    pub records: Vec<Option<ResultRecord>>,
}

/// Reads `view` as the report's input. `now` is used only while the run is
/// executing (as the snapshot time), so a finished run reads to the same
/// input, and renders to the same bytes, every time.
pub(super) fn read_run(view: &dyn RunHistory, now: Timestamp) -> Result<StoredRun, CliError> {
    let plan = view.plan().map_err(read_error)?;
    let header = view.header().map_err(read_error)?;
    let status = match header.state {
        RunState::Running => RunStatus::Running,
        RunState::Completed => RunStatus::Completed,
        RunState::Failed => RunStatus::Failed,
        RunState::Interrupted => RunStatus::Interrupted,
        RunState::Crashed => RunStatus::Crashed,
    };
    let time = |text: &str, what: &str| {
        Timestamp::parse_rfc3339(text)
            .map_err(|e| CliError::with(Exit::Store, format!("{}: {what}: {e}", header.location)))
    };
    let mut stored: HashMap<String, ResultRecord> = view
        .latest()
        .map_err(read_error)?
        .into_iter()
        .map(|r| (r.result.task_id.clone(), r))
        .collect();
    let mut tasks = Vec::with_capacity(plan.sub_tasks.len());
    let mut records = Vec::with_capacity(plan.sub_tasks.len());
    for task in &plan.sub_tasks {
        let record = stored.remove(&task.id);
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
        tasks.push(TaskReport::from_model(
            task,
            record.as_ref().map(|r| &r.result),
            started,
            ended,
            status,
        ));
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
        },
        records,
    })
}

/// The time of reading, in milliseconds since the Unix epoch.
pub(super) fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Timestamp::from_unix_ms(ms)
}

/// Runs `ctx runs report`.
pub fn run(a: ReportArgs) -> CliResult {
    let view = open(&a.root, &a.run)?;
    render(&view, a.output.as_deref())
}

/// Draws the run read from either store to `output` (or stdout).
pub(super) fn render(view: &dyn RunHistory, output: Option<&Path>) -> CliResult {
    let run = read_run(view, now())?;
    let html = render_html(&run.input);
    match output {
        None => print_stdout(&html)?,
        Some(path) => {
            write_atomic(path, html.as_bytes())?;
            let note = if run.input.status == RunStatus::Running {
                ", still running: a snapshot"
            } else {
                ""
            };
            print_stdout(&format!(
                "report of run {} ({}{note}) written to {}\n",
                run.input.run_id,
                crate::commands::run::tasks(run.input.tasks.len()),
                path.display()
            ))?;
        }
    }
    Ok(Exit::Ok)
}
