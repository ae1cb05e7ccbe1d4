//! The order a call's blocks are laid out in (`config.layout`).
//!
//! Providers serve a repeated prompt *prefix* from cache (OpenAI from
//! 1,024 tokens, Anthropic through `cache_control`, vLLM, SGLang and
//! llama.cpp through automatic prefix caching), and a hit needs the
//! prefix to be byte-identical. The design's order already puts the
//! blocks ctx assembles before the task's own prompt; `cache` goes one
//! step further and orders what is shared by many calls by something every
//! call agrees on (the plan), not by what each task happens to list
//! first. The layout changes the order of blocks only, never what a prompt
//! contains (docs/prompts.md, "Layout for the provider's prefix cache").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `config.layout`: how a call's blocks are ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PromptLayout {
    /// The design's order: the entity block in the order of the task's
    /// `entity_context`, the dependency outputs in the order of its
    /// `dependencies`, then the task's own prompt.
    #[default]
    Design,
    /// Most shared first, for the provider's prefix cache: the entity
    /// block in the order of the plan's `entities`, the dependency
    /// outputs in the plan order of the tasks that produced them, then
    /// the task's own prompt.
    Cache,
}

impl PromptLayout {
    /// The layout as written in plans and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            PromptLayout::Design => "design",
            PromptLayout::Cache => "cache",
        }
    }

    /// Whether this is the default (`design`), which a serialized plan
    /// leaves out so that plans written before the setting existed
    /// serialize, hash and resume byte for byte as they did.
    pub fn is_design(&self) -> bool {
        *self == PromptLayout::Design
    }
}

impl PromptLayout {
    /// A task's dependencies (plan indexes, in the order its
    /// `dependencies` lists them) in the order its dependency block lists
    /// their outputs: as listed under `design`; in plan order under
    /// `cache`, so two tasks sharing dependencies get the same block
    /// whatever order each lists them in.
    ///
    /// ```
    /// use ctx_model::PromptLayout;
    /// assert_eq!(PromptLayout::Design.dependency_order([3, 0, 2]), [3, 0, 2]);
    /// assert_eq!(PromptLayout::Cache.dependency_order([3, 0, 2]), [0, 2, 3]);
    /// ```
    ///
    /// `listed` is any iterator, so that the dependency graph's own
    /// (`DependencyGraph::dependencies`) is collected once, here.
    pub fn dependency_order(self, listed: impl IntoIterator<Item = usize>) -> Vec<usize> {
        let mut order: Vec<usize> = listed.into_iter().collect();
        if self == PromptLayout::Cache {
            order.sort_unstable();
        }
        order
    }
}
