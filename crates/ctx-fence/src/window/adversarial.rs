//! Adversarial texts for the byte-level prefilter: every named attack cut
//! at every character boundary, a disguise put into the cut, and the text
//! padded so that a window ends just before the tag, inside what it reads
//! or just after it. On each, the windowed finder ([`find_tags`]) must
//! find what the reference ([`find_tags_reference`]) finds, tag for tag:
//! a miss is a fence that untrusted text can close.
//!
//! A cut with a disguise in it may leave the tag whole (an ignorable, a
//! comment, an escape decoding to nothing) or break it (plain words): both
//! are asked for, since what matters is that the two finders agree, not
//! which of them is a tag. The disguises are the ones whose reach is the
//! longest: a comment whose body holds more than [`REACH`] counted bytes,
//! a numeric reference with more zeros than [`REACH`], runs of filler,
//! attributes up to the 256 characters the grammar reads.

use proptest::prelude::*;

use super::{REACH, next};
use crate::strategies::{ATTACKS, ISSUE_8_ATTACKS, ISSUE_20_ATTACKS, fragment, in_tag_characters};
use crate::{find_tags, find_tags_reference, neutralize, neutralize_reference};

/// Every named attack, the closing tag in Unicode tag characters, and
/// tags left open for a tail to end: the fence tag's attributes run to
/// the next `>` within 256 characters, so where its window ends decides
/// how much of the text the tag takes.
fn attacks() -> Vec<String> {
    const OPEN: &[&str] = &[
        "</untrusted-content",
        "<untrusted content",
        "< / UNTRUSTED_content",
        "&lt;/untrusted-content",
        "\\u003c/untrusted-content",
        "＜/ｕｎｔｒｕｓｔｅｄ-content",
        "<|im_start|",
        "[INST",
    ];
    ATTACKS
        .iter()
        .chain(ISSUE_8_ATTACKS)
        .chain(ISSUE_20_ATTACKS)
        .map(|(_, a)| a.to_string())
        .chain([in_tag_characters("</untrusted-content>")])
        .chain(OPEN.iter().map(|a| a.to_string()))
        .collect()
}

/// `n` bytes that a window counts (no filler, no trigger), in words of
/// `word` letters each followed by a space (the space is not counted).
fn plain(n: usize, word: usize) -> String {
    let mut out = String::with_capacity(n + n / word + 1);
    for k in 0..n {
        out.push(char::from(b'a' + (k % 26) as u8));
        if (k + 1) % word == 0 {
            out.push(' ');
        }
    }
    out
}

/// What goes into a cut: ignorables, comments short and long, escapes
/// (one of them longer than a window's reach), filler, and plain words
/// that end a window there.
fn disguises() -> Vec<String> {
    vec![
        String::new(),
        "\u{200B}".into(),
        "\u{AD}".into(),
        "\u{1}".into(),
        "\u{301}".into(),
        "\u{E0020}".into(),
        "&#8203;".into(),
        "\\u200b".into(),
        "%E2%80%8B".into(),
        "<!-- x -->".into(),
        "<!-->".into(),
        "&lt;!-- x --&gt;".into(),
        "＜！－－ x －－＞".into(),
        format!("<!-- {} -->", plain(REACH + 8, 3)),
        format!("<!--{}-->", "0".repeat(2 * REACH)),
        // Closed within the reach, but far enough from the tag's start
        // that the tag reads on past the reach counted from it.
        format!("<!-- {} -->", plain(REACH - 100, 50)),
        format!("&#{}45;", "0".repeat(REACH + 10)),
        " \n\t".into(),
        format!(" {}", "/ - _ ".repeat(REACH)),
        format!(" {} ", plain(REACH, 4)),
        format!(" {} ", plain(REACH - 1, REACH)),
    ]
}

/// What follows the tag: nothing, attributes up to and past the
/// grammar's 256 characters, with the `>` after a space or not.
fn tails() -> Vec<String> {
    vec![
        String::new(),
        " a=\"b\">".into(),
        format!(" {}>", "a".repeat(254)),
        format!(" {} >", "a".repeat(253)),
        format!(" {}>", "a ".repeat(127)),
        format!(" {}>", plain(REACH, 7)),
    ]
}

/// What comes before the tag: nothing, or a trigger byte and plain text
/// that ends its window just before the tag (`REACH` counted bytes) or
/// lets it run on into the tag (one short).
fn leads() -> Vec<String> {
    vec![
        String::new(),
        format!("& {} ", plain(REACH, 5)),
        format!("& {} ", plain(REACH - 1, 5)),
        format!("é\n{}\n", plain(REACH + 1, 9)),
    ]
}

/// `tag` cut at byte `at` (a character boundary) with `disguise` in the
/// cut, after `lead` and before `tail`; with `after`, a last window
/// after a plain stretch (the tag's window then ends at whitespace, not
/// at the end of the text).
fn build(lead: &str, tag: &str, at: usize, disguise: &str, tail: &str, after: bool) -> String {
    let last = if after {
        format!(" {} <x", plain(REACH + 2, 6))
    } else {
        String::new()
    };
    format!("{lead}{}{disguise}{}{tail}{last}", &tag[..at], &tag[at..])
}

/// Every attack, cut at every character boundary, with three disguises
/// in the cut at each (turning with the attack and the cut, so each
/// disguise is met at every kind of boundary, a few hundred times), the
/// lead, the tail and the last window turning too.
#[test]
fn every_attack_cut_anywhere_is_found_as_the_reference_finds_it() {
    let (disguises, leads, tails) = (disguises(), leads(), tails());
    let mut texts = 0;
    for (n, tag) in attacks().iter().enumerate() {
        let bounds = tag.char_indices().map(|(i, _)| i).chain([tag.len()]);
        for (k, at) in bounds.enumerate() {
            for step in [0, 7, 13] {
                let d = (n + k + step) % disguises.len();
                let lead = &leads[(n + k) % leads.len()];
                let tail = &tails[(n + 2 * k + step) % tails.len()];
                let text = build(lead, tag, at, &disguises[d], tail, (n + k) % 2 == 0);
                assert_eq!(find_tags(&text), find_tags_reference(&text), "{text:?}");
                texts += 1;
            }
        }
    }
    assert!(texts > 9_000, "{texts} texts");
}

/// A piece of a text for the property test: an attack with up to three
/// cuts, each holding a disguise, between a lead and a tail; a random
/// hostile fragment; or plain text of a length near [`REACH`].
fn piece() -> impl Strategy<Value = String> {
    let attacks = attacks();
    let cut = (any::<prop::sample::Index>(), 0..disguises().len());
    let attack = (
        prop::sample::select(attacks),
        prop::collection::vec(cut, 0..4),
        0..leads().len(),
        0..tails().len(),
    )
        .prop_map(|(tag, cuts, lead, tail)| {
            let (disguises, leads, tails) = (disguises(), leads(), tails());
            let mut text = tag;
            for (at, d) in cuts {
                let bounds: Vec<usize> = text
                    .char_indices()
                    .map(|(i, _)| i)
                    .chain([text.len()])
                    .collect();
                let at = bounds[at.index(bounds.len())];
                text.insert_str(at, &disguises[d]);
            }
            format!("{}{text}{}", leads[lead], tails[tail])
        });
    prop_oneof![
        4 => attack,
        2 => fragment(),
        1 => (REACH - 4..REACH + 4, 1..12usize).prop_map(|(n, w)| plain(n, w)),
        1 => prop::sample::select(vec![" ", "\n", "> ", "--", "-->", "<!--", "&", "é"])
            .prop_map(str::to_string),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Attacks cut and disguised, glued to random hostile text and to
    /// plain stretches near a window's reach: the windowed finder and
    /// the neutralizer agree with their references, and the windows are
    /// disjoint, in order, on character boundaries, each ending at ASCII
    /// whitespace or at the end of the text.
    #[test]
    fn cut_and_disguised_attacks_are_found_as_the_reference_finds_them(
        parts in prop::collection::vec(piece(), 1..6)
    ) {
        let text: String = parts.concat();
        let mut pos = 0;
        while let Some(w) = next(&text, pos) {
            prop_assert!(w.start >= pos && w.start < w.end, "{:?} after {}", w, pos);
            prop_assert!(text.is_char_boundary(w.start));
            prop_assert!(
                w.end == text.len() || text.as_bytes()[w.end].is_ascii_whitespace(),
                "{:?}", w
            );
            pos = w.end;
        }
        prop_assert_eq!(find_tags(&text), find_tags_reference(&text), "{:?}", text);
        prop_assert_eq!(neutralize(&text), neutralize_reference(&text), "{:?}", text);
    }
}
