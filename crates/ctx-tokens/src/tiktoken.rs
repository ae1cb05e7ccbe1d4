//! The reference implementation, selectable with the `tiktoken-rs` cargo
//! feature: tiktoken-rs's `CoreBPE`, built on first use in each process
//! (65–150 ms and 25–50 MB, the cost [`crate::BpeCounter`] was written to
//! remove). Counts are the same; the tests use this crate as their oracle.

use std::fmt;
use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::{EstimateCounter, TokenCounter, Tokenizer};

/// Exact counts through tiktoken-rs's `encode_ordinary`.
pub struct TiktokenCounter {
    tokenizer: Tokenizer,
}

impl TiktokenCounter {
    /// A counter for `tokenizer`; its table is built on the first count.
    pub fn new(tokenizer: Tokenizer) -> TiktokenCounter {
        TiktokenCounter { tokenizer }
    }

    fn bpe(&self) -> Option<&'static CoreBPE> {
        static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static O200K_HARMONY: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static P50K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static R50K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        // The rank files are embedded in tiktoken-rs, so construction can
        // only fail on a corrupt build; such a counter degrades to the
        // byte bound, which still never undercounts.
        let cell = match self.tokenizer {
            Tokenizer::Cl100kBase => CL100K.get_or_init(|| tiktoken_rs::cl100k_base().ok()),
            Tokenizer::O200kBase => O200K.get_or_init(|| tiktoken_rs::o200k_base().ok()),
            Tokenizer::O200kHarmony => {
                O200K_HARMONY.get_or_init(|| tiktoken_rs::o200k_harmony().ok())
            }
            Tokenizer::P50kBase => P50K.get_or_init(|| tiktoken_rs::p50k_base().ok()),
            Tokenizer::R50kBase => R50K.get_or_init(|| tiktoken_rs::r50k_base().ok()),
            Tokenizer::Estimate => return None,
        };
        cell.as_ref()
    }
}

impl fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TiktokenCounter")
            .field("tokenizer", &self.tokenizer)
            .finish()
    }
}

impl TokenCounter for TiktokenCounter {
    fn name(&self) -> &str {
        self.tokenizer.as_str()
    }
    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        match self.bpe() {
            Some(bpe) => bpe.encode_ordinary(text).len(),
            None if self.tokenizer == Tokenizer::Estimate => EstimateCounter.count(text),
            None => text.len(),
        }
    }
}
