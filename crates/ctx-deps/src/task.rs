//! One task's job, whoever dispatches it: the per-run [`TaskContext`] a
//! task body needs, the job ([`run_job`]: wait for the dispatch gate, run
//! the task's attempts, write its summaries) and the [`TaskRunner`] that
//! runs jobs one claimed task at a time for a shared-store worker.
//!
//! The task's own attempt loop is [`attempt`](crate::attempt)'s; this
//! module decides only what runs around it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ctx_cost::Usd;
use ctx_engine::{FirstToken, InferenceEngine};
use ctx_model::{Plan, TaskExecutionResult};
use ctx_store::{ExecutionStore, StoreError};
use ctx_tokens::{TokenCounter, Tokenizer, TokenizerExt};
use tracing::Instrument;

use crate::cost::CostOptions;
use crate::engine_call::EngineCalls;
use crate::graph::{GraphError, PlanGraph};
use crate::options::ExecutorOptions;
use crate::summarize::SummaryCalls;

/// A reused completed result and the summary calls it still owes.
pub(crate) type Reused = (TaskExecutionResult, Vec<Option<usize>>);

/// What running one task needs, shared by the [`Executor`](crate::Executor)
/// and the [`TaskRunner`]: everything but the store, which the caller
/// passes per task, and the schedule, which is the executor's.
pub(crate) struct TaskContext {
    pub(crate) plan: Plan,
    pub(crate) graph: PlanGraph,
    /// The one way to the engine, with the time and output bounds.
    pub(crate) engine: EngineCalls,
    /// Each task's token counter (one per tokenizer, shared).
    pub(crate) counters: Vec<Arc<dyn TokenCounter>>,
    pub(crate) cost: Option<CostOptions>,
    pub(crate) summarize_every_output: bool,
    /// Dispatch priorities counting `llm` summary calls; `None` when the
    /// plan makes none (the graph's remaining path is used).
    pub(crate) priorities: Option<Vec<u64>>,
    /// The plan prompts are assembled from, when the context variant
    /// leaves entities out
    /// ([`ContextVariant::prompt_plan`](crate::ContextVariant::prompt_plan)).
    pub(crate) prompt_plan: Option<Plan>,
    /// Whether prompts carry dependency outputs.
    pub(crate) include_dependencies: bool,
    /// [`ExecutorOptions::dispatch_gate`].
    dispatch_gate: Option<Arc<tokio::sync::Semaphore>>,
    /// Each map item's content hash, by index (`crate::map::item_hash`),
    /// recorded with its result.
    pub(crate) item_hashes: HashMap<usize, String>,
    /// [`ExecutorOptions::secret_mask`]: what a `prompt_cache_key` is
    /// never computed from.
    pub(crate) secret_mask: ctx_store::SecretMask,
}

impl TaskContext {
    pub(crate) fn new(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        options: &ExecutorOptions,
    ) -> Result<TaskContext, GraphError> {
        let engine = EngineCalls::new(engine, options.task_timeout, options.max_output_bytes)
            .with_canary(options.canary.clone());
        TaskContext::with_engine(plan, engine, options)
    }

    /// This context for `plan`, the same plan with a map's items appended
    /// (`crate::map::plan_with_items`): the graph, counters and priorities
    /// computed again, the engine shared.
    pub(crate) fn expanded(
        &self,
        plan: Plan,
        options: &ExecutorOptions,
        hashes: impl IntoIterator<Item = (usize, String)>,
    ) -> Result<TaskContext, GraphError> {
        let mut ctx = TaskContext::with_engine(plan, self.engine.clone(), options)?;
        ctx.item_hashes = self.item_hashes.clone();
        ctx.item_hashes.extend(hashes);
        Ok(ctx)
    }

    fn with_engine(
        plan: Plan,
        engine: EngineCalls,
        options: &ExecutorOptions,
    ) -> Result<TaskContext, GraphError> {
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
        Ok(TaskContext {
            priorities,
            summarize_every_output: options.summarize_every_output,
            graph,
            engine,
            counters,
            cost: options.cost.clone(),
            prompt_plan: options.context.prompt_plan(&plan),
            include_dependencies: options.context.dependencies(),
            dispatch_gate: options.dispatch_gate.clone(),
            item_hashes: HashMap::new(),
            secret_mask: options.secret_mask.clone(),
            plan,
        })
    }

    /// What the summary calls of a task need, and nothing more.
    fn summary_calls(&self) -> SummaryCalls<'_> {
        SummaryCalls {
            plan: &self.plan,
            graph: &self.graph,
            engine: &self.engine,
            cost: self.cost.as_ref(),
            every_output: self.summarize_every_output,
        }
    }

    /// What task `i`'s `result` cost, to settle its reservation with: the
    /// recorded `cost_usd`, else computed (a result stored before any call,
    /// assembly having failed, computes to zero); `None` when unknown.
    pub(crate) fn settled_cost(&self, i: usize, result: &TaskExecutionResult) -> Option<Usd> {
        result.metadata.cost_usd.or_else(|| {
            let c = self.cost.as_ref()?;
            let task = self.plan.sub_tasks.get(i)?;
            crate::cost::task_cost(c.model.as_ref(), task, result, self.counters[i].as_ref())
        })
    }
}

/// One dispatched job: once it holds a permit of the shared
/// [`ExecutorOptions::dispatch_gate`] (if any; `began` is then set), task
/// `i` run by [`execute_task`](crate::attempt::execute_task) (or, for a
/// reused result, nothing), then the `llm` summaries its dependents need —
/// the one place summaries are written: after the task's completion, in
/// its slot, before release.
///
/// `first_token` is the signal of a warm-up call
/// ([`warm_up`](crate::warm_up)), handed to the engine with the task's
/// call.
pub(crate) async fn run_job(
    ctx: &TaskContext,
    store: &Arc<dyn ExecutionStore>,
    i: usize,
    reused: Option<Reused>,
    began: &AtomicBool,
    first_token: Option<&FirstToken>,
    approval: Option<&ctx_model::approval::Decision>,
) -> Result<TaskExecutionResult, StoreError> {
    // Held until the job returns (or is dropped when cancelled). A closed
    // gate limits nothing: ctx never closes one.
    let _permit = match &ctx.dispatch_gate {
        Some(gate) => gate.acquire().await.ok(),
        None => None,
    };
    began.store(true, Ordering::Release);
    let span = crate::spans::task_span(&ctx.plan.sub_tasks[i].id);
    if let Some(d) = approval {
        span.in_scope(|| crate::gates::decision_event(d));
    }
    let job = async {
        let (result, owed) = match reused {
            Some((r, owed)) => (r, Some(owed)),
            None => (
                crate::attempt::execute_task(ctx, store, i, first_token).await?,
                None,
            ),
        };
        let counter = ctx.counters[i].as_ref();
        crate::summarize::after_completion(&ctx.summary_calls(), store, i, counter, result, owed)
            .await
    };
    let result = job.instrument(span.clone()).await;
    if let Ok(r) = &result {
        crate::spans::record_task(&span, r);
    }
    result
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
    ctx: Arc<TaskContext>,
}

/// A task's `before: run` gate as a task runner finds it.
enum Gate {
    /// No gate, or approved (the approval, for the task's span).
    Open(Option<ctx_model::approval::Decision>),
    /// Rejected: the task's failed result.
    Rejected(Box<TaskExecutionResult>),
}

impl TaskRunner {
    /// A runner for `plan`'s tasks on `engine`.
    pub fn new(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        options: &ExecutorOptions,
    ) -> Result<TaskRunner, GraphError> {
        let mut options = options.clone();
        crate::canary::settle(&plan, &mut options);
        Ok(TaskRunner {
            ctx: Arc::new(TaskContext::new(plan, engine, &options)?),
        })
    }

    /// This runner recording each map item's content hash
    /// ([`item_hash`](crate::map::item_hash)) with its result, by item
    /// id, as the executor does for the items it expands: a shared
    /// store's items are expanded by whichever worker claimed their map,
    /// and run by any. Ids not in the plan are ignored.
    #[must_use]
    pub fn with_item_hashes(mut self, hashes: impl IntoIterator<Item = (String, String)>) -> Self {
        // The context is this runner's own until it is shared.
        if let Some(ctx) = Arc::get_mut(&mut self.ctx) {
            for (id, hash) in hashes {
                if let Some(i) = ctx.graph.index_of(&id) {
                    ctx.item_hashes.insert(i, hash);
                }
            }
        }
        self
    }

    /// The plan's graph (priorities, dependencies).
    pub fn graph(&self) -> &PlanGraph {
        &self.ctx.graph
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.ctx.plan
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
        let Some(i) = self.ctx.graph.index_of(task_id) else {
            return Err(StoreError::new(format!(
                "task `{task_id}` is not in the plan"
            )));
        };
        // The store's door and the returned result (which a worker
        // commits) both pass the run's secret mask.
        let store = ctx_store::masked_store(store, &self.ctx.secret_mask);
        let approval = match self.gate(i, &store).await? {
            Gate::Open(approval) => approval,
            Gate::Rejected(r) => {
                crate::offload::store(&store, (*r).clone()).await?;
                return Ok(*r);
            }
        };
        let mut result = run_job(
            &self.ctx,
            &store,
            i,
            None,
            &AtomicBool::new(false),
            None,
            approval.as_ref(),
        )
        .await?;
        self.ctx.secret_mask.apply_result(&mut result);
        Ok(result)
    }

    /// Task `i`'s `before: run` gate, read from `store`'s decisions.
    async fn gate(&self, i: usize, store: &Arc<dyn ExecutionStore>) -> Result<Gate, StoreError> {
        use ctx_model::approval::{GateStage, Verdict, gate, settling};
        let task = &self.ctx.plan.sub_tasks[i];
        if !gate(task).is_some_and(|a| a.before == GateStage::Run) {
            return Ok(Gate::Open(None));
        }
        let decisions = crate::offload::decisions(store).await?;
        match settling(&decisions, &task.id, GateStage::Run, None) {
            Some(d) if d.verdict == Verdict::Approve => Ok(Gate::Open(Some(d.clone()))),
            Some(d) => Ok(Gate::Rejected(Box::new(crate::gates::rejected_result(
                &task.id, d,
            )))),
            None => Err(StoreError::new(format!(
                "task `{}` waits for approval: it was claimed before a decision",
                task.id
            ))),
        }
    }

    /// Whether `kept`, task `task_id`'s completed result from before a
    /// resume, may be taken as stored instead of running the task: the
    /// items of maps its prompt receives now, read from `store` as the
    /// task body reads them, digest as those it received then
    /// ([`items_digest`](crate::map::items_digest), recorded as
    /// `metadata.map_inputs`). It is the executor's rule for a task below
    /// a map on resume, for a shared store whose worker claims the task
    /// with the result its resume kept aside; the other half of that
    /// rule (every other dependency was taken as stored too) is the
    /// store's: a dependency that runs again clears the kept result.
    /// `Err` only when the store fails or the plan has no such task.
    pub async fn kept_result_holds(
        &self,
        task_id: &str,
        store: Arc<dyn ExecutionStore>,
        kept: &TaskExecutionResult,
    ) -> Result<bool, StoreError> {
        let Some(i) = self.ctx.graph.index_of(task_id) else {
            return Err(StoreError::new(format!(
                "task `{task_id}` is not in the plan"
            )));
        };
        if kept.status != ctx_model::TaskStatus::Completed || kept.task_id != task_id {
            return Ok(false);
        }
        let now = crate::attempt::read_dependencies(&self.ctx, &store, i).await?;
        Ok(crate::map::items_digest(&self.ctx.plan, &now) == kept.metadata.map_inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;
    use ctx_cost::Usage;
    use ctx_model::{SubTask, TaskStatus};

    /// Every call costs 5 picodollars, whatever it used.
    struct Five;

    impl CostModel for Five {
        fn bound(&self, _: &SubTask) -> Option<Usd> {
            Some(Usd::from_picos(50))
        }
        fn max_tokens(&self, _: &SubTask) -> Option<u64> {
            Some(10)
        }
        fn call_cost(&self, _: &SubTask, _: &Usage) -> Option<Usd> {
            Some(Usd::from_picos(5))
        }
    }

    fn context(cost: Option<CostOptions>) -> TaskContext {
        let plan = ctx_test_support::plan(&[("a", &[])]);
        let options = ExecutorOptions {
            cost,
            ..ExecutorOptions::default()
        };
        TaskContext::new(plan, Arc::new(ctx_engine::DryRunEngine), &options).unwrap()
    }

    #[test]
    fn a_recorded_cost_is_settled_as_is_else_it_is_computed() {
        let priced = context(Some(CostOptions {
            model: Arc::new(Five),
            max_cost: None,
            already_spent: Usd::ZERO,
            cut_output_at_max_tokens: false,
            shared_budget: None,
        }));
        let mut r = TaskExecutionResult::new("a", TaskStatus::Completed);
        r.metadata.cost_usd = Some(Usd::from_picos(7));
        assert_eq!(priced.settled_cost(0, &r), Some(Usd::from_picos(7)));
        r.metadata.cost_usd = None;
        let computed =
            crate::cost::task_cost(&Five, &priced.plan.sub_tasks[0], &r, &*priced.counters[0]);
        assert!(computed.is_some_and(|c| c != Usd::from_picos(7)));
        assert_eq!(priced.settled_cost(0, &r), computed);
        // Without prices nothing can be computed; a task out of range
        // neither.
        assert_eq!(context(None).settled_cost(0, &r), None);
        assert_eq!(priced.settled_cost(5, &r), None);
    }

    #[test]
    fn one_counter_per_tokenizer_and_the_variant_decides_the_prompt_plan() {
        let plan = ctx_test_support::plan(&[("a", &[]), ("b", &["a"])]);
        let options = ExecutorOptions {
            context: crate::options::ContextVariant::Bare,
            ..ExecutorOptions::default()
        };
        let ctx = TaskContext::new(plan, Arc::new(ctx_engine::DryRunEngine), &options).unwrap();
        assert!(Arc::ptr_eq(&ctx.counters[0], &ctx.counters[1]));
        assert!(ctx.prompt_plan.is_some());
        assert!(!ctx.include_dependencies);
        assert!(!ctx.engine.answers_prompts());
    }
}
