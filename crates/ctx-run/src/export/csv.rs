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
//! Quoting is RFC 4180's (a field holding a comma, quote or line break is
//! quoted, quotes doubled). Spreadsheets also execute a cell that starts
//! with `=`, `+`, `-` or `@` as a formula, and task ids, errors and model
//! names come from plans and model output, so such a text cell gets a
//! leading `'` (the usual defence; the apostrophe is not shown by
//! spreadsheets), and a text cell holding a separator followed by a formula
//! character (`x;=2+3`, a formula in the next cell of a `;` locale) is
//! quoted. Numbers and times are never prefixed.

use ctx_report::{TaskReport, Timestamp};

use super::StoredRun;
use crate::map_counts::MapCounts;

/// The header row, in column order.
pub const COLUMNS: [&str; 30] = [
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
    "cached_tokens",
    "cached_fraction",
    "cache_write_tokens",
    "cache_saving_usd",
    "cached",
    "error",
    "map_items",
    "map_completed",
    "map_failed",
    "service_tier",
    "batch_id",
    "call_service_tier",
    "tier_fallback",
];

/// The run as CSV text (header, then rows in plan order, each task's calls
/// in order). Deterministic: the same stored run gives the same bytes.
pub fn export_csv(run: &StoredRun) -> String {
    let mut out = String::new();
    write_record(&mut out, COLUMNS.map(Cell::from));
    let maps = MapCounts::of_run(run.records.iter().flatten().map(|r| &r.result));
    for (task, record) in run.input.tasks.iter().zip(&run.records) {
        let map = maps.get(&task.id);
        let calls = record
            .as_ref()
            .map_or(&[][..], |r| &r.result.metadata.attempts[..]);
        // The tier the task's answer was billed at, on each of its rows.
        let tier = record
            .as_ref()
            .and_then(|r| r.result.metadata.tokens_used.as_ref())
            .and_then(|u| u.service_tier)
            .map_or("", |t| t.as_str());
        let task_row = TaskRow {
            run_id: &run.input.run_id,
            task,
            map,
            tier,
        };
        if task.attempts.is_empty() {
            write_record(&mut out, row(&task_row, None, true));
        }
        for (i, (a, call)) in task.attempts.iter().zip(calls).enumerate() {
            let last = i + 1 == task.attempts.len();
            let cells = Call {
                number: a.number.to_string().into(),
                outcome: a.outcome.as_str().into(),
                class: text(a.class.as_deref().unwrap_or_default()),
                started_at: time(a.started_at),
                ended_at: time(a.ended_at),
                duration_ms: call.duration_ms.to_string().into(),
                backoff_ms: call
                    .backoff_ms
                    .map(|b| b.to_string())
                    .unwrap_or_default()
                    .into(),
                error: a.error.as_deref().map(text),
                batch_id: text(call.batch_id.as_deref().unwrap_or_default()),
                tier: call.service_tier.map_or("", |t| t.as_str()).into(),
                tier_fallback: call.tier_fallback.map_or("", |f| f.as_str()).into(),
            };
            write_record(&mut out, row(&task_row, Some(cells), last));
        }
    }
    out
}

/// One cell: its text, and whether it must be quoted whatever it holds
/// (see [`text`]).
#[derive(Default)]
pub(crate) struct Cell {
    value: String,
    quote: bool,
}

impl From<String> for Cell {
    fn from(value: String) -> Self {
        Cell {
            value,
            quote: false,
        }
    }
}

impl From<&str> for Cell {
    fn from(value: &str) -> Self {
        value.to_string().into()
    }
}

/// Appends one record, RFC 4180 style: fields separated by `,`, the record
/// ended by CRLF, a field quoted when it holds a comma, a quote or a line
/// break (quotes doubled) or when it is marked to be quoted.
pub(crate) fn write_record(out: &mut String, cells: impl IntoIterator<Item = Cell>) {
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if cell.quote || cell.value.contains([',', '"', '\r', '\n']) {
            out.push('"');
            out.push_str(&cell.value.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&cell.value);
        }
    }
    out.push_str("\r\n");
}

/// One engine call's cells.
struct Call {
    number: Cell,
    outcome: Cell,
    class: Cell,
    started_at: Cell,
    ended_at: Cell,
    duration_ms: Cell,
    backoff_ms: Cell,
    error: Option<Cell>,
    /// The provider batch the call went in.
    batch_id: Cell,
    /// The tier the server billed this call at.
    tier: Cell,
    /// Why the call went at the standard tier, if it fell back.
    tier_fallback: Cell,
}

/// What every row of one task repeats: its run, its report, its map's
/// items counted (a map task), the tier its answer was billed at.
struct TaskRow<'a> {
    run_id: &'a str,
    task: &'a TaskReport,
    map: Option<&'a MapCounts>,
    tier: &'a str,
}

/// One record: the task's columns, then a call's when the row is one.
fn row(task: &TaskRow<'_>, call: Option<Call>, last: bool) -> Vec<Cell> {
    let TaskRow {
        run_id,
        task: t,
        map,
        tier,
    } = *task;
    let opt = |n: Option<u64>| Cell::from(n.map(|n| n.to_string()).unwrap_or_default());
    // A call's own error when the row is a call; the task's otherwise (and
    // on the last call of a task that failed without a call error).
    let task_error = t.error.as_deref().map(text);
    let (call_cells, error, call_tiers) = match call {
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
                [c.batch_id, c.tier, c.tier_fallback],
            )
        }
        None => (Default::default(), task_error, Default::default()),
    };
    let mut cells = vec![
        text(run_id),
        text(&t.id),
        t.status.as_str().into(),
        time(t.started_at),
        time(t.ended_at),
    ];
    cells.extend(call_cells);
    cells.extend([
        last.to_string().into(),
        text(t.model.as_deref().unwrap_or_default()),
        opt(t.prompt_tokens),
        opt(t.completion_tokens),
        t.cost_usd.map(|c| c.to_string()).unwrap_or_default().into(),
        opt(t.cached_tokens),
        // The share of the reported prompt tokens that were cache reads.
        t.cached_tokens
            .zip(t.usage_prompt_tokens.filter(|&p| p > 0))
            .map(|(n, p)| (n as f64 / p as f64).to_string())
            .unwrap_or_default()
            .into(),
        opt(t.cache_write_tokens),
        t.cache_saving_usd
            .map(|c| c.to_string())
            .unwrap_or_default()
            .into(),
        t.cached.to_string().into(),
        error.unwrap_or_default(),
    ]);
    let count =
        |f: fn(&MapCounts) -> usize| Cell::from(map.map(|m| f(m).to_string()).unwrap_or_default());
    cells.extend([
        count(|m| m.items),
        count(|m| m.completed),
        count(|m| m.failed),
        tier.into(),
    ]);
    cells.extend(call_tiers);
    cells
}

fn time(t: Option<Timestamp>) -> Cell {
    t.map(Timestamp::to_rfc3339).unwrap_or_default().into()
}

/// The characters that start a formula in a spreadsheet cell.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// The characters a spreadsheet may split a line into cells on: `,` (the
/// RFC 4180 separator), `;` (the separator of locales whose decimal mark is
/// a comma) and tab (pasted or "text import" data).
const SEPARATORS: [char; 3] = [',', ';', '\t'];

/// Text from a plan or a model, made inert for spreadsheets, as OWASP's CSV
/// injection advice has it:
///
/// - a leading `=`, `+`, `-`, `@`, tab or carriage return would start a
///   formula, so the text gets a leading `'`;
/// - a separator followed by one of those characters (as in `x;=2+3`)
///   would start a formula in the next cell of a spreadsheet that splits on
///   that separator (a `;` locale does not split on the `,` the writer
///   quotes for), so the whole cell is quoted: the field is written between
///   double quotes whatever its content, and a reader that splits on `;`
///   keeps a quoted field whole.
///
/// The second rule is a property of the whole cell, so it is returned beside
/// the text and the writer quotes on it ([`Cell`]).
pub(crate) fn text(s: &str) -> Cell {
    let value = if s.starts_with(FORMULA_STARTS) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    let quote = separator_before_formula(s);
    Cell { value, quote }
}

/// Whether `s` holds a separator directly followed by a formula character.
fn separator_before_formula(s: &str) -> bool {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if SEPARATORS.contains(&c) && chars.peek().is_some_and(|n| FORMULA_STARTS.contains(n)) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(cells: &[&str]) -> String {
        let mut out = String::new();
        write_record(&mut out, cells.iter().map(|c| text(c)));
        out
    }

    #[test]
    fn formula_starts_are_neutralised_and_plain_text_is_not() {
        assert_eq!(text("=HYPERLINK(\"x\")").value, "'=HYPERLINK(\"x\")");
        assert_eq!(text("@SUM(A1)").value, "'@SUM(A1)");
        assert_eq!(text("-2+3").value, "'-2+3");
        assert_eq!(text("\tcmd").value, "'\tcmd");
        assert_eq!(text("plain, with comma").value, "plain, with comma");
        assert_eq!(text("").value, "");
    }

    /// OWASP: a `;` locale splits `x;=2+3` into `x` and the formula `=2+3`,
    /// so the cell is quoted (a quoted field is one cell in every locale).
    #[test]
    fn a_separator_before_a_formula_character_quotes_the_cell() {
        assert_eq!(record(&["x;=2+3", "b"]), "\"x;=2+3\",b\r\n");
        for cell in ["a;+1", "a;-1", "a;@A1", "a,=1", "a\t=1", "a;\t1", "a;\r1"] {
            let line = record(&[cell]);
            assert!(line.starts_with('"'), "{cell:?} -> {line:?}");
        }
        // A separator followed by anything else, and a formula character
        // after anything but a separator, keep RFC 4180's rule.
        assert_eq!(record(&["a;b", "1-2", "x=y"]), "a;b,1-2,x=y\r\n");
        assert_eq!(record(&["a, b"]), "\"a, b\"\r\n");
        assert_eq!(record(&["say \"hi\""]), "\"say \"\"hi\"\"\"\r\n");
    }
}
