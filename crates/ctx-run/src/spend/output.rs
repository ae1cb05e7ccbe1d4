//! `ctx spend`'s three renderings: the table for people, the JSON object
//! (the fields of [`Spend`] in declaration order, written by the caller
//! with the one JSON writer) and CSV for spreadsheets, written by the
//! export's RFC 4180 writer with its formula defence
//! ([`crate::export`]'s CSV).

use ctx_cost::Usd;
use ctx_table::printable;

use super::{Spend, SpendRow};
use crate::export::csv::{Cell, text, write_record};

/// The CSV columns after the first, which is named by the grouping
/// (`plan`, `model`, `day` or `run`).
pub const CSV_COLUMNS: [&str; 5] = [
    "runs",
    "attempts",
    "spent_usd",
    "unpriced_attempts",
    "unpriced_models",
];

impl Spend {
    /// The table `ctx spend` prints: one row per group and the total, then
    /// a line naming the unpriced models, if any; or, when no attempt was
    /// recorded in the period, one line saying so. `location` is where the
    /// runs were read (a root directory, or a URL without its password).
    pub fn text(&self, location: &str) -> String {
        if self.total.attempts == 0 {
            return format!(
                "no attempts recorded{}: {} {} read from {}\n",
                self.period_words(),
                self.runs_read,
                if self.runs_read == 1 { "run" } else { "runs" },
                printable(location)
            );
        }
        let key = self.by.as_str().to_uppercase();
        let header = [key.as_str(), "RUNS", "ATTEMPTS", "SPENT", "UNPRICED"];
        let right = [false, true, true, true, true];
        let rows: Vec<Vec<String>> = self
            .groups
            .iter()
            .chain(std::iter::once(&self.total))
            .map(|r| {
                vec![
                    printable(&r.key),
                    r.runs.to_string(),
                    r.attempts.to_string(),
                    spent_cell(r),
                    r.unpriced_attempts.to_string(),
                ]
            })
            .collect();
        let mut out = ctx_table::render(&header, &right, &rows);
        let t = &self.total;
        if t.unpriced_attempts > 0 {
            let models: Vec<String> = t.unpriced_models.iter().map(|m| printable(m)).collect();
            out.push_str(&format!(
                "unpriced: {} {} on {}: no price was known when {} ran, so {} cost is unknown \
                 and not in SPENT\n",
                t.unpriced_attempts,
                if t.unpriced_attempts == 1 {
                    "attempt"
                } else {
                    "attempts"
                },
                models.join(", "),
                if t.unpriced_attempts == 1 {
                    "it"
                } else {
                    "they"
                },
                if t.unpriced_attempts == 1 {
                    "its"
                } else {
                    "their"
                },
            ));
        }
        out
    }

    /// The groups as CSV (header, then one record per group in key order;
    /// no total row, so a column's sum is the total). Deterministic.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        let header = std::iter::once(self.by.as_str()).chain(CSV_COLUMNS);
        write_record(&mut out, header.map(Cell::from));
        for r in &self.groups {
            write_record(
                &mut out,
                [
                    text(&r.key),
                    r.runs.to_string().into(),
                    r.attempts.to_string().into(),
                    r.spent_usd.to_string().into(),
                    r.unpriced_attempts.to_string().into(),
                    text(&r.unpriced_models.join(" ")),
                ],
            );
        }
        out
    }

    /// ` between A and B`, ` since A`, ` before B`, or nothing.
    fn period_words(&self) -> String {
        match (self.since, self.before) {
            (Some(s), Some(b)) => format!(" between {s} and {b}"),
            (Some(s), None) => format!(" since {s}"),
            (None, Some(b)) => format!(" before {b}"),
            (None, None) => String::new(),
        }
    }
}

/// A group's SPENT: the priced sum, `+ unknown` when some of its attempts
/// are unpriced, `unknown` when all are (never `$0`).
fn spent_cell(r: &SpendRow) -> String {
    let sum = ctx_deps::dollars(r.spent_usd);
    match r.unpriced_attempts {
        0 => sum,
        n if n == r.attempts && r.spent_usd == Usd::ZERO => "unknown".to_string(),
        _ => format!("{sum} + unknown"),
    }
}
