//! Shortening one dependency output by its `summarize_strategy`, in
//! characters, before the token cap is looked at.

use ctx_model::SummarizeStrategy;

use super::ELLIPSIS;

/// Shortens a dependency output by `strategy` when it is longer than
/// `max_output_length` characters (`None` = unlimited: never shortened).
///
/// * `truncate`: the design's rule. Over the limit, the first half of the
///   limit is kept (cut on a character boundary, ending at the last
///   whitespace when there is one in the second half of the kept part) and
///   `...` appended.
/// * `extract_key_sections`: the markdown headings with the first
///   paragraph under each ([`extract_key_sections`]); when the output has
///   no headings, or the extract is still over the limit, the `truncate`
///   rule applies to what there is.
/// * `none`: as is.
/// * `llm`: the `truncate` rule. A model's summary replaces the output
///   before this function is reached ([`assemble_task_prompt`](super::assemble_task_prompt)); what
///   comes here is an output without one, and the summary call's failure
///   falls back to `truncate`.
///
/// ```
/// use ctx_model::SummarizeStrategy;
/// let long = "word ".repeat(10);
/// assert_eq!(ctx_prompt::shorten_output(&long, Some(20), SummarizeStrategy::Truncate), "word word...");
/// assert_eq!(ctx_prompt::shorten_output("short", Some(20), SummarizeStrategy::Truncate), "short");
/// ```
pub fn shorten_output(
    output: &str,
    max_output_length: Option<usize>,
    strategy: SummarizeStrategy,
) -> String {
    let Some(max) = max_output_length else {
        return output.to_string();
    };
    if output.chars().count() <= max {
        return output.to_string();
    }
    match strategy {
        SummarizeStrategy::None => output.to_string(),
        SummarizeStrategy::Truncate | SummarizeStrategy::Llm => truncate_rule(output, max),
        SummarizeStrategy::ExtractKeySections => {
            let extract = extract_key_sections(output);
            if extract.is_empty() {
                truncate_rule(output, max)
            } else if extract.chars().count() > max {
                truncate_rule(&extract, max)
            } else {
                extract
            }
        }
    }
}

/// The design's rule: the first `max / 2` characters, ended at whitespace
/// when possible, then `...`.
fn truncate_rule(text: &str, max: usize) -> String {
    let keep = max / 2;
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let mut cut = prefer_whitespace(text, end);
    cut = text[..cut].trim_end().len();
    let mut out = String::with_capacity(cut + ELLIPSIS.len());
    out.push_str(&text[..cut]);
    out.push_str(ELLIPSIS);
    out
}

/// `end` moved back to the last whitespace before it, when that whitespace
/// is in the second half of `text[..end]` (or exactly at `end`); else `end`.
pub(super) fn prefer_whitespace(text: &str, end: usize) -> usize {
    if end >= text.len() {
        return text.len();
    }
    if text[end..].starts_with(char::is_whitespace) {
        return end;
    }
    match text[..end].rfind(char::is_whitespace) {
        Some(ws) if ws * 2 >= end => ws,
        _ => end,
    }
}

/// The markdown headings of `text`, each with the first paragraph under
/// it, cut verbatim from the source and joined by blank lines. Headings
/// inside code blocks are not headings; setext headings are. Text with no
/// heading gives an empty string.
///
/// ```
/// let md = "# Plan\n\nFirst para.\n\nSecond para.\n\n## Risks\n\n- a list\n\nRisk para.\n";
/// assert_eq!(ctx_prompt::extract_key_sections(md), "# Plan\n\nFirst para.\n\n## Risks\n\nRisk para.");
/// ```
pub fn extract_key_sections(text: &str) -> String {
    use pulldown_cmark::{Event, Parser, Tag};
    // Headings come from ctx-history's extractor (the one the digest uses),
    // so "what is a heading" has one answer in the whole toolkit.
    let heads: Vec<_> = ctx_history::markdown::headings(text)
        .into_iter()
        .filter(|h| !h.nested)
        .collect();
    let mut pieces: Vec<&str> = Vec::new();
    for (i, h) in heads.iter().enumerate() {
        if let Some(s) = text.get(h.range.clone()) {
            pieces.push(s.trim_end());
        }
        let end = heads.get(i + 1).map_or(text.len(), |n| n.range.start);
        let Some(under) = text.get(h.range.end..end.max(h.range.end)) else {
            continue;
        };
        let mut depth = 0usize;
        for (event, range) in Parser::new(under).into_offset_iter() {
            match event {
                Event::Start(Tag::Paragraph) if depth == 0 => {
                    if let Some(p) = under.get(range) {
                        pieces.push(p.trim_end());
                    }
                    break;
                }
                Event::Start(_) => depth += 1,
                Event::End(_) => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    pieces.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_rule_matches_the_design() {
        let text = "x".repeat(2001);
        let out = shorten_output(&text, Some(2000), SummarizeStrategy::Truncate);
        assert_eq!(out, format!("{}...", "x".repeat(1000)));
        let exact = "x".repeat(2000);
        assert_eq!(
            shorten_output(&exact, Some(2000), SummarizeStrategy::Truncate),
            exact
        );
        assert_eq!(
            shorten_output(&text, None, SummarizeStrategy::Truncate),
            text
        );
        assert_eq!(
            shorten_output(&text, Some(10), SummarizeStrategy::None),
            text
        );
        // Char boundaries, not bytes.
        let wide = "é".repeat(30);
        assert_eq!(
            shorten_output(&wide, Some(20), SummarizeStrategy::Truncate),
            format!("{}...", "é".repeat(10))
        );
        // Whitespace preferred when it is in the second half of the kept part.
        let words = "alpha beta gamma delta epsilon zeta eta theta";
        assert_eq!(
            shorten_output(words, Some(30), SummarizeStrategy::Truncate),
            "alpha beta..."
        );
    }

    #[test]
    fn extract_key_sections_strategy() {
        let md = "# Title\n\nIntro para that is long enough.\n\nMore text here.\n\n```\n# not a heading\n```\n\nSetext\n------\n\nUnder setext.\n\n## Empty\n## Last\nLast para.\n";
        let ex = extract_key_sections(md);
        assert_eq!(
            ex,
            "# Title\n\nIntro para that is long enough.\n\nSetext\n------\n\nUnder setext.\n\n## Empty\n\n## Last\n\nLast para."
        );
        let out = shorten_output(md, Some(60), SummarizeStrategy::ExtractKeySections);
        assert!(out.ends_with("...") && out.chars().count() <= 33, "{out}");
        let plain = "no headings at all ".repeat(10);
        assert_eq!(
            shorten_output(&plain, Some(40), SummarizeStrategy::ExtractKeySections),
            shorten_output(&plain, Some(40), SummarizeStrategy::Truncate)
        );
    }
}
