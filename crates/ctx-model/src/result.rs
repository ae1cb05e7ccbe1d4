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
    /// The generated content; empty unless completed. Under an `output`
    /// block, the cleaned text that checks, dependents and publishing see.
    #[serde(default)]
    pub output: String,
    /// The output as the engine wrote it, when an `output` block removed
    /// something from it (docs/plan-format.md, "Cleaned outputs"); absent
    /// when nothing was removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<String>,
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
            raw_output: None,
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
    #[schemars(with = "Option<String>")]
    pub finish_reason: Option<FinishReason>,
    /// Every call made for this task, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// The output was reused from an earlier run's identical task.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// What this execution of the task cost in US dollars, exact (see
    /// [`crate::money::Usd`]), written when the model's price is known: the
    /// server's reported usage priced, else ctx's exact prompt count and a
    /// count of the output; a call that failed without usage is charged
    /// its high end (the prompt plus `max_tokens`), since the provider may
    /// have billed it. Zero for a cached output or a task that failed
    /// before any call. docs/cost.md has the rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<crate::money::Usd>,
    /// What the provider's prompt cache saved on this execution's calls:
    /// their cost with every cache read and write the server reported billed
    /// at the input price, less `cost_usd`'s part for them (negative when
    /// cache writes cost more than the reads saved). Written only when a
    /// call reported a cache count and its price is known: absent is "not
    /// reported", never a saving of 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_saving_usd: Option<crate::money::Saving>,
    /// The `summarize_strategy: llm` calls made for this output, when any
    /// were needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryRecord>,
    /// Set on a row that restates the task's previous row with `llm`
    /// summary calls added (the executor stores a completed result before
    /// its summaries are written, so that a crash does not lose it, then
    /// stores it again with them): what those calls added to `cost_usd`.
    /// The rest of `cost_usd` was counted with the row restated, so a sum
    /// over a run's history counts only this for such a row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restated: Option<Restatement>,
    /// The results of the task's checks on its final attempt, in check
    /// order; empty when the task has no checks (or they were not run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::checks::CheckResult>,
    /// Every attempt of a checked task: its prompt, output and check
    /// results, the first attempt first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_attempts: Vec<CheckAttempt>,
    /// For an item of a map task: the hash of what it ran on (its filled
    /// task, the item in it, and its dependencies' outputs). `--resume`
    /// takes a stored item whose hash a new item has, under the new id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_item_hash: Option<String>,
    /// For a map task: how many items its list expanded to in the session
    /// that stored this row (0 when it did not expand there: its source
    /// gave no list, or it was skipped). The run's items are `TASK[0]` to
    /// `TASK[n-1]`; a stored item beyond them was left by an earlier,
    /// longer list. It is kept (a later list may match it by content
    /// hash), but no listing shows it as the run's and no dependent
    /// receives it ([`crate::map::is_current_item`]). Absent on rows
    /// stored before ctx recorded it: every stored item counts then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_items: Option<usize>,
    /// For a task whose prompt receives a map's items: the digest of what
    /// it received (each item's id, and its output or its failure note, in
    /// order). `--resume` takes such a task's stored result only when its
    /// items digest the same again; otherwise it runs. Absent for a task
    /// that receives no item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_inputs: Option<String>,
}

/// What a restating row ([`ResultMetadata::restated`]) added to the cost
/// of the row it restates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Restatement {
    /// The restated row's `cost_usd` (`None`: it was unpriced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restated_usd: Option<crate::money::Usd>,
    /// What the calls made since the restated row cost (`None`: one of
    /// them could not be priced, or the run had no prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_usd: Option<crate::money::Usd>,
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

/// One `judge` check's engine call, as its cost needs it.
///
/// Why it is recorded apart from the summed `judge_tokens_used`: a judge
/// may run on a `judge_model` priced differently from its task's model,
/// and a judge call that got no answer (an HTTP error after the engine's
/// retries, a timeout) reports no usage but may have been billed, so it is
/// charged like any unanswered call: its prompt plus its `max_tokens`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JudgeCall {
    /// The model asked (the check's `judge_model`, else the task's
    /// `params.model`); absent: the engine's default, as for the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The judge prompt's token count under the task's tokenizer.
    pub prompt_tokens: usize,
    /// The judge's `max_tokens`.
    pub max_tokens: u32,
    /// The answer's usage: the engine's, else ctx's count (the prompt, and
    /// the answer up to `max_tokens`). Absent: the call got no answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<TokenUsage>,
    /// Requests the engine made for this call, the answered one included
    /// (an HTTP engine retries; each request may be billed).
    pub requests: u32,
    /// Answered by `--cache`: nothing was billed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
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
    pub checks: Vec<crate::checks::CheckResult>,
    /// Usage of this attempt's call, as the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<TokenUsage>,
    /// Usage of the judge calls that checked this output, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_tokens_used: Option<TokenUsage>,
    /// Each judge call that checked this output, in check order: what it
    /// cost is priced from these, each at its own model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judge_calls: Vec<JudgeCall>,
    /// The engine's error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl TokenUsage {
    /// `self + other`, field by field (saturating); cache reads and cache
    /// writes add when either side reports them.
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_add(other.completion_tokens),
            total_tokens: self.total_tokens.saturating_add(other.total_tokens),
            cached_tokens: plus_reported(self.cached_tokens, other.cached_tokens),
            cache_write_tokens: plus_reported(self.cache_write_tokens, other.cache_write_tokens),
            partial: self.partial || other.partial,
            prompt_counted: self.prompt_counted || other.prompt_counted,
            // A sum of calls billed at one tier is billed at it; of calls
            // at several, at none (price each call on its own).
            service_tier: if self.service_tier == other.service_tier {
                self.service_tier
            } else {
                None
            },
        }
    }

    /// The sum of some usages; `None` when none is known.
    pub fn sum(usages: impl IntoIterator<Item = Option<TokenUsage>>) -> Option<TokenUsage> {
        usages.into_iter().flatten().reduce(TokenUsage::plus)
    }
}

/// Two counts an engine may leave unreported, added: `None` only when
/// neither side reports one, so "not reported" never reads as 0.
fn plus_reported(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
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
    /// Prompt tokens served from the engine's cache (cache reads), when
    /// reported: OpenAI's, vLLM's and llama.cpp's
    /// `prompt_tokens_details.cached_tokens`, Anthropic's
    /// `cache_read_input_tokens` as LiteLLM forwards it. Part of
    /// `prompt_tokens`. `None` is "not reported", never 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to the engine's cache, when reported
    /// (Anthropic's `cache_creation_input_tokens` as LiteLLM forwards it;
    /// part of `prompt_tokens`, as LiteLLM counts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// The engine reported only part of the usage (only `total_tokens`,
    /// say), so the prompt and completion tokens here are the worst case
    /// the report allows (docs/cost.md, "Partial usage"), not counts the
    /// server gave. Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// `prompt_tokens` is ctx's count of the prompt it assembled, not a
    /// figure the server reported (a partial usage that gave no prompt
    /// count, or none at all): the system message and the chat framing
    /// the request carried are not in it, so whoever prices the call adds
    /// them. A prompt part read off the server's counts (its
    /// `prompt_tokens`, or its `total_tokens` less the completion) has
    /// them already: adding them again recorded more than the budget had
    /// reserved for the call. Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_counted: bool,
    /// The tier the server says it billed the call at (OpenAI's
    /// `service_tier` in its answer; `batch` for a batch API's answer),
    /// when it said. The call is priced at that tier's rates
    /// ([`crate::ServiceTier`]). Written only when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<crate::ServiceTier>,
}

/// One call to an engine on behalf of a task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Attempt {
    /// 1 for the first call.
    pub number: u32,
    /// How long the call took.
    pub duration_ms: u64,
    /// `ok`, or a short class of failure (`timeout`, `http_429`, `exit_1`).
    #[schemars(with = "String")]
    pub outcome: CallOutcome,
    /// The failure's message, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the engine waited before the next attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    /// The provider batch the call went in (`ctx run --batch`); `None`
    /// for a real-time call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// The tier the server says it billed this call at, when the call
    /// answered and the server said (`batch` for a batch API's answer).
    /// The task's usage keeps the tier of the call that gave its output;
    /// this keeps each call's, so a task whose check failed once shows
    /// both of its answers' tiers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<crate::ServiceTier>,
    /// Why this call went at the standard tier when a cheaper one was
    /// asked for (a batch that did not answer in time, a flex request
    /// with no capacity); `None` for a call that went as asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_fallback: Option<crate::TierFallback>,
}

impl Attempt {
    /// A call that answered: attempt `number` (1 for the first), which
    /// took `duration_ms`, with no error and no wait after it. What every
    /// engine records for the call that gave its output.
    pub fn ok(number: u32, duration_ms: u64) -> Attempt {
        Attempt {
            number,
            duration_ms,
            outcome: CallOutcome::Ok,
            error: None,
            backoff_ms: None,
            batch_id: None,
            service_tier: None,
            tier_fallback: None,
        }
    }

    /// Numbers a task's calls 1, 2, ... in their order. Each request's
    /// engine numbers its own calls from 1, and a task whose checks failed
    /// makes one request per check attempt, so its list as the engines
    /// gave it restarts at 1 (`[1, 1]` for two attempts of one call each).
    pub fn number_in_order(calls: &mut [Attempt]) {
        for (i, call) in calls.iter_mut().enumerate() {
            call.number = u32::try_from(i + 1).unwrap_or(u32::MAX);
        }
    }
}

/// Why a model stopped generating, as an engine reports it.
///
/// The known reasons are variants, so code asks `== FinishReason::Length`
/// instead of comparing strings; whatever else a server sends is kept
/// verbatim in [`FinishReason::Other`]. Serialized as the plain string the
/// server sent (`"stop"`, `"length"`, `"content_filter"`, ...), so
/// results.json, the run store and the output cache hold the same bytes as
/// when this was a `String`. Parsing is exact (case-sensitive): a reason
/// that is not spelled as one of the known ones stays `Other` and is
/// written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// `stop`: a natural end or a stop sequence.
    Stop,
    /// `length`: cut short by `max_tokens` (or the context window).
    Length,
    /// `content_filter`: withheld by the provider's filter.
    ContentFilter,
    /// `tool_calls`: the model asked for tools.
    ToolCalls,
    /// `function_call`: the older form of `tool_calls`.
    FunctionCall,
    /// Anything else, exactly as the server sent it. Never one of the
    /// names above ([`FinishReason::from`] maps those to their variants).
    Other(String),
}

impl FinishReason {
    /// The reason as servers spell it.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::FunctionCall => "function_call",
            FinishReason::Other(s) => s,
        }
    }
}

impl From<&str> for FinishReason {
    fn from(s: &str) -> Self {
        match s {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            "tool_calls" => FinishReason::ToolCalls,
            "function_call" => FinishReason::FunctionCall,
            other => FinishReason::Other(other.to_string()),
        }
    }
}

impl From<String> for FinishReason {
    fn from(s: String) -> Self {
        match FinishReason::from(s.as_str()) {
            FinishReason::Other(_) => FinishReason::Other(s),
            known => known,
        }
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(FinishReason::from)
    }
}

/// How one call to an engine ended: [`Attempt::outcome`].
///
/// Every class an engine that ships with ctx reports is a variant; a
/// third-party engine's own class is kept verbatim in
/// [`CallOutcome::Other`]. Serialized as the short string it always was
/// (`ok`, `timeout`, `http_429`, `exit_1`, `check_failed`), parsed exactly,
/// so stored attempts and results.json are byte-identical to when this was
/// a `String` (property-tested).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// `ok`: the call answered.
    Ok,
    /// `timeout`: no answer within the request or task timeout.
    Timeout,
    /// `idle_timeout`: a stream stalled.
    IdleTimeout,
    /// `http_NNN`: the server answered with this error status.
    Http(u16),
    /// `exit_N`: the command engine's command exited with this status.
    Exit(i32),
    /// `signal_N`: the command was killed by this signal.
    Signal(i32),
    /// `output_too_large`: the output went over the output bound.
    OutputTooLarge,
    /// `check_failed`: the answer failed the task's checks.
    CheckFailed,
    /// `truncated`: the response body or stream ended early.
    Truncated,
    /// `malformed`: the response could not be read.
    Malformed,
    /// `empty_choices`: the response held no answer.
    EmptyChoices,
    /// `api_error`: the server reported an error in the body.
    ApiError,
    /// `stream_error`: the server reported an error mid-stream.
    StreamError,
    /// `connect`: the connection could not be made.
    Connect,
    /// `network`: the connection failed while in use.
    Network,
    /// `spawn_error`: the command engine could not start its command.
    SpawnError,
    /// `io_error`: reading from or writing to the command failed.
    IoError,
    /// Any other class, exactly as the engine wrote it. Never a name the
    /// variants above have ([`CallOutcome::from`] maps those).
    Other(String),
}

/// The empty class, as the `String` this replaced defaulted to (an
/// [`Attempt::default`] says nothing about how the call ended).
impl Default for CallOutcome {
    fn default() -> Self {
        CallOutcome::Other(String::new())
    }
}

impl CallOutcome {
    /// The short string stored and shown (`http_429`).
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        Cow::Borrowed(match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Timeout => "timeout",
            CallOutcome::IdleTimeout => "idle_timeout",
            CallOutcome::OutputTooLarge => "output_too_large",
            CallOutcome::CheckFailed => "check_failed",
            CallOutcome::Truncated => "truncated",
            CallOutcome::Malformed => "malformed",
            CallOutcome::EmptyChoices => "empty_choices",
            CallOutcome::ApiError => "api_error",
            CallOutcome::StreamError => "stream_error",
            CallOutcome::Connect => "connect",
            CallOutcome::Network => "network",
            CallOutcome::SpawnError => "spawn_error",
            CallOutcome::IoError => "io_error",
            CallOutcome::Http(s) => return Cow::Owned(format!("http_{s}")),
            CallOutcome::Exit(c) => return Cow::Owned(format!("exit_{c}")),
            CallOutcome::Signal(s) => return Cow::Owned(format!("signal_{s}")),
            CallOutcome::Other(s) => s,
        })
    }

    /// An HTTP client error (4xx) other than 429 (too many requests).
    pub fn is_client_error(&self) -> bool {
        matches!(self, CallOutcome::Http(s) if (400..500).contains(s) && *s != 429)
    }
}

/// `text` after `prefix` as a number, only when writing the number back
/// gives `text` again (so `http_0429` stays [`CallOutcome::Other`] and
/// round-trips unchanged).
fn numbered<T: std::str::FromStr + std::fmt::Display>(text: &str, prefix: &str) -> Option<T> {
    let n: T = text.strip_prefix(prefix)?.parse().ok()?;
    (format!("{prefix}{n}") == text).then_some(n)
}

impl From<&str> for CallOutcome {
    fn from(s: &str) -> Self {
        match s {
            "ok" => CallOutcome::Ok,
            "timeout" => CallOutcome::Timeout,
            "idle_timeout" => CallOutcome::IdleTimeout,
            "output_too_large" => CallOutcome::OutputTooLarge,
            "check_failed" => CallOutcome::CheckFailed,
            "truncated" => CallOutcome::Truncated,
            "malformed" => CallOutcome::Malformed,
            "empty_choices" => CallOutcome::EmptyChoices,
            "api_error" => CallOutcome::ApiError,
            "stream_error" => CallOutcome::StreamError,
            "connect" => CallOutcome::Connect,
            "network" => CallOutcome::Network,
            "spawn_error" => CallOutcome::SpawnError,
            "io_error" => CallOutcome::IoError,
            other => {
                if let Some(n) = numbered(other, "http_") {
                    CallOutcome::Http(n)
                } else if let Some(n) = numbered(other, "exit_") {
                    CallOutcome::Exit(n)
                } else if let Some(n) = numbered(other, "signal_") {
                    CallOutcome::Signal(n)
                } else {
                    CallOutcome::Other(other.to_string())
                }
            }
        }
    }
}

impl From<String> for CallOutcome {
    fn from(s: String) -> Self {
        match CallOutcome::from(s.as_str()) {
            CallOutcome::Other(_) => CallOutcome::Other(s),
            known => known,
        }
    }
}

impl PartialEq<str> for CallOutcome {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CallOutcome {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl Serialize for CallOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_str())
    }
}

impl<'de> Deserialize<'de> for CallOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(CallOutcome::from)
    }
}

#[cfg(test)]
mod call_outcome_tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classes_parse_to_variants() {
        assert_eq!(CallOutcome::from("ok"), CallOutcome::Ok);
        assert_eq!(CallOutcome::from("http_429"), CallOutcome::Http(429));
        assert_eq!(CallOutcome::from("exit_-1"), CallOutcome::Exit(-1));
        assert_eq!(CallOutcome::from("signal_9"), CallOutcome::Signal(9));
        assert_eq!(CallOutcome::from("check_failed"), CallOutcome::CheckFailed);
        assert_eq!(
            CallOutcome::from("http_0429"),
            CallOutcome::Other("http_0429".into())
        );
        assert_eq!(
            CallOutcome::from("http_99999"),
            CallOutcome::Other("http_99999".into())
        );
        assert!(CallOutcome::Http(404).is_client_error());
        assert!(!CallOutcome::Http(429).is_client_error());
        assert!(!CallOutcome::Http(500).is_client_error());
        assert_eq!(CallOutcome::Exit(3), "exit_3");
    }

    proptest! {
        #[test]
        fn any_class_round_trips_byte_for_byte(
            s in prop_oneof![".{0,20}", "(http|exit|signal)_-?[0-9]{0,6}"]
        ) {
            let json = serde_json::to_string(&s).unwrap();
            let outcome: CallOutcome = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(outcome.as_str(), s.as_str());
            prop_assert_eq!(serde_json::to_string(&outcome).unwrap(), json);
        }
    }
}

#[cfg(test)]
mod finish_reason_tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_reasons_are_variants_and_keep_their_spelling() {
        for (text, reason) in [
            ("stop", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("content_filter", FinishReason::ContentFilter),
            ("tool_calls", FinishReason::ToolCalls),
            ("function_call", FinishReason::FunctionCall),
        ] {
            assert_eq!(FinishReason::from(text), reason);
            assert_eq!(FinishReason::from(text.to_string()), reason);
            assert_eq!(
                serde_json::to_string(&reason).unwrap(),
                format!("\"{text}\"")
            );
        }
        assert_eq!(
            FinishReason::from("Length"),
            FinishReason::Other("Length".into()),
            "exact, so the stored text comes back unchanged"
        );
    }

    #[test]
    fn metadata_serializes_as_before() {
        let m: ResultMetadata =
            serde_json::from_str(r#"{"finish_reason":"eos_token","model":"m"}"#).unwrap();
        assert_eq!(
            m.finish_reason,
            Some(FinishReason::Other("eos_token".into()))
        );
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"model":"m","finish_reason":"eos_token"}"#
        );
    }

    proptest! {
        #[test]
        fn any_text_round_trips_byte_for_byte(s in ".{0,40}") {
            let json = serde_json::to_string(&s).unwrap();
            let reason: FinishReason = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(reason.as_str(), s.as_str());
            prop_assert_eq!(serde_json::to_string(&reason).unwrap(), json);
        }
    }
}
