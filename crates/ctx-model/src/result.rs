//! What executing a task produces, as stored by an `ExecutionStore`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a task stands in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started.
    Pending,
    /// Dispatched to an engine, no answer yet.
    InProgress,
    /// Finished with an output.
    Completed,
    /// Finished with an error.
    Failed,
    /// Not run because a dependency failed or the run was interrupted.
    Skipped,
}

impl TaskStatus {
    /// The status as written in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Skipped => "skipped",
        }
    }

    /// Whether the task will not change again in this run.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Skipped
        )
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The design's `TaskExecutionResult`, extended with the prompt actually
/// sent and the error of a failed task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskExecutionResult {
    /// The task's id.
    pub task_id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// The generated content; empty unless completed.
    #[serde(default)]
    pub output: String,
    /// A short summary injected downstream instead of `output` when
    /// `include_full_output` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why the task failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The exact prompt sent to the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Timing, tokens, model and attempts.
    #[serde(default)]
    pub metadata: ResultMetadata,
}

impl TaskExecutionResult {
    /// A result with `status` and nothing else yet.
    pub fn new(task_id: impl Into<String>, status: TaskStatus) -> Self {
        TaskExecutionResult {
            task_id: task_id.into(),
            status,
            output: String::new(),
            summary: None,
            error: None,
            prompt: None,
            metadata: ResultMetadata::default(),
        }
    }
}

/// What is known about how a result was produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResultMetadata {
    /// Wall time from dispatch to result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_time_ms: Option<u64>,
    /// Tokens in the assembled prompt, counted by ctx with the task's
    /// tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
    /// The tokenizer `prompt_tokens` was counted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Usage as reported by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<TokenUsage>,
    /// The model that answered, as the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why generation stopped (`stop`, `length`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Every call made for this task, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// The output was reused from an earlier run's identical task.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The results of the task's checks on its final attempt, in check
    /// order; empty when the task has no checks (or they were not run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<ctx_checks::CheckResult>,
    /// Every attempt of a checked task: its prompt, output and check
    /// results, the first attempt first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_attempts: Vec<CheckAttempt>,
}

/// One attempt of a task with checks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckAttempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// The exact prompt sent (from the second attempt on, with the
    /// feedback section).
    pub prompt: String,
    /// Its token count under the task's tokenizer.
    pub prompt_tokens: usize,
    /// What the engine answered; empty when the call failed.
    pub output: String,
    /// The check results of this output.
    #[serde(default)]
    pub checks: Vec<ctx_checks::CheckResult>,
    /// Usage of this attempt's call, as the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<TokenUsage>,
    /// Usage of the judge calls that checked this output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_tokens_used: Option<TokenUsage>,
    /// The engine's error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl TokenUsage {
    /// `self + other`, field by field (saturating); cached tokens add when
    /// either side reports them.
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_add(other.completion_tokens),
            total_tokens: self.total_tokens.saturating_add(other.total_tokens),
            cached_tokens: match (self.cached_tokens, other.cached_tokens) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            },
        }
    }

    /// The sum of some usages; `None` when none is known.
    pub fn sum(usages: impl IntoIterator<Item = Option<TokenUsage>>) -> Option<TokenUsage> {
        usages.into_iter().flatten().reduce(TokenUsage::plus)
    }
}

/// Token usage reported by an engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenUsage {
    /// Tokens the engine read.
    pub prompt_tokens: u64,
    /// Tokens the engine generated.
    pub completion_tokens: u64,
    /// `prompt_tokens + completion_tokens` unless the engine says otherwise.
    pub total_tokens: u64,
    /// Prompt tokens served from the engine's cache, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// One call to an engine on behalf of a task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Attempt {
    /// 1 for the first call.
    pub number: u32,
    /// How long the call took.
    pub duration_ms: u64,
    /// `ok`, or a short class of failure (`timeout`, `http_429`, `exit_1`).
    pub outcome: String,
    /// The failure's message, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the engine waited before the next attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
}
