//! Template syntax: `{{NAME}}` placeholders, front matter, line lookup.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;

use super::*;

/// The placeholder the historical digest fills, and the placeholder name
/// rule: the plan model's, shared with a plan's `variables:`.
pub use ctx_model::variables::{HISTORICAL_CONTEXT, is_valid_name};

/// A template error: bad front matter or a bad classes file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The front matter or classes file could not be read.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// How a template's fence tags are written in the rendered prompt, from
/// the front matter's `fence` key.
///
/// The default keeps the plain `<untrusted-content>` tags of the
/// originating design. `fence: nonce` opts into a random boundary: each
/// render draws a nonce, the template's fence tags carry it
/// (`<untrusted-content nonce="…">`, `</untrusted-content nonce="…">`) and
/// a preamble before the prompt says that only a closing tag with that
/// nonce ends a fence. Untrusted text cannot know the nonce, so even a
/// spelling of the closing tag that neutralization does not know would not
/// close the fence. See [`FenceNonce`](crate::fence::FenceNonce) and docs/security.md.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FenceStyle {
    /// `<untrusted-content>` … `</untrusted-content>`.
    #[default]
    Plain,
    /// Tags that carry a per-render nonce, announced in a preamble.
    Nonce,
}

/// 1-based line of byte `offset` in `text`, for one lookup. Scans from
/// the start: a caller with many offsets into the same text builds a
/// [`LineIndex`] once instead (a template with 100,000 placeholders took
/// 20 s when each one rescanned the file).
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .get(..offset.min(text.len()))
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
        + 1
}

/// The byte offset where each line of a text starts, so any offset's line
/// is a binary search: one pass over the text, then `O(log lines)` per
/// lookup.
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// Offsets just after each `\n`.
    starts: Vec<usize>,
}

impl LineIndex {
    /// Indexes `text`'s line breaks.
    pub fn new(text: &str) -> LineIndex {
        LineIndex {
            starts: text
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1)
                .collect(),
        }
    }

    /// 1-based line of byte `offset`; the same answer as [`line_of`].
    pub fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset) + 1
    }
}

/// One `{{NAME}}` in a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// The name between the braces.
    pub name: String,
    /// Byte range of `{{NAME}}` in the template source.
    pub range: Range<usize>,
    /// 1-based line in the template file.
    pub line: usize,
}

/// Something that looks like a placeholder but is not one (`{{ WEEK }}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedPlaceholder {
    /// The text as written.
    pub text: String,
    /// 1-based line.
    pub line: usize,
}

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    /// The file name, for messages.
    pub path: String,
    pub(super) source: String,
    pub(super) body: Range<usize>,
    /// Classes from the front matter.
    pub classes: Classes,
    /// The front matter's `fence` style.
    pub fence: FenceStyle,
    /// Every placeholder occurrence, in order.
    pub placeholders: Vec<Placeholder>,
    /// Every malformed placeholder, in order.
    pub malformed: Vec<MalformedPlaceholder>,
}

/// `{{NAME}}` at `i` (which starts with `{{`): the name's end.
fn valid_at(src: &str, i: usize) -> Option<usize> {
    let rest = src.get(i + 2..)?;
    let len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let name = &rest[..len];
    (is_valid_name(name) && rest[len..].starts_with("}}")).then_some(i + 2 + len + 2)
}

/// A placeholder gone wrong at `i`: its end.
fn malformed_at(src: &str, i: usize) -> Option<usize> {
    let rest = src.get(i + 2..)?;
    let ws1 = rest
        .bytes()
        .take_while(|b| *b == b' ' || *b == b'\t')
        .count();
    let word = rest[ws1..]
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        .count();
    if word == 0 {
        return None;
    }
    let after = &rest[ws1 + word..];
    let ws2 = after
        .bytes()
        .take_while(|b| *b == b' ' || *b == b'\t')
        .count();
    after[ws2..]
        .starts_with("}}")
        .then_some(i + 2 + ws1 + word + ws2 + 2)
}

impl Template {
    /// Parses `source`; `path` names the file in errors and reports.
    pub fn parse(source: &str, path: &str) -> Result<Template, TemplateError> {
        use ctx_history::markdown::{FrontMatterFormat, split_front_matter};
        let doc =
            split_front_matter(source, Path::new(path)).map_err(|e| TemplateError::Malformed {
                path: path.to_string(),
                line: 1,
                message: e.to_string(),
            })?;
        let bom = if source.starts_with('\u{feff}') { 3 } else { 0 };
        let (body, classes, fence) = match &doc.front_matter {
            Some(fm) if fm.format != FrontMatterFormat::Pelican => {
                let lists = parse_lists(
                    fm.raw,
                    path,
                    fm.first_line,
                    fm.format == FrontMatterFormat::Toml,
                )?;
                let fence = lists.fence.unwrap_or_default();
                (
                    doc.body_range.clone(),
                    Classes::from_lists(lists, path, fm.raw, fm.first_line)?,
                    fence,
                )
            }
            _ => (bom..source.len(), Classes::default(), FenceStyle::Plain),
        };
        Ok(Template::scan(source, path, body, classes, fence))
    }

    /// A template that is all body: no front matter is looked for, so a
    /// text that starts with `---` keeps it. A plan's task prompts are
    /// read this way (their classes come from the plan's `variables:`).
    pub fn parse_body(source: &str, path: &str) -> Template {
        Template::scan(
            source,
            path,
            0..source.len(),
            Classes::default(),
            FenceStyle::Plain,
        )
    }

    /// Finds the placeholders and malformed placeholders of `body`.
    fn scan(
        source: &str,
        path: &str,
        body: Range<usize>,
        classes: Classes,
        fence: FenceStyle,
    ) -> Template {
        let mut placeholders = Vec::new();
        let mut malformed = Vec::new();
        let lines = LineIndex::new(source);
        let bytes = source.as_bytes();
        let mut i = body.start;
        while i + 1 < body.end {
            if bytes[i] == b'{' && bytes[i + 1] == b'{' {
                if let Some(end) = valid_at(source, i) {
                    placeholders.push(Placeholder {
                        name: source[i + 2..end - 2].to_string(),
                        range: i..end,
                        line: lines.line(i),
                    });
                    i = end;
                    continue;
                }
                if let Some(end) = malformed_at(source, i) {
                    // `{{{X}}}`: the inner `{{X}}` is the placeholder.
                    if !(bytes.get(i + 2) == Some(&b'{') && valid_at(source, i + 1).is_some()) {
                        malformed.push(MalformedPlaceholder {
                            text: source[i..end].to_string(),
                            line: lines.line(i),
                        });
                        i = end;
                        continue;
                    }
                }
            }
            i += 1;
        }
        Template {
            path: path.to_string(),
            source: source.to_string(),
            body,
            classes,
            fence,
            placeholders,
            malformed,
        }
    }

    /// The template without its front matter (and byte-order mark).
    pub fn body(&self) -> &str {
        &self.source[self.body.clone()]
    }

    /// The whole file as read.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The distinct placeholder names, sorted.
    pub fn names(&self) -> BTreeSet<&str> {
        self.placeholders.iter().map(|p| p.name.as_str()).collect()
    }

    /// A placeholder's class: the front matter's, else `file`'s, else the
    /// default (`HISTORICAL_CONTEXT` untrusted). The second value is true
    /// when the two sources disagree (the class is then untrusted).
    pub fn class_of(&self, name: &str, file: &Classes) -> (Option<Class>, bool) {
        match (self.classes.get(name), file.get(name)) {
            (Some(a), Some(b)) if a != b => (Some(Class::Untrusted), true),
            (Some(a), _) | (None, Some(a)) => (Some(a), false),
            (None, None) if name == HISTORICAL_CONTEXT => (Some(Class::Untrusted), false),
            (None, None) => (None, false),
        }
    }
}
