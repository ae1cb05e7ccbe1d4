//! Arbitrary bytes through the markdown reader: UTF-8 check, front-matter
//! split and parse, sections at every level, and compression. Nothing may
//! panic, and every range must be a valid, verbatim slice of the input.

#![no_main]

use std::path::Path;

use ctx_history::compress::Compressible;
use ctx_history::markdown::{decode_utf8, split_front_matter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.md");
    let Ok(text) = decode_utf8(data, path) else {
        return;
    };
    let Ok(doc) = split_front_matter(text, path) else {
        return;
    };
    let _ = doc.metadata(path);
    assert!(doc.body_range.start <= doc.body_range.end && doc.body_range.end == text.len());
    assert!(text.is_char_boundary(doc.body_range.start));
    if let Some(fm) = &doc.front_matter {
        assert_eq!(&text[fm.raw_range.clone()], fm.raw);
        assert!(fm.block_range.end <= doc.body_range.start);
    }
    for level in 1..=6u8 {
        let mut last = doc.body_range.start;
        for s in doc.sections(level) {
            assert!(s.range.start >= last && s.range.end <= text.len());
            assert_eq!(&text[s.range.clone()], s.text);
            assert!(s.heading_range.start == s.range.start && s.heading_range.end <= s.range.end);
            let _ = s.content();
            last = s.range.end;
        }
    }
    let c = Compressible::from_body(doc.body(), 2);
    for k in [0, 1, c.len() / 2, c.len()] {
        let r = c.render(k);
        assert_eq!(c.words(k), r.split_whitespace().count());
    }
});
