//! The tracing layer that turns ctx's spans into OpenTelemetry spans.
//!
//! Why a layer of ours rather than tracing-opentelemetry: a run's spans
//! must land in the run's trace (ctx-store's [`RunTraceIds`]) whichever
//! process emits them, the session that started the run, a resumed one or
//! a worker on another machine, and the root span must have the id the
//! others point at. tracing-opentelemetry builds its span ids through the
//! SDK's tracer, which offers no way to give a span a chosen id from a
//! subscriber, and its parent hooks need the span handle the libraries own.
//! Here the rule is a few lines of `ids_for`. The layer also keeps the
//! content policy (capture only on request, capped, redacted) and records
//! the two GenAI metrics when a `chat` span closes; it hands finished spans
//! to the SDK's batch processor, which exports them off the run's threads.
//!
//! Only spans and events whose target is a ctx crate (`ctx_…`) are kept.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use ctx_store::RunTraceIds;
use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::content::ContentPolicy;
use crate::metrics::GenAiMetrics;

/// The span that stands for a run (GenAI's `invoke_workflow` operation).
pub const WORKFLOW_SPAN: &str = "invoke_workflow";

/// One span being recorded, kept in the span's extensions.
#[derive(Debug)]
pub(crate) struct Recorded {
    name: String,
    kind: SpanKind,
    start: SystemTime,
    pub(crate) trace_id: TraceId,
    pub(crate) span_id: SpanId,
    parent_id: SpanId,
    parent_remote: bool,
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    error: Option<String>,
}

/// The layer: see the module documentation.
pub struct OtelLayer {
    processor: Arc<dyn SpanProcessor>,
    scope: InstrumentationScope,
    content: ContentPolicy,
    metrics: Option<GenAiMetrics>,
    ids: RandomIdGenerator,
    ended: Arc<AtomicU64>,
}

impl OtelLayer {
    pub(crate) fn new(
        processor: Arc<dyn SpanProcessor>,
        content: ContentPolicy,
        metrics: Option<GenAiMetrics>,
        ended: Arc<AtomicU64>,
    ) -> OtelLayer {
        OtelLayer {
            processor,
            scope: crate::scope(),
            content,
            metrics,
            ids: RandomIdGenerator::default(),
            ended,
        }
    }
}

fn is_ctx(target: &str) -> bool {
    target.starts_with("ctx_")
}

/// The ids of a new span: under its nearest recorded ancestor in this
/// process; else, when it names its run (`ctx.run.id`), in the run's
/// trace: the root itself for the session that starts the run, a child of
/// the root otherwise (a resumed session, a worker's claim); else a trace
/// of its own.
fn ids_for(
    name: &str,
    parent: Option<(TraceId, SpanId)>,
    run: Option<(&str, bool)>,
    random: &RandomIdGenerator,
) -> (TraceId, SpanId, SpanId, bool) {
    if let Some((trace, span)) = parent {
        return (trace, random.new_span_id(), span, false);
    }
    match run {
        Some((run_id, resumed)) => {
            let run = RunTraceIds::of(run_id);
            let trace = TraceId::from_bytes(run.trace_id);
            let root = SpanId::from_bytes(run.root_span_id);
            if name == WORKFLOW_SPAN && !resumed {
                (trace, root, SpanId::INVALID, false)
            } else {
                (trace, random.new_span_id(), root, true)
            }
        }
        None => (
            random.new_trace_id(),
            random.new_span_id(),
            SpanId::INVALID,
            false,
        ),
    }
}

/// Collects a span's or an event's fields as attributes.
struct Fields<'a> {
    attributes: &'a mut Vec<KeyValue>,
    content: &'a ContentPolicy,
    name: Option<String>,
    kind: Option<SpanKind>,
    error: Option<String>,
    run_id: Option<String>,
    resumed: bool,
    event_name: Option<String>,
}

impl<'a> Fields<'a> {
    fn new(attributes: &'a mut Vec<KeyValue>, content: &'a ContentPolicy) -> Fields<'a> {
        Fields {
            attributes,
            content,
            name: None,
            kind: None,
            error: None,
            run_id: None,
            resumed: false,
            event_name: None,
        }
    }

    fn set(&mut self, key: &'static str, value: Value) {
        match self.attributes.iter_mut().find(|kv| kv.key.as_str() == key) {
            Some(kv) => kv.value = value,
            None => self.attributes.push(KeyValue::new(key, value)),
        }
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let key = field.name();
        match key {
            "otel.name" => self.name = Some(value.to_string()),
            "otel.kind" => self.kind = Some(kind_of(value)),
            "event.name" => self.event_name = Some(value.to_string()),
            "message" => {}
            _ => {
                if key == "ctx.run.id" {
                    self.run_id = Some(value.to_string());
                }
                if key == "error.type" {
                    self.error = Some(value.to_string());
                }
                if let Some(v) = self.content.value(key, value) {
                    self.set(key, Value::from(v));
                }
            }
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "ctx.run.resumed" {
            self.resumed = value;
        }
        self.set(field.name(), Value::Bool(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), Value::I64(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(
            field.name(),
            Value::I64(i64::try_from(value).unwrap_or(i64::MAX)),
        );
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), Value::F64(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

fn kind_of(value: &str) -> SpanKind {
    match value {
        "client" => SpanKind::Client,
        "server" => SpanKind::Server,
        "producer" => SpanKind::Producer,
        "consumer" => SpanKind::Consumer,
        _ => SpanKind::Internal,
    }
}

impl<S> tracing_subscriber::Layer<S> for OtelLayer
where
    S: tracing::Subscriber + for<'l> LookupSpan<'l>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !is_ctx(attrs.metadata().target()) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let parent = span.scope().skip(1).find_map(|s| {
            s.extensions()
                .get::<Recorded>()
                .map(|r| (r.trace_id, r.span_id))
        });
        let mut attributes = Vec::new();
        let mut fields = Fields::new(&mut attributes, &self.content);
        attrs.record(&mut fields);
        let name = fields
            .name
            .take()
            .unwrap_or_else(|| attrs.metadata().name().to_string());
        let kind = fields.kind.take().unwrap_or(SpanKind::Internal);
        let error = fields.error.take();
        let run = fields.run_id.take();
        let resumed = fields.resumed;
        let (trace_id, span_id, parent_id, parent_remote) = ids_for(
            attrs.metadata().name(),
            parent,
            run.as_deref().map(|r| (r, resumed)),
            &self.ids,
        );
        span.extensions_mut().insert(Recorded {
            name,
            kind,
            start: SystemTime::now(),
            trace_id,
            span_id,
            parent_id,
            parent_remote,
            attributes,
            events: Vec::new(),
            error,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        let Some(rec) = ext.get_mut::<Recorded>() else {
            return;
        };
        let mut fields = Fields::new(&mut rec.attributes, &self.content);
        values.record(&mut fields);
        let (name, error) = (fields.name.take(), fields.error.take());
        if let Some(n) = name {
            rec.name = n;
        }
        if error.is_some() {
            rec.error = error;
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if !is_ctx(event.metadata().target()) {
            return;
        }
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let Some(span) = span
            .scope()
            .find(|s| s.extensions().get::<Recorded>().is_some())
        else {
            return;
        };
        let mut attributes = Vec::new();
        let mut fields = Fields::new(&mut attributes, &self.content);
        event.record(&mut fields);
        let name = fields
            .event_name
            .take()
            .unwrap_or_else(|| event.metadata().name().to_string());
        if let Some(rec) = span.extensions_mut().get_mut::<Recorded>() {
            rec.events
                .push(Event::new(name, SystemTime::now(), attributes, 0));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(rec) = span.extensions_mut().remove::<Recorded>() else {
            return;
        };
        let end = SystemTime::now();
        if let Some(m) = &self.metrics {
            m.record(&rec.attributes, rec.start, end, rec.error.as_deref());
        }
        self.ended.fetch_add(1, Ordering::Relaxed);
        self.processor
            .on_end(span_data(rec, end, self.scope.clone()));
    }
}

/// A finished span as the SDK exports it.
pub(crate) fn span_data(rec: Recorded, end: SystemTime, scope: InstrumentationScope) -> SpanData {
    let status = match rec.error {
        Some(e) => Status::error(e),
        None => Status::Unset,
    };
    let mut events = SpanEvents::default();
    events.events = rec.events;
    SpanData {
        span_context: SpanContext::new(
            rec.trace_id,
            rec.span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: rec.parent_id,
        parent_span_is_remote: rec.parent_remote,
        span_kind: rec.kind,
        name: Cow::Owned(rec.name),
        start_time: rec.start,
        end_time: end,
        attributes: rec.attributes,
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope,
    }
}

/// The W3C `traceparent` of the innermost recorded span around the current
/// one, for an outgoing request (see [`crate::install`]).
pub(crate) fn current_traceparent() -> Option<String> {
    tracing::dispatcher::get_default(|dispatch| {
        let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
        let current = tracing::Subscriber::current_span(registry);
        let id = current.id()?;
        let span = registry.span(id)?;
        span.scope().find_map(|s| {
            s.extensions()
                .get::<Recorded>()
                .map(|r| format!("00-{}-{}-01", r.trace_id, r.span_id))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starting_session_is_the_root_and_the_others_hang_under_it() {
        let random = RandomIdGenerator::default();
        let run = RunTraceIds::of("run-1");
        let trace = TraceId::from_bytes(run.trace_id);
        let root = SpanId::from_bytes(run.root_span_id);
        let (t, s, p, remote) = ids_for(WORKFLOW_SPAN, None, Some(("run-1", false)), &random);
        assert_eq!((t, s, p, remote), (trace, root, SpanId::INVALID, false));
        // A resumed session, and a worker's claim: children of the root.
        for (name, resumed) in [(WORKFLOW_SPAN, true), ("claim", false)] {
            let (t, s, p, remote) = ids_for(name, None, Some(("run-1", resumed)), &random);
            assert_eq!((t, p, remote), (trace, root, true));
            assert_ne!(s, root);
        }
        // A local parent wins; no run and no parent: a trace of its own.
        let (t, _, p, remote) = ids_for("task", Some((trace, SpanId::from(7))), None, &random);
        assert_eq!((t, p, remote), (trace, SpanId::from(7), false));
        let (t, _, p, _) = ids_for("task", None, None, &random);
        assert_ne!(t, trace);
        assert_eq!(p, SpanId::INVALID);
    }
}
