//! Which task starts next: the ready set, ordered by critical-path
//! priority, with the level barrier of [`Schedule::Levels`].
//!
//! A task is *ready* once every one of its dependencies has completed.
//! Ready tasks wait in a max-heap keyed by their priority — the graph's
//! remaining path ([`PlanGraph::remaining_path`]), or the priorities that
//! count `llm` summary calls when the plan makes any — with ties broken by
//! plan order, so the longest chain is started first and the order is
//! deterministic. How many may be in flight at once is the caller's
//! ([`concurrency_limit`](crate::concurrency_limit)); this module only
//! says which one is next. It knows nothing of results, stores or
//! engines: the executor tells it what completed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::graph::PlanGraph;
use crate::options::Schedule;

/// The ready set and each waiting task's count of dependencies not yet
/// completed.
pub(crate) struct ReadyQueue {
    /// Per task: dependencies not yet completed.
    missing: Vec<usize>,
    /// Ready tasks by level (one heap in ready-queue mode), ordered by
    /// priority, then plan order.
    ready: Vec<BinaryHeap<(u64, Reverse<usize>)>>,
    /// Each task's level, under [`Schedule::Levels`].
    levels: Option<Vec<usize>>,
    current_level: usize,
    /// Priorities that count summary calls, when the plan makes any.
    priorities: Option<Vec<u64>>,
}

impl ReadyQueue {
    /// An empty queue for `g`'s tasks.
    pub(crate) fn new(schedule: Schedule, g: &PlanGraph, priorities: Option<Vec<u64>>) -> Self {
        let n = g.len();
        let (ready, levels) = match schedule {
            Schedule::ReadyQueue => (vec![BinaryHeap::new()], None),
            Schedule::Levels => (
                vec![BinaryHeap::new(); g.levels().len().max(1)],
                Some((0..n).map(|i| g.level(i)).collect()),
            ),
        };
        ReadyQueue {
            missing: vec![0; n],
            ready,
            levels,
            current_level: 0,
            priorities,
        }
    }

    /// Counts each waiting task's dependencies not yet `completed`, and
    /// queues the tasks with none. `waiting(i)`: task `i` still has to be
    /// dispatched and is not queued already.
    pub(crate) fn release_initial(
        &mut self,
        g: &PlanGraph,
        waiting: impl Fn(usize) -> bool,
        completed: impl Fn(usize) -> bool,
    ) {
        for i in (0..g.len()).filter(|&i| waiting(i)) {
            self.missing[i] = g.dependencies(i).filter(|&d| !completed(d)).count();
            if self.missing[i] == 0 {
                self.push(i, g);
            }
        }
    }

    /// Task `i` completed: each dependent that has no result yet
    /// (`settled(d)` is false) waits for one dependency less, and is queued
    /// when none is left.
    pub(crate) fn release_dependents(
        &mut self,
        i: usize,
        g: &PlanGraph,
        settled: impl Fn(usize) -> bool,
    ) {
        for d in g.dependents(i) {
            if settled(d) {
                continue;
            }
            self.missing[d] = self.missing[d].saturating_sub(1);
            if self.missing[d] == 0 {
                self.push(d, g);
            }
        }
    }

    /// Makes room for tasks appended to the graph (a map's items), each
    /// at `level` under [`Schedule::Levels`], none of them queued yet.
    pub(crate) fn grow(&mut self, n: usize, level: usize) {
        self.missing.resize(n, 0);
        if let Some(levels) = &mut self.levels {
            levels.resize(n, level);
        }
    }

    /// Task `i` now waits for `count` dependencies (a map task for its
    /// items).
    pub(crate) fn wait_for(&mut self, i: usize, count: usize) {
        if let Some(m) = self.missing.get_mut(i) {
            *m = count;
        }
    }

    /// Task `i`'s level slot (0 in ready-queue mode).
    pub(crate) fn level_of(&self, i: usize) -> usize {
        self.levels.as_ref().map_or(0, |l| l[i])
    }

    /// Queues task `i` at its priority.
    pub(crate) fn push(&mut self, i: usize, g: &PlanGraph) {
        let slot = self.levels.as_ref().map_or(0, |l| l[i]);
        if let Some(heap) = self.ready.get_mut(slot) {
            let priority = self
                .priorities
                .as_ref()
                .and_then(|p| p.get(i).copied())
                .unwrap_or_else(|| g.remaining_path(i));
            heap.push((priority, Reverse(i)));
        }
    }

    /// The next task to dispatch, if any may start now; `running` tasks
    /// are in flight (a level's barrier holds while any is).
    pub(crate) fn pop(&mut self, running: usize) -> Option<usize> {
        if self.levels.is_none() {
            return self.ready.first_mut()?.pop().map(|(_, Reverse(i))| i);
        }
        loop {
            let heap = self.ready.get_mut(self.current_level)?;
            if let Some((_, Reverse(i))) = heap.pop() {
                return Some(i);
            }
            if running > 0 {
                // The level's barrier: wait for all of it to finish.
                return None;
            }
            self.current_level += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a → b → c`, and `x` alone: `a` heads the longest chain.
    fn graph() -> PlanGraph {
        let plan = ctx_test_support::plan(&[("x", &[]), ("a", &[]), ("b", &["a"]), ("c", &["b"])]);
        PlanGraph::new(&plan).unwrap()
    }

    fn drain(q: &mut ReadyQueue) -> Vec<usize> {
        std::iter::from_fn(|| q.pop(0)).collect()
    }

    #[test]
    fn the_longest_remaining_path_goes_first_then_plan_order() {
        let g = graph();
        let mut q = ReadyQueue::new(Schedule::ReadyQueue, &g, None);
        q.release_initial(&g, |_| true, |_| false);
        // `a` (path 3) before `x` (path 1); `b` and `c` wait.
        assert_eq!(drain(&mut q), [1, 0]);
        q.release_dependents(1, &g, |_| false);
        assert_eq!(drain(&mut q), [2]);
        // A dependent already settled (skipped, say) is not queued.
        q.release_dependents(2, &g, |d| d == 3);
        assert_eq!(drain(&mut q), Vec::<usize>::new());
    }

    #[test]
    fn ties_break_by_plan_order_and_given_priorities_win() {
        let plan = ctx_test_support::plan(&[("p", &[]), ("q", &[]), ("r", &[])]);
        let g = PlanGraph::new(&plan).unwrap();
        let mut q = ReadyQueue::new(Schedule::ReadyQueue, &g, None);
        q.release_initial(&g, |_| true, |_| false);
        assert_eq!(drain(&mut q), [0, 1, 2]);
        let mut q = ReadyQueue::new(Schedule::ReadyQueue, &g, Some(vec![1, 5, 3]));
        q.release_initial(&g, |_| true, |_| false);
        assert_eq!(drain(&mut q), [1, 2, 0]);
    }

    #[test]
    fn completed_dependencies_count_and_waiting_decides_who_is_considered() {
        let g = graph();
        let mut q = ReadyQueue::new(Schedule::ReadyQueue, &g, None);
        // `a` completed already (resumed), `x` is settled: `b` is ready.
        q.release_initial(&g, |i| i == 2 || i == 3, |d| d == 1);
        assert_eq!(drain(&mut q), [2]);
        q.release_dependents(2, &g, |_| false);
        assert_eq!(drain(&mut q), [3]);
    }

    #[test]
    fn levels_hold_the_next_level_until_nothing_runs() {
        let plan = ctx_test_support::plan(&[("a", &[]), ("b", &[]), ("c", &["a"])]);
        let g = PlanGraph::new(&plan).unwrap();
        let mut q = ReadyQueue::new(Schedule::Levels, &g, None);
        q.release_initial(&g, |_| true, |_| false);
        assert_eq!(q.pop(0), Some(0));
        assert_eq!(q.pop(1), Some(1));
        q.release_dependents(0, &g, |_| false);
        // `c` is ready, but `b` (level 0) still runs.
        assert_eq!(q.pop(1), None);
        assert_eq!(q.pop(0), Some(2));
        assert_eq!(q.pop(0), None);
    }
}
