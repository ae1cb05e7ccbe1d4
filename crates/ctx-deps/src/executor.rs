//! The ready-queue executor.
//!
//! ## Scheduling
//!
//! A task becomes *ready* the moment every one of its dependencies has a
//! `completed` result in the [`ExecutionStore`]. Ready tasks wait in a
//! priority queue ordered by remaining path length
//! ([`PlanGraph::remaining_path`]), ties broken by plan order, and are
//! dispatched while fewer than `concurrency` tasks are in flight. There are
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
//! ## One task
//!
//! 1. The dependencies' results are read with
//!    [`ExecutionStore::get_by_dependency_ids`].
//! 2. The prompt is assembled by [`ctx_prompt::assemble_task_prompt`] under
//!    the plan's `max_prompt_tokens`, counted with the task's tokenizer
//!    ([`ctx_prompt::tokenizer_for_task`]). An [`AssemblyError`] fails the
//!    task before any engine call.
//! 3. An `in_progress` result holding the exact prompt is stored.
//! 4. The engine runs, bounded in time by [`ExecutorOptions::task_timeout`]
//!    (default [`DEFAULT_TASK_TIMEOUT`]; on expiry its future is dropped
//!    and the task fails with outcome `timeout`) and in output by
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
//! [`BudgetLedger`] just before it is dispatched, and settles its actual
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
//! downstream of them, run again regardless.
//!
//! [`AssemblyError`]: ctx_prompt::AssemblyError

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ctx_model::{CallOutcome, FinishReason, Plan, TaskExecutionResult, TaskStatus, TokenUsage};
use ctx_prompt::DependencyOutput;
use ctx_tokens::{TokenCounter, Tokenizer, TokenizerExt};
use tokio::task::JoinSet;
use tokio::time::Instant;

use ctx_cost::{Reservation, Usd};

use crate::cost::{BudgetLedger, CostOptions, CostSummary, SharedBudget};
use crate::graph::{GraphError, PlanGraph};
use ctx_engine::{EngineError, InferenceEngine, InferenceRequest};
use ctx_store::{ExecutionStore, StoreError, skip_reason};

/// The default number of tasks in flight.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// The default bound on one task's engine call (one hour).
///
/// Long enough for the slowest honest case the defaults allow (the HTTP
/// engine's four attempts of up to ten minutes each, with backoff), short
/// enough that a command that hangs forever does not hold a scheduled job
/// for ever. [`ExecutorOptions::task_timeout`] overrides it; `None` means
/// no bound (`ctx run --task-timeout 0`).
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(3600);

/// How ready tasks are dispatched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Each task starts as soon as its dependencies are completed, longest
    /// remaining path first.
    #[default]
    ReadyQueue,
    /// Batch by dependency level: level `n + 1` starts only when all of
    /// level `n` has finished. Kept for benchmark comparison only.
    Levels,
}

/// The most tasks in flight that a `concurrency` setting allows: `0` means
/// no limit. The one reading of the setting, for the executor and for a
/// shared-store worker alike.
pub fn concurrency_limit(concurrency: usize) -> usize {
    if concurrency == 0 {
        usize::MAX
    } else {
        concurrency
    }
}

/// How a run behaves.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Most tasks in flight at once; `0` means unlimited.
    pub concurrency: usize,
    /// Ready queue (the default) or level batches.
    pub schedule: Schedule,
    /// Do not execute tasks whose stored result is already `completed`.
    pub reuse_completed: bool,
    /// With `reuse_completed`: ids executed again anyway, together with
    /// everything that depends on them.
    pub force_rerun: BTreeSet<String>,
    /// Bound on each task's engine call, retries included; `None` means
    /// none. When it expires the engine's future is dropped (a command's
    /// process group is killed, a request aborted) and the task fails with
    /// outcome `timeout`. Each of a task's other calls is bounded the same
    /// way on its own: a `judge` check's call (which then fails that
    /// check, not the run) and an `llm` summary.
    pub task_timeout: Option<Duration>,
    /// Bound on each task's output in bytes, passed to the engine as
    /// [`InferenceRequest::max_output_bytes`] and checked again on what it
    /// returns.
    pub max_output_bytes: usize,
    /// Prices: each task's `cost_usd`, and optionally a budget
    /// (module documentation, "Budget"). `None`: no costs are recorded.
    pub cost: Option<CostOptions>,
    /// Under `summarize_strategy: llm`, summarise every output a dependent
    /// receives under `llm`, whatever its length. For the dry run, whose
    /// placeholder outputs are never long: its prompts then show where a
    /// summary goes.
    pub summarize_every_output: bool,
    /// Which context prompts get: everything (the default), or a variant
    /// of `ctx eval` that leaves entities and/or dependency outputs out.
    pub context: ContextVariant,
    /// A limit on engine work shared with other executors (or task
    /// runners): each dispatched job holds one permit from the moment its
    /// engine work begins (dependency reads, prompt assembly, the task's
    /// calls, judges and retries, its `llm` summaries) until it ends.
    /// `None`: only [`Self::concurrency`] limits this run.
    ///
    /// Why a semaphore beside `concurrency`: `ctx eval` runs every variant
    /// and repeat at once, and `--concurrency` is the limit on what the
    /// *user's engine* sees, not per run. Each run keeps its own ready
    /// queue and priorities; the gate only decides which dispatched job
    /// goes next, in the order they asked (tokio's semaphore is fair).
    /// A job makes its engine calls one after another, so the permits in
    /// use bound the engine calls in flight.
    ///
    /// Waiting for the gate is not running: [`Self::task_timeout`] bounds
    /// each engine call from its start, and a task's
    /// `execution_time_ms` starts once the permit is held, so a run that
    /// waits behind others neither times out nor looks slow. A job
    /// cancelled while it waits is recorded as interrupted before it began.
    pub dispatch_gate: Option<Arc<tokio::sync::Semaphore>>,
}

/// The context a prompt is assembled with: the variants `ctx eval`
/// compares. A variant changes only what it names: checks (the `entities`
/// check too) and the schedule stay as designed, so `no-dependencies`
/// still waits for the dependencies it leaves out of the prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContextVariant {
    /// Entities and dependency outputs, as designed.
    #[default]
    Full,
    /// The entity block left out.
    NoEntities,
    /// The dependency outputs left out.
    NoDependencies,
    /// Both left out: the task's own prompt alone.
    Bare,
}

impl ContextVariant {
    /// Every variant, in the order reports list them.
    pub const ALL: [ContextVariant; 4] = [
        ContextVariant::Full,
        ContextVariant::NoEntities,
        ContextVariant::NoDependencies,
        ContextVariant::Bare,
    ];

    /// The name `ctx eval --ablate` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextVariant::Full => "full",
            ContextVariant::NoEntities => "no-entities",
            ContextVariant::NoDependencies => "no-dependencies",
            ContextVariant::Bare => "bare",
        }
    }

    /// Whether prompts carry the entity block.
    pub fn entities(self) -> bool {
        matches!(self, ContextVariant::Full | ContextVariant::NoDependencies)
    }

    /// Whether prompts carry the dependency outputs.
    pub fn dependencies(self) -> bool {
        matches!(self, ContextVariant::Full | ContextVariant::NoEntities)
    }

    /// The plan prompts are assembled from: `plan` itself, or without
    /// entities a copy whose tasks name none (so the assembler renders no
    /// entity block and nothing else changes).
    pub fn prompt_plan(self, plan: &Plan) -> Option<Plan> {
        if self.entities() {
            return None;
        }
        let mut bare = plan.clone();
        bare.config.entities.include_all = false;
        for task in &mut bare.sub_tasks {
            task.entity_context.clear();
        }
        Some(bare)
    }
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            concurrency: DEFAULT_CONCURRENCY,
            schedule: Schedule::ReadyQueue,
            reuse_completed: false,
            force_rerun: BTreeSet::new(),
            task_timeout: Some(DEFAULT_TASK_TIMEOUT),
            max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
            cost: None,
            summarize_every_output: false,
            context: ContextVariant::Full,
            dispatch_gate: None,
        }
    }
}

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
}

impl RunReport {
    /// Whether every task completed.
    pub fn all_completed(&self) -> bool {
        self.results
            .iter()
            .all(|r| r.status == TaskStatus::Completed)
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
/// use ctx_deps::{DryRunEngine, Executor, ExecutorOptions, MemoryStore};
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
    inner: Arc<Inner>,
    store: Arc<dyn ExecutionStore>,
    options: ExecutorOptions,
}

/// What running one task needs, shared by [`Executor`] and [`TaskRunner`]:
/// everything but the store, which the caller passes per task.
pub(crate) struct Inner {
    pub(crate) plan: Plan,
    pub(crate) graph: PlanGraph,
    pub(crate) engine: Arc<dyn InferenceEngine>,
    pub(crate) counters: Vec<Arc<dyn TokenCounter>>,
    pub(crate) task_timeout: Option<Duration>,
    pub(crate) max_output_bytes: usize,
    pub(crate) cost: Option<CostOptions>,
    pub(crate) summarize_every_output: bool,
    /// Dispatch priorities counting `llm` summary calls; `None` when the
    /// plan makes none (the graph's remaining path is used).
    pub(crate) priorities: Option<Vec<u64>>,
    /// The plan prompts are assembled from, when the context variant
    /// leaves entities out ([`ContextVariant::prompt_plan`]).
    pub(crate) prompt_plan: Option<Plan>,
    /// Whether prompts carry dependency outputs.
    pub(crate) include_dependencies: bool,
    /// [`ExecutorOptions::dispatch_gate`].
    pub(crate) dispatch_gate: Option<Arc<tokio::sync::Semaphore>>,
}

impl Executor {
    /// An executor for `plan`. The plan should have passed validation; the
    /// structural checks the schedule depends on are repeated here.
    pub fn new(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        store: Arc<dyn ExecutionStore>,
        options: ExecutorOptions,
    ) -> Result<Executor, GraphError> {
        Ok(Executor {
            inner: Arc::new(Inner::new(plan, engine, &options)?),
            store,
            options,
        })
    }

    /// The plan's graph.
    pub fn graph(&self) -> &PlanGraph {
        &self.inner.graph
    }

    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        &self.inner.plan
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
    /// to wait for, then loop: dispatch what may start (`dispatch`),
    /// wait for a task or the cancellation, settle what finished
    /// (`settle_joined`, which releases or skips its dependents).
    /// After a cancellation or a fatal store error: drain what is in flight
    /// (`drain`), record the cancelled tasks
    /// (`settle_cancelled`) and the ones never reached
    /// (`skip_unreached`), and sum the cost.
    pub async fn run_with<C, P>(&self, cancel: C, mut progress: P) -> Result<RunReport, ExecError>
    where
        C: Future<Output = ()> + Send,
        P: FnMut(&ProgressEvent) + Send,
    {
        let inner = &self.inner;
        let g = &inner.graph;
        let mut run = RunState::new(g.len(), self.options.schedule, g, inner.priorities.clone());
        if self.options.reuse_completed {
            self.reuse_completed(&mut run, &mut progress).await?;
        }
        run.release_initial(g);

        let started = Instant::now();
        let mut flight = InFlight::default();
        let mut interrupted = false;
        let mut fatal: Option<ExecError> = None;
        let budget = Budget::new(inner);
        // With a shared budget, tasks waiting for budget that other runs
        // hold are tried again whenever any run settles.
        let mut settlements = budget.as_ref().and_then(Budget::settlements);
        tokio::pin!(cancel);
        loop {
            if let Some(watch) = &mut settlements {
                // A settlement from here on wakes the wait below.
                watch.borrow_and_update();
            }
            let waiting = self
                .dispatch(&mut run, &mut flight, budget.as_ref(), &mut progress)
                .await?;
            let watch = settlements.as_mut().filter(|_| waiting);
            if flight.jobs.is_empty() && watch.is_none() {
                break;
            }
            let has_jobs = !flight.jobs.is_empty();
            let joined = tokio::select! {
                biased;
                () = &mut cancel => {
                    interrupted = true;
                    break;
                }
                joined = flight.jobs.join_next_with_id(), if has_jobs => joined,
                () = settled_elsewhere(watch) => continue,
            };
            let Some(joined) = joined else { break };
            if let Some(e) = self
                .settle_joined(
                    &mut run,
                    &mut flight,
                    budget.as_ref(),
                    joined,
                    &mut progress,
                )
                .await?
            {
                fatal = Some(e);
                break;
            }
        }

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
        self.skip_unreached(&mut run, &mut progress).await?;
        let cost = self.cost_summary(&run);
        Ok(RunReport {
            order: run.order,
            results: run.results.into_iter().flatten().collect(),
            reused: run.reused,
            interrupted,
            makespan: started.elapsed(),
            cost,
        })
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
        let inner = &self.inner;
        let g = &inner.graph;
        let n = g.len();
        let mut forced = vec![false; n];
        for id in &self.options.force_rerun {
            if let Some(i) = g.index_of(id) {
                forced[i] = true;
                for d in g.transitive_dependents(i) {
                    forced[d] = true;
                }
            }
        }
        let mut completed: Vec<Option<TaskExecutionResult>> = vec![None; n];
        for (i, &forced) in forced.iter().enumerate() {
            if forced {
                continue;
            }
            let stored = crate::offload::get_by_task_id(&self.store, g.id(i))
                .await
                .map_err(|source| store_err(g.id(i), source))?;
            completed[i] = stored.filter(|r| r.status == TaskStatus::Completed);
        }
        let will_run: Vec<bool> = completed.iter().map(Option::is_none).collect();
        for (i, r) in completed.into_iter().enumerate() {
            let Some(r) = r else { continue };
            run.reused.push(g.id(i).to_string());
            progress(&ProgressEvent::Reused {
                task_id: g.id(i).to_string(),
            });
            // Summaries owed to dependents that will run: the process
            // stopped between this task's completion and its summary.
            let owed = crate::summarize::needed_calls(
                &inner.plan,
                g,
                i,
                &r,
                inner.summarize_every_output,
                &|d| will_run[d],
            );
            if owed.is_empty() {
                run.finish(i, r);
            } else {
                // A job writes only those; the task is not run again.
                run.pending_summary[i] = Some((r, owed));
                run.push_ready(i, g);
            }
        }
        Ok(())
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
        let g = &self.inner.graph;
        let limit = concurrency_limit(self.options.concurrency);
        // Tasks whose reservation must wait for a settlement.
        let mut waiting = Vec::new();
        while flight.jobs.len() < limit {
            let Some(i) = run.pop_ready(flight.jobs.len()) else {
                break;
            };
            // A reused result still owing its summary is not run again
            // (and reserves nothing: the task's own call was settled).
            let reused = run.pending_summary[i].take();
            run.summary_only[i] = reused.is_some();
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
            }
            self.spawn_job(flight, i, reused);
        }
        let any_waiting = !waiting.is_empty();
        for i in waiting {
            run.push_ready(i, g);
        }
        Ok(any_waiting)
    }

    /// Spawns task `i`'s job (see [`run_job`]).
    fn spawn_job(&self, flight: &mut InFlight, i: usize, reused: Option<Reused>) {
        let inner = Arc::clone(&self.inner);
        let store = Arc::clone(&self.store);
        let began = Arc::new(AtomicBool::new(false));
        let job_began = Arc::clone(&began);
        let handle = flight
            .jobs
            .spawn(async move { (i, run_job(&inner, &store, i, reused, &job_began).await) });
        flight.dispatched.insert(
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
        let inner = &self.inner;
        match joined {
            Ok((tid, (i, Ok(result)))) => {
                flight.dispatched.remove(&tid);
                if let Some(budget) = budget {
                    budget.settle(inner, i, Some(&result));
                }
                self.settle(run, i, result, true, progress).await?;
                Ok(None)
            }
            Ok((tid, (i, Err(source)))) => {
                flight.dispatched.remove(&tid);
                Ok(Some(store_err(inner.graph.id(i), source)))
            }
            Err(e) => {
                // The engine panicked: fail the task, not the run.
                let Some(Dispatched {
                    task: i, at: t0, ..
                }) = flight.dispatched.remove(&e.id())
                else {
                    return Ok(None);
                };
                let mut r = TaskExecutionResult::new(inner.graph.id(i), TaskStatus::Failed);
                r.error = Some("the engine panicked while running this task".into());
                r.metadata.execution_time_ms = Some(millis(t0.elapsed()));
                if let Some(budget) = budget {
                    // What the call cost is unknown: it keeps its whole
                    // reservation.
                    budget.settle(inner, i, None);
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
        if flight.jobs.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        let g = &inner.graph;
        flight.jobs.abort_all();
        while let Some(joined) = flight.jobs.join_next_with_id().await {
            match joined {
                Ok((tid, (i, Ok(result)))) => {
                    flight.dispatched.remove(&tid);
                    if let Some(budget) = budget {
                        budget.settle(inner, i, Some(&result));
                    }
                    if fatal.is_none() {
                        self.settle(run, i, result, true, progress).await?;
                    }
                }
                Ok((tid, (i, Err(source)))) => {
                    flight.dispatched.remove(&tid);
                    if let Some(budget) = budget {
                        budget.settle(inner, i, None);
                    }
                    fatal.get_or_insert_with(|| store_err(g.id(i), source));
                }
                Err(e) => {
                    if let (Some(budget), Some(d)) = (budget, flight.dispatched.get(&e.id())) {
                        budget.settle(inner, d.task, None);
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
        let g = &self.inner.graph;
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
        let g = &self.inner.graph;
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
        let inner = &self.inner;
        let c = inner.cost.as_ref()?;
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
                let task = &inner.plan.sub_tasks[i];
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
        let g = &self.inner.graph;
        let status = result.status;
        // Results from `execute_task` are already stored; the executor's
        // own (interruptions, panics) are stored here.
        if !already_stored {
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
        match status {
            TaskStatus::Completed => {
                run.release_dependents(i, g);
                Ok(())
            }
            _ => self.skip_dependents(run, i, progress).await,
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
        let g = &self.inner.graph;
        let failed = g.id(i).to_string();
        let budget = run.results[i]
            .as_ref()
            .is_some_and(crate::cost::is_budget_skip);
        for d in g.transitive_dependents(i) {
            if run.results[d].is_some() {
                continue;
            }
            let mut r = TaskExecutionResult::new(g.id(d), TaskStatus::Skipped);
            let direct = g.dependencies(d).contains(&i);
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

/// A reused completed result and the summary calls it still owes.
type Reused = (TaskExecutionResult, Vec<Option<usize>>);

/// What a job returns: its task's index and result (`Err`: the store
/// failed).
type JobOutcome = (usize, Result<TaskExecutionResult, StoreError>);

/// A job as it comes back from the [`JoinSet`].
type Joined = Result<(tokio::task::Id, JobOutcome), tokio::task::JoinError>;

/// The jobs in flight.
#[derive(Default)]
struct InFlight {
    jobs: JoinSet<JobOutcome>,
    /// Each job's task and when it was dispatched; a job is removed when
    /// it comes back, so what is left after a drain was cancelled.
    dispatched: HashMap<tokio::task::Id, Dispatched>,
}

/// A job in flight.
struct Dispatched {
    task: usize,
    at: Instant,
    /// Set once the job holds its permit of the dispatch gate (at once
    /// without a gate).
    began: Arc<AtomicBool>,
}

/// One dispatched job: once it holds a permit of the shared
/// [`ExecutorOptions::dispatch_gate`] (if any; `began` is then set), task
/// `i` run by [`execute_task`] (or, for a reused result, nothing), then
/// the `llm` summaries its dependents need — the one place summaries are
/// written: after the task's completion, in its slot, before release.
async fn run_job(
    inner: &Inner,
    store: &Arc<dyn ExecutionStore>,
    i: usize,
    reused: Option<Reused>,
    began: &AtomicBool,
) -> Result<TaskExecutionResult, StoreError> {
    // Held until the job returns (or is dropped when cancelled). A closed
    // gate limits nothing: ctx never closes one.
    let _permit = match &inner.dispatch_gate {
        Some(gate) => gate.acquire().await.ok(),
        None => None,
    };
    began.store(true, Ordering::Release);
    let (result, owed) = match reused {
        Some((r, owed)) => (r, Some(owed)),
        None => (execute_task(inner, store, i).await?, None),
    };
    crate::summarize::after_completion(inner, store, i, result, owed).await
}

/// Resolves when another run settles in the shared budget `watch`
/// watches; never without one (or if its books were dropped).
async fn settled_elsewhere(watch: Option<&mut tokio::sync::watch::Receiver<u64>>) {
    if let Some(w) = watch
        && w.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// The run's budget: the ledger and each task's high end.
struct Budget {
    books: SharedBudget,
    /// The books are [`CostOptions::shared_budget`]: other runs reserve
    /// and settle in them too.
    shared: bool,
    /// This run's prefix of its ledger keys (unique among the runs of a
    /// shared budget).
    scope: u64,
    bounds: Vec<Option<Usd>>,
}

impl Budget {
    /// The budget of a run whose options set `max_cost` or a shared
    /// budget.
    fn new(inner: &Inner) -> Option<Budget> {
        let c = inner.cost.as_ref()?;
        let (books, shared) = match &c.shared_budget {
            Some(books) => (books.clone(), true),
            None => (SharedBudget::resumed(c.max_cost?, c.already_spent), false),
        };
        Some(Budget {
            scope: books.new_scope(),
            books,
            shared,
            bounds: inner
                .plan
                .sub_tasks
                .iter()
                .map(|t| c.model.bound(t))
                .collect(),
        })
    }

    fn ledger(&self) -> &BudgetLedger {
        self.books.ledger()
    }

    fn key(&self, id: &str) -> String {
        format!("{}/{id}", self.scope)
    }

    /// Reserves task `i`'s high end. A task without one cannot be bounded,
    /// so it never fits (callers refuse such plans before the run).
    fn reserve(&self, id: &str, i: usize) -> Reservation {
        let high = self
            .bounds
            .get(i)
            .copied()
            .flatten()
            .unwrap_or(Usd::from_picos(u128::MAX));
        // A task is popped once per try; one that must wait holds no
        // reservation until a later try is granted, so no task is ever
        // reserved twice (the ledger would refuse it).
        self.ledger()
            .reserve(&self.key(id), high)
            .unwrap_or(Reservation::NeverFits {
                needed: high,
                available_at_best: Usd::ZERO,
            })
    }

    /// Settles task `i` at the cost of `result`, or at its whole
    /// reservation when that cost is unknown (a panicked engine).
    fn settle(&self, inner: &Inner, i: usize, result: Option<&TaskExecutionResult>) {
        let reserved = self.bounds.get(i).copied().flatten().unwrap_or(Usd::ZERO);
        let cost = result.and_then(|r| {
            // Results stored before any call (assembly failed) carry no
            // cost; computing it gives zero.
            r.metadata.cost_usd.or_else(|| {
                let c = inner.cost.as_ref()?;
                let task = inner.plan.sub_tasks.get(i)?;
                crate::cost::task_cost(c.model.as_ref(), task, r, inner.counters[i].as_ref())
            })
        });
        // A task that was never reserved has nothing to settle.
        if self
            .ledger()
            .settle(&self.key(inner.graph.id(i)), cost.unwrap_or(reserved))
            .is_ok()
        {
            self.books.announce_settlement();
        }
    }

    /// With a shared budget, a watch on every run's settlements: a run
    /// whose ready tasks wait for budget held by other runs waits on it.
    fn settlements(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.shared.then(|| self.books.settlements())
    }
}

impl Inner {
    fn new(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        options: &ExecutorOptions,
    ) -> Result<Inner, GraphError> {
        let graph = PlanGraph::new(&plan)?;
        // One counter per tokenizer, shared by the tasks that use it.
        let mut by_tokenizer: HashMap<Tokenizer, Arc<dyn TokenCounter>> = HashMap::new();
        let counters = plan
            .sub_tasks
            .iter()
            .map(|t| {
                let tok = ctx_prompt::tokenizer_for_task(&plan, t)?;
                Ok(by_tokenizer
                    .entry(tok)
                    .or_insert_with(|| tok.counter())
                    .clone())
            })
            .collect::<Result<_, GraphError>>()?;
        let priorities =
            crate::summarize::priorities(&plan, &graph, options.summarize_every_output);
        Ok(Inner {
            priorities,
            summarize_every_output: options.summarize_every_output,
            graph,
            engine,
            counters,
            task_timeout: options.task_timeout,
            max_output_bytes: options.max_output_bytes,
            cost: options.cost.clone(),
            prompt_plan: options.context.prompt_plan(&plan),
            include_dependencies: options.context.dependencies(),
            dispatch_gate: options.dispatch_gate.clone(),
            plan,
        })
    }
}

/// Runs one task at a time of a plan, outside the ready queue: what a
/// worker of a shared store (`ctx worker`) calls for each task it claimed.
///
/// It is the executor's own task body (read the dependencies' results from
/// `store`, assemble the prompt under the cap, store `in_progress`, call
/// the engine within the timeout and output bound, evaluate the checks
/// and retry with feedback, store the outcome, write the `llm` summaries
/// its dependents need), so
/// a task gives the same prompt and the same result whether the
/// single-process executor or a worker runs it. Deciding *which* task is
/// ready, and skipping dependents of a failure, is the caller's job (a
/// shared store does both in its commit transaction). The options
/// apply as for the executor, except the schedule, the concurrency and
/// `--max-cost` (a budget spans one process).
pub struct TaskRunner {
    inner: Arc<Inner>,
}

impl TaskRunner {
    /// A runner for `plan`'s tasks on `engine`.
    pub fn new(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        options: &ExecutorOptions,
    ) -> Result<TaskRunner, GraphError> {
        Ok(TaskRunner {
            inner: Arc::new(Inner::new(plan, engine, options)?),
        })
    }

    /// The plan's graph (priorities, dependencies).
    pub fn graph(&self) -> &PlanGraph {
        &self.inner.graph
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.inner.plan
    }

    /// Runs the task `task_id`: its dependencies' results are read from
    /// `store`, its `in_progress` and final results written to it. Returns
    /// the final result (`completed` or `failed`); `Err` only when the
    /// store fails or the plan has no such task.
    pub async fn run_task(
        &self,
        task_id: &str,
        store: Arc<dyn ExecutionStore>,
    ) -> Result<TaskExecutionResult, StoreError> {
        let Some(i) = self.inner.graph.index_of(task_id) else {
            return Err(StoreError::new(format!(
                "task `{task_id}` is not in the plan"
            )));
        };
        run_job(&self.inner, &store, i, None, &AtomicBool::new(false)).await
    }
}

const INTERRUPTED_BEFORE_START: &str =
    "interrupted: the run was cancelled before this task started";

fn store_err(task_id: &str, source: StoreError) -> ExecError {
    ExecError::Store {
        task_id: task_id.to_string(),
        source,
    }
}

/// The failure of an engine call cut off by [`ExecutorOptions::task_timeout`].
fn timed_out(limit: Duration, took: Duration) -> EngineError {
    let message = format!(
        "timed out after {} (task_timeout); the engine was stopped",
        fmt_duration(limit)
    );
    EngineError {
        attempts: vec![ctx_model::Attempt {
            number: 1,
            duration_ms: millis(took),
            outcome: CallOutcome::Timeout,
            error: Some(message.clone()),
            backoff_ms: None,
        }],
        message,
    }
}

/// `600s`, `0.300s`.
fn fmt_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.3}s", d.as_secs_f64())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The dispatcher's bookkeeping.
struct RunState {
    results: Vec<Option<TaskExecutionResult>>,
    missing: Vec<usize>,
    /// Ready tasks by level (one heap in ready-queue mode), ordered by
    /// remaining path, then plan order.
    ready: Vec<BinaryHeap<(u64, Reverse<usize>)>>,
    levels: Option<Vec<usize>>,
    current_level: usize,
    order: Vec<String>,
    reused: Vec<String>,
    /// Set once the run is cancelled: skips then say so.
    interrupted: bool,
    /// Reused completed results whose `llm` summaries are still to write,
    /// with the calls owed (see `summarize::needed_calls`).
    pending_summary: Vec<Option<(TaskExecutionResult, Vec<Option<usize>>)>>,
    /// Tasks dispatched only to write their summaries.
    summary_only: Vec<bool>,
    /// Priorities that count summary calls, when the plan makes any.
    priorities: Option<Vec<u64>>,
}

impl RunState {
    fn new(n: usize, schedule: Schedule, g: &PlanGraph, priorities: Option<Vec<u64>>) -> RunState {
        let (ready, levels) = match schedule {
            Schedule::ReadyQueue => (vec![BinaryHeap::new()], None),
            Schedule::Levels => (
                vec![BinaryHeap::new(); g.levels().len().max(1)],
                Some((0..n).map(|i| g.level(i)).collect()),
            ),
        };
        RunState {
            results: vec![None; n],
            missing: vec![0; n],
            ready,
            levels,
            current_level: 0,
            order: Vec::with_capacity(n),
            reused: Vec::new(),
            interrupted: false,
            pending_summary: vec![None; n],
            summary_only: vec![false; n],
            priorities,
        }
    }

    fn is_completed(&self, i: usize) -> bool {
        self.results[i]
            .as_ref()
            .is_some_and(|r| r.status == TaskStatus::Completed)
    }

    fn finish(&mut self, i: usize, result: TaskExecutionResult) {
        self.results[i] = Some(result);
    }

    /// Counts each task's dependencies not yet completed, and queues the
    /// tasks with none (reused ones and those owing a summary are already
    /// settled or queued).
    fn release_initial(&mut self, g: &PlanGraph) {
        for i in 0..g.len() {
            if self.results[i].is_none() && self.pending_summary[i].is_none() {
                self.missing[i] = g
                    .dependencies(i)
                    .iter()
                    .filter(|&&d| !self.is_completed(d))
                    .count();
                if self.missing[i] == 0 {
                    self.push_ready(i, g);
                }
            }
        }
    }

    /// Task `i` completed: each dependent waits for one dependency less,
    /// and is queued when none is left.
    fn release_dependents(&mut self, i: usize, g: &PlanGraph) {
        for &d in g.dependents(i) {
            if self.results[d].is_some() {
                continue;
            }
            self.missing[d] = self.missing[d].saturating_sub(1);
            if self.missing[d] == 0 {
                self.push_ready(d, g);
            }
        }
    }

    fn push_ready(&mut self, i: usize, g: &PlanGraph) {
        let slot = self.levels.as_ref().map_or(0, |l| l[i]);
        if let Some(heap) = self.ready.get_mut(slot) {
            let priority = self
                .priorities
                .as_ref()
                .and_then(|p| p.get(i).copied())
                .unwrap_or_else(|| g.remaining_path(i));
            heap.push((priority, Reverse(i)));
        }
    }

    /// The next task to dispatch, if any may start now.
    fn pop_ready(&mut self, running: usize) -> Option<usize> {
        if self.levels.is_none() {
            return self.ready.first_mut()?.pop().map(|(_, Reverse(i))| i);
        }
        loop {
            let heap = self.ready.get_mut(self.current_level)?;
            if let Some((_, Reverse(i))) = heap.pop() {
                return Some(i);
            }
            if running > 0 {
                // The level's barrier: wait for all of it to finish.
                return None;
            }
            self.current_level += 1;
        }
    }
}

/// Assembles, stores `in_progress`, runs the engine, stores the outcome.
/// Returns `Err` only when the store fails.
async fn execute_task(
    inner: &Inner,
    store: &Arc<dyn ExecutionStore>,
    i: usize,
) -> Result<TaskExecutionResult, StoreError> {
    let t0 = Instant::now();
    let plan = &inner.plan;
    let g = &inner.graph;
    let Some(task) = plan.sub_tasks.get(i) else {
        return Err(StoreError::new(format!("no task at index {i}")));
    };
    let dep_ids: Vec<String> = g
        .dependencies(i)
        .iter()
        .map(|&d| g.id(d).to_string())
        .collect();
    let dep_results = crate::offload::get_by_dependency_ids(store, &dep_ids).await?;
    let mut result = TaskExecutionResult::new(&task.id, TaskStatus::Failed);
    let counter = &inner.counters[i];
    result.metadata.tokenizer = Some(counter.name().to_string());

    let mut deps: Vec<DependencyOutput<'_>> = Vec::with_capacity(dep_ids.len());
    for id in &dep_ids {
        let Some(r) = dep_results
            .iter()
            .find(|r| &r.task_id == id && r.status == TaskStatus::Completed)
        else {
            // The dispatcher only starts a task whose dependencies are
            // completed; a store that lost one is reported, not trusted.
            result.error = Some(format!(
                "dependency `{id}` has no completed result in the execution store"
            ));
            result.metadata.execution_time_ms = Some(millis(t0.elapsed()));
            crate::offload::store(store, result.clone()).await?;
            return Ok(result);
        };
        deps.push(DependencyOutput {
            task_id: &r.task_id,
            // By the graph's index: a scan of the plan per dependency
            // made a run quadratic in its size.
            description: g
                .index_of(id)
                .and_then(|d| plan.sub_tasks.get(d))
                .map_or("", |t| t.description.as_str()),
            output: &r.output,
            summary: crate::summarize::summary_for_dependent(r, &task.id),
        });
    }

    // The context variant (`ctx eval`): the prompt's plan and dependencies.
    let prompt_plan = inner.prompt_plan.as_ref().unwrap_or(plan);
    let prompt_task = prompt_plan.sub_tasks.get(i).unwrap_or(task);
    let prompt_deps: &[DependencyOutput<'_>] = if inner.include_dependencies {
        &deps
    } else {
        &[]
    };
    let assembled = ctx_prompt::assemble_task_prompt(
        prompt_plan,
        prompt_task,
        prompt_deps,
        counter.as_ref(),
        plan.config.max_prompt_tokens,
    );
    let mut assembled = match assembled {
        Ok(a) => a,
        Err(e) => {
            result.error = Some(e.to_string());
            result.metadata.execution_time_ms = Some(millis(t0.elapsed()));
            crate::offload::store(store, result.clone()).await?;
            return Ok(result);
        }
    };
    // Checks run only on real answers (not a dry run's placeholders).
    let checks = if inner.engine.answers_prompts() {
        match crate::checking::prepare(plan, task) {
            Ok(checks) => checks,
            Err(e) => {
                result.error = Some(e);
                result.metadata.execution_time_ms = Some(millis(t0.elapsed()));
                crate::offload::store(store, result.clone()).await?;
                return Ok(result);
            }
        }
    } else {
        None
    };
    let max_attempts = match checks {
        Some(_) => plan.config.max_check_attempts.max(1),
        None => 1,
    };

    let mut number = 0;
    loop {
        number += 1;
        result.status = TaskStatus::InProgress;
        result.prompt = Some(assembled.text.clone());
        result.metadata.prompt_tokens = Some(assembled.tokens);
        result.metadata.tokenizer = Some(assembled.tokenizer.clone());
        crate::offload::store(store, result.clone()).await?;

        let request = InferenceRequest {
            task_id: task.id.clone(),
            prompt: assembled.text.clone(),
            params: task.tool_or_prompt.params.clone(),
            prompt_tokens: assembled.tokens,
            max_output_bytes: inner.max_output_bytes,
            response_schema: checks
                .as_ref()
                .and_then(|c| c.set.response_schema().cloned()),
            purpose: Default::default(),
        };
        let response = call_engine(inner, &request)
            .await
            .map(|resp| cut_at_max_tokens(inner, task, i, resp));
        result.metadata.execution_time_ms = Some(millis(t0.elapsed()));
        let resp = match response {
            Ok(resp) => resp,
            Err(e) => {
                result.status = TaskStatus::Failed;
                result.error = Some(e.message.clone());
                result.metadata.attempts.extend(e.attempts);
                if checks.is_some() {
                    result
                        .metadata
                        .check_attempts
                        .push(ctx_model::CheckAttempt {
                            number,
                            prompt: request.prompt,
                            prompt_tokens: request.prompt_tokens,
                            error: Some(e.message),
                            ..ctx_model::CheckAttempt::default()
                        });
                }
                break;
            }
        };
        result.status = TaskStatus::Completed;
        result.error = None;
        // The engine's word only: a dry run names no model.
        result.metadata.model = resp.model;
        result.metadata.tokens_used = match checks {
            // Every attempt and judge of a checked task counts.
            Some(_) => TokenUsage::sum([result.metadata.tokens_used, resp.usage]),
            None => resp.usage,
        };
        result.metadata.finish_reason = resp.finish_reason;
        result.metadata.attempts.extend(resp.attempts);
        result.metadata.cached = resp.cached;
        let Some(task_checks) = &checks else {
            result.output = resp.output;
            break;
        };
        let (results, judge_usage, judge_calls) =
            crate::checking::evaluate(inner, task_checks, task, &resp.output, counter.as_ref())
                .await;
        result.metadata.tokens_used = TokenUsage::sum([result.metadata.tokens_used, judge_usage]);
        result.metadata.execution_time_ms = Some(millis(t0.elapsed()));
        result.output = resp.output;
        result.metadata.checks = results.clone();
        result
            .metadata
            .check_attempts
            .push(ctx_model::CheckAttempt {
                number,
                prompt: request.prompt,
                prompt_tokens: request.prompt_tokens,
                output: result.output.clone(),
                checks: results.clone(),
                tokens_used: resp.usage,
                judge_tokens_used: judge_usage,
                judge_calls,
                error: None,
            });
        if ctx_checks::all_passed(&results) {
            // Dependents receive the JSON a `json`/`json_schema` check
            // validated, without the code fence models wrap it in.
            if results.iter().any(|r| {
                matches!(
                    r.kind,
                    ctx_checks::CheckKind::Json | ctx_checks::CheckKind::JsonSchema
                )
            }) {
                result.output = ctx_checks::text::strip_code_fence(&result.output).to_string();
            }
            break;
        }
        // The call answered, but the answer was rejected: its engine
        // attempt says so (`ctx runs report` marks it a check failure).
        if let Some(last) = result.metadata.attempts.last_mut() {
            last.outcome = CallOutcome::CheckFailed;
            last.error = Some(crate::checking::failure_message(&results, number));
        }
        if number >= max_attempts {
            result.status = TaskStatus::Failed;
            result.error = Some(crate::checking::failure_message(&results, number));
            break;
        }
        match crate::checking::retry_prompt(
            prompt_plan,
            prompt_task,
            prompt_deps,
            counter.as_ref(),
            plan.config.max_prompt_tokens,
            &results,
        ) {
            Ok((next, _feedback)) => assembled = next,
            Err(e) => {
                result.status = TaskStatus::Failed;
                result.error = Some(format!(
                    "{}; the retry could not be assembled: {e}",
                    crate::checking::failure_message(&results, number)
                ));
                break;
            }
        }
    }
    drop(deps);
    // Numbered across check attempts, not from 1 per request.
    ctx_model::Attempt::number_in_order(&mut result.metadata.attempts);
    if let Some(c) = &inner.cost {
        result.metadata.cost_usd =
            crate::cost::task_cost(c.model.as_ref(), task, &result, counter.as_ref());
    }
    crate::offload::store(store, result.clone()).await?;
    Ok(result)
}

/// One engine call, bounded in time by [`ExecutorOptions::task_timeout`]
/// and in output by [`ExecutorOptions::max_output_bytes`]. Every call a
/// task makes goes through here: its answers, its judges
/// ([`checking`](crate::checking)) and its summaries.
pub(crate) async fn call_engine(
    inner: &Inner,
    request: &InferenceRequest,
) -> Result<ctx_engine::InferenceResponse, EngineError> {
    let call_started = Instant::now();
    let response = match inner.task_timeout {
        Some(limit) => match tokio::time::timeout(limit, inner.engine.infer(request)).await {
            Ok(response) => response,
            // The engine's future is dropped here: it kills its command or
            // aborts its request.
            Err(_) => Err(timed_out(limit, call_started.elapsed())),
        },
        None => inner.engine.infer(request).await,
    };
    response.and_then(|resp| {
        if resp.output.len() > inner.max_output_bytes {
            // An engine that does not bound its own reading: its output is
            // refused here all the same.
            let message = ctx_engine::output_too_large(inner.max_output_bytes);
            let mut attempts = resp.attempts;
            if let Some(last) = attempts.last_mut() {
                last.outcome = CallOutcome::OutputTooLarge;
                last.error = Some(message.clone());
            }
            Err(EngineError { message, attempts })
        } else {
            Ok(resp)
        }
    })
}

/// With [`CostOptions::cut_output_at_max_tokens`]: the output cut at the
/// task's `max_tokens`, counted with its tokenizer, and flagged `length`.
fn cut_at_max_tokens(
    inner: &Inner,
    task: &ctx_model::SubTask,
    i: usize,
    mut resp: ctx_engine::InferenceResponse,
) -> ctx_engine::InferenceResponse {
    let Some(c) = inner.cost.as_ref().filter(|c| c.cut_output_at_max_tokens) else {
        return resp;
    };
    let Some(max) = c.model.max_tokens(task) else {
        return resp;
    };
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if let Some(cut) = crate::cost::cut_to_tokens(&resp.output, max, inner.counters[i].as_ref()) {
        resp.output = cut;
        resp.finish_reason = Some(FinishReason::Length);
    }
    resp
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
