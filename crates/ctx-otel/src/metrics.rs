//! The GenAI client metrics, recorded when a `chat` span closes:
//! `gen_ai.client.operation.duration` (seconds) and
//! `gen_ai.client.token.usage` (tokens, one point per `gen_ai.token.type`).

use std::time::SystemTime;

use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::{KeyValue, Value};

/// The attributes the conventions put on both metrics.
const METRIC_ATTRIBUTES: [&str; 4] = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
];

/// The two histograms.
#[derive(Debug, Clone)]
pub(crate) struct GenAiMetrics {
    duration: Histogram<f64>,
    tokens: Histogram<u64>,
}

impl GenAiMetrics {
    pub(crate) fn new(meter: &Meter) -> GenAiMetrics {
        GenAiMetrics {
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(vec![
                    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92,
                ])
                .build(),
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Measures number of input and output tokens used")
                .with_boundaries(vec![
                    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
                    1048576.0, 4194304.0, 16777216.0, 67108864.0,
                ])
                .build(),
        }
    }

    /// Records a closed span's figures, if it is a `chat` span.
    pub(crate) fn record(
        &self,
        attributes: &[KeyValue],
        start: SystemTime,
        end: SystemTime,
        error: Option<&str>,
    ) {
        let get = |key: &str| {
            attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| &kv.value)
        };
        if !matches!(get("gen_ai.operation.name"), Some(Value::String(s)) if s.as_str() == "chat") {
            return;
        }
        let mut common: Vec<KeyValue> = METRIC_ATTRIBUTES
            .iter()
            .filter_map(|k| get(k).map(|v| KeyValue::new(*k, v.clone())))
            .collect();
        if let Some(e) = error {
            common.push(KeyValue::new("error.type", e.to_string()));
        }
        let seconds = end.duration_since(start).unwrap_or_default().as_secs_f64();
        self.duration.record(seconds, &common);
        for (key, kind) in [
            ("gen_ai.usage.input_tokens", "input"),
            ("gen_ai.usage.output_tokens", "output"),
        ] {
            if let Some(Value::I64(n)) = get(key) {
                let mut attrs = common.clone();
                attrs.push(KeyValue::new("gen_ai.token.type", kind));
                self.tokens.record(u64::try_from(*n).unwrap_or(0), &attrs);
            }
        }
    }
}
