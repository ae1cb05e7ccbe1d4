//! What the report computes from its input before drawing: resolved
//! dependencies, levels, the time axis, the run's actual critical path, the
//! critical-path lower bound, totals, and every problem found in the input.
//!
//! The input may come from a hand-written JSON file, so nothing here trusts
//! it: duplicate ids, unknown or repeated dependencies, cycles, ends before
//! starts and missing times are reported as warnings and drawn as well as
//! they can be, never a panic. The graph is the plan model's
//! [`DependencyGraph`], the one DAG implementation, rather than ctx-deps'
//! plan graph: that one refuses a cyclic plan, and going through ctx-deps
//! would pull tokio and the prompt assembler into the report.

use std::collections::HashMap;

use ctx_model::graph::{DependencyGraph, TopologicalOrder};

use crate::input::{AttemptOutcome, RunReportInput, RunStatus, TaskState};

/// Everything derived from a [`RunReportInput`].
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Per task (input order): indices of its resolved dependencies,
    /// deduplicated, in declaration order.
    pub deps: Vec<Vec<usize>>,
    /// Per task: its dependency level (0 = no dependencies). Tasks on a
    /// cycle are put one level after everything else.
    pub level: Vec<usize>,
    /// The number of levels.
    pub levels: usize,
    /// The time axis origin, in Unix ms: the run's start, else the earliest
    /// task start, else 0.
    pub origin_ms: i64,
    /// The end of the time axis, in Unix ms (at least `origin_ms`): the run's
    /// end, else `as_of` while running, else the latest time in the input.
    pub horizon_ms: i64,
    /// Per task: its drawn span in ms relative to `origin_ms`, when it
    /// started. An in-progress task (or one with no recorded end) spans to
    /// the horizon.
    pub span: Vec<Option<Span>>,
    /// The run's actual critical path, first task first: from the task that
    /// ended last, back through the dependency that ended last before each
    /// task (the one it waited for), to a task that waited for none.
    pub actual_path: Vec<usize>,
    /// The longest dependency chain weighted by the tasks' durations, first
    /// task first; its total is the wall time no schedule could beat.
    pub lower_bound_path: Vec<usize>,
    /// The sum of durations along `lower_bound_path`, in ms.
    pub lower_bound_ms: i64,
    /// Totals over all tasks.
    pub totals: Totals,
    /// Problems found in the input, in a fixed order.
    pub warnings: Vec<String>,
}

/// A task's drawn time span, in ms after the axis origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Start offset.
    pub start: i64,
    /// End offset (at least `start`).
    pub end: i64,
    /// The end is the horizon, not a recorded end (still running, or the
    /// end was never recorded).
    pub open: bool,
}

impl Span {
    /// `end - start`.
    pub fn duration(self) -> i64 {
        self.end.saturating_sub(self.start)
    }
}

/// Sums over the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Tasks per state, in [`TaskState::ALL`] order.
    pub by_state: Vec<(TaskState, usize)>,
    /// Tasks that have a start.
    pub started: usize,
    /// Prompt tokens over the tasks that report them.
    pub prompt_tokens: u64,
    /// Completion tokens over the tasks that report them.
    pub completion_tokens: u64,
    /// Started tasks whose engine reported no completion tokens (a command
    /// engine, a dry run): their completions are not in the sum.
    pub completion_unreported: usize,
    /// Tokens of dependency outputs left out of prompts.
    pub cut_tokens: u64,
    /// Known cost in USD.
    pub cost_usd: f64,
    /// Started tasks whose cost is unknown.
    pub unpriced: usize,
    /// Prompt tokens read from the provider's prompt cache, over the tasks
    /// that report them; `None` when none does.
    pub cached_tokens: Option<u64>,
    /// The prompt tokens of the tasks whose engine reported both a cache
    /// read and its usage's prompt tokens, and the reads among them: the
    /// cached share's base and its part; `None` when no task reports both.
    pub cached_share: Option<(u64, u64)>,
    /// Prompt tokens written to the provider's prompt cache, likewise.
    pub cache_write_tokens: Option<u64>,
    /// What the prompt cache saved in USD, likewise.
    pub cache_saving_usd: Option<f64>,
    /// Tasks served from the cache.
    pub cache_hits: usize,
    /// Engine calls.
    pub attempts: usize,
    /// Calls that were retried.
    pub retries: usize,
    /// Calls whose output a check rejected.
    pub check_failures: usize,
    /// Sum of the started tasks' durations, in ms.
    pub work_ms: i64,
}

impl Analysis {
    /// Analyses `input`.
    pub fn of(input: &RunReportInput) -> Analysis {
        let mut warnings = Vec::new();
        let deps = dependency_indices(input, &mut warnings);
        let (order, level, on_cycle) = topological(&deps);
        if !on_cycle.is_empty() {
            let ids: Vec<&str> = on_cycle
                .iter()
                .map(|&i| input.tasks[i].id.as_str())
                .collect();
            warnings.push(format!(
                "dependency cycle through {}; drawn after the last level, with the tasks that depend on it",
                ids.join(", ")
            ));
        }
        let levels = level.iter().map(|l| l + 1).max().unwrap_or(0);
        let (origin_ms, horizon_ms) = time_axis(input);
        let span = spans(input, origin_ms, horizon_ms, &mut warnings);
        let actual_path = actual_critical_path(&deps, &span);
        let (lower_bound_path, lower_bound_ms) = lower_bound(&order, &deps, &span);
        let totals = totals(input, &span);
        implausible_values(input, &mut warnings);
        Analysis {
            deps,
            level,
            levels,
            origin_ms,
            horizon_ms,
            span,
            actual_path,
            lower_bound_path,
            lower_bound_ms,
            totals,
            warnings,
        }
    }

    /// The wall time of the run in ms: the axis length.
    pub fn wall_ms(&self) -> i64 {
        self.horizon_ms.saturating_sub(self.origin_ms)
    }
}

/// Each task's dependencies as indices into the run's tasks, in their
/// stated order without repeats. A repeated id resolves to its first task;
/// a dependency on itself or on a task not in the run is dropped, with a
/// warning (a report draws what it is given, it does not refuse it).
fn dependency_indices(input: &RunReportInput, warnings: &mut Vec<String>) -> Vec<Vec<usize>> {
    let n = input.tasks.len();
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (i, t) in input.tasks.iter().enumerate() {
        if index.contains_key(t.id.as_str()) {
            warnings.push(format!(
                "task #{} repeats the id `{}`; dependencies on it refer to the first",
                i + 1,
                t.id
            ));
        } else {
            index.insert(&t.id, i);
        }
    }
    let mut deps = Vec::with_capacity(n);
    for (i, t) in input.tasks.iter().enumerate() {
        let mut d: Vec<usize> = Vec::with_capacity(t.dependencies.len());
        for dep in &t.dependencies {
            match index.get(dep.as_str()) {
                Some(&j) if j == i => {
                    warnings.push(format!("task `{}` depends on itself; ignored", t.id))
                }
                Some(&j) if !d.contains(&j) => d.push(j),
                Some(_) => {}
                None => warnings.push(format!(
                    "task `{}` depends on `{dep}`, which is not in the run; ignored",
                    t.id
                )),
            }
        }
        deps.push(d);
    }
    deps
}

/// The time axis `(origin, horizon)` in Unix milliseconds: the run's span,
/// from its first task's start to its last task's end (to the snapshot
/// time while the run is running). The run's own start and end frame it
/// only where no task has the time: a session starts before its first
/// task, and an engine's call times are laid end to end from their task's
/// start (see `attempts`), so neither widens the wall time. A task with a
/// start and no end (interrupted by a crash or a signal) spans to the
/// run's end.
fn time_axis(input: &RunReportInput) -> (i64, i64) {
    let earliest = input
        .tasks
        .iter()
        .filter_map(|t| t.started_at)
        .map(|t| t.unix_ms())
        .min();
    let origin_ms = earliest
        .or(input.started_at.map(|t| t.unix_ms()))
        .unwrap_or(0);
    let open_task = input
        .tasks
        .iter()
        .any(|t| t.started_at.is_some() && t.ended_at.is_none());
    let run_end = input.ended_at.map(|t| t.unix_ms());
    let latest = input
        .tasks
        .iter()
        .flat_map(|t| [t.started_at, t.ended_at])
        .flatten()
        .map(|t| t.unix_ms())
        .max()
        .into_iter()
        .chain(open_task.then_some(run_end).flatten())
        .max()
        .or(run_end)
        .unwrap_or(origin_ms);
    let horizon_ms = match (input.status, input.as_of) {
        (RunStatus::Running, Some(now)) => now.unix_ms().max(latest),
        _ => latest,
    }
    .max(origin_ms);
    (origin_ms, horizon_ms)
}

/// Each task's bar on the axis, `None` for a task that never started. An
/// open task reaches the horizon; times that contradict each other are
/// drawn as well as they can be, with a warning.
fn spans(
    input: &RunReportInput,
    origin_ms: i64,
    horizon_ms: i64,
    warnings: &mut Vec<String>,
) -> Vec<Option<Span>> {
    let mut span = Vec::with_capacity(input.tasks.len());
    for t in &input.tasks {
        let Some(s) = t.started_at else {
            if t.ended_at.is_some() {
                warnings.push(format!(
                    "task `{}` has an end but no start; not drawn on the timeline",
                    t.id
                ));
            }
            span.push(None);
            continue;
        };
        if matches!(t.status, TaskState::Pending | TaskState::Skipped) {
            warnings.push(format!(
                "task `{}` is {} but has a start time",
                t.id,
                t.status.label()
            ));
        }
        let start = s.unix_ms().saturating_sub(origin_ms);
        let (end, open) = match t.ended_at {
            Some(e) if e < s => {
                warnings.push(format!(
                    "task `{}` ends ({e}) before it starts ({s}); drawn with no length",
                    t.id
                ));
                (start, false)
            }
            Some(e) => (e.unix_ms().saturating_sub(origin_ms), false),
            None => (horizon_ms.saturating_sub(origin_ms).max(start), true),
        };
        span.push(Some(Span { start, end, open }));
    }
    span
}

/// The actual critical path: walk back from the task that ended last
/// through the dependency each task waited for last.
fn actual_critical_path(deps: &[Vec<usize>], span: &[Option<Span>]) -> Vec<usize> {
    let n = span.len();
    let mut path = Vec::new();
    let last = (0..n)
        .filter_map(|i| span[i].map(|s| (s.end, i)))
        .max_by_key(|&(end, i)| (end, std::cmp::Reverse(i)));
    if let Some((_, mut cur)) = last {
        let mut seen = vec![false; n];
        loop {
            seen[cur] = true;
            path.push(cur);
            let waited = deps[cur]
                .iter()
                .filter(|&&d| !seen[d])
                .filter_map(|&d| span[d].map(|s| (s.end, d)))
                .max_by_key(|&(end, d)| (end, std::cmp::Reverse(d)));
            match waited {
                Some((_, d)) => cur = d,
                None => break,
            }
        }
        path.reverse();
    }
    path
}

/// The lower bound `(path, ms)`: the longest chain by duration, over the
/// topological order (edges inside a cycle are ignored).
fn lower_bound(order: &[usize], deps: &[Vec<usize>], span: &[Option<Span>]) -> (Vec<usize>, i64) {
    let n = span.len();
    let dur: Vec<i64> = span.iter().map(|s| s.map_or(0, Span::duration)).collect();
    let mut best = vec![0i64; n];
    let mut via: Vec<Option<usize>> = vec![None; n];
    let mut position = vec![usize::MAX; n];
    for (p, &i) in order.iter().enumerate() {
        position[i] = p;
    }
    for &i in order {
        let (mut b, mut v) = (0, None);
        for &d in &deps[i] {
            if position[d] < position[i] && (v.is_none() || best[d] > b) {
                (b, v) = (best[d], Some(d));
            }
        }
        via[i] = v;
        best[i] = b.saturating_add(dur[i]);
    }
    let mut path = Vec::new();
    let mut ms = 0;
    let longest = (0..n)
        .filter(|&i| best[i] > 0)
        .max_by_key(|&i| (best[i], std::cmp::Reverse(i)));
    if let Some(end) = longest {
        ms = best[end];
        let mut cur = Some(end);
        while let Some(c) = cur {
            path.push(c);
            cur = via[c];
        }
        path.reverse();
    }
    (path, ms)
}

/// Warnings for figures no run can have produced: a negative cost, a
/// dependency cut that kept more tokens than it had.
fn implausible_values(input: &RunReportInput, warnings: &mut Vec<String>) {
    for t in &input.tasks {
        if t.cost_usd.is_some_and(|c| c < 0.0 || c.is_nan()) {
            warnings.push(format!("task `{}` has a negative cost", t.id));
        }
        for c in &t.dependency_cuts {
            if c.kept_tokens > c.original_tokens {
                warnings.push(format!(
                    "task `{}` kept {} tokens of `{}`, more than its {} tokens",
                    t.id, c.kept_tokens, c.task_id, c.original_tokens
                ));
            }
        }
    }
}
/// The order, each task's level, and the tasks on cycles, over the shared
/// [`DependencyGraph`]: its topological order levels every task it can
/// place; the tasks on cycles (its strongly connected components among the
/// unplaced) go one level after the rest, appended to the order in input
/// order; the tasks downstream of a cycle follow, levelled as if each cycle
/// were one level (their order comes from the same graph without the
/// cycles' edges, which is acyclic).
fn topological(deps: &[Vec<usize>]) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let n = deps.len();
    let graph = DependencyGraph::from_dependencies(deps.to_vec());
    let TopologicalOrder {
        mut order,
        unplaced,
    } = graph.topological_order();
    let mut level = vec![0usize; n];
    let level_after_deps = |level: &[usize], i: usize| -> usize {
        deps[i].iter().map(|&d| level[d] + 1).max().unwrap_or(0)
    };
    for &i in &order {
        level[i] = level_after_deps(&level, i);
    }
    if unplaced.is_empty() {
        return (order, level, Vec::new());
    }
    let mut left = vec![false; n];
    for &i in &unplaced {
        left[i] = true;
    }
    let mut on_cycle: Vec<usize> = graph.cyclic_components(&left).concat();
    on_cycle.sort_unstable();
    let after = order.iter().map(|&i| level[i] + 1).max().unwrap_or(0);
    let mut cyclic = vec![false; n];
    for &i in &on_cycle {
        cyclic[i] = true;
        level[i] = after;
    }
    order.extend_from_slice(&on_cycle);
    let acyclic: Vec<Vec<usize>> = deps
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if cyclic[i] {
                Vec::new()
            } else {
                d.iter().copied().filter(|&j| !cyclic[j]).collect()
            }
        })
        .collect();
    let downstream = DependencyGraph::from_dependencies(acyclic).topological_order();
    for i in downstream.order {
        if left[i] && !cyclic[i] {
            level[i] = level_after_deps(&level, i);
            order.push(i);
        }
    }
    (order, level, on_cycle)
}

fn totals(input: &RunReportInput, span: &[Option<Span>]) -> Totals {
    let mut t = Totals {
        by_state: TaskState::ALL.iter().map(|&s| (s, 0)).collect(),
        ..Totals::default()
    };
    for (task, s) in input.tasks.iter().zip(span) {
        if let Some(entry) = t.by_state.iter_mut().find(|(st, _)| *st == task.status) {
            entry.1 += 1;
        }
        t.prompt_tokens = t
            .prompt_tokens
            .saturating_add(task.prompt_tokens.unwrap_or(0));
        t.completion_tokens = t
            .completion_tokens
            .saturating_add(task.completion_tokens.unwrap_or(0));
        if s.is_some() && task.completion_tokens.is_none() {
            t.completion_unreported += 1;
        }
        for c in &task.dependency_cuts {
            t.cut_tokens = t
                .cut_tokens
                .saturating_add(c.original_tokens.saturating_sub(c.kept_tokens));
        }
        match task.cost_usd {
            Some(c) => t.cost_usd += c,
            None if task.started_at.is_some() && !task.cached => t.unpriced += 1,
            None => {}
        }
        if let Some(n) = task.cached_tokens {
            t.cached_tokens = Some(t.cached_tokens.unwrap_or(0).saturating_add(n));
        }
        if let (Some(n), Some(p)) = (task.cached_tokens, task.usage_prompt_tokens) {
            let (read, of) = t.cached_share.unwrap_or((0, 0));
            t.cached_share = Some((read.saturating_add(n), of.saturating_add(p)));
        }
        if let Some(n) = task.cache_write_tokens {
            t.cache_write_tokens = Some(t.cache_write_tokens.unwrap_or(0).saturating_add(n));
        }
        if let Some(v) = task.cache_saving_usd {
            t.cache_saving_usd = Some(t.cache_saving_usd.unwrap_or(0.0) + v);
        }
        t.cache_hits += usize::from(task.cached);
        t.attempts += task.attempts.len();
        for a in &task.attempts {
            match a.outcome {
                AttemptOutcome::Retry => t.retries += 1,
                AttemptOutcome::CheckFailure => t.check_failures += 1,
                AttemptOutcome::Success | AttemptOutcome::Error => {}
            }
        }
        if let Some(s) = s {
            t.started += 1;
            t.work_ms = t.work_ms.saturating_add(s.duration());
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{TaskReport, Timestamp};

    fn task(id: &str, deps: &[&str], span: Option<(i64, i64)>) -> TaskReport {
        let mut t = TaskReport::new(id, TaskState::Completed);
        t.dependencies = deps.iter().map(|d| d.to_string()).collect();
        if let Some((s, e)) = span {
            t.started_at = Some(Timestamp::from_unix_ms(s));
            t.ended_at = Some(Timestamp::from_unix_ms(e));
        } else {
            t.status = TaskState::Skipped;
        }
        t
    }

    fn run(tasks: Vec<TaskReport>) -> RunReportInput {
        RunReportInput {
            run_id: "r".into(),
            plan: "p".into(),
            status: RunStatus::Completed,
            started_at: Some(Timestamp::from_unix_ms(1_000)),
            ended_at: None,
            as_of: None,
            tasks,
            published: Vec::new(),
            fallback: None,
            decisions: Vec::new(),
        }
    }

    #[test]
    fn levels_and_both_paths() {
        // a(0-100) -> b(100-400) -> d(700-800); a -> c(100-600) -> d.
        // d waited for c (ended last), so the actual path is a, c, d; the
        // lower bound is the same chain: 100 + 500 + 100.
        let input = run(vec![
            task("a", &[], Some((1_000, 1_100))),
            task("b", &["a"], Some((1_100, 1_400))),
            task("c", &["a"], Some((1_100, 1_600))),
            task("d", &["b", "c"], Some((1_700, 1_800))),
        ]);
        let a = Analysis::of(&input);
        assert_eq!(a.level, [0, 1, 1, 2]);
        assert_eq!(a.levels, 3);
        assert_eq!(a.actual_path, [0, 2, 3]);
        assert_eq!(a.lower_bound_path, [0, 2, 3]);
        assert_eq!(a.lower_bound_ms, 700);
        assert_eq!(a.wall_ms(), 800);
        assert_eq!(a.totals.work_ms, 100 + 300 + 500 + 100);
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    }

    /// The wall time is the run's span: from the first task's start to the
    /// last task's end. The session started before its first task, and a
    /// retried task's calls laid end to end from its start may reach past
    /// its end; neither widens it.
    #[test]
    fn the_wall_time_is_from_the_first_start_to_the_last_end() {
        let mut b = task("b", &["a"], Some((1_500, 2_100)));
        b.attempts = vec![crate::input::AttemptReport {
            number: 2,
            started_at: Some(Timestamp::from_unix_ms(2_000)),
            ended_at: Some(Timestamp::from_unix_ms(3_100)),
            outcome: crate::input::AttemptOutcome::Success,
            class: None,
            error: None,
            batch_id: None,
            service_tier: None,
            tier_fallback: None,
        }];
        let mut input = run(vec![task("a", &[], Some((1_200, 1_500))), b]);
        input.started_at = Some(Timestamp::from_unix_ms(1_000));
        input.ended_at = Some(Timestamp::from_unix_ms(2_150));
        let a = Analysis::of(&input);
        assert_eq!(a.origin_ms, 1_200);
        assert_eq!(a.wall_ms(), 900);
        assert_eq!(a.span[0].unwrap().start, 0);
    }

    #[test]
    fn actual_path_differs_from_the_lower_bound_when_a_task_waited() {
        // b is long, but d started late because it waited for c, which
        // itself started late (a concurrency limit): the actual path is
        // c, d; the lower bound chain is b, d.
        let input = run(vec![
            task("b", &[], Some((1_000, 2_000))),
            task("c", &[], Some((2_000, 2_100))),
            task("d", &["b", "c"], Some((2_100, 2_200))),
        ]);
        let a = Analysis::of(&input);
        assert_eq!(a.actual_path, [1, 2]);
        assert_eq!(a.lower_bound_path, [0, 2]);
        assert_eq!(a.lower_bound_ms, 1_100);
    }

    #[test]
    fn bad_input_is_reported_not_fatal() {
        let mut backwards = task("e", &[], Some((1_500, 1_200)));
        backwards.cost_usd = Some(-1.0);
        let input = run(vec![
            task("a", &["b", "zz", "a"], Some((1_000, 1_100))),
            task("b", &["a"], Some((1_000, 1_100))),
            task("a", &[], None),
            task("c", &["a", "a"], None),
            backwards,
        ]);
        let a = Analysis::of(&input);
        let w = a.warnings.join("\n");
        for needle in [
            "repeats the id `a`",
            "depends on itself",
            "`zz`, which is not in the run",
            "dependency cycle through a, b",
            "ends (",
            "negative cost",
        ] {
            assert!(w.contains(needle), "missing {needle:?} in\n{w}");
        }
        assert_eq!(a.deps[3], [0]);
        assert_eq!(a.span[4].unwrap().duration(), 0);
        assert_eq!(a.level[0], a.level[1]);
        assert!(a.level[3] > a.level[0]);
    }

    #[test]
    fn a_cycle_goes_after_the_last_level_and_its_dependents_after_it() {
        // f and g form a chain of two levels; a and b depend on each other;
        // c depends on the cycle and d on c.
        let input = run(vec![
            task("c", &["a"], None),
            task("a", &["b"], None),
            task("d", &["c"], None),
            task("b", &["a", "f"], None),
            task("f", &[], None),
            task("g", &["f"], None),
        ]);
        let a = Analysis::of(&input);
        assert_eq!(a.level, [3, 2, 4, 2, 0, 1]);
        assert_eq!(a.levels, 5);
        assert_eq!(
            a.warnings,
            [
                "dependency cycle through a, b; drawn after the last level, with the tasks that depend on it"
            ]
        );
        let (order, _, on_cycle) = topological(&a.deps);
        assert_eq!(order, [4, 5, 1, 3, 0, 2]);
        assert_eq!(on_cycle, [1, 3]);
    }

    #[test]
    fn an_empty_run_has_an_empty_analysis() {
        let mut input = run(Vec::new());
        input.started_at = None;
        let a = Analysis::of(&input);
        assert_eq!((a.levels, a.wall_ms(), a.lower_bound_ms), (0, 0, 0));
        assert!(a.actual_path.is_empty() && a.lower_bound_path.is_empty());
    }

    #[test]
    fn a_running_task_spans_to_as_of() {
        let mut t = task("a", &[], Some((1_000, 0)));
        t.ended_at = None;
        t.status = TaskState::InProgress;
        let mut input = run(vec![t]);
        input.status = RunStatus::Running;
        input.as_of = Some(Timestamp::from_unix_ms(4_000));
        let a = Analysis::of(&input);
        assert_eq!(
            a.span[0],
            Some(Span {
                start: 0,
                end: 3_000,
                open: true
            })
        );
        assert_eq!(a.wall_ms(), 3_000);
    }
}
