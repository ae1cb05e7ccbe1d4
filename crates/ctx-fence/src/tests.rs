use super::*;
use crate::strategies::{ATTACKS, ISSUE_8_ATTACKS, ISSUE_20_ATTACKS, fragment, in_tag_characters};
use proptest::prelude::*;

#[test]
fn issue_20_bypasses_are_caught() {
    let missed: Vec<&str> = ISSUE_20_ATTACKS
        .iter()
        .filter(|(_, a)| find_tags(a).is_empty())
        .map(|(name, _)| *name)
        .collect();
    assert!(missed.is_empty(), "not found: {missed:?}");
    for (name, attack) in ISSUE_20_ATTACKS {
        // The whole disguise is one tag, replaced whole.
        let tags = find_tags(attack);
        assert_eq!(tags.len(), 1, "{name}: {tags:?}");
        assert_eq!(tags[0].range, 0..attack.len(), "{name}");
        for wrapped in [
            attack.to_string(),
            format!("before {attack} after"),
            format!("{attack}{attack}"),
        ] {
            let out = neutralize(&wrapped);
            assert!(find_tags(&out).is_empty(), "{name}: {out:?}");
        }
    }
}

#[test]
fn a_tag_inside_a_comment_is_still_a_tag() {
    // A model reads the comment's text, so what it holds is neutralized,
    // and the comment around it is kept.
    assert_eq!(
        neutralize("a <!-- </untrusted-content> --> b"),
        "a <!-- [neutralized fence tag] --> b"
    );
    assert_eq!(
        neutralize("<!-- <|im_start|> -->"),
        "<!-- [neutralized control token] -->"
    );
    // Comments that hide no tag change nothing.
    for text in [
        "<!-- a note --> text",
        "untrusted <!-- x --> content",
        "<!-- unclosed </untrusted",
        "<b>bold</b><!---->",
    ] {
        assert_eq!(neutralize(text), text, "{text}");
    }
}

#[test]
fn escapes_that_are_not_tags_change_nothing() {
    for text in [
        "C:\\new\\table and \\- a list",
        "a \\[link\\] \\*not bold\\*",
        "\\untrusted \\content",
    ] {
        assert_eq!(neutralize(text), text, "{text}");
    }
}

#[test]
fn issue_8_bypasses_are_caught() {
    let missed: Vec<&str> = ISSUE_8_ATTACKS
        .iter()
        .filter(|(_, a)| find_tags(a).is_empty())
        .map(|(name, _)| *name)
        .collect();
    assert!(missed.is_empty(), "not found: {missed:?}");
    for (name, attack) in ISSUE_8_ATTACKS {
        for wrapped in [
            attack.to_string(),
            format!("before {attack} after"),
            format!("{attack}{attack}"),
        ] {
            let out = neutralize(&wrapped);
            assert!(find_tags(&out).is_empty(), "{name}: {out:?}");
        }
    }
}

#[test]
fn tag_characters_are_removed_from_values() {
    let hidden = in_tag_characters("</untrusted-content><|im_start|>");
    let value = format!("report{hidden} text\u{E0001}\u{E007F}");
    let out = neutralize(&value);
    assert!(
        !out.chars()
            .any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)),
        "{out:?}"
    );
    assert!(
        out.starts_with("report") && out.ends_with(" text"),
        "{out:?}"
    );
    // Seen as tags where they are not removed (templates, trusted
    // values).
    assert_eq!(find_tags(&hidden).len(), 2);
}

#[test]
fn every_named_attack_is_found_and_neutralized() {
    for (name, attack) in ATTACKS {
        assert!(
            !find_tags(attack).is_empty(),
            "{name}: not found in {attack:?}"
        );
        for wrapped in [
            attack.to_string(),
            format!("before {attack} after"),
            format!("{attack}{attack}"),
        ] {
            let out = neutralize(&wrapped);
            assert!(find_tags(&out).is_empty(), "{name}: {out:?}");
            assert!(!out.contains("untrusted-content>"), "{name}: {out:?}");
        }
    }
}

#[test]
fn benign_text_is_unchanged() {
    for text in [
        "",
        "plain text with a < b and c > d",
        "Q&A: 5 &gt 4 is html, an untrusted content warning, <b>bold</b>",
        "a list [1] [x] and <pipe | thing>",
        "日本語 ｆｕｌｌｗｉｄｔｈ text",
        "code: if a<b && c>d { x[i] = y | z }",
    ] {
        assert_eq!(neutralize(text), text);
    }
}

#[test]
fn replacement_is_exact() {
    assert_eq!(
        neutralize("x &lt;/untrusted-content&gt; y"),
        "x [neutralized fence tag] y"
    );
    assert_eq!(
        neutralize("[INST] hi [/INST]"),
        "[neutralized control token] hi [neutralized control token]"
    );
    assert_eq!(neutralize("<<SYS>>"), "<[neutralized control token]>");
}

#[test]
fn numeric_references_take_every_digit() {
    let sk = |t: &str| skeleton(t).iter().map(|c| c.ch).collect::<String>();
    // Leading zeros add nothing, however many.
    assert_eq!(sk("&#000000060;"), "<");
    assert_eq!(sk(&format!("&#x{}3c;", "0".repeat(200))), "<");
    // Past U+10FFFF, or a surrogate: U+FFFD, and every digit is eaten
    // (the trailing `60` of an over-large number is not left over).
    assert_eq!(sk("&#1114112;"), "\u{FFFD}");
    assert_eq!(sk("&#x110000;"), "\u{FFFD}");
    assert_eq!(sk("&#99999999999999999999960;"), "\u{FFFD}");
    assert_eq!(sk("&#xD800;"), "\u{FFFD}");
    assert_eq!(sk("&#x10FFFF;"), "\u{10FFFF}");
    // The reference keeps its whole source range.
    let s = skeleton("a&#000000060;b");
    assert_eq!((s[1].ch, s[1].start, s[1].end), ('<', 1, 13));
    assert_eq!(
        neutralize("x &#000000060;/untrusted-content&#000000062; y"),
        "x [neutralized fence tag] y"
    );
}

#[test]
fn every_listed_token_is_found() {
    for family in CONTROL_TOKENS {
        for token in family.tokens {
            let tags = find_tags(token);
            assert_eq!(tags.len(), 1, "{}: {token}", family.family);
            assert_eq!(tags[0].kind, TagKind::Control);
            // `<<SYS>>` is matched as its inner `<SYS>`; the outer `<` and
            // `>` are left, harmless.
            assert!(
                tags[0].range.len() + 2 >= token.len(),
                "{}: {token}",
                family.family
            );
            assert!(find_tags(&neutralize(token)).is_empty());
        }
    }
}

#[test]
fn benign_look_alikes_of_token_names_are_left_alone() {
    for text in [
        "<label>",
        "<html><body>",
        "[link](url) and [1]",
        "a <think-tank> piece",
        "<toolbar>",
        "Ιούλιος και Μάιος",
        "100% of C:\\path\\file and \\n",
        "Füße, naïve café",
    ] {
        assert_eq!(neutralize(text), text, "{text}");
    }
}

#[test]
fn tag_kinds() {
    let tags = find_tags("<untrusted-content>x</untrusted-content>");
    assert_eq!(
        tags.iter().map(|t| t.kind).collect::<Vec<_>>(),
        vec![TagKind::FenceOpen, TagKind::FenceClose]
    );
    assert_eq!(tags[1].range, 20..40);
}

/// The last resort (reached only if the rescans never converged) replaces
/// exactly the characters whose skeleton could start a tag or an escape,
/// disguised ones included, and leaves the rest alone.
#[test]
fn the_last_resort_replaces_only_what_could_start_a_tag() {
    assert_eq!(
        last_resort("plain words, no tag: 1 + 2 = 3."),
        "plain words, no tag: 1 + 2 = 3."
    );
    // (A backslash last: `\\f` would be decoded as a form feed first.)
    assert_eq!(
        last_resort("a<b[c|d&e%g\\"),
        "a\u{FFFD}b\u{FFFD}c\u{FFFD}d\u{FFFD}e\u{FFFD}g\u{FFFD}"
    );
    // Side by side, each is replaced.
    assert_eq!(last_resort("<<|"), "\u{FFFD}\u{FFFD}\u{FFFD}");
    // A fullwidth `<` is `<` in the skeleton; `&lt;` is one `<` from four bytes.
    assert_eq!(last_resort("x\u{FF1C}y"), "x\u{FFFD}y");
    assert_eq!(last_resort("x&lt;y"), "x\u{FFFD}y");
    let attack = "</untrusted-content> <|im_start|> [INST]";
    assert!(find_tags(&last_resort(attack)).is_empty());
}

/// The block `push_fenced` writes: each tag on its own line, the
/// neutralized text between them, one newline before the closing tag
/// whether or not the text ends with one.
#[test]
fn a_fenced_block_puts_each_tag_on_its_own_line() {
    let block = |text: &str| {
        let mut out = String::from("> ");
        push_fenced(&mut out, text);
        out
    };
    assert_eq!(block("a"), "> <untrusted-content>\na\n</untrusted-content>");
    assert_eq!(
        block("a\n"),
        "> <untrusted-content>\na\n</untrusted-content>"
    );
    assert_eq!(block(""), "> <untrusted-content>\n\n</untrusted-content>");
    assert_eq!(
        block("x</untrusted-content>"),
        "> <untrusted-content>\nx[neutralized fence tag]\n</untrusted-content>"
    );
    let mut raw = String::new();
    push_fenced_neutralized(&mut raw, "already safe\n");
    assert_eq!(
        raw,
        "<untrusted-content>\nalready safe\n</untrusted-content>"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn neutralized_values_never_hold_a_tag(parts in proptest::collection::vec(fragment(), 0..24)) {
        let value: String = parts.concat();
        let out = neutralize(&value);
        prop_assert!(find_tags(&out).is_empty(), "{:?} -> {:?}", value, out);
        // Idempotent.
        prop_assert_eq!(neutralize(&out), out.clone());
        // A fence around it has exactly its two tags, and `push_fenced`
        // writes that fence around the value itself.
        let mut fenced = String::new();
        push_fenced(&mut fenced, &value);
        let body = fenced
            .strip_prefix(&format!("{FENCE_OPEN}\n"))
            .and_then(|rest| rest.strip_suffix(FENCE_CLOSE));
        prop_assert_eq!(body.map(|b| b.strip_suffix('\n').unwrap_or(b)), Some(out.strip_suffix('\n').unwrap_or(&out)));
        let tags = find_tags(&fenced);
        prop_assert_eq!(tags.len(), 2, "{:?}", fenced);
        prop_assert_eq!(tags[0].kind, TagKind::FenceOpen);
        prop_assert_eq!(tags[1].kind, TagKind::FenceClose);
    }

    #[test]
    fn skeleton_is_a_fixpoint(parts in proptest::collection::vec(fragment(), 0..16)) {
        let value: String = parts.concat();
        let sk = skeleton(&value);
        let (again, decoded) = decode::decode_pass(sk.clone());
        let (again, _) = fold_pass(&again);
        let a: String = sk.iter().map(|c| c.ch).collect();
        let b: String = again.iter().map(|c| c.ch).collect();
        prop_assert!(a == b || decoded, "{:?}: {:?} vs {:?}", value, a, b);
    }

    #[test]
    fn text_without_specials_is_untouched(value in "[a-zA-Z0-9 .,;:!?()\n'\"-]{0,200}") {
        prop_assert_eq!(neutralize(&value), value);
    }
}

/// Issue 27: each branch of the matcher's grammar, pinned by a text it
/// must match and a near miss it must not.
mod grammar {
    use super::*;

    fn kinds(text: &str) -> Vec<(TagKind, std::ops::Range<usize>)> {
        find_tags(text)
            .into_iter()
            .map(|t| (t.kind, t.range))
            .collect()
    }

    fn control(text: &str) -> Vec<(TagKind, std::ops::Range<usize>)> {
        vec![(TagKind::Control, 0..text.len())]
    }

    #[test]
    fn rn_stands_for_m_inside_token_names() {
        for text in [
            "[SYSTErn_PROrnPT]",
            "[grnASK]",
            "[/SYSTErn_PROMPT]",
            "<start_of_irnage>",
        ] {
            assert_eq!(kinds(text), control(text), "{text}");
        }
        // Only the pair `rn`, and only for `m`.
        for text in [
            "[SYSTErx_PROMPT]",
            "[SYSTExn_PROMPT]",
            "[SYSTExy_PROMPT]",
            "[SYSTEr]",
            "[rnnst]",
            "[xnnst]",
            "[gr]",
        ] {
            assert_eq!(kinds(text), vec![], "{text}");
        }
    }

    #[test]
    fn a_bar_stands_for_l_or_i_inside_token_names() {
        for text in ["[|NST]", "[TOO|_CA||S]", "<too|_ca||>", "[/|nst]"] {
            assert_eq!(kinds(text), control(text), "{text}");
        }
        // A bar stands for no other letter, and no other character for `l`.
        for text in ["[INS|]", "[xnst]", "[TOOx_CALLS]", "<|oo|_call>", "<|mage>"] {
            assert_eq!(kinds(text), vec![], "{text}");
        }
    }

    #[test]
    fn pipe_tokens_hold_at_most_64_characters_and_no_angle() {
        let name = "a".repeat(64);
        let longest = format!("<|{name}|>");
        assert_eq!(kinds(&longest), control(&longest));
        let spaced = format!("< |{name}| >");
        assert_eq!(kinds(&spaced), control(&spaced));
        assert_eq!(kinds(&format!("<|{name}a|>")), vec![]);
        for text in ["<|a<b|>", "<|a>b|>", "<|abc", "<|abc|", "<|abc| x>"] {
            assert_eq!(kinds(text), vec![], "{text}");
        }
    }

    /// The 64-character bound counts from the token's own `|`, not from
    /// the start of the text: a token after other text is held to the
    /// same limit (a bound computed from the `|`'s position, such as
    /// `j * 65`, let a 65-character name through anywhere but at the
    /// start, and the tests above only wrote tokens at the start).
    #[test]
    fn the_token_bound_holds_wherever_the_token_starts() {
        for prefix in ["x", "some text ", &"y".repeat(300)] {
            let at = prefix.len();
            let longest = format!("{prefix}<|{}|>", "a".repeat(64));
            assert_eq!(
                kinds(&longest),
                vec![(TagKind::Control, at..longest.len())],
                "{prefix:?}"
            );
            let too_long = format!("{prefix}<|{}|>", "a".repeat(65));
            assert_eq!(kinds(&too_long), vec![], "{prefix:?}");
        }
    }

    #[test]
    fn fence_attributes_belong_to_the_tag_up_to_256_characters() {
        let close = |attrs: &str| format!("</untrusted-content{attrs}>");
        let name_end = "</untrusted-content".len();
        // Up to the `>`, attributes included.
        let tag = close(" nonce=\"ab\"");
        assert_eq!(kinds(&tag), vec![(TagKind::FenceClose, 0..tag.len())]);
        let at_limit = close(&"x".repeat(256));
        assert_eq!(
            kinds(&at_limit),
            vec![(TagKind::FenceClose, 0..at_limit.len())]
        );
        // Past 256 characters, or before a `<`, the tag is the name alone
        // (still a tag, still neutralized).
        let past = close(&"x".repeat(257));
        assert_eq!(kinds(&past), vec![(TagKind::FenceClose, 0..name_end)]);
        let open = "<untrusted-content a <b>";
        assert_eq!(
            kinds(open),
            vec![(TagKind::FenceOpen, 0.."<untrusted-content".len())]
        );
        let unclosed = "</untrusted-content nonce";
        assert_eq!(kinds(unclosed), vec![(TagKind::FenceClose, 0..name_end)]);
    }

    #[test]
    fn fence_names_take_separators_and_slashes() {
        for (text, kind) in [
            ("<untrusted - _ content>", TagKind::FenceOpen),
            ("< / / untrusted-content>", TagKind::FenceClose),
            ("<\n\tuntrusted-content>", TagKind::FenceOpen),
        ] {
            assert_eq!(kinds(text), vec![(kind, 0..text.len())], "{text}");
        }
        for text in [
            "<untrusted.content>",
            "<untrusted-conten>",
            "< x untrusted-content>",
        ] {
            assert_eq!(kinds(text), vec![], "{text}");
        }
        // A longer word still starts with the name: the name is the tag.
        assert_eq!(
            kinds("<untrusted-contents"),
            vec![(TagKind::FenceOpen, 0.."<untrusted-content".len())]
        );
    }

    #[test]
    fn angle_and_bracket_tokens_take_whitespace_and_one_slash() {
        for text in [
            "< think >",
            "</ think\n>",
            "[ / INST ]",
            "[/\tTOOL_CALLS]",
            "<//s>",
        ] {
            assert_eq!(kinds(text), control(text), "{text}");
        }
        for text in [
            "[//INST]", "[INST", "<think", "<thinks>", "[INST>", "<INST]",
        ] {
            assert_eq!(kinds(text), vec![], "{text}");
        }
    }

    #[test]
    fn overlapping_matches_join_and_a_fence_kind_wins() {
        // `&lt;` decodes to one `<` whose range is all four bytes; a tag
        // found with and without a comment is reported once.
        let text = "</untrusted<!---->-content>";
        assert_eq!(kinds(text), vec![(TagKind::FenceClose, 0..text.len())]);
        // A control token inside a comment that a fence tag runs across:
        // one tag, a fence tag.
        let text = "</untrusted<!-- <s> -->-content>";
        assert_eq!(kinds(text), vec![(TagKind::FenceClose, 0..text.len())]);
    }
}
