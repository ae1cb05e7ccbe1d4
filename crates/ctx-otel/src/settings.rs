//! Whether to export, and where: `--otlp URL` or the standard `OTEL_*`
//! environment, resolved once per command.

use std::time::Duration;

use crate::OtelError;

/// The flush at exit, and each export, is bounded by this unless
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (or its `TRACES` form) says otherwise. The
/// OTLP specification's default is 10 s; ctx halves it, since a run must
/// not wait on its telemetry (docs/tracing.md).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how a command exports, when it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The traces URL (`…/v1/traces`).
    pub traces_endpoint: String,
    /// The metrics URL (`…/v1/metrics`).
    pub metrics_endpoint: String,
    /// The bound on each export and on the flush at exit.
    pub timeout: Duration,
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: prompts
    /// and outputs are recorded (capped, secrets redacted).
    pub capture_content: bool,
    /// Strings replaced by `[REDACTED]` in recorded content: the values of
    /// the variables marked secret.
    pub redact: Vec<String>,
}

impl OtlpSettings {
    /// The settings for a command given `--otlp` (`flag`, a base endpoint
    /// like `OTEL_EXPORTER_OTLP_ENDPOINT`) and the environment (`env`
    /// looks a variable up). `Ok(None)`: nothing is exported: neither the
    /// flag nor an endpoint variable is set, or `OTEL_SDK_DISABLED=true`,
    /// or `OTEL_TRACES_EXPORTER=none`.
    pub fn resolve(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpSettings>, OtelError> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }
        let base = flag
            .map(str::to_string)
            .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let traces_endpoint =
            match set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|_| flag.is_none()) {
                Some(url) => url,
                None => match &base {
                    Some(b) => signal_url(b, "traces"),
                    None => return Ok(None),
                },
            };
        let metrics_endpoint =
            match set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").filter(|_| flag.is_none()) {
                Some(url) => url,
                None => signal_url(base.as_deref().unwrap_or(&traces_endpoint), "metrics"),
            };
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(p) = protocol
            && p.trim() != "http/protobuf"
        {
            return Err(OtelError::Protocol(p));
        }
        let timeout = match set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_TIMEOUT"))
        {
            Some(ms) => Duration::from_millis(
                ms.trim()
                    .parse()
                    .map_err(|_| OtelError::Timeout(ms.clone()))?,
            ),
            None => DEFAULT_TIMEOUT,
        };
        let capture_content = set("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        Ok(Some(OtlpSettings {
            traces_endpoint,
            metrics_endpoint,
            timeout,
            capture_content,
            redact: Vec::new(),
        }))
    }
}

/// `base` with `/v1/{signal}` appended, as the specification says for
/// `OTEL_EXPORTER_OTLP_ENDPOINT`. A traces URL given alone
/// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` ending in `/v1/traces`) gives its
/// metrics sibling.
fn signal_url(base: &str, signal: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    let base = base.strip_suffix("/v1/traces").unwrap_or(base);
    format!("{base}/v1/{signal}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        flag: Option<&str>,
        vars: &[(&str, &str)],
    ) -> Result<Option<OtlpSettings>, OtelError> {
        OtlpSettings::resolve(flag, |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn nothing_set_exports_nothing() {
        assert_eq!(resolve(None, &[]).unwrap(), None);
        assert_eq!(resolve(None, &[("OTEL_SERVICE_NAME", "x")]).unwrap(), None);
    }

    #[test]
    fn the_flag_and_the_base_endpoint_get_the_signal_paths() {
        let s = resolve(Some("http://h:4318/"), &[]).unwrap().unwrap();
        assert_eq!(s.traces_endpoint, "http://h:4318/v1/traces");
        assert_eq!(s.metrics_endpoint, "http://h:4318/v1/metrics");
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        assert!(!s.capture_content);
        let s = resolve(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:1/otel")])
            .unwrap()
            .unwrap();
        assert_eq!(s.traces_endpoint, "http://c:1/otel/v1/traces");
        // The per-signal variable is used as it is.
        let s = resolve(
            None,
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:2/x")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.traces_endpoint, "http://t:2/x");
        // The flag wins over the environment.
        let s = resolve(
            Some("http://f:3"),
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:2/x")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.traces_endpoint, "http://f:3/v1/traces");
    }

    #[test]
    fn disabled_protocol_timeout_and_content() {
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:1")];
        assert_eq!(
            resolve(None, &[on[0], ("OTEL_SDK_DISABLED", "true")]).unwrap(),
            None
        );
        assert_eq!(
            resolve(None, &[on[0], ("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
            None
        );
        assert!(matches!(
            resolve(None, &[on[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
            Err(OtelError::Protocol(p)) if p == "grpc"
        ));
        let s = resolve(
            None,
            &[
                on[0],
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
                ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TRUE"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.timeout, Duration::from_millis(250));
        assert!(s.capture_content);
        assert!(matches!(
            resolve(None, &[on[0], ("OTEL_EXPORTER_OTLP_TIMEOUT", "5s")]),
            Err(OtelError::Timeout(_))
        ));
    }
}
