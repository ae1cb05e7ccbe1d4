//! `ctx runs export RUN --format json`.

use std::borrow::Cow;

use ctx_cost::Usd;
use ctx_model::{TaskExecutionResult, TaskStatus};
use ctx_report::Timestamp;
use serde::Serialize;

use super::StoredRun;
use crate::TaskJson;

/// The object `ctx run --format json` prints, rebuilt from the store and
/// encoded the same way (pretty, keys in the same order), with two keys
/// added to each task after `cost_usd`: `started_at` and `ended_at` (RFC
/// 3339, null when the task never started or has not ended; the same times
/// `ctx runs report` draws), and `spent_usd` at the end: what the run spent
/// over all its sessions. `tasks` are in plan order (a task with no result appears as
/// `pending`), `order` the ids of the started tasks by the start of the
/// execution that produced their current result (a resumed run lists the
/// reused tasks first, as they started in an earlier session).
pub fn export_json(run: &StoredRun, spent: Usd) -> Result<String, serde_json::Error> {
    let results: Vec<Cow<'_, TaskExecutionResult>> = run
        .input
        .tasks
        .iter()
        .zip(&run.records)
        .map(|(t, r)| match r {
            // A run stored before calls were numbered across check
            // attempts has them restart at 1: numbered as the report does.
            Some(r) if !numbered_in_order(&r.result.metadata.attempts) => {
                let mut result = r.result.clone();
                ctx_model::Attempt::number_in_order(&mut result.metadata.attempts);
                Cow::Owned(result)
            }
            Some(r) => Cow::Borrowed(&r.result),
            None => Cow::Owned(TaskExecutionResult::new(t.id.clone(), TaskStatus::Pending)),
        })
        .collect();
    let mut started: Vec<(i64, &str)> = run
        .records
        .iter()
        .zip(&run.input.tasks)
        .filter_map(|(r, t)| Some((r.as_ref()?.started_seq?, t.id.as_str())))
        .collect();
    started.sort();
    crate::json_text(&ExportJson {
        order: started.into_iter().map(|(_, id)| id).collect(),
        tasks: TaskJson::all(&results)
            .into_iter()
            .zip(&run.input.tasks)
            .map(|(task, t)| ExportTask {
                task,
                started_at: t.started_at.map(Timestamp::to_rfc3339),
                ended_at: t.ended_at.map(Timestamp::to_rfc3339),
            })
            .collect(),
        spent_usd: spent,
        cache: crate::cache_figures::CacheFigures::total(results.iter().map(|r| &r.metadata)),
        summaries: crate::SummariesJson::of(ctx_deps::SummaryTotals::of(
            results.iter().map(|r| r.as_ref()),
        )),
        decisions: &run.input.decisions,
    })
}

/// `ctx run --format json`'s object ([`crate::ResultsJson`]) with each
/// task's times, and what the run spent over all its sessions
/// ([`crate::spent`]).
#[derive(Serialize)]
struct ExportJson<'a> {
    order: Vec<&'a str>,
    tasks: Vec<ExportTask<'a>>,
    spent_usd: Usd,
    /// As in `ctx run --format json`: the tasks' prompt-cache figures.
    #[serde(flatten)]
    cache: crate::cache_figures::CacheFigures,
    /// As in `ctx run --format json`: the llm summary calls, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    summaries: Option<crate::SummariesJson>,
    /// Every decision on the run's approval gates, oldest first; left out
    /// when there was none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    decisions: &'a [ctx_model::approval::Decision],
}

/// One task of [`ExportJson`]: `ctx run`'s task object, then the times.
#[derive(Serialize)]
struct ExportTask<'a> {
    #[serde(flatten)]
    task: TaskJson<'a>,
    started_at: Option<String>,
    ended_at: Option<String>,
}

/// Whether the calls are numbered 1, 2, ... in their order.
fn numbered_in_order(calls: &[ctx_model::Attempt]) -> bool {
    calls
        .iter()
        .enumerate()
        .all(|(i, c)| usize::try_from(c.number).is_ok_and(|n| n == i + 1))
}
