//! The invariants of the fuzz targets, as property tests that run with
//! `cargo test`: arbitrary markdown-ish text never panics the reader, every
//! range is a verbatim slice, compression never cuts a code fence open and
//! counts words exactly; arbitrary configuration text never panics.

use std::path::Path;

use ctx_history::HistoryConfig;
use ctx_history::compress::{Compressible, Level};
use ctx_history::markdown::{sections, split_front_matter};
use proptest::prelude::*;

fn markdownish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "---\n",
        "+++\n",
        "...\n",
        "## ",
        "# ",
        "### ",
        "Title\n",
        "===\n",
        "```\n",
        "~~~\n",
        "    ",
        "> ",
        "- ",
        "1. ",
        "\n",
        "\r\n",
        "\n\n",
        "text. ",
        "Dr. Who",
        "e.g. x",
        "v1.2 ",
        "`co. de` ",
        "[a. b](u.c) ",
        "<!--\n",
        "-->\n",
        "<div>\n",
        "| a | b |\n|---|---|\n",
        "key: value\n",
        "Title: x\n",
        "date = 2026-01-01\n",
        "summary: [x\n",
        "\u{feff}",
        "é",
        "🦀",
        "\t",
        "…",
        "#",
    ]);
    prop::collection::vec(pieces, 0..60).prop_map(|v| v.concat())
}

/// Whether `text` ends inside a fenced code block (CommonMark's rule: a
/// fence closes on a line of the same character, at least as long, and
/// nothing else).
fn ends_inside_a_fence(text: &str) -> bool {
    let mut open: Option<(char, usize)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        let c = t.chars().next().unwrap_or(' ');
        let run = t.chars().take_while(|&x| x == c).count();
        match open {
            None if matches!(c, '`' | '~') && run >= 3 => open = Some((c, run)),
            Some((oc, n)) if c == oc && run >= n && t[run..].trim().is_empty() => open = None,
            _ => {}
        }
    }
    open.is_some()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn reader_never_panics_and_slices_are_verbatim(text in markdownish()) {
        let path = Path::new("p.md");
        if let Ok(doc) = split_front_matter(&text, path) {
            let _ = doc.metadata(path);
            prop_assert_eq!(doc.body_range.end, text.len());
            for level in 1..=6u8 {
                let mut last = doc.body_range.start;
                for s in doc.sections(level) {
                    prop_assert!(s.range.start >= last);
                    prop_assert_eq!(&text[s.range.clone()], s.text);
                    last = s.range.end;
                }
            }
            let c = Compressible::from_body(doc.body(), 2);
            for k in 0..=c.len() {
                let r = c.render(k);
                prop_assert_eq!(c.words(k), r.split_whitespace().count());
            }
        }
    }

    #[test]
    fn code_blocks_are_never_cut_open(paras in prop::collection::vec(
        prop_oneof![
            Just("Plain sentence one. Plain sentence two.".to_string()),
            Just("```\ncode. More code!\n\n## not a heading\n```".to_string()),
            Just("~~~rust\nlet a = 1. b;\n~~~".to_string()),
            Just("- item one. Item two.\n- item three".to_string()),
        ], 1..8)) {
        let text = format!("## A\n\n{}\n", paras.join("\n\n"));
        let c = Compressible::new(&[text.as_str()]);
        for k in 0..=c.len() {
            let r = c.render(k);
            let fences = r.lines().filter(|l| l.starts_with("```") || l.starts_with("~~~")).count();
            prop_assert_eq!(fences % 2, 0, "{}", r);
        }
        prop_assert_eq!(sections(&text, 2).len(), 1);
    }

    /// Every level — the inside cuts of the first unit included — has the
    /// words it says, keeps fences balanced, and a cut is a piece of the
    /// text ending at a word boundary, followed by the mark.
    #[test]
    fn cuts_inside_the_best_unit_are_whole_words_and_closed(first in prop_oneof![
            Just("```rust\nlet a = 1. b;\nlet c = d;\n```".to_string()),
            Just("~~~~\nx y z\n~~~ not a close\nw\n~~~~".to_string()),
            Just("A `code span with words` and more words without an end".to_string()),
            Just("## Heading here\nsome words then more words".to_string()),
            Just("    indented code line one\n    line two".to_string()),
        ], rest in markdownish()) {
        let text = format!("{first}\n\n{rest}");
        let c = Compressible::new(&[text.as_str()]);
        for level in 0..=c.max_level() {
            let r = c.render_level(level, &[]);
            prop_assert_eq!(c.words_level(level, &[]), r.split_whitespace().count());
            if let Level::Cut(_) = c.level(level) {
                prop_assert!(r.ends_with('…'), "{}", r);
                // What the cut kept, with the closers it added taken off
                // (a closing fence line, a closing backtick): some form of
                // it is in the text and ends at a word boundary there.
                let body = r.trim_end_matches('…').trim_end();
                let mut forms = vec![body];
                for closer in ['`', '~'] {
                    let k = body.trim_end_matches(closer);
                    if k.len() < body.len() {
                        forms.push(k.trim_end());
                        forms.push(&body[..body.len() - 1]);
                    }
                }
                // Line ends are LF in units.
                let lf = text.replace("\r\n", "\n").replace('\r', "\n");
                let at_boundary = forms.iter().any(|k| {
                    lf.match_indices(k).any(|(i, _)| {
                        lf[i + k.len()..].chars().next().is_none_or(char::is_whitespace)
                    })
                });
                prop_assert!(at_boundary, "{:?} is not a cut of {:?}", r, text);
                prop_assert!(!ends_inside_a_fence(&r), "{}", r);
            }
        }
    }

    #[test]
    fn config_parse_never_panics(text in "[a-z_\\[\\]=:\"{}. \\n0-9-]{0,200}") {
        for name in ["c.toml", "c.yaml"] {
            if let Err(e) = HistoryConfig::parse(&text, Path::new(name)) {
                prop_assert!(e.to_string().starts_with(name));
            }
        }
    }
}
