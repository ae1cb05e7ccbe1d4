//! Model control tokens, as data: each family's tokens as its chat format
//! writes them, with where that format is defined.
//!
//! The matcher ([`super::matcher`]) does not hold its own list: it reads
//! the words out of these tokens. Three shapes exist:
//!
//! * `<|name|>` (and `<｜name｜>`): every such token is matched by shape,
//!   whatever the name (up to 64 characters), so a family's new
//!   `<|…|>` token needs no entry; the entries below document them;
//! * `<name>`, `</name>` and `<<NAME>>`: matched by name, with or without
//!   the `/`;
//! * `[NAME]` and `[/NAME]`: matched by name, with or without the `/`.
//!
//! Names are compared on the skeleton (case-folded, look-alikes mapped), so
//! `[inst]` and `<THINK>` match too. To add a family, add an entry: the
//! test `every_listed_token_is_found` checks the matcher sees each token.

use std::sync::OnceLock;

/// The control tokens of one model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlTokenFamily {
    /// The family, as people name it.
    pub family: &'static str,
    /// Where its chat format and tokens are defined.
    pub source: &'static str,
    /// The tokens, exactly as the format writes them.
    pub tokens: &'static [&'static str],
}

/// Every family whose control tokens untrusted text must not carry.
pub const CONTROL_TOKENS: &[ControlTokenFamily] = &[
    ControlTokenFamily {
        family: "ChatML (OpenAI, Qwen)",
        source: "ChatML, openai/openai-python chatml.md; Qwen tokenizer_config.json",
        tokens: &["<|im_start|>", "<|im_end|>", "<|im_sep|>", "<|endoftext|>"],
    },
    ControlTokenFamily {
        family: "Llama 2",
        source: "Meta Llama 2 chat prompt format (meta-llama/llama, generation.py)",
        tokens: &["<s>", "</s>", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"],
    },
    ControlTokenFamily {
        family: "Llama 3",
        source: "Meta Llama 3 model card, prompt format",
        tokens: &[
            "<|begin_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
            "<|python_tag|>",
        ],
    },
    ControlTokenFamily {
        family: "Qwen / Hermes",
        source: "Qwen2.5 and Qwen3 chat templates; NousResearch Hermes function-calling format",
        tokens: &[
            "<tool_call>",
            "</tool_call>",
            "<tool_response>",
            "</tool_response>",
            "<think>",
            "</think>",
        ],
    },
    ControlTokenFamily {
        family: "Mistral",
        source: "mistral-common SpecialTokens (tokenizers v3 to v13, tekken)",
        tokens: &[
            "[INST]",
            "[/INST]",
            "[TOOL_CALLS]",
            "[AVAILABLE_TOOLS]",
            "[/AVAILABLE_TOOLS]",
            "[TOOL_RESULTS]",
            "[/TOOL_RESULTS]",
            "[SYSTEM_PROMPT]",
            "[/SYSTEM_PROMPT]",
            "[TOOL_CONTENT]",
            "[THINK]",
            "[/THINK]",
            "[ARGS]",
            "[CALL_ID]",
        ],
    },
    ControlTokenFamily {
        family: "Gemma",
        source: "Google Gemma formatting and system instructions (ai.google.dev); \
                 Gemma 3 tokenizer special tokens",
        tokens: &[
            "<bos>",
            "<eos>",
            "<start_of_turn>",
            "<end_of_turn>",
            "<start_of_image>",
        ],
    },
    ControlTokenFamily {
        family: "gpt-oss (harmony)",
        source: "OpenAI harmony response format (openai/harmony)",
        tokens: &[
            "<|start|>",
            "<|end|>",
            "<|message|>",
            "<|channel|>",
            "<|constrain|>",
            "<|return|>",
            "<|call|>",
        ],
    },
    ControlTokenFamily {
        family: "GLM",
        source: "THUDM GLM-4 chat template (tokenizer_config.json)",
        tokens: &[
            "[gMASK]",
            "<sop>",
            "<|system|>",
            "<|user|>",
            "<|assistant|>",
            "<|observation|>",
        ],
    },
    ControlTokenFamily {
        family: "DeepSeek",
        source: "DeepSeek-V3 and R1 tokenizer_config.json",
        tokens: &[
            "<｜begin▁of▁sentence｜>",
            "<｜end▁of▁sentence｜>",
            "<｜User｜>",
            "<｜Assistant｜>",
        ],
    },
    ControlTokenFamily {
        family: "Phi-3",
        source: "Microsoft Phi-3 model card, chat format",
        tokens: &["<|user|>", "<|assistant|>", "<|end|>"],
    },
];

/// The names matched in `<name>` and `[name]` tokens, lower-cased.
pub(super) struct Words {
    /// `<name>`, `</name>`, `<<name>>`.
    pub angle: Vec<String>,
    /// `[name]`, `[/name]`.
    pub bracket: Vec<String>,
}

/// The words of [`CONTROL_TOKENS`], longest first (so `tool_calls` is
/// tried before `tool_call`).
pub(super) fn words() -> &'static Words {
    static WORDS: OnceLock<Words> = OnceLock::new();
    WORDS.get_or_init(|| {
        let mut angle = Vec::new();
        let mut bracket = Vec::new();
        for token in CONTROL_TOKENS.iter().flat_map(|f| f.tokens.iter()) {
            let bare = |t: &str| t.trim_start_matches('/').to_lowercase();
            if token.starts_with("<|") || token.starts_with("<｜") {
                continue;
            } else if let Some(inner) = token.strip_prefix('<').and_then(|t| t.strip_suffix('>')) {
                let inner = inner.trim_start_matches('<').trim_end_matches('>');
                angle.push(bare(inner));
            } else if let Some(inner) = token.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                bracket.push(bare(inner));
            }
        }
        for list in [&mut angle, &mut bracket] {
            list.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
            list.dedup();
        }
        Words { angle, bracket }
    })
}
