//! Checks in the executor: evaluating an answer, asking judges, and the
//! retried prompt with its feedback section.
//!
//! A task with checks (`config.checks` and its own `checks`, see
//! docs/checks.md) is tried up to `config.max_check_attempts` times in
//! all. After each answer every check runs on the output (`evaluate`);
//! `judge` checks are sent to the run's engine, bounded by their
//! `max_tokens`, and their usage is added to the task's; each judge call
//! is recorded on its check attempt ([`JudgeCall`]) so its cost is priced
//! at its own model, and charged even when it got no answer. A judge call is
//! an engine call of the task like its answer and its summaries: it goes
//! through the executor's one call path, so `--task-timeout` bounds it
//! (on its own, from its start, as each of the task's calls) and so does
//! `--max-output-bytes`. A judge that times out, fails or answers out of
//! shape fails its check with the reason; it never fails the run, and the
//! task's feedback retries treat it as any failed check. When a check fails
//! and attempts remain, the task is asked again with [`retry_prompt`]: the
//! prompt assembled as usual plus the `## Your previous answer failed these
//! checks` section.
//!
//! ## The budget of a retried prompt
//!
//! The feedback is part of the prompt, so the whole text stays within
//! `max_prompt_tokens`, counted exactly, and the task's own prompt is
//! never cut. The feedback is given room before the context: it is fitted
//! ([`Feedback::fit`]) to what the cap leaves beside the task's own prompt,
//! then the context (dependency outputs, entities) is assembled under the
//! cap less the feedback, shrinking by the usual rules. Token counts are
//! not exactly additive across the join, so the joined text is counted
//! again; when it is over, the feedback's budget is lowered by the excess
//! and the fit repeated. When no feedback fits at all (or the context
//! cannot shrink enough beside it), the retry is the plain prompt: a second
//! sample is still a second chance.

use ctx_checks::{CheckResult, CheckSet, EvalContext, ExpectedEntity, Feedback};
use ctx_model::{JudgeCall, Params, Plan, SubTask, TokenUsage};
use ctx_prompt::{AssembledPrompt, AssemblyError, DependencyOutput};
use ctx_tokens::TokenCounter;

use ctx_engine::InferenceRequest;

use crate::engine_call::EngineCalls;

/// What joins the assembled prompt and the feedback section.
pub const FEEDBACK_JOIN: &str = "\n\n";

/// How many times the feedback's budget is lowered before the retry goes
/// without feedback (each round is one assembly and one count).
const FIT_ROUNDS: usize = 8;

/// A task's compiled checks and the entities its `entities` checks look
/// for.
pub(crate) struct TaskChecks {
    pub(crate) set: CheckSet,
    pub(crate) entities: Vec<ExpectedEntity>,
}

/// The checks of `task`, compiled; `None` when it has none. Schema paths
/// are read relative to the current directory (`ctx run` inlines them
/// when it loads the plan). An error is the task's failure: validation
/// reports the same problems before a run, so it means an unvalidated
/// plan.
pub(crate) fn prepare(plan: &Plan, task: &SubTask) -> Result<Option<TaskChecks>, String> {
    let checks = ctx_model::task_checks(plan, task);
    if checks.is_empty() {
        return Ok(None);
    }
    let set = CheckSet::compile(&checks, std::path::Path::new("."))
        .map_err(|e| format!("{}: {}", e, source_text(&e)))?;
    let entities = ctx_checks::expected_entities(plan, task)
        .map_err(|e| format!("{}: {}", e, source_text(&e)))?;
    Ok(Some(TaskChecks { set, entities }))
}

/// The `output` block of `task` compiled (the task's own, else
/// `config.output`); `None` when there is nothing to remove. An error is
/// the task's failure, as for [`prepare`].
pub(crate) fn prepare_cleaner(
    plan: &Plan,
    task: &SubTask,
) -> Result<Option<ctx_checks::OutputCleaner>, String> {
    ctx_model::output_cleaning::task_output_cleaning(plan, task)
        .map(ctx_checks::OutputCleaner::compile)
        .transpose()
        .map_err(|e| format!("{}: {}", e, source_text(&e)))
}

fn source_text(e: &dyn std::error::Error) -> String {
    e.source()
        .map(|s| s.to_string().replace('\n', " "))
        .unwrap_or_default()
}

/// Runs every check on `output`, asking the judges through the run's
/// engine within its time and output bounds (`engine`). Under a budget
/// (`cost`'s, with the output's completion high, see
/// [`call_bounds`](crate::call_bounds)) a judge prompt over what was
/// reserved is not sent; a judge the engine reports no usage for is
/// counted with the request's overhead
/// ([`CostModel::request_overhead`](crate::CostModel::request_overhead)).
/// Returns the results,
/// the judges' total usage and each judge call (for its cost, at its own
/// model; a call that got no answer is recorded too, since it may have
/// been billed). Never fails: a judge whose call fails or times out fails
/// its check.
pub(crate) async fn evaluate(
    engine: &EngineCalls,
    plan: &Plan,
    cost: Option<&crate::CostOptions>,
    checks: &TaskChecks,
    task: &SubTask,
    output: &str,
    counter: &dyn TokenCounter,
) -> (Vec<CheckResult>, Option<TokenUsage>, Vec<JudgeCall>) {
    let output_high = crate::call_bounds::budgeted_output_high(cost, task);
    let request_overhead = cost.map_or(0, |c| c.model.request_overhead(task, false, counter));
    let context = EvalContext {
        entities: &checks.entities,
        canary: engine.canary_token(),
    };
    let mut evaluation = checks.set.evaluate(output.as_bytes(), &context);
    let mut usage = None;
    let mut calls = Vec::new();
    let specs = output_high.map(|_| ctx_model::task_checks(plan, task));
    for judge in evaluation.take_judge_requests() {
        // Under a budget a prompt over what the reservation allowed (the
        // output grew when it was neutralized) is not sent: the check
        // fails with the reason.
        let rubric = specs
            .as_ref()
            .and_then(|s| match s.get(judge.index).map(|c| &c.rule) {
                Some(ctx_checks::Rule::Judge(j)) => Some(j.rubric.as_str()),
                _ => None,
            });
        let prompt_tokens = counter.count(&judge.prompt);
        if let (Some(high), Some(rubric)) = (output_high, rubric) {
            let bound = crate::call_bounds::judge_prompt_bound(rubric, high, counter);
            if let Some(reason) = crate::call_bounds::over_bound("judge", prompt_tokens, bound) {
                let recorded = evaluation.record_judge_error(judge.index, &reason);
                debug_assert!(recorded.is_ok());
                continue;
            }
        }
        let index = judge.index;
        let (call, judged, answer) = ask_judge(
            engine,
            plan,
            task,
            judge,
            prompt_tokens,
            request_overhead,
            counter,
        )
        .await;
        usage = TokenUsage::sum([usage, judged]);
        let recorded = match answer {
            Ok(answer) => evaluation.record_judge_answer(index, &answer),
            Err(error) => evaluation.record_judge_error(index, &error),
        };
        calls.push(call);
        // The index came from this evaluation's own requests.
        debug_assert!(recorded.is_ok());
    }
    (evaluation.finish(), usage, calls)
}

/// Asks one judge through `engine`. Returns the call as recorded, the
/// tokens it used (ctx's count when the engine reports none) and the
/// answer, or the error that fails the check.
async fn ask_judge(
    engine: &EngineCalls,
    plan: &Plan,
    task: &SubTask,
    judge: ctx_checks::judge::JudgeRequest,
    prompt_tokens: usize,
    request_overhead: u64,
    counter: &dyn TokenCounter,
) -> (JudgeCall, Option<TokenUsage>, Result<String, String>) {
    // A breakpoint after the rubric: the check's next call (a retried
    // attempt, another task under the same `config.checks`) reads it from
    // the provider's cache.
    let cache_breakpoints =
        crate::prompt_cache::side_call_breakpoints(plan, &judge.prompt, &[judge.shared_end]);
    let request = InferenceRequest {
        task_id: task.id.clone(),
        prompt_tokens,
        prompt: judge.prompt,
        params: Params {
            model: judge
                .model
                .or_else(|| task.tool_or_prompt.params.model.clone()),
            max_tokens: Some(judge.max_tokens),
            temperature: Some(0.0),
            ..Params::default()
        },
        max_output_bytes: engine.max_output_bytes(),
        response_schema: Some(ctx_checks::judge::answer_schema()),
        purpose: ctx_engine::RequestPurpose::Judge,
        cache_breakpoints,
        // Planted by `EngineCalls`, which every call goes through.
        canary: None,
    };
    let mut call = JudgeCall {
        model: request.params.model.clone(),
        prompt_tokens: request.prompt_tokens,
        max_tokens: judge.max_tokens,
        ..JudgeCall::default()
    };
    match engine.call(&request).await {
        Ok(response) => {
            // An engine that reports no usage (a command) is counted by
            // ctx, its answer up to the judge's `max_tokens` as a task's
            // output is cut under a budget: the judge's cost is then part
            // of the task's, and within the bound `--max-cost` reserved
            // for it.
            // Its prompt as sent: the system message and chat framing
            // the engine adds included (`CostModel::request_overhead`).
            let judged = response.usage.unwrap_or_else(|| {
                let completion =
                    (counter.count(&response.output) as u64).min(u64::from(judge.max_tokens));
                let prompt = (request.prompt_tokens as u64).saturating_add(request_overhead);
                TokenUsage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt.saturating_add(completion),
                    cached_tokens: None,
                    cache_write_tokens: None,
                    partial: false,
                    prompt_counted: false,
                    service_tier: None,
                }
            });
            call.tokens_used = Some(judged);
            call.requests = requests(response.attempts.len());
            call.cached = response.cached;
            (call, Some(judged), Ok(response.output))
        }
        Err(e) => {
            call.requests = requests(e.attempts.len());
            (call, None, Err(e.message))
        }
    }
}

/// Requests an engine made for one call from the attempts it recorded: at
/// least one, the call was sent (an engine may record none, and a call
/// that timed out in ctx records none).
fn requests(attempts: usize) -> u32 {
    u32::try_from(attempts.max(1)).unwrap_or(u32::MAX)
}

/// The error of a task whose last attempt failed checks: every failure,
/// by kind and message.
pub(crate) fn failure_message(results: &[CheckResult], attempts: u32) -> String {
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| format!("{}: {}", r.kind, r.message.replace('\n', " ")))
        .collect();
    format!(
        "failed {} after {}: {}",
        ctx_model::display::count(failed.len(), "check", "checks"),
        ctx_model::display::count(attempts, "attempt", "attempts"),
        failed.join("; ")
    )
}

/// The prompt of a retry: `task`'s prompt assembled as usual plus the
/// feedback section for `results`, within `max_prompt_tokens` exactly (see
/// the module docs). The feedback is `None` when none fits.
pub fn retry_prompt(
    plan: &Plan,
    task: &SubTask,
    dependencies: &[DependencyOutput<'_>],
    counter: &dyn TokenCounter,
    max_prompt_tokens: usize,
    results: &[CheckResult],
) -> Result<(AssembledPrompt, Option<Feedback>), AssemblyError> {
    let cap = max_prompt_tokens;
    let plain = || {
        ctx_prompt::assemble_task_prompt(plan, task, dependencies, counter, cap).map(|a| (a, None))
    };
    let own = counter.count(&task.tool_or_prompt.params.prompt);
    let join = counter.count(FEEDBACK_JOIN);
    let mut budget = cap.saturating_sub(own.saturating_add(join));
    for _ in 0..FIT_ROUNDS {
        let Some(feedback) = Feedback::fit(results, counter, budget) else {
            return plain();
        };
        let context_cap = cap.saturating_sub(feedback.tokens.saturating_add(join));
        let assembled = match ctx_prompt::assemble_task_prompt(
            plan,
            task,
            dependencies,
            counter,
            context_cap,
        ) {
            Ok(a) => a,
            Err(AssemblyError::ContextOverCap { minimum_tokens, .. }) => {
                // The scaffolding does not fit beside this feedback: leave
                // the feedback what the smallest context leaves.
                let room = cap.saturating_sub(minimum_tokens.saturating_add(join));
                budget = room.min(feedback.tokens.saturating_sub(1));
                continue;
            }
            Err(AssemblyError::PromptOverCap { .. }) => {
                budget = feedback.tokens.saturating_sub(1);
                continue;
            }
        };
        let text = format!("{}{FEEDBACK_JOIN}{}", assembled.text, feedback.text);
        let tokens = counter.count(&text);
        if tokens <= cap {
            return Ok((
                AssembledPrompt {
                    text,
                    tokens,
                    ..assembled
                },
                Some(feedback),
            ));
        }
        budget = feedback.tokens.saturating_sub((tokens - cap).max(1));
    }
    plain()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_checks::CheckKind;
    use ctx_tokens::{Tokenizer, TokenizerExt};
    use proptest::prelude::*;

    fn plan(prompt: &str) -> Plan {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "entities": [{"name": "Board", "grounded_value": "10 x 20"},
                         {"name": "Speed", "grounded_value": "fast"}],
            "sub_tasks": [{"id": "css", "description": "Style", "dependencies": [],
                "entity_context": [{"entity_name": "Board", "intent_relevance": "constraint"},
                                   {"entity_name": "Speed"}],
                "tool_or_prompt": {"name": "inference", "params": {"prompt": prompt}}}]
        }))
        .unwrap()
    }

    fn failed(message: &str) -> CheckResult {
        CheckResult {
            kind: CheckKind::Contains,
            passed: false,
            message: message.to_string(),
            detail: None,
        }
    }

    #[test]
    fn the_feedback_follows_the_prompt_when_there_is_room() {
        let plan = plan("Write the CSS.");
        let dep = DependencyOutput {
            task_id: "html",
            description: "Page",
            output: "<canvas></canvas>",
            summary: None,
        };
        let counter = Tokenizer::Cl100kBase.counter();
        let results = [failed("does not contain \"10 x 20\"")];
        let (p, fb) =
            retry_prompt(&plan, &plan.sub_tasks[0], &[dep], &*counter, 4000, &results).unwrap();
        let plain =
            ctx_prompt::assemble_task_prompt(&plan, &plan.sub_tasks[0], &[dep], &*counter, 4000)
                .unwrap();
        let fb = fb.unwrap();
        assert_eq!(p.text, format!("{}\n\n{}", plain.text, fb.text));
        assert!(p.text.ends_with(
            "## Your previous answer failed these checks\n\n- does not contain \"10 x 20\"\n\nAnswer the task again, in full, so that every check passes.\n"
        ));
        assert_eq!(p.tokens, counter.count(&p.text));
    }

    #[test]
    fn a_tight_cap_shrinks_the_context_then_the_feedback_never_the_prompt() {
        let plan = plan("Write the CSS.");
        let long = "word ".repeat(400);
        let dep = DependencyOutput {
            task_id: "html",
            description: "Page",
            output: &long,
            summary: None,
        };
        let counter = Tokenizer::Cl100kBase.counter();
        let results: Vec<CheckResult> = (0..5)
            .map(|i| failed(&format!("failure number {i} {}", "detail ".repeat(30))))
            .collect();
        for cap in [30, 45, 60, 90, 150, 400] {
            let (p, _) =
                retry_prompt(&plan, &plan.sub_tasks[0], &[dep], &*counter, cap, &results).unwrap();
            assert!(p.tokens <= cap, "cap {cap}: {}", p.tokens);
            assert_eq!(p.tokens, counter.count(&p.text));
            assert!(p.text.contains("Write the CSS."));
        }
    }

    #[test]
    fn failure_messages_name_every_failed_check() {
        let mut ok = failed("fine");
        ok.passed = true;
        let results = [failed("no \"10 x 20\""), ok, failed("line\nbreak")];
        assert_eq!(
            failure_message(&results, 2),
            "failed 2 checks after 2 attempts: contains: no \"10 x 20\"; contains: line break"
        );
    }

    /// Answers by what the prompt holds: a judge prompt gets a verdict on
    /// whether the judged output says "10 x 20"; a prompt with feedback
    /// gets `fixed`, any other `first`.
    struct ByPrompt {
        first: &'static str,
        fixed: &'static str,
        prompts: std::sync::Mutex<Vec<String>>,
    }

    impl ctx_engine::InferenceEngine for ByPrompt {
        fn name(&self) -> &str {
            "by-prompt"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> ctx_engine::BoxFuture<'a, Result<ctx_engine::InferenceResponse, ctx_engine::EngineError>>
        {
            self.prompts.lock().unwrap().push(request.prompt.clone());
            let fenced = request
                .prompt
                .split_once(ctx_fence::FENCE_OPEN)
                .and_then(|(_, rest)| rest.split_once(ctx_fence::FENCE_CLOSE));
            let output = if let Some((judged, _)) = fenced {
                let pass = judged.contains("10 x 20");
                format!(r#"{{"pass": {pass}, "reason": "judged"}}"#)
            } else if request.prompt.contains(ctx_checks::FEEDBACK_HEADING) {
                self.fixed.to_string()
            } else {
                self.first.to_string()
            };
            Box::pin(async move {
                Ok(ctx_engine::InferenceResponse {
                    output,
                    usage: Some(TokenUsage {
                        prompt_tokens: 10,
                        completion_tokens: 5,
                        total_tokens: 15,
                        cached_tokens: None,
                        cache_write_tokens: None,
                        partial: false,
                        prompt_counted: false,
                        service_tier: None,
                    }),
                    attempts: vec![ctx_model::Attempt {
                        number: 1,
                        outcome: "ok".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
            })
        }
    }

    fn checked_plan(attempts: u32) -> Plan {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "entities": [{"name": "Board", "grounded_value": "10 x 20"}],
            "sub_tasks": [
                {"id": "css", "description": "Style",
                 "entity_context": [{"entity_name": "Board", "intent_relevance": "constraint"}],
                 "checks": [{"contains": "10 x 20", "message": "Keep the 10 x 20 board."},
                            {"judge": "Is the board 10 x 20?"}],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write the CSS."}}},
                {"id": "js", "description": "Script", "dependencies": ["css"],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write the JS."}}}
            ],
            "config": {"checks": [{"entities": true}], "max_check_attempts": attempts}
        }))
        .unwrap()
    }

    fn run(plan: Plan, engine: Arc<ByPrompt>) -> (crate::RunReport, Arc<ctx_store::MemoryStore>) {
        run_with(plan, engine, crate::ExecutorOptions::default())
    }

    fn run_with(
        plan: Plan,
        engine: Arc<dyn ctx_engine::InferenceEngine>,
        options: crate::ExecutorOptions,
    ) -> (crate::RunReport, Arc<ctx_store::MemoryStore>) {
        let store = Arc::new(ctx_store::MemoryStore::new());
        let exec = crate::Executor::new(plan, engine, store.clone(), options).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (rt.block_on(exec.run()).unwrap(), store)
    }

    use ctx_store::ExecutionStore;
    use std::sync::Arc;

    #[test]
    fn a_failing_check_is_retried_with_feedback_and_passes() {
        let engine = Arc::new(ByPrompt {
            first: "a board",
            fixed: "a 10 x 20 board",
            prompts: Default::default(),
        });
        let (report, store) = run(checked_plan(2), engine.clone());
        assert!(report.all_completed(), "{:?}", report.results);
        let css = store.get_by_task_id("css").unwrap().unwrap();
        assert_eq!(css.output, "a 10 x 20 board");
        assert_eq!(css.metadata.check_attempts.len(), 2);
        let first = &css.metadata.check_attempts[0];
        assert_eq!(first.output, "a board");
        let kinds: Vec<(&str, bool)> = first
            .checks
            .iter()
            .map(|r| (r.kind.as_str(), r.passed))
            .collect();
        assert_eq!(
            kinds,
            [("entities", false), ("contains", false), ("judge", false)]
        );
        assert!(css.metadata.checks.iter().all(|r| r.passed));
        let second = &css.metadata.check_attempts[1];
        assert!(
            second
                .prompt
                .contains("- Keep the 10 x 20 board. (does not contain \"10 x 20\")"),
            "{}",
            second.prompt
        );
        assert_eq!(css.prompt.as_deref(), Some(second.prompt.as_str()));
        // Two answers and two judges, 15 tokens each.
        assert_eq!(css.metadata.tokens_used.unwrap().total_tokens, 60);
        let outcomes: Vec<&ctx_model::CallOutcome> =
            css.metadata.attempts.iter().map(|a| &a.outcome).collect();
        assert_eq!(
            outcomes,
            [
                &ctx_model::CallOutcome::CheckFailed,
                &ctx_model::CallOutcome::Ok
            ]
        );
        // Numbered across the check attempts (each engine call restarts
        // at 1).
        let numbers: Vec<u32> = css.metadata.attempts.iter().map(|a| a.number).collect();
        assert_eq!(numbers, [1, 2]);
        // The dependent sees the passing output.
        let js = store.get_by_task_id("js").unwrap().unwrap();
        assert!(js.prompt.unwrap().contains("a 10 x 20 board"));
        assert!(js.metadata.check_attempts.len() == 1 && js.metadata.checks.len() == 1);
    }

    /// Answers tasks at once; a judge call never returns.
    struct StuckJudge;

    impl ctx_engine::InferenceEngine for StuckJudge {
        fn name(&self) -> &str {
            "stuck-judge"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> ctx_engine::BoxFuture<'a, Result<ctx_engine::InferenceResponse, ctx_engine::EngineError>>
        {
            Box::pin(async move {
                if request.purpose == ctx_engine::RequestPurpose::Judge {
                    std::future::pending::<()>().await;
                }
                Ok(ctx_engine::InferenceResponse {
                    output: "a 10 x 20 board".into(),
                    attempts: vec![ctx_model::Attempt {
                        number: 1,
                        outcome: "ok".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
            })
        }
    }

    /// Answers a task with 10 prompt and 5 completion tokens; a judge the
    /// same way with a passing verdict, or, with `judge_fails`, fails it
    /// after two requests.
    struct PricedJudge {
        judge_fails: bool,
    }

    impl ctx_engine::InferenceEngine for PricedJudge {
        fn name(&self) -> &str {
            "priced-judge"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> ctx_engine::BoxFuture<'a, Result<ctx_engine::InferenceResponse, ctx_engine::EngineError>>
        {
            let judge = request.purpose == ctx_engine::RequestPurpose::Judge;
            let attempt = |n: u32, outcome: &str| ctx_model::Attempt {
                number: n,
                outcome: outcome.into(),
                ..Default::default()
            };
            let answer = if judge && self.judge_fails {
                Err(ctx_engine::EngineError {
                    message: "HTTP 500".into(),
                    attempts: vec![attempt(1, "http_500"), attempt(2, "http_500")],
                })
            } else {
                Ok(ctx_engine::InferenceResponse {
                    output: if judge {
                        r#"{"pass": true, "reason": "fine"}"#.into()
                    } else {
                        "a 10 x 20 board".into()
                    },
                    usage: Some(TokenUsage {
                        prompt_tokens: 10,
                        completion_tokens: 5,
                        total_tokens: 15,
                        cached_tokens: None,
                        cache_write_tokens: None,
                        partial: false,
                        prompt_counted: false,
                        service_tier: None,
                    }),
                    attempts: vec![attempt(1, "ok")],
                    ..Default::default()
                })
            };
            Box::pin(async move { answer })
        }
    }

    /// $1 / $2 per million input / output tokens on the task's model, ten
    /// times that on `dear`; `max_tokens` 100.
    struct TwoModels;

    impl crate::CostModel for TwoModels {
        fn bound(&self, _: &SubTask) -> Option<ctx_cost::Usd> {
            None
        }
        fn max_tokens(&self, _: &SubTask) -> Option<u64> {
            Some(100)
        }
        fn call_cost(&self, task: &SubTask, usage: &ctx_cost::Usage) -> Option<ctx_cost::Usd> {
            self.call_cost_on(task, None, usage)
        }
        fn call_cost_on(
            &self,
            _: &SubTask,
            model: Option<&str>,
            usage: &ctx_cost::Usage,
        ) -> Option<ctx_cost::Usd> {
            let (input, output) = match model {
                Some("dear") => ("10", "20"),
                _ => ("1", "2"),
            };
            let rate = |r| ctx_cost::Rate::parse(r).unwrap();
            Some(ctx_cost::Price::flat(rate(input), rate(output), None).cost(usage))
        }
    }

    #[test]
    fn judges_are_charged_at_their_own_model_answered_or_not() {
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [{"id": "css", "description": "Style",
                "checks": [{"judge": "Is the board 10 x 20?", "judge_model": "dear",
                            "max_tokens": 40}],
                "tool_or_prompt": {"name": "inference",
                    "params": {"prompt": "Write the CSS.", "model": "cheap"}}}],
            "config": {"max_check_attempts": 1}
        }))
        .unwrap();
        let micros = |n: u64| ctx_cost::Usd::from_picos(u128::from(n) * 1_000_000);
        for judge_fails in [false, true] {
            let options = crate::ExecutorOptions {
                cost: Some(crate::CostOptions {
                    model: Arc::new(TwoModels),
                    max_cost: None,
                    already_spent: ctx_cost::Usd::ZERO,
                    cut_output_at_max_tokens: false,
                    shared_budget: None,
                }),
                ..crate::ExecutorOptions::default()
            };
            let (_, store) = run_with(plan.clone(), Arc::new(PricedJudge { judge_fails }), options);
            let css = store.get_by_task_id("css").unwrap().unwrap();
            let calls = &css.metadata.check_attempts[0].judge_calls;
            assert_eq!(calls.len(), 1, "{judge_fails}");
            let call = &calls[0];
            assert_eq!((call.model.as_deref(), call.max_tokens), (Some("dear"), 40));
            // The task's own call: 10 x $1 + 5 x $2 per million.
            let task = 20;
            let judge = if judge_fails {
                // Two requests, no answer: each its prompt and its 40
                // max_tokens, at $10 / $20 per million.
                assert_eq!((call.tokens_used, call.requests), (None, 2));
                assert!(call.prompt_tokens > 0);
                2 * (call.prompt_tokens as u64 * 10 + 40 * 20)
            } else {
                assert_eq!(call.requests, 1);
                // 10 x $10 + 5 x $20 per million.
                200
            };
            assert_eq!(
                css.metadata.cost_usd,
                Some(micros(task + judge)),
                "judge fails: {judge_fails}"
            );
        }
    }

    /// Answers a task with `output` and a judge with a pass, counting the
    /// judge requests.
    struct HostileOutput {
        output: String,
        judged: std::sync::atomic::AtomicUsize,
    }

    impl ctx_engine::InferenceEngine for HostileOutput {
        fn name(&self) -> &str {
            "hostile-output"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> ctx_engine::BoxFuture<'a, Result<ctx_engine::InferenceResponse, ctx_engine::EngineError>>
        {
            let judge = request.purpose == ctx_engine::RequestPurpose::Judge;
            if judge {
                self.judged
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let output = if judge {
                r#"{"pass": true, "reason": "fine"}"#.to_string()
            } else {
                self.output.clone()
            };
            Box::pin(async move {
                Ok(ctx_engine::InferenceResponse {
                    output,
                    attempts: vec![ctx_model::Attempt {
                        number: 1,
                        outcome: "ok".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
            })
        }
    }

    /// A budget of $1, every task bounded at a cent, `max_tokens` as given.
    struct Budgeted {
        max_tokens: u64,
    }

    impl crate::CostModel for Budgeted {
        fn bound(&self, _: &SubTask) -> Option<ctx_cost::Usd> {
            Some(ctx_cost::Usd::parse("0.01").unwrap())
        }
        fn max_tokens(&self, _: &SubTask) -> Option<u64> {
            Some(self.max_tokens)
        }
        fn call_cost(&self, _: &SubTask, usage: &ctx_cost::Usage) -> Option<ctx_cost::Usd> {
            let rate = ctx_cost::Rate::parse("1").unwrap();
            Some(ctx_cost::Price::flat(rate, rate, None).cost(usage))
        }
    }

    /// An output of repeated control tokens, within `max_tokens`, grows
    /// when it is neutralized into the judge prompt: past the bound its
    /// reservation was made with. Under a budget that prompt is not sent
    /// and the check fails saying why; before, it was sent and billed past
    /// the reservation. Without a budget it is sent as before.
    #[test]
    fn a_judge_prompt_over_its_reserved_bound_is_not_sent_under_a_budget() {
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [{"id": "css", "description": "Style",
                "checks": [{"judge": "Is it CSS?"}],
                "tool_or_prompt": {"name": "inference",
                    "params": {"prompt": "Write the CSS.", "model": "m"}}}],
            "config": {"max_check_attempts": 1}
        }))
        .unwrap();
        let output = "<s>".repeat(40);
        let counter = ctx_prompt::tokenizer_for_task(&plan, &plan.sub_tasks[0])
            .unwrap()
            .counter();
        let max_tokens = counter.count(&output) as u64;
        let sent = ctx_checks::judge::judge_prompt("Is it CSS?", &output);
        let bound =
            crate::call_bounds::judge_prompt_bound("Is it CSS?", max_tokens, counter.as_ref());
        assert!(
            counter.count(&sent) as u64 > bound,
            "the output grows when neutralized"
        );
        for max_cost in [Some(ctx_cost::Usd::parse("1").unwrap()), None] {
            let engine = Arc::new(HostileOutput {
                output: output.clone(),
                judged: Default::default(),
            });
            let options = crate::ExecutorOptions {
                cost: Some(crate::CostOptions {
                    model: Arc::new(Budgeted { max_tokens }),
                    max_cost,
                    already_spent: ctx_cost::Usd::ZERO,
                    cut_output_at_max_tokens: false,
                    shared_budget: None,
                }),
                ..crate::ExecutorOptions::default()
            };
            let (_, store) = run_with(plan.clone(), engine.clone(), options);
            let css = store.get_by_task_id("css").unwrap().unwrap();
            let judged = engine.judged.load(std::sync::atomic::Ordering::Relaxed);
            let judge = &css.metadata.check_attempts[0].checks[0];
            if max_cost.is_some() {
                assert_eq!(judged, 0);
                assert!(!judge.passed);
                assert!(
                    judge
                        .detail
                        .as_deref()
                        .unwrap_or(&judge.message)
                        .contains("budget: the judge prompt is"),
                    "{judge:?}"
                );
            } else {
                assert_eq!(judged, 1);
                assert!(judge.passed, "{judge:?}");
            }
        }
    }

    /// Answers a task with a secret the model repeated, and a judge with
    /// a failing verdict whose reason quotes it.
    struct RepeatsTheSecret;

    impl ctx_engine::InferenceEngine for RepeatsTheSecret {
        fn name(&self) -> &str {
            "repeats-the-secret"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> ctx_engine::BoxFuture<'a, Result<ctx_engine::InferenceResponse, ctx_engine::EngineError>>
        {
            let output = if request.purpose == ctx_engine::RequestPurpose::Judge {
                r#"{"pass": false, "reason": "it repeats the key hunter2"}"#.to_string()
            } else {
                "the key is hunter2".to_string()
            };
            Box::pin(async move {
                Ok(ctx_engine::InferenceResponse {
                    output,
                    attempts: vec![ctx_model::Attempt::ok(1, 1)],
                    ..Default::default()
                })
            })
        }
    }

    /// The judge's reason and the check detail and task error that quote
    /// it are masked in the store and in the report; the output the model
    /// wrote is kept as written (the documented exception).
    #[test]
    fn a_judges_reason_that_quotes_a_secret_is_masked_where_stored_and_reported() {
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [{"id": "css", "description": "Style",
                "checks": [{"judge": "Does it keep the key to itself?"}],
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "Key hunter2."}}}],
            "config": {"max_check_attempts": 1}
        }))
        .unwrap();
        let options = crate::ExecutorOptions {
            secret_mask: ctx_store::SecretMask::new([("KEY".into(), "hunter2".into())]),
            ..crate::ExecutorOptions::default()
        };
        let (report, store) = run_with(plan, Arc::new(RepeatsTheSecret), options);
        let stored = store.get_by_task_id("css").unwrap().unwrap();
        for css in [&stored, &report.results[0]] {
            assert_eq!(css.output, "the key is hunter2");
            let judge = &css.metadata.check_attempts[0].checks[0];
            let shown = format!("{} {:?} {:?}", judge.message, judge.detail, css.error);
            assert!(shown.contains("it repeats the key [secret KEY]"), "{shown}");
            let json = serde_json::to_string(css).unwrap();
            assert_eq!(
                json.matches("hunter2").count(),
                1,
                "only the output: {json}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_judge_that_times_out_fails_its_check_not_the_run() {
        let store = Arc::new(ctx_store::MemoryStore::new());
        let exec = crate::Executor::new(
            checked_plan(2),
            Arc::new(StuckJudge),
            store.clone(),
            crate::ExecutorOptions {
                task_timeout: Some(std::time::Duration::from_secs(2)),
                ..crate::ExecutorOptions::default()
            },
        )
        .unwrap();
        let started = tokio::time::Instant::now();
        let report = exec.run().await.unwrap();
        // Two attempts, each judged for two seconds at most.
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(4));
        assert!(!report.interrupted);
        let css = store.get_by_task_id("css").unwrap().unwrap();
        assert_eq!(css.status, ctx_model::TaskStatus::Failed);
        assert_eq!(css.metadata.check_attempts.len(), 2);
        for attempt in &css.metadata.check_attempts {
            let verdicts: Vec<(&str, bool, &str)> = attempt
                .checks
                .iter()
                .map(|r| (r.kind.as_str(), r.passed, r.message.as_str()))
                .collect();
            assert_eq!(
                verdicts[2],
                (
                    "judge",
                    false,
                    "the judge could not be asked: timed out after 2.0 s (task_timeout); the engine was stopped"
                ),
                "{verdicts:?}"
            );
            // The other checks ran as usual.
            assert!(verdicts[0].1 && verdicts[1].1, "{verdicts:?}");
        }
        let error = css.error.unwrap();
        assert!(
            error.starts_with("failed 1 check after 2 attempts: judge: the judge could not be asked: timed out after 2.0 s"),
            "{error}"
        );
        let js = report.results.iter().find(|r| r.task_id == "js").unwrap();
        assert_eq!(js.status, ctx_model::TaskStatus::Skipped);
    }

    #[test]
    fn a_check_that_never_passes_fails_the_task_and_skips_dependents() {
        let engine = Arc::new(ByPrompt {
            first: "a board",
            fixed: "still a board",
            prompts: Default::default(),
        });
        let (report, store) = run(checked_plan(3), engine.clone());
        let css = store.get_by_task_id("css").unwrap().unwrap();
        assert_eq!(css.status, ctx_model::TaskStatus::Failed);
        assert_eq!(css.metadata.check_attempts.len(), 3);
        let error = css.error.unwrap();
        assert!(
            error.starts_with(
                "failed 3 checks after 3 attempts: entities: does not reflect the entity \"Board\""
            ),
            "{error}"
        );
        assert!(
            error.contains("contains: Keep the 10 x 20 board.") && error.contains("judge: "),
            "{error}"
        );
        assert_eq!(css.output, "still a board");
        assert!(
            css.metadata
                .attempts
                .iter()
                .all(|a| a.outcome == ctx_model::CallOutcome::CheckFailed)
        );
        let js = report.results.iter().find(|r| r.task_id == "js").unwrap();
        assert_eq!(js.status, ctx_model::TaskStatus::Skipped);
        assert_eq!(js.error.as_deref(), Some("dependency `css` failed"));
    }

    #[test]
    fn one_attempt_means_no_retry_and_dry_runs_check_nothing() {
        let engine = Arc::new(ByPrompt {
            first: "a board",
            fixed: "a 10 x 20 board",
            prompts: Default::default(),
        });
        let (_, store) = run(checked_plan(1), engine.clone());
        let css = store.get_by_task_id("css").unwrap().unwrap();
        assert_eq!(css.status, ctx_model::TaskStatus::Failed);
        assert_eq!(css.metadata.check_attempts.len(), 1);
        let store = Arc::new(ctx_store::MemoryStore::new());
        let exec = crate::Executor::new(
            checked_plan(2),
            Arc::new(ctx_engine::DryRunEngine),
            store.clone(),
            crate::ExecutorOptions::default(),
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert!(rt.block_on(exec.run()).unwrap().all_completed());
        assert!(
            store
                .get_by_task_id("css")
                .unwrap()
                .unwrap()
                .metadata
                .checks
                .is_empty()
        );
    }

    /// Answers a fenced JSON object and records the schema it was asked for.
    struct Fenced {
        schemas: std::sync::Mutex<Vec<Option<serde_json::Value>>>,
    }

    impl ctx_engine::InferenceEngine for Fenced {
        fn name(&self) -> &str {
            "fenced"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> ctx_engine::BoxFuture<'a, Result<ctx_engine::InferenceResponse, ctx_engine::EngineError>>
        {
            self.schemas
                .lock()
                .unwrap()
                .push(request.response_schema.clone());
            Box::pin(async move {
                Ok(ctx_engine::InferenceResponse {
                    output: "```json\n{\"score\": 40}\n```\n".into(),
                    ..Default::default()
                })
            })
        }
    }

    #[test]
    fn a_json_schema_task_asks_for_its_schema_and_hands_dependents_the_bare_json() {
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [
                {"id": "score", "description": "Score",
                 "checks": [{"json_schema": {"type": "object", "required": ["score"]}}],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "Give the score as JSON."}}},
                {"id": "show", "description": "Show", "dependencies": ["score"],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "Show it."}}}
            ]
        }))
        .unwrap();
        let engine = Arc::new(Fenced {
            schemas: Default::default(),
        });
        let store = Arc::new(ctx_store::MemoryStore::new());
        let exec = crate::Executor::new(
            plan,
            engine.clone(),
            store.clone(),
            crate::ExecutorOptions::default(),
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert!(rt.block_on(exec.run()).unwrap().all_completed());
        let schemas = engine.schemas.lock().unwrap().clone();
        assert_eq!(
            schemas[0],
            Some(serde_json::json!({"type": "object", "required": ["score"]}))
        );
        assert_eq!(schemas[1], None);
        let score = store.get_by_task_id("score").unwrap().unwrap();
        assert_eq!(score.output, "{\"score\": 40}");
        assert!(
            score.metadata.check_attempts[0]
                .output
                .starts_with("```json")
        );
        let show = store.get_by_task_id("show").unwrap().unwrap();
        assert!(
            show.prompt
                .unwrap()
                .contains("**Output:**\n{\"score\": 40}\n")
        );
    }

    /// Every prompt of a dry run of the Tetris plan under `variant`.
    fn tetris_prompts(variant: crate::ContextVariant) -> Vec<(String, String)> {
        let plan = ctx_model::parse_plan(
            include_str!("../../../fixtures/tetris/plan.yaml"),
            "plan.yaml",
            ctx_model::PlanFormat::Yaml,
        )
        .unwrap();
        let store = Arc::new(ctx_store::MemoryStore::new());
        let options = crate::ExecutorOptions {
            context: variant,
            ..Default::default()
        };
        let exec =
            crate::Executor::new(plan, Arc::new(ctx_engine::DryRunEngine), store, options).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let report = rt.block_on(exec.run()).unwrap();
        assert!(report.all_completed());
        report
            .results
            .into_iter()
            .map(|r| (r.task_id, r.prompt.unwrap()))
            .collect()
    }

    /// `text` without the block that starts with `heading` (up to the
    /// blank line before the next block, or the dependency block's `---`).
    fn without_block(text: &str, heading: &str, end: &str) -> String {
        match text.find(heading) {
            Some(start) => {
                let rest = &text[start..];
                let stop = rest.find(end).map_or(rest.len(), |i| i + end.len());
                format!("{}{}", &text[..start], &rest[stop..])
            }
            None => text.to_string(),
        }
    }

    /// A variant changes only what it says, byte for byte, for the same
    /// dependency outputs (a dry run's are the same in every variant).
    #[test]
    fn variants_leave_out_exactly_their_blocks() {
        let full = tetris_prompts(crate::ContextVariant::Full);
        let no_entities = tetris_prompts(crate::ContextVariant::NoEntities);
        let no_dependencies = tetris_prompts(crate::ContextVariant::NoDependencies);
        let bare = tetris_prompts(crate::ContextVariant::Bare);
        let plan = ctx_model::parse_plan(
            include_str!("../../../fixtures/tetris/plan.yaml"),
            "plan.yaml",
            ctx_model::PlanFormat::Yaml,
        )
        .unwrap();
        let mut entity_blocks = 0;
        for (i, (id, prompt)) in full.iter().enumerate() {
            assert_eq!(&no_entities[i].0, id);
            let expected = without_block(prompt, ctx_prompt::ENTITY_HEADING, "\n\n");
            entity_blocks += usize::from(expected != *prompt);
            assert_eq!(no_entities[i].1, expected, "task {id}");
            // The dependency block ends with the last dependency's `---`.
            let dep_end = "\n\n---\n\n";
            let expected = match prompt.find(ctx_prompt::DEPENDENCY_HEADING) {
                Some(start) => {
                    let stop = prompt.rfind(dep_end).map(|e| e + dep_end.len()).unwrap();
                    format!("{}{}", &prompt[..start], &prompt[stop..])
                }
                None => prompt.clone(),
            };
            assert_eq!(no_dependencies[i].1, expected, "task {id}");
            let task = plan.task(id).unwrap();
            assert_eq!(bare[i].1, task.tool_or_prompt.params.prompt, "task {id}");
        }
        assert_eq!(
            entity_blocks,
            full.len(),
            "every Tetris task names entities"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The retried prompt never exceeds the cap, keeps the task's own
        /// prompt whole, and fails only where the plain prompt fails.
        #[test]
        fn retried_prompts_stay_within_the_cap(
            prompt in "[a-z ]{1,80}",
            output in "[a-z<>/ \n]{0,3000}",
            messages in prop::collection::vec("[A-Za-z0-9 \"]{1,200}", 1..6),
            cap in 1usize..700,
            estimate in any::<bool>(),
        ) {
            let plan = plan(&prompt);
            let dep = DependencyOutput { task_id: "html", description: "Page", output: &output, summary: None };
            let counter = if estimate { Tokenizer::Estimate.counter() } else { Tokenizer::Cl100kBase.counter() };
            let results: Vec<CheckResult> = messages.iter().map(|m| failed(m)).collect();
            let plain = ctx_prompt::assemble_task_prompt(&plan, &plan.sub_tasks[0], &[dep], &*counter, cap);
            let retried = retry_prompt(&plan, &plan.sub_tasks[0], &[dep], &*counter, cap, &results);
            match (plain, retried) {
                (Ok(_), Ok((p, fb))) => {
                    prop_assert!(p.tokens <= cap);
                    prop_assert_eq!(p.tokens, counter.count(&p.text));
                    prop_assert!(p.text.contains(prompt.as_str()));
                    if let Some(fb) = fb {
                        prop_assert!(p.text.ends_with(&fb.text));
                    }
                }
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (a, b) => prop_assert!(false, "plain {:?} but retried {:?}", a.is_ok(), b.is_ok()),
            }
        }
    }
}
