//! The plan as a DAG: topological order, levels, critical path, priorities.
//!
//! [`PlanGraph`] is computed once per run from a plan that has passed
//! validation. Everything the scheduler and `ctx plan graph` need is derived
//! here, deterministically: two runs over the same plan give the same order,
//! levels and critical path, and ties are always broken by plan order (the
//! position of a task in `sub_tasks`).
//!
//! ## Weighting
//!
//! The critical path and the scheduling priorities are longest paths, so
//! they need a weight per task. [`Weighting::TaskCount`] weighs every task
//! 1: the critical path is then the longest chain of tasks. When any task
//! gives `params.estimated_ms`, [`Weighting::EstimatedMs`] is chosen
//! instead: each task weighs its estimate, and a task without one weighs
//! the mean of the estimates that were given (rounded down, at least 1), so
//! a partly annotated plan is neither ignored nor skewed towards the tasks
//! that happen to be annotated. [`PlanGraph::weighting`] says which one was
//! used; `ctx plan graph` prints it.
//!
//! ## Priority
//!
//! A task's priority is its *remaining path length*: its own weight plus the
//! longest weighted path from it to any sink. Starting the ready task with
//! the longest remaining path first is the classic critical-path list
//! scheduling rule: the tasks that hold up the end of the run go first.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use ctx_model::graph::{DependencyGraph, TopologicalOrder};
use ctx_model::{MapSpec, Plan};

/// How tasks are weighed for the critical path and priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    /// Every task weighs 1.
    TaskCount,
    /// Tasks weigh `params.estimated_ms` (the mean of the given estimates
    /// for tasks without one).
    EstimatedMs,
}

impl Weighting {
    /// The name used in JSON and text output.
    pub fn as_str(self) -> &'static str {
        match self {
            Weighting::TaskCount => "task_count",
            Weighting::EstimatedMs => "estimated_ms",
        }
    }
}

/// Why a plan is not a DAG the executor can run (or, for
/// [`GraphError::UnknownTokenizer`], names a tokenizer it cannot count
/// with).
///
/// `ctx plan check` reports these (and more) with full context; the graph
/// and the executor repeat these checks so that a library user who skips
/// validation still gets an error instead of a wrong schedule or a count
/// under the wrong tokenizer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// Two tasks share an id.
    #[error("task `{id}`: duplicate id (sub_tasks[{first}] and sub_tasks[{second}])")]
    DuplicateId {
        /// The id.
        id: String,
        /// Index of the first task with it.
        first: usize,
        /// Index of the second.
        second: usize,
    },
    /// A dependency names no task.
    #[error("task `{task_id}`: dependencies: unknown task id `{dependency}`")]
    UnknownDependency {
        /// The task.
        task_id: String,
        /// The missing id.
        dependency: String,
    },
    /// The dependencies form a cycle.
    #[error("dependency cycle: {}", .path.join(" -> "))]
    Cycle {
        /// The cycle, first id repeated at the end (`a -> b -> a`).
        path: Vec<String>,
    },
    /// `config.tokenizer` names no tokenizer ctx knows (the executor
    /// refuses the plan rather than counting with the model's tokenizer).
    #[error("config.tokenizer: {0}")]
    UnknownTokenizer(#[from] ctx_tokens::UnknownTokenizer),
}

/// A validated plan's DAG with everything derived from it.
///
/// Tasks are referred to by their index in `plan.sub_tasks` ("plan
/// order"); [`id`](Self::id) maps an index back to its id.
#[derive(Debug, Clone)]
pub struct PlanGraph {
    ids: Vec<String>,
    /// `ids` inverted, built once: [`PlanGraph::index_of`] is called per
    /// task and per dependency, where a scan made a run quadratic.
    by_id: HashMap<String, usize>,
    graph: DependencyGraph,
    weights: Vec<u64>,
    weighting: Weighting,
    order: Vec<usize>,
    levels: Vec<usize>,
    remaining: Vec<u64>,
    critical_path: Vec<usize>,
}

impl PlanGraph {
    /// Builds the graph, choosing the weighting from the plan: estimated
    /// milliseconds when any task gives `params.estimated_ms`, else task
    /// count.
    pub fn new(plan: &Plan) -> Result<PlanGraph, GraphError> {
        let any_estimate = plan
            .sub_tasks
            .iter()
            .any(|t| t.tool_or_prompt.params.estimated_ms.is_some());
        let weighting = if any_estimate {
            Weighting::EstimatedMs
        } else {
            Weighting::TaskCount
        };
        PlanGraph::with_weighting(plan, weighting)
    }

    /// Builds the graph with an explicit weighting.
    pub fn with_weighting(plan: &Plan, weighting: Weighting) -> Result<PlanGraph, GraphError> {
        let index = index_ids(plan)?;
        // The one dependency graph of ctx (ctx-model's): edges, dependents
        // and the deterministic topological order (plan order on ties).
        let graph = DependencyGraph::new(plan);
        let ids: Vec<String> = plan.sub_tasks.iter().map(|t| t.id.clone()).collect();
        let TopologicalOrder { order, unplaced } = graph.topological_order();
        if !unplaced.is_empty() {
            return Err(GraphError::Cycle {
                path: find_cycle(&graph, &ids),
            });
        }
        let weights = task_weights(plan, weighting);
        let levels = levels_in(&order, &graph);
        let remaining = remaining_paths(&order, &graph, &weights);
        let critical_path = critical_path_of(&graph, &remaining);
        let by_id = index
            .into_iter()
            .map(|(id, i)| (id.to_owned(), i))
            .collect();
        Ok(PlanGraph {
            ids,
            by_id,
            graph,
            weights,
            weighting,
            order,
            levels,
            remaining,
            critical_path,
        })
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the plan has no tasks.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The id of the task at plan index `i`.
    ///
    /// # Panics
    /// When `i` is not below [`len`](Self::len).
    pub fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// Every task id, in plan order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The plan index of the task with this id: O(1).
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The weighting used for the critical path and priorities.
    pub fn weighting(&self) -> Weighting {
        self.weighting
    }

    /// Plan indexes of task `i`'s dependencies, in the order written (each
    /// once).
    pub fn dependencies(&self, i: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        self.graph.dependencies(i)
    }

    /// Plan indexes of the tasks that depend on task `i`, ascending.
    pub fn dependents(&self, i: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        self.graph.dependents(i)
    }

    /// Task `i`'s weight under [`weighting`](Self::weighting).
    pub fn weight(&self, i: usize) -> u64 {
        self.weights[i]
    }

    /// A topological order: every task after all its dependencies; among
    /// tasks whose dependencies are placed, the earliest in the plan first.
    pub fn topological_order(&self) -> &[usize] {
        &self.order
    }

    /// Task `i`'s dependency level: 0 without dependencies, else one more
    /// than its deepest dependency.
    pub fn level(&self, i: usize) -> usize {
        self.levels[i]
    }

    /// Tasks grouped by level, each group in plan order.
    pub fn levels(&self) -> Vec<Vec<usize>> {
        let depth = self.levels.iter().copied().max().map_or(0, |m| m + 1);
        let mut out = vec![Vec::new(); depth];
        for (i, &l) in self.levels.iter().enumerate() {
            out[l].push(i);
        }
        out
    }

    /// Task `i`'s scheduling priority: its weight plus the longest weighted
    /// path from it to a sink.
    pub fn remaining_path(&self, i: usize) -> u64 {
        self.remaining[i]
    }

    /// The critical path, source to sink: the longest weighted chain of
    /// dependent tasks (ties broken by plan order).
    pub fn critical_path(&self) -> &[usize] {
        &self.critical_path
    }

    /// The critical path's total weight: a lower bound on any schedule's
    /// makespan when weights are durations.
    pub fn critical_path_length(&self) -> u64 {
        self.critical_path.first().map_or(0, |&i| self.remaining[i])
    }

    /// Every task that depends on task `i`, directly or not, ascending.
    pub fn transitive_dependents(&self, i: usize) -> Vec<usize> {
        // The graph is acyclic here, so `i` is never among them.
        self.graph.transitive_dependents(i)
    }

    /// The data `ctx plan graph --format json` prints. `plan` is the plan
    /// this graph was built from: each map task's `map:` block comes from
    /// it (the graph keeps ids and edges only).
    pub fn summary(&self, plan: &Plan) -> GraphSummary {
        GraphSummary {
            order: self.order.iter().map(|&i| self.ids[i].clone()).collect(),
            levels: self
                .levels()
                .into_iter()
                .map(|l| l.into_iter().map(|i| self.ids[i].clone()).collect())
                .collect(),
            critical_path: self
                .critical_path
                .iter()
                .map(|&i| self.ids[i].clone())
                .collect(),
            critical_path_length: self.critical_path_length(),
            weighting: self.weighting,
            tasks: (0..self.len())
                .map(|i| TaskSummary {
                    id: self.ids[i].clone(),
                    dependencies: self
                        .graph
                        .dependencies(i)
                        .map(|d| self.ids[d].clone())
                        .collect(),
                    level: self.levels[i],
                    weight: self.weights[i],
                    priority: self.remaining[i],
                    critical: self.critical_path.contains(&i),
                    map: plan
                        .sub_tasks
                        .get(i)
                        .and_then(|t| t.map.as_ref())
                        .map(|m| MapSpec {
                            // The source's value is not the graph's.
                            variable_value: None,
                            ..m.clone()
                        }),
                })
                .collect(),
        }
    }
}

/// A serializable view of a [`PlanGraph`], with ids instead of indexes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GraphSummary {
    /// Topological order.
    pub order: Vec<String>,
    /// Ids by level, level 0 first.
    pub levels: Vec<Vec<String>>,
    /// The critical path, source to sink.
    pub critical_path: Vec<String>,
    /// Its total weight.
    pub critical_path_length: u64,
    /// The weighting used.
    pub weighting: Weighting,
    /// Per task, in plan order.
    pub tasks: Vec<TaskSummary>,
}

/// One task in a [`GraphSummary`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskSummary {
    /// The id.
    pub id: String,
    /// Its dependencies.
    pub dependencies: Vec<String>,
    /// Its level.
    pub level: usize,
    /// Its weight.
    pub weight: u64,
    /// Its remaining path length (scheduling priority).
    pub priority: u64,
    /// Whether it lies on the critical path.
    pub critical: bool,
    /// For a map task, its `map:` block as the plan writes it (`over`,
    /// `pointer`, `as`, `max_items`, `allow_failures`): the task stands
    /// for up to `max_items` items, which exist only once the list is
    /// known, so the graph shows the one node (`×max_items` in mermaid
    /// and dot). Absent for any other task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapSpec>,
}

/// Each task's index by id; an error names a duplicate id or a dependency
/// on no task.
fn index_ids(plan: &Plan) -> Result<HashMap<&str, usize>, GraphError> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(plan.sub_tasks.len());
    for (i, t) in plan.sub_tasks.iter().enumerate() {
        if let Some(&first) = index.get(t.id.as_str()) {
            return Err(GraphError::DuplicateId {
                id: t.id.clone(),
                first,
                second: i,
            });
        }
        index.insert(t.id.as_str(), i);
    }
    for t in &plan.sub_tasks {
        if let Some(d) = t
            .dependencies
            .iter()
            .find(|d| !index.contains_key(d.as_str()))
        {
            return Err(GraphError::UnknownDependency {
                task_id: t.id.clone(),
                dependency: d.clone(),
            });
        }
    }
    Ok(index)
}

/// Each task's weight: one, or its `estimated_ms` (the mean of the given
/// estimates, at least 1, for a task without one).
fn task_weights(plan: &Plan, weighting: Weighting) -> Vec<u64> {
    match weighting {
        Weighting::TaskCount => vec![1; plan.sub_tasks.len()],
        Weighting::EstimatedMs => {
            let given: Vec<u64> = plan
                .sub_tasks
                .iter()
                .filter_map(|t| t.tool_or_prompt.params.estimated_ms)
                .collect();
            let mean = if given.is_empty() {
                1
            } else {
                (given.iter().map(|&v| u128::from(v)).sum::<u128>() / given.len() as u128).max(1)
                    as u64
            };
            plan.sub_tasks
                .iter()
                .map(|t| t.tool_or_prompt.params.estimated_ms.unwrap_or(mean))
                .collect()
        }
    }
}

/// Each task's dependency level (0 for a task without dependencies), in
/// topological `order`.
fn levels_in(order: &[usize], graph: &DependencyGraph) -> Vec<usize> {
    let mut levels = vec![0usize; graph.len()];
    for &i in order {
        levels[i] = graph
            .dependencies(i)
            .map(|d| levels[d] + 1)
            .max()
            .unwrap_or(0);
    }
    levels
}

/// Each task's remaining path: its weight plus the longest remaining path
/// among its dependents.
fn remaining_paths(order: &[usize], graph: &DependencyGraph, weights: &[u64]) -> Vec<u64> {
    let mut remaining = vec![0u64; graph.len()];
    for &i in order.iter().rev() {
        let tail = graph.dependents(i).map(|d| remaining[d]).max().unwrap_or(0);
        remaining[i] = weights[i].saturating_add(tail);
    }
    remaining
}

/// The critical path: from the source with the longest remaining path,
/// follow the dependent with the longest remaining path (ties: plan order,
/// which `max_by` on reversed index gives).
fn critical_path_of(graph: &DependencyGraph, remaining: &[u64]) -> Vec<usize> {
    let mut critical_path = Vec::new();
    let start = (0..graph.len())
        .filter(|&i| graph.dependencies(i).next().is_none())
        .max_by_key(|&i| (remaining[i], Reverse(i)));
    if let Some(mut cur) = start {
        critical_path.push(cur);
        while let Some(next) = graph
            .dependents(cur)
            .max_by_key(|&d| (remaining[d], Reverse(d)))
        {
            critical_path.push(next);
            cur = next;
        }
    }
    critical_path
}

/// One cycle, as ids with the first repeated at the end. Finds the
/// strongly connected components (ctx-model's graph, petgraph's) to get a node on a
/// cycle, then walks dependencies inside its component until a node
/// repeats.
fn find_cycle(graph: &DependencyGraph, ids: &[String]) -> Vec<String> {
    let n = graph.len();
    // A component of more than one node, or a node depending on itself; the
    // one holding the earliest task in plan order, for determinism.
    let component = graph
        .cyclic_components(&vec![true; n])
        .into_iter()
        .map(|c| c.into_iter().collect::<BTreeSet<usize>>())
        .chain(
            (0..n)
                .filter(|&i| graph.depends_on_itself(i))
                .map(|i| BTreeSet::from([i])),
        )
        .min_by_key(|c| c.first().copied());
    let Some(component) = component else {
        return Vec::new();
    };
    let Some(&start) = component.first() else {
        return Vec::new();
    };
    // Walk "is a dependency of" edges backwards, i.e. follow `deps`, staying
    // inside the component; print in dependency direction (a -> b means a
    // depends on b).
    let mut path = vec![start];
    let mut pos: HashMap<usize, usize> = HashMap::from([(start, 0)]);
    let mut cur = start;
    loop {
        let Some(next) = graph
            .dependencies(cur)
            .filter(|d| component.contains(d))
            .min()
        else {
            return path.iter().map(|&i| ids[i].clone()).collect();
        };
        if let Some(&p) = pos.get(&next) {
            let mut cycle: Vec<String> = path[p..].iter().map(|&i| ids[i].clone()).collect();
            cycle.push(ids[next].clone());
            return cycle;
        }
        pos.insert(next, path.len());
        path.push(next);
        cur = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn plan(tasks: &[(&str, &[&str], Option<u64>)]) -> Plan {
        let subs: Vec<serde_json::Value> = tasks
            .iter()
            .map(|(id, deps, est)| {
                let mut params = serde_json::json!({"prompt": format!("do {id}")});
                if let Some(e) = est {
                    params["estimated_ms"] = serde_json::json!(e);
                }
                serde_json::json!({
                    "id": id, "description": format!("task {id}"),
                    "dependencies": deps,
                    "tool_or_prompt": {"name": "inference", "params": params}
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": subs})).unwrap()
    }

    fn ids(g: &PlanGraph, v: &[usize]) -> Vec<String> {
        v.iter().map(|&i| g.id(i).to_string()).collect()
    }

    #[test]
    fn diamond_order_levels_and_path() {
        // a -> {b, c} -> d, plus an independent e.
        let p = plan(&[
            ("a", &[], None),
            ("b", &["a"], None),
            ("c", &["a"], None),
            ("e", &[], None),
            ("d", &["b", "c"], None),
        ]);
        let g = PlanGraph::new(&p).unwrap();
        assert_eq!(g.weighting(), Weighting::TaskCount);
        assert_eq!(ids(&g, g.topological_order()), ["a", "b", "c", "e", "d"]);
        let levels: Vec<Vec<String>> = g.levels().iter().map(|l| ids(&g, l)).collect();
        assert_eq!(levels, vec![vec!["a", "e"], vec!["b", "c"], vec!["d"]]);
        assert_eq!(ids(&g, g.critical_path()), ["a", "b", "d"]);
        assert_eq!(g.critical_path_length(), 3);
        assert_eq!(g.remaining_path(0), 3);
        assert_eq!(g.remaining_path(3), 1);
        assert_eq!(ids(&g, &g.transitive_dependents(0)), ["b", "c", "d"]);
    }

    #[test]
    fn topological_order_ties_follow_plan_order() {
        let p = plan(&[("z", &[], None), ("y", &[], None), ("x", &["y"], None)]);
        let g = PlanGraph::new(&p).unwrap();
        assert_eq!(ids(&g, g.topological_order()), ["z", "y", "x"]);
    }

    #[test]
    fn estimated_ms_changes_the_critical_path() {
        // By count a -> b -> d is as long as a -> c -> d; c is slow.
        let p = plan(&[
            ("a", &[], Some(10)),
            ("b", &["a"], Some(10)),
            ("c", &["a"], Some(500)),
            ("d", &["b", "c"], Some(10)),
        ]);
        let by_count = PlanGraph::with_weighting(&p, Weighting::TaskCount).unwrap();
        assert_eq!(ids(&by_count, by_count.critical_path()), ["a", "b", "d"]);
        let g = PlanGraph::new(&p).unwrap();
        assert_eq!(g.weighting(), Weighting::EstimatedMs);
        assert_eq!(ids(&g, g.critical_path()), ["a", "c", "d"]);
        assert_eq!(g.critical_path_length(), 520);
        assert_eq!(g.remaining_path(1), 20);
        assert_eq!(g.remaining_path(2), 510);
    }

    #[test]
    fn missing_estimates_weigh_the_mean() {
        let p = plan(&[
            ("a", &[], Some(100)),
            ("b", &["a"], None),
            ("c", &[], Some(300)),
        ]);
        let g = PlanGraph::new(&p).unwrap();
        assert_eq!(g.weight(1), 200);
        assert_eq!(g.critical_path_length(), 300);
        assert_eq!(ids(&g, g.critical_path()), ["a", "b"]);
    }

    #[test]
    fn structural_errors() {
        let p = plan(&[("a", &[], None), ("a", &[], None)]);
        assert!(matches!(
            PlanGraph::new(&p),
            Err(GraphError::DuplicateId { .. })
        ));
        let p = plan(&[("a", &["nope"], None)]);
        let e = PlanGraph::new(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "task `a`: dependencies: unknown task id `nope`"
        );
        let p = plan(&[
            ("x", &[], None),
            ("a", &["c"], None),
            ("b", &["a"], None),
            ("c", &["b", "x"], None),
        ]);
        let e = PlanGraph::new(&p).unwrap_err();
        assert_eq!(e.to_string(), "dependency cycle: a -> c -> b -> a");
        let p = plan(&[("s", &["s"], None)]);
        assert_eq!(
            PlanGraph::new(&p).unwrap_err().to_string(),
            "dependency cycle: s -> s"
        );
    }

    #[test]
    fn empty_plan() {
        let g = PlanGraph::new(&plan(&[])).unwrap();
        assert!(g.is_empty());
        assert!(g.critical_path().is_empty());
        assert_eq!(g.critical_path_length(), 0);
        assert!(g.levels().is_empty());
    }

    proptest::proptest! {
        /// On random DAGs: the order is topological, levels are one more
        /// than the deepest dependency, priorities are longest paths, and
        /// the critical path is a real chain whose weight is the maximum
        /// priority.
        #[test]
        fn derived_data_is_consistent(
            raw in proptest::collection::vec(
                (proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..4),
                 proptest::option::of(1u64..1000)),
                1..40,
            )
        ) {
            let spec: Vec<(String, Vec<String>, Option<u64>)> = raw
                .iter()
                .enumerate()
                .map(|(i, (picks, est))| {
                    let deps = if i == 0 { Vec::new() } else {
                        picks.iter().map(|p| format!("n{}", p.index(i))).collect()
                    };
                    (format!("n{i}"), deps, *est)
                })
                .collect();
            let refs: Vec<(&str, Vec<&str>, Option<u64>)> = spec
                .iter()
                .map(|(id, d, e)| (id.as_str(), d.iter().map(String::as_str).collect(), *e))
                .collect();
            let tasks: Vec<(&str, &[&str], Option<u64>)> =
                refs.iter().map(|(id, d, e)| (*id, d.as_slice(), *e)).collect();
            let g = PlanGraph::new(&plan(&tasks)).unwrap();
            let n = g.len();
            let mut pos = vec![0; n];
            for (k, &i) in g.topological_order().iter().enumerate() {
                pos[i] = k;
            }
            proptest::prop_assert_eq!(g.topological_order().len(), n);
            for i in 0..n {
                for d in g.dependencies(i) {
                    proptest::prop_assert!(pos[d] < pos[i]);
                }
                let level = g.dependencies(i).map(|d| g.level(d) + 1).max().unwrap_or(0);
                proptest::prop_assert_eq!(g.level(i), level);
                let tail = g.dependents(i).map(|d| g.remaining_path(d)).max().unwrap_or(0);
                proptest::prop_assert_eq!(g.remaining_path(i), g.weight(i) + tail);
            }
            let path = g.critical_path();
            proptest::prop_assert!(g.dependencies(path[0]).next().is_none());
            proptest::prop_assert!(g.dependents(*path.last().unwrap()).next().is_none());
            for w in path.windows(2) {
                proptest::prop_assert!(g.dependencies(w[1]).any(|d| d == w[0]));
            }
            let total: u64 = path.iter().map(|&i| g.weight(i)).sum();
            proptest::prop_assert_eq!(total, g.critical_path_length());
            proptest::prop_assert_eq!(Some(total), (0..n).map(|i| g.remaining_path(i)).max());
        }
    }

    #[test]
    fn summary_is_serializable() {
        let p = plan(&[("a", &[], None), ("b", &["a", "a"], None)]);
        let s = PlanGraph::new(&p).unwrap().summary(&p);
        assert_eq!(s.tasks[1].dependencies, ["a"]);
        assert!(s.tasks.iter().all(|t| t.critical));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["weighting"], "task_count");
        assert_eq!(json["tasks"][0]["priority"], 2);
    }

    #[test]
    fn an_unknown_tokenizer_is_refused_not_replaced() {
        let mut p = plan(&[("a", &[], None)]);
        p.config.tokenizer = Some("nope".into());
        let err = crate::Executor::new(
            p.clone(),
            std::sync::Arc::new(ctx_engine::DryRunEngine),
            std::sync::Arc::new(ctx_store::MemoryStore::new()),
            crate::ExecutorOptions::default(),
        )
        .err()
        .expect("an unknown tokenizer is an error");
        assert!(matches!(&err, GraphError::UnknownTokenizer(e) if e.name == "nope"));
        assert!(
            err.to_string()
                .starts_with("config.tokenizer: unknown tokenizer `nope` (known: cl100k_base,"),
            "{err}"
        );
        p.config.tokenizer = Some("estimate".into());
        assert!(
            crate::Executor::new(
                p,
                std::sync::Arc::new(ctx_engine::DryRunEngine),
                std::sync::Arc::new(ctx_store::MemoryStore::new()),
                crate::ExecutorOptions::default(),
            )
            .is_ok()
        );
    }
}
