//! The executor's turn for a map task (src/map.rs has the expansion
//! itself): the first time the map task is popped, its dependencies are
//! done and it expands; the second time, its items have all ended and it
//! joins. Neither turn calls an engine, holds a concurrency slot or
//! reserves budget: each item does, as any task.

use std::collections::HashMap;
use std::sync::Arc;

use ctx_model::{TaskExecutionResult, TaskStatus};

use super::{ExecError, Executor, ProgressEvent, RunState};
use crate::budget::Budget;
use crate::map::{
    completed_items_by_hash, expand_map, item_hash, items_digest, join_result, plan_with_items,
    prompt_dependencies, take_stored,
};

impl Executor {
    /// Map task `i`'s turn: expand it, or join its items.
    pub(super) async fn map_step<P>(
        &self,
        run: &mut RunState,
        i: usize,
        budget: Option<&Budget>,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        if run.expanded[i] {
            return self.join_map(run, i, progress).await;
        }
        run.expanded[i] = true;
        let ctx = Arc::clone(&run.ctx);
        let task = &ctx.plan.sub_tasks[i];
        run.order.push(task.id.clone());
        progress(&ProgressEvent::Started {
            task_id: task.id.clone(),
        });
        let span = map_span(run, i);
        let items = match expand_map(task, map_source(run, i)) {
            Ok(items) => items,
            Err(e) => {
                let mut r = TaskExecutionResult::new(&task.id, TaskStatus::Failed);
                r.error = Some(format!("map task `{}`: {e}", task.id));
                crate::spans::record_task(&span, &r);
                return self.settle(run, i, r, false, progress).await;
            }
        };
        run.map_spans.insert(i, span);
        let before = ctx.graph.len();
        let hashes = item_hashes(run, &items);
        let plan = plan_with_items(&ctx.plan, i, items);
        let numbered = (before..).zip(hashes.iter().cloned());
        let expanded = Arc::new(ctx.expanded(plan, &self.options, numbered)?);
        if let Some(b) = budget {
            b.extend(&expanded.plan.sub_tasks[before..]);
        }
        run.grow_for_items(i, expanded);
        let after = run.ctx.graph.len();
        progress(&ProgressEvent::Expanded {
            task_id: run.ctx.graph.id(i).to_string(),
            items: after - before,
        });
        let mut stored = if self.options.reuse_completed
            && !super::requested_reaches(&self.options, &run.ctx.graph, i)
        {
            self.stored_items(&run.ctx.plan.sub_tasks[i].id).await?
        } else {
            HashMap::new()
        };
        // The map is started with its item count: from here on, a listing
        // of the run (even of one that dies mid-map) shows this list's
        // items, not those an earlier, longer list left.
        let mut started = TaskExecutionResult::new(run.ctx.graph.id(i), TaskStatus::InProgress);
        run.stamp_item_count(i, &mut started);
        crate::offload::store(&self.store, started)
            .await
            .map_err(|source| super::store_err(run.ctx.graph.id(i), source))?;
        let mut waiting = 0;
        for (k, hash) in (before..after).zip(hashes) {
            // Equal items share a hash: each takes a stored one of its
            // own, the one stored under its id when there is one.
            match take_stored(&mut stored, &hash, run.ctx.graph.id(k)) {
                Some(done) => self.reuse_item(run, k, done, progress).await?,
                None => {
                    waiting += 1;
                    run.queue.push(k, &run.ctx.graph);
                }
            }
        }
        if waiting == 0 {
            return self.join_map(run, i, progress).await;
        }
        run.queue.wait_for(i, waiting);
        run.warm.expanded(i, waiting);
        Ok(())
    }

    /// A resumed run's stored completed items of map task `map_id`, by
    /// content hash (every stored one of each hash, as a list may hold
    /// equal items). Items an earlier, longer list left beyond the last
    /// count are included: a stored result of the same content is as
    /// good under any id.
    async fn stored_items(
        &self,
        map_id: &str,
    ) -> Result<HashMap<String, Vec<TaskExecutionResult>>, ExecError> {
        let all = crate::offload::all_results(&self.store)
            .await
            .map_err(|source| super::store_err(map_id, source))?;
        Ok(completed_items_by_hash(map_id, all))
    }

    /// On resume, task `i` below a map takes its stored completed result
    /// when the items its prompt receives now digest as those it received
    /// then ([`items_digest`]: same ids, same outputs or failure notes,
    /// none added or gone) and each of its other dependencies was taken
    /// as stored in this run (the `make` rule of `ResumePlan`). Returns
    /// whether it did; otherwise it runs.
    pub(super) async fn reuse_deferred<P>(
        &self,
        run: &mut RunState,
        i: usize,
        progress: &mut P,
    ) -> Result<bool, ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let Some(done) = run.deferred.get_mut(i).and_then(Option::take) else {
            return Ok(false);
        };
        let ctx = Arc::clone(&run.ctx);
        let g = &ctx.graph;
        let others_taken = g
            .dependencies(i)
            .all(|d| ctx.plan.sub_tasks[d].map.is_some() || run.taken[d]);
        let now = items_digest(
            &ctx.plan,
            prompt_dependencies(&ctx.plan, g, i)
                .into_iter()
                .filter_map(|d| run.results[d].as_ref()),
        );
        if !others_taken || done.metadata.map_inputs != now {
            return Ok(false);
        }
        progress(&ProgressEvent::Reused {
            task_id: done.task_id.clone(),
        });
        run.mark_reused(i);
        run.finish(i, done);
        run.release_dependents(i, &Arc::clone(&run.ctx).graph);
        Ok(true)
    }

    /// Item `k` takes a stored completed result of the same content: under
    /// its own id (stored again when the item moved in the list), reported
    /// as reused.
    async fn reuse_item<P>(
        &self,
        run: &mut RunState,
        k: usize,
        mut done: TaskExecutionResult,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let id = run.ctx.graph.id(k).to_string();
        if done.task_id != id {
            done.task_id = id.clone();
            crate::offload::store(&self.store, done.clone())
                .await
                .map_err(|source| super::store_err(&id, source))?;
        }
        progress(&ProgressEvent::Reused { task_id: id });
        run.mark_reused(k);
        run.finish(k, done);
        Ok(())
    }

    /// Map task `i`'s items have all ended: its own result, within
    /// `map.allow_failures`, settles it and so releases or skips its
    /// dependents.
    async fn join_map<P>(
        &self,
        run: &mut RunState,
        i: usize,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = Arc::clone(&run.ctx);
        let items: Vec<&TaskExecutionResult> = run
            .item_of
            .iter()
            .enumerate()
            .filter(|(_, m)| **m == Some(i))
            .filter_map(|(k, _)| run.results[k].as_ref())
            .collect();
        let r = join_result(&ctx.plan.sub_tasks[i], &items);
        // Closing the span ends it at the join.
        if let Some(span) = run.map_spans.remove(&i) {
            crate::spans::record_task(&span, &r);
        }
        self.settle(run, i, r, false, progress).await
    }
}

/// Map task `i`'s span, opened as it expands, with the approval its
/// gate was opened by (a `ctx.approval` event, as a task's job puts on
/// its own span).
fn map_span(run: &mut RunState, i: usize) -> tracing::Span {
    let approval = run.approvals[i].take();
    crate::gates::approved_span(run.ctx.graph.id(i), approval.as_ref())
}

/// The output map task `i` is mapped over: its `over` dependency's, when
/// that is one of its dependencies and has a result.
fn map_source(run: &RunState, i: usize) -> Option<&str> {
    let ctx = &run.ctx;
    let task = &ctx.plan.sub_tasks[i];
    let over = task.map.as_ref().map(|m| m.over.as_str()).unwrap_or("");
    task.dependencies
        .iter()
        .any(|d| d == over)
        .then(|| ctx.graph.index_of(over))
        .flatten()
        .and_then(|s| run.results[s].as_ref())
        .map(|r| r.output.as_str())
}

/// Each item's content hash (`map::item_hash`): what a resume matches a
/// stored item by. The items share their dependencies, so the outputs
/// are read once, from the first.
fn item_hashes(run: &RunState, items: &[ctx_model::SubTask]) -> Vec<String> {
    let ctx = &run.ctx;
    let outputs: Vec<&str> = items
        .first()
        .map(|t| t.dependencies.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|d| ctx.graph.index_of(d))
        .filter_map(|d| run.results[d].as_ref())
        .map(|r| r.output.as_str())
        .collect();
    let label = ctx.engine.label();
    items
        .iter()
        .map(|t| item_hash(t, &outputs, &label))
        .collect()
}

impl RunState {
    /// Takes `expanded`, the context with map task `map`'s items appended,
    /// and gives every per-task vector a slot for each new item, at the
    /// map's level in the queue (indices never move).
    fn grow_for_items(&mut self, map: usize, expanded: Arc<crate::task::TaskContext>) {
        let after = expanded.graph.len();
        let level = self.queue.level_of(map);
        self.queue.grow(after, level);
        self.results.resize(after, None);
        self.pending_summary.resize(after, None);
        self.summary_only.resize(after, false);
        self.expanded.resize(after, false);
        self.item_of.resize(after, Some(map));
        self.deferred.resize(after, None);
        self.taken.resize(after, false);
        self.announced.resize(after, false);
        self.approvals.resize(after, None);
        self.ctx = expanded;
    }
}
