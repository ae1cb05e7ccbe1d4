//! `BpeCounter` against the reference, tiktoken-rs's `encode_ordinary`:
//! identical counts for every encoding on hand-picked edge cases, on random
//! Unicode (proptest), on the BPE worst cases and on every corpus file.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ctx_tokens::{BpeCounter, TokenCounter, Tokenizer};
use proptest::prelude::*;
use tiktoken_rs::CoreBPE;

const BPE_TOKENIZERS: [Tokenizer; 5] = [
    Tokenizer::Cl100kBase,
    Tokenizer::O200kBase,
    Tokenizer::O200kHarmony,
    Tokenizer::P50kBase,
    Tokenizer::R50kBase,
];

fn oracle(t: Tokenizer) -> &'static CoreBPE {
    static CELLS: [OnceLock<CoreBPE>; 5] = [const { OnceLock::new() }; 5];
    let i = BPE_TOKENIZERS.iter().position(|x| *x == t).unwrap();
    CELLS[i].get_or_init(|| match t {
        Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
        Tokenizer::O200kBase => tiktoken_rs::o200k_base().unwrap(),
        Tokenizer::O200kHarmony => tiktoken_rs::o200k_harmony().unwrap(),
        Tokenizer::P50kBase => tiktoken_rs::p50k_base().unwrap(),
        Tokenizer::R50kBase => tiktoken_rs::r50k_base().unwrap(),
        Tokenizer::Estimate => unreachable!(),
    })
}

fn assert_same(text: &str) {
    for t in BPE_TOKENIZERS {
        let expected = oracle(t).encode_ordinary(text).len();
        let got = BpeCounter::new(t).count(text);
        assert_eq!(got, expected, "{t} on {:?}", preview(text));
    }
}

fn preview(text: &str) -> String {
    text.chars().take(200).collect()
}

#[test]
fn edge_cases_match_tiktoken() {
    let cases = [
        "",
        " ",
        "  ",
        "\n",
        "a\n  ",
        "a\n  b",
        "a  \n\n  b",
        "x \t\u{a0}y",
        "\r\n\r\n",
        "}\n\n  x",
        "Hello, world! It's a test.",
        "I'LL SAY IT'S 'RE 'Ve 'ſ 'Ş 'K",
        "don't won't can't y'all ma'am 'tis ''s",
        "HELLO world CamelCaseWord iPhone McDonald's",
        "ǅemal ǈubljana ʰello aʰ 'ʰ's ʰ'S",
        "e\u{301}e\u{301}\u{301} \u{301}abc .\u{301}x \u{301}",
        "12345678901 ١٢٣٤٥ ½¾ Ⅻ",
        "path/to/file.rs//\n// comment\r\n",
        "日本語のテキスト、句読点。 한국어 텍스트 العربية עברית",
        "🦀🦀🦀 crab 👩‍👩‍👧 flags 🇫🇷🇩🇪",
        "<|endoftext|> <|fim_prefix|>",
        "\u{2028}\u{2029}\u{3000}\u{85}\u{b}\u{c}",
        "tab\tseparated\tvalues\t\t\tend",
        "   leading and trailing   ",
        "a'",
        "'",
        "x.'s",
        "Ünïcödé Ñandú ÆØÅ æøå ß ẞ",
        "\u{0}\u{1}\u{7f}\u{80}\u{ff}",
    ];
    for case in cases {
        assert_same(case);
    }
}

#[test]
fn every_token_is_one_token() {
    // Each ordinary token of each encoding, alone, costs exactly one.
    for t in BPE_TOKENIZERS {
        let bpe = oracle(t);
        let counter = BpeCounter::new(t);
        for rank in 0..201_000u32 {
            let Ok(bytes) = bpe.decode_bytes(&[rank]) else {
                continue;
            };
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            if bpe.special_tokens().contains(text.as_str()) {
                continue;
            }
            let expected = bpe.encode_ordinary(&text).len();
            assert_eq!(counter.count(&text), expected, "{t} rank {rank} {text:?}");
        }
    }
}

/// Characters chosen to hit every class boundary the patterns draw.
fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec![
            ' ', ' ', ' ', '\t', '\n', '\r', '\u{a0}', '\u{2028}', '\u{3000}', '\u{b}',
            '\'', '\'', '\'', 's', 'S', 't', 'T', 'r', 'R', 'e', 'E', 'v', 'V', 'm',
            'M', 'l', 'L', 'd', 'D', 'ſ', 'K', 'k', '/', '.', ',', '!', '-', '_',
            '(', '"', '0', '5', '9', '١', '½', 'Ⅻ',
            'a', 'Z', 'é', 'É', 'ǅ', 'ʰ', 'ª', 'ß', 'ẞ', '\u{301}', '\u{20dd}',
            '\u{93f}', 'क', '日', '語', 'ア', '한', 'ع', 'א', '🦀', '\u{200d}',
            '\u{fe0f}', '\u{0}', '\u{7f}', '\u{ffff}', '\u{10ffff}',
        ]),
        1 => any::<char>(),
    ]
}

fn interesting_text() -> impl Strategy<Value = String> {
    prop::collection::vec(interesting_char(), 0..120).prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_unicode_matches_tiktoken(text in interesting_text()) {
        for t in BPE_TOKENIZERS {
            let expected = oracle(t).encode_ordinary(&text).len();
            prop_assert_eq!(BpeCounter::new(t).count(&text), expected, "{} on {:?}", t, text);
        }
    }

    #[test]
    fn arbitrary_strings_match_tiktoken(text in ".{0,200}") {
        for t in BPE_TOKENIZERS {
            let expected = oracle(t).encode_ordinary(&text).len();
            prop_assert_eq!(BpeCounter::new(t).count(&text), expected, "{} on {:?}", t, text);
        }
    }

    #[test]
    fn fits_agrees_with_count(text in interesting_text(), limit in 0usize..80) {
        for t in BPE_TOKENIZERS {
            let counter = BpeCounter::new(t);
            prop_assert_eq!(counter.fits(&text, limit), counter.count(&text) <= limit);
        }
    }
}

/// tiktoken-rs's regex is a backtracking one with a step limit: on a long
/// whitespace run it returns an error (and `encode_ordinary` panics). Such
/// an input is compared at the largest size the oracle accepts, halving
/// from `text`'s size; the full size must then still count without panic,
/// within the bounds every byte-level BPE obeys.
fn assert_same_or_oracle_refuses(unit: &str, bytes: usize) {
    let full = unit.repeat(bytes / unit.len());
    let mut size = bytes;
    loop {
        let text = unit.repeat((size / unit.len()).max(1));
        let refused = BPE_TOKENIZERS
            .iter()
            .any(|&t| std::panic::catch_unwind(|| oracle(t).encode_ordinary(&text).len()).is_err());
        if !refused {
            assert_same(&text);
            break;
        }
        assert!(size > unit.len(), "oracle refuses even {unit:?}");
        size /= 2;
    }
    for t in BPE_TOKENIZERS {
        let n = BpeCounter::new(t).count(&full);
        // The longest token of these encodings is 128 bytes.
        assert!(n <= full.len() && n >= full.len() / 128, "{t}: {n}");
    }
}

#[test]
fn bpe_worst_cases_match_tiktoken() {
    let mib = 1 << 20;
    // Long runs of one repeated character: one huge piece each (a quarter
    // megabyte: each is a worst case for the heap merge, and there are 40).
    for c in ["a", " ", "\n", "\t", "0", "!", "日", "\u{301}"] {
        assert_same_or_oracle_refuses(c, mib / 4);
    }
    // A megabyte without whitespace, mixing classes.
    let mixed: String = "aZé日0!\u{301}ʰ'/".chars().cycle().take(mib / 2).collect();
    assert_same(&mixed);
    // A megabyte of letters without a break: one piece for the merge.
    let letters: String = "abcdefghijklmnopqrstuvwxyz"
        .chars()
        .cycle()
        .take(mib)
        .collect();
    assert_same(&letters);
    // Every byte value, as characters and as lossily decoded bytes.
    let chars: String = (0u8..=255).map(char::from).collect();
    assert_same(&chars);
    let bytes: Vec<u8> = (0u8..=255).collect();
    assert_same(&String::from_utf8_lossy(&bytes));
    // Lone surrogates reach us as U+FFFD after lossy decoding (from a
    // command engine's output, say).
    let wtf: Vec<u16> = vec![0xD800, b'a' as u16, 0xDC00, 0xD83E, 0xDD80];
    assert_same(&String::from_utf16_lossy(&wtf));
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_corpus_file_matches_tiktoken() {
    let Some(root) = ctx_test_support::corpora("every_corpus_file_matches_tiktoken") else {
        return;
    };
    let mut files = Vec::new();
    files_under(&root, &mut files);
    assert!(!files.is_empty(), "no files under {}", root.display());
    let mut bytes = 0;
    for file in &files {
        let Ok(raw) = std::fs::read(file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&raw);
        bytes += text.len();
        for t in BPE_TOKENIZERS {
            let expected = oracle(t).encode_ordinary(&text).len();
            let got = BpeCounter::new(t).count(&text);
            assert_eq!(got, expected, "{t} on {}", file.display());
        }
    }
    eprintln!(
        "{} corpus files, {bytes} bytes, identical counts",
        files.len()
    );
}
