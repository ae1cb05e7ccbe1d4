//! What a span may carry of a prompt or an output, and how much of any
//! string.
//!
//! The GenAI conventions record message content only on request
//! (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`): prompts
//! hold what users feed a model, often private. The values of variables
//! marked secret are replaced by `[REDACTED]` in every string attribute
//! (content or not: an error message can quote a prompt), and every string
//! attribute is capped, so one large output cannot make a span the
//! collector refuses. API keys never reach a span: no library puts one in
//! a field (a test greps every exported byte for the key).

/// Values redacted from recorded content, added once a command knows them
/// (the values of secret variables are read after the exporter is
/// installed). Process-wide, as the subscriber it serves is.
static SECRETS: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Redacts `values` from every message content recorded from now on.
pub fn redact_values(values: impl IntoIterator<Item = String>) {
    let mut secrets = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    secrets.extend(values.into_iter().filter(|v| !v.is_empty()));
}

/// The cap on a string attribute, in bytes (cut at a character boundary;
/// the cut is marked with `…[truncated]`).
pub const MAX_ATTRIBUTE_BYTES: usize = 16 * 1024;

/// The fields that hold message content, each with the role its text is
/// recorded under (the GenAI conventions' message JSON).
const CONTENT_FIELDS: [(&str, &str); 3] = [
    ("gen_ai.input.messages", "user"),
    ("gen_ai.output.messages", "assistant"),
    ("gen_ai.system_instructions", "system"),
];

/// Whether content is captured, and what is redacted from it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ContentPolicy {
    pub(crate) capture: bool,
    pub(crate) redact: Vec<String>,
}

impl ContentPolicy {
    /// The value to record for string field `key`, `None` to drop it.
    /// A secret is redacted from every string, not only from content: an
    /// error message (a retry's, a command's stderr) can quote a prompt.
    pub(crate) fn value(&self, key: &str, value: &str) -> Option<String> {
        let Some((_, role)) = CONTENT_FIELDS.iter().find(|(k, _)| *k == key) else {
            return Some(cap(&self.redacted(value)));
        };
        if !self.capture {
            return None;
        }
        let text = self.redacted(value);
        let part = serde_json::json!({"type": "text", "content": cap(&text)});
        let json = if *role == "system" {
            serde_json::json!([part])
        } else {
            serde_json::json!([{"role": role, "parts": [part]}])
        };
        Some(json.to_string())
    }
}

impl ContentPolicy {
    /// `value` with every secret replaced by `[REDACTED]`.
    fn redacted(&self, value: &str) -> String {
        let mut text = value.to_string();
        let late = SECRETS.read().unwrap_or_else(|p| p.into_inner());
        for secret in self
            .redact
            .iter()
            .chain(late.iter())
            .filter(|s| !s.is_empty())
        {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), "[REDACTED]");
            }
        }
        text
    }
}

/// `s`, cut to [`MAX_ATTRIBUTE_BYTES`].
pub(crate) fn cap(s: &str) -> String {
    if s.len() <= MAX_ATTRIBUTE_BYTES {
        return s.to_string();
    }
    let mut end = MAX_ATTRIBUTE_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated]", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_dropped_unless_captured_then_redacted_and_capped() {
        let off = ContentPolicy::default();
        assert_eq!(off.value("gen_ai.input.messages", "hi"), None);
        assert_eq!(off.value("ctx.task.id", "a").as_deref(), Some("a"));
        let on = ContentPolicy {
            capture: true,
            redact: vec!["s3cret".into()],
        };
        let v = on.value("gen_ai.input.messages", "say s3cret").unwrap();
        assert!(!v.contains("s3cret"), "{v}");
        let json: serde_json::Value = serde_json::from_str(&v).unwrap();
        assert_eq!(json[0]["role"], "user");
        assert_eq!(json[0]["parts"][0]["content"], "say [REDACTED]");
        // Any other string is recorded, content capture or not, but never
        // with a secret in it (a retry's error message can quote a prompt).
        let off = ContentPolicy {
            capture: false,
            redact: vec!["s3cret".into()],
        };
        assert_eq!(
            off.value("error.message", "exit 1: say s3cret").as_deref(),
            Some("exit 1: say [REDACTED]")
        );
        let long = "é".repeat(MAX_ATTRIBUTE_BYTES);
        let capped = on.value("ctx.task.id", &long).unwrap();
        assert!(capped.len() <= MAX_ATTRIBUTE_BYTES + "…[truncated]".len());
        assert!(capped.ends_with("…[truncated]"));
    }
}
