//! Dependency cycles: every elementary cycle once (Johnson's algorithm
//! over [`DependencyGraph`]'s strongly connected components), as a path,
//! stopping at [`MAX_REPORTED_CYCLES`].

use super::{Problem, ProblemCode, quoted};
use crate::graph::DependencyGraph;
use crate::plan::Plan;

/// A problem per cycle, in file order of their first tasks, and one more
/// when the list stops at [`MAX_REPORTED_CYCLES`].
pub(super) fn check_cycles(plan: &Plan, out: &mut Vec<Problem>) {
    let (cycles, more) = find_cycles_limited(plan, MAX_REPORTED_CYCLES);
    for cycle in &cycles {
        let first = cycle.first().copied().unwrap_or(0);
        let path = cycle
            .iter()
            .chain(cycle.first())
            .map(|&i| quoted(&plan.sub_tasks[i].id))
            .collect::<Vec<_>>()
            .join(" -> ");
        out.push(Problem {
            code: ProblemCode::Cycle,
            task_id: Some(plan.sub_tasks[first].id.clone()),
            field: format!("sub_tasks[{first}].dependencies"),
            message: format!("dependency cycle: {path}"),
        });
    }
    if more {
        out.push(Problem {
            code: ProblemCode::Cycle,
            task_id: None,
            field: "sub_tasks".into(),
            message: format!(
                "more dependency cycles exist; the list stops at {MAX_REPORTED_CYCLES}"
            ),
        });
    }
}

/// The most cycles one check lists. A dense tangle of tasks can hold
/// exponentially many; past this many, one more problem says the list
/// stops here.
pub const MAX_REPORTED_CYCLES: usize = 100;

/// Every elementary cycle of the dependency graph (Johnson's algorithm),
/// as task indices in "depends on" order, each starting at its smallest
/// index, sorted; at most `limit` of them, and whether more exist.
/// Self-loops, unknown ids and later duplicates of an id take no part.
/// Iterative throughout, so a long chain cannot overflow the stack.
pub(crate) fn find_cycles_limited(plan: &Plan, limit: usize) -> (Vec<Vec<usize>>, bool) {
    let graph = DependencyGraph::new(plan);
    let n = graph.len();
    let mut walk = Johnson::new(&graph, limit);
    // Components still to search, each a sorted list of task indices.
    let canonical: Vec<bool> = (0..n).map(|i| graph.is_canonical(i)).collect();
    let mut pending: Vec<Vec<usize>> = graph.cyclic_components(&canonical);
    // Process the component with the smallest start first, so the cycles
    // found under a limit do not depend on hash order.
    pending.sort_by(|a, b| b.first().cmp(&a.first()));
    while let Some(scc) = pending.pop() {
        if walk.circuits(&scc) == Search::Stopped {
            break;
        }
        // The rest of the component, without its start, may hold more.
        let mut rest = vec![false; n];
        for &v in scc.iter().skip(1) {
            rest[v] = true;
        }
        pending.extend(graph.cyclic_components(&rest));
        pending.sort_by(|a, b| b.first().cmp(&a.first()));
    }
    let Johnson {
        mut cycles, more, ..
    } = walk;
    cycles.sort();
    (cycles, more)
}

/// Whether a component's search ran to its end or stopped at the limit.
#[derive(Debug, PartialEq, Eq)]
enum Search {
    Done,
    Stopped,
}

/// The state of Johnson's walk, kept across components so its vectors are
/// allocated once.
struct Johnson {
    /// "Depends on" edges; self-dependencies are reported on their own
    /// and take no part.
    adj: Vec<Vec<usize>>,
    in_scc: Vec<bool>,
    blocked: Vec<bool>,
    closed: Vec<bool>,
    b_sets: Vec<Vec<usize>>,
    cycles: Vec<Vec<usize>>,
    limit: usize,
    /// A cycle beyond `limit` was found.
    more: bool,
}

impl Johnson {
    fn new(graph: &DependencyGraph, limit: usize) -> Johnson {
        let n = graph.len();
        Johnson {
            adj: (0..n)
                .map(|i| graph.dependencies(i).filter(|&j| j != i).collect())
                .collect(),
            in_scc: vec![false; n],
            blocked: vec![false; n],
            closed: vec![false; n],
            b_sets: vec![Vec::new(); n],
            cycles: Vec::new(),
            limit,
            more: false,
        }
    }

    /// Every elementary cycle through the smallest task of `scc` (a
    /// strongly connected component, sorted), by an explicit stack.
    fn circuits(&mut self, scc: &[usize]) -> Search {
        let Some(&start) = scc.first() else {
            return Search::Done;
        };
        for &v in scc {
            self.in_scc[v] = true;
            self.blocked[v] = false;
            self.closed[v] = false;
            self.b_sets[v].clear();
        }
        let mut path = vec![start];
        self.blocked[start] = true;
        // (node, next neighbour to try)
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some(top) = stack.last_mut() {
            let (node, edge) = *top;
            let next = self.adj[node][edge..]
                .iter()
                .position(|&w| self.in_scc[w])
                .map(|p| edge + p);
            let Some(k) = next else {
                self.leave(node);
                stack.pop();
                path.pop();
                continue;
            };
            top.1 = k + 1;
            let w = self.adj[node][k];
            if w == start {
                if self.cycles.len() == self.limit {
                    self.more = true;
                    return Search::Stopped;
                }
                self.cycles.push(path.clone());
                for &v in &path {
                    self.closed[v] = true;
                }
            } else if !self.blocked[w] {
                path.push(w);
                stack.push((w, 0));
                self.closed[w] = false;
                self.blocked[w] = true;
            }
        }
        for &v in scc {
            self.in_scc[v] = false;
        }
        Search::Done
    }

    /// Every neighbour of `node` tried: unblock it if a cycle went through
    /// it, else have each neighbour unblock it when that one is freed.
    fn leave(&mut self, node: usize) {
        if self.closed[node] {
            unblock(node, &mut self.blocked, &mut self.b_sets);
        } else {
            for &w in &self.adj[node] {
                if self.in_scc[w] && !self.b_sets[w].contains(&node) {
                    self.b_sets[w].push(node);
                }
            }
        }
    }
}

/// Johnson's unblock: frees `node` and, transitively, whatever waited on it.
fn unblock(node: usize, blocked: &mut [bool], b_sets: &mut [Vec<usize>]) {
    let mut stack = vec![node];
    while let Some(v) = stack.pop() {
        if blocked[v] {
            blocked[v] = false;
            stack.append(&mut b_sets[v]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{codes, only, plan, task};
    use super::super::validate;
    use super::*;
    use crate::plan::SubTask;

    #[test]
    fn a_cycle_is_printed_as_a_path() {
        let p = plan(vec![
            task("a", &["c"]),
            task("b", &["a"]),
            task("c", &["b"]),
        ]);
        let problem = only(&p);
        assert_eq!(problem.code, ProblemCode::Cycle);
        assert_eq!(problem.task_id.as_deref(), Some("a"));
        assert_eq!(problem.field, "sub_tasks[0].dependencies");
        assert_eq!(
            problem.message,
            r#"dependency cycle: "a" -> "c" -> "b" -> "a""#
        );
    }

    #[test]
    fn every_cycle_once_in_a_stable_order() {
        // Two separate cycles, and a two-node cycle sharing a node with a
        // three-node one.
        let p = plan(vec![
            task("x", &["y"]),
            task("y", &["x"]),
            task("a", &["b"]),
            task("b", &["c", "a"]),
            task("c", &["a"]),
            task("ok", &["a"]),
        ]);
        let messages: Vec<String> = validate(&p).into_iter().map(|p| p.message).collect();
        assert_eq!(
            messages,
            [
                r#"dependency cycle: "x" -> "y" -> "x""#,
                r#"dependency cycle: "a" -> "b" -> "a""#,
                r#"dependency cycle: "a" -> "b" -> "c" -> "a""#,
            ]
        );
        // The same plan with tasks listed in another order reports the same
        // cycles (as sets of edges), so reports do not depend on luck.
        let mut shuffled = p.clone();
        shuffled.sub_tasks.reverse();
        assert_eq!(validate(&shuffled).len(), 3);
    }

    #[test]
    fn cycles_sharing_edges_are_all_listed() {
        // a -> b -> c -> a and a -> c -> a share the edge c -> a; a search
        // that reports one cycle per back edge would miss the second.
        let p = plan(vec![
            task("a", &["b", "c"]),
            task("b", &["c"]),
            task("c", &["a"]),
        ]);
        let messages: Vec<String> = validate(&p).into_iter().map(|p| p.message).collect();
        assert_eq!(
            messages,
            [
                r#"dependency cycle: "a" -> "b" -> "c" -> "a""#,
                r#"dependency cycle: "a" -> "c" -> "a""#,
            ]
        );
    }

    #[test]
    fn a_dense_tangle_stops_at_the_limit() {
        // Six tasks each depending on all others: 409 elementary cycles.
        let ids = ["a", "b", "c", "d", "e", "f"];
        let tasks = ids
            .iter()
            .map(|id| {
                let deps: Vec<&str> = ids.iter().copied().filter(|d| d != id).collect();
                task(id, &deps)
            })
            .collect();
        let problems = validate(&plan(tasks));
        assert_eq!(problems.len(), MAX_REPORTED_CYCLES + 1);
        assert!(problems.iter().all(|p| p.code == ProblemCode::Cycle));
        let last = problems.last().unwrap();
        assert_eq!(last.task_id, None);
        assert_eq!(
            last.message,
            format!("more dependency cycles exist; the list stops at {MAX_REPORTED_CYCLES}")
        );
        let (all, more) = find_cycles_limited(
            &plan(
                ids.iter()
                    .map(|id| {
                        let deps: Vec<&str> = ids.iter().copied().filter(|d| d != id).collect();
                        task(id, &deps)
                    })
                    .collect(),
            ),
            usize::MAX,
        );
        assert_eq!(all.len(), 409);
        assert!(!more);
    }

    #[test]
    fn many_cycles_in_a_big_plan_stop_at_the_limit() {
        // 40,000 two-task cycles, and one ladder of 20,000 tasks where each
        // depends on both neighbours: the search stops after the limit
        // instead of walking every component.
        let mut tasks: Vec<SubTask> = (0..40_000)
            .map(|i| {
                let other = if i % 2 == 0 { i + 1 } else { i - 1 };
                task(&format!("p{i}"), &[&format!("p{other}")])
            })
            .collect();
        tasks.extend((0..20_000).map(|i: usize| {
            let mut deps = Vec::new();
            if i > 0 {
                deps.push(format!("l{}", i - 1));
            }
            if i < 19_999 {
                deps.push(format!("l{}", i + 1));
            }
            let mut t = task(&format!("l{i}"), &[]);
            t.dependencies = deps;
            t
        }));
        let problems = validate(&plan(tasks));
        assert_eq!(problems.len(), MAX_REPORTED_CYCLES + 1);
        assert_eq!(
            problems[0].message,
            r#"dependency cycle: "p0" -> "p1" -> "p0""#
        );
    }

    #[test]
    fn cycles_ignore_unknown_ids_and_self_loops() {
        let p = plan(vec![task("a", &["a", "ghost"]), task("b", &["a"])]);
        assert_eq!(
            codes(&p),
            [ProblemCode::SelfDependency, ProblemCode::UnknownDependency]
        );
    }

    #[test]
    fn a_long_chain_does_not_overflow() {
        let n = 100_000;
        let mut tasks: Vec<SubTask> = (0..n)
            .map(|i| {
                let deps: Vec<String> = if i == 0 {
                    vec![]
                } else {
                    vec![(i - 1).to_string()]
                };
                let mut t = task(&i.to_string(), &[]);
                t.dependencies = deps;
                t
            })
            .collect();
        assert_eq!(validate(&plan(tasks.clone())), []);
        tasks[0].dependencies.push((n - 1).to_string());
        let problems = validate(&plan(tasks));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].code, ProblemCode::Cycle);
    }
}
