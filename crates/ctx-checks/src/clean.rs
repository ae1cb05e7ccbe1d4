//! An `output` block compiled and applied: the lines a task's output
//! loses before its checks, dependents and publishing see it
//! (docs/plan-format.md, "Cleaned outputs"; the block is ctx-model's
//! [`OutputCleaning`]).
//!
//! Here because this crate compiles the plan's patterns (with the same
//! linear-time engine and size limit as `regex` checks) and owns the one
//! definition of a wrapping code fence ([`fenced_body`]). Cleaning only
//! removes whole lines, so the text inside a fence and every line no
//! pattern matches are kept byte for byte.

use std::borrow::Cow;

use ctx_model::output_cleaning::OutputCleaning;
use regex::{Regex, RegexBuilder};

use crate::compile::REGEX_SIZE_LIMIT;
use crate::text::fenced_body;

/// An `output` block ready to apply.
#[derive(Debug, Clone)]
pub struct OutputCleaner {
    strip: Vec<Regex>,
    unwrap_fence: bool,
}

/// A `strip_lines` pattern that does not compile.
#[derive(Debug, thiserror::Error)]
#[error("output.strip_lines[{index}]: invalid pattern")]
pub struct CleaningError {
    /// The pattern's position in `strip_lines`, from 0.
    pub index: usize,
    /// The regex crate's error, with the position in the pattern.
    #[source]
    pub source: regex::Error,
}

impl CleaningError {
    /// The field at fault below the block, `strip_lines[2]`.
    pub fn field_path(&self) -> String {
        format!("strip_lines[{}]", self.index)
    }
}

impl OutputCleaner {
    /// Compiles `block`'s patterns.
    pub fn compile(block: &OutputCleaning) -> Result<OutputCleaner, CleaningError> {
        let strip = block
            .strip_lines
            .iter()
            .enumerate()
            .map(|(index, pattern)| {
                RegexBuilder::new(pattern)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|source| CleaningError { index, source })
            })
            .collect::<Result<_, _>>()?;
        Ok(OutputCleaner {
            strip,
            unwrap_fence: block.unwrap_fence,
        })
    }

    /// `text` less every line a `strip_lines` pattern matches (matched
    /// without its line break), then less the one code fence that wraps
    /// the rest, when `unwrap_fence`. Borrowed when nothing was removed.
    pub fn clean<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let stripped = self.strip_lines(text);
        if !self.unwrap_fence {
            return stripped;
        }
        match unwrap_fence(&stripped) {
            Some(inner) => Cow::Owned(inner),
            None => stripped,
        }
    }

    fn strip_lines<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.strip.is_empty() {
            return Cow::Borrowed(text);
        }
        let strip = |line: &str| {
            let bare = line.strip_suffix('\n').unwrap_or(line);
            let bare = bare.strip_suffix('\r').unwrap_or(bare);
            self.strip.iter().any(|r| r.is_match(bare))
        };
        if !text.split_inclusive('\n').any(strip) {
            return Cow::Borrowed(text);
        }
        Cow::Owned(text.split_inclusive('\n').filter(|l| !strip(l)).collect())
    }
}

/// The lines inside the one fence that wraps `text`, each with its line
/// break (the last one's too), or `None` when no fence wraps it.
fn unwrap_fence(text: &str) -> Option<String> {
    let body = fenced_body(text)?;
    let mut inner = text[body.clone()].to_string();
    if !inner.is_empty() {
        // The break that ended the body's last line, before the closing
        // line, belongs to the body.
        let after = &text[body.end..];
        inner.push_str(if after.starts_with("\r\n") {
            "\r\n"
        } else {
            "\n"
        });
    }
    Some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaner(strip: &[&str], unwrap_fence: bool) -> OutputCleaner {
        OutputCleaner::compile(&OutputCleaning {
            strip_lines: strip.iter().map(|s| s.to_string()).collect(),
            unwrap_fence,
        })
        .unwrap()
    }

    #[test]
    fn status_lines_go_then_the_fence() {
        let raw = "✅ The report is done.\n```markdown\n# Week 35\n\nAll fine.\n```\nQuality score: 9/10\n";
        let c = cleaner(&["^✅", "^Quality score:"], true);
        assert_eq!(c.clean(raw), "# Week 35\n\nAll fine.\n");
        // Without unwrap_fence the fence stays.
        let c = cleaner(&["^✅", "^Quality score:"], false);
        assert_eq!(c.clean(raw), "```markdown\n# Week 35\n\nAll fine.\n```\n");
    }

    #[test]
    fn nothing_removed_is_borrowed_and_prose_around_a_fence_keeps_it() {
        let c = cleaner(&["^DONE$"], true);
        let text = "Here it is:\n```\ncode\n```\n";
        assert!(matches!(c.clean(text), Cow::Borrowed(t) if t == text));
        assert_eq!(c.clean("a\nDONE\nb"), "a\nb");
        assert_eq!(c.clean("```\n```"), "");
        assert_eq!(c.clean("~~~~ md\nx\r\n~~~~\r\n"), "x\r\n");
    }

    #[test]
    fn a_bad_pattern_names_its_index() {
        let e = OutputCleaner::compile(&OutputCleaning {
            strip_lines: vec!["^ok".into(), "(open".into()],
            unwrap_fence: false,
        })
        .unwrap_err();
        assert_eq!(e.index, 1);
        assert_eq!(e.field_path(), "strip_lines[1]");
        assert!(e.source.to_string().contains("unclosed group"));
    }
}
