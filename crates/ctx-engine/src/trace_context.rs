//! The W3C `traceparent` an engine puts on an outgoing request, so an
//! OpenAI-compatible server that traces (LiteLLM, vLLM) joins the run's
//! trace.
//!
//! Engines know no exporter and no trace: the binary that installs one
//! (ctx-cli through ctx-otel) registers the function that reads the
//! current span's context, once per process, as it installs the process's
//! one `tracing` subscriber. Without it, [`traceparent`] is `None` and no
//! header is sent.

use std::sync::OnceLock;

static SOURCE: OnceLock<fn() -> Option<String>> = OnceLock::new();

/// Registers the `traceparent` source; the first registration wins.
pub fn set_source(source: fn() -> Option<String>) {
    let _ = SOURCE.set(source);
}

/// The current span's `traceparent` (`00-{trace}-{span}-01`), if a tracer
/// is installed and a span is current.
pub fn traceparent() -> Option<String> {
    SOURCE.get().and_then(|source| source())
}
