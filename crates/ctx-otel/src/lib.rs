//! OpenTelemetry for ctx: what the `ctx` binary wires under the libraries'
//! `tracing` spans when `--otlp URL` or the `OTEL_*` environment asks for
//! it (docs/tracing.md).
//!
//! The libraries emit spans and events through `tracing` with the GenAI
//! semantic conventions' names as fields (ctx-run's `invoke_workflow`,
//! ctx-deps' task and `chat` spans, ctx-worker's claims) and know no
//! exporter. This crate is the exporter's side: [`OtlpSettings`] resolves
//! the flag and the environment, [`install`] sets the process's subscriber
//! (a layer of ours, src/layer.rs, over the SDK's batch processor and
//! metric reader, exporting OTLP/HTTP protobuf through the workspace's
//! reqwest), and [`Telemetry::shutdown`] flushes within the OTLP timeout
//! and says what was lost. When nothing is configured, nothing is
//! installed: `tracing`'s macros then cost one relaxed load each.
//!
//! It is a crate of its own, not part of ctx-cli, because the exporter's
//! dependency tree (the OpenTelemetry SDK, prost, the OTLP types) is
//! larger than everything else the CLI wires, and must stay out of the
//! seam crates (`cargo xtask arch` checks ctx-engine and ctx-store).

mod content;
mod http;
mod layer;
mod metrics;
mod settings;
pub mod stored;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanData, SpanExporter, SpanProcessor};
use tracing_subscriber::layer::SubscriberExt;

pub use content::{MAX_ATTRIBUTE_BYTES, TRUNCATED, redact_values};
pub use settings::{DEFAULT_TIMEOUT, OtlpSettings};

/// The GenAI semantic conventions' version ctx follows (the schema URL of
/// the instrumentation scope).
pub const SEMCONV_VERSION: &str = "1.37.0";
/// [`SEMCONV_VERSION`]'s schema URL.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.37.0";

/// Why tracing could not be set up. The command goes on without it.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// A protocol other than `http/protobuf` was asked for.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0}: ctx speaks http/protobuf only, so nothing is exported; \
         collectors take it too (port 4318): unset the variable or set it to http/protobuf"
    )]
    Protocol(String),
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` is not a number of milliseconds.
    #[error("OTEL_EXPORTER_OTLP_TIMEOUT={0}: not a number of milliseconds")]
    Timeout(String),
    /// The exporter could not be built (an endpoint that is not a URL).
    #[error("OTLP exporter: {0}")]
    Build(String),
    /// A stored run's trace was not accepted (`ctx runs export --to URL`).
    #[error("{endpoint}: {message}")]
    Send {
        /// The traces URL.
        endpoint: String,
        /// The exporter's error.
        message: String,
    },
    /// Another subscriber is already installed.
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// Counts what the exporter delivered, and keeps its first error.
#[derive(Debug, Default)]
struct Delivery {
    exported: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// The OTLP span exporter, counting.
#[derive(Debug)]
struct CountingExporter {
    inner: opentelemetry_otlp::SpanExporter,
    delivery: Arc<Delivery>,
}

impl SpanExporter for CountingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                self.delivery.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                let mut first = self
                    .delivery
                    .first_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                first.get_or_insert_with(|| e.to_string());
            }
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// What was lost, reported once at exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Spans ended but not delivered.
    pub spans: u64,
    /// The traces URL.
    pub endpoint: String,
    /// The first export error, when one was seen.
    pub first_error: Option<String>,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} span(s) not delivered to {}",
            self.spans, self.endpoint
        )?;
        if let Some(e) = &self.first_error {
            write!(f, " ({e})")?;
        }
        Ok(())
    }
}

/// The installed exporter; [`Telemetry::shutdown`] flushes it.
pub struct Telemetry {
    settings: OtlpSettings,
    spans: Arc<BatchSpanProcessor>,
    meters: SdkMeterProvider,
    ended: Arc<AtomicU64>,
    delivery: Arc<Delivery>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Installs the exporter as `settings` say, as the process's `tracing`
/// subscriber, and the W3C `traceparent` source of outgoing requests
/// (ctx-engine's `trace_context`). Call once, before any span. The
/// exporter's requests run on `runtime` (the process's own: no exporter
/// brings a runtime of its own), which must outlive
/// [`Telemetry::shutdown`], where the last spans are sent.
pub fn install(
    settings: OtlpSettings,
    runtime: tokio::runtime::Handle,
) -> Result<Telemetry, OtelError> {
    let plain = [&settings.traces_endpoint, &settings.metrics_endpoint]
        .iter()
        .all(|url| is_plain(url));
    let http = http::OtlpHttp::new(settings.timeout, plain, runtime);
    let resource = resource();
    let spans_out = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http.clone())
        .with_endpoint(settings.traces_endpoint.clone())
        .with_timeout(settings.timeout)
        .build()
        .map_err(|e| OtelError::Build(e.to_string()))?;
    let delivery = Arc::new(Delivery::default());
    let mut processor = BatchSpanProcessor::builder(CountingExporter {
        inner: spans_out,
        delivery: Arc::clone(&delivery),
    })
    .build();
    processor.set_resource(&resource);
    let spans = Arc::new(processor);
    let metrics_out = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(http)
        .with_endpoint(settings.metrics_endpoint.clone())
        .with_timeout(settings.timeout)
        .build()
        .map_err(|e| OtelError::Build(e.to_string()))?;
    let meters = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_reader(PeriodicReader::builder(metrics_out).build())
        .build();
    let metrics = metrics::GenAiMetrics::new(&meters.meter("ctx"));
    let ended = Arc::new(AtomicU64::new(0));
    let content = content::ContentPolicy {
        capture: settings.capture_content,
        redact: settings.redact.clone(),
    };
    let layer = layer::OtelLayer::new(
        Arc::clone(&spans) as Arc<dyn SpanProcessor>,
        content,
        Some(metrics),
        Arc::clone(&ended),
    );
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .map_err(|_| OtelError::AlreadyInstalled)?;
    ctx_engine::trace_context::set_source(layer::current_traceparent);
    Ok(Telemetry {
        settings,
        spans,
        meters,
        ended,
        delivery,
    })
}

impl Telemetry {
    /// Flushes what is queued and stops the exporters, within the OTLP
    /// timeout for spans and metrics at once (they flush in parallel).
    /// `Some` when spans were lost (a collector unreachable, slow or
    /// refusing), for one line on stderr.
    pub fn shutdown(self) -> Option<Lost> {
        let timeout = self.settings.timeout;
        let started = std::time::Instant::now();
        // The metric reader's shutdown takes no deadline of its own; it
        // runs beside the spans' flush and is waited for only until the
        // timeout, then abandoned with the process.
        let (done, metrics_done) = std::sync::mpsc::channel();
        let meters = self.meters.clone();
        std::thread::spawn(move || {
            let _ = meters.shutdown_with_timeout(timeout);
            let _ = done.send(());
        });
        let _ = self.spans.shutdown_with_timeout(timeout);
        let _ = metrics_done.recv_timeout(timeout.saturating_sub(started.elapsed()));
        let ended = self.ended.load(Ordering::Relaxed);
        let exported = self.delivery.exported.load(Ordering::Relaxed);
        (exported < ended).then(|| Lost {
            spans: ended - exported,
            endpoint: self.settings.traces_endpoint.clone(),
            first_error: self
                .delivery
                .first_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        })
    }
}

/// The resource every export names: `service.name` from
/// `OTEL_SERVICE_NAME` (default `ctx`), `OTEL_RESOURCE_ATTRIBUTES`, and the
/// SDK's telemetry attributes.
fn resource() -> Resource {
    let name = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| "ctx".into());
    Resource::builder().with_service_name(name).build()
}

/// The instrumentation scope of ctx's spans, with the conventions' schema.
fn scope() -> opentelemetry::InstrumentationScope {
    opentelemetry::InstrumentationScope::builder("ctx")
        .with_version(env!("CARGO_PKG_VERSION"))
        .with_schema_url(SCHEMA_URL)
        .build()
}

/// `spans` as an OTLP/JSON `ExportTraceServiceRequest` (the body a
/// collector's `/v1/traces` takes with `Content-Type: application/json`,
/// and what the OpenTelemetry Collector's file receiver reads).
pub fn otlp_json(spans: Vec<SpanData>) -> String {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    let resource = ResourceAttributesWithSchema::from(&resource());
    let request = ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(spans, &resource),
    };
    // The generated types serialize infallibly (no maps with non-string keys).
    serde_json::to_string(&request).unwrap_or_default()
}

/// Sends `spans` to the collector at `base` (`/v1/traces` appended, as for
/// `--otlp`), once, within `timeout`; headers from
/// `OTEL_EXPORTER_OTLP_HEADERS`. Returns how many spans were sent. The
/// request runs on `runtime`; call from a thread outside any runtime.
pub fn send(
    base: &str,
    spans: Vec<SpanData>,
    timeout: Duration,
    runtime: tokio::runtime::Handle,
) -> Result<usize, OtelError> {
    let settings = OtlpSettings::resolve(Some(base), |_| None)?
        .ok_or_else(|| OtelError::Build(format!("{base}: not an endpoint")))?;
    let http = http::OtlpHttp::new(timeout, is_plain(&settings.traces_endpoint), runtime);
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http.clone())
        .with_endpoint(settings.traces_endpoint.clone())
        .with_timeout(timeout)
        .build()
        .map_err(|e| OtelError::Build(e.to_string()))?;
    exporter.set_resource(&resource());
    let n = spans.len();
    http.block_on(exporter.export(spans))
        .map_err(|e| OtelError::Send {
            endpoint: settings.traces_endpoint,
            message: e.to_string(),
        })?;
    Ok(n)
}

/// A URL without TLS.
fn is_plain(url: &str) -> bool {
    url.trim_start().to_ascii_lowercase().starts_with("http://")
}
