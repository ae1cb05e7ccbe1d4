//! # ctx-tokens: the `TokenCounter` seam
//!
//! Every budget in ctx — the per-prompt cap of a plan task, the token cap of
//! a historical digest, the preflight of a rendered template — is counted
//! through one trait, [`TokenCounter`]. Code that enforces a budget never
//! knows which tokenizer sits behind it, the way ripgrep's searcher never
//! knows which regex engine it drives.
//!
//! Two families ship:
//!
//! * [`BpeCounter`]: exact counts for OpenAI's byte-level BPE encodings
//!   (`cl100k_base`, `o200k_base`, `p50k_base`, `r50k_base`,
//!   `o200k_harmony`), identical to tiktoken-rs's, from rank tables the
//!   build script lays out into the binary's read-only data, so counting
//!   never touches the network and never builds anything. With the
//!   `tiktoken-rs` cargo feature, `TiktokenCounter` (tiktoken-rs itself,
//!   the tests' oracle) is used instead.
//! * [`EstimateCounter`]: `ceil(utf8_bytes / 4)`, for models without a known
//!   tokenizer.
//!
//! ## Why nothing is built at run time
//!
//! Building tiktoken-rs's table costs 65–150 ms and 25–50 MB in a fresh
//! process, more than assembling a whole digest; a `ctx history` at a
//! binding budget spent most of its time there. The static tables
//! (`rank_table`) cost nothing to load, the pre-tokenizers (`pretokenize`)
//! replace the splitting regexes exactly, and the first count of a process
//! takes well under a millisecond. Callers still ask
//! [`TokenCounter::upper_bound`] first: a byte-level BPE never yields more
//! tokens than the text has bytes, so a cap at or above the byte length
//! holds without tokenizing at all.
//!
//! ## Why counts ignore special tokens
//!
//! User text is encoded with `encode_ordinary`: a literal `<|endoftext|>` in
//! an archive is seven ordinary tokens, never one control token. Counting it
//! as a control token would both undercount and hide an injection attempt.
//!
//! ```
//! use ctx_tokens::{TokenCounter, Tokenizer, TokenizerExt};
//!
//! let counter = Tokenizer::Cl100kBase.counter();
//! let text = "Exact counts, caps that hold.";
//! // Cheaper still: the bound reads only the length.
//! assert!(counter.upper_bound(text) >= counter.count(text));
//! assert_eq!(counter.count(text), 7);
//!
//! let estimate = Tokenizer::Estimate.counter();
//! assert_eq!(estimate.count("12345"), 2); // ceil(5 / 4)
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod merge;
mod prefix;
mod pretokenize;
mod rank_hash;
mod rank_table;
#[cfg(feature = "tiktoken-rs")]
mod tiktoken;

pub use prefix::{longest_prefix, truncate_to_tokens};
use pretokenize::Pattern;
use rank_table::RankTable;
#[cfg(feature = "tiktoken-rs")]
pub use tiktoken::TiktokenCounter;

/// Counts the tokens a text costs under one tokenizer.
///
/// Implementations must be deterministic (the same text always gives the
/// same count) and cheap to share across threads.
pub trait TokenCounter: Send + Sync {
    /// The tokenizer's name as users write it (`cl100k_base`, `estimate`).
    fn name(&self) -> &str;

    /// The exact number of tokens `text` costs.
    fn count(&self, text: &str) -> usize;

    /// A bound that is never below [`count`](Self::count), computed without
    /// tokenizing. The default is the byte length, which holds for every
    /// byte-level BPE: each token covers at least one byte.
    fn upper_bound(&self, text: &str) -> usize {
        text.len()
    }

    /// Whether `text` costs at most `limit` tokens. Answers from
    /// [`upper_bound`](Self::upper_bound) when it can, so a generous cap
    /// never builds a tokenizer.
    fn fits(&self, text: &str, limit: usize) -> bool {
        self.upper_bound(text) <= limit || self.count(text) <= limit
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn count(&self, text: &str) -> usize {
        (**self).count(text)
    }
    fn upper_bound(&self, text: &str) -> usize {
        (**self).upper_bound(text)
    }
    fn fits(&self, text: &str, limit: usize) -> bool {
        (**self).fits(text, limit)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for &T {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn count(&self, text: &str) -> usize {
        (**self).count(text)
    }
    fn upper_bound(&self, text: &str) -> usize {
        (**self).upper_bound(text)
    }
    fn fits(&self, text: &str, limit: usize) -> bool {
        (**self).fits(text, limit)
    }
}

pub use ctx_model::tokenizer::{ALL_TOKENIZERS, Tokenizer, UnknownTokenizer};

/// A counter for each [`Tokenizer`]: the names are the plan model's
/// (`ctx_model::tokenizer`, so that a plan is checked without compiling the
/// BPE tables), and a method on a type of another crate needs a trait.
/// Import it to write `Tokenizer::Cl100kBase.counter()`.
pub trait TokenizerExt {
    /// A shared counter for this tokenizer: a [`BpeCounter`], or with the
    /// `tiktoken-rs` cargo feature a `TiktokenCounter` (the reference
    /// implementation, same counts, a table built on first use).
    fn counter(self) -> Arc<dyn TokenCounter>;
}

impl TokenizerExt for Tokenizer {
    fn counter(self) -> Arc<dyn TokenCounter> {
        match self {
            Tokenizer::Estimate => Arc::new(EstimateCounter),
            #[cfg(feature = "tiktoken-rs")]
            bpe => Arc::new(TiktokenCounter::new(bpe)),
            #[cfg(not(feature = "tiktoken-rs"))]
            bpe => Arc::new(BpeCounter::new(bpe)),
        }
    }
}

/// Words as ctx's word caps count them: whitespace-separated runs
/// (`split_whitespace`). The one definition, so that a digest's
/// `max_words` (ctx-history's compression) and a `max_words` check
/// (ctx-checks) agree on a text. Here because both count with this crate.
///
/// Counted eight bytes at a time where they are all ASCII (the last few
/// padded with spaces), and a character at a time elsewhere (each non-ASCII character decoded and
/// asked `char::is_whitespace`), so the count is `split_whitespace`'s
/// exactly (the proptest `count_words_is_split_whitespace` compares them)
/// at a fraction of its cost: ctx-history's compression calls it on every
/// unit it weighs, and it was the largest single cost of a `ctx history`
/// (issue 26). A word starts at a non-space byte whose previous byte is a
/// space (or at the start); the eight-byte step finds those with bit
/// arithmetic (`ascii_spaces`) and counts them with one `count_ones`.
pub fn count_words(text: &str) -> usize {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let bytes = text.as_bytes();
    let mut words = 0;
    // Whether the byte before `i` ended a word (true at the start).
    let mut after_space = true;
    let mut i = 0;
    while i < bytes.len() {
        // Eight bytes, or the last few padded with spaces: a space starts
        // no word, and the state it leaves is not read after the end.
        let rest = &bytes[i..];
        let (w, take) = match rest.first_chunk::<8>() {
            Some(eight) => (u64::from_le_bytes(*eight), 8),
            None => {
                let mut word = [b' '; 8];
                word[..rest.len()].copy_from_slice(rest);
                (u64::from_le_bytes(word), rest.len())
            }
        };
        if w & HIGH == 0 {
            let spaces = ascii_spaces(w);
            // Byte k's "previous byte was a space" flag: byte k-1's space
            // flag, and for byte 0 the state carried in.
            let before = (spaces << 8) | if after_space { 0x80 } else { 0 };
            words += (!spaces & HIGH & before).count_ones() as usize;
            after_space = spaces >> 63 != 0;
            i += take;
            continue;
        }
        let b = bytes[i];
        let (space, len) = if b < 0x80 {
            (
                matches!(b, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r'),
                1,
            )
        } else {
            // `i` is on a character boundary: every step is one whole
            // character or eight ASCII bytes.
            let c = text[i..].chars().next().unwrap_or(' ');
            (c.is_whitespace(), c.len_utf8())
        };
        words += usize::from(!space && after_space);
        after_space = space;
        i += len;
    }
    words
}

/// The high bit of each byte of `w` (eight ASCII bytes, little-endian)
/// set where that byte is ASCII whitespace: `' '` or `'\t'..='\r'`
/// (0x09–0x0D), the six that `char::is_whitespace` accepts below 0x80.
///
/// Exact for bytes below 0x80, with no carry between bytes: the space
/// test is a zero test of `w ^ 0x20…` (`(x & 0x7F) + 0x7F` reaches the
/// high bit exactly when the low seven bits are not all zero), and the
/// range test subtracts 9 from each byte with its high bit set first (so
/// no byte borrows from its neighbour) and adds 0x72 (so a byte reaches
/// 0x80 exactly when it is 14 or more).
fn ascii_spaces(w: u64) -> u64 {
    const LOW: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let x = w ^ 0x2020_2020_2020_2020;
    let is_blank = !(((x & LOW) + LOW) | x) & HIGH;
    let at_least_9 = (w | HIGH) - 0x0909_0909_0909_0909;
    let at_least_14 = w + 0x7272_7272_7272_7272;
    let is_control_space = at_least_9 & !at_least_14 & HIGH;
    is_blank | is_control_space
}

/// `ceil(utf8_bytes / 4)`, the usual rule of thumb for English text.
#[derive(Debug, Clone, Copy, Default)]
pub struct EstimateCounter;

impl TokenCounter for EstimateCounter {
    fn name(&self) -> &str {
        "estimate"
    }
    fn count(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }
    fn upper_bound(&self, text: &str) -> usize {
        self.count(text)
    }
}

/// Exact counts for one of OpenAI's byte-level BPE encodings.
///
/// Counts are identical to tiktoken-rs's `encode_ordinary(text).len()`
/// (the tests prove it on random Unicode and on real archives), but nothing
/// is built at run time: the rank tables are laid out by the build script
/// into read-only data (see `rank_table`), and the splitting regex is
/// replaced by an equivalent hand-written pre-tokenizer (see
/// `pretokenize`). The first count of a fresh process therefore costs what
/// any other does.
pub struct BpeCounter {
    tokenizer: Tokenizer,
}

impl BpeCounter {
    /// A counter for `tokenizer`.
    ///
    /// Passing [`Tokenizer::Estimate`] makes [`count`](TokenCounter::count)
    /// use the estimate rule.
    pub fn new(tokenizer: Tokenizer) -> BpeCounter {
        BpeCounter { tokenizer }
    }

    fn encoding(&self) -> Option<(Pattern, &'static RankTable)> {
        Some(match self.tokenizer {
            Tokenizer::Cl100kBase => (Pattern::Cl100k, &rank_table::CL100K),
            Tokenizer::O200kBase | Tokenizer::O200kHarmony => (Pattern::O200k, &rank_table::O200K),
            Tokenizer::P50kBase => (Pattern::Gpt2, &rank_table::P50K),
            Tokenizer::R50kBase => (Pattern::Gpt2, &rank_table::R50K),
            Tokenizer::Estimate => return None,
        })
    }

    /// Counts pieces until the running total exceeds `limit` (then returns
    /// that partial total) or the text ends.
    fn count_until(&self, text: &str, limit: usize) -> usize {
        let Some((pattern, table)) = self.encoding() else {
            return EstimateCounter.count(text);
        };
        let bytes = text.as_bytes();
        let mut total = 0;
        let mut i = 0;
        while i < bytes.len() {
            let mut end = pretokenize::piece_end(pattern, bytes, i);
            if end <= i {
                // Unreachable by construction; never loop forever or split
                // a character if it ever were.
                end = i + text[i..].chars().next().map_or(1, char::len_utf8);
            }
            total += merge::count_piece(table, &bytes[i..end]);
            if total > limit {
                return total;
            }
            i = end;
        }
        total
    }
}

impl fmt::Debug for BpeCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BpeCounter")
            .field("tokenizer", &self.tokenizer)
            .finish()
    }
}

impl TokenCounter for BpeCounter {
    fn name(&self) -> &str {
        self.tokenizer.as_str()
    }
    fn count(&self, text: &str) -> usize {
        self.count_until(text, usize::MAX)
    }
    /// Stops counting as soon as the total passes `limit`: a prompt far over
    /// its cap is refused after its first `limit` tokens, not its last.
    fn fits(&self, text: &str, limit: usize) -> bool {
        self.upper_bound(text) <= limit || self.count_until(text, limit) <= limit
    }
}

/// Wraps a counter and records how many bytes it was asked to tokenize
/// exactly. Benchmarks use it to prove that budget fitting does not
/// re-tokenize the whole text once per reduction step.
pub struct MeteredCounter<C> {
    inner: C,
    bytes_counted: AtomicU64,
    calls: AtomicU64,
}

impl<C: TokenCounter> MeteredCounter<C> {
    /// Wraps `inner` with zeroed meters.
    pub fn new(inner: C) -> Self {
        MeteredCounter {
            inner,
            bytes_counted: AtomicU64::new(0),
            calls: AtomicU64::new(0),
        }
    }
    /// Bytes passed to [`TokenCounter::count`] so far.
    pub fn bytes_counted(&self) -> u64 {
        self.bytes_counted.load(Ordering::Relaxed)
    }
    /// Calls to [`TokenCounter::count`] so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl<C: TokenCounter> TokenCounter for MeteredCounter<C> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn count(&self, text: &str) -> usize {
        self.bytes_counted
            .fetch_add(text.len() as u64, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.count(text)
    }
    fn upper_bound(&self, text: &str) -> usize {
        self.inner.upper_bound(text)
    }
    // `fits` is left at its default so that exact counts go through `count`
    // and are metered.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_whitespace_separated_runs() {
        assert_eq!(count_words("  one two\nthree\t four  "), 4);
        assert_eq!(count_words(""), 0);
        // Unicode whitespace separates too (an ideographic space).
        assert_eq!(count_words("a\u{3000}b"), 2);
    }

    proptest::proptest! {
        /// The byte-level count is `split_whitespace`'s, on any text and on
        /// text dense with every kind of whitespace.
        #[test]
        fn count_words_is_split_whitespace(
            text in proptest::prop_oneof![
                proptest::prelude::any::<String>(),
                "[a\u{e9} \t\n\u{b}\u{c}\r\u{85}\u{a0}\u{1680}\u{2000}\u{200a}\u{200b}\u{2028}\u{202f}\u{205f}\u{3000}\u{1c}]{0,40}",
                // Long ASCII runs, so that the eight-byte step meets every
                // alignment of words and spaces, with a rare non-ASCII
                // character (space or not) that it must step around.
                "([a-c \t\n\u{b}\u{c}\r\u{1c}\u{1f}\u{7f}]{0,30}[\u{a0}\u{e9}\u{3000}\u{85}]?){0,4}",
            ]
        ) {
            proptest::prop_assert_eq!(count_words(&text), text.split_whitespace().count());
        }
    }

    /// Every ASCII byte at every position of the eight: the bit test
    /// says "space" exactly where `char::is_whitespace` does.
    #[test]
    fn ascii_spaces_agrees_with_is_whitespace_for_every_byte() {
        for b in 0u8..0x80 {
            for pos in 0..8 {
                let mut bytes = [b'x'; 8];
                bytes[pos] = b;
                let got = ascii_spaces(u64::from_le_bytes(bytes));
                let mut want = 0u64;
                for (k, &c) in bytes.iter().enumerate() {
                    if char::from(c).is_whitespace() {
                        want |= 0x80 << (8 * k);
                    }
                }
                assert_eq!(got, want, "byte {b:#04x} at {pos}");
            }
        }
    }

    #[test]
    fn special_tokens_are_ordinary_text() {
        let c = Tokenizer::Cl100kBase.counter();
        assert!(c.count("<|endoftext|>") > 1);
    }

    #[test]
    fn upper_bound_never_undercounts() {
        let samples = [
            "",
            "a",
            "héllo wörld",
            "日本語のテキスト",
            "   \n\t",
            "🦀🦀🦀 crab",
        ];
        for t in [
            Tokenizer::Cl100kBase,
            Tokenizer::O200kBase,
            Tokenizer::Estimate,
        ] {
            let c = t.counter();
            for s in samples {
                assert!(c.upper_bound(s) >= c.count(s), "{t} {s:?}");
                assert!(c.fits(s, c.count(s)));
            }
        }
    }

    #[test]
    fn metered_counts_bytes() {
        let m = MeteredCounter::new(EstimateCounter);
        assert!(m.fits("abcd", 100)); // answered by the bound: not metered
        assert_eq!(m.bytes_counted(), 0);
        assert_eq!(m.count("abcdefgh"), 2);
        assert_eq!(m.bytes_counted(), 8);
        assert_eq!(m.calls(), 1);
    }
}
