//! A comparison as text for people: the summary, then a table with the
//! changed tasks first; or, with `--task`, one task in full with its
//! unified diff. Every stored string (ids, the diff) is escaped for the
//! terminal.

use ctx_model::money::dollars;
use ctx_table::{printable, printable_lines};

use crate::task::{Cost, Count, Flip, Statuses, TaskDiff};
use crate::{RunDiff, RunFacts};

impl RunDiff {
    /// The summary and the table of every task.
    pub fn text(&self) -> String {
        let mut out = self.summary_text();
        let rows: Vec<Vec<String>> = self.tasks.iter().map(row).collect();
        out.push('\n');
        out.push_str(&ctx_table::render(
            &[
                "TASK", "CHANGE", "STATUS", "CHECKS", "OUTPUT", "CAUSE", "TOKENS", "COST", "TIME",
            ],
            &[false, false, false, false, true, false, true, true, true],
            &rows,
        ));
        out
    }

    /// The summary and the one task kept (`--task`) in full.
    pub fn task_text(&self) -> String {
        let mut out = self.summary_text();
        for t in &self.tasks {
            out.push('\n');
            out.push_str(&task_page(t));
        }
        out
    }

    fn summary_text(&self) -> String {
        let s = &self.summary;
        let mut out = format!("A  {}\nB  {}\n\n", run_line(&self.a), run_line(&self.b));
        out.push_str(&format!(
            "{}: {} same, {} output changed, {} checks changed, {} status changed, {} new, {} removed\n",
            if s.tasks == 1 { "1 task".to_string() } else { format!("{} tasks", s.tasks) },
            s.same,
            s.output,
            s.checks,
            s.status,
            s.new,
            s.removed
        ));
        out.push_str(&format!("cost     {}\n", cost_line(&s.cost_usd)));
        out.push_str(&format!("time     {}\n", count_line(&s.time_ms, " ms")));
        for (what, ids) in [
            ("checks regressed", &s.check_regressions),
            ("status regressed", &s.status_regressions),
        ] {
            if !ids.is_empty() {
                let ids: Vec<String> = ids.iter().map(|i| printable(i)).collect();
                out.push_str(&format!("{what}: {}\n", ids.join(", ")));
            }
        }
        out
    }
}

fn run_line(r: &RunFacts) -> String {
    let mark = if r.state == "running" {
        " (in progress: compared as it stands)"
    } else {
        ""
    };
    format!(
        "{} {}{mark}, {}",
        printable(&r.run_id),
        r.state,
        printable(&r.location)
    )
}

/// A task's row of the table (its cells escaped for a terminal).
pub(crate) fn row(t: &TaskDiff) -> Vec<String> {
    let regressed = t.checks.last.iter().filter(|f| f.is_regression()).count();
    let fixed = t.checks.last.len() - regressed;
    let checks = match (regressed, fixed) {
        (0, 0) => String::new(),
        (r, 0) => format!("{r} regressed"),
        (0, f) => format!("{f} fixed"),
        (r, f) => format!("{r} regressed, {f} fixed"),
    };
    let output = match t.output.similarity {
        _ if t.output.identical => "same".to_string(),
        Some(s) => format!("{s:.4}"),
        None => "-".to_string(),
    };
    let causes: Vec<String> = t.causes.iter().map(|c| printable(&c.to_string())).collect();
    let id = match (&t.a_id, &t.b_id) {
        (Some(x), Some(y)) if x != y => format!("{} (was {})", printable(y), printable(x)),
        _ => printable(&t.id),
    };
    vec![
        id,
        t.change.as_str().to_string(),
        statuses(&t.status),
        checks,
        output,
        causes.join(", "),
        signed(t.tokens.delta, ""),
        t.cost_usd.delta.map_or_else(String::new, |d| {
            let s = d.to_dollars(6);
            if d.is_negative() { s } else { format!("+{s}") }
        }),
        signed(t.time_ms.delta, " ms"),
    ]
}

fn statuses(s: &Statuses) -> String {
    let name = |x: Option<ctx_model::TaskStatus>| x.map_or("-", |x| x.as_str());
    if s.a == s.b {
        name(s.a).to_string()
    } else {
        format!("{} -> {}", name(s.a), name(s.b))
    }
}

fn signed(d: Option<i64>, unit: &str) -> String {
    d.map_or_else(String::new, |d| format!("{d:+}{unit}"))
}

/// `A -> B (+change, +percent)`.
pub(crate) fn count_line(c: &Count, unit: &str) -> String {
    let side = |x: Option<u64>| x.map_or_else(|| "-".to_string(), |x| format!("{x}{unit}"));
    let pct = match (c.a, c.b) {
        (Some(a), Some(b)) if a > 0 => {
            format!(", {:+.1}%", (b as f64 - a as f64) / a as f64 * 100.0)
        }
        _ => String::new(),
    };
    match c.delta {
        Some(d) => format!("{} -> {} ({d:+}{unit}{pct})", side(c.a), side(c.b)),
        None => format!("{} -> {}", side(c.a), side(c.b)),
    }
}

/// `$A -> $B (+$change, +percent)`.
pub(crate) fn cost_line(c: &Cost) -> String {
    let side = |x: Option<ctx_model::money::Usd>| x.map_or_else(|| "-".to_string(), dollars);
    let Some(d) = c.delta else {
        return format!("{} -> {}", side(c.a), side(c.b));
    };
    let sign = if d.is_negative() { "" } else { "+" };
    let pct = match (c.a, c.b) {
        (Some(a), Some(b)) if a.picos() > 0 => format!(
            ", {:+.1}%",
            (b.picos() as f64 - a.picos() as f64) / a.picos() as f64 * 100.0
        ),
        _ => String::new(),
    };
    format!(
        "{} -> {} ({sign}{}{pct})",
        side(c.a),
        side(c.b),
        d.to_dollars(6)
    )
}

fn flip_text(f: &Flip) -> String {
    let v = |x: Option<bool>| match x {
        Some(true) => "passed",
        Some(false) => "failed",
        None => "not run",
    };
    format!("#{} {} {} -> {}", f.check, f.kind, v(f.a), v(f.b))
}

fn task_page(t: &TaskDiff) -> String {
    let mut out = task_facts(t);
    if let Some(diff) = t.output.diff.as_deref().filter(|d| !d.is_empty()) {
        out.push('\n');
        out.push_str(&printable_lines(diff));
        if !diff.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// A task in full but its diff: one `name  value` line each.
pub(crate) fn task_facts(t: &TaskDiff) -> String {
    let mut out = format!("task     {}\n", printable(&t.id));
    if t.a_id.is_some() && t.a_id != t.b_id {
        let was = t.a_id.as_deref().unwrap_or_default();
        out.push_str(&format!("was      {} in A\n", printable(was)));
    }
    out.push_str(&format!("change   {}\n", t.change.as_str()));
    out.push_str(&format!("status   {}\n", statuses(&t.status)));
    for (when, flips) in [("final", &t.checks.last), ("first", &t.checks.first)] {
        let flips: Vec<String> = flips.iter().map(flip_text).collect();
        if !flips.is_empty() {
            out.push_str(&format!("checks   {when} attempt: {}\n", flips.join("; ")));
        }
    }
    let output = match t.output.similarity {
        _ if t.output.identical => "identical".to_string(),
        Some(s) => format!("changed, similarity {s:.4}"),
        None => "not in both runs".to_string(),
    };
    out.push_str(&format!("output   {output}\n"));
    let causes: Vec<String> = t.causes.iter().map(|c| printable(&c.to_string())).collect();
    if !causes.is_empty() {
        out.push_str(&format!("cause    {}\n", causes.join(", ")));
    }
    out.push_str(&format!("tokens   {}\n", count_line(&t.tokens, "")));
    out.push_str(&format!("cost     {}\n", cost_line(&t.cost_usd)));
    out.push_str(&format!("cached   {}\n", count_line(&t.cached_tokens, "")));
    out.push_str(&format!("attempts {}\n", count_line(&t.attempts, "")));
    out.push_str(&format!("time     {}\n", count_line(&t.time_ms, " ms")));
    out
}
