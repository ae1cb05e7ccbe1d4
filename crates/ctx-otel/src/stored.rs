//! A stored run's trace, rebuilt after the fact from what the store holds
//! (`ctx runs export RUN --format otlp`), with the recorded times.
//!
//! The spans are those a live run exports, named and attributed alike:
//! the `invoke_workflow` root (the run's derived root id, so a live trace
//! and its export are one trace in a backend), a `task {id}` span per task
//! that started, and a `chat {model}` span per engine call with its
//! recorded times. What the store does not keep is left out: per-call
//! usage (only the task's total is stored, put on its last call), the
//! request parameters the engine defaulted, and message content (the
//! export never carries prompts or outputs). Span ids below the root are
//! derived from the run, task and call, so exporting twice sends the same
//! spans, which a backend can deduplicate.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ctx_model::TaskExecutionResult;
use ctx_report::{AttemptReport, TaskReport, TaskState, Timestamp};
use ctx_run::export::StoredRun;
use ctx_store::RunTraceIds;
use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use sha2::{Digest, Sha256};

/// The spans of `run`, root first; `workflow` is its name
/// (`ctx_run::workflow_name`, as the live session gave it).
pub fn run_spans(run: &StoredRun, workflow: &str) -> Vec<SpanData> {
    let input = &run.input;
    let Some(window) = run_window(input) else {
        return Vec::new();
    };
    let ids = RunTraceIds::of(&input.run_id);
    let trace = Trace {
        trace: TraceId::from_bytes(ids.trace_id),
        root: SpanId::from_bytes(ids.root_span_id),
        run_id: &input.run_id,
        scope: crate::scope(),
    };
    let mut spans = vec![workflow_span(&trace, input, workflow, window)];
    for (task, record) in input.tasks.iter().zip(&run.records) {
        task_spans(
            &trace,
            task,
            record.as_ref(),
            &input.decisions,
            window.1,
            &mut spans,
        );
    }
    spans
}

/// What every span of one stored run shares.
struct Trace<'a> {
    trace: TraceId,
    /// The root span (`invoke_workflow`), parent of the task spans.
    root: SpanId,
    run_id: &'a str,
    scope: InstrumentationScope,
}

/// The run's start and end: its own times where stored, else its tasks'
/// (the snapshot time of a run still going ends it); `None` for a run
/// with no time at all, which has no trace.
fn run_window(input: &ctx_report::RunReportInput) -> Option<(Timestamp, Timestamp)> {
    let starts = input.tasks.iter().filter_map(|t| t.started_at);
    let ends = input
        .tasks
        .iter()
        .filter_map(|t| t.ended_at.or(t.started_at));
    let run_start = input.started_at.or_else(|| starts.min())?;
    let run_end = input
        .ended_at
        .or(input.as_of)
        .or_else(|| ends.max())
        .unwrap_or(run_start);
    Some((run_start, run_end))
}

/// The root span, `invoke_workflow {workflow}`.
fn workflow_span(
    trace: &Trace<'_>,
    input: &ctx_report::RunReportInput,
    workflow: &str,
    window: (Timestamp, Timestamp),
) -> SpanData {
    span(
        Ids {
            trace: trace.trace,
            span: trace.root,
            parent: SpanId::INVALID,
        },
        format!("invoke_workflow {workflow}"),
        SpanKind::Internal,
        window,
        vec![
            KeyValue::new("gen_ai.operation.name", "invoke_workflow"),
            KeyValue::new("gen_ai.workflow.name", workflow.to_string()),
            KeyValue::new("ctx.run.id", input.run_id.clone()),
            KeyValue::new(
                "ctx.run.status",
                format!("{:?}", input.status).to_lowercase(),
            ),
            KeyValue::new("ctx.exported", true),
        ],
        Vec::new(),
        None,
        &trace.scope,
    )
}

/// A started task's `task {id}` span, then a `chat {model}` span per
/// engine call with both its times; the task's stored result (its usage,
/// its checks) goes on the task span and its last call, and so does each
/// decision on its approval gate (`ctx.approval` events). A task still
/// open ends at `run_end`.
fn task_spans(
    trace: &Trace<'_>,
    task: &TaskReport,
    record: Option<&ctx_store::ResultRecord>,
    decisions: &[ctx_report::Decision],
    run_end: Timestamp,
    spans: &mut Vec<SpanData>,
) {
    let Some(start) = task.started_at else {
        return;
    };
    let end = task.ended_at.unwrap_or(run_end);
    let task_span = derived_span_id(trace.run_id, &task.id, 0);
    let result = record.map(|r| &r.result);
    spans.push(span(
        Ids {
            trace: trace.trace,
            span: task_span,
            parent: trace.root,
        },
        format!("task {}", task.id),
        SpanKind::Internal,
        (start, end),
        task_attributes(task),
        result
            .map(|r| check_events(r, end))
            .unwrap_or_default()
            .into_iter()
            .chain(decision_events(&task.id, decisions, end))
            .collect(),
        (task.status == TaskState::Failed).then(|| "task_failed".to_string()),
        &trace.scope,
    ));
    let last = task.attempts.len();
    for (k, attempt) in task.attempts.iter().enumerate() {
        let (Some(a_start), Some(a_end)) = (attempt.started_at, attempt.ended_at) else {
            continue;
        };
        spans.push(span(
            Ids {
                trace: trace.trace,
                span: derived_span_id(trace.run_id, &task.id, attempt.number),
                parent: task_span,
            },
            match &task.model {
                Some(m) => format!("chat {m}"),
                None => "chat".to_string(),
            },
            SpanKind::Client,
            (a_start, a_end),
            chat_attributes(
                task,
                attempt,
                record.map(|r| provider(&r.engine)),
                result.filter(|_| k + 1 == last),
            ),
            Vec::new(),
            attempt.class.clone().filter(|c| c != "ok"),
            &trace.scope,
        ));
    }
}

struct Ids {
    trace: TraceId,
    span: SpanId,
    parent: SpanId,
}

fn task_attributes(task: &TaskReport) -> Vec<KeyValue> {
    let mut a = vec![
        KeyValue::new("ctx.task.id", task.id.clone()),
        KeyValue::new(
            "ctx.task.status",
            format!("{:?}", task.status).to_lowercase(),
        ),
        KeyValue::new("ctx.task.attempts", task.attempts.len() as i64),
        KeyValue::new("ctx.cache_hit", task.cached),
    ];
    if let Some(c) = task.cost_usd {
        a.push(KeyValue::new("ctx.cost_usd", c));
    }
    a
}

/// The provider a stored engine label names: its first word, the engine's
/// `--engine` name (`openai`, `command`, `dry-run`), as the live span's
/// `gen_ai.provider.name` has it.
fn provider(engine_label: &str) -> &str {
    engine_label
        .split_whitespace()
        .next()
        .unwrap_or(engine_label)
}

/// A call's attributes; the task's stored usage goes on its last call.
fn chat_attributes(
    task: &TaskReport,
    attempt: &AttemptReport,
    provider: Option<&str>,
    last: Option<&TaskExecutionResult>,
) -> Vec<KeyValue> {
    let mut a = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("ctx.task.id", task.id.clone()),
        KeyValue::new("ctx.attempt.number", i64::from(attempt.number)),
    ];
    if let Some(p) = provider.filter(|p| !p.is_empty()) {
        a.push(KeyValue::new("gen_ai.provider.name", p.to_string()));
    }
    if let Some(m) = &task.model {
        a.push(KeyValue::new("gen_ai.response.model", m.clone()));
    }
    if let Some(class) = &attempt.class {
        a.push(KeyValue::new("ctx.attempt.outcome", class.clone()));
    }
    if let Some(r) = last {
        if let Some(u) = &r.metadata.tokens_used {
            a.push(KeyValue::new(
                "gen_ai.usage.input_tokens",
                u.prompt_tokens as i64,
            ));
            a.push(KeyValue::new(
                "gen_ai.usage.output_tokens",
                u.completion_tokens as i64,
            ));
            if let Some(c) = u.cached_tokens {
                a.push(KeyValue::new(
                    "gen_ai.usage.cache_read.input_tokens",
                    c as i64,
                ));
            }
        }
        if let Some(f) = &r.metadata.finish_reason {
            a.push(KeyValue::new(
                "gen_ai.response.finish_reasons",
                format!("[\"{f}\"]"),
            ));
        }
    }
    a
}

fn check_events(result: &TaskExecutionResult, at: Timestamp) -> Vec<Event> {
    result
        .metadata
        .checks
        .iter()
        .map(|c| {
            Event::new(
                "gen_ai.evaluation.result",
                time(at),
                vec![
                    KeyValue::new("gen_ai.evaluation.name", c.kind.as_str()),
                    KeyValue::new(
                        "gen_ai.evaluation.score.label",
                        if c.passed { "pass" } else { "fail" },
                    ),
                    KeyValue::new(
                        "gen_ai.evaluation.score.value",
                        if c.passed { 1.0 } else { 0.0 },
                    ),
                    KeyValue::new(
                        "gen_ai.evaluation.explanation",
                        crate::content::cap(&c.message),
                    ),
                ],
                0,
            )
        })
        .collect()
}

/// The `ctx.approval` events of `task_id`'s gate, at their recorded
/// time (else `fallback`), as a live run puts them on its task span.
fn decision_events(
    task_id: &str,
    decisions: &[ctx_report::Decision],
    fallback: Timestamp,
) -> Vec<Event> {
    decisions
        .iter()
        .filter(|d| d.task_id == task_id)
        .map(|d| {
            let at = Timestamp::parse_rfc3339(&d.at).unwrap_or(fallback);
            let mut attributes = vec![
                KeyValue::new("ctx.approval.stage", d.stage.as_str()),
                KeyValue::new("ctx.approval.verdict", d.verdict.as_str()),
                KeyValue::new("ctx.approval.by", d.by.clone()),
                KeyValue::new("ctx.approval.at", d.at.clone()),
            ];
            if let Some(note) = &d.note {
                attributes.push(KeyValue::new(
                    "ctx.approval.note",
                    crate::content::cap(note),
                ));
            }
            if let Some(sha) = &d.output_sha256 {
                attributes.push(KeyValue::new("ctx.approval.output_sha256", sha.clone()));
            }
            Event::new("ctx.approval", time(at), attributes, 0)
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn span(
    ids: Ids,
    name: String,
    kind: SpanKind,
    (start, end): (Timestamp, Timestamp),
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    error: Option<String>,
    scope: &InstrumentationScope,
) -> SpanData {
    let mut span_events = SpanEvents::default();
    span_events.events = events;
    let mut attributes = attributes;
    if let Some(e) = &error {
        attributes.push(KeyValue::new("error.type", e.clone()));
    }
    SpanData {
        span_context: SpanContext::new(
            ids.trace,
            ids.span,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: ids.parent,
        parent_span_is_remote: false,
        span_kind: kind,
        name: Cow::Owned(name),
        start_time: time(start),
        end_time: time(end.max(start)),
        attributes,
        dropped_attributes_count: 0,
        events: span_events,
        links: SpanLinks::default(),
        status: match error {
            Some(e) => Status::error(e),
            None => Status::Unset,
        },
        instrumentation_scope: scope.clone(),
    }
}

fn time(t: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(t.unix_ms()).unwrap_or(0))
}

/// A span id for call `n` of `task` in `run` (`0`: the task's own span):
/// the same on every export.
fn derived_span_id(run: &str, task: &str, n: u32) -> SpanId {
    let digest = Sha256::new()
        .chain_update(b"ctx span v1\0")
        .chain_update(run.as_bytes())
        .chain_update([0])
        .chain_update(task.as_bytes())
        .chain_update(n.to_be_bytes())
        .finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    SpanId::from_bytes(id)
}
