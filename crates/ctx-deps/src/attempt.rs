//! One task's attempt loop, in steps: read the dependencies' results,
//! assemble the prompt, store `in_progress`, call the engine, record the
//! answer, run the checks and, on a failed check, assemble the retry with
//! feedback, until the answer passes or the attempts run out; then number
//! the attempts, price the task and store the outcome.
//!
//! The executor's module documentation, "One task", says what each step
//! guarantees; [`checking`](crate::checking) owns what a check is and how
//! feedback is worded. Every engine call goes through the run's
//! [`EngineCalls`](crate::engine_call::EngineCalls).

use std::collections::HashMap;
use std::sync::Arc;

use ctx_checks::CheckResult;
use ctx_engine::{EngineError, FirstToken, InferenceRequest, InferenceResponse};
use ctx_model::{
    CallOutcome, CheckAttempt, FinishReason, Plan, SubTask, TaskExecutionResult, TaskStatus,
    TokenUsage,
};
use ctx_prompt::{AssembledPrompt, AssemblyError, DependencyOutput};
use ctx_store::{ExecutionStore, StoreError};
use ctx_tokens::TokenCounter;
use tokio::time::Instant;

use crate::checking::TaskChecks;
use crate::engine_call::millis;
use crate::task::TaskContext;

/// Assembles, stores `in_progress`, runs the engine (again with feedback
/// while checks fail and attempts are left), stores the outcome. Returns
/// `Err` only when the store fails.
///
/// A warm-up call (`first_token`, [`warm_up`](crate::warm_up)) whose
/// shared prefix is too short to be cached fires its signal before it is
/// sent: its siblings have nothing to wait for.
pub(crate) async fn execute_task(
    ctx: &TaskContext,
    store: &Arc<dyn ExecutionStore>,
    i: usize,
    first_token: Option<&FirstToken>,
) -> Result<TaskExecutionResult, StoreError> {
    let t0 = Instant::now();
    let Some(task) = ctx.plan.sub_tasks.get(i) else {
        return Err(StoreError::new(format!("no task at index {i}")));
    };
    let dep_results = read_dependencies(ctx, store, i).await?;
    let mut attempts = Attempts::new(ctx, store, i, task, t0);
    attempts.first_token = first_token;
    // What a resume compares before taking this result again: the items
    // of maps this prompt receives (a failed one as its note, as above).
    attempts.result.metadata.map_inputs = crate::map::items_digest(&ctx.plan, &dep_results);
    let prompts = match Prompts::new(ctx, i, task, &dep_results) {
        Ok(prompts) => prompts,
        Err(error) => return attempts.fail_before_call(error).await,
    };
    let assembled = match prompts.first() {
        Ok(assembled) => assembled,
        Err(e) => return attempts.fail_before_call(e.to_string()).await,
    };
    if let Some(signal) = first_token
        && !crate::warm_up::worth_warming(&ctx.plan, task, &assembled, ctx.counters[i].as_ref())
    {
        signal.fire();
    }
    if let Err(error) = attempts.prepare_checks() {
        return attempts.fail_before_call(error).await;
    }
    attempts.run(&prompts, assembled).await?;
    attempts.finish().await
}

/// The stored results of task `i`'s dependencies, in dependency order.
pub(crate) async fn read_dependencies(
    ctx: &TaskContext,
    store: &Arc<dyn ExecutionStore>,
    i: usize,
) -> Result<Vec<TaskExecutionResult>, StoreError> {
    let g = &ctx.graph;
    let dep_ids: Vec<String> = crate::map::prompt_dependencies(&ctx.plan, g, i)
        .iter()
        .map(|&d| g.id(d).to_string())
        .collect();
    let mut results = crate::offload::get_by_dependency_ids(store, &dep_ids).await?;
    // An item of a map that did not complete (its map allowed it) is
    // shown as its heading and a one-line note.
    for r in &mut results {
        if r.status != TaskStatus::Completed && ctx_model::map::parse_item_id(&r.task_id).is_some()
        {
            r.output = crate::map::failed_item_note(r);
            r.status = TaskStatus::Completed;
            r.summary = None;
            r.metadata.summary = None;
        }
    }
    Ok(results)
}

/// What task `i`'s prompts are assembled from: the context variant's plan
/// and task (`ctx eval`), the dependencies' outputs (none when the variant
/// leaves them out), its counter and the plan's cap. The first prompt and
/// every retry come from the same inputs.
struct Prompts<'a> {
    plan: &'a Plan,
    task: &'a SubTask,
    dependencies: Vec<DependencyOutput<'a>>,
    counter: &'a dyn TokenCounter,
    cap: usize,
}

impl<'a> Prompts<'a> {
    /// The inputs, or the task's failure when a dependency has no
    /// completed result.
    fn new(
        ctx: &'a TaskContext,
        i: usize,
        task: &'a SubTask,
        dep_results: &'a [TaskExecutionResult],
    ) -> Result<Prompts<'a>, String> {
        let dependencies = dependency_outputs(ctx, i, task, dep_results)?;
        let plan = ctx.prompt_plan.as_ref().unwrap_or(&ctx.plan);
        Ok(Prompts {
            plan,
            task: plan.sub_tasks.get(i).unwrap_or(task),
            dependencies: if ctx.include_dependencies {
                dependencies
            } else {
                Vec::new()
            },
            counter: ctx.counters[i].as_ref(),
            cap: ctx.plan.config.max_prompt_tokens,
        })
    }

    /// The first attempt's prompt.
    fn first(&self) -> Result<AssembledPrompt, AssemblyError> {
        ctx_prompt::assemble_task_prompt(
            self.plan,
            self.task,
            &self.dependencies,
            self.counter,
            self.cap,
        )
    }

    /// The next attempt's prompt, with feedback on the failed `results`.
    fn retry(&self, results: &[CheckResult]) -> Result<AssembledPrompt, AssemblyError> {
        crate::checking::retry_prompt(
            self.plan,
            self.task,
            &self.dependencies,
            self.counter,
            self.cap,
            results,
        )
        .map(|(next, _feedback)| next)
    }
}

/// Each dependency's output as prompt assembly takes it, in the order of
/// `config.layout` (as listed, or plan order under `cache`); the error names a dependency without a completed result.
fn dependency_outputs<'a>(
    ctx: &'a TaskContext,
    i: usize,
    task: &SubTask,
    dep_results: &'a [TaskExecutionResult],
) -> Result<Vec<DependencyOutput<'a>>, String> {
    let g = &ctx.graph;
    let order = crate::map::prompt_dependencies(&ctx.plan, g, i);
    // By id, the first completed result of each: a scan of the results
    // per dependency made a reduce over a map of N items take N²/2
    // comparisons of ids (issue 35: most of a 30,000-item map's CPU).
    let mut completed: HashMap<&str, &TaskExecutionResult> =
        HashMap::with_capacity(dep_results.len());
    for r in dep_results
        .iter()
        .filter(|r| r.status == TaskStatus::Completed)
    {
        completed.entry(r.task_id.as_str()).or_insert(r);
    }
    let mut deps = Vec::with_capacity(order.len());
    for d in order {
        let id = g.id(d);
        let Some(r) = completed.get(id).copied() else {
            // The dispatcher only starts a task whose dependencies are
            // completed; a store that lost one is reported, not trusted.
            return Err(format!(
                "dependency `{id}` has no completed result in the execution store"
            ));
        };
        deps.push(DependencyOutput {
            task_id: &r.task_id,
            // By the graph's index: a scan of the plan per dependency
            // made a run quadratic in its size.
            description: ctx
                .plan
                .sub_tasks
                .get(d)
                .map_or("", |t| t.description.as_str()),
            output: &r.output,
            summary: crate::summarize::summary_for_dependent(r, &task.id),
        });
    }
    Ok(deps)
}

/// One task's attempts and the result they build.
struct Attempts<'a> {
    ctx: &'a TaskContext,
    store: &'a Arc<dyn ExecutionStore>,
    i: usize,
    task: &'a SubTask,
    t0: Instant,
    /// The task's compiled checks, when it has any and the engine answers
    /// prompts.
    checks: Option<TaskChecks>,
    /// The task's `output` block compiled, when it has one
    /// (`ctx_model::output_cleaning::task_output_cleaning`).
    cleaner: Option<ctx_checks::OutputCleaner>,
    result: TaskExecutionResult,
    /// The warm-up signal its call carries (warm_up.rs).
    first_token: Option<&'a FirstToken>,
}

/// What a checked answer leads to.
enum Verdict {
    /// The result is final (passed, or failed for good).
    Done,
    /// Try again with this prompt.
    Retry(AssembledPrompt),
}

impl<'a> Attempts<'a> {
    fn new(
        ctx: &'a TaskContext,
        store: &'a Arc<dyn ExecutionStore>,
        i: usize,
        task: &'a SubTask,
        t0: Instant,
    ) -> Attempts<'a> {
        let mut result = TaskExecutionResult::new(&task.id, TaskStatus::Failed);
        result.metadata.tokenizer = Some(ctx.counters[i].name().to_string());
        result.metadata.map_item_hash = ctx.item_hashes.get(&i).cloned();
        Attempts {
            ctx,
            store,
            i,
            task,
            t0,
            checks: None,
            cleaner: None,
            result,
            first_token: None,
        }
    }

    /// The task's `output` block and checks, compiled. Checks run only on
    /// real answers (not a dry run's placeholders), while the block
    /// cleans every answer; an error is the task's failure.
    fn prepare_checks(&mut self) -> Result<(), String> {
        self.cleaner = crate::checking::prepare_cleaner(&self.ctx.plan, self.task)?;
        if self.ctx.engine.answers_prompts() {
            self.checks = crate::checking::prepare(&self.ctx.plan, self.task)?;
        }
        Ok(())
    }

    /// The task's time so far, in milliseconds. A dry run calls no model:
    /// its time is 0, so that two dry runs of one plan give byte-identical
    /// output (the time of assembling a prompt is no figure of the run).
    fn elapsed_ms(&self) -> u64 {
        if self.ctx.engine.answers_prompts() {
            millis(self.t0.elapsed())
        } else {
            0
        }
    }

    /// The task failed before any engine call: stored and returned as is.
    async fn fail_before_call(mut self, error: String) -> Result<TaskExecutionResult, StoreError> {
        self.result.error = Some(error);
        self.result.metadata.execution_time_ms = Some(self.elapsed_ms());
        crate::offload::store(self.store, self.result.clone()).await?;
        Ok(self.result)
    }

    /// The attempts, from `assembled` on, until one ends the task.
    async fn run(
        &mut self,
        prompts: &Prompts<'_>,
        mut assembled: AssembledPrompt,
    ) -> Result<(), StoreError> {
        let max_attempts = match self.checks {
            Some(_) => self.ctx.plan.config.max_check_attempts.max(1),
            None => 1,
        };
        let mut number = 0;
        loop {
            number += 1;
            let request = self.store_in_progress(&assembled).await?;
            let call = self.ctx.engine.call_with(&request, self.first_token);
            let response = call.await.map(|resp| self.cut_at_max_tokens(resp));
            self.result.metadata.execution_time_ms = Some(self.elapsed_ms());
            let resp = match response {
                Ok(resp) => resp,
                Err(e) => {
                    self.record_engine_failure(number, request, e);
                    return Ok(());
                }
            };
            let usage = resp.usage;
            let output = self.record_answer(resp);
            let output = self.clean(output);
            let Some(checks) = self.checks.take() else {
                self.result.output = output;
                return Ok(());
            };
            let results = self.check(&checks, number, request, output, usage).await;
            self.checks = Some(checks);
            match self.verdict(number, max_attempts, &results, prompts) {
                Verdict::Done => return Ok(()),
                Verdict::Retry(next) => assembled = next,
            }
        }
    }

    /// Stores the attempt's `in_progress` result holding its exact prompt,
    /// and returns the request to send.
    async fn store_in_progress(
        &mut self,
        assembled: &AssembledPrompt,
    ) -> Result<InferenceRequest, StoreError> {
        let result = &mut self.result;
        result.status = TaskStatus::InProgress;
        result.prompt = Some(assembled.text.clone());
        result.metadata.prompt_tokens = Some(assembled.tokens);
        result.metadata.tokenizer = Some(assembled.tokenizer.clone());
        crate::offload::store(self.store, result.clone()).await?;
        let mut request = InferenceRequest {
            task_id: self.task.id.clone(),
            prompt: assembled.text.clone(),
            params: self.task.tool_or_prompt.params.clone(),
            prompt_tokens: assembled.tokens,
            max_output_bytes: self.ctx.engine.max_output_bytes(),
            response_schema: self
                .checks
                .as_ref()
                .and_then(|c| c.set.response_schema().cloned()),
            purpose: Default::default(),
            cache_breakpoints: None,
            // Planted by `EngineCalls`, which every call goes through.
            canary: None,
        };
        crate::prompt_cache::apply(
            &self.ctx.plan,
            self.task,
            assembled,
            &self.ctx.secret_mask,
            &mut request,
        );
        Ok(request)
    }

    /// With [`CostOptions::cut_output_at_max_tokens`](crate::CostOptions::cut_output_at_max_tokens):
    /// the output cut at the task's `max_tokens`, counted with its
    /// tokenizer, and flagged `length`.
    fn cut_at_max_tokens(&self, mut resp: InferenceResponse) -> InferenceResponse {
        let Some(c) = self
            .ctx
            .cost
            .as_ref()
            .filter(|c| c.cut_output_at_max_tokens)
        else {
            return resp;
        };
        let Some(max) = c.model.max_tokens(self.task) else {
            return resp;
        };
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let counter = self.ctx.counters[self.i].as_ref();
        if let Some(cut) = ctx_tokens::truncate_to_tokens(&resp.output, max, counter) {
            resp.output = cut.to_owned();
            resp.finish_reason = Some(FinishReason::Length);
        }
        resp
    }

    /// The engine gave up: the task fails with its words and attempts (a
    /// checked task records the attempt too).
    fn record_engine_failure(&mut self, number: u32, request: InferenceRequest, e: EngineError) {
        let result = &mut self.result;
        result.status = TaskStatus::Failed;
        result.error = Some(e.message.clone());
        result.metadata.attempts.extend(e.attempts);
        if self.checks.is_some() {
            result.metadata.check_attempts.push(CheckAttempt {
                number,
                prompt: request.prompt,
                prompt_tokens: request.prompt_tokens,
                error: Some(e.message),
                ..CheckAttempt::default()
            });
        }
    }

    /// The engine answered: the task completes (unless its checks say
    /// otherwise), with the engine's metadata. Returns the output.
    fn record_answer(&mut self, resp: InferenceResponse) -> String {
        let meta = &mut self.result.metadata;
        self.result.status = TaskStatus::Completed;
        self.result.error = None;
        // The engine's word only: a dry run names no model.
        meta.model = resp.model;
        meta.tokens_used = match self.checks {
            // Every attempt and judge of a checked task counts.
            Some(_) => TokenUsage::sum([meta.tokens_used, resp.usage]),
            None => resp.usage,
        };
        meta.finish_reason = resp.finish_reason;
        meta.attempts.extend(resp.attempts);
        meta.cached = resp.cached;
        resp.output
    }

    /// `output` less what the task's `output` block removes: what checks,
    /// dependents and publishing see. The answer as written is kept in
    /// `raw_output` when something was removed, and only then.
    fn clean(&mut self, output: String) -> String {
        let cleaned = match self.cleaner.as_ref().map(|c| c.clean(&output)) {
            Some(std::borrow::Cow::Owned(cleaned)) => Some(cleaned),
            _ => None,
        };
        match cleaned {
            Some(cleaned) => {
                self.result.raw_output = Some(output);
                cleaned
            }
            None => {
                self.result.raw_output = None;
                output
            }
        }
    }

    /// Runs the checks on `output` and records the attempt; returns the
    /// check results.
    async fn check(
        &mut self,
        checks: &TaskChecks,
        number: u32,
        request: InferenceRequest,
        output: String,
        usage: Option<TokenUsage>,
    ) -> Vec<CheckResult> {
        let ctx = self.ctx;
        let counter = ctx.counters[self.i].as_ref();
        let (results, judge_usage, judge_calls) = crate::checking::evaluate(
            &ctx.engine,
            &ctx.plan,
            ctx.cost.as_ref(),
            checks,
            self.task,
            &output,
            counter,
        )
        .await;
        let elapsed = self.elapsed_ms();
        let result = &mut self.result;
        result.metadata.tokens_used = TokenUsage::sum([result.metadata.tokens_used, judge_usage]);
        result.metadata.execution_time_ms = Some(elapsed);
        result.output = output;
        result.metadata.checks = results.clone();
        result.metadata.check_attempts.push(CheckAttempt {
            number,
            prompt: request.prompt,
            prompt_tokens: request.prompt_tokens,
            output: result.output.clone(),
            checks: results.clone(),
            tokens_used: usage,
            judge_tokens_used: judge_usage,
            judge_calls,
            error: None,
        });
        results
    }

    /// After attempt `number`'s checks: done when they passed (a
    /// validated JSON answer loses its code fence), failed when no attempt
    /// is left or the retry cannot be assembled, else the retry's prompt.
    fn verdict(
        &mut self,
        number: u32,
        max_attempts: u32,
        results: &[CheckResult],
        prompts: &Prompts<'_>,
    ) -> Verdict {
        let result = &mut self.result;
        if ctx_checks::all_passed(results) {
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
            return Verdict::Done;
        }
        let failure = crate::checking::failure_message(results, number);
        // The call answered, but the answer was rejected: its engine
        // attempt says so (`ctx runs report` marks it a check failure).
        if let Some(last) = result.metadata.attempts.last_mut() {
            last.outcome = CallOutcome::CheckFailed;
            last.error = Some(failure.clone());
        }
        if number >= max_attempts {
            result.status = TaskStatus::Failed;
            result.error = Some(failure);
            return Verdict::Done;
        }
        match prompts.retry(results) {
            Ok(next) => Verdict::Retry(next),
            Err(e) => {
                result.status = TaskStatus::Failed;
                result.error = Some(format!("{failure}; the retry could not be assembled: {e}"));
                Verdict::Done
            }
        }
    }

    /// Numbers the attempts across check attempts, prices the task and
    /// stores the outcome.
    async fn finish(mut self) -> Result<TaskExecutionResult, StoreError> {
        ctx_model::Attempt::number_in_order(&mut self.result.metadata.attempts);
        if let Some(c) = &self.ctx.cost {
            let counter = self.ctx.counters[self.i].as_ref();
            self.result.metadata.cost_usd =
                crate::cost::task_cost(c.model.as_ref(), self.task, &self.result, counter);
            self.result.metadata.cache_saving_usd =
                crate::cost::task_cache_saving(c.model.as_ref(), self.task, &self.result);
        }
        crate::offload::store(self.store, self.result.clone()).await?;
        Ok(self.result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{ContextVariant, ExecutorOptions};

    /// `a → b`, run on the dry-run engine.
    fn context(context: ContextVariant) -> TaskContext {
        let plan = ctx_test_support::plan(&[("a", &[]), ("b", &["a"])]);
        let options = ExecutorOptions {
            context,
            ..ExecutorOptions::default()
        };
        TaskContext::new(plan, Arc::new(ctx_engine::DryRunEngine), &options).unwrap()
    }

    fn result(id: &str, status: TaskStatus, output: &str) -> TaskExecutionResult {
        let mut r = TaskExecutionResult::new(id, status);
        r.output = output.into();
        r
    }

    #[test]
    fn a_dependency_without_a_completed_result_is_named() {
        let ctx = context(ContextVariant::Full);
        let b = &ctx.plan.sub_tasks[1];
        let missing = "dependency `a` has no completed result in the execution store";
        assert_eq!(dependency_outputs(&ctx, 1, b, &[]).unwrap_err(), missing);
        let unfinished = [result("a", TaskStatus::InProgress, "half")];
        assert_eq!(
            dependency_outputs(&ctx, 1, b, &unfinished).unwrap_err(),
            missing
        );
        let done = [result("a", TaskStatus::Completed, "out of a")];
        let deps = dependency_outputs(&ctx, 1, b, &done).unwrap();
        assert_eq!(deps.len(), 1);
        assert_eq!(
            (deps[0].task_id, deps[0].description, deps[0].output),
            ("a", "task a", "out of a")
        );
        // Found by id among results in any order: an unrelated one and a
        // row that did not complete are passed over, and of two completed
        // rows the first is taken, as a scan of the results took it.
        let mixed = [
            result("x", TaskStatus::Completed, "out of x"),
            result("a", TaskStatus::Failed, "broke"),
            result("a", TaskStatus::Completed, "first"),
            result("a", TaskStatus::Completed, "second"),
        ];
        let deps = dependency_outputs(&ctx, 1, b, &mixed).unwrap();
        assert_eq!(deps.iter().map(|d| d.output).collect::<Vec<_>>(), ["first"]);
    }

    #[test]
    fn a_variant_without_dependencies_still_requires_them_but_leaves_them_out() {
        let ctx = context(ContextVariant::NoDependencies);
        let b = &ctx.plan.sub_tasks[1];
        assert!(Prompts::new(&ctx, 1, b, &[]).is_err());
        let done = [result("a", TaskStatus::Completed, "out of a")];
        let prompts = Prompts::new(&ctx, 1, b, &done).unwrap();
        assert!(prompts.dependencies.is_empty());
        assert!(!prompts.first().unwrap().text.contains("out of a"));
        let full = context(ContextVariant::Full);
        let prompts = Prompts::new(&full, 1, &full.plan.sub_tasks[1], &done).unwrap();
        assert!(prompts.first().unwrap().text.contains("out of a"));
    }

    #[tokio::test]
    async fn a_failure_before_any_call_is_stored_once_without_a_prompt() {
        let ctx = context(ContextVariant::Full);
        let memory = Arc::new(ctx_store::MemoryStore::new());
        let store: Arc<dyn ExecutionStore> = memory.clone();
        let r = execute_task(&ctx, &store, 1, None).await.unwrap();
        assert_eq!(r.status, TaskStatus::Failed);
        assert_eq!(
            r.error.as_deref(),
            Some("dependency `a` has no completed result in the execution store")
        );
        assert!(r.prompt.is_none());
        assert!(r.metadata.execution_time_ms.is_some());
        assert_eq!(memory.get_by_task_id("b").unwrap(), Some(r));
        assert!(execute_task(&ctx, &store, 9, None).await.is_err());
    }

    #[tokio::test]
    async fn a_task_without_checks_makes_one_attempt_and_stores_its_answer() {
        let ctx = context(ContextVariant::Full);
        let memory = Arc::new(ctx_store::MemoryStore::new());
        let store: Arc<dyn ExecutionStore> = memory.clone();
        let r = execute_task(&ctx, &store, 0, None).await.unwrap();
        assert_eq!(r.status, TaskStatus::Completed);
        assert_eq!(r.output, ctx_engine::DryRunEngine::output_for("a"));
        assert_eq!(r.metadata.attempts.len(), 1);
        assert!(r.metadata.check_attempts.is_empty());
        assert!(r.prompt.as_deref().is_some_and(|p| p.contains("do a")));
        assert_eq!(memory.get_by_task_id("a").unwrap(), Some(r));
    }
}
