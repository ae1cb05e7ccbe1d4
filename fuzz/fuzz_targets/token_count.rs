//! Arbitrary bytes, decoded lossily as a command engine's output would be,
//! counted by ctx's static-table counter and by tiktoken-rs, the reference:
//! the counts are equal for every encoding, `fits` agrees with `count`, and
//! nothing panics. (tiktoken-rs's backtracking regex gives up on some long
//! whitespace runs; those inputs are skipped, not counted as failures.)

#![no_main]

use std::sync::OnceLock;

use ctx_tokens::{BpeCounter, TokenCounter, Tokenizer};
use libfuzzer_sys::fuzz_target;

static REFERENCE: OnceLock<Vec<(Tokenizer, tiktoken_rs::CoreBPE)>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let reference = REFERENCE.get_or_init(|| {
        vec![
            (Tokenizer::Cl100kBase, tiktoken_rs::cl100k_base().unwrap()),
            (Tokenizer::O200kBase, tiktoken_rs::o200k_base().unwrap()),
            (Tokenizer::P50kBase, tiktoken_rs::p50k_base().unwrap()),
            (Tokenizer::R50kBase, tiktoken_rs::r50k_base().unwrap()),
        ]
    });
    let text = String::from_utf8_lossy(data);
    for (tokenizer, bpe) in reference {
        let counter = BpeCounter::new(*tokenizer);
        let n = counter.count(&text);
        assert!(counter.fits(&text, n));
        if n > 0 {
            assert!(!counter.fits(&text, n - 1));
        }
        let Ok(expected) = std::panic::catch_unwind(|| bpe.encode_ordinary(&text).len()) else {
            continue;
        };
        assert_eq!(n, expected, "{tokenizer} on {text:?}");
    }
});
