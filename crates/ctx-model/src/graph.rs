//! The plan's dependency graph: the one DAG implementation of ctx.
//!
//! Four places need the same graph: validation (which reports cycles),
//! the scheduler in `ctx-deps` (which orders tasks and computes levels and
//! the critical path on top of it), resume planning in `ctx-store` (which
//! walks tasks in dependency order) and the run report in `ctx-report`
//! (which levels stored tasks, cycles included, through
//! [`DependencyGraph::from_dependencies`]). Each once had its own copy of
//! the index, the edge lists and Kahn's algorithm; they now share this one.
//!
//! It lives in the plan model because every crate above depends on the
//! model, and the model must stay light: the store and engine adapters
//! depend on it (through the seam crates), and they must not pull in a graph
//! library. What ctx needs is small and specific: Kahn's algorithm with a
//! deterministic tie-break (plan order, which no general-purpose
//! topological sort offers) and Tarjan's strongly connected components for
//! cycle reports, both iterative so that a 100,000-task chain cannot
//! overflow the stack.
//!
//! The graph is tolerant: it is built from any plan, valid or not. The
//! first task of each id is its canonical one; later duplicates get no
//! edges. A dependency on an unknown id is left out (validation reports
//! it); a dependency listed twice is one edge; a self-dependency is kept
//! as an edge, so a task depending on itself is never placed in the
//! topological order.
//!
//! ```
//! use ctx_model::graph::DependencyGraph;
//! let plan: ctx_model::Plan = serde_json::from_str(r#"{"schema_version": 1, "sub_tasks": [
//!   {"id": "css", "description": "Style", "dependencies": ["html"],
//!    "tool_or_prompt": {"name": "inference", "params": {"prompt": "Style it."}}},
//!   {"id": "html", "description": "Page",
//!    "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write it."}}}
//! ]}"#).unwrap();
//! let graph = DependencyGraph::new(&plan);
//! let order = graph.topological_order();
//! assert_eq!(order.order, [1, 0]); // html, then css
//! assert!(order.unplaced.is_empty());
//! assert_eq!(graph.transitive_dependents(1), [0]);
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::Plan;

/// Tasks as indices into `plan.sub_tasks`, with their dependency edges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyGraph {
    deps: Vec<Vec<usize>>,
    dependents: Vec<Vec<usize>>,
    canonical: Vec<bool>,
}

/// A topological order, as far as one exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologicalOrder {
    /// Every task that could be placed, each after all of its
    /// dependencies; among tasks ready at the same time, the earliest in
    /// the plan first. Equal to the plan's order when that is topological.
    pub order: Vec<usize>,
    /// The tasks that could not be placed: on a cycle, or downstream of
    /// one. Ascending.
    pub unplaced: Vec<usize>,
}

impl DependencyGraph {
    /// The graph of `plan` (see the module documentation for how unknown,
    /// duplicate and self dependencies are treated).
    pub fn new(plan: &Plan) -> DependencyGraph {
        let n = plan.sub_tasks.len();
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
        for (i, t) in plan.sub_tasks.iter().enumerate() {
            index.entry(t.id.as_str()).or_insert(i);
        }
        let canonical: Vec<bool> = plan
            .sub_tasks
            .iter()
            .enumerate()
            .map(|(i, t)| index.get(t.id.as_str()) == Some(&i))
            .collect();
        let deps = plan
            .sub_tasks
            .iter()
            .zip(&canonical)
            .map(|(t, &first)| {
                if first {
                    let known = t.dependencies.iter();
                    known
                        .filter_map(|d| index.get(d.as_str()).copied())
                        .collect()
                } else {
                    Vec::new()
                }
            })
            .collect();
        DependencyGraph::with_edges(deps, canonical)
    }

    /// The graph of tasks `0..deps.len()` where task `i` depends on the
    /// tasks in `deps[i]`, for callers whose tasks are not a [`Plan`] (the
    /// run report draws stored runs, which may be hand-written). Every
    /// task is canonical; an index out of range is left out, a repeated
    /// one is one edge, a self-dependency is kept.
    pub fn from_dependencies(deps: Vec<Vec<usize>>) -> DependencyGraph {
        let canonical = vec![true; deps.len()];
        DependencyGraph::with_edges(deps, canonical)
    }

    fn with_edges(mut deps: Vec<Vec<usize>>, canonical: Vec<bool>) -> DependencyGraph {
        let n = deps.len();
        let mut dependents = vec![Vec::new(); n];
        for (i, list) in deps.iter_mut().enumerate() {
            let mut seen = HashSet::new();
            list.retain(|&j| j < n && seen.insert(j));
            for &j in list.iter() {
                dependents[j].push(i);
            }
        }
        for list in &mut dependents {
            list.sort_unstable();
        }
        DependencyGraph {
            deps,
            dependents,
            canonical,
        }
    }

    /// The number of tasks (duplicates included).
    pub fn len(&self) -> usize {
        self.deps.len()
    }

    /// Whether the plan has no tasks.
    pub fn is_empty(&self) -> bool {
        self.deps.is_empty()
    }

    /// Whether task `i` is the first of its id.
    pub fn is_canonical(&self, i: usize) -> bool {
        self.canonical.get(i).copied().unwrap_or(false)
    }

    /// The tasks `i` depends on, deduplicated, in listed order.
    pub fn dependencies(&self, i: usize) -> &[usize] {
        self.deps.get(i).map_or(&[], Vec::as_slice)
    }

    /// The tasks that depend on `i`, ascending.
    pub fn dependents(&self, i: usize) -> &[usize] {
        self.dependents.get(i).map_or(&[], Vec::as_slice)
    }

    /// Whether task `i` depends on itself.
    pub fn depends_on_itself(&self, i: usize) -> bool {
        self.dependencies(i).contains(&i)
    }

    /// Kahn's algorithm with a min-heap on plan index.
    pub fn topological_order(&self) -> TopologicalOrder {
        let n = self.len();
        let mut indegree: Vec<usize> = self.deps.iter().map(Vec::len).collect();
        let mut ready: BinaryHeap<Reverse<usize>> =
            (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
        let mut order = Vec::with_capacity(n);
        let mut placed = vec![false; n];
        while let Some(Reverse(i)) = ready.pop() {
            order.push(i);
            placed[i] = true;
            for &d in &self.dependents[i] {
                indegree[d] -= 1;
                if indegree[d] == 0 {
                    ready.push(Reverse(d));
                }
            }
        }
        let unplaced = (0..n).filter(|&i| !placed[i]).collect();
        TopologicalOrder { order, unplaced }
    }

    /// Every task downstream of `i` (depending on it directly or through
    /// others), ascending, without `i` itself unless it is on a cycle.
    pub fn transitive_dependents(&self, i: usize) -> Vec<usize> {
        let n = self.len();
        let mut seen = vec![false; n];
        let mut stack: Vec<usize> = self.dependents(i).to_vec();
        while let Some(v) = stack.pop() {
            if v < n && !seen[v] {
                seen[v] = true;
                stack.extend_from_slice(self.dependents(v));
            }
        }
        (0..n).filter(|&v| seen[v]).collect()
    }

    /// Strongly connected components of two or more tasks, of the subgraph
    /// on the tasks marked in `keep` (Tarjan's algorithm, iterative; a
    /// self-dependency alone makes no component: see
    /// [`depends_on_itself`](Self::depends_on_itself)). Each component is
    /// sorted; the list is in no particular order.
    pub fn cyclic_components(&self, keep: &[bool]) -> Vec<Vec<usize>> {
        let n = self.len();
        const NONE: usize = usize::MAX;
        let kept = |v: usize| keep.get(v).copied().unwrap_or(false);
        let mut index = vec![NONE; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut next_index = 0usize;
        let mut out = Vec::new();
        for root in 0..n {
            if !kept(root) || index[root] != NONE {
                continue;
            }
            let mut call: Vec<(usize, usize)> = vec![(root, 0)];
            index[root] = next_index;
            low[root] = next_index;
            next_index += 1;
            stack.push(root);
            on_stack[root] = true;
            while let Some(top) = call.last_mut() {
                let (v, edge) = *top;
                if let Some(&w) = self.deps[v].get(edge) {
                    top.1 += 1;
                    if !kept(w) || w == v {
                        continue;
                    }
                    if index[w] == NONE {
                        index[w] = next_index;
                        low[w] = next_index;
                        next_index += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        call.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort_unstable();
                        out.push(component);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn plan(tasks: &[(&str, &[&str])]) -> Plan {
        let sub_tasks: Vec<serde_json::Value> = tasks
            .iter()
            .map(|(id, deps)| {
                serde_json::json!({"id": id, "description": "d", "dependencies": deps,
                    "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}})
            })
            .collect();
        serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": sub_tasks}))
            .expect("plan")
    }

    #[test]
    fn ties_follow_plan_order_and_unknown_ids_are_ignored() {
        let g = DependencyGraph::new(&plan(&[
            ("c", &["a"]),
            ("b", &[]),
            ("a", &["zzz"]),
            ("d", &["b", "b"]),
        ]));
        let t = g.topological_order();
        assert_eq!(t.order, [1, 2, 0, 3]);
        assert!(t.unplaced.is_empty());
        assert_eq!(g.dependencies(3), [1]);
    }

    #[test]
    fn cycles_self_loops_and_their_downstream_are_unplaced() {
        let g = DependencyGraph::new(&plan(&[
            ("a", &["b"]),
            ("b", &["a"]),
            ("c", &["a"]),
            ("s", &["s"]),
            ("free", &[]),
        ]));
        let t = g.topological_order();
        assert_eq!(t.order, [4]);
        assert_eq!(t.unplaced, [0, 1, 2, 3]);
        assert_eq!(g.cyclic_components(&[true; 5]), vec![vec![0, 1]]);
        assert!(g.depends_on_itself(3));
        assert_eq!(g.transitive_dependents(0), [0, 1, 2]);
    }

    #[test]
    fn later_duplicates_get_no_edges() {
        let g = DependencyGraph::new(&plan(&[("a", &[]), ("a", &["a"]), ("b", &["a"])]));
        assert!(!g.is_canonical(1));
        assert!(g.dependencies(1).is_empty());
        assert_eq!(g.dependents(0), [2]);
    }

    #[test]
    fn index_lists_make_the_same_graph_as_the_plan() {
        let g = DependencyGraph::from_dependencies(vec![vec![2], vec![], vec![9, 1, 1], vec![3]]);
        assert_eq!(g.dependencies(2), [1]);
        assert_eq!(g.dependents(1), [2]);
        assert!(g.depends_on_itself(3));
        let from_plan = DependencyGraph::new(&plan(&[
            ("c", &["a"]),
            ("b", &[]),
            ("a", &["zzz", "b", "b"]),
            ("s", &["s"]),
        ]));
        assert_eq!(g, from_plan);
    }

    proptest! {
        /// The order is topological, complete exactly when the graph is
        /// acyclic, and a task is unplaced exactly when it can reach a
        /// cycle by following its dependencies (brute-force oracle).
        #[test]
        fn order_matches_a_reachability_oracle(
            edges in proptest::collection::vec((0usize..8, 0usize..8), 0..20)
        ) {
            let n = 8;
            let ids: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
            let mut deps: Vec<Vec<&str>> = vec![Vec::new(); n];
            for &(a, b) in &edges {
                deps[a].push(ids[b].as_str());
            }
            let spec: Vec<(&str, &[&str])> =
                (0..n).map(|i| (ids[i].as_str(), deps[i].as_slice())).collect();
            let g = DependencyGraph::new(&plan(&spec));
            let t = g.topological_order();
            let mut pos = vec![usize::MAX; n];
            for (k, &i) in t.order.iter().enumerate() {
                pos[i] = k;
            }
            for &i in &t.order {
                for &d in g.dependencies(i) {
                    prop_assert!(pos[d] < pos[i]);
                }
            }
            // reach[i][j]: j is reachable from i along dependency edges.
            let mut reach = vec![vec![false; n]; n];
            for (i, row) in reach.iter_mut().enumerate() {
                let mut stack = g.dependencies(i).to_vec();
                while let Some(v) = stack.pop() {
                    if !row[v] {
                        row[v] = true;
                        stack.extend_from_slice(g.dependencies(v));
                    }
                }
            }
            let on_cycle = |v: usize| reach[v][v];
            for (i, row) in reach.iter().enumerate() {
                let blocked = on_cycle(i) || (0..n).any(|j| row[j] && on_cycle(j));
                prop_assert_eq!(t.unplaced.contains(&i), blocked);
            }
        }
    }
}
