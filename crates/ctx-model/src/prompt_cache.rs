//! What ctx tells a provider about its prefix cache (issue 24):
//! `config.cache_key`, `config.cache_breakpoints` and `config.cache_warm_up`.
//!
//! A layout ([`crate::PromptLayout`]) makes calls share a byte-identical
//! prefix; these settings help the provider find it:
//!
//! * **`cache_key: auto`** sets OpenAI's `prompt_cache_key` on every call
//!   that has a shared prefix, one key per prefix: calls sending the same
//!   prefix carry the same key, so the provider routes them to the same
//!   cache. The key is a hash of the prefix itself (never of a run id or a
//!   time), so the same plan gives the same keys in every run, taken with
//!   each secret variable's text shown as `[secret NAME]` (a key is sent
//!   where the prompt is not; see ctx-deps' `prompt_cache`). A task's
//!   own `params.prompt_cache_key` wins.
//! * **`cache_breakpoints`** puts Anthropic's `cache_control: {type:
//!   ephemeral}` breakpoints into the messages, as LiteLLM accepts them in
//!   OpenAI-format content parts, after the blocks it names. Anthropic
//!   caches nothing without a breakpoint and refuses more than
//!   [`MAX_BREAKPOINTS`] per request, so asking for more is a plan error
//!   (`ctx plan check`), located at the field.
//!
//! * **`cache_warm_up: K`** makes a burst of calls that share a prefix
//!   (at least `K` ready at once: a map's items) wait for one of them:
//!   it goes first, and the others follow when its first token arrives,
//!   so they find the prefix in the provider's cache instead of all
//!   computing it at once (ctx-deps' `warm_up`).
//!
//! They are off unless the plan sets them, and a plan that leaves them out
//! serializes, hashes and resumes byte for byte as before they existed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Anthropic's limit on `cache_control` breakpoints in one request.
pub const MAX_BREAKPOINTS: usize = 4;

/// The fewest calls `config.cache_warm_up` may name: the one that warms
/// the cache and one that uses it.
pub const MIN_WARM_UP_CALLS: usize = 2;

/// The shortest shared prefix, in tokens, worth a warm-up: OpenAI's
/// minimum for a cache hit (the default of `ctx plan cost
/// --cache-min-tokens`, whose prediction counts from it too). A call whose
/// shared prefix is shorter is served from no provider's cache ctx knows
/// of, so its siblings are not held for it.
pub const WARM_UP_MIN_TOKENS: usize = 1024;

/// `config.cache_key`: whether ctx sets `prompt_cache_key`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheKey {
    /// No key, unless a task's params set one (the default).
    #[default]
    None,
    /// One key per shared prefix, a hash of the prefix
    /// (`ctx-` and 16 hex digits of its SHA-256).
    Auto,
}

impl CacheKey {
    /// Whether this is the default (`none`), which a serialized plan
    /// leaves out.
    pub fn is_none(&self) -> bool {
        *self == CacheKey::None
    }
}

/// `config.cache_breakpoints`: where Anthropic breakpoints go, and for
/// which models.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CacheBreakpoints {
    /// Which models get them (default `anthropic`).
    #[serde(default)]
    pub models: BreakpointModels,
    /// After which blocks, at most [`MAX_BREAKPOINTS`] (default
    /// `[shared]`). A block a call does not have gets no breakpoint.
    #[serde(default = "default_after")]
    pub after: Vec<Breakpoint>,
}

fn default_after() -> Vec<Breakpoint> {
    vec![Breakpoint::Shared]
}

impl Default for CacheBreakpoints {
    fn default() -> Self {
        CacheBreakpoints {
            models: BreakpointModels::default(),
            after: default_after(),
        }
    }
}

/// The models a call's breakpoints are sent to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BreakpointModels {
    /// The models LiteLLM serves from Anthropic, decided by the model's
    /// name as the request sends it ([`BreakpointModels::applies_to`]).
    #[default]
    Anthropic,
    /// Every model (a proxy that maps other names to Anthropic models).
    All,
}

impl BreakpointModels {
    /// Whether a call to `model` gets breakpoints. Under `anthropic`: a
    /// name LiteLLM routes to Anthropic's API, by its provider prefix
    /// (`anthropic/…`), or a name holding `claude` (LiteLLM's bare
    /// `claude-…` names, and Anthropic's models on Bedrock and Vertex,
    /// which accept the same `cache_control`). Case is ignored.
    ///
    /// ```
    /// use ctx_model::prompt_cache::BreakpointModels;
    /// let a = BreakpointModels::Anthropic;
    /// assert!(a.applies_to("anthropic/claude-sonnet-4-5"));
    /// assert!(a.applies_to("claude-3-5-haiku-latest"));
    /// assert!(a.applies_to("bedrock/anthropic.claude-3-haiku"));
    /// assert!(!a.applies_to("gpt-4o-mini"));
    /// assert!(BreakpointModels::All.applies_to("gpt-4o-mini"));
    /// ```
    pub fn applies_to(self, model: &str) -> bool {
        match self {
            BreakpointModels::All => true,
            BreakpointModels::Anthropic => {
                let model = model.to_ascii_lowercase();
                model.starts_with("anthropic/") || model.contains("claude")
            }
        }
    }
}

/// A place in a call's messages where a breakpoint can go: after the
/// block it names. The blocks come in this order in every call
/// (docs/prompts.md, "Layout for the provider's prefix cache").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Breakpoint {
    /// The system message.
    System,
    /// The entity block.
    Entities,
    /// The dependency block.
    Dependencies,
    /// The last block calls share: the dependency block (or the entity
    /// block without one), and for a map's item the item's prompt up to
    /// its placeholder, which every item of the map shares.
    Shared,
    /// The task's own prompt (the end of the first attempt's message; a
    /// check retry's feedback follows it).
    Prompt,
}

impl CacheBreakpoints {
    /// The problem with `after`, if any: more than [`MAX_BREAKPOINTS`]
    /// entries, or one named twice.
    pub fn problem(&self) -> Option<String> {
        if self.after.len() > MAX_BREAKPOINTS {
            return Some(format!(
                "{} breakpoints asked for; a request holds at most {MAX_BREAKPOINTS} (Anthropic's limit)",
                self.after.len()
            ));
        }
        let mut seen = self.after.clone();
        seen.sort_unstable();
        seen.windows(2).find(|w| w[0] == w[1]).map(|w| {
            format!(
                "{} is named twice",
                serde_json::to_value(w[0])
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            )
        })
    }
}
