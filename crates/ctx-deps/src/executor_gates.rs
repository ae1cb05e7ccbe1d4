//! The executor's side of `before: run` gates (src/gates.rs has the
//! rules and texts): the check when a gated task is ready, the wait for
//! decisions when nothing else can run, and the held tasks recorded when
//! the run ends waiting.

use std::pin::Pin;
use std::sync::Arc;

use ctx_model::approval::{GateStage, Verdict, gate, settling};
use ctx_model::{TaskExecutionResult, TaskStatus};

use super::{ExecError, Executor, ProgressEvent, RunState, store_err};
use crate::gates::{awaiting_reason, below_awaiting_reason};

/// How a wait for decisions ended.
pub(super) enum WaitEnd {
    /// It is worth reading the decisions again: the held tasks are queued.
    Woken,
    /// Nothing is held, no wait was asked for, or its deadline passed.
    Over,
    /// The run was cancelled while it waited.
    Cancelled,
}

impl Executor {
    /// Whether ready task `i` stops at its `before: run` gate: held (no
    /// decision yet; reported once), or failed by a rejection (its
    /// dependents skipped). An approved task goes on, its decision kept
    /// for its span. A map's join turn and a reused result owing its
    /// summary pass: their gate was opened before.
    pub(super) async fn gate_holds<P>(
        &self,
        run: &mut RunState,
        i: usize,
        progress: &mut P,
    ) -> Result<bool, ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = Arc::clone(&run.ctx);
        let task = &ctx.plan.sub_tasks[i];
        let gated = gate(task).is_some_and(|a| a.before == GateStage::Run);
        if !gated
            || self.options.ignore_gates
            || run.expanded[i]
            || run.pending_summary[i].is_some()
        {
            return Ok(false);
        }
        let decisions = crate::offload::decisions(&self.store)
            .await
            .map_err(|source| store_err(&task.id, source))?;
        match settling(&decisions, &task.id, GateStage::Run, None) {
            Some(d) if d.verdict == Verdict::Approve => {
                run.approvals[i] = Some(d.clone());
                Ok(false)
            }
            Some(d) => {
                let r = crate::gates::rejected_result(&task.id, d);
                self.settle(run, i, r, false, progress).await?;
                Ok(true)
            }
            None => {
                if !run.held.contains(&i) {
                    run.held.push(i);
                }
                if !std::mem::replace(&mut run.announced[i], true) {
                    progress(&ProgressEvent::AwaitingApproval {
                        task_id: task.id.clone(),
                        message: gate(task).and_then(|a| a.message.clone()),
                    });
                }
                Ok(true)
            }
        }
    }

    /// Nothing is in flight or ready: with tasks held and a wait asked
    /// for ([`ExecutorOptions::approval_wait`](crate::ExecutorOptions::approval_wait)),
    /// sleeps until its wake-up, its deadline or the cancellation; then
    /// queues the held tasks again, to read their decisions.
    pub(super) async fn wait_for_decisions<C>(
        &self,
        run: &mut RunState,
        mut cancel: Pin<&mut C>,
    ) -> WaitEnd
    where
        C: Future<Output = ()>,
    {
        let Some(wait) = &self.options.approval_wait else {
            return WaitEnd::Over;
        };
        if run.held.is_empty() {
            return WaitEnd::Over;
        }
        if tokio::time::Instant::now() >= wait.deadline() {
            return WaitEnd::Over;
        }
        tokio::select! {
            biased;
            () = &mut cancel => return WaitEnd::Cancelled,
            _ = wait.wait_once() => {}
        }
        let held = std::mem::take(&mut run.held);
        run.requeue(&held);
        WaitEnd::Woken
    }

    /// The run ends with tasks held: each is stored `pending` with its
    /// gate's message, and so is everything below it that has no result
    /// (it waits too; a resume runs them). Returns the held ids in plan
    /// order. An interrupted run leaves them to the skips.
    pub(super) async fn settle_held(&self, run: &mut RunState) -> Result<Vec<String>, ExecError> {
        if run.interrupted {
            return Ok(Vec::new());
        }
        let ctx = Arc::clone(&run.ctx);
        let g = &ctx.graph;
        let mut held = std::mem::take(&mut run.held);
        held.sort_unstable();
        held.retain(|&i| run.results[i].is_none());
        for &i in &held {
            let task = &ctx.plan.sub_tasks[i];
            let mut r = TaskExecutionResult::new(&task.id, TaskStatus::Pending);
            r.error = gate(task).map(awaiting_reason);
            self.store_pending(run, i, r).await?;
        }
        for &i in &held {
            for d in g.transitive_dependents(i) {
                if run.results[d].is_some() {
                    continue;
                }
                let direct = g.dependencies(d).any(|x| x == i);
                let mut r = TaskExecutionResult::new(g.id(d), TaskStatus::Pending);
                r.error = Some(below_awaiting_reason(g.id(i), direct));
                self.store_pending(run, d, r).await?;
            }
        }
        Ok(held.iter().map(|&i| g.id(i).to_string()).collect())
    }

    /// Stores `r` (a `pending` result) as task `i`'s, without releasing or
    /// skipping anything.
    async fn store_pending(
        &self,
        run: &mut RunState,
        i: usize,
        mut r: TaskExecutionResult,
    ) -> Result<(), ExecError> {
        run.stamp_item_count(i, &mut r);
        crate::offload::store(&self.store, r.clone())
            .await
            .map_err(|source| store_err(&r.task_id, source))?;
        run.finish(i, r);
        Ok(())
    }
}
