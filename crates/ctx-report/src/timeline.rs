//! The timeline (Gantt chart) as inline SVG: one row per task, ordered by
//! start; one bar per started task from its start to its end, coloured by
//! state; a marker where an engine call was retried or an output failed a
//! check; the run's actual critical path outlined and its waits drawn as
//! dashed links; a "now" line for a run still in progress.
//!
//! Plain rectangles, paths and text only (no filters, no gradients), so the
//! browser draws 2,000 rows without effort. Each bar links to the task's
//! details by position (`#task-12`), never by id.

use std::fmt::Write as _;

use crate::analysis::Analysis;
use crate::escape::{push_text, truncate};
use crate::format::{axis, duration, px, tasks, tick_step};
use crate::groups::{grouped_order, parents};
use crate::input::{AttemptOutcome, RunReportInput, RunStatus};

const LABEL_W: f64 = 190.0;
const CHART_W: f64 = 900.0;
const ROW_H: f64 = 18.0;
const BAR_H: f64 = 12.0;
const TOP: f64 = 26.0;
const RIGHT: f64 = 30.0;

/// The rows' order: started tasks by start (then input order), then the
/// tasks that never started, in input order; a map task's items right
/// after it, in the same order among themselves ([`grouped_order`]).
pub fn row_order(a: &Analysis, parents: &[Option<usize>]) -> Vec<usize> {
    grouped_order(parents, |i| a.span[i].map_or(i64::MAX, |s| s.start))
}

/// Appends the timeline's `<svg>` to `out`.
pub fn render(out: &mut String, input: &RunReportInput, a: &Analysis) {
    let parents = parents(input);
    let rows = row_order(a, &parents);
    let mut row_of = vec![0usize; rows.len()];
    for (r, &i) in rows.iter().enumerate() {
        row_of[i] = r;
    }
    let wall = a.wall_ms().max(1);
    let scale = CHART_W / wall as f64;
    let x_of = |ms: i64| LABEL_W + ms as f64 * scale;
    let y_of = |row: usize| TOP + row as f64 * ROW_H;
    let width = LABEL_W + CHART_W + RIGHT;
    let height = TOP + rows.len() as f64 * ROW_H + 6.0;
    let on_path = {
        let mut v = vec![false; rows.len()];
        for &i in &a.actual_path {
            v[i] = true;
        }
        v
    };

    let _ = write!(
        out,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"timeline of {}\">",
        px(width),
        px(height),
        px(width),
        px(height),
        tasks(rows.len())
    );
    out.push_str("<defs><pattern id=\"stripes\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" class=\"stripe\"/></pattern></defs>");

    // Alternate row shading, then the axis and its grid.
    out.push_str("<g class=\"rows\">");
    for r in (1..rows.len()).step_by(2) {
        let _ = write!(
            out,
            "<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            px(y_of(r)),
            px(width),
            px(ROW_H)
        );
    }
    out.push_str("</g><g class=\"axis\">");
    let step = tick_step(wall, 8);
    let mut t = 0i64;
    while t <= wall {
        let x = x_of(t);
        let _ = write!(
            out,
            "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/><text x=\"{x}\" y=\"{}\">{}</text>",
            px(TOP - 4.0),
            px(height),
            px(TOP - 8.0),
            axis(t),
            x = px(x),
        );
        match t.checked_add(step) {
            Some(next) => t = next,
            None => break,
        }
    }
    out.push_str("</g>");

    // Labels.
    out.push_str("<g class=\"labels\">");
    for (r, &i) in rows.iter().enumerate() {
        // An item's label is indented under its map task's.
        let (x, class) = match (parents[i].is_some(), on_path[i]) {
            (false, false) => ("4", ""),
            (false, true) => ("4", " class=\"crit\""),
            (true, false) => ("16", " class=\"item\""),
            (true, true) => ("16", " class=\"item crit\""),
        };
        let _ = write!(
            out,
            "<text x=\"{x}\" y=\"{}\"{class}>",
            px(y_of(r) + ROW_H - 5.0),
        );
        let room = if parents[i].is_some() { 26 } else { 28 };
        push_text(out, &truncate(&input.tasks[i].id, room));
        out.push_str("</text>");
    }
    out.push_str("</g>");

    // Links along the actual critical path: from the end of the task waited
    // for to the start of the task that waited.
    if a.actual_path.len() > 1 {
        out.push_str("<path class=\"crit-link\" d=\"");
        for w in a.actual_path.windows(2) {
            let (Some(p), Some(q)) = (a.span[w[0]], a.span[w[1]]) else {
                continue;
            };
            let _ = write!(
                out,
                "M{} {}L{} {}",
                px(x_of(p.end)),
                px(y_of(row_of[w[0]]) + ROW_H / 2.0),
                px(x_of(q.start)),
                px(y_of(row_of[w[1]]) + ROW_H / 2.0)
            );
        }
        out.push_str("\"/>");
    }

    // Bars and attempt markers.
    out.push_str("<g class=\"bars\">");
    for (r, &i) in rows.iter().enumerate() {
        let task = &input.tasks[i];
        let y = y_of(r) + (ROW_H - BAR_H) / 2.0;
        let Some(s) = a.span[i] else {
            let _ = write!(
                out,
                "<text class=\"never\" x=\"{}\" y=\"{}\">{} (never started)</text>",
                px(LABEL_W + 4.0),
                px(y_of(r) + ROW_H - 5.0),
                task.status.label()
            );
            continue;
        };
        let x = x_of(s.start);
        let w = (s.duration() as f64 * scale).max(2.0);
        let _ = write!(
            out,
            "<a href=\"#task-{i}\"><rect class=\"bar st-{}{}{}{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>",
            task.status.as_str(),
            if on_path[i] { " crit" } else { "" },
            if task.cached { " cached" } else { "" },
            if s.open { " open" } else { "" },
            px(x),
            px(y),
            px(w),
            px(BAR_H)
        );
        push_text(out, &task.id);
        let _ = write!(
            out,
            ": {}, +{} for {}{}{}",
            task.status.label(),
            duration(s.start),
            duration(s.duration()),
            if s.open { " so far" } else { "" },
            if on_path[i] {
                ", on the critical path"
            } else {
                ""
            }
        );
        out.push_str("</title></rect></a>");
        let last = task.attempts.len().saturating_sub(1);
        for (k, at) in task.attempts.iter().enumerate() {
            let kind = match at.outcome {
                AttemptOutcome::Retry => "retry",
                AttemptOutcome::CheckFailure => "check",
                AttemptOutcome::Success => continue,
                AttemptOutcome::Error if k == last => continue,
                AttemptOutcome::Error => "retry",
            };
            let Some(end) = at.ended_at else { continue };
            let mx = x_of(end.unix_ms().saturating_sub(a.origin_ms)).clamp(x, x + w);
            let my = y_of(r) + 1.0;
            let shape = if kind == "check" {
                format!("M{} {}l3.5 3.5l-3.5 3.5l-3.5-3.5z", px(mx), px(my))
            } else {
                format!("M{} {}l4 7h-8z", px(mx), px(my))
            };
            let _ = write!(
                out,
                "<path class=\"mark m-{kind}\" d=\"{shape}\"><title>attempt {}: {}",
                at.number,
                at.outcome.label()
            );
            if let Some(c) = &at.class {
                out.push_str(" (");
                push_text(out, c);
                out.push(')');
            }
            out.push_str("</title></path>");
        }
    }
    out.push_str("</g>");

    if input.status == RunStatus::Running {
        let x = x_of(wall);
        let _ = write!(
            out,
            "<line class=\"now\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
            px(TOP - 4.0),
            px(height),
            x = px(x)
        );
    }
    out.push_str("</svg>");
}
