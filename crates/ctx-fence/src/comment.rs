//! HTML comments, which a renderer drops: `</untrusted<!-- x -->-content>`
//! shows as the closing tag in any Markdown or HTML view.
//!
//! A comment is not removed from the skeleton itself: a tag *inside* a
//! comment (`<!-- </untrusted-content> -->`) is still a tag to a model,
//! which reads the raw text. [`super::find_tags`] therefore matches twice,
//! on the skeleton as a model reads it and on the skeleton with its
//! comments dropped ([`without_comments`]) as a renderer shows it, and
//! neutralizes what either reading finds.
//!
//! The comment syntax is HTML's (which CommonMark adopts): `<!--` up to the
//! first `-->` or `--!>`, and the empty comments `<!-->` and `<!--->`. An
//! unclosed `<!--` hides everything after it, so it cannot show a tag and
//! is left alone. Matching runs on the skeleton, so a comment spelled with
//! references or look-alikes (`&lt;!-- --&gt;`, `＜！－－`) counts too.

use super::SkeletonChar;

/// Whether the skeleton holds `pattern` at `i`.
fn holds(s: &[SkeletonChar], i: usize, pattern: &str) -> bool {
    (i..)
        .zip(pattern.chars())
        .all(|(k, p)| s.get(k).is_some_and(|c| c.ch == p))
}

/// The index after the comment that opens at `i` (an `<!--`), if it is
/// closed. `search` false looks only for the empty forms: the caller
/// already knows no `-->` or `--!>` follows.
fn comment_end(s: &[SkeletonChar], i: usize, search: bool) -> Option<usize> {
    let body = i + 4;
    // `<!-->` and `<!--->` end at once.
    for empty in [">", "->"] {
        if holds(s, body, empty) {
            return Some(body + empty.len());
        }
    }
    if !search {
        return None;
    }
    (body..s.len()).find_map(|k| {
        if holds(s, k, "-->") {
            Some(k + 3)
        } else if holds(s, k, "--!>") {
            Some(k + 4)
        } else {
            None
        }
    })
}

/// What [`without_comments`] makes of a skeleton.
pub(super) struct Comments {
    /// The skeleton with every closed HTML comment dropped, or `None` when
    /// it holds none.
    pub shown: Option<Vec<SkeletonChar>>,
    /// Whether it holds a `<!--` that is never closed (which hides the
    /// rest of the text from a renderer, and which text appended after it
    /// could close: `window.rs` reads on to the end of the text then).
    pub unclosed: bool,
}

/// `s` with every closed HTML comment dropped. Linear: comments do not
/// overlap, and once a `<!--` finds no end, no later one can, so the
/// search for an end is not repeated.
pub(super) fn without_comments(s: &[SkeletonChar]) -> Comments {
    let mut out: Option<Vec<SkeletonChar>> = None;
    let mut search = true;
    let mut i = 0;
    let mut copied = 0;
    while i < s.len() {
        let end = if holds(s, i, "<!--") {
            let end = comment_end(s, i, search);
            search &= end.is_some();
            end
        } else {
            None
        };
        match end {
            Some(end) => {
                let kept = out.get_or_insert_with(|| Vec::with_capacity(s.len()));
                kept.extend_from_slice(&s[copied..i]);
                copied = end;
                i = end;
            }
            None => i += 1,
        }
    }
    let shown = out.map(|mut kept| {
        kept.extend_from_slice(&s[copied..]);
        kept
    });
    Comments {
        shown,
        unclosed: !search,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(text: &str) -> Option<String> {
        without_comments(&SkeletonChar::each_of(text))
            .shown
            .map(|s| s.iter().map(|c| c.ch).collect())
    }

    #[test]
    fn closed_comments_are_dropped_and_keep_their_neighbours() {
        assert_eq!(strip("a<!-- x -->b<!---->c").as_deref(), Some("abc"));
        assert_eq!(strip("a<!-->b<!--->c").as_deref(), Some("abc"));
        assert_eq!(strip("a<!-- x --!>b").as_deref(), Some("ab"));
        // The first `-->` ends it, as in HTML.
        assert_eq!(strip("<!-- a --> b -->").as_deref(), Some(" b -->"));
    }

    #[test]
    fn an_unclosed_comment_is_reported() {
        let unclosed = |t: &str| without_comments(&SkeletonChar::each_of(t)).unclosed;
        assert!(unclosed("a <!-- b"));
        assert!(unclosed("<!-- a --> b <!-- c"));
        assert!(!unclosed("<!-- a --> b <!--> c"));
        assert!(!unclosed("no comment"));
    }

    #[test]
    fn text_without_a_closed_comment_is_none() {
        assert_eq!(strip("plain <b> text -->"), None);
        assert_eq!(strip("unclosed <!-- comment"), None);
        assert_eq!(strip("<!- not one -->"), None);
    }
}
