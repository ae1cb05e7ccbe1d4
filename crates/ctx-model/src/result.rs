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
    /// `include_full_output` is false, and under `summarize_strategy: llm`
    /// when the output is over `max_output_length`. Written by the
    /// executor under `summary_focus: output`; per-dependent summaries
    /// live in [`ResultMetadata::summary`].
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
    /// What this execution of the task cost in US dollars, exact (see
    /// [`ctx_cost::Usd`]), written when the model's price is known: the
    /// server's reported usage priced, else ctx's exact prompt count and a
    /// count of the output; a call that failed without usage is charged
    /// its high end (the prompt plus `max_tokens`), since the provider may
    /// have billed it. Zero for a cached output or a task that failed
    /// before any call. docs/cost.md has the rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<ctx_cost::Usd>,
    /// The `summarize_strategy: llm` calls made for this output, when any
    /// were needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryRecord>,
    /// The results of the task's checks on its final attempt, in check
    /// order; empty when the task has no checks (or they were not run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<ctx_checks::CheckResult>,
    /// Every attempt of a checked task: its prompt, output and check
    /// results, the first attempt first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_attempts: Vec<CheckAttempt>,
}

/// The `llm` summaries of one task's output: every call made, and whether
/// any fell back to `truncate`.
///
/// # Why the summaries live on the producing result
///
/// Under `summary_focus: dependent` there is one summary per
/// (producer, dependent) edge. They are kept here, keyed by the dependent's
/// id, rather than on the dependents' results, because:
///
/// * the producing result is what `--resume` reuses: a dependent that is
///   run again (failed, forced, interrupted) gets the stored summary back
///   without another call, while its own row is rewritten at every dispatch;
/// * a summary is computed *before* its dependent is dispatched, when the
///   dependent has no result yet;
/// * the store keeps metadata as JSON, so one row per task still holds
///   everything and no store schema changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummaryRecord {
    /// `output` (one shared summary, its text in
    /// [`TaskExecutionResult::summary`]) or `dependent`.
    pub focus: String,
    /// The calls, in the order they were made (dependents in plan order).
    pub calls: Vec<SummaryCall>,
}

impl SummaryRecord {
    /// Whether any call fell back to `truncate`.
    pub fn fallback(&self) -> bool {
        self.calls.iter().any(|c| c.fallback)
    }

    /// The summary written for dependent `id` under `summary_focus:
    /// dependent`, when its call succeeded.
    pub fn text_for(&self, id: &str) -> Option<&str> {
        self.calls
            .iter()
            .find(|c| c.dependent.as_deref() == Some(id))
            .and_then(|c| c.text.as_deref())
    }

    /// Whether a call for dependent `id` (`None`: the shared one) was
    /// already made, successful or not.
    pub fn has_call_for(&self, id: Option<&str>) -> bool {
        self.calls.iter().any(|c| c.dependent.as_deref() == id)
    }
}

/// One summary call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummaryCall {
    /// The dependent whose prompt was the focus (`summary_focus:
    /// dependent`); absent for the shared summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependent: Option<String>,
    /// The summary, for a per-dependent call that succeeded (the shared
    /// summary's text is the result's `summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The model asked (`summary_model`, else the task's model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Usage as reported by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<TokenUsage>,
    /// Wall time of the call, retries included.
    pub execution_time_ms: u64,
    /// Every engine attempt, the last one deciding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// Answered by `--cache`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The answer was longer than `summary_max_tokens` and was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// The call failed: dependents get the `truncate` form instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fallback: bool,
    /// Why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
