//! A map's items read as written: spans of a JSON text, the RFC 6901
//! pointer walked over them, and an item's text cut from its span.
//!
//! ## Why spans, not a parsed value
//!
//! A `type: json` variable is inserted as given: its text is only checked
//! to parse (`serde::de::IgnoredAny`), never parsed into a value and
//! written back. An item is a part of such a text (or of a dependency's
//! JSON output), and keeps it the same way: the text is checked to parse
//! with `IgnoredAny`, then the item is the slice of the source it spans.
//! Parsed into a `serde_json::Value` and printed again, a number went
//! through an `f64` (`1.50` became `1.5`, `1e3` became `1000.0`, the id
//! `100000000000000000000001` became `1.0000000000000001e+23`), and an
//! object's keys came back sorted with its escapes rewritten.
//!
//! The walker trusts its input: every function here takes a text
//! `IgnoredAny` accepted, so a value's end is found by its first byte and
//! the brackets and quotes that follow, without a second validation.
//! Nothing recurses, so a deep text costs no stack.

/// A value's bytes in the source: `source[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn of<'s>(&self, source: &'s str) -> &'s str {
        &source[self.start..self.end]
    }
}

/// What a JSON value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Object,
    Array,
    String,
    Boolean,
    Null,
    Number,
}

impl Kind {
    /// The kind of the value `text` starts with, by its first byte.
    pub fn of(text: &str) -> Kind {
        match text.as_bytes().first() {
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b'"') => Kind::String,
            Some(b't' | b'f') => Kind::Boolean,
            Some(b'n') => Kind::Null,
            _ => Kind::Number,
        }
    }

    /// For messages: `an object`, `a string`, ….
    pub fn name(self) -> &'static str {
        match self {
            Kind::Object => "an object",
            Kind::Array => "an array",
            Kind::String => "a string",
            Kind::Boolean => "a boolean",
            Kind::Null => "null",
            Kind::Number => "a number",
        }
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_space(s: &[u8], mut at: usize) -> usize {
    while at < s.len() && is_space(s[at]) {
        at += 1;
    }
    at
}

/// The end of the string whose opening quote is at `at`: past its
/// closing quote.
fn string_end(s: &[u8], mut at: usize) -> usize {
    at += 1;
    while at < s.len() {
        match s[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    s.len()
}

/// The end of the value that starts at `at` (no space before it).
fn value_end(s: &[u8], at: usize) -> usize {
    match s.get(at) {
        Some(b'"') => string_end(s, at),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while i < s.len() {
                match s[i] {
                    b'"' => {
                        i = string_end(s, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            s.len()
        }
        _ => {
            let mut i = at;
            while i < s.len() && !is_space(s[i]) && !matches!(s[i], b',' | b']' | b'}') {
                i += 1;
            }
            i
        }
    }
}

/// The whole text's one value.
pub(super) fn root(source: &str) -> Span {
    let s = source.as_bytes();
    let start = skip_space(s, 0);
    Span {
        start,
        end: value_end(s, start),
    }
}

/// The children of the array or object at `span`, in order: for an
/// object each member's key (the string's span, quotes included) and
/// value, for an array each element with no key. Empty for a scalar.
pub(super) fn children(source: &str, span: Span) -> Vec<(Option<Span>, Span)> {
    let s = source.as_bytes();
    let object = match s.get(span.start) {
        Some(b'{') => true,
        Some(b'[') => false,
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    let mut at = skip_space(s, span.start + 1);
    while at < span.end && !matches!(s[at], b']' | b'}') {
        let key = object.then(|| {
            let key = Span {
                start: at,
                end: string_end(s, at),
            };
            // Past the key, its space and the colon.
            at = skip_space(s, skip_space(s, key.end) + 1);
            key
        });
        let value = Span {
            start: at,
            end: value_end(s, at),
        };
        out.push((key, value));
        at = skip_space(s, value.end);
        if s.get(at) == Some(&b',') {
            at = skip_space(s, at + 1);
        }
    }
    out
}

/// The value RFC 6901 pointer `pointer` (empty, or starting with `/`)
/// reaches from `span`, or `None`. As in `serde_json::Value::pointer`: a
/// token is unescaped `~1` → `/` then `~0` → `~`; an array index is
/// decimal without a sign or leading zeros; an object with a key written
/// twice answers with the last one, as a parsed value keeps it.
pub(super) fn pointer(source: &str, span: Span, pointer: &str) -> Option<Span> {
    let mut at = span;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let children = children(source, at);
        at = match source.as_bytes().get(at.start) {
            Some(b'[') => {
                let canonical =
                    !token.starts_with('+') && (token == "0" || !token.starts_with('0'));
                let index: usize = token.parse().ok().filter(|_| canonical)?;
                children.get(index)?.1
            }
            Some(b'{') => {
                children
                    .iter()
                    .rev()
                    .find(|(k, _)| {
                        k.and_then(|k| serde_json::from_str::<String>(k.of(source)).ok())
                            .is_some_and(|k| k == token)
                    })?
                    .1
            }
            _ => return None,
        };
    }
    Some(at)
}

/// An object's text without the space between its tokens: every byte
/// outside its strings that is JSON white space is left out, and nothing
/// else changes (keys in their order, numbers and escapes as written).
pub(super) fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c.is_ascii() && is_space(c as u8) {
            continue;
        }
        out.push(c);
    }
    out
}
