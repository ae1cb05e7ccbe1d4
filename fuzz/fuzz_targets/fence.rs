//! Arbitrary text through the fence (ctx-fence): the tag finder and the
//! neutralizer read untrusted text, with its HTML references, escapes,
//! percent-encoding and Unicode look-alikes. Nothing may panic, and:
//! every tag found is a non-empty range of the text, on character
//! boundaries, in order and without overlap; a neutralized text holds no
//! tag, holds no Unicode tag character, and is its own neutralization; a
//! text without a tag or tag character comes back unchanged; and a fenced
//! block holds exactly its two fence tags, whatever it fences. The
//! finder and the neutralizer agree with their reference definitions
//! (without the byte-level prefilter) on every input, and on the input
//! stretched: a fuzzer's inputs are shorter than one window of the
//! prefilter (512 counted bytes past the last trigger byte), so each `~`
//! is replaced by a plain run of 480 to 543 bytes (chosen by the input's
//! length), which puts window ends wherever the fuzzer puts a `~`.

#![no_main]

use ctx_fence::{
    FENCE_CLOSE, FENCE_OPEN, TagKind, find_tags, find_tags_reference, neutralize,
    neutralize_reference, push_fenced,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let tags = find_tags(text);
    let mut end = 0;
    for t in &tags {
        assert!(t.range.start >= end && t.range.start < t.range.end, "{tags:?}");
        assert!(text.is_char_boundary(t.range.start) && text.is_char_boundary(t.range.end));
        end = t.range.end;
    }
    assert!(end <= text.len());
    assert_eq!(tags, find_tags_reference(text), "the prefilter changed the tags");
    if text.contains('~') {
        let run = format!(" {} ", "x".repeat(480 + text.len() % 64));
        let stretched = text.replace('~', &run);
        assert_eq!(
            find_tags(&stretched),
            find_tags_reference(&stretched),
            "the prefilter changed the tags of the stretched input"
        );
    }

    let safe = neutralize(text);
    assert_eq!(safe, neutralize_reference(text), "the prefilter changed the output");
    assert!(find_tags(&safe).is_empty(), "neutralized text still holds a tag: {safe:?}");
    assert_eq!(neutralize(&safe), safe, "neutralize is idempotent");
    assert!(!safe.chars().any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)));
    if tags.is_empty() && !text.chars().any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)) {
        assert_eq!(safe, text, "a text without a tag is left alone");
    }

    let mut block = String::new();
    push_fenced(&mut block, text);
    let kinds: Vec<TagKind> = find_tags(&block).into_iter().map(|t| t.kind).collect();
    assert_eq!(kinds, [TagKind::FenceOpen, TagKind::FenceClose], "{block:?}");
    assert!(block.starts_with(FENCE_OPEN) && block.ends_with(FENCE_CLOSE));
});
