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
//!
//! [`Dag`] lays the graph out; `templates/dag.html` draws it.

use std::fmt::Write as _;

use crate::analysis::Analysis;
use crate::escape::truncate;
use crate::format::px;
use crate::input::{RunReportInput, TaskReport};

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

/// The graph laid out: each task's column and row.
pub(crate) struct Dag<'a> {
    input: &'a RunReportInput,
    a: &'a Analysis,
    /// Per task: (column, row).
    pos: Vec<(usize, usize)>,
    /// Per task: on the actual critical path.
    on_path: Vec<bool>,
}

/// A task's box: where it is, its label and its tooltip's description.
pub(crate) struct Node<'a> {
    pub(crate) at: usize,
    pub(crate) task: &'a TaskReport,
    pub(crate) crit: bool,
    pub(crate) x: String,
    pub(crate) y: String,
    pub(crate) text_x: String,
    pub(crate) text_y: String,
    pub(crate) label: String,
    pub(crate) description: String,
}

impl<'a> Dag<'a> {
    /// Lays out the graph of `input`.
    pub(crate) fn new(input: &'a RunReportInput, a: &'a Analysis) -> Self {
        let pos = layout(a);
        let mut on_path = vec![false; pos.len()];
        for &i in &a.actual_path {
            on_path[i] = true;
        }
        Dag {
            input,
            a,
            pos,
            on_path,
        }
    }

    fn x_of(c: usize) -> f64 {
        PAD + c as f64 * (NODE_W + COL_GAP)
    }

    fn y_of(r: usize) -> f64 {
        PAD + r as f64 * (NODE_H + ROW_GAP)
    }

    pub(crate) fn width(&self) -> String {
        let width = match self.a.levels {
            0 => PAD * 2.0,
            l => PAD * 2.0 + l as f64 * (NODE_W + COL_GAP) - COL_GAP,
        };
        px(width.max(1.0))
    }

    pub(crate) fn height(&self) -> String {
        let rows = self.pos.iter().map(|p| p.1 + 1).max().unwrap_or(0);
        px((PAD * 2.0 + rows as f64 * (NODE_H + ROW_GAP)).max(1.0))
    }

    pub(crate) fn node_width(&self) -> String {
        px(NODE_W)
    }

    pub(crate) fn node_height(&self) -> String {
        px(NODE_H)
    }

    /// Appends the curve from dependency `d`'s right edge to task `i`'s
    /// left edge to a path's `d`.
    fn edge(&self, out: &mut String, d: usize, i: usize) {
        let (pd, pi) = (self.pos[d], self.pos[i]);
        let (x1, y1) = (Self::x_of(pd.0) + NODE_W, Self::y_of(pd.1) + NODE_H / 2.0);
        let (x2, y2) = (Self::x_of(pi.0), Self::y_of(pi.1) + NODE_H / 2.0);
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
    }

    /// Every dependency from an earlier level, as one path's `d`.
    pub(crate) fn edges(&self) -> String {
        let mut d = String::new();
        for (i, deps) in self.a.deps.iter().enumerate() {
            for &dep in deps {
                if self.a.level[dep] < self.a.level[i] {
                    self.edge(&mut d, dep, i);
                }
            }
        }
        d
    }

    /// The dependencies along the actual critical path, as one path's `d`.
    pub(crate) fn critical_edges(&self) -> Option<String> {
        let path = &self.a.actual_path;
        (path.len() > 1).then(|| {
            let mut d = String::new();
            for w in path.windows(2) {
                self.edge(&mut d, w[0], w[1]);
            }
            d
        })
    }

    /// The tasks' boxes, in input order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = Node<'a>> + '_ {
        self.pos.iter().enumerate().map(|(i, &(c, r))| {
            let task = &self.input.tasks[i];
            Node {
                at: i,
                task,
                crit: self.on_path[i],
                x: px(Self::x_of(c)),
                y: px(Self::y_of(r)),
                text_x: px(Self::x_of(c) + 6.0),
                text_y: px(Self::y_of(r) + NODE_H - 7.0),
                label: truncate(&task.id, 20),
                description: truncate(&task.description, 200),
            }
        })
    }
}
