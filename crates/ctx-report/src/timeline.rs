//! The timeline (Gantt chart) as inline SVG: one row per task, ordered by
//! start; one bar per started task from its start to its end, coloured by
//! state; a marker where an engine call was retried or an output failed a
//! check, and below the bar where a call went in a provider batch, was
//! billed at the flex tier or fell back to the standard tier; a flag where
//! an approval gate was decided; the run's actual critical path outlined
//! and its waits drawn as dashed links; a "now" line for a run still in
//! progress.
//!
//! Plain rectangles, paths and text only (no filters, no gradients), so the
//! browser draws 2,000 rows without effort. Each bar links to the task's
//! details by position (`#task-12`), never by id.
//!
//! [`Timeline`] lays the chart out; `templates/timeline.html` draws it.

use std::fmt::Write as _;

use crate::analysis::{Analysis, Span};
use crate::escape::truncate;
use crate::format::{axis, duration, px, tick_step};
use crate::groups::{grouped_order, parents};
use crate::input::{
    AttemptOutcome, AttemptReport, RunReportInput, RunStatus, ServiceTier, TaskReport, Timestamp,
};

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

/// The timeline laid out: the rows' order and the time scale.
pub(crate) struct Timeline<'a> {
    input: &'a RunReportInput,
    a: &'a Analysis,
    /// Per task: its map task, when it is an item.
    parents: Vec<Option<usize>>,
    /// The tasks, in row order.
    pub(crate) rows: Vec<usize>,
    /// Per task: its row.
    row_of: Vec<usize>,
    /// Per task: on the actual critical path.
    on_path: Vec<bool>,
    /// The axis length in ms, at least 1.
    wall: i64,
    /// Pixels per ms.
    scale: f64,
}

/// A tick of the time axis: its x and its label.
pub(crate) struct Tick {
    pub(crate) x: String,
    pub(crate) label: String,
}

/// A task's label left of its row; an item's is indented and muted.
pub(crate) struct Label {
    pub(crate) x: &'static str,
    pub(crate) y: String,
    pub(crate) class: Option<&'static str>,
    pub(crate) id: String,
}

/// A task's row of bars: its bar when it started, else where the
/// "never started" note goes.
pub(crate) struct BarRow<'a> {
    pub(crate) at: usize,
    pub(crate) task: &'a TaskReport,
    pub(crate) bar: Option<Bar>,
    pub(crate) never_x: String,
    pub(crate) text_y: String,
}

/// A started task's bar and the markers on it.
pub(crate) struct Bar {
    pub(crate) x: String,
    pub(crate) y: String,
    pub(crate) w: String,
    pub(crate) start: String,
    pub(crate) duration: String,
    pub(crate) open: bool,
    pub(crate) crit: bool,
    pub(crate) marks: Vec<Mark>,
}

/// A marker on a bar: above it where an engine call was retried
/// (`retry`) or its output failed a check (`check`); below it where a
/// call went in a provider batch (`batch`), was billed at the flex tier
/// (`flex`) or paid the standard price after a cheaper tier did not
/// serve it (`fallback`).
pub(crate) struct Mark {
    pub(crate) kind: &'static str,
    pub(crate) shape: String,
    /// The marker's tooltip (escaped by the template).
    pub(crate) title: String,
}

/// A decision on an approval gate, on its task's row at the time it was
/// recorded: a flag (`approve` or `reject`).
pub(crate) struct DecisionMark {
    pub(crate) verdict: &'static str,
    pub(crate) shape: String,
    pub(crate) title: String,
}

impl<'a> Timeline<'a> {
    /// Lays out the timeline of `input`.
    pub(crate) fn new(input: &'a RunReportInput, a: &'a Analysis) -> Self {
        let parents = parents(input);
        let rows = row_order(a, &parents);
        let mut row_of = vec![0usize; rows.len()];
        for (r, &i) in rows.iter().enumerate() {
            row_of[i] = r;
        }
        let mut on_path = vec![false; rows.len()];
        for &i in &a.actual_path {
            on_path[i] = true;
        }
        let wall = a.wall_ms().max(1);
        Timeline {
            input,
            a,
            parents,
            rows,
            row_of,
            on_path,
            wall,
            scale: CHART_W / wall as f64,
        }
    }

    fn x_of(&self, ms: i64) -> f64 {
        LABEL_W + ms as f64 * self.scale
    }

    fn y_of(&self, row: usize) -> f64 {
        TOP + row as f64 * ROW_H
    }

    fn width_f(&self) -> f64 {
        LABEL_W + CHART_W + RIGHT
    }

    fn height_f(&self) -> f64 {
        TOP + self.rows.len() as f64 * ROW_H + 6.0
    }

    pub(crate) fn width(&self) -> String {
        px(self.width_f())
    }

    pub(crate) fn height(&self) -> String {
        px(self.height_f())
    }

    pub(crate) fn row_height(&self) -> String {
        px(ROW_H)
    }

    pub(crate) fn bar_height(&self) -> String {
        px(BAR_H)
    }

    /// Where the axis's lines start.
    pub(crate) fn axis_top(&self) -> String {
        px(TOP - 4.0)
    }

    pub(crate) fn axis_label_y(&self) -> String {
        px(TOP - 8.0)
    }

    /// The y of every other row, shaded.
    pub(crate) fn shaded_rows(&self) -> impl Iterator<Item = String> + '_ {
        (1..self.rows.len()).step_by(2).map(|r| px(self.y_of(r)))
    }

    /// The axis's ticks, from 0 to the axis's end.
    pub(crate) fn ticks(&self) -> Vec<Tick> {
        let step = tick_step(self.wall, 8);
        let mut ticks = Vec::new();
        let mut t = 0i64;
        while t <= self.wall {
            ticks.push(Tick {
                x: px(self.x_of(t)),
                label: axis(t),
            });
            match t.checked_add(step) {
                Some(next) => t = next,
                None => break,
            }
        }
        ticks
    }

    /// The tasks' labels, in row order.
    pub(crate) fn labels(&self) -> impl Iterator<Item = Label> + '_ {
        self.rows.iter().enumerate().map(|(r, &i)| {
            let item = self.parents[i].is_some();
            // An item's label is indented under its map task's.
            let (x, class) = match (item, self.on_path[i]) {
                (false, false) => ("4", None),
                (false, true) => ("4", Some("crit")),
                (true, false) => ("16", Some("item")),
                (true, true) => ("16", Some("item crit")),
            };
            let room = if item { 26 } else { 28 };
            Label {
                x,
                y: px(self.y_of(r) + ROW_H - 5.0),
                class,
                id: truncate(&self.input.tasks[i].id, room),
            }
        })
    }

    /// The links along the actual critical path, as one path's `d`: from
    /// the end of the task waited for to the start of the task that waited.
    pub(crate) fn critical_links(&self) -> Option<String> {
        let path = &self.a.actual_path;
        if path.len() < 2 {
            return None;
        }
        let mut d = String::new();
        for w in path.windows(2) {
            let (Some(p), Some(q)) = (self.a.span[w[0]], self.a.span[w[1]]) else {
                continue;
            };
            let _ = write!(
                d,
                "M{} {}L{} {}",
                px(self.x_of(p.end)),
                px(self.y_of(self.row_of[w[0]]) + ROW_H / 2.0),
                px(self.x_of(q.start)),
                px(self.y_of(self.row_of[w[1]]) + ROW_H / 2.0)
            );
        }
        Some(d)
    }

    /// The bars and their markers, in row order.
    pub(crate) fn bars(&self) -> impl Iterator<Item = BarRow<'a>> + '_ {
        self.rows.iter().enumerate().map(|(r, &i)| {
            let task = &self.input.tasks[i];
            BarRow {
                at: i,
                task,
                bar: self.a.span[i].map(|s| self.bar(r, i, s)),
                never_x: px(LABEL_W + 4.0),
                text_y: px(self.y_of(r) + ROW_H - 5.0),
            }
        })
    }

    /// Task `i`'s bar on row `r`, spanning `s`.
    fn bar(&self, r: usize, i: usize, s: Span) -> Bar {
        let x = self.x_of(s.start);
        let w = (s.duration() as f64 * self.scale).max(2.0);
        Bar {
            x: px(x),
            y: px(self.y_of(r) + (ROW_H - BAR_H) / 2.0),
            w: px(w),
            start: duration(s.start),
            duration: duration(s.duration()),
            open: s.open,
            crit: self.on_path[i],
            marks: self.marks(r, &self.input.tasks[i], (x, x + w)),
        }
    }

    /// The markers of `task`'s calls on row `r`, inside its bar's `span`
    /// of x, at each call's end: above the bar, a retried call (an error
    /// that was not the last call counts) or an output that failed a
    /// check; below it, the call's tier ([`tier_mark`]).
    fn marks(&self, r: usize, task: &TaskReport, (from, to): (f64, f64)) -> Vec<Mark> {
        let last = task.attempts.len().saturating_sub(1);
        let mut marks = Vec::new();
        for (k, at) in task.attempts.iter().enumerate() {
            let Some(end) = at.ended_at else { continue };
            let mx = self
                .x_of(end.unix_ms().saturating_sub(self.a.origin_ms))
                .clamp(from, to);
            if let Some((kind, title)) = tier_mark(at) {
                let my = self.y_of(r) + ROW_H - 1.0;
                let shape = match kind {
                    "batch" => format!("M{} {}h6v-6h-6z", px(mx - 3.0), px(my)),
                    "flex" => format!("M{} {}l3 -3l-3 -3l-3 3z", px(mx), px(my)),
                    _ => format!("M{} {}h8l-4 -7z", px(mx - 4.0), px(my)),
                };
                marks.push(Mark { kind, shape, title });
            }
            let kind = match at.outcome {
                AttemptOutcome::Retry => "retry",
                AttemptOutcome::CheckFailure => "check",
                AttemptOutcome::Success => continue,
                AttemptOutcome::Error if k == last => continue,
                AttemptOutcome::Error => "retry",
            };
            let my = self.y_of(r) + 1.0;
            let shape = if kind == "check" {
                format!("M{} {}l3.5 3.5l-3.5 3.5l-3.5-3.5z", px(mx), px(my))
            } else {
                format!("M{} {}l4 7h-8z", px(mx), px(my))
            };
            let mut title = format!("attempt {}: {}", at.number, at.outcome.label());
            if let Some(class) = &at.class {
                let _ = write!(title, " ({class})");
            }
            marks.push(Mark { kind, shape, title });
        }
        marks
    }

    /// The decisions on the run's gates, each on its task's row at the
    /// time it was recorded (clamped into the axis: a decision taken
    /// after the run's last task ended sits at the axis's end, its title
    /// giving the time). A decision whose task is not in the run, or
    /// whose time does not parse, is listed in the decisions' table only.
    pub(crate) fn decisions(&self) -> Vec<DecisionMark> {
        let mut marks = Vec::new();
        for d in &self.input.decisions {
            let Some(i) = self.input.tasks.iter().position(|t| t.id == d.task_id) else {
                continue;
            };
            let Ok(at) = Timestamp::parse_rfc3339(&d.at) else {
                continue;
            };
            let ms = at
                .unix_ms()
                .saturating_sub(self.a.origin_ms)
                .clamp(0, self.wall);
            let (x, y) = (self.x_of(ms), self.y_of(self.row_of[i]) + 1.0);
            let shape = format!(
                "M{} {}h1.5v{}h-1.5zM{} {}l6 3l-6 3z",
                px(x - 0.75),
                px(y),
                px(ROW_H - 2.0),
                px(x + 0.75),
                px(y)
            );
            let verdict = d.verdict.as_str();
            let mut title = format!(
                "{} before {} by {} at {}",
                if verdict == "approve" {
                    "approved"
                } else {
                    "rejected"
                },
                d.stage.as_str(),
                d.by,
                d.at
            );
            if let Some(note) = &d.note {
                let _ = write!(title, ": {note}");
            }
            marks.push(DecisionMark {
                verdict,
                shape,
                title,
            });
        }
        marks
    }

    /// The legend's keys for the marks this run has beyond the ones
    /// every timeline explains (`retry`, `check`): its tier marks and
    /// its decisions, each once, in a fixed order.
    pub(crate) fn extra_keys(&self) -> Vec<(&'static str, &'static str)> {
        let tiers: Vec<&str> = self
            .input
            .tasks
            .iter()
            .flat_map(|t| &t.attempts)
            .filter_map(|a| tier_mark(a).map(|(kind, _)| kind))
            .collect();
        // Only the decisions drawn: one whose task is not in the run is not.
        let verdicts: Vec<&str> = self.decisions().iter().map(|d| d.verdict).collect();
        [
            ("batch", "call in a provider batch", &tiers),
            ("flex", "call at the flex tier", &tiers),
            ("fallback", "call fell back to the standard tier", &tiers),
            ("approve", "gate approved", &verdicts),
            ("reject", "gate rejected", &verdicts),
        ]
        .into_iter()
        .filter(|(kind, _, seen)| seen.contains(kind))
        .map(|(kind, label, _)| (kind, label))
        .collect()
    }

    /// The "now" line's x, for a run still in progress.
    pub(crate) fn now(&self) -> Option<String> {
        (self.input.status == RunStatus::Running).then(|| px(self.x_of(self.wall)))
    }
}

/// The tier mark of call `at`, with its tooltip: `batch` for a call sent
/// in a provider batch, `fallback` for one that paid the standard price
/// because a cheaper tier did not serve it, `flex` for one billed at the
/// flex tier; `None` for an ordinary call. A call has one at most: a
/// batched call that failed is marked `batch`, and the real-time call
/// after it `fallback`.
fn tier_mark(at: &AttemptReport) -> Option<(&'static str, String)> {
    let n = at.number;
    if let Some(batch) = &at.batch_id {
        let answered = if at.outcome == AttemptOutcome::Success {
            ", answered at the batch tier"
        } else {
            ""
        };
        return Some(("batch", format!("attempt {n}: in batch {batch}{answered}")));
    }
    if let Some(why) = at.tier_fallback {
        return Some((
            "fallback",
            format!("attempt {n}: standard tier: {}", why.describe()),
        ));
    }
    (at.service_tier == Some(ServiceTier::Flex))
        .then(|| ("flex", format!("attempt {n}: billed at the flex tier")))
}
