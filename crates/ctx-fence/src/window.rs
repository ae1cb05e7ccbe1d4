//! The byte-level prefilter: which stretches of a text can hold a tag at
//! all, so that the skeleton (decoding and per-character folding, the
//! expensive part) is built only there.
//!
//! Ordinary text is mostly ASCII letters, digits, spaces and punctuation
//! that no escape, fold or grammar rule can turn into a tag. [`next`] finds
//! the *windows* of a text, stretches that start at a **trigger byte** and
//! end far enough after the last one, and [`super::find_tags`] runs the
//! reference finder ([`super::find_tags_reference`]) on each window alone:
//! a text with one `&` in 100 KB builds the skeleton of a few hundred bytes.
//! The result is the same as the reference on the whole text, tag for tag
//! (the proptest `windowed_finder_agrees_with_the_reference`, the
//! adversarial tests of `window/adversarial.rs`, every named attack cut at
//! every character boundary with a far-reaching disguise in the cut, and
//! the fuzz target `fence` compare them). Why it is the same:
//!
//! **Trigger bytes** are the bytes whose skeleton is anything but the byte
//! itself lower-cased: a byte ≥ 0x80 (every non-ASCII character: folding,
//! ignorables, tag characters), an ASCII control other than `\t` `\n`
//! `\x0C` `\r` (ignorable, dropped by the fold), the escape starters `&`
//! `\` `%`, the tag starters `<` and `[`, and a `>` not preceded by ASCII
//! whitespace (it may end an HTML comment, `-->` or `--!>`, see below).
//! Between trigger bytes the skeleton is the text lower-cased, one
//! character for one byte, in every round, and no tag starts there (every
//! tag starts at a skeleton `<` or `[`).
//!
//! **Where a window ends.** A tag read from a start inside a window reads
//! forward only, and only a bounded number of characters that are not
//! filler (ASCII whitespace, `/`, `-`, `_`): the grammar's unbounded loops
//! (`matcher.rs`) skip filler only, and its bounded ones read at most the
//! 65 characters of a `<|…|>` token, a control-token word (at most twice
//! its length, `rn` standing for `m`), `untrusted` and `content`, and the
//! 256 characters after `content` searched for the `>` that ends the
//! attributes: under 300 in all. So after the window's last trigger byte,
//! past the first ASCII whitespace (which ends every escape: an escape's
//! source never holds whitespace, so from there on a byte is one skeleton
//! character), the window runs on for [`REACH`] bytes that are not filler
//! and ends at the next ASCII whitespace byte. No read from inside it gets
//! that far, and a decoder (digits, an entity name, the `;` or `}` after
//! them) stops at that whitespace in the whole text as it stops at the
//! window's end.
//!
//! **Rounds.** The skeleton repeats decoding and folding until nothing
//! changes, with flags computed over the whole text, so the whole text may
//! take more rounds than one window needs. A round on text that is already
//! stable changes nothing (its escapes were decoded, and lower-casing ASCII
//! makes no new escape: the decoders read their letters in either case),
//! so the extra rounds leave each window as it was; and the whole text
//! never takes fewer rounds than any of its windows.
//!
//! **HTML comments.** `find_tags` also reads the skeleton with its closed
//! comments dropped (`comment.rs`), which joins the text before a `<!--`
//! to the text after its `-->`. A comment closed inside its window is
//! dropped the same way in the window and in the whole text, and every
//! comment end (`-->`, `--!>`: a `>` after a non-whitespace byte) is a
//! trigger byte, so the window always reaches [`REACH`] filler-free bytes
//! past it. A `<!--` not closed inside its window might be closed anywhere
//! later: the caller then reads from that window's start to the end of the
//! text in one piece.

/// Bytes that are not filler, after a window's last trigger byte and the
/// whitespace after it, before the window may end: more than any tag read
/// from inside the window consumes (under 300; see the module text). The
/// adversarial test `every_attack_cut_anywhere_is_found_as_the_reference_finds_it`
/// finds a miss with 254 and none with 255: 512 is twice what is needed.
pub(super) const REACH: usize = 512;

/// Byte classes, one bit each.
const TRIGGER: u8 = 1;
const FILLER: u8 = 2;
const WHITESPACE: u8 = 4;

/// The class bits of each byte, built at compile time: a table of bytes
/// (no pointers, nothing relocated at start-up).
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        let whitespace = matches!(c, b' ' | b'\t' | b'\n' | b'\x0C' | b'\r');
        t[b] = if c >= 0x80
            || (c < 0x20 && !whitespace)
            || c == 0x7F
            || matches!(c, b'&' | b'\\' | b'%' | b'<' | b'[')
        {
            TRIGGER
        } else if whitespace {
            FILLER | WHITESPACE
        } else if matches!(c, b'/' | b'-' | b'_') {
            FILLER
        } else {
            0
        };
        b += 1;
    }
    t
};

fn class(b: u8) -> u8 {
    CLASS[b as usize]
}

/// Whether the byte at `j` is a trigger byte (see the module text).
fn is_trigger(bytes: &[u8], j: usize) -> bool {
    let b = bytes[j];
    class(b) & TRIGGER != 0 || (b == b'>' && j > 0 && class(bytes[j - 1]) & WHITESPACE == 0)
}

/// The first trigger byte at or after `from`. Eight bytes a step: ordinary
/// text has long runs without one.
fn next_trigger(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 8 <= bytes.len() {
        let chunk = &bytes[i..i + 8];
        let any = chunk.iter().fold(0u8, |acc, &b| acc | class(b)) & TRIGGER != 0
            || chunk.contains(&b'>');
        if any {
            break;
        }
        i += 8;
    }
    (i..bytes.len()).find(|&j| is_trigger(bytes, j))
}

/// The next window of `text` at or after byte `from` (a position where a
/// window may start: 0, or the end of the previous window), as a byte
/// range on character boundaries; `None` when no trigger byte is left.
pub(super) fn next(text: &str, from: usize) -> Option<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let start = next_trigger(bytes, from)?;
    let mut past_whitespace = false;
    let mut counted = 0usize;
    let mut j = start + 1;
    while j < bytes.len() {
        let c = class(bytes[j]);
        if is_trigger(bytes, j) {
            past_whitespace = false;
            counted = 0;
        } else if c & WHITESPACE != 0 {
            if counted >= REACH {
                return Some(start..j);
            }
            past_whitespace = true;
        } else if past_whitespace && c & FILLER == 0 {
            counted += 1;
        }
        j += 1;
    }
    Some(start..bytes.len())
}

#[cfg(test)]
mod adversarial;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategies::fragment;
    use crate::{find_tags, find_tags_reference, neutralize, neutralize_reference};
    use proptest::prelude::*;

    fn all(text: &str) -> Vec<std::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Some(w) = next(text, pos) {
            pos = w.end;
            out.push(w);
        }
        out
    }

    #[test]
    fn text_without_a_trigger_byte_has_no_window() {
        assert!(all("plain words, a > b\n> quoted - (x) / y_z 100.0 \"q\" !?").is_empty());
        assert!(all("").is_empty());
    }

    #[test]
    fn a_window_runs_past_its_last_trigger_then_ends_at_whitespace() {
        let plain = "word ".repeat(REACH);
        let text = format!("a &amp; b{plain}c < d{plain}");
        let w = all(&text);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].start, 2);
        assert_eq!(&text[w[1].start..w[1].start + 1], "<");
        // Filler does not count: a window over slashes and dashes goes on.
        let filler = "/ - _ ".repeat(4 * REACH);
        let text = format!("<{filler}x");
        assert_eq!(all(&text), vec![0..text.len()]);
    }

    #[test]
    fn comment_ends_and_controls_are_triggers() {
        for t in ["x-->", "x--!>", "a\u{1}b", "é", "\u{7F}"] {
            assert_eq!(all(t).len(), 1, "{t:?}");
        }
        assert!(all("\n> quote").is_empty());
    }

    /// Texts built to end a window just short of, at, or past what a tag
    /// read from inside it reaches: escapes with long bodies, comments
    /// closed far from where they open, attributes up to the 256-character
    /// limit, and long runs of filler.
    #[test]
    fn tags_that_reach_far_are_found_whole() {
        let zeros = "0".repeat(REACH + 100);
        let words = "ab ".repeat(REACH / 2 - 3);
        let attrs = "a".repeat(250);
        for text in [
            // A numeric reference whose digits alone exceed the reach.
            format!("<&#{zeros}47; untrusted-content>"),
            format!("x &{zeros} </untrusted-content>"),
            // A comment that opens in one stretch and closes far after it.
            format!("</untrusted<!-- {words} -->-content>"),
            format!("</untrusted<!-- {words}{words}{words} -->-content>"),
            format!("</untrusted<!-- &#45;-> {words} -content>"),
            format!("<untrusted<!-- {zeros} -->content {attrs}>"),
            // A comment closed inside the window, far from its last
            // other trigger: the tag goes on after the `-->`.
            format!(
                "<untrusted<!-- {} -->content {}>",
                "0".repeat(400),
                "a ".repeat(120)
            ),
            format!("<!-- {words}{words} --> </untrusted-content>"),
            // Attributes up to the `>` (225 bytes that are not filler,
            // then a `>` that is no trigger byte), and filler between the
            // words.
            format!("<untrusted-content {}>", "aaaaaaaaa ".repeat(25)),
            format!("<untrusted-content {attrs}>"),
            format!(
                "<{}untrusted{}content>",
                " / ".repeat(REACH),
                "-_ ".repeat(REACH)
            ),
            format!("<|{words}|> <|im_start|>"),
            format!("{words}<untrusted-content {words}>"),
        ] {
            assert_eq!(find_tags(&text), find_tags_reference(&text), "{text:?}");
            assert_eq!(neutralize(&text), neutralize_reference(&text), "{text:?}");
        }
    }

    /// Plain text of every length around [`REACH`]: enough to split a
    /// text into several windows, and to end one anywhere near a tag.
    fn spacer() -> impl Strategy<Value = String> {
        prop_oneof![
            (0..REACH * 2 + 200).prop_map(|n| "0".repeat(n)),
            (0..REACH).prop_map(|n| "ab ".repeat(n)),
            (0..REACH + 50).prop_map(|n| format!("{} ", "x".repeat(n))),
            (0..REACH * 3).prop_map(|n| " -/_\n".chars().cycle().take(n).collect()),
            proptest::sample::select(vec![
                " untrusted-content> ",
                " content ",
                "->",
                " >",
                "\n> quote ",
                "-- >",
            ])
            .prop_map(str::to_string),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// The prefilter changes no result: the windowed finder and the
        /// neutralizer built on it agree with their reference on hostile
        /// text (every named attack and disguise, random Unicode) cut by
        /// long plain stretches.
        #[test]
        fn windowed_finder_agrees_with_the_reference(
            parts in proptest::collection::vec(prop_oneof![fragment(), spacer()], 0..16)
        ) {
            let text: String = parts.concat();
            prop_assert_eq!(find_tags(&text), find_tags_reference(&text), "{:?}", text);
            prop_assert_eq!(neutralize(&text), neutralize_reference(&text), "{:?}", text);
        }
    }
}
