//! The executor's turn for a map task (src/map.rs has the expansion
//! itself): the first time the map task is popped, its dependencies are
//! done and it expands; the second time, its items have all ended and it
//! joins. Neither turn calls an engine, holds a concurrency slot or
//! reserves budget: each item does, as any task.

use std::sync::Arc;

use ctx_model::{TaskExecutionResult, TaskStatus};

use super::{ExecError, Executor, ProgressEvent, RunState};
use crate::budget::Budget;
use crate::map::{expand_map, join_result, plan_with_items};

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
        let over = task.map.as_ref().map(|m| m.over.as_str()).unwrap_or("");
        let source = task
            .dependencies
            .iter()
            .any(|d| d == over)
            .then(|| ctx.graph.index_of(over))
            .flatten()
            .and_then(|s| run.results[s].as_ref())
            .map(|r| r.output.as_str());
        let items = match expand_map(task, source) {
            Ok(items) => items,
            Err(e) => {
                let mut r = TaskExecutionResult::new(&task.id, TaskStatus::Failed);
                r.error = Some(format!("map task `{}`: {e}", task.id));
                return self.settle(run, i, r, false, progress).await;
            }
        };
        let before = ctx.graph.len();
        let count = items.len();
        let plan = plan_with_items(&ctx.plan, i, items);
        let expanded = Arc::new(ctx.expanded(plan, &self.options)?);
        let after = expanded.graph.len();
        if let Some(b) = budget {
            b.extend(&expanded.plan.sub_tasks[before..]);
        }
        let level = run.queue.level_of(i);
        run.queue.grow(after, level);
        run.results.resize(after, None);
        run.pending_summary.resize(after, None);
        run.summary_only.resize(after, false);
        run.expanded.resize(after, false);
        run.item_of.resize(after, Some(i));
        run.ctx = expanded;
        if count == 0 {
            return self.join_map(run, i, progress).await;
        }
        run.queue.wait_for(i, count);
        for k in before..after {
            run.queue.push(k, &run.ctx.graph);
        }
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
        self.settle(run, i, r, false, progress).await
    }
}
