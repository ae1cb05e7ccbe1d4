//! Prompt assembly for plan tasks: entity block, dependency block, original
//! prompt, under a token cap.
//!
//! # The shape
//!
//! The final prompt is byte-for-byte the shape of section 8 of the
//! originating design: blocks joined by one blank line (`\n\n`), each block
//! left out entirely when it would be empty.
//!
//! ```text
//! ## Entity Constraints and Values
//! - Game Area Dimensions: 10 wide x 20 high (constraint)
//! - Output Format: Single standalone HTML file (constraint)
//!
//! ## Outputs from Dependent Tasks
//!
//! ### Task 1: Generate the complete HTML structure...
//! **Output:**
//! <!DOCTYPE html>
//! ...
//!
//! ---
//!
//! Generate CSS styles to be embedded in the <style> tag...
//! ```
//!
//! * An entity line is `- {entity_name}: {grounded_value} ({intent_relevance})`.
//!   When `config.entities.include_entity_type` is true and the plan entity
//!   has a `type`, the type follows the name in square brackets:
//!   `- Board [constraint]: 10 x 20 (constraint)`. A missing
//!   `grounded_value` leaves out `: {grounded_value}`; a missing
//!   `intent_relevance` leaves out ` ({intent_relevance})`.
//! * Each dependency is `### Task {id}: {description}`, `**Output:**`, its
//!   output (trailing line breaks removed), a blank line and `---`;
//!   dependencies follow each other separated by a blank line, in the order
//!   the executor hands them over.
//!
//! # The cap
//!
//! When the prompt is over `max_prompt_tokens`, [`assemble_task_prompt`]
//! shrinks it in a fixed order, never touching the task's own prompt:
//!
//! 1. **Dependency outputs, largest first** ("water filling"): a level `L`
//!    is chosen so that cutting every output above `L` tokens down to `L`
//!    removes the excess; each such output keeps its longest prefix (found
//!    by binary search on character boundaries, preferring to end at
//!    whitespace) that fits `L` tokens together with the `...` marker. Only
//!    the outputs that change are counted again.
//! 2. **Entities, lowest relevance first** (ties: the later one first),
//!    dropped whole; the entity block disappears with its last line.
//!
//! After each round one exact count of the whole prompt decides; a round
//! that fell short (token counts are not exactly additive across joins)
//! lowers the level further. If even the smallest prompt (every output
//! reduced to `...`, no entities) is over the cap, assembly fails: with
//! [`AssemblyError::PromptOverCap`] when the task's prompt alone is over,
//! else with [`AssemblyError::ContextOverCap`].
//!
//! # Where each part lives
//!
//! * `format`: the shape — entity lines and the rendering of the blocks.
//! * `shorten`: the per-output `summarize_strategy` rules
//!   ([`shorten_output`], [`extract_key_sections`]).
//! * `fit`: the cap — [`assemble_task_prompt`], the water-filling cut of
//!   dependency outputs and the entity drop order ([`cut_to_tokens`]).
//!
//! Everything public is re-exported here, so `ctx_prompt::assembly::X`
//! and `ctx_prompt::X` name the same items as before the split.

use ctx_model::{Plan, SubTask};
use ctx_tokens::{Tokenizer, UnknownTokenizer};

mod fit;
mod format;
mod layout;
mod shorten;

pub use fit::{assemble_task_prompt, cut_to_tokens};
pub use format::entity_line;
pub use shorten::{extract_key_sections, shorten_output};

/// Heading of the entity block.
pub const ENTITY_HEADING: &str = "## Entity Constraints and Values";
/// Heading of the dependency block.
pub const DEPENDENCY_HEADING: &str = "## Outputs from Dependent Tasks";
/// Marker appended to a shortened dependency output.
pub const ELLIPSIS: &str = "...";

/// One finished dependency, as the executor hands it over.
#[derive(Debug, Clone, Copy)]
pub struct DependencyOutput<'a> {
    /// The dependency's task id.
    pub task_id: &'a str,
    /// The dependency's description.
    pub description: &'a str,
    /// Its full output.
    pub output: &'a str,
    /// Its summary for this dependent (the shared one, or the one written
    /// for this dependent under `summary_focus: dependent`). Used instead
    /// of `output` when `config.dependency.include_full_output` is false,
    /// and whenever given under `summarize_strategy: llm` (the executor
    /// writes one only for an output over `max_output_length`).
    pub summary: Option<&'a str>,
}

/// A prompt ready for an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembledPrompt {
    /// The exact text to send.
    pub text: String,
    /// Its exact token count under `tokenizer`.
    pub tokens: usize,
    /// The tokenizer's name.
    pub tokenizer: String,
    /// Dependency task ids whose outputs were shortened to meet the cap.
    pub shortened_dependencies: Vec<String>,
    /// Entity names dropped to meet the cap.
    pub dropped_entities: Vec<String>,
    /// Where the blocks before the task's own prompt end in `text`.
    pub block_ends: BlockEnds,
}

/// Where the blocks of an assembled prompt end, in bytes of its text: a
/// provider's cache breakpoint goes there (ctx-model's `prompt_cache`),
/// and the shared prefix a cache key names ends there. Each end includes
/// the blank line after its block, so the next block starts at it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockEnds {
    /// The end of the entity block (0 without one).
    pub entities: usize,
    /// The end of the dependency block, where the task's own prompt
    /// starts (the entity block's end without dependencies).
    pub dependencies: usize,
}

/// Why a prompt could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    /// The task's own prompt is over the cap before any context is added.
    #[error(
        "task `{task_id}`: params.prompt alone is {prompt_tokens} tokens, over max_prompt_tokens {cap}"
    )]
    PromptOverCap {
        /// The task.
        task_id: String,
        /// Tokens of the original prompt.
        prompt_tokens: usize,
        /// The cap.
        cap: usize,
    },
    /// The task's prompt fits, but not together with the scaffolding that
    /// cannot be shrunk (the dependency headings with every output reduced
    /// to `...`).
    #[error(
        "task `{task_id}`: params.prompt is {prompt_tokens} tokens, but with the dependency headings \
         (every output cut to `...`, no entities) the prompt is still {minimum_tokens} tokens, over max_prompt_tokens {cap}"
    )]
    ContextOverCap {
        /// The task.
        task_id: String,
        /// Tokens of the original prompt.
        prompt_tokens: usize,
        /// Tokens of the smallest prompt assembly can build.
        minimum_tokens: usize,
        /// The cap.
        cap: usize,
    },
}

/// The tokenizer for `task`: `config.tokenizer` when set, else the one
/// `params.model` implies.
///
/// A `config.tokenizer` that names no known tokenizer is an error, not a
/// quiet switch to the model's tokenizer: validation reports it with its
/// line, and a plan that skipped validation meets it here, before a
/// single token is counted with the wrong table.
///
/// ```
/// let mut plan: ctx_model::Plan = serde_json::from_str(r#"{"schema_version": 1,
///   "sub_tasks": [{"id": "a", "description": "A",
///     "tool_or_prompt": {"name": "inference", "params": {"prompt": "Go.", "model": "gpt-4o"}}}]}"#).unwrap();
/// let task = plan.sub_tasks[0].clone();
/// assert_eq!(ctx_prompt::tokenizer_for_task(&plan, &task).unwrap(), ctx_tokens::Tokenizer::O200kBase);
/// plan.config.tokenizer = Some("nope".into());
/// let err = ctx_prompt::tokenizer_for_task(&plan, &task).unwrap_err();
/// assert_eq!(err.name, "nope");
/// ```
pub fn tokenizer_for_task(plan: &Plan, task: &SubTask) -> Result<Tokenizer, UnknownTokenizer> {
    Ok(plan.config.parsed_tokenizer()?.unwrap_or_else(|| {
        Tokenizer::for_model(task.tool_or_prompt.params.model.as_deref().unwrap_or(""))
    }))
}
