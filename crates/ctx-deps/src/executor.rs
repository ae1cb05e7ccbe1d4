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
use std::time::Duration;

use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_prompt::DependencyOutput;
use ctx_tokens::{TokenCounter, Tokenizer};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::graph::{GraphError, PlanGraph};
use ctx_engine::{EngineError, InferenceEngine, InferenceRequest};
use ctx_store::{ExecutionStore, StoreError};

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
    /// outcome `timeout`.
    pub task_timeout: Option<Duration>,
    /// Bound on each task's output in bytes, passed to the engine as
    /// [`InferenceRequest::max_output_bytes`] and checked again on what it
    /// returns.
    pub max_output_bytes: usize,
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
struct Inner {
    plan: Plan,
    graph: PlanGraph,
    engine: Arc<dyn InferenceEngine>,
    counters: Vec<Arc<dyn TokenCounter>>,
    task_timeout: Option<Duration>,
    max_output_bytes: usize,
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
    pub async fn run_with<C, P>(&self, cancel: C, mut progress: P) -> Result<RunReport, ExecError>
    where
        C: Future<Output = ()> + Send,
        P: FnMut(&ProgressEvent) + Send,
    {
        let inner = &self.inner;
        let g = &inner.graph;
        let n = g.len();
        let mut run = RunState::new(n, self.options.schedule, g);

        // Resume: reuse completed results, except forced ids and all that
        // depends on them.
        if self.options.reuse_completed {
            let mut forced = vec![false; n];
            for id in &self.options.force_rerun {
                if let Some(i) = g.index_of(id) {
                    forced[i] = true;
                    for d in g.transitive_dependents(i) {
                        forced[d] = true;
                    }
                }
            }
            for (i, &forced) in forced.iter().enumerate() {
                if forced {
                    continue;
                }
                let stored = self
                    .store
                    .get_by_task_id(g.id(i))
                    .map_err(|source| store_err(g.id(i), source))?;
                if let Some(r) = stored.filter(|r| r.status == TaskStatus::Completed) {
                    run.finish(i, r);
                    run.reused.push(g.id(i).to_string());
                    progress(&ProgressEvent::Reused {
                        task_id: g.id(i).to_string(),
                    });
                }
            }
        }
        for i in 0..n {
            if run.results[i].is_none() {
                run.missing[i] = g
                    .dependencies(i)
                    .iter()
                    .filter(|&&d| !run.is_completed(d))
                    .count();
                if run.missing[i] == 0 {
                    run.push_ready(i, g);
                }
            }
        }

        let limit = if self.options.concurrency == 0 {
            usize::MAX
        } else {
            self.options.concurrency
        };
        let started = Instant::now();
        let mut running: JoinSet<(usize, Result<TaskExecutionResult, StoreError>)> = JoinSet::new();
        let mut in_flight: HashMap<tokio::task::Id, (usize, Instant)> = HashMap::new();
        let mut interrupted = false;
        let mut fatal: Option<ExecError> = None;
        tokio::pin!(cancel);

        loop {
            while running.len() < limit {
                let Some(i) = run.pop_ready(running.len()) else {
                    break;
                };
                let id = g.id(i).to_string();
                run.order.push(id.clone());
                progress(&ProgressEvent::Started { task_id: id });
                let inner = Arc::clone(inner);
                let store = Arc::clone(&self.store);
                let handle =
                    running.spawn(async move { (i, execute_task(&inner, &*store, i).await) });
                in_flight.insert(handle.id(), (i, Instant::now()));
            }
            if running.is_empty() {
                break;
            }
            let joined = tokio::select! {
                biased;
                () = &mut cancel => {
                    interrupted = true;
                    break;
                }
                joined = running.join_next_with_id() => joined,
            };
            let Some(joined) = joined else { break };
            match joined {
                Ok((tid, (i, Ok(result)))) => {
                    in_flight.remove(&tid);
                    self.settle(&mut run, i, result, true, &mut progress)?;
                }
                Ok((tid, (i, Err(source)))) => {
                    in_flight.remove(&tid);
                    fatal = Some(store_err(g.id(i), source));
                    break;
                }
                Err(e) => {
                    // The engine panicked: fail the task, not the run.
                    let Some((i, t0)) = in_flight.remove(&e.id()) else {
                        continue;
                    };
                    let mut r = TaskExecutionResult::new(g.id(i), TaskStatus::Failed);
                    r.error = Some("the engine panicked while running this task".into());
                    r.metadata.execution_time_ms = Some(millis(t0.elapsed()));
                    self.settle(&mut run, i, r, false, &mut progress)?;
                }
            }
        }

        // Cancelled or a fatal store error: drop in-flight futures. Tasks
        // that finished in the meantime keep their real result.
        if !running.is_empty() {
            running.abort_all();
            while let Some(joined) = running.join_next_with_id().await {
                match joined {
                    Ok((tid, (i, Ok(result)))) => {
                        in_flight.remove(&tid);
                        if fatal.is_none() {
                            self.settle(&mut run, i, result, true, &mut progress)?;
                        }
                    }
                    Ok((tid, (i, Err(source)))) => {
                        in_flight.remove(&tid);
                        fatal.get_or_insert_with(|| store_err(g.id(i), source));
                    }
                    Err(_) => {}
                }
            }
        }
        if let Some(e) = fatal {
            return Err(e);
        }
        run.interrupted = interrupted;
        let mut cancelled: Vec<(usize, Instant)> = in_flight.into_values().collect();
        cancelled.sort_unstable_by_key(|&(i, _)| i);
        for (i, t0) in cancelled {
            let previous = self
                .store
                .get_by_task_id(g.id(i))
                .map_err(|source| store_err(g.id(i), source))?;
            let mut r = previous
                .filter(|r| r.status == TaskStatus::InProgress)
                .unwrap_or_else(|| TaskExecutionResult::new(g.id(i), TaskStatus::Failed));
            r.status = TaskStatus::Failed;
            let ms = millis(t0.elapsed());
            r.metadata.execution_time_ms = Some(ms);
            r.error = Some(format!(
                "interrupted: cancelled while running, after {ms} ms"
            ));
            self.settle(&mut run, i, r, false, &mut progress)?;
        }
        for i in 0..n {
            if run.results[i].is_none() {
                let mut r = TaskExecutionResult::new(g.id(i), TaskStatus::Skipped);
                r.error = Some(if interrupted {
                    INTERRUPTED_BEFORE_START.into()
                } else {
                    "not run: a dependency never completed".into()
                });
                self.settle(&mut run, i, r, false, &mut progress)?;
            }
        }

        Ok(RunReport {
            order: run.order,
            results: run.results.into_iter().flatten().collect(),
            reused: run.reused,
            interrupted,
            makespan: started.elapsed(),
        })
    }

    /// Records task `i`'s terminal result, stores it when the task did not
    /// store it itself, and releases or skips its dependents.
    fn settle<P>(
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
        let store = &self.store;
        let status = result.status;
        // Results from `execute_task` are already stored; the executor's
        // own (interruptions, panics) are stored here.
        if !already_stored {
            store
                .store(result.clone())
                .map_err(|source| store_err(g.id(i), source))?;
        }
        progress(&ProgressEvent::Finished {
            task_id: g.id(i).to_string(),
            status,
            error: result.error.clone(),
        });
        run.finish(i, result);
        match status {
            TaskStatus::Completed => {
                for &d in g.dependents(i) {
                    if run.results[d].is_some() {
                        continue;
                    }
                    run.missing[d] = run.missing[d].saturating_sub(1);
                    if run.missing[d] == 0 {
                        run.push_ready(d, g);
                    }
                }
            }
            _ => {
                let failed = g.id(i).to_string();
                for d in g.transitive_dependents(i) {
                    if run.results[d].is_some() {
                        continue;
                    }
                    let mut r = TaskExecutionResult::new(g.id(d), TaskStatus::Skipped);
                    r.error = Some(if run.interrupted {
                        INTERRUPTED_BEFORE_START.to_string()
                    } else {
                        skip_reason(&failed, g.dependencies(d).contains(&i))
                    });
                    store
                        .store(r.clone())
                        .map_err(|source| store_err(g.id(d), source))?;
                    progress(&ProgressEvent::Finished {
                        task_id: g.id(d).to_string(),
                        status: TaskStatus::Skipped,
                        error: r.error.clone(),
                    });
                    run.finish(d, r);
                }
            }
        }
        Ok(())
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
                let tok = ctx_prompt::tokenizer_for_task(&plan, t);
                by_tokenizer
                    .entry(tok)
                    .or_insert_with(|| tok.counter())
                    .clone()
            })
            .collect();
        Ok(Inner {
            plan,
            graph,
            engine,
            counters,
            task_timeout: options.task_timeout,
            max_output_bytes: options.max_output_bytes,
        })
    }
}

/// Runs one task at a time of a plan, outside the ready queue: what a
/// worker of a shared store (`ctx worker`) calls for each task it claimed.
///
/// It is the executor's own task body (read the dependencies' results from
/// `store`, assemble the prompt under the cap, store `in_progress`, call
/// the engine within the timeout and output bound, store the outcome), so
/// a task gives the same prompt and the same result whether the
/// single-process executor or a worker runs it. Deciding *which* task is
/// ready, and skipping dependents of a failure, is the caller's job (a
/// shared store does both in its commit transaction). Only
/// `task_timeout` and `max_output_bytes` of the options apply.
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
        store: &dyn ExecutionStore,
    ) -> Result<TaskExecutionResult, StoreError> {
        let Some(i) = self.inner.graph.index_of(task_id) else {
            return Err(StoreError::new(format!(
                "task `{task_id}` is not in the plan"
            )));
        };
        execute_task(&self.inner, store, i).await
    }
}

/// Why a task is skipped: its direct dependency, or a task further up,
/// failed. Public so that a shared store's worker, which skips dependents
/// in its commit transaction, words it as the executor does.
pub fn skip_reason(failed: &str, direct: bool) -> String {
    if direct {
        format!("dependency `{failed}` failed")
    } else {
        format!("upstream task `{failed}` failed")
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
        "timed out after {} (--task-timeout); the engine was stopped",
        fmt_duration(limit)
    );
    EngineError {
        attempts: vec![ctx_model::Attempt {
            number: 1,
            duration_ms: millis(took),
            outcome: "timeout".into(),
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
}

impl RunState {
    fn new(n: usize, schedule: Schedule, g: &PlanGraph) -> RunState {
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

    fn push_ready(&mut self, i: usize, g: &PlanGraph) {
        let slot = self.levels.as_ref().map_or(0, |l| l[i]);
        if let Some(heap) = self.ready.get_mut(slot) {
            heap.push((g.remaining_path(i), Reverse(i)));
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
    store: &dyn ExecutionStore,
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
    let dep_results = store.get_by_dependency_ids(&dep_ids)?;
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
            store.store(result.clone())?;
            return Ok(result);
        };
        deps.push(DependencyOutput {
            task_id: &r.task_id,
            description: plan.task(id).map_or("", |t| t.description.as_str()),
            output: &r.output,
            summary: r.summary.as_deref(),
        });
    }

    let assembled = ctx_prompt::assemble_task_prompt(
        plan,
        task,
        &deps,
        counter.as_ref(),
        plan.config.max_prompt_tokens,
    );
    drop(deps);
    let assembled = match assembled {
        Ok(a) => a,
        Err(e) => {
            result.error = Some(e.to_string());
            result.metadata.execution_time_ms = Some(millis(t0.elapsed()));
            store.store(result.clone())?;
            return Ok(result);
        }
    };
    result.status = TaskStatus::InProgress;
    result.prompt = Some(assembled.text.clone());
    result.metadata.prompt_tokens = Some(assembled.tokens);
    result.metadata.tokenizer = Some(assembled.tokenizer);
    store.store(result.clone())?;

    let request = InferenceRequest {
        task_id: task.id.clone(),
        prompt: assembled.text,
        params: task.tool_or_prompt.params.clone(),
        prompt_tokens: assembled.tokens,
        max_output_bytes: inner.max_output_bytes,
    };
    let call_started = Instant::now();
    let response = match inner.task_timeout {
        Some(limit) => match tokio::time::timeout(limit, inner.engine.infer(&request)).await {
            Ok(response) => response,
            // The engine's future is dropped here: it kills its command or
            // aborts its request.
            Err(_) => Err(timed_out(limit, call_started.elapsed())),
        },
        None => inner.engine.infer(&request).await,
    };
    let response = response.and_then(|resp| {
        if resp.output.len() > inner.max_output_bytes {
            // An engine that does not bound its own reading: its output is
            // refused here all the same.
            let message = ctx_engine::output_too_large(inner.max_output_bytes);
            let mut attempts = resp.attempts;
            if let Some(last) = attempts.last_mut() {
                last.outcome = ctx_engine::OUTPUT_TOO_LARGE.into();
                last.error = Some(message.clone());
            }
            Err(EngineError { message, attempts })
        } else {
            Ok(resp)
        }
    });
    result.metadata.execution_time_ms = Some(millis(t0.elapsed()));
    match response {
        Ok(resp) => {
            result.status = TaskStatus::Completed;
            result.output = resp.output;
            // The engine's word only: a dry run names no model.
            result.metadata.model = resp.model;
            result.metadata.tokens_used = resp.usage;
            result.metadata.finish_reason = resp.finish_reason;
            result.metadata.attempts = resp.attempts;
            result.metadata.cached = resp.cached;
        }
        Err(e) => {
            result.status = TaskStatus::Failed;
            result.error = Some(e.message);
            result.metadata.attempts = e.attempts;
        }
    }
    store.store(result.clone())?;
    Ok(result)
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
