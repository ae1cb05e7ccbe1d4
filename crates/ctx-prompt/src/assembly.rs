//! Prompt assembly for plan tasks: entity block, dependency block, original
//! prompt, under a token cap.
//!
//! (Signature pinned; the capped implementation is being written.)

use ctx_model::{Plan, SubTask};
use ctx_tokens::{TokenCounter, Tokenizer};

/// One finished dependency, as the executor hands it over.
#[derive(Debug, Clone, Copy)]
pub struct DependencyOutput<'a> {
    /// The dependency's task id.
    pub task_id: &'a str,
    /// The dependency's description.
    pub description: &'a str,
    /// Its full output.
    pub output: &'a str,
    /// Its summary, used instead of `output` when
    /// `config.dependency.include_full_output` is false.
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
}

/// Why a prompt could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    /// The task's own prompt is over the cap before any context is added.
    #[error("task `{task_id}`: params.prompt alone is {prompt_tokens} tokens, over max_prompt_tokens {cap}")]
    PromptOverCap {
        /// The task.
        task_id: String,
        /// Tokens of the original prompt.
        prompt_tokens: usize,
        /// The cap.
        cap: usize,
    },
}

/// The tokenizer for `task`: `config.tokenizer` when set (validation has
/// checked the name), else the one `params.model` implies.
pub fn tokenizer_for_task(plan: &Plan, task: &SubTask) -> Tokenizer {
    plan.config
        .tokenizer
        .as_deref()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| Tokenizer::for_model(task.tool_or_prompt.params.model.as_deref().unwrap_or("")))
}

/// Assembles `task`'s final prompt from the plan's entities and the
/// dependency outputs, within `max_prompt_tokens` as counted by `counter`.
pub fn assemble_task_prompt(
    plan: &Plan,
    task: &SubTask,
    dependencies: &[DependencyOutput<'_>],
    counter: &dyn TokenCounter,
    max_prompt_tokens: usize,
) -> Result<AssembledPrompt, AssemblyError> {
    let _ = (plan, dependencies, max_prompt_tokens);
    let text = task.tool_or_prompt.params.prompt.clone();
    Ok(AssembledPrompt {
        tokens: counter.count(&text),
        tokenizer: counter.name().to_string(),
        text,
        shortened_dependencies: Vec::new(),
        dropped_entities: Vec::new(),
    })
}
