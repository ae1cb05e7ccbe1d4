//! `ctx runs export RUN --format csv`: the run's timeline as one row per
//! engine call, for spreadsheets (columns documented in docs/runs.md,
//! "Inspection").
//!
//! Every task of the plan appears: a task whose result records no engine
//! call (served from the cache, skipped, pending, or run by an engine that
//! reports no calls) gets one row with the call columns empty. The task's
//! own columns are repeated on each of its rows; `final` is `true` on the
//! last row of each task, so filtering on it gives one row per task (and
//! sums that do not count a task twice).
//!
//! Quoting is the `csv` crate's (RFC 4180: a field holding a comma, quote
//! or line break is quoted, quotes doubled). Spreadsheets also execute a
//! cell that starts with `=`, `+`, `-` or `@` as a formula, and task ids,
//! errors and model names come from plans and model output, so such a text
//! cell gets a leading `'` (the usual defence; the apostrophe is not shown
//! by spreadsheets). Numbers and times are never prefixed.

use ctx_report::{TaskReport, Timestamp};

use super::StoredRun;

/// The header row, in column order.
pub const COLUMNS: [&str; 19] = [
    "run_id",
    "task_id",
    "task_status",
    "task_started_at",
    "task_ended_at",
    "attempt",
    "attempt_outcome",
    "attempt_class",
    "attempt_started_at",
    "attempt_ended_at",
    "attempt_duration_ms",
    "backoff_ms",
    "final",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "cached",
    "error",
];

/// The run as CSV text (header, then rows in plan order, each task's calls
/// in order). Deterministic: the same stored run gives the same bytes.
///
/// Writing into memory cannot fail but for a record of the wrong length,
/// which the fixed [`COLUMNS`] rule out; the `Result` is the writer's.
pub fn export_csv(run: &StoredRun) -> Result<String, ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::CRLF)
        .from_writer(Vec::new());
    w.write_record(COLUMNS)?;
    for (task, record) in run.input.tasks.iter().zip(&run.records) {
        let calls = record
            .as_ref()
            .map_or(&[][..], |r| &r.result.metadata.attempts[..]);
        if task.attempts.is_empty() {
            w.write_record(row(&run.input.run_id, task, None, true))?;
        }
        for (i, (a, call)) in task.attempts.iter().zip(calls).enumerate() {
            let last = i + 1 == task.attempts.len();
            let cells = Call {
                number: a.number.to_string(),
                outcome: a.outcome.as_str().to_string(),
                class: text(a.class.as_deref().unwrap_or_default()),
                started_at: time(a.started_at),
                ended_at: time(a.ended_at),
                duration_ms: call.duration_ms.to_string(),
                backoff_ms: call.backoff_ms.map(|b| b.to_string()).unwrap_or_default(),
                error: a.error.as_deref().map(text),
            };
            w.write_record(row(&run.input.run_id, task, Some(cells), last))?;
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ::csv::Error::from(e.into_error()))?;
    // Every cell is a `String`, so the bytes are UTF-8.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One engine call's cells.
struct Call {
    number: String,
    outcome: String,
    class: String,
    started_at: String,
    ended_at: String,
    duration_ms: String,
    backoff_ms: String,
    error: Option<String>,
}

fn row(run_id: &str, t: &TaskReport, call: Option<Call>, last: bool) -> Vec<String> {
    let opt = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    // A call's own error when the row is a call; the task's otherwise (and
    // on the last call of a task that failed without a call error).
    let task_error = t.error.as_deref().map(text);
    let (call_cells, error) = match call {
        Some(c) => {
            let error = c.error.or(if last { task_error } else { None });
            (
                [
                    c.number,
                    c.outcome,
                    c.class,
                    c.started_at,
                    c.ended_at,
                    c.duration_ms,
                    c.backoff_ms,
                ],
                error,
            )
        }
        None => (Default::default(), task_error),
    };
    let mut cells = vec![
        text(run_id),
        text(&t.id),
        t.status.as_str().to_string(),
        time(t.started_at),
        time(t.ended_at),
    ];
    cells.extend(call_cells);
    cells.extend([
        last.to_string(),
        text(t.model.as_deref().unwrap_or_default()),
        opt(t.prompt_tokens),
        opt(t.completion_tokens),
        t.cost_usd.map(|c| c.to_string()).unwrap_or_default(),
        t.cached.to_string(),
        error.unwrap_or_default(),
    ]);
    cells
}

fn time(t: Option<Timestamp>) -> String {
    t.map(Timestamp::to_rfc3339).unwrap_or_default()
}

/// Text from a plan or a model, made inert for spreadsheets: a leading
/// `=`, `+`, `-`, `@`, tab or carriage return would start a formula.
fn text(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_starts_are_neutralised_and_plain_text_is_not() {
        assert_eq!(text("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(text("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(text("-2+3"), "'-2+3");
        assert_eq!(text("\tcmd"), "'\tcmd");
        assert_eq!(text("plain, with comma"), "plain, with comma");
        assert_eq!(text(""), "");
    }
}
