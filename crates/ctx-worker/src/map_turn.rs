//! A worker's turn for a claimed map task (issue 23): it calls no engine.
//!
//! The first claim of a map task comes when its dependencies completed
//! (its source is ready: a variable's value, known from the start, or
//! the `over` dependency's output). The worker expands it with the
//! library's one expansion ([`expand_map`], [`item_hash`],
//! [`plan_with_items`]), matches the new items against the map's stored
//! completed items by content hash (a resume takes a match as stored,
//! as the local executor does), and registers them in the store
//! ([`PgStore::expand_map`], one transaction under the claim): any
//! worker then claims the items like any task. The map task is given
//! back, waiting for its items to end.
//!
//! The next claim comes when every item ended: the map task joins them
//! ([`join_result`], within `map.allow_failures`) and commits that, which
//! releases its dependents (the reduce reads every item's output, in
//! item order) or skips them.
//!
//! An expansion with nothing to run (an empty list, or every item taken
//! as stored) joins in the same turn.

use std::collections::HashMap;

use ctx_deps::map::{
    completed_items_by_hash, expand_map, item_hash, join_result, plan_with_items, take_stored,
};
use ctx_deps::{PlanGraph, TaskRunner};
use ctx_model::approval::{Decision, Verdict};
use ctx_model::map::parse_item_id;
use ctx_model::{Plan, SubTask, TaskExecutionResult, TaskStatus};
use ctx_store::StoredValue;
use ctx_store_postgres::{Claim, Commit, Error as PgError, Expanded, Expansion, ItemRow, PgStore};

/// How many times an expansion is computed again when another map of the
/// run expanded first (each try reads the plan anew).
const STALE_TRIES: usize = 20;

/// What a map task's turn came to.
#[derive(Debug)]
pub(crate) enum MapEnd {
    /// Its items were registered; the map task was given back, waiting
    /// for this many of them to end.
    Expanded(usize),
    /// Its own result (its join, or why it could not expand) and the
    /// store's word on its commit.
    Done(Box<TaskExecutionResult>, Commit),
    /// The claim was lost before anything was written.
    Lost,
}

/// Map task `claim`'s turn on `runner`'s plan (stored with hash
/// `plan_hash`), expanding with the engine label `label`.
pub(crate) async fn map_turn(
    store: &PgStore,
    runner: &TaskRunner,
    plan_hash: &str,
    claim: &Claim,
    label: &str,
) -> Result<MapEnd, PgError> {
    let mut plan = runner.plan().clone();
    let mut base = plan_hash.to_string();
    for _ in 0..STALE_TRIES {
        let Some(i) = plan.sub_tasks.iter().position(|t| t.id == claim.task_id) else {
            return done(
                store,
                claim,
                failed(&claim.task_id, "is not in the stored plan"),
            )
            .await;
        };
        let task = plan.sub_tasks[i].clone();
        let items: Vec<String> = item_ids(&task);
        if !items.is_empty() {
            let results = store.results_of(&claim.run_id, &items).await?;
            return join(store, claim, &task, &items, results).await;
        }
        // Its `before: run` gate holds the whole map: a rejection fails it
        // before it expands (an approval let the claim take it, and is an
        // event on the map task's span for this turn).
        match decided(store, claim, &task).await? {
            Some(d) if d.verdict == Verdict::Reject => {
                let r = ctx_deps::gates::rejected_result(&task.id, &d);
                return done(store, claim, r).await;
            }
            Some(d) => drop(ctx_deps::gates::approved_span(&task.id, Some(&d))),
            None => {}
        }
        let source = match source_of(store, &claim.run_id, &plan, &task).await? {
            Ok(s) => s,
            Err(e) => return done(store, claim, failed(&task.id, &e)).await,
        };
        let new_items = match expand_map(&task, source.as_deref()) {
            Ok(items) => items,
            Err(e) => return done(store, claim, failed(&task.id, &e.to_string())).await,
        };
        let rows = item_rows(store, claim, label, &new_items).await?;
        let ids: Vec<String> = new_items.iter().map(|t| t.id.clone()).collect();
        let expanded = plan_with_items(&plan, i, new_items);
        let rows = with_priorities(&expanded, rows);
        let expansion = Expansion {
            base_hash: &base,
            plan: &expanded,
            items: &rows,
        };
        match store.expand_map(claim, &expansion).await? {
            Expanded::Waiting(n) => return Ok(MapEnd::Expanded(n)),
            Expanded::Ready => {
                let results = rows.into_iter().filter_map(|r| r.reused).collect();
                return join(store, claim, &task, &ids, results).await;
            }
            Expanded::Lost => return Ok(MapEnd::Lost),
            Expanded::Stale => (plan, base) = store.plan_and_hash(&claim.run_id).await?,
        }
    }
    let why = format!("the run's plan kept changing under {STALE_TRIES} tries to expand it");
    done(store, claim, failed(&claim.task_id, &why)).await
}

/// The ids of the items map task `task` was expanded into, in item
/// order (none before its expansion).
fn item_ids(task: &SubTask) -> Vec<String> {
    let mut items: Vec<(usize, &String)> = task
        .dependencies
        .iter()
        .filter_map(|d| match parse_item_id(d) {
            Some((m, k)) if m == task.id => Some((k, d)),
            _ => None,
        })
        .collect();
    items.sort_unstable();
    items.into_iter().map(|(_, d)| d.clone()).collect()
}

/// The map's source text: the `over` dependency's output, or (`None`)
/// the variable's value, which the filled plan carries. A stored plan
/// does not carry it (it is never written in a plan): it is read from
/// what the run was filled from, else the variable's default.
/// `Ok(Err(message))`: the source has no value, which fails the map.
async fn source_of(
    store: &PgStore,
    run_id: &str,
    plan: &Plan,
    task: &SubTask,
) -> Result<Result<Option<String>, String>, PgError> {
    let Some(m) = &task.map else {
        return Ok(Ok(None));
    };
    if task.dependencies.contains(&m.over) {
        let found = store
            .results_of(run_id, std::slice::from_ref(&m.over))
            .await?;
        return Ok(
            match found
                .into_iter()
                .find(|r| r.status == TaskStatus::Completed)
            {
                Some(r) => Ok(Some(r.output)),
                None => Err(format!(
                    "map task `{}`: its source `{}` has no completed result",
                    task.id, m.over
                )),
            },
        );
    }
    if m.variable_value.is_some() {
        return Ok(Ok(None));
    }
    let given = store.inputs(run_id).await?.and_then(|i| {
        i.values
            .get(&m.over)
            .and_then(StoredValue::value)
            .map(str::to_string)
    });
    let default = || {
        plan.variables
            .iter()
            .find(|v| v.name == m.over)
            .and_then(|v| v.default.clone())
    };
    Ok(match given.or_else(default) {
        Some(v) => Ok(Some(v)),
        None => Err(format!(
            "map task `{}`: variable `{}` has no value in the run",
            task.id, m.over
        )),
    })
}

/// The store's rows for `items`: each one's content hash (its filled
/// task, its dependencies' outputs, the engine's label), and a stored
/// completed item of the same hash when the map has one (a resume).
async fn item_rows(
    store: &PgStore,
    claim: &Claim,
    label: &str,
    items: &[SubTask],
) -> Result<Vec<ItemRow>, PgError> {
    let deps = items
        .first()
        .map(|t| t.dependencies.clone())
        .unwrap_or_default();
    let found = if deps.is_empty() {
        Vec::new()
    } else {
        store.results_of(&claim.run_id, &deps).await?
    };
    let by_id: HashMap<&str, &str> = found
        .iter()
        .map(|r| (r.task_id.as_str(), r.output.as_str()))
        .collect();
    let outputs: Vec<&str> = deps
        .iter()
        .filter_map(|d| by_id.get(d.as_str()).copied())
        .collect();
    let stored = if items.is_empty() {
        Vec::new()
    } else {
        store.stored_items(&claim.run_id, &claim.task_id).await?
    };
    let mut stored = completed_items_by_hash(&claim.task_id, stored);
    Ok(items
        .iter()
        .map(|t| {
            let hash = item_hash(t, &outputs, label);
            let reused = take_stored(&mut stored, &hash, &t.id).map(|mut r| {
                r.task_id = t.id.clone();
                r
            });
            ItemRow {
                task_id: t.id.clone(),
                priority: 0,
                hash,
                dependencies: t.dependencies.clone(),
                reused,
            }
        })
        .collect())
}

/// `rows` with each item's claim priority: its remaining path in the
/// expanded plan, as the local executor orders items.
fn with_priorities(expanded: &Plan, mut rows: Vec<ItemRow>) -> Vec<ItemRow> {
    let Ok(graph) = PlanGraph::new(expanded) else {
        return rows;
    };
    for r in &mut rows {
        if let Some(i) = graph.index_of(&r.task_id) {
            r.priority = graph.remaining_path(i);
        }
    }
    rows
}

/// Joins the ended `items` (ids in item order) of map task `task` and
/// commits the map's result.
async fn join(
    store: &PgStore,
    claim: &Claim,
    task: &SubTask,
    items: &[String],
    mut results: Vec<TaskExecutionResult>,
) -> Result<MapEnd, PgError> {
    let ordered: Vec<TaskExecutionResult> = items
        .iter()
        .map(|id| match results.iter().position(|r| &r.task_id == id) {
            Some(k) => results.swap_remove(k),
            None => failed(id, "has no result in the store"),
        })
        .collect();
    let refs: Vec<&TaskExecutionResult> = ordered.iter().collect();
    done(store, claim, join_result(task, &refs)).await
}

/// Commits the map task's own `result` under `claim`. The tasks below
/// the map are judged by the items they receive, not by this result: the
/// results a resume kept for them stand
/// ([`PgStore::complete_join`]).
async fn done(
    store: &PgStore,
    claim: &Claim,
    result: TaskExecutionResult,
) -> Result<MapEnd, PgError> {
    let commit = store.complete_join(claim, &result).await?;
    Ok(MapEnd::Done(Box::new(result), commit))
}

/// A failed result of `task_id`, saying why.
fn failed(task_id: &str, why: &str) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(task_id, TaskStatus::Failed);
    r.error = Some(if why.starts_with("map task") {
        why.to_string()
    } else {
        format!("map task `{task_id}`: {why}")
    });
    r
}

/// The decision that settled map task `task`'s `before: run` gate;
/// `None` when it has no gate (or, as the claim says cannot happen, no
/// decision).
async fn decided(
    store: &PgStore,
    claim: &Claim,
    task: &ctx_model::SubTask,
) -> Result<Option<Decision>, PgError> {
    use ctx_model::approval::{GateStage, gate, settling};
    if !gate(task).is_some_and(|a| a.before == GateStage::Run) {
        return Ok(None);
    }
    let decisions = store.decisions(&claim.run_id).await?;
    Ok(settling(&decisions, &task.id, GateStage::Run, None).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_tasks_items_are_its_item_dependencies_in_item_order() {
        let mut plan = ctx_test_support::plan(&[("m", &["src", "m[10]", "m[2]", "x[0]"])]);
        let t = plan.sub_tasks.remove(0);
        assert_eq!(item_ids(&t), ["m[2]", "m[10]"]);
    }

    #[test]
    fn a_failure_names_the_map_task_once() {
        let r = failed("m", "map task `m`: map over `src`: bad");
        assert_eq!(
            r.error.as_deref(),
            Some("map task `m`: map over `src`: bad")
        );
        let r = failed("m", "is not in the stored plan");
        assert_eq!(
            r.error.as_deref(),
            Some("map task `m`: is not in the stored plan")
        );
    }
}
