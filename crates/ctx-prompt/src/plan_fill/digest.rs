//! The digest a plan's `{{HISTORICAL_CONTEXT}}` is filled with: the
//! plan's `history:` block under `ctx history`'s overrides, computed once
//! per run.

use std::path::{Path, PathBuf};

use ctx_history::{Digest, DigestRequest, HistoryConfig, HistoryError};
use ctx_model::{HISTORICAL_CONTEXT, Plan};
use ctx_tokens::{TokenCounter, TokenizerExt};

use super::template_fields;

/// The digest settings of one run, each as `ctx history` names it. Given
/// by a caller, they override the plan's `history:` block
/// ([`plan_history`]); returned by it, they are the two merged, with the
/// plan's paths resolved against the plan file's directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DigestSettings {
    /// The archive.
    pub content_root: Option<PathBuf>,
    /// The analysis date, as text (`ctx history` parses it).
    pub date: Option<String>,
    /// The prompt budget the digest takes its share of.
    pub prompt_budget: Option<usize>,
    /// The digest's share of the budget.
    pub share: Option<f64>,
    /// The word cap.
    pub max_words: Option<usize>,
    /// A history config file.
    pub config: Option<PathBuf>,
}

/// The plan's `history:` block with `overrides` on top, each of the
/// plan's paths joined to `plan_dir` (a path given by the caller is taken
/// as given: it is relative to the working directory). `None` when
/// neither names a content root: there is no archive to read.
pub fn plan_history(
    plan: &Plan,
    plan_dir: &Path,
    overrides: &DigestSettings,
) -> Option<DigestSettings> {
    let block = plan.history.clone().unwrap_or_default();
    let from_plan = |p: Option<String>| p.map(|p| plan_dir.join(p));
    let merged = DigestSettings {
        content_root: overrides
            .content_root
            .clone()
            .or_else(|| from_plan(block.content_root)),
        date: overrides.date.clone().or(block.date),
        prompt_budget: overrides.prompt_budget.or(block.prompt_budget),
        share: overrides.share.or(block.share),
        max_words: overrides.max_words.or(block.max_words),
        config: overrides.config.clone().or_else(|| from_plan(block.config)),
    };
    merged.content_root.is_some().then_some(merged)
}

/// The larger of several tokenizers' counts: the digest is computed once
/// per run and fills tasks that may count with different tokenizers, so
/// its cap must hold under each of them.
struct LargestCount(Vec<std::sync::Arc<dyn TokenCounter>>, String);

impl TokenCounter for LargestCount {
    fn name(&self) -> &str {
        &self.1
    }
    fn count(&self, text: &str) -> usize {
        self.0.iter().map(|c| c.count(text)).max().unwrap_or(0)
    }
    fn upper_bound(&self, text: &str) -> usize {
        self.0
            .iter()
            .map(|c| c.upper_bound(text))
            .max()
            .unwrap_or(0)
    }
}

/// The fenced digest ([`crate::fenced_digest`]) for `plan`: its caps hold
/// under the tokenizer of every task that uses `{{HISTORICAL_CONTEXT}}`
/// (the history config's tokenizer when none does), counted with the
/// largest of their counts.
pub fn plan_digest(
    plan: &Plan,
    config: &HistoryConfig,
    request: &DigestRequest,
) -> Result<Digest, HistoryError> {
    let mut tokenizers = Vec::new();
    for f in template_fields(plan) {
        if let Some(i) = f.task
            && !f.publish
            && f.template.names().contains(HISTORICAL_CONTEXT)
        {
            let task = &plan.sub_tasks[i];
            let t = crate::tokenizer_for_task(plan, task).unwrap_or(config.tokenizer);
            if !tokenizers.contains(&t) {
                tokenizers.push(t);
            }
        }
    }
    if tokenizers.is_empty() {
        tokenizers.push(config.tokenizer);
    }
    let name = tokenizers
        .iter()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join("+");
    let counter = LargestCount(tokenizers.iter().map(|t| t.counter()).collect(), name);
    crate::fenced_digest(config, request, &counter)
}
