//! The dependency graph as inline SVG, laid out by level: one column per
//! dependency level, each task a box in its level's column, each
//! dependency a curve from the dependency's right edge to the dependent's
//! left edge. Within a column, tasks are ordered by the mean row of their
//! dependencies (one barycentre pass, left to right), which untangles most
//! plans without an iterative layout.
//!
//! All edges are one `<path>` and the edges along the run's actual
//! critical path a second one: a 2,000-task plan with 20,000 dependencies
//! stays a handful of elements for the browser, not 20,000.

use std::fmt::Write as _;

use crate::analysis::Analysis;
use crate::escape::{push_text, truncate};
use crate::format::px;
use crate::input::RunReportInput;

const NODE_W: f64 = 150.0;
const NODE_H: f64 = 22.0;
const COL_GAP: f64 = 48.0;
const ROW_GAP: f64 = 8.0;
const PAD: f64 = 8.0;

/// Per task: (column, row) in the drawing.
pub fn layout(a: &Analysis) -> Vec<(usize, usize)> {
    let n = a.level.len();
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); a.levels];
    for i in 0..n {
        columns[a.level[i]].push(i);
    }
    let mut pos = vec![(0usize, 0usize); n];
    for (c, column) in columns.iter_mut().enumerate() {
        if c > 0 {
            // Mean row of the dependencies already placed (earlier
            // columns), in thousandths to keep the sort exact.
            let key = |i: usize| -> u64 {
                let placed: Vec<u64> = a.deps[i]
                    .iter()
                    .filter(|&&d| a.level[d] < c)
                    .map(|&d| pos[d].1 as u64)
                    .collect();
                if placed.is_empty() {
                    u64::MAX
                } else {
                    placed.iter().sum::<u64>() * 1000 / placed.len() as u64
                }
            };
            let mut keyed: Vec<(u64, usize)> = column.iter().map(|&i| (key(i), i)).collect();
            keyed.sort();
            *column = keyed.into_iter().map(|(_, i)| i).collect();
        }
        for (r, &i) in column.iter().enumerate() {
            pos[i] = (c, r);
        }
    }
    pos
}

/// Appends the graph's `<svg>` to `out`.
pub fn render(out: &mut String, input: &RunReportInput, a: &Analysis) {
    let pos = layout(a);
    let rows = pos.iter().map(|p| p.1 + 1).max().unwrap_or(0);
    let width = match a.levels {
        0 => PAD * 2.0,
        l => PAD * 2.0 + l as f64 * (NODE_W + COL_GAP) - COL_GAP,
    };
    let height = PAD * 2.0 + rows as f64 * (NODE_H + ROW_GAP);
    let x_of = |c: usize| PAD + c as f64 * (NODE_W + COL_GAP);
    let y_of = |r: usize| PAD + r as f64 * (NODE_H + ROW_GAP);
    let mut on_path = vec![false; pos.len()];
    for &i in &a.actual_path {
        on_path[i] = true;
    }

    let _ = write!(
        out,
        "<svg class=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"dependency graph, {} levels\">",
        a.levels,
        w = px(width.max(1.0)),
        h = px(height.max(1.0)),
    );
    let edge = |out: &mut String, d: usize, i: usize| {
        let (x1, y1) = (x_of(pos[d].0) + NODE_W, y_of(pos[d].1) + NODE_H / 2.0);
        let (x2, y2) = (x_of(pos[i].0), y_of(pos[i].1) + NODE_H / 2.0);
        let mid = (x1 + x2) / 2.0;
        let _ = write!(
            out,
            "M{} {}C{} {} {} {} {} {}",
            px(x1),
            px(y1),
            px(mid),
            px(y1),
            px(mid),
            px(y2),
            px(x2),
            px(y2)
        );
    };
    out.push_str("<path class=\"edges\" d=\"");
    for (i, deps) in a.deps.iter().enumerate() {
        for &d in deps {
            if a.level[d] < a.level[i] {
                edge(out, d, i);
            }
        }
    }
    out.push_str("\"/>");
    if a.actual_path.len() > 1 {
        out.push_str("<path class=\"edges crit\" d=\"");
        for w in a.actual_path.windows(2) {
            edge(out, w[0], w[1]);
        }
        out.push_str("\"/>");
    }
    for (i, &(c, r)) in pos.iter().enumerate() {
        let task = &input.tasks[i];
        let _ = write!(
            out,
            "<a href=\"#task-{i}\"><rect class=\"node st-{}{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"3\"/><text x=\"{}\" y=\"{}\">",
            task.status.as_str(),
            if on_path[i] { " crit" } else { "" },
            px(x_of(c)),
            px(y_of(r)),
            px(NODE_W),
            px(NODE_H),
            px(x_of(c) + 6.0),
            px(y_of(r) + NODE_H - 7.0),
        );
        push_text(out, &truncate(&task.id, 20));
        out.push_str("</text><title>");
        push_text(out, &task.id);
        out.push_str(": ");
        push_text(out, &truncate(&task.description, 200));
        out.push_str("</title></a>");
    }
    out.push_str("</svg>");
}
