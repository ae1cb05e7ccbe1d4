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

/// The cap on a string attribute as exported, in bytes, the cut's marker
/// and a message's JSON included (cut at a character boundary; the cut is
/// marked with [`TRUNCATED`]).
pub const MAX_ATTRIBUTE_BYTES: usize = 16 * 1024;

/// What ends a string attribute cut to [`MAX_ATTRIBUTE_BYTES`].
pub const TRUNCATED: &str = "…[truncated]";

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
        Some(message_json(role, &self.redacted(value)))
    }
}

/// The conventions' message JSON holding `text` under `role`, at most
/// [`MAX_ATTRIBUTE_BYTES`] long as serialized: the cap is on the attribute
/// a collector receives, so it counts the wrapper (`[{"role":…,"parts":…}]`)
/// and every escape JSON adds (a quote becomes `\"`, a control character
/// `\u00XX`, six bytes for one), not only the text. A text that does not
/// fit is cut at a character boundary and marked [`TRUNCATED`].
fn message_json(role: &str, text: &str) -> String {
    let wrap = |content: &str| {
        let part = serde_json::json!({"type": "text", "content": content});
        let json = if role == "system" {
            serde_json::json!([part])
        } else {
            serde_json::json!([{"role": role, "parts": [part]}])
        };
        json.to_string()
    };
    let whole = wrap(text);
    if whole.len() <= MAX_ATTRIBUTE_BYTES {
        return whole;
    }
    let budget = MAX_ATTRIBUTE_BYTES
        .saturating_sub(wrap("").len())
        .saturating_sub(json_escaped_len(TRUNCATED));
    let mut used = 0;
    let end = text
        .char_indices()
        .find(|&(_, c)| {
            used += char_escaped_len(c);
            used > budget
        })
        .map_or(text.len(), |(i, _)| i);
    wrap(&format!("{}{TRUNCATED}", &text[..end]))
}

/// The bytes `c` takes inside a JSON string as serde_json writes it: a
/// quote, a backslash and the five controls with a short escape take two,
/// every other control character `\u00XX` six, anything else its UTF-8.
fn char_escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        '\0'..='\u{1f}' => 6,
        _ => c.len_utf8(),
    }
}

/// The bytes `s` takes inside a JSON string, quotes excluded.
fn json_escaped_len(s: &str) -> usize {
    s.chars().map(char_escaped_len).sum()
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

/// `s`, cut to [`MAX_ATTRIBUTE_BYTES`] with its marker: the marker is
/// inside the cap, so the attribute a collector receives never exceeds it.
pub(crate) fn cap(s: &str) -> String {
    if s.len() <= MAX_ATTRIBUTE_BYTES {
        return s.to_string();
    }
    let mut end = MAX_ATTRIBUTE_BYTES - TRUNCATED.len();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{TRUNCATED}", &s[..end])
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
        assert!(capped.len() <= MAX_ATTRIBUTE_BYTES, "{}", capped.len());
        assert!(capped.ends_with(TRUNCATED));
    }

    /// A long answer's `gen_ai.output.messages`: the cap was applied to the
    /// text alone, so the JSON around it (and the text's escapes) took the
    /// attribute past 16 KiB.
    #[test]
    fn a_long_answer_with_its_wrapper_stays_within_the_cap() {
        let on = ContentPolicy {
            capture: true,
            redact: vec![],
        };
        let answer = "say \"hi\"\n".repeat(MAX_ATTRIBUTE_BYTES);
        let v = on.value("gen_ai.output.messages", &answer).unwrap();
        assert!(v.len() <= MAX_ATTRIBUTE_BYTES, "{}", v.len());
        let json: serde_json::Value = serde_json::from_str(&v).unwrap();
        let content = json[0]["parts"][0]["content"].as_str().unwrap();
        let kept = content.strip_suffix(TRUNCATED).unwrap();
        assert!(answer.starts_with(kept));
    }

    /// Characters that stress the cut: multi-byte ones (2, 3 and 4 bytes),
    /// the ones JSON escapes in two bytes or in six (`\u00XX`), and ones it
    /// leaves alone although they look special (DEL, U+2028).
    fn any_char() -> impl Strategy<Value = char> {
        prop_oneof![
            4 => proptest::char::range('a', 'z'),
            1 => proptest::sample::select(vec![
                'é', '€', '😀', '"', '\\', '\n', '\t', '\u{8}', '\u{c}', '\0',
                '\u{1}', '\u{1f}', '\u{7f}', '\u{2028}', '…',
            ]),
            1 => any::<char>(),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// For any output, the exported attribute is valid JSON of at most
        /// the cap, holding the output whole or a prefix of it marked cut,
        /// and a cut keeps as much as fits: one more character would not.
        #[test]
        fn an_exported_message_never_exceeds_the_cap(
            chars in proptest::collection::vec(any_char(), 0..12_000),
            field in 0..CONTENT_FIELDS.len(),
        ) {
            let text: String = chars.into_iter().collect();
            let on = ContentPolicy { capture: true, redact: vec![] };
            let (key, _) = CONTENT_FIELDS[field];
            let v = on.value(key, &text).unwrap();
            prop_assert!(v.len() <= MAX_ATTRIBUTE_BYTES, "{} bytes", v.len());
            let json: serde_json::Value = serde_json::from_str(&v).unwrap();
            let part = if key == "gen_ai.system_instructions" {
                &json[0]
            } else {
                &json[0]["parts"][0]
            };
            let content = part["content"].as_str().unwrap();
            if content != text {
                let kept = content.strip_suffix(TRUNCATED).unwrap();
                prop_assert!(text.starts_with(kept));
                let next = text[kept.len()..].chars().next().unwrap();
                prop_assert!(v.len() + char_escaped_len(next) > MAX_ATTRIBUTE_BYTES);
            }
            let plain = cap(&text);
            prop_assert!(plain.len() <= MAX_ATTRIBUTE_BYTES);
            prop_assert!(text.starts_with(plain.strip_suffix(TRUNCATED).unwrap_or(&plain)));
        }

        /// The escape table agrees with serde_json for every character.
        #[test]
        fn the_escape_table_is_serde_jsons(c in any_char()) {
            let written = serde_json::to_string(&c.to_string()).unwrap();
            prop_assert_eq!(char_escaped_len(c), written.len() - 2);
        }
    }
}
