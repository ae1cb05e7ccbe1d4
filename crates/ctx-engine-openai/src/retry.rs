//! Which failures are worth another attempt, and how long to wait first.
//!
//! The policy, in one place:
//!
//! | failure | retried? |
//! | --- | --- |
//! | cannot connect, connection reset, timeout, stalled stream, body cut short | yes |
//! | HTTP 408, 409, 429, 5xx (Ollama answers 503 when its queue is full) | yes |
//! | HTTP 429 whose error says the quota is exhausted (`insufficient_quota`) | no |
//! | HTTP 429 "resource unavailable" to a flex request | yes; with `--flex-fallback standard` the last attempt goes at the standard tier |
//! | a context-length error, whatever its status | no |
//! | any other 4xx: 400, 401, 403, 404 (unknown model), 422 ... | no |
//! | a 2xx whose body is not JSON, has no `choices`, or carries an `error` | no |
//!
//! Waits use exponential backoff with *full jitter*: before retry `n` the
//! engine sleeps a uniformly random time in `[0, min(max, initial * 2^(n-1))]`,
//! which spreads a crowd of clients that failed together. A server's own
//! hint wins when it gives one: `retry-after-ms` (milliseconds, OpenAI and
//! Azure), else `Retry-After` (seconds or an HTTP date), honoured exactly
//! when it is at most `max_retry_after` long.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use crate::config::RetryPolicy;

/// Whether an HTTP status is worth retrying, given the error the server
/// put in the body.
pub(crate) fn status_is_retryable(status: u16, error: &ApiErrorInfo) -> bool {
    if error.is_context_length() {
        return false;
    }
    match status {
        429 => !error.is_quota_exhausted(),
        408 | 409 => true,
        500..=599 => true,
        _ => false,
    }
}

/// The parts of an OpenAI-style error body that decide a retry.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ApiErrorInfo {
    /// `error.message`, or the best text found in the body.
    pub message: String,
    /// `error.type`.
    pub kind: Option<String>,
    /// `error.code` (a string, or a number turned into one).
    pub code: Option<String>,
}

impl ApiErrorInfo {
    /// Reads an error body: `{"error": {"message", "type", "code"}}`, or
    /// `{"error": "text"}`, or FastAPI's `{"detail": ...}`, or
    /// `{"message": ...}`; anything else gives the body's start as text.
    pub(crate) fn from_body(body: &[u8]) -> ApiErrorInfo {
        let text = String::from_utf8_lossy(body);
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
            return ApiErrorInfo {
                message: snippet(text.trim(), 500),
                ..ApiErrorInfo::default()
            };
        };
        ApiErrorInfo::from_value(&value).unwrap_or_else(|| ApiErrorInfo {
            message: snippet(text.trim(), 500),
            ..ApiErrorInfo::default()
        })
    }

    /// Reads the error object of a JSON value, if it has one.
    pub(crate) fn from_value(value: &serde_json::Value) -> Option<ApiErrorInfo> {
        let as_text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        };
        if let Some(error) = value.get("error") {
            if let Some(obj) = error.as_object() {
                return Some(ApiErrorInfo {
                    message: obj
                        .get("message")
                        .and_then(as_text)
                        .unwrap_or_else(|| snippet(&error.to_string(), 500)),
                    kind: obj.get("type").and_then(as_text),
                    code: obj.get("code").and_then(as_text),
                });
            }
            if let Some(message) = as_text(error) {
                return Some(ApiErrorInfo {
                    message,
                    ..ApiErrorInfo::default()
                });
            }
        }
        for key in ["detail", "message"] {
            if let Some(message) = value.get(key).and_then(as_text) {
                return Some(ApiErrorInfo {
                    message,
                    ..ApiErrorInfo::default()
                });
            }
        }
        None
    }

    /// A 429 that waiting will not cure.
    pub(crate) fn is_quota_exhausted(&self) -> bool {
        let is = |s: &Option<String>| s.as_deref() == Some("insufficient_quota");
        if is(&self.code) || is(&self.kind) {
            return true;
        }
        let m = self.message.to_ascii_lowercase();
        m.contains("exceeded your current quota")
            || m.contains("insufficient_quota")
            || (m.contains("quota") && (m.contains("exhausted") || m.contains("exceeded")))
    }

    /// The server has no capacity for the request's tier: OpenAI answers
    /// a flex request so ("429 Resource Unavailable") when flex capacity
    /// runs out.
    pub(crate) fn is_resource_unavailable(&self) -> bool {
        let is = |s: &Option<String>| {
            s.as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("resource_unavailable"))
        };
        is(&self.code)
            || is(&self.kind)
            || self
                .message
                .to_ascii_lowercase()
                .contains("resource unavailable")
    }

    /// The prompt does not fit the model: a retry sends the same prompt.
    pub(crate) fn is_context_length(&self) -> bool {
        let is = |s: &Option<String>| {
            s.as_deref()
                .is_some_and(|s| s.contains("context_length_exceeded"))
        };
        if is(&self.code) || is(&self.kind) {
            return true;
        }
        let m = self.message.to_ascii_lowercase();
        m.contains("context length")
            || m.contains("context_length")
            || m.contains("maximum context")
            || m.contains("context window")
    }
}

/// The server's hint, from `retry-after-ms` first, then `Retry-After`.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(1e9)));
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// How long to wait before retry number `retry` (1 for the first retry):
/// the server's hint when usable, else full-jitter backoff.
pub(crate) fn delay(policy: &RetryPolicy, retry: u32, hint: Option<Duration>) -> Duration {
    if let Some(hint) = hint.filter(|h| *h <= policy.max_retry_after) {
        return hint;
    }
    let cap = backoff_cap(policy, retry);
    let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(fastrand::u64(0..=nanos))
}

/// The upper bound of the jittered wait before retry `retry`.
pub(crate) fn backoff_cap(policy: &RetryPolicy, retry: u32) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(31));
    policy
        .initial_backoff
        .saturating_mul(factor)
        .min(policy.max_backoff)
}

/// At most `max` characters of `text`, with `...` when cut.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn err(body: &str) -> ApiErrorInfo {
        ApiErrorInfo::from_body(body.as_bytes())
    }

    #[test]
    fn statuses() {
        let plain = ApiErrorInfo::default();
        for s in [408, 409, 429, 500, 502, 503, 504, 599] {
            assert!(status_is_retryable(s, &plain), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!status_is_retryable(s, &plain), "{s}");
        }
    }

    #[test]
    fn quota_exhausted_429_fails_at_once() {
        let q = err(
            r#"{"error":{"message":"You exceeded your current quota, please check your plan.","type":"insufficient_quota","code":"insufficient_quota"}}"#,
        );
        assert!(q.is_quota_exhausted());
        assert!(!status_is_retryable(429, &q));
        let rate = err(
            r#"{"error":{"message":"Rate limit reached for gpt-4o on tokens per min","type":"tokens","code":"rate_limit_exceeded"}}"#,
        );
        assert!(status_is_retryable(429, &rate));
    }

    #[test]
    fn resource_unavailable_is_read_from_code_type_or_message() {
        for body in [
            r#"{"error": {"message": "Resource unavailable", "type": "rate_limit_error"}}"#,
            r#"{"error": {"message": "try later", "code": "resource_unavailable"}}"#,
            r#"{"error": {"message": "busy", "type": "Resource_Unavailable"}}"#,
        ] {
            let e = err(body);
            assert!(e.is_resource_unavailable(), "{body}");
            assert!(status_is_retryable(429, &e), "{body}");
        }
        assert!(!err(r#"{"error": {"message": "Rate limit reached"}}"#).is_resource_unavailable());
    }

    #[test]
    fn context_length_fails_at_once_whatever_the_status() {
        let c = err(
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#,
        );
        assert!(!status_is_retryable(400, &c));
        assert!(!status_is_retryable(500, &c));
        let llama = err(r#"{"detail":"Requested tokens (3000) exceed context window of 2048"}"#);
        assert!(!status_is_retryable(500, &llama));
    }

    #[test]
    fn error_bodies_of_every_shape() {
        assert_eq!(
            err(r#"{"error":"model not found"}"#).message,
            "model not found"
        );
        assert_eq!(err(r#"{"detail":"Not Found"}"#).message, "Not Found");
        assert_eq!(err(r#"{"message":"bad"}"#).message, "bad");
        assert_eq!(
            err("<html>502 Bad Gateway</html>").message,
            "<html>502 Bad Gateway</html>"
        );
        let e = err(r#"{"error":{"message":"x","type":"invalid_request_error","code":404}}"#);
        assert_eq!(e.code.as_deref(), Some("404"));
        assert_eq!(e.kind.as_deref(), Some("invalid_request_error"));
        assert_eq!(err(&"é".repeat(600)).message.chars().count(), 503);
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(3)));
        h.insert("retry-after", HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(500)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        h.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        h.insert("retry-after", HeaderValue::from_str(&past).unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(250)));
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_jitters_below_it() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(60),
        };
        let caps: Vec<u64> = (1..=6)
            .map(|n| backoff_cap(&p, n).as_millis() as u64)
            .collect();
        assert_eq!(caps, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff_cap(&p, u32::MAX), Duration::from_millis(1000));
        let mut distinct = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let d = delay(&p, 3, None);
            assert!(d <= Duration::from_millis(400));
            distinct.insert(d);
        }
        assert!(distinct.len() > 100, "full jitter spreads waits");
        assert_eq!(
            delay(&p, 1, Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
        assert!(delay(&p, 1, Some(Duration::from_secs(600))) <= Duration::from_millis(100));
    }
}
