//! A comparison as one self-contained HTML page (`ctx runs diff -o
//! diff.html`): the summary, the table of every task (changed first), and
//! each changed task's causes, flipped checks and unified diff.
//!
//! Safety as in the run report (ctx-report): every stored string goes
//! through its one escaping door ([`ctx_report::escape::push_text`]) into
//! element content, and the page runs no script at all: its
//! Content-Security-Policy admits inline styles and nothing else, so an
//! output holding markup can neither run nor load anything.

use std::fmt::Write as _;

use ctx_model::money::dollars;
use ctx_report::escape::push_text;

use crate::task::{Change, TaskDiff};
use crate::{RunDiff, RunFacts};

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}\
code,pre{font:12px/1.4 ui-monospace,monospace}\
table{border-collapse:collapse;margin:1em 0}td,th{padding:2px 8px;text-align:left;vertical-align:top}\
th{border-bottom:1px solid #999}tr:nth-child(even){background:#f6f6f6}td.n{text-align:right}\
.c-status,.c-removed{color:#b00020}.c-new{color:#1b5e20}.c-checks,.c-output{color:#8a5a00}.c-same{color:#777}\
pre.diff{background:#fafafa;border:1px solid #ddd;padding:6px;overflow-x:auto}\
.add{background:#e6ffed}.del{background:#ffeef0}.hunk{color:#6f42c1}\
section.task{border-top:1px solid #ddd;margin-top:1.5em}.meta{color:#555}";

impl RunDiff {
    /// The page. Each changed task's unified diff is shown when the
    /// comparison computed it (`DiffOptions::diffs`).
    pub fn html(&self) -> String {
        let mut out =
            String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'\">\n");
        out.push_str("<meta name=\"generator\" content=\"ctx-diff\">\n<title>ctx runs diff ");
        push_text(&mut out, &self.a.run_id);
        out.push(' ');
        push_text(&mut out, &self.b.run_id);
        let _ = write!(out, "</title>\n<style>{STYLE}</style>\n</head>\n<body>\n");
        out.push_str("<h1>Runs compared</h1>\n<table>\n");
        run_row(&mut out, "A", &self.a);
        run_row(&mut out, "B", &self.b);
        out.push_str("</table>\n");
        self.summary_html(&mut out);
        table(&mut out, &self.tasks);
        for (i, t) in self.tasks.iter().enumerate() {
            if t.change != Change::Same {
                task_section(&mut out, i, t);
            }
        }
        out.push_str("</body>\n</html>\n");
        out
    }

    fn summary_html(&self, out: &mut String) {
        let s = &self.summary;
        let _ = write!(
            out,
            "<p>{} tasks: {} same, {} output changed, {} checks changed, {} status changed, {} new, {} removed</p>\n<p>cost ",
            s.tasks, s.same, s.output, s.checks, s.status, s.new, s.removed
        );
        push_text(out, &crate::text::cost_line(&s.cost_usd));
        out.push_str("<br>time ");
        push_text(out, &crate::text::count_line(&s.time_ms, " ms"));
        out.push_str("</p>\n");
        for (what, ids) in [
            ("checks regressed", &s.check_regressions),
            ("status regressed", &s.status_regressions),
        ] {
            if !ids.is_empty() {
                let _ = write!(out, "<p class=\"c-status\">{what}: ");
                push_text(out, &ids.join(", "));
                out.push_str("</p>\n");
            }
        }
    }
}

fn run_row(out: &mut String, side: &str, r: &RunFacts) {
    let _ = write!(out, "<tr><th>{side}</th><td><code>");
    push_text(out, &r.run_id);
    out.push_str("</code></td><td>");
    push_text(out, &r.state);
    if r.state == "running" {
        out.push_str(" (in progress: compared as it stands)");
    }
    out.push_str("</td><td>");
    push_text(out, &r.location);
    let _ = writeln!(
        out,
        "</td><td class=\"n\">{} tasks</td><td class=\"n\">{}</td><td class=\"n\">{} ms</td></tr>",
        r.tasks,
        dollars(r.cost_usd),
        r.time_ms
    );
}

fn table(out: &mut String, tasks: &[TaskDiff]) {
    out.push_str("<table>\n<tr><th>task</th><th>change</th><th>status</th><th>checks</th><th>output</th><th>cause</th><th>tokens</th><th>cost</th><th>time</th></tr>\n");
    for (i, t) in tasks.iter().enumerate() {
        let cells = crate::text::row(t);
        let _ = write!(out, "<tr class=\"c-{}\"><td>", t.change.as_str());
        if t.change == Change::Same {
            push_text(out, &cells[0]);
        } else {
            let _ = write!(out, "<a href=\"#task-{i}\">");
            push_text(out, &cells[0]);
            out.push_str("</a>");
        }
        out.push_str("</td>");
        for (k, cell) in cells.iter().enumerate().skip(1) {
            out.push_str(if k >= 6 || k == 4 {
                "<td class=\"n\">"
            } else {
                "<td>"
            });
            push_text(out, cell);
            out.push_str("</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Task `i` of the table (its link's target) in full.
fn task_section(out: &mut String, i: usize, t: &TaskDiff) {
    let _ = write!(out, "<section class=\"task\" id=\"task-{i}\"><h2><code>");
    push_text(out, &t.id);
    out.push_str("</code></h2>\n<pre>");
    push_text(out, &crate::text::task_facts(t));
    out.push_str("</pre>\n");
    if let Some(diff) = t.output.diff.as_deref().filter(|d| !d.is_empty()) {
        out.push_str("<pre class=\"diff\">");
        for line in diff.lines() {
            let class = match line.as_bytes().first() {
                Some(b'+') if !line.starts_with("+++") => Some("add"),
                Some(b'-') if !line.starts_with("---") => Some("del"),
                Some(b'@') => Some("hunk"),
                _ => None,
            };
            match class {
                Some(c) => {
                    let _ = write!(out, "<span class=\"{c}\">");
                    push_text(out, line);
                    out.push_str("</span>\n");
                }
                None => {
                    push_text(out, line);
                    out.push('\n');
                }
            }
        }
        out.push_str("</pre>\n");
    }
    out.push_str("</section>\n");
}
