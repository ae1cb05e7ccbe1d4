//! The ready-queue executor.
//!
//! ## Scheduling
//!
//! A task becomes *ready* the moment every one of its dependencies has a
//! `completed` result in the [`ExecutionStore`]. Ready tasks wait in a
//! priority queue ordered by remaining path length
//! ([`PlanGraph::remaining_path`]), ties broken by plan order, and are
//! dispatched while fewer than `concurrency` tasks are in flight (or,
//! with an engine that sends batches, a batch's worth:
//! [`InferenceEngine::batch_capacity`]). There are
//! no level barriers: a task deep in the graph starts as soon as its own
//! inputs exist, whatever its siblings are doing. [`Schedule::Levels`]
//! (batch by dependency level, wait for the whole level) is kept only so the
//! benchmark can show what the ready queue gains.
//!
//! Several executors may share one limit on engine calls
//! ([`ExecutorOptions::dispatch_gate`], what `ctx eval` runs its variants
//! under): a dispatched task then waits for a permit before its work
//! begins, and that wait counts neither against its timeout nor in its
//! recorded time.
//!
//! With `config.cache_warm_up: K`, the items of a map that become ready
//! together, K or more, share one warm-up call: the first sent goes
//! alone, and its siblings popped meanwhile are held out of the queue
//! (no slot, no budget) until its first token arrives or its job ends
//! (src/warm_up.rs).
//!
//! ## One task
//!
//! Each dispatched task runs as a job (src/task.rs), whose attempt loop
//! (src/attempt.rs) takes these steps, one function each:
//!
//! 1. The dependencies' results are read with
//!    [`ExecutionStore::get_by_dependency_ids`].
//! 2. The prompt is assembled by [`ctx_prompt::assemble_task_prompt`] under
//!    the plan's `max_prompt_tokens`, counted with the task's tokenizer
//!    ([`ctx_prompt::tokenizer_for_task`]). An [`AssemblyError`] fails the
//!    task before any engine call.
//! 3. An `in_progress` result holding the exact prompt is stored.
//! 4. The engine runs, bounded in time by [`ExecutorOptions::task_timeout`]
//!    (default [`DEFAULT_TASK_TIMEOUT`](crate::DEFAULT_TASK_TIMEOUT); on
//!    expiry its future is dropped and the task fails with outcome
//!    `timeout`) and in output by
//!    [`ExecutorOptions::max_output_bytes`] (default
//!    [`DEFAULT_MAX_OUTPUT_BYTES`](crate::DEFAULT_MAX_OUTPUT_BYTES)),
//!    which travels with the request so the engine stops reading in time,
//!    and is checked again on what comes back. A `completed` or `failed`
//!    result is stored. A dependent is dispatched only after the
//!    `completed` result's `store` has returned.
//! 5. When the task has checks (and the engine answers prompts), they run
//!    on the output; a failure is retried with a feedback section, up to
//!    `config.max_check_attempts` attempts in all, and a last failure fails
//!    the task naming every failed check. See [`checking`](crate::checking).
//!
//! ## Failure, skip, cancellation
//!
//! A failed task marks every transitive dependent `skipped`, with an error
//! naming the failed task ("dependency \`a\` failed" for a direct
//! dependent, "upstream task \`a\` failed" further down); tasks on
//! independent branches run on. When the
//! cancellation future resolves (Ctrl-C, SIGTERM or SIGHUP in the CLI),
//! dispatching stops, the
//! in-flight futures are dropped (engines clean up on drop: a command is
//! killed, a request aborted), in-flight tasks are stored `failed` with
//! `interrupted`, never-started ones `skipped`, and a full [`RunReport`] is
//! still returned.
//!
//! ## Budget
//!
//! With [`ExecutorOptions::cost`] holding a
//! [`max_cost`](crate::CostOptions::max_cost), every task reserves its high
//! end ([`CostModel::bound`](crate::CostModel::bound)) in a
//! [`BudgetLedger`](crate::BudgetLedger) just before it is dispatched, and settles its actual
//! cost ([`crate::task_cost`]) when its result comes back, which returns
//! the unused part. A ready task whose reservation does not fit while
//! other tasks are in flight waits (cheaper ready tasks may go first) and
//! is tried again after the next settlement; once nothing in flight could
//! free enough, it ends `skipped` with an error starting `budget`, and so
//! do its dependents. Reservation and settlement happen only here, in the
//! dispatch loop, so the ledger sees every task exactly once. As long as
//! no call can cost more than its task's bound — which holds when every
//! task has `max_tokens` and the engine stops there, or
//! [`cut_output_at_max_tokens`](crate::CostOptions::cut_output_at_max_tokens)
//! cuts it — the run never spends more than the budget.
//!
//! With [`CostOptions::shared_budget`](crate::CostOptions::shared_budget)
//! the ledger is shared with other executors running at once (`ctx eval`'s
//! variant runs): reservations are keyed by a scope of this run's own, and
//! a ready task that must wait for reservations another run holds is tried
//! again whenever any run settles, so a run with nothing of its own in
//! flight waits instead of ending.
//!
//! ## Resume
//!
//! With [`ExecutorOptions::reuse_completed`], a task whose stored result is
//! already `completed` is not executed again; its stored output feeds its
//! dependents. Ids in [`ExecutorOptions::force_rerun`], and everything
//! downstream of them, run again regardless, except below a map task:
//! what depends on a map is taken as stored only when the items it
//! receives digest as they did (`reuse_deferred`), whatever forced the
//! map. Below the ids of [`ExecutorOptions::rerun_requested`] (`ctx run
//! --rerun`) everything runs again, through maps, whose items are then
//! not taken from the store either.
//!
//! [`AssemblyError`]: ctx_prompt::AssemblyError

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ctx_cost::{Reservation, Usd};
use ctx_engine::{FirstToken, InferenceEngine};
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::{ExecutionStore, StoreError, skip_reason};
use tokio::time::Instant;
use tracing::Instrument;

use crate::budget::{Budget, settled_elsewhere};
use crate::cost::CostSummary;
use crate::engine_call::millis;
use crate::graph::{GraphError, PlanGraph};
use crate::in_flight::{Dispatched, InFlight, Joined};
use crate::options::{ExecutorOptions, Schedule, concurrency_limit};
use crate::scheduling::ReadyQueue;
use crate::task::{Reused, TaskContext, run_job};
use crate::warm_up::WarmUp;

/// What the executor reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ProgressEvent {
    /// A task was dispatched.
    Started {
        /// Its id.
        task_id: String,
    },
    /// A task reached a terminal status (including `skipped`).
    Finished {
        /// Its id.
        task_id: String,
        /// `completed`, `failed` or `skipped`.
        status: TaskStatus,
        /// The error of a failed or skipped task.
        error: Option<String>,
    },
    /// A task's earlier `completed` result was reused.
    Reused {
        /// Its id.
        task_id: String,
    },
    /// A map task expanded into `items` item tasks, each of which will be
    /// reported as any task (reused, or started and finished).
    Expanded {
        /// The map task's id.
        task_id: String,
        /// How many items it has.
        items: usize,
    },
    /// A task's `before: run` gate has no decision: the task is held
    /// (reported once, when it is first held).
    AwaitingApproval {
        /// Its id.
        task_id: String,
        /// The gate's `message`.
        message: Option<String>,
    },
}

/// A run's outcome: every task's final result, even when interrupted.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Ids in the order their tasks were dispatched (reused tasks are not
    /// dispatched and do not appear).
    pub order: Vec<String>,
    /// Every task's final result, in plan order.
    pub results: Vec<TaskExecutionResult>,
    /// Ids whose earlier completed result was reused.
    pub reused: Vec<String>,
    /// The run was cancelled before every task finished.
    pub interrupted: bool,
    /// From the first dispatch to the last result (tokio clock).
    pub makespan: Duration,
    /// What the run spent, when it was given [`ExecutorOptions::cost`].
    pub cost: Option<CostSummary>,
    /// The tasks whose `before: run` gate had no decision when the run
    /// ended, in plan order (stored `pending`, as is everything below
    /// them; [`crate::gates`]).
    pub awaiting: Vec<String>,
}

impl RunReport {
    /// Whether every task completed, counting as completed a map item
    /// whose map task completed anyway (its failure was within
    /// `map.allow_failures`): such a run exits 0, and the summary still
    /// counts the failed item.
    pub fn all_completed(&self) -> bool {
        let completed: BTreeSet<&str> = self
            .results
            .iter()
            .filter(|r| r.status == TaskStatus::Completed)
            .map(|r| r.task_id.as_str())
            .collect();
        self.results.iter().all(|r| {
            r.status == TaskStatus::Completed
                || ctx_model::map::parse_item_id(&r.task_id)
                    .is_some_and(|(map, _)| completed.contains(map))
        })
    }

    /// Whether no task failed or was skipped: every one completed (as
    /// [`Self::all_completed`] counts), or waits for an approval
    /// (`pending` below a held gate).
    pub fn only_waiting(&self) -> bool {
        let completed = self.all_completed();
        completed
            || self.results.iter().all(|r| {
                matches!(r.status, TaskStatus::Completed | TaskStatus::Pending)
                    || r.status == TaskStatus::Failed
                        && ctx_model::map::parse_item_id(&r.task_id).is_some_and(|(map, _)| {
                            self.results
                                .iter()
                                .any(|m| m.task_id == map && m.status == TaskStatus::Completed)
                        })
            })
    }

    /// How many tasks ended with `status`.
    pub fn count(&self, status: TaskStatus) -> usize {
        self.results.iter().filter(|r| r.status == status).count()
    }
}

/// A run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The plan is not a runnable DAG.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The store failed; the run stopped (in-flight tasks were cancelled).
    #[error("task `{task_id}`: {source}")]
    Store {
        /// The task being stored or read for.
        task_id: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

/// Runs one plan on one engine against one store.
///
/// ```
/// use std::sync::Arc;
/// use ctx_deps::{Executor, ExecutorOptions};
/// use ctx_engine::DryRunEngine;
/// use ctx_store::MemoryStore;
///
/// let plan: ctx_model::Plan = serde_json::from_str(r#"{"schema_version": 1, "sub_tasks": [
///   {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a."}}},
///   {"id": "b", "description": "B", "dependencies": ["a"],
///    "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b."}}}
/// ]}"#).unwrap();
/// let exec = Executor::new(plan, Arc::new(DryRunEngine), Arc::new(MemoryStore::new()),
///                          ExecutorOptions::default()).unwrap();
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let report = rt.block_on(exec.run());
/// let report = report.unwrap();
/// assert_eq!(report.order, ["a", "b"]);
/// assert!(report.all_completed());
/// ```
pub struct Executor {
    ctx: Arc<TaskContext>,
    store: Arc<dyn ExecutionStore>,
    options: ExecutorOptions,
}

impl Executor {
    /// An executor for `plan`. The plan should have passed validation; the
    /// structural checks the schedule depends on are repeated here.
    pub fn new(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        store: Arc<dyn ExecutionStore>,
        mut options: ExecutorOptions,
    ) -> Result<Executor, GraphError> {
        // A plan with a canary gets its token here, hidden by the mask
        // of both doors below.
        crate::canary::settle(&plan, &mut options);
        Ok(Executor {
            ctx: Arc::new(TaskContext::new(plan, engine, &options)?),
            // The store's door: every result is stored with the run's
            // secrets masked (ctx_store::secret_mask).
            store: ctx_store::masked_store(store, &options.secret_mask),
            options,
        })
    }

    /// The plan's graph.
    pub fn graph(&self) -> &PlanGraph {
        &self.ctx.graph
    }

    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        &self.ctx.plan
    }

    /// Runs every task to a terminal status, without cancellation or
    /// progress reporting.
    pub async fn run(&self) -> Result<RunReport, ExecError> {
        self.run_with(std::future::pending(), |_| {}).await
    }

    /// Runs until every task is terminal or `cancel` resolves, reporting
    /// each start and finish to `progress` (called on the dispatching task,
    /// never concurrently).
    ///
    /// Must be awaited inside a Tokio runtime with the time driver enabled:
    /// each task runs as a spawned Tokio task, so prompt assembly of ready
    /// tasks proceeds in parallel on a multi-threaded runtime.
    ///
    /// The run in steps, one function each: reuse what a resumed run
    /// completed (`reuse_completed`), release the tasks with nothing
    /// to wait for, then loop (`dispatch_until_done`): dispatch what may
    /// start (`dispatch`), wait for a task or the cancellation, settle what
    /// finished (`settle_joined`, which releases or skips its dependents).
    /// After a cancellation or a fatal store error: drain what is in flight
    /// (`drain`), record the cancelled tasks
    /// (`settle_cancelled`) and the ones never reached
    /// (`skip_unreached`), and sum the cost.
    pub async fn run_with<C, P>(&self, cancel: C, mut progress: P) -> Result<RunReport, ExecError>
    where
        C: Future<Output = ()> + Send,
        P: FnMut(&ProgressEvent) + Send,
    {
        let ctx = Arc::clone(&self.ctx);
        let g = &ctx.graph;
        let mut run = RunState::new(
            self.options.schedule,
            Arc::clone(&ctx),
            ctx.priorities.clone(),
        );
        if self.options.reuse_completed {
            self.reuse_completed(&mut run, &mut progress).await?;
        }
        run.release_initial(g);

        let started = Instant::now();
        // A dry run settles completions in dispatch order (in_flight.rs).
        let mut flight = InFlight::new(!ctx.engine.answers_prompts());
        let budget = Budget::new(&ctx.plan, ctx.cost.as_ref());
        tokio::pin!(cancel);
        let end = self
            .dispatch_until_done(
                &mut run,
                &mut flight,
                budget.as_ref(),
                cancel.as_mut(),
                &mut progress,
            )
            .await?;
        let (interrupted, mut fatal) = match end {
            LoopEnd::Done => (false, None),
            LoopEnd::Interrupted => (true, None),
            LoopEnd::Fatal(e) => (false, Some(e)),
        };

        // Cancelled or a fatal store error: drop in-flight futures. Tasks
        // that finished in the meantime keep their real result.
        self.drain(
            &mut run,
            &mut flight,
            budget.as_ref(),
            &mut fatal,
            &mut progress,
        )
        .await?;
        if let Some(e) = fatal {
            return Err(e);
        }
        run.interrupted = interrupted;
        self.settle_cancelled(&mut run, flight.dispatched, &mut progress)
            .await?;
        let awaiting = self.settle_held(&mut run).await?;
        self.skip_unreached(&mut run, &mut progress).await?;
        let cost = self.cost_summary(&run);
        let mut results = run.results_in_plan_order();
        // The report's door: what is printed or written from the report
        // is masked as the store is.
        for r in &mut results {
            self.options.secret_mask.apply_result(r);
        }
        Ok(RunReport {
            order: run.order,
            results,
            reused: run.reused,
            interrupted,
            makespan: started.elapsed(),
            cost,
            awaiting,
        })
    }

    /// The dispatch loop: dispatch what may start, wait for a job, the
    /// cancellation or (with a shared budget, while tasks wait for it)
    /// another run's settlement, settle what came back; until nothing is
    /// in flight or waiting, the run is cancelled, or a job's store failed.
    async fn dispatch_until_done<C, P>(
        &self,
        run: &mut RunState,
        flight: &mut InFlight,
        budget: Option<&Budget>,
        mut cancel: Pin<&mut C>,
        progress: &mut P,
    ) -> Result<LoopEnd, ExecError>
    where
        C: Future<Output = ()>,
        P: FnMut(&ProgressEvent),
    {
        // With a shared budget, tasks waiting for budget that other runs
        // hold are tried again whenever any run settles.
        let mut settlements = budget.and_then(Budget::settlements);
        loop {
            if let Some(watch) = &mut settlements {
                // A settlement from here on wakes the wait below.
                watch.borrow_and_update();
            }
            let waiting = self.dispatch(run, flight, budget, progress).await?;
            let watch = settlements.as_mut().filter(|_| waiting);
            if flight.is_empty() && watch.is_none() {
                // Only held gates are left: wait for a decision, if asked.
                match self.wait_for_decisions(run, cancel.as_mut()).await {
                    gates::WaitEnd::Woken => continue,
                    gates::WaitEnd::Over => return Ok(LoopEnd::Done),
                    gates::WaitEnd::Cancelled => return Ok(LoopEnd::Interrupted),
                }
            }
            // A job held for its turn (a dry run) is settled first.
            if let Some(joined) = flight.in_dispatch_order() {
                if let Some(e) = self
                    .settle_joined(run, flight, budget, joined, progress)
                    .await?
                {
                    return Ok(LoopEnd::Fatal(e));
                }
                continue;
            }
            let has_jobs = !flight.jobs.is_empty();
            let warming = run.warm.warming();
            let joined = tokio::select! {
                biased;
                () = &mut cancel => return Ok(LoopEnd::Interrupted),
                // A warm-up call's first token: its held siblings go.
                Some(group) = run.warm.released(), if warming => {
                    let held = run.warm.release(group);
                    run.requeue(&held);
                    continue;
                }
                joined = flight.jobs.join_next_with_id(), if has_jobs => joined,
                () = settled_elsewhere(watch) => continue,
            };
            let Some(joined) = joined else {
                return Ok(LoopEnd::Done);
            };
            let Some(joined) = flight.came_back(joined) else {
                continue;
            };
            if let Some(e) = self
                .settle_joined(run, flight, budget, joined, progress)
                .await?
            {
                return Ok(LoopEnd::Fatal(e));
            }
        }
    }

    /// Resume: takes the stored `completed` results as they are, except
    /// forced ids and all that depends on them; a reused result that still
    /// owes summaries to dependents that will run is queued to write them.
    async fn reuse_completed<P>(
        &self,
        run: &mut RunState,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = &self.ctx;
        let g = &ctx.graph;
        let n = g.len();
        let (forced, below_map) = self.rerun_sets();
        let mut completed: Vec<Option<TaskExecutionResult>> = vec![None; n];
        for (i, &forced) in forced.iter().enumerate() {
            if forced {
                continue;
            }
            let stored = crate::offload::get_by_task_id(&self.store, g.id(i))
                .await
                .map_err(|source| store_err(g.id(i), source))?;
            let stored = stored.filter(|r| r.status == TaskStatus::Completed);
            if below_map[i] {
                if ctx.plan.sub_tasks[i].map.is_none() {
                    run.deferred[i] = stored;
                }
                continue;
            }
            completed[i] = stored;
        }
        let will_run: Vec<bool> = completed.iter().map(Option::is_none).collect();
        for (i, r) in completed.into_iter().enumerate() {
            let Some(r) = r else { continue };
            run.mark_reused(i);
            progress(&ProgressEvent::Reused {
                task_id: g.id(i).to_string(),
            });
            // Summaries owed to dependents that will run: the process
            // stopped between this task's completion and its summary.
            let owed = crate::summarize::needed_calls(
                &ctx.plan,
                g,
                i,
                &r,
                ctx.summarize_every_output,
                &|d| will_run[d],
            );
            if owed.is_empty() {
                run.finish(i, r);
            } else {
                // A job writes only those; the task is not run again.
                run.pending_summary[i] = Some((r, owed));
                run.queue.push(i, g);
            }
        }
        Ok(())
    }

    /// Per task, for a resume: whether it runs again (`forced`), and
    /// whether it is a map task or below one (`below_map`).
    ///
    /// A map task expands again on every run: its list may have changed.
    /// What depends on it is decided when it is ready
    /// (`Executor::reuse_deferred`): taken as stored when the items it
    /// receives digest as they did and its other dependencies were taken
    /// as stored. Forced ids and what depends on them run again, except
    /// that the forcing stops at a map task: it expands again anyway, and
    /// what is below it is decided by the items it receives. A map left
    /// `in_progress` by a crash therefore no longer forces a reduce whose
    /// items came back unchanged. What a user asked to run again
    /// (`--rerun`) is forced through maps too.
    fn rerun_sets(&self) -> (Vec<bool>, Vec<bool>) {
        let ctx = &self.ctx;
        let g = &ctx.graph;
        let n = g.len();
        let mut below_map = vec![false; n];
        for i in 0..n {
            if ctx.plan.sub_tasks[i].map.is_some() {
                below_map[i] = true;
                for d in g.transitive_dependents(i) {
                    below_map[d] = true;
                }
            }
        }
        let mut forced = vec![false; n];
        let mut stack: Vec<usize> = self
            .options
            .force_rerun
            .iter()
            .filter_map(|id| g.index_of(id))
            .collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut forced[i], true) || ctx.plan.sub_tasks[i].map.is_some() {
                continue;
            }
            stack.extend(g.dependents(i));
        }
        for (i, f) in forced.iter_mut().enumerate() {
            *f |= requested_reaches(&self.options, g, i);
        }
        (forced, below_map)
    }

    /// The most tasks in flight: `concurrency`, or an engine's batch
    /// capacity when larger. An engine that gathers calls into provider
    /// batches takes a whole batch's worth, so that a map's ready items go
    /// as one batch; it bounds its own real-time calls.
    fn in_flight_limit(&self, ctx: &TaskContext) -> usize {
        concurrency_limit(self.options.concurrency).max(ctx.engine.batch_capacity())
    }

    /// Starts ready tasks while fewer than `concurrency` are in flight:
    /// each reserves its budget first (one that must wait goes back to the
    /// ready queue after this round; one that can never fit is skipped),
    /// is reported started and is spawned. Returns whether a task waits
    /// for budget.
    async fn dispatch<P>(
        &self,
        run: &mut RunState,
        flight: &mut InFlight,
        budget: Option<&Budget>,
        progress: &mut P,
    ) -> Result<bool, ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let limit = self.in_flight_limit(&run.ctx);
        // Tasks whose reservation must wait for a settlement.
        let mut waiting = Vec::new();
        while flight.running() < limit {
            let Some(i) = run.queue.pop(flight.running()) else {
                break;
            };
            let ctx = Arc::clone(&run.ctx);
            let g = &ctx.graph;
            if self.reuse_deferred(run, i, progress).await? {
                continue;
            }
            // A `before: run` gate: held, rejected, or approved (gates.rs).
            if self.gate_holds(run, i, progress).await? {
                continue;
            }
            if ctx.plan.sub_tasks[i].map.is_some() {
                // A map task calls no engine: it expands, then joins.
                self.map_step(run, i, budget, progress).await?;
                continue;
            }
            // An item whose group's warm-up call is in flight waits for
            // its first token, holding no slot and no budget (warm_up.rs).
            if run.pending_summary[i].is_none() && run.warm.hold(i, run.item_of[i]) {
                continue;
            }
            // A reused result still owing its summary is not run again
            // (and reserves nothing: the task's own call was settled).
            let reused = run.pending_summary[i].take();
            run.summary_only[i] = reused.is_some();
            let mut first_token = None;
            if reused.is_none() {
                if let Some(budget) = budget {
                    match budget.reserve(g.id(i), i) {
                        Reservation::Reserved => {}
                        Reservation::MustWait { .. } => {
                            waiting.push(i);
                            continue;
                        }
                        Reservation::NeverFits {
                            needed,
                            available_at_best,
                        } => {
                            let mut r = TaskExecutionResult::new(g.id(i), TaskStatus::Skipped);
                            r.error = Some(crate::cost::budget_skip_reason(
                                needed,
                                available_at_best,
                                budget.ledger().budget(),
                            ));
                            self.settle(run, i, r, false, progress).await?;
                            continue;
                        }
                    }
                }
                let id = g.id(i).to_string();
                run.order.push(id.clone());
                progress(&ProgressEvent::Started { task_id: id });
                first_token = run.warm.first_token_for(i, run.item_of[i]);
            }
            let approval = run.approvals[i].take();
            self.spawn_job(&ctx, flight, i, reused, first_token, approval);
        }
        let any_waiting = !waiting.is_empty();
        for i in waiting {
            run.queue.push(i, &run.ctx.graph);
        }
        Ok(any_waiting)
    }

    /// Spawns task `i`'s job (see [`run_job`]); `first_token`: the
    /// signal of a warm-up call.
    fn spawn_job(
        &self,
        ctx: &Arc<TaskContext>,
        flight: &mut InFlight,
        i: usize,
        reused: Option<Reused>,
        first_token: Option<FirstToken>,
        approval: Option<ctx_model::approval::Decision>,
    ) {
        let ctx = Arc::clone(ctx);
        let store = Arc::clone(&self.store);
        let began = Arc::new(AtomicBool::new(false));
        let job_began = Arc::clone(&began);
        let handle = flight.jobs.spawn(
            async move {
                let job = run_job(
                    &ctx,
                    &store,
                    i,
                    reused,
                    &job_began,
                    first_token.as_ref(),
                    approval.as_ref(),
                );
                (i, job.await)
            }
            .in_current_span(),
        );
        flight.dispatched(
            handle.id(),
            Dispatched {
                task: i,
                at: Instant::now(),
                began,
            },
        );
    }

    /// Settles a job that came back: its result (after settling its
    /// budget), or a failed result for a panicked engine. A job whose
    /// store failed is returned as `Ok(Some(error))`: the run must stop,
    /// but only after what is in flight is drained. `Err` is a store
    /// failure while settling, which stops the run at once.
    async fn settle_joined<P>(
        &self,
        run: &mut RunState,
        flight: &mut InFlight,
        budget: Option<&Budget>,
        joined: Joined,
        progress: &mut P,
    ) -> Result<Option<ExecError>, ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = Arc::clone(&run.ctx);
        match joined {
            Ok((tid, (i, Ok(result)))) => {
                flight.dispatched.remove(&tid);
                if let Some(budget) = budget {
                    settle_budget(&run.ctx, budget, i, Some(&result));
                }
                self.settle(run, i, result, true, progress).await?;
                Ok(None)
            }
            Ok((tid, (i, Err(source)))) => {
                flight.dispatched.remove(&tid);
                Ok(Some(store_err(ctx.graph.id(i), source)))
            }
            Err(e) => {
                // The engine panicked: fail the task, not the run.
                let Some(Dispatched {
                    task: i, at: t0, ..
                }) = flight.dispatched.remove(&e.id())
                else {
                    return Ok(None);
                };
                let mut r = TaskExecutionResult::new(ctx.graph.id(i), TaskStatus::Failed);
                r.error = Some("the engine panicked while running this task".into());
                r.metadata.execution_time_ms = Some(millis(t0.elapsed()));
                if let Some(budget) = budget {
                    // What the call cost is unknown: it keeps its whole
                    // reservation.
                    settle_budget(&run.ctx, budget, i, None);
                }
                self.settle(run, i, r, false, progress).await?;
                Ok(None)
            }
        }
    }

    /// After a cancellation or a fatal store error: aborts the jobs in
    /// flight and waits for them. One that finished in the meantime keeps
    /// its real result (unless the run is failing anyway); the first store
    /// failure becomes `fatal`. The aborted ones stay in
    /// `flight.dispatched` for [`Self::settle_cancelled`].
    ///
    /// Each drained job's reservation is settled too (an aborted one at
    /// its whole reservation, its cost being unknown): a shared budget
    /// outlives this run, and other runs may wait for what it holds.
    async fn drain<P>(
        &self,
        run: &mut RunState,
        flight: &mut InFlight,
        budget: Option<&Budget>,
        fatal: &mut Option<ExecError>,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        if flight.is_empty() {
            return Ok(());
        }
        let ctx = Arc::clone(&run.ctx);
        let g = &ctx.graph;
        flight.jobs.abort_all();
        // Jobs that came back and were held for their turn first.
        let mut held = flight.take_held().into_iter();
        loop {
            let joined = match held.next() {
                Some(j) => j,
                None => match flight.jobs.join_next_with_id().await {
                    Some(j) => j,
                    None => break,
                },
            };
            match joined {
                Ok((tid, (i, Ok(result)))) => {
                    flight.dispatched.remove(&tid);
                    if let Some(budget) = budget {
                        settle_budget(&run.ctx, budget, i, Some(&result));
                    }
                    if fatal.is_none() {
                        self.settle(run, i, result, true, progress).await?;
                    }
                }
                Ok((tid, (i, Err(source)))) => {
                    flight.dispatched.remove(&tid);
                    if let Some(budget) = budget {
                        settle_budget(&run.ctx, budget, i, None);
                    }
                    fatal.get_or_insert_with(|| store_err(g.id(i), source));
                }
                Err(e) => {
                    if let (Some(budget), Some(d)) = (budget, flight.dispatched.get(&e.id())) {
                        settle_budget(&run.ctx, budget, d.task, None);
                    }
                }
            }
        }
        Ok(())
    }

    /// Records the tasks whose jobs were cancelled, in plan order: one
    /// that had completed (cancelled during its summary) keeps its
    /// `completed` result; the others fail as `interrupted`, keeping the
    /// prompt of their stored `in_progress` result.
    async fn settle_cancelled<P>(
        &self,
        run: &mut RunState,
        dispatched: HashMap<tokio::task::Id, Dispatched>,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = Arc::clone(&run.ctx);
        let g = &ctx.graph;
        let mut cancelled: Vec<Dispatched> = dispatched.into_values().collect();
        cancelled.sort_unstable_by_key(|d| d.task);
        for Dispatched {
            task: i,
            at: t0,
            began,
        } in cancelled
        {
            let previous = crate::offload::get_by_task_id(&self.store, g.id(i))
                .await
                .map_err(|source| store_err(g.id(i), source))?;
            if let Some(done) = previous
                .as_ref()
                .filter(|r| r.status == TaskStatus::Completed)
            {
                // Cancelled during its summary: the task itself completed
                // (and is stored so); `--resume` writes the summary.
                self.settle(run, i, done.clone(), true, progress).await?;
                continue;
            }
            let mut r = previous
                .filter(|r| r.status == TaskStatus::InProgress)
                .unwrap_or_else(|| TaskExecutionResult::new(g.id(i), TaskStatus::Failed));
            r.status = TaskStatus::Failed;
            let ms = millis(t0.elapsed());
            r.metadata.execution_time_ms = Some(ms);
            r.error = Some(if began.load(Ordering::Acquire) {
                format!("interrupted: cancelled while running, after {ms} ms")
            } else {
                format!(
                    "interrupted: cancelled while waiting for the shared concurrency limit, after {ms} ms"
                )
            });
            self.settle(run, i, r, false, progress).await?;
        }
        Ok(())
    }

    /// Skips every task that never got a result: the run was cancelled
    /// before it started, or a dependency never completed.
    async fn skip_unreached<P>(&self, run: &mut RunState, progress: &mut P) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = Arc::clone(&run.ctx);
        let g = &ctx.graph;
        for i in 0..g.len() {
            if run.results[i].is_none() {
                let mut r = TaskExecutionResult::new(g.id(i), TaskStatus::Skipped);
                r.error = Some(if run.interrupted {
                    INTERRUPTED_BEFORE_START.into()
                } else {
                    "not run: a dependency never completed".into()
                });
                self.settle(run, i, r, false, progress).await?;
            }
        }
        Ok(())
    }

    /// What the run spent, when it was given prices: executed tasks at
    /// their cost, budget skips at the bound they needed; reused tasks
    /// count under `earlier`.
    fn cost_summary(&self, run: &RunState) -> Option<CostSummary> {
        let ctx = &run.ctx;
        let c = ctx.cost.as_ref()?;
        let reused: BTreeSet<&str> = run.reused.iter().map(String::as_str).collect();
        let executed: BTreeSet<&str> = run.order.iter().map(String::as_str).collect();
        let mut summary = CostSummary {
            spent: Usd::ZERO,
            earlier: c.already_spent,
            budget: match &c.shared_budget {
                Some(shared) => Some(shared.ledger().budget()),
                None => c.max_cost,
            },
            needed: Usd::ZERO,
            unknown: 0,
        };
        for (i, r) in run.results.iter().enumerate() {
            let Some(r) = r else { continue };
            if reused.contains(r.task_id.as_str()) {
                continue;
            }
            if crate::cost::is_budget_skip(r) {
                let task = &ctx.plan.sub_tasks[i];
                summary.needed = summary
                    .needed
                    .saturating_add(c.model.bound(task).unwrap_or(Usd::ZERO));
            } else if executed.contains(r.task_id.as_str()) {
                summary.add_executed(r);
            }
        }
        Some(summary)
    }

    /// Records task `i`'s terminal result, stores it when the task did not
    /// store it itself, and releases ([`Self::release_dependents`]) or
    /// skips ([`Self::skip_dependents`]) its dependents.
    async fn settle<P>(
        &self,
        run: &mut RunState,
        i: usize,
        result: TaskExecutionResult,
        already_stored: bool,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = Arc::clone(&run.ctx);
        let g = &ctx.graph;
        // A warm-up call's end, however it ended, releases its group.
        let held = run.warm.ended(i);
        run.requeue(&held);
        let status = result.status;
        let mut result = result;
        // Results from `execute_task` are already stored; the executor's
        // own (interruptions, panics, a map task's) are stored here.
        if !already_stored {
            run.stamp_item_count(i, &mut result);
            crate::offload::store(&self.store, result.clone())
                .await
                .map_err(|source| store_err(g.id(i), source))?;
        }
        // A reused task whose summary was just written was reported as
        // reused, not started: it does not finish a second time.
        if !run.summary_only[i] {
            progress(&ProgressEvent::Finished {
                task_id: g.id(i).to_string(),
                status,
                error: result.error.clone(),
            });
        }
        run.finish(i, result);
        // An item's end, whatever it is, counts toward its map's join,
        // which decides (within `allow_failures`) for the map's dependents.
        if status == TaskStatus::Completed || run.item_of[i].is_some() {
            run.release_dependents(i, g);
            Ok(())
        } else {
            self.skip_dependents(run, i, progress).await
        }
    }

    /// Stores every transitive dependent of the failed (or skipped) task
    /// `i` that has no result yet as `skipped`, naming why.
    async fn skip_dependents<P>(
        &self,
        run: &mut RunState,
        i: usize,
        progress: &mut P,
    ) -> Result<(), ExecError>
    where
        P: FnMut(&ProgressEvent),
    {
        let ctx = Arc::clone(&run.ctx);
        let g = &ctx.graph;
        let failed = g.id(i).to_string();
        let budget = run.results[i]
            .as_ref()
            .is_some_and(crate::cost::is_budget_skip);
        for d in g.transitive_dependents(i) {
            if run.results[d].is_some() {
                continue;
            }
            let mut r = TaskExecutionResult::new(g.id(d), TaskStatus::Skipped);
            run.stamp_item_count(d, &mut r);
            let direct = g.dependencies(d).any(|x| x == i);
            r.error = Some(if run.interrupted {
                INTERRUPTED_BEFORE_START.to_string()
            } else if budget {
                crate::cost::budget_dependent_reason(&failed, direct)
            } else {
                skip_reason(&failed, direct)
            });
            crate::offload::store(&self.store, r.clone())
                .await
                .map_err(|source| store_err(g.id(d), source))?;
            progress(&ProgressEvent::Finished {
                task_id: g.id(d).to_string(),
                status: TaskStatus::Skipped,
                error: r.error.clone(),
            });
            run.finish(d, r);
        }
        Ok(())
    }
}

/// Settles task `i`'s reservation at what `result` cost, or at the
/// whole reservation when there is no result (a panicked engine, an
/// aborted job) or its cost is unknown.
fn settle_budget(
    ctx: &TaskContext,
    budget: &Budget,
    i: usize,
    result: Option<&TaskExecutionResult>,
) {
    let cost = result.and_then(|r| ctx.settled_cost(i, r));
    budget.settle(ctx.graph.id(i), i, cost);
}

/// Why the dispatch loop ended.
enum LoopEnd {
    /// Every task reached a result, or nothing can start any more.
    Done,
    /// The cancellation future resolved.
    Interrupted,
    /// A job's store failed: the run stops once what is in flight is
    /// drained.
    Fatal(ExecError),
}

const INTERRUPTED_BEFORE_START: &str =
    "interrupted: the run was cancelled before this task started";

fn store_err(task_id: &str, source: StoreError) -> ExecError {
    ExecError::Store {
        task_id: task_id.to_string(),
        source,
    }
}

/// The dispatcher's bookkeeping: every task's result so far, what was
/// dispatched and reused, and the ready queue ([`ReadyQueue`]).
struct RunState {
    /// The task context as the run goes: the plan and graph with the
    /// items of every map expanded so far appended (indices never move).
    ctx: Arc<TaskContext>,
    results: Vec<Option<TaskExecutionResult>>,
    queue: ReadyQueue,
    order: Vec<String>,
    reused: Vec<String>,
    /// Set once the run is cancelled: skips then say so.
    interrupted: bool,
    /// Reused completed results whose `llm` summaries are still to write,
    /// with the calls owed (see `summarize::needed_calls`).
    pending_summary: Vec<Option<Reused>>,
    /// Tasks dispatched only to write their summaries.
    summary_only: Vec<bool>,
    /// Per task: the map task it is an item of.
    item_of: Vec<Option<usize>>,
    /// Per task: a map task already expanded (its next turn is its join).
    expanded: Vec<bool>,
    /// Per task: taken as stored in this run (listed in `reused`), so its
    /// output is the stored one.
    taken: Vec<bool>,
    /// Per task below a map, on resume: its stored completed result, taken
    /// when it is ready if it would receive the same items and its other
    /// dependencies were `taken` (`Executor::reuse_deferred`).
    deferred: Vec<Option<TaskExecutionResult>>,
    /// The prefix-cache warm-up's groups and held items (warm_up.rs).
    warm: WarmUp,
    /// Tasks held by a `before: run` gate with no decision (gates).
    held: Vec<usize>,
    /// Per task: held once already (reported once).
    announced: Vec<bool>,
    /// Per task: the approval its gate was opened by, for its span.
    approvals: Vec<Option<ctx_model::approval::Decision>>,
    /// Each expanded map task's span, open from its expansion to its join
    /// (a map task calls no engine, so no job holds its span).
    map_spans: HashMap<usize, tracing::Span>,
}

impl RunState {
    fn new(schedule: Schedule, ctx: Arc<TaskContext>, priorities: Option<Vec<u64>>) -> RunState {
        let g = &ctx.graph;
        let n = g.len();
        RunState {
            item_of: vec![None; n],
            expanded: vec![false; n],
            taken: vec![false; n],
            deferred: vec![None; n],
            results: vec![None; n],
            queue: ReadyQueue::new(schedule, g, priorities),
            order: Vec::with_capacity(n),
            reused: Vec::new(),
            interrupted: false,
            pending_summary: vec![None; n],
            summary_only: vec![false; n],
            warm: WarmUp::new(&ctx.plan),
            held: Vec::new(),
            announced: vec![false; n],
            approvals: vec![None; n],
            map_spans: HashMap::new(),
            ctx,
        }
    }

    /// Queues again items a warm-up held.
    fn requeue(&mut self, held: &[usize]) {
        for &k in held {
            self.queue.push(k, &self.ctx.graph);
        }
    }

    /// Every task's result in plan order, each map's items right after
    /// their map task.
    fn results_in_plan_order(&mut self) -> Vec<TaskExecutionResult> {
        let mut items: HashMap<usize, Vec<usize>> = HashMap::new();
        for (i, m) in self.item_of.iter().enumerate() {
            if let Some(m) = m {
                items.entry(*m).or_default().push(i);
            }
        }
        let mut out = Vec::with_capacity(self.results.len());
        for i in 0..self.results.len() {
            if self.item_of[i].is_some() {
                continue;
            }
            out.extend(self.results[i].take());
            for &item in items.get(&i).into_iter().flatten() {
                out.extend(self.results[item].take());
            }
        }
        out
    }

    fn finish(&mut self, i: usize, result: TaskExecutionResult) {
        self.results[i] = Some(result);
    }

    /// Task `i` is taken as stored: listed as reused, and `taken`.
    fn mark_reused(&mut self, i: usize) {
        self.reused.push(self.ctx.graph.id(i).to_string());
        self.taken[i] = true;
    }

    /// How many items map task `i` expanded to in this run (0 before it
    /// expands).
    fn item_count(&self, i: usize) -> usize {
        self.item_of.iter().filter(|m| **m == Some(i)).count()
    }

    /// A result about to be stored for task `i`: a map task's records how
    /// many items it has in this run (`metadata.map_items`), so that the
    /// items an earlier, longer list left in the store are not taken for
    /// the run's.
    fn stamp_item_count(&self, i: usize, r: &mut TaskExecutionResult) {
        if self.ctx.plan.sub_tasks[i].map.is_some() {
            r.metadata.map_items = Some(self.item_count(i));
        }
    }

    /// Queues the tasks with nothing to wait for (reused ones and those
    /// owing a summary are already settled or queued).
    fn release_initial(&mut self, g: &PlanGraph) {
        let (results, pending) = (&self.results, &self.pending_summary);
        self.queue.release_initial(
            g,
            |i| results[i].is_none() && pending[i].is_none(),
            |d| {
                results[d]
                    .as_ref()
                    .is_some_and(|r| r.status == TaskStatus::Completed)
            },
        );
    }

    /// Task `i` completed: releases the dependents with no result yet.
    fn release_dependents(&mut self, i: usize, g: &PlanGraph) {
        let results = &self.results;
        self.queue
            .release_dependents(i, g, |d| results[d].is_some());
    }
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;

#[path = "executor_map.rs"]
mod map_step;

#[path = "executor_gates.rs"]
mod gates;

#[cfg(test)]
#[path = "executor_gates_tests.rs"]
mod gates_tests;

#[cfg(test)]
#[path = "executor_map_tests.rs"]
mod map_tests;

/// Whether task `i` is one of `options.rerun_requested` or below one
/// (through maps too): it runs again, and as a map takes none of its items
/// from the store.
pub(crate) fn requested_reaches(options: &ExecutorOptions, g: &PlanGraph, i: usize) -> bool {
    options.rerun_requested.iter().any(|id| {
        g.index_of(id)
            .is_some_and(|r| r == i || g.transitive_dependents(r).contains(&i))
    })
}
