//! The plan's dependency graph: the one DAG of ctx, held by petgraph.
//!
//! Four places need the same graph: validation (which reports cycles),
//! the scheduler in `ctx-deps` (which orders tasks and computes levels and
//! the critical path on top of it), resume planning in `ctx-store` (which
//! walks tasks in dependency order) and the run report in `ctx-report`
//! (which levels stored tasks, cycles included, through
//! [`DependencyGraph::from_dependencies`]). They share this one.
//!
//! The graph is a `petgraph` [`DiGraph`], the library the design card
//! names: its storage and neighbour lists, its strongly connected
//! components for cycle reports and its depth-first walk for reachability
//! are petgraph's. What is ours is the one thing petgraph does not offer:
//! the topological order's tie-break. Among tasks that are ready at the
//! same time ctx places the earliest in the plan first, so that the order
//! is the plan's own whenever that is topological and two runs of a plan
//! agree byte for byte; petgraph's `toposort` is a depth-first order with
//! no such rule, and on a cycle it names one node only. So the order is a
//! Kahn loop over petgraph's neighbours with a min-heap on plan index; the
//! same loop spares the component search every task it places, which is
//! on no cycle.
//!
//! Nothing here recurses, so a 100,000-task chain cannot overflow the
//! stack: the components are petgraph's `kosaraju_scc`, two passes of its
//! iterative depth-first walks. Its `tarjan_scc` would do one pass, but in
//! petgraph 0.8 it recurses once per task along a path (a test below
//! keeps a 100,000-task chain and cycle).
//!
//! Edges point from a dependency to its dependent (`d -> i` when `i`
//! depends on `d`), the direction work flows in. petgraph lists a node's
//! neighbours in reverse order of the edges' addition, so the edges are
//! added last task first and, for each task, last dependency first: a
//! task's dependencies then come out in the order the plan lists them
//! (the prompt layout hands dependency outputs over in that order) and its
//! dependents ascending, with no sorting and no list per task.
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
//! assert_eq!(graph.dependencies(0).collect::<Vec<_>>(), [1]);
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use petgraph::Direction::{Incoming, Outgoing};
use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Dfs, NodeFiltered};

use crate::Plan;

/// petgraph's graph with `usize` indices: a plan index is its node index
/// as it is, and no plan is too large for it (with `u32`, the default,
/// adding a node past `u32::MAX` panics).
type Graph = DiGraph<(), (), usize>;

/// Tasks as indices into `plan.sub_tasks`, with their dependency edges.
#[derive(Debug, Clone)]
pub struct DependencyGraph {
    /// Node `i` is task `i`; an edge `d -> i` says `i` depends on `d`.
    graph: Graph,
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
        let edges = plan.sub_tasks.iter().map(|t| t.dependencies.len()).sum();
        DependencyGraph::build(canonical, edges, |i| {
            plan.sub_tasks[i]
                .dependencies
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
        })
    }

    /// The graph of tasks `0..deps.len()` where task `i` depends on the
    /// tasks in `deps[i]`, for callers whose tasks are not a [`Plan`] (the
    /// run report draws stored runs, which may be hand-written). Every
    /// task is canonical; an index out of range is left out, a repeated
    /// one is one edge, a self-dependency is kept.
    pub fn from_dependencies(deps: Vec<Vec<usize>>) -> DependencyGraph {
        let canonical = vec![true; deps.len()];
        let edges = deps.iter().map(Vec::len).sum();
        DependencyGraph::build(canonical, edges, |i| deps[i].iter().copied())
    }

    /// Adds the edges of each canonical task `i`, `deps_of(i)` in listed
    /// order, out-of-range and repeated indices left out. Tasks are taken
    /// last first and each one's dependencies in reverse, so that
    /// petgraph's neighbour lists (newest edge first) come out in listed
    /// order and ascending (module documentation). One scratch list and
    /// one mark per task serve every task: no allocation per task.
    fn build<I>(canonical: Vec<bool>, edges: usize, deps_of: impl Fn(usize) -> I) -> DependencyGraph
    where
        I: Iterator<Item = usize>,
    {
        let n = canonical.len();
        let mut graph = Graph::with_capacity(n, edges);
        for _ in 0..n {
            graph.add_node(());
        }
        // `mark[j] == i + 1`: `j` is already among task `i`'s dependencies.
        let mut mark = vec![0usize; n];
        let mut listed: Vec<usize> = Vec::new();
        for i in (0..n).rev().filter(|&i| canonical[i]) {
            listed.clear();
            for j in deps_of(i) {
                if j < n && mark[j] != i + 1 {
                    mark[j] = i + 1;
                    listed.push(j);
                }
            }
            for &j in listed.iter().rev() {
                graph.add_edge(NodeIndex::new(j), NodeIndex::new(i), ());
            }
        }
        DependencyGraph { graph, canonical }
    }

    /// Task `i`'s node, if there is such a task.
    fn node(&self, i: usize) -> Option<NodeIndex<usize>> {
        (i < self.len()).then(|| NodeIndex::new(i))
    }

    /// The number of tasks (duplicates included).
    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    /// Whether the plan has no tasks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether task `i` is the first of its id.
    pub fn is_canonical(&self, i: usize) -> bool {
        self.canonical.get(i).copied().unwrap_or(false)
    }

    /// The tasks `i` depends on, deduplicated, in listed order (none for
    /// an index out of range).
    pub fn dependencies(&self, i: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        self.neighbours(i, Incoming)
    }

    /// The tasks that depend on `i`, ascending (none for an index out of
    /// range).
    pub fn dependents(&self, i: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        self.neighbours(i, Outgoing)
    }

    fn neighbours(
        &self,
        i: usize,
        direction: petgraph::Direction,
    ) -> impl Iterator<Item = usize> + Clone + '_ {
        self.node(i)
            .into_iter()
            .flat_map(move |v| self.graph.neighbors_directed(v, direction))
            .map(|v| v.index())
    }

    /// Whether task `i` depends on itself.
    pub fn depends_on_itself(&self, i: usize) -> bool {
        self.node(i).is_some_and(|v| self.graph.contains_edge(v, v))
    }

    /// Kahn's algorithm over petgraph's neighbours, with a min-heap on
    /// plan index: the tie-break that is ctx's own (module documentation).
    pub fn topological_order(&self) -> TopologicalOrder {
        let mut order = Vec::with_capacity(self.len());
        let indegree = self.kahn(|i| order.push(i));
        // A placed task's in-degree fell to zero, and only a placed one's.
        let unplaced = (0..self.len()).filter(|&i| indegree[i] > 0).collect();
        TopologicalOrder { order, unplaced }
    }

    /// Kahn's loop: hands each task to `place` in topological order, the
    /// earliest in the plan first among those ready, and returns what is
    /// left of each task's in-degree: zero exactly for the placed ones.
    fn kahn(&self, mut place: impl FnMut(usize)) -> Vec<usize> {
        let n = self.len();
        let mut indegree = vec![0usize; n];
        for edge in self.graph.raw_edges() {
            indegree[edge.target().index()] += 1;
        }
        let mut ready: BinaryHeap<Reverse<usize>> =
            (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
        while let Some(Reverse(i)) = ready.pop() {
            place(i);
            for d in self.graph.neighbors_directed(NodeIndex::new(i), Outgoing) {
                let d = d.index();
                indegree[d] -= 1;
                if indegree[d] == 0 {
                    ready.push(Reverse(d));
                }
            }
        }
        indegree
    }

    /// Every task downstream of `i` (depending on it directly or through
    /// others), ascending, without `i` itself unless it is on a cycle.
    pub fn transitive_dependents(&self, i: usize) -> Vec<usize> {
        let Some(start) = self.node(i) else {
            return Vec::new();
        };
        // petgraph's depth-first walk, started from `i`'s dependents rather
        // than from `i`, so that `i` is discovered only if a cycle leads
        // back to it; the discovered set lists the rest in index order.
        let mut dfs = Dfs::empty(&self.graph);
        dfs.stack
            .extend(self.graph.neighbors_directed(start, Outgoing));
        while dfs.next(&self.graph).is_some() {}
        dfs.discovered.ones().collect()
    }

    /// Strongly connected components of two or more tasks, of the subgraph
    /// on the tasks marked in `keep` (petgraph's Kosaraju, iterative; a
    /// self-dependency alone makes no component: see
    /// [`depends_on_itself`](Self::depends_on_itself)). Each component is
    /// sorted; the list is in no particular order.
    pub fn cyclic_components(&self, keep: &[bool]) -> Vec<Vec<usize>> {
        // A task Kahn's loop places is on no cycle, so only the others are
        // searched: `kosaraju_scc` returns a list for every component,
        // each lone task's included, and for an acyclic plan (every plan
        // that runs) none is then allocated.
        let left = self.kahn(|_| {});
        if left.iter().all(|&d| d == 0) {
            return Vec::new();
        }
        let kept = NodeFiltered::from_fn(&self.graph, |v: NodeIndex<usize>| {
            let i = v.index();
            left[i] > 0 && keep.get(i).copied().unwrap_or(false)
        });
        kosaraju_scc(&kept)
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|component| {
                let mut tasks: Vec<usize> = component.iter().map(|v| v.index()).collect();
                tasks.sort_unstable();
                tasks
            })
            .collect()
    }
}

/// Two graphs are equal when they have the same tasks, the same canonical
/// ones and the same dependencies in the same order (petgraph's graph has
/// no equality of its own).
impl PartialEq for DependencyGraph {
    fn eq(&self, other: &DependencyGraph) -> bool {
        self.canonical == other.canonical
            && (0..self.len()).all(|i| self.dependencies(i).eq(other.dependencies(i)))
    }
}

impl Eq for DependencyGraph {}

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

    fn deps(g: &DependencyGraph, i: usize) -> Vec<usize> {
        g.dependencies(i).collect()
    }

    #[test]
    fn dependencies_keep_listed_order_and_dependents_ascend() {
        let g = DependencyGraph::from_dependencies(vec![
            vec![],
            vec![],
            vec![1, 0, 1],
            vec![2, 7, 0, 1, 3],
            vec![0],
        ]);
        assert_eq!(deps(&g, 2), [1, 0]);
        assert_eq!(deps(&g, 3), [2, 0, 1, 3]);
        assert_eq!(g.dependents(0).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(g.dependents(3).collect::<Vec<_>>(), [3]);
        // No task 9: nothing, rather than a panic.
        assert!(deps(&g, 9).is_empty());
        assert_eq!(g.dependents(9).count(), 0);
        assert!(g.transitive_dependents(9).is_empty());
        assert!(!g.depends_on_itself(9));
        assert_eq!(g.transitive_dependents(0), [2, 3, 4]);
        assert_eq!(g.transitive_dependents(3), [3]);
    }

    /// Nothing recurses: a 100,000-task chain, and the same chain closed
    /// into a cycle, are ordered and searched for components on a test
    /// thread's stack (petgraph 0.8's `tarjan_scc` recursed once per task
    /// here and overflowed it).
    #[test]
    fn a_100_000_task_chain_and_cycle_do_not_overflow_the_stack() {
        let n: usize = 100_000;
        let chain: Vec<Vec<usize>> = (0..n)
            .map(|i| i.checked_sub(1).into_iter().collect())
            .collect();
        let g = DependencyGraph::from_dependencies(chain.clone());
        let t = g.topological_order();
        assert!(t.order.iter().copied().eq(0..n));
        assert!(g.cyclic_components(&vec![true; n]).is_empty());
        assert_eq!(g.transitive_dependents(0).len(), n - 1);
        let mut cycle = chain;
        cycle[0].push(n - 1);
        let g = DependencyGraph::from_dependencies(cycle);
        assert_eq!(g.topological_order().unplaced.len(), n);
        let components = g.cyclic_components(&vec![true; n]);
        assert_eq!(components.len(), 1);
        assert!(components[0].iter().copied().eq(0..n));
        assert_eq!(g.transitive_dependents(5).len(), n);
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
        assert_eq!(deps(&g, 3), [1]);
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
        assert!(deps(&g, 1).is_empty());
        assert_eq!(g.dependents(0).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn index_lists_make_the_same_graph_as_the_plan() {
        let g = DependencyGraph::from_dependencies(vec![vec![2], vec![], vec![9, 1, 1], vec![3]]);
        assert_eq!(deps(&g, 2), [1]);
        assert_eq!(g.dependents(1).collect::<Vec<_>>(), [2]);
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
                for d in g.dependencies(i) {
                    prop_assert!(pos[d] < pos[i]);
                }
            }
            // reach[i][j]: j is reachable from i along dependency edges.
            let mut reach = vec![vec![false; n]; n];
            for (i, row) in reach.iter_mut().enumerate() {
                let mut stack: Vec<usize> = g.dependencies(i).collect();
                while let Some(v) = stack.pop() {
                    if !row[v] {
                        row[v] = true;
                        stack.extend(g.dependencies(v));
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
