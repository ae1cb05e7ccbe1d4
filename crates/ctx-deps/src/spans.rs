//! The `tracing` spans of a task and of each engine call, named as the
//! OpenTelemetry GenAI semantic conventions name them (docs/tracing.md has
//! the table). ctx-deps knows no exporter: without a subscriber (no
//! `--otlp`, no `OTEL_*`) every macro here is one disabled-callsite check,
//! and nothing is formatted.
//!
//! Kept in one module so the executor and `EngineCalls` each gain one
//! line: open the span, record the outcome.

use ctx_engine::{EngineError, InferenceRequest, InferenceResponse, RequestPurpose};
use ctx_model::{Attempt, CallOutcome, TaskExecutionResult};
use tracing::Span;
use tracing::field::Empty;

/// A task's span, a child of the current one (the run's
/// `invoke_workflow`, or a worker's claim).
pub(crate) fn task_span(task_id: &str) -> Span {
    tracing::info_span!(
        "task",
        otel.name = format!("task {task_id}"),
        "ctx.task.id" = task_id,
        "ctx.task.status" = Empty,
        "ctx.task.attempts" = Empty,
        "ctx.cost_usd" = Empty,
        "ctx.cache_hit" = Empty,
        "error.type" = Empty,
    )
}

/// Records a task's outcome on its span, and each check result as a
/// `gen_ai.evaluation.result` event.
pub(crate) fn record_task(span: &Span, result: &TaskExecutionResult) {
    if span.is_disabled() {
        return;
    }
    let m = &result.metadata;
    span.record("ctx.task.status", result.status.as_str());
    span.record("ctx.task.attempts", m.attempts.len() as u64);
    span.record("ctx.cache_hit", m.cached);
    if let Some(cost) = m.cost_usd {
        span.record("ctx.cost_usd", cost.to_f64());
    }
    if result.status == ctx_model::TaskStatus::Failed {
        span.record("error.type", "task_failed");
    }
    span.in_scope(|| {
        for check in &m.checks {
            tracing::info!(
                "event.name" = "gen_ai.evaluation.result",
                "gen_ai.evaluation.name" = check.kind.as_str(),
                "gen_ai.evaluation.score.label" = if check.passed { "pass" } else { "fail" },
                "gen_ai.evaluation.score.value" = if check.passed { 1.0 } else { 0.0 },
                "gen_ai.evaluation.explanation" = check.message.as_str(),
            );
        }
    });
}

/// What a call is for: `task`, `judge` or `summary` (`ctx.call.purpose`).
fn purpose(p: &RequestPurpose) -> &'static str {
    match p {
        RequestPurpose::Task => "task",
        RequestPurpose::Summary { .. } => "summary",
        RequestPurpose::Judge => "judge",
    }
}

/// An engine call's `chat {model}` client span (the task's model, else
/// the engine's default); the provider is the engine's name (`openai`,
/// `command`, `dry-run`).
pub(crate) fn chat_span(
    provider: &str,
    default_model: Option<&str>,
    request: &InferenceRequest,
) -> Span {
    let p = &request.params;
    let model = p.model.as_deref().or(default_model).unwrap_or("");
    let span = tracing::info_span!(
        "chat",
        otel.name = if model.is_empty() {
            "chat".to_string()
        } else {
            format!("chat {model}")
        },
        otel.kind = "client",
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider,
        "gen_ai.request.model" = Empty,
        "gen_ai.request.temperature" = p.temperature,
        "gen_ai.request.max_tokens" = p.max_tokens,
        "gen_ai.request.top_p" = p.top_p,
        "gen_ai.request.seed" = p.seed,
        "gen_ai.request.stop_sequences" = Empty,
        "gen_ai.output.type" = if request.response_schema.is_some() {
            "json"
        } else {
            "text"
        },
        "ctx.call.purpose" = purpose(&request.purpose),
        "ctx.task.id" = request.task_id.as_str(),
        "gen_ai.response.model" = Empty,
        "gen_ai.response.id" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.response.time_to_first_chunk" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "ctx.cached" = Empty,
        "error.type" = Empty,
        "gen_ai.system_instructions" = Empty,
        "gen_ai.input.messages" = Empty,
        "gen_ai.output.messages" = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if !model.is_empty() {
        span.record("gen_ai.request.model", model);
    }
    if let Some(stop) = &p.stop {
        span.record("gen_ai.request.stop_sequences", format!("{stop:?}"));
    }
    if let Some(system) = &p.system {
        span.record("gen_ai.system_instructions", system.as_str());
    }
    span.record("gen_ai.input.messages", request.prompt.as_str());
    span
}

/// Records an engine call's answer or failure on its span; each attempt
/// that was retried becomes a `ctx.retry` event.
pub(crate) fn record_chat(span: &Span, answer: &Result<InferenceResponse, EngineError>) {
    if span.is_disabled() {
        return;
    }
    let attempts = match answer {
        Ok(r) => {
            if let Some(model) = &r.model {
                span.record("gen_ai.response.model", model.as_str());
            }
            if let Some(reason) = &r.finish_reason {
                span.record("gen_ai.response.finish_reasons", format!("[\"{reason}\"]"));
            }
            if let Some(u) = &r.usage {
                span.record("gen_ai.usage.input_tokens", u.prompt_tokens);
                span.record("gen_ai.usage.output_tokens", u.completion_tokens);
                if let Some(c) = u.cached_tokens {
                    span.record("gen_ai.usage.cache_read.input_tokens", c);
                }
            }
            span.record("ctx.cached", r.cached);
            span.record("gen_ai.output.messages", r.output.as_str());
            &r.attempts
        }
        Err(e) => {
            let kind = e
                .attempts
                .last()
                .map(|a| a.outcome.to_string())
                .unwrap_or_else(|| "error".to_string());
            span.record("error.type", kind.as_str());
            &e.attempts
        }
    };
    span.in_scope(|| attempts.iter().filter(|a| retried(a)).for_each(retry_event));
}

/// An attempt after which the engine tried again.
fn retried(a: &Attempt) -> bool {
    a.outcome != CallOutcome::Ok && a.backoff_ms.is_some()
}

fn retry_event(a: &Attempt) {
    tracing::info!(
        "event.name" = "ctx.retry",
        "ctx.attempt.number" = a.number,
        "ctx.attempt.outcome" = a.outcome.to_string(),
        "ctx.attempt.duration_ms" = a.duration_ms,
        "ctx.attempt.backoff_ms" = a.backoff_ms,
        "error.message" = a.error.as_deref(),
    );
}

/// A run's `invoke_workflow` span, the parent of its tasks' spans when the
/// executor runs inside it. `workflow` is the plan's goal, else its file
/// name. `run_id` (a stored run) puts the span in the run's trace (ctx-otel
/// derives the ids from it): the session that starts a run is the trace's
/// root, a `resumed` one hangs under it.
pub fn workflow_span(workflow: &str, run_id: Option<&str>, resumed: bool) -> Span {
    tracing::info_span!(
        "invoke_workflow",
        otel.name = format!("invoke_workflow {workflow}"),
        "gen_ai.operation.name" = "invoke_workflow",
        "gen_ai.workflow.name" = workflow,
        "ctx.run.id" = run_id,
        "ctx.run.resumed" = resumed,
    )
}

/// A worker's claim of one task of a shared run (`ctx worker`): in the
/// run's trace, under its root, wherever the worker runs; the task's span
/// is its child.
pub fn claim_span(run_id: &str, task_id: &str, worker: &str) -> Span {
    tracing::info_span!(
        "claim",
        otel.name = format!("claim {task_id}"),
        "ctx.run.id" = run_id,
        "ctx.task.id" = task_id,
        "ctx.worker.id" = worker,
    )
}
