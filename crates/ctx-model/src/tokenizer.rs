//! The tokenizers ctx knows, by name: [`Tokenizer`], [`ALL_TOKENIZERS`]
//! (the one list of names), parsing a name ([`Tokenizer::from_str`],
//! refused with [`UnknownTokenizer`]) and the tokenizer a model name
//! implies ([`Tokenizer::for_model`]).
//!
//! Why here and not in `ctx-tokens`: a plan's `config.tokenizer` is checked
//! against these names, and the plan model must not compile the BPE tables
//! (ctx-tokens' build script reads tiktoken-rs's) to know them. Counting
//! stays in ctx-tokens, which re-exports these names at their old paths
//! and builds a counter for each (`ctx_tokens::TokenizerExt::counter`).

use std::fmt;
use std::str::FromStr;

/// The tokenizers ctx knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// GPT-3.5 / GPT-4 encoding.
    Cl100kBase,
    /// GPT-4o, GPT-4.1 and o-series encoding.
    O200kBase,
    /// The gpt-oss "harmony" variant of o200k.
    O200kHarmony,
    /// Codex-era encoding.
    P50kBase,
    /// GPT-3 encoding.
    R50kBase,
    /// `ceil(utf8_bytes / 4)`: no tokenizer at all.
    Estimate,
}

/// Every tokenizer, in the order `--help` lists them.
pub const ALL_TOKENIZERS: [Tokenizer; 6] = [
    Tokenizer::Cl100kBase,
    Tokenizer::O200kBase,
    Tokenizer::O200kHarmony,
    Tokenizer::P50kBase,
    Tokenizer::R50kBase,
    Tokenizer::Estimate,
];

impl Tokenizer {
    /// The name users write: `cl100k_base`, `estimate`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Tokenizer::Cl100kBase => "cl100k_base",
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::O200kHarmony => "o200k_harmony",
            Tokenizer::P50kBase => "p50k_base",
            Tokenizer::R50kBase => "r50k_base",
            Tokenizer::Estimate => "estimate",
        }
    }

    /// Every name [`FromStr`] accepts, comma-separated in the order of
    /// [`ALL_TOKENIZERS`] (for error messages and help text).
    pub fn known_names() -> String {
        ALL_TOKENIZERS.map(Tokenizer::as_str).join(", ")
    }

    /// The tokenizer a model name implies: `o200k_base` for the gpt-4o,
    /// gpt-4.1, gpt-5 and o-series families, `o200k_harmony` for gpt-oss,
    /// `cl100k_base` for everything else (including models we have never
    /// heard of, whose count is then an approximation by a real BPE).
    pub fn for_model(model: &str) -> Tokenizer {
        let m = model.trim().to_ascii_lowercase();
        // Strip a provider prefix such as `openai/` or `azure/`.
        let m = m.rsplit('/').next().unwrap_or(&m);
        if m.starts_with("gpt-oss") {
            return Tokenizer::O200kHarmony;
        }
        let o_series =
            m.len() >= 2 && m.starts_with('o') && m[1..].starts_with(|c: char| c.is_ascii_digit());
        if m.starts_with("gpt-4o")
            || m.starts_with("gpt-4.1")
            || m.starts_with("gpt-4.5")
            || m.starts_with("gpt-5")
            || m.starts_with("chatgpt-4o")
            || o_series
        {
            Tokenizer::O200kBase
        } else {
            Tokenizer::Cl100kBase
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tokenizer name that ctx does not know. The known names in its
/// message come from [`ALL_TOKENIZERS`], the one list of names: a plan's
/// `config.tokenizer`, a history config and every `--tokenizer` flag are
/// parsed by [`Tokenizer::from_str`] and refused with this error, never
/// replaced by a default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tokenizer `{name}` (known: {})", Tokenizer::known_names())]
pub struct UnknownTokenizer {
    /// The name as given.
    pub name: String,
}

impl FromStr for Tokenizer {
    type Err = UnknownTokenizer;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL_TOKENIZERS
            .iter()
            .copied()
            .find(|t| t.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownTokenizer {
                name: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in ALL_TOKENIZERS {
            assert_eq!(t.as_str().parse::<Tokenizer>(), Ok(t));
        }
        assert!("gpt2".parse::<Tokenizer>().is_err());
    }

    #[test]
    fn the_error_lists_every_known_name_from_the_one_list() {
        let err = "gpt2".parse::<Tokenizer>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown tokenizer `gpt2` (known: cl100k_base, o200k_base, o200k_harmony, p50k_base, r50k_base, estimate)"
        );
        for t in ALL_TOKENIZERS {
            assert!(Tokenizer::known_names().contains(t.as_str()));
        }
    }

    #[test]
    fn model_families() {
        assert_eq!(Tokenizer::for_model("gpt-4o-mini"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::for_model("gpt-4.1"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::for_model("o3-mini"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::for_model("openai/o1"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::for_model("gpt-4"), Tokenizer::Cl100kBase);
        assert_eq!(Tokenizer::for_model("llama3"), Tokenizer::Cl100kBase);
        assert_eq!(Tokenizer::for_model("ollama"), Tokenizer::Cl100kBase);
        assert_eq!(Tokenizer::for_model("gpt-oss-20b"), Tokenizer::O200kHarmony);
    }
}
