//! Resume planning: which tasks of a stored run can be reused, and which
//! must run again and why.
//!
//! # The rule
//!
//! A task's final prompt is `assemble(own inputs, upstream outputs)`, and
//! its result depends on that prompt plus the model and the sampling
//! parameters. So, visiting the current plan's tasks in topological order,
//! a task is **reused** when all of these hold, and **re-run** with the
//! first failing reason otherwise:
//!
//! 1. its latest stored result is `completed` (else: `failed`, `skipped`,
//!    `in_progress (crashed)`, or `never started` for `pending` or no
//!    result at all);
//! 2. the stored fingerprint's `inputs_hash` equals the current one (else
//!    `prompt changed`): the prompt template, system prompt, resolved
//!    entity values, dependency ids and descriptions, plan config, and
//!    for a task with checks its checks and `max_check_attempts`;
//! 3. the model is the same (else `model changed`);
//! 4. the other parameters hash the same (else `params changed`);
//! 5. the engine is the same (else `engine changed`);
//! 6. every dependency is reused (else `upstream <id> re-runs`, naming the
//!    first dependency, in declaration order, that re-runs).
//!
//! Rule 6 is `make`'s: when a dependency runs again its output may differ,
//! so the dependent's final prompt may differ, so it runs again too. When
//! every dependency is reused their outputs are exactly the stored ones,
//! and with rules 2–5 the final prompt, model and parameters are then
//! exactly those of the stored result: comparing inputs decides the same as
//! re-assembling and comparing the final prompt would, without a tokenizer.
//! (With `--cache`, a re-run dependent whose upstream produced the same
//! output again finds its final prompt in the cache and costs nothing.)

use std::collections::{BTreeMap, HashMap};

use ctx_model::graph::{DependencyGraph, TopologicalOrder};
use ctx_model::{Plan, TaskStatus};

use crate::fingerprint::{TaskFingerprint, fingerprint_all};
use crate::record::ResultRecord;

/// Why a task runs again on resume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RerunReason {
    /// Its latest result failed.
    Failed,
    /// It was skipped (a dependency failed, or the run was interrupted).
    Skipped,
    /// It was started and never finished: the process died.
    Crashed,
    /// It has no result, or only `pending`.
    NeverStarted,
    /// Its prompt template, system prompt, entity values, dependencies or
    /// the plan config changed.
    PromptChanged,
    /// `params.model` changed.
    ModelChanged {
        /// The stored model.
        from: Option<String>,
        /// The current model.
        to: Option<String>,
    },
    /// Another parameter (temperature, max_tokens, ...) changed.
    ParamsChanged,
    /// The engine differs from the one that produced the result.
    EngineChanged {
        /// The stored engine.
        from: String,
        /// The current engine.
        to: String,
    },
    /// A dependency runs again, so this task's final prompt may change.
    Upstream(String),
    /// `ctx run --resume RUN --rerun TASK` asked for it: a forced re-run
    /// of a task whose stored result would otherwise be reused.
    Requested,
    /// The task is in a dependency cycle or downstream of one (a plan that
    /// failed validation); it cannot be reused.
    InvalidGraph,
}

impl std::fmt::Display for RerunReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = |m: &Option<String>| m.clone().unwrap_or_else(|| "(none)".into());
        match self {
            RerunReason::Failed => f.write_str("failed"),
            RerunReason::Skipped => f.write_str("skipped"),
            RerunReason::Crashed => f.write_str("in_progress (crashed)"),
            RerunReason::NeverStarted => f.write_str("never started"),
            RerunReason::PromptChanged => f.write_str("prompt changed"),
            RerunReason::ModelChanged { from, to } => {
                write!(f, "model changed ({} -> {})", m(from), m(to))
            }
            RerunReason::ParamsChanged => f.write_str("params changed"),
            RerunReason::EngineChanged { from, to } => write!(f, "engine changed ({from} -> {to})"),
            RerunReason::Upstream(id) => write!(f, "upstream {id} re-runs"),
            RerunReason::Requested => f.write_str("--rerun asked"),
            RerunReason::InvalidGraph => f.write_str("in or downstream of a dependency cycle"),
        }
    }
}

/// The decision for every task of the current plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumePlan {
    /// Tasks whose stored result is used as is, in topological order.
    pub reuse: Vec<String>,
    /// Tasks that run again, with the reason, in topological order.
    pub rerun: Vec<(String, RerunReason)>,
    /// Tasks with stored results that are no longer in the plan (kept in
    /// the store, ignored by the run).
    pub dropped: Vec<String>,
}

impl ResumePlan {
    /// Decides per task of `plan` (see the module docs for the rule), given
    /// the stored latest results by task id and the current engine.
    pub fn compute(
        plan: &Plan,
        stored: &BTreeMap<String, ResultRecord>,
        engine: &str,
    ) -> ResumePlan {
        // Unknown dependency ids are left out of the ordering; rule 6 then
        // treats them as re-running. Tasks on a cycle or downstream of one
        // cannot be placed and are never reused.
        let TopologicalOrder {
            order,
            unplaced: in_cycle,
        } = DependencyGraph::new(plan).topological_order();
        let mut reruns: HashMap<&str, bool> = HashMap::new();
        let mut out = ResumePlan::default();
        let fingerprints = fingerprint_all(plan);
        for &i in &order {
            let Some(task) = plan.sub_tasks.get(i) else {
                continue;
            };
            let own = own_reason(fingerprints.get(&task.id), stored.get(&task.id), engine);
            let reason = own.or_else(|| {
                task.dependencies
                    .iter()
                    .find(|d| reruns.get(d.as_str()).copied().unwrap_or(true))
                    .map(|d| RerunReason::Upstream(d.clone()))
            });
            reruns.insert(&task.id, reason.is_some());
            match reason {
                Some(r) => out.rerun.push((task.id.clone(), r)),
                None => out.reuse.push(task.id.clone()),
            }
        }
        for i in in_cycle {
            if let Some(task) = plan.sub_tasks.get(i) {
                out.rerun.push((task.id.clone(), RerunReason::InvalidGraph));
            }
        }
        let index = plan.task_index();
        // A map task's items are the run's, not dropped: those below the
        // count its latest result records. An item an earlier, longer
        // list left beyond it is kept and ignored like a removed task.
        let is_item = |id: &str| {
            ctx_model::map::parse_item_id(id).is_some_and(|(m, k)| {
                index.get(m).is_some_and(|t| t.map.is_some())
                    && ctx_model::map::is_current_item(stored.get(m).map(|r| &r.result), k)
            })
        };
        out.dropped = stored
            .keys()
            .filter(|id| !index.contains(id) && !is_item(id))
            .cloned()
            .collect();
        out
    }

    /// The ids that run again: the executor's `force_rerun` set (tasks that
    /// are not completed run anyway; this adds the completed ones whose
    /// inputs changed or whose upstream re-runs).
    pub fn rerun_ids(&self) -> std::collections::BTreeSet<String> {
        self.rerun.iter().map(|(id, _)| id.clone()).collect()
    }

    /// The executor's `force_rerun` set: the tasks that run again for a
    /// reason of their own (not `upstream … re-runs`). The executor runs
    /// everything downstream of them again too, so for a plan without a
    /// map this is [`rerun_ids`](Self::rerun_ids) by another road. Below a
    /// map it is not: the executor decides a map's dependents by the items
    /// they receive (their `metadata.map_inputs` digest), and a map left
    /// `in_progress` by a crash would otherwise force a reduce whose items
    /// all came back unchanged. A store without that digest rule (the
    /// shared store, which resets tasks to pending) uses `rerun_ids`.
    pub fn forced_ids(&self) -> std::collections::BTreeSet<String> {
        self.rerun
            .iter()
            .filter(|(_, why)| !matches!(why, RerunReason::Upstream(_)))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Forces `ids` and every task downstream of them (the plan graph's
    /// transitive dependents) to run again: each one the resume would have
    /// reused moves to [`rerun`](Self::rerun), `ids` themselves as
    /// [`RerunReason::Requested`], the tasks below them as
    /// [`RerunReason::Upstream`] naming the first dependency that re-runs.
    /// Tasks that re-run already keep their reason. This is the one forced
    /// re-run mechanism: the executor then runs what
    /// [`forced_ids`](Self::forced_ids) names and everything downstream, as
    /// for a changed prompt. `ids` must be the plan's ([`check_rerun_ids`]).
    pub fn force(&mut self, plan: &Plan, ids: &[String]) {
        let graph = DependencyGraph::new(plan);
        let index: HashMap<&str, usize> = plan
            .sub_tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), i))
            .collect();
        let mut below = std::collections::BTreeSet::new();
        for id in ids {
            if let Some(&i) = index.get(id.as_str()) {
                below.extend(graph.transitive_dependents(i));
            }
        }
        let asked = |id: &str| ids.iter().any(|x| x == id);
        let mut rerunning: std::collections::HashSet<String> =
            self.rerun.iter().map(|(id, _)| id.clone()).collect();
        // `reuse` is in topological order: a dependency moves before its
        // dependents look for it.
        let mut moved = Vec::new();
        for id in std::mem::take(&mut self.reuse) {
            let downstream = index.get(id.as_str()).is_some_and(|i| below.contains(i));
            let reason = if asked(&id) {
                Some(RerunReason::Requested)
            } else if downstream {
                let task = &plan.sub_tasks[index[id.as_str()]];
                let first = task.dependencies.iter().find(|d| rerunning.contains(*d));
                Some(RerunReason::Upstream(first.cloned().unwrap_or_default()))
            } else {
                None
            };
            match reason {
                Some(r) => {
                    rerunning.insert(id.clone());
                    moved.push((id, r));
                }
                None => self.reuse.push(id),
            }
        }
        self.rerun.extend(moved);
        let order: HashMap<&str, usize> = DependencyGraph::new(plan)
            .topological_order()
            .order
            .into_iter()
            .filter_map(|i| plan.sub_tasks.get(i).map(|t| (t.id.as_str(), i)))
            .enumerate()
            .map(|(k, (id, _))| (id, k))
            .collect();
        self.rerun
            .sort_by_key(|(id, _)| order.get(id.as_str()).copied().unwrap_or(usize::MAX));
    }

    /// Whether `task_id` is reused.
    pub fn is_reused(&self, task_id: &str) -> bool {
        self.reuse.iter().any(|id| id == task_id)
    }
}

/// A `--rerun` id that is not one of the plan's tasks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--rerun {task}: no such task in the plan{}", near_text(near))]
pub struct UnknownRerunTask {
    /// The id asked for.
    pub task: String,
    /// The plan's ids near it: the closest by spelling, then those that
    /// contain it or that it contains (ids of three characters or more;
    /// at most five).
    pub near: Vec<String>,
}

fn near_text(near: &[String]) -> String {
    if near.is_empty() {
        String::new()
    } else {
        format!(" (near: {})", near.join(", "))
    }
}

/// Checks that every id of `ids` is a task of `plan` (a map's items are
/// not: `--rerun` names the map task), before anything is opened or run.
pub fn check_rerun_ids(plan: &Plan, ids: &[String]) -> Result<(), UnknownRerunTask> {
    let known: Vec<&str> = plan.sub_tasks.iter().map(|t| t.id.as_str()).collect();
    let Some(bad) = ids.iter().find(|id| !known.contains(&id.as_str())) else {
        return Ok(());
    };
    let lower = bad.to_lowercase();
    let mut near: Vec<String> = ctx_model::closest_name(bad, known.iter().copied())
        .map(str::to_string)
        .into_iter()
        .collect();
    for id in &known {
        let l = id.to_lowercase();
        if near.len() < 5
            && !near.iter().any(|n| n == id)
            && (l.contains(&lower) || (l.len() >= 3 && lower.contains(&l)))
        {
            near.push((*id).to_string());
        }
    }
    Err(UnknownRerunTask {
        task: bad.clone(),
        near,
    })
}

fn own_reason(
    now: Option<&TaskFingerprint>,
    stored: Option<&ResultRecord>,
    engine: &str,
) -> Option<RerunReason> {
    let Some(rec) = stored else {
        return Some(RerunReason::NeverStarted);
    };
    match rec.result.status {
        TaskStatus::Completed => {}
        TaskStatus::Failed => return Some(RerunReason::Failed),
        TaskStatus::Skipped => return Some(RerunReason::Skipped),
        TaskStatus::InProgress => return Some(RerunReason::Crashed),
        TaskStatus::Pending => return Some(RerunReason::NeverStarted),
    }
    let (Some(then), Some(now)) = (&rec.fingerprint, now) else {
        // Stored under a plan that did not have this task id.
        return Some(RerunReason::PromptChanged);
    };
    if then.inputs_hash != now.inputs_hash {
        return Some(RerunReason::PromptChanged);
    }
    if then.model != now.model {
        return Some(RerunReason::ModelChanged {
            from: then.model.clone(),
            to: now.model.clone(),
        });
    }
    if then.params_hash != now.params_hash {
        return Some(RerunReason::ParamsChanged);
    }
    if rec.engine != engine {
        return Some(RerunReason::EngineChanged {
            from: rec.engine.clone(),
            to: engine.to_string(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::fingerprint;
    use ctx_model::TaskExecutionResult;
    use serde_json::json;

    fn plan() -> Plan {
        // a -> b -> d, a -> c -> d, e independent
        serde_json::from_value(json!({
            "schema_version": 1,
            "sub_tasks": [
                {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pa", "model": "m1"}}},
                {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pb"}}},
                {"id": "c", "description": "C", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pc"}}},
                {"id": "d", "description": "D", "dependencies": ["b", "c"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pd"}}},
                {"id": "e", "description": "E", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pe", "temperature": 0.0}}}
            ]
        }))
        .unwrap()
    }

    fn stored(plan: &Plan, statuses: &[(&str, TaskStatus)]) -> BTreeMap<String, ResultRecord> {
        statuses
            .iter()
            .map(|(id, s)| {
                let task = plan.task(id).unwrap();
                (
                    id.to_string(),
                    ResultRecord {
                        result: TaskExecutionResult::new(*id, *s),
                        prompt_hash: None,
                        engine: "dry-run".into(),
                        fingerprint: Some(fingerprint(plan, task)),
                        session: 1,
                        recorded_at: String::new(),
                        seq: 0,
                        started_seq: None,
                        started_at: None,
                    },
                )
            })
            .collect()
    }

    fn all_completed(plan: &Plan) -> BTreeMap<String, ResultRecord> {
        let ids: Vec<(&str, TaskStatus)> = plan
            .sub_tasks
            .iter()
            .map(|t| (t.id.as_str(), TaskStatus::Completed))
            .collect();
        stored(plan, &ids)
    }

    fn reasons(r: &ResumePlan) -> Vec<(String, String)> {
        r.rerun
            .iter()
            .map(|(id, why)| (id.clone(), why.to_string()))
            .collect()
    }

    #[test]
    fn unchanged_completed_run_reuses_everything() {
        let p = plan();
        let r = ResumePlan::compute(&p, &all_completed(&p), "dry-run");
        assert_eq!(r.reuse, ["a", "b", "c", "d", "e"]);
        assert!(r.rerun.is_empty());
    }

    #[test]
    fn status_reasons_and_downstream_propagation() {
        let p = plan();
        let s = stored(
            &p,
            &[
                ("a", TaskStatus::Completed),
                ("b", TaskStatus::InProgress),
                ("c", TaskStatus::Completed),
                ("d", TaskStatus::Completed),
            ],
        );
        let r = ResumePlan::compute(&p, &s, "dry-run");
        assert_eq!(r.reuse, ["a", "c"]);
        assert_eq!(
            reasons(&r),
            [
                ("b".into(), "in_progress (crashed)".into()),
                ("d".into(), "upstream b re-runs".into()),
                ("e".into(), "never started".into()),
            ]
        );
        // The executor is forced by the tasks' own reasons and runs what
        // is downstream of them itself.
        assert_eq!(r.rerun_ids(), ["b", "d", "e"].map(String::from).into());
        assert_eq!(r.forced_ids(), ["b", "e"].map(String::from).into());
    }

    #[test]
    fn a_requested_rerun_joins_the_decisions_with_what_is_below_it() {
        let p = plan();
        let s = stored(
            &p,
            &[
                ("a", TaskStatus::Completed),
                ("b", TaskStatus::Completed),
                ("c", TaskStatus::Failed),
                ("d", TaskStatus::Completed),
                ("e", TaskStatus::Completed),
            ],
        );
        let mut r = ResumePlan::compute(&p, &s, "dry-run");
        r.force(&p, &["b".to_string()]);
        assert_eq!(r.reuse, ["a", "e"]);
        // A task that re-runs already keeps its own reason; the order is
        // the plan's topological one.
        assert_eq!(
            reasons(&r),
            [
                ("b".into(), "--rerun asked".into()),
                ("c".into(), "failed".into()),
                ("d".into(), "upstream c re-runs".into()),
            ]
        );
        assert_eq!(r.forced_ids(), ["b", "c"].map(String::from).into());
        let mut all = ResumePlan::compute(&p, &all_completed(&p), "dry-run");
        all.force(&p, &["a".to_string(), "e".to_string()]);
        assert!(all.reuse.is_empty(), "{all:?}");
        assert_eq!(reasons(&all)[3], ("d".into(), "upstream b re-runs".into()));
        assert_eq!(
            check_rerun_ids(&p, &["a".into(), "E".into()]),
            Err(UnknownRerunTask {
                task: "E".into(),
                near: vec!["e".into()]
            })
        );
        assert_eq!(check_rerun_ids(&p, &["d".into()]), Ok(()));
    }

    #[test]
    fn changed_inputs_rerun_the_task_and_everything_downstream() {
        let p = plan();
        let s = all_completed(&p);
        let mut q = p.clone();
        q.sub_tasks[0].tool_or_prompt.params.prompt = "pa, revised".into();
        let r = ResumePlan::compute(&q, &s, "dry-run");
        assert_eq!(r.reuse, ["e"]);
        assert_eq!(
            reasons(&r),
            [
                ("a".into(), "prompt changed".into()),
                ("b".into(), "upstream a re-runs".into()),
                ("c".into(), "upstream a re-runs".into()),
                ("d".into(), "upstream b re-runs".into()),
            ]
        );

        let mut q = p.clone();
        q.sub_tasks[2].tool_or_prompt.params.model = Some("m2".into());
        q.sub_tasks[4].tool_or_prompt.params.temperature = Some(0.5);
        let r = ResumePlan::compute(&q, &s, "dry-run");
        assert_eq!(r.reuse, ["a", "b"]);
        assert_eq!(
            reasons(&r),
            [
                ("c".into(), "model changed ((none) -> m2)".into()),
                ("d".into(), "upstream c re-runs".into()),
                ("e".into(), "params changed".into()),
            ]
        );

        let r = ResumePlan::compute(&p, &s, "command");
        assert!(r.reuse.is_empty());
        assert_eq!(
            r.rerun[0].1.to_string(),
            "engine changed (dry-run -> command)"
        );
    }

    #[test]
    fn new_and_removed_tasks() {
        let p = plan();
        let s = all_completed(&p);
        let mut q = p.clone();
        q.sub_tasks.retain(|t| t.id != "e");
        let mut f = q.sub_tasks[0].clone();
        f.id = "f".into();
        f.dependencies = vec!["d".into()];
        q.sub_tasks.push(f);
        let r = ResumePlan::compute(&q, &s, "dry-run");
        assert_eq!(r.reuse, ["a", "b", "c", "d"]);
        assert_eq!(reasons(&r), [("f".into(), "never started".into())]);
        assert_eq!(r.dropped, ["e"]);
        assert_eq!(r.rerun_ids().into_iter().collect::<Vec<_>>(), ["f"]);
    }

    #[test]
    fn a_maps_items_are_not_dropped_but_those_beyond_its_count_are() {
        let mut p = plan();
        p.sub_tasks[1].map = Some(ctx_model::MapSpec {
            over: "a".into(),
            pointer: None,
            item: "ITEM".into(),
            max_items: Some(5),
            allow_failures: 0,
            variable_value: None,
        });
        let mut s = all_completed(&p);
        let mut item = |id: &str| {
            let mut r = s["e"].clone();
            r.result.task_id = id.to_string();
            s.insert(id.to_string(), r);
        };
        // Items of the map `b`, of a plain task `c`, of no task.
        for id in ["b[0]", "b[1]", "b[2]", "c[0]", "z[0]"] {
            item(id);
        }
        // No count recorded (a row from before ctx recorded it): every
        // stored item is the run's.
        let r = ResumePlan::compute(&p, &s, "dry-run");
        assert_eq!(r.dropped, ["c[0]", "z[0]"]);
        // The list shrank to one item: the two beyond it are dropped.
        s.get_mut("b").unwrap().result.metadata.map_items = Some(1);
        let r = ResumePlan::compute(&p, &s, "dry-run");
        assert_eq!(r.dropped, ["b[1]", "b[2]", "c[0]", "z[0]"]);
    }

    #[test]
    fn cycles_do_not_panic() {
        let mut p = plan();
        p.sub_tasks[0].dependencies = vec!["d".into()];
        let r = ResumePlan::compute(&p, &all_completed(&p), "dry-run");
        assert_eq!(r.reuse, ["e"]);
        assert_eq!(r.rerun.len(), 4);
        assert!(
            r.rerun
                .iter()
                .all(|(_, why)| *why == RerunReason::InvalidGraph)
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// A random DAG (each task depends on some earlier ones), random
        /// stored statuses (or none), and random prompt edits.
        fn case() -> impl Strategy<Value = (Plan, Vec<Option<TaskStatus>>, Vec<bool>)> {
            (1usize..12).prop_flat_map(|n| {
                let deps = proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), n);
                let status = proptest::option::of(prop_oneof![
                    4 => Just(TaskStatus::Completed),
                    1 => Just(TaskStatus::Failed),
                    1 => Just(TaskStatus::Skipped),
                    1 => Just(TaskStatus::InProgress),
                    1 => Just(TaskStatus::Pending),
                ]);
                (
                    deps,
                    proptest::collection::vec(status, n),
                    proptest::collection::vec(prop::bool::weighted(0.15), n),
                )
                    .prop_map(move |(deps, statuses, edits)| {
                        let tasks: Vec<serde_json::Value> = deps
                            .iter()
                            .enumerate()
                            .map(|(i, ds)| {
                                let mut d: Vec<String> = if i == 0 {
                                    Vec::new()
                                } else {
                                    ds.iter().map(|x| format!("t{}", x.index(i))).collect()
                                };
                                d.sort();
                                d.dedup();
                                json!({"id": format!("t{i}"), "description": "d", "dependencies": d,
                                       "tool_or_prompt": {"name": "inference", "params": {"prompt": format!("p{i}")}}})
                            })
                            .collect();
                        let plan: Plan =
                            serde_json::from_value(json!({"schema_version": 1, "sub_tasks": tasks})).unwrap();
                        (plan, statuses, edits)
                    })
            })
        }

        proptest! {
            #[test]
            fn decisions_are_make_like((plan, statuses, edits) in case()) {
                let stored_ids: Vec<(String, TaskStatus)> = statuses
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| Some((format!("t{i}"), (*s)?)))
                    .collect();
                let refs: Vec<(&str, TaskStatus)> = stored_ids.iter().map(|(id, s)| (id.as_str(), *s)).collect();
                let stored = stored(&plan, &refs);
                let mut current = plan.clone();
                for (t, edit) in current.sub_tasks.iter_mut().zip(&edits) {
                    if *edit {
                        t.tool_or_prompt.params.prompt.push_str(" (edited)");
                    }
                }
                let r = ResumePlan::compute(&current, &stored, "dry-run");
                let rerun = r.rerun_ids();
                prop_assert_eq!(r.reuse.len() + r.rerun.len(), current.sub_tasks.len());
                for (i, t) in current.sub_tasks.iter().enumerate() {
                    let reused = r.is_reused(&t.id);
                    prop_assert_ne!(reused, rerun.contains(&t.id));
                    let clean = statuses[i] == Some(TaskStatus::Completed) && !edits[i];
                    if reused {
                        // Reused: completed, unedited, and so is everything upstream.
                        prop_assert!(clean);
                        for d in &t.dependencies {
                            prop_assert!(r.is_reused(d), "{} reused but upstream {} re-runs", t.id, d);
                        }
                    } else if clean {
                        // Re-run although clean: only because a dependency re-runs.
                        let why = &r.rerun.iter().find(|(id, _)| id == &t.id).unwrap().1;
                        let RerunReason::Upstream(d) = why else {
                            return Err(TestCaseError::fail(format!("{}: {why}", t.id)));
                        };
                        prop_assert!(t.dependencies.contains(d) && rerun.contains(d));
                    }
                }
            }
        }
    }
}
