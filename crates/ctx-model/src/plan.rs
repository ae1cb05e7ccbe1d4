//! The plan: a goal, the entities it is grounded in, and a DAG of sub-tasks.
//!
//! Field names follow the originating design (`entity_context`,
//! `grounded_value`, `tool_or_prompt`) so plans written for it load as they
//! are. Every struct except [`Params`] has a closed set of fields: a typo
//! such as `dependancies` must fail loudly, not silently drop every edge of
//! the DAG. The derived `Deserialize` skips unknown keys so that
//! [`parse_plan_with_unknown_fields`](crate::parse_plan_with_unknown_fields)
//! can collect all of them; read plans through it or
//! [`parse_plan`](crate::parse_plan) (which refuses them), not through
//! `serde_json::from_str` alone. The JSON Schema says
//! `additionalProperties: false` for each of them.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only plan schema version this build reads.
pub const SCHEMA_VERSION: u32 = 1;

/// A task decomposition: entities plus sub-tasks that depend on each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Plan {
    /// Always `1` for this format, written as a number.
    #[serde(deserialize_with = "schema_version_number")]
    #[schemars(with = "u32", extend("const" = 1))]
    pub schema_version: u32,
    /// What the whole plan is for; informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// Named facts the plan is grounded in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<Entity>,
    /// The tasks, in any order; `dependencies` define the DAG.
    pub sub_tasks: Vec<SubTask>,
    /// How prompts are assembled and bounded.
    #[serde(default)]
    pub config: PlanConfig,
    /// Values given at run time (`ctx run PLAN --var NAME=VALUE`) and used
    /// as `{{NAME}}` in task prompts, systems and entity values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<crate::variables::Variable>,
    /// The digest that fills `{{HISTORICAL_CONTEXT}}`; `ctx history`'s
    /// flags override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::variables::HistorySettings>,
}

/// How many times [`Plan::task`] scanned a plan in this process (debug
/// builds only): the regression tests of the scale fix assert that
/// running a plan scans it no time per task.
#[cfg(debug_assertions)]
static TASK_SCANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The number of linear [`Plan::task`] scans made so far in this process.
/// Debug builds only; for tests that pin an O(1) lookup path.
#[doc(hidden)]
#[cfg(debug_assertions)]
pub fn task_scans() -> u64 {
    TASK_SCANS.load(std::sync::atomic::Ordering::Relaxed)
}

/// A plan's tasks by id ([`Plan::task_index`]): O(1) lookups for code
/// that looks up an id per task or per dependency.
#[derive(Debug, Clone)]
pub struct TaskIndex<'p> {
    plan: &'p Plan,
    by_id: HashMap<&'p str, usize>,
}

impl<'p> TaskIndex<'p> {
    /// The task with this id.
    pub fn get(&self, id: &str) -> Option<&'p SubTask> {
        self.position(id).and_then(|i| self.plan.sub_tasks.get(i))
    }

    /// The task's position in `sub_tasks`.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// Whether the plan has a task with this id.
    pub fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }
}

/// Reads `schema_version` as a number only. serde-saphyr converts a quoted
/// YAML scalar to a number when the field asks for one, so `"1"` would pass
/// where JSON refuses it; asking for whatever the text holds makes both
/// formats refuse text with the same located type error.
fn schema_version_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    struct Number;
    impl serde::de::Visitor<'_> for Number {
        type Value = u32;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a version number such as 1 (not text)")
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v)
                .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
        }
    }
    d.deserialize_any(Number)
}

/// A named fact with the value the plan is grounded in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Entity {
    /// Unique name, referenced by `entity_context[].entity_name`.
    pub name: String,
    /// A kind such as `constraint` or `feature_list`; shown in prompts when
    /// `config.entities.include_entity_type` is true.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub entity_type: Option<String>,
    /// Why the entity matters to the goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// The value, when it is one string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounded_value: Option<String>,
    /// The values, when there are several; joined with `, ` in prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounded_values: Option<Vec<String>>,
    /// A Rust `regex` pattern an `entities` check looks for instead of the
    /// value, for entities whose value is prose no literal search can find
    /// (docs/checks.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub check: Option<String>,
}

impl Entity {
    /// The entity's value as it appears in a prompt: `grounded_value`, else
    /// `grounded_values` joined with `, `.
    pub fn grounded_value_text(&self) -> Option<String> {
        match (&self.grounded_value, &self.grounded_values) {
            (Some(v), _) => Some(v.clone()),
            (None, Some(vs)) if !vs.is_empty() => Some(vs.join(", ")),
            _ => None,
        }
    }
}

/// One node of the DAG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SubTask {
    /// Unique, non-empty id. Ids name output files (`prompts/{id}.md`),
    /// so they may not contain `/`, `\` or control characters.
    #[schemars(length(min = 1, max = 128))]
    pub id: String,
    /// One line; shown as `### Task {id}: {description}` downstream.
    #[schemars(length(min = 1))]
    pub description: String,
    /// Ids of tasks whose outputs this task needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// The entities this task must respect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entity_context: Vec<EntityContext>,
    /// What runs the task.
    pub tool_or_prompt: ToolOrPrompt,
    /// How this task receives its dependencies' outputs, overriding
    /// `config.dependency` for this task only.
    #[serde(default, skip_serializing_if = "TaskDependencyConfig::is_empty")]
    pub dependency: TaskDependencyConfig,
    /// What the output must satisfy (docs/checks.md); run after
    /// `config.checks`, retried with feedback when one fails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::checks::Check>,
    /// Where `ctx run --publish-root DIR` writes the task's final output,
    /// relative to DIR, once the task has completed with its checks
    /// passing. May hold `{{NAME}}` placeholders of trusted variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub publish: Option<String>,
    /// Run the task once per item of a JSON list (docs/plan-format.md,
    /// "Map over a list"): one task per item, `ID[0]`, `ID[1]`, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<crate::map::MapSpec>,
    /// What to remove from the output before checks, dependents and
    /// publishing see it (docs/plan-format.md, "Cleaned outputs"); wins
    /// whole over `config.output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::output_cleaning::OutputCleaning>,
    /// An approval gate (docs/runs.md, "Approval gates"): the task does
    /// not start (`before: run`), or its output is not published
    /// (`before: publish`), until a person approves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::approval::Approval>,
}

/// A task's override of `config.dependency`: how the outputs of *its*
/// dependencies reach *its* prompt.
///
/// Only the strategy is overridable per task. The summary settings
/// (`summary_model`, `summary_prompt`, `summary_max_tokens`,
/// `summary_focus`) stay plan-wide: under `summary_focus: output` one
/// summary is shared by every dependent, so a per-dependent setting would
/// have no single answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TaskDependencyConfig {
    /// Overrides `config.dependency.summarize_strategy` for this task's
    /// dependency outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarize_strategy: Option<SummarizeStrategy>,
}

impl TaskDependencyConfig {
    /// Whether nothing is overridden (the field is then left out when a
    /// plan is written).
    pub fn is_empty(&self) -> bool {
        self.summarize_strategy.is_none()
    }
}

/// A task's reference to a plan entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EntityContext {
    /// The name of an entry in the plan's `entities`.
    pub entity_name: String,
    /// Free text such as `constraint` or `partial`; mapped onto
    /// [`Relevance`] by [`Relevance::from_intent`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_relevance: Option<String>,
    /// Overrides the plan entity's value for this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounded_value: Option<String>,
    /// A note for the author of the plan; not sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_note: Option<String>,
}

/// The tool a task runs. Only `inference` ships.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ToolOrPrompt {
    /// The tool's name; [`INFERENCE_TOOL`] is the only one.
    pub name: String,
    /// The tool's parameters.
    pub params: Params,
}

/// The name of the one tool that ships.
pub const INFERENCE_TOOL: &str = "inference";

/// Parameters of an inference call. Unknown keys are kept in `extra` and
/// passed through to engines that understand them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Params {
    /// The task's own prompt; never cut by any budget.
    #[schemars(length(min = 1))]
    pub prompt: String,
    /// Model name; also picks the default tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature, 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f64>,
    /// Cap on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub top_p: Option<f64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Sampling seed, for engines that honour it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// A system prompt sent ahead of the assembled prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Expected duration, used only to weight the critical path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_ms: Option<u64>,
    /// Anything else, passed through to engines.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Plan-wide settings. CLI flags override them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PlanConfig {
    /// How dependency outputs are injected.
    #[serde(default)]
    pub dependency: DependencyConfig,
    /// Which entities are injected.
    #[serde(default)]
    pub entities: EntityContextConfig,
    /// Cap on each assembled prompt, in tokens.
    #[serde(default = "default_max_prompt_tokens")]
    #[schemars(range(min = 1))]
    pub max_prompt_tokens: usize,
    /// Tokenizer name (`cl100k_base`, `o200k_base`, `o200k_harmony`,
    /// `p50k_base`, `r50k_base`, `estimate`); when absent it follows each
    /// task's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Prices of the models this plan calls, in US dollars per million
    /// tokens (`input`, `output`, optional `cached_input`). They win over
    /// the shipped default table and a `--prices` file, and lose to
    /// `--price` flags (docs/cost.md). The type is ctx-cost's, so the
    /// schema and the parser cannot drift from the arithmetic.
    #[serde(default, skip_serializing_if = "crate::money::PlanPrices::is_empty")]
    pub prices: crate::money::PlanPrices,
    /// Checks applied to every task's output, before the task's own
    /// `checks` (docs/checks.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::checks::Check>,
    /// How many times in all a task with checks is tried: the first
    /// attempt and the retries with feedback. At least 1; `ctx run
    /// --max-check-attempts` overrides it.
    #[serde(default = "default_max_check_attempts")]
    #[schemars(range(min = 1))]
    pub max_check_attempts: u32,
    /// How each call's blocks are ordered: `design` (the default) or
    /// `cache`, most shared first for the provider's prefix cache
    /// (docs/prompts.md). Left out of a serialized plan when `design`.
    #[serde(default, skip_serializing_if = "crate::PromptLayout::is_design")]
    pub layout: crate::PromptLayout,
    /// `auto`: ctx sets `prompt_cache_key` on each call with a shared
    /// prefix, one key per prefix (`none`, the default: only a task's own
    /// params set one). Left out of a serialized plan when `none`.
    #[serde(
        default,
        skip_serializing_if = "crate::prompt_cache::CacheKey::is_none"
    )]
    pub cache_key: crate::prompt_cache::CacheKey,
    /// Anthropic `cache_control` breakpoints, for the models and after
    /// the blocks it names; none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_breakpoints: Option<crate::prompt_cache::CacheBreakpoints>,
    /// Warm the provider's prefix cache before a burst: when at least
    /// this many calls ready at once share a prefix over the provider's
    /// minimum (a map's items), one goes first and the others follow
    /// when its first token arrives. At least 2; off when absent (the
    /// default). It changes when calls are sent, never what they send,
    /// so it is left out of task fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2))]
    pub cache_warm_up: Option<usize>,
    /// A dollar budget shared by every run of the plan over a calendar
    /// period (UTC): docs/cost.md, "Period budgets". `ctx run --budget`
    /// overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::PeriodBudget>,
    /// `true`: every task of the run gets a `canary` check, as if each
    /// listed `- canary: true` (docs/security.md, "A canary for injected
    /// instructions"). Left out of a serialized plan when `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub canary: bool,
    /// What to remove from every task's output, unless the task has an
    /// `output` block of its own (docs/plan-format.md, "Cleaned outputs").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::output_cleaning::OutputCleaning>,
}

/// The default `max_check_attempts`: one try and one retry with feedback.
pub const DEFAULT_MAX_CHECK_ATTEMPTS: u32 = 2;

fn default_max_check_attempts() -> u32 {
    DEFAULT_MAX_CHECK_ATTEMPTS
}

/// The default per-prompt cap, from the design's success metric.
pub const DEFAULT_MAX_PROMPT_TOKENS: usize = 4000;

fn default_max_prompt_tokens() -> usize {
    DEFAULT_MAX_PROMPT_TOKENS
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            dependency: DependencyConfig::default(),
            entities: EntityContextConfig::default(),
            max_prompt_tokens: DEFAULT_MAX_PROMPT_TOKENS,
            tokenizer: None,
            prices: crate::money::PlanPrices::new(),
            checks: Vec::new(),
            max_check_attempts: DEFAULT_MAX_CHECK_ATTEMPTS,
            layout: crate::PromptLayout::Design,
            cache_key: crate::prompt_cache::CacheKey::None,
            cache_breakpoints: None,
            cache_warm_up: None,
            budget: None,
            canary: false,
            output: None,
        }
    }
}

impl PlanConfig {
    /// `tokenizer` parsed: `Ok(None)` when the plan leaves it out (each
    /// task's model then decides), [`crate::tokenizer::UnknownTokenizer`] when it
    /// names no tokenizer ctx knows. The field keeps the text as written so
    /// that `ctx plan check` can report a bad name beside every other
    /// problem, with its line; everything that counts tokens goes through
    /// here, so a bad name is an error wherever it reaches, never a
    /// fallback to the model's tokenizer.
    pub fn parsed_tokenizer(
        &self,
    ) -> Result<Option<crate::tokenizer::Tokenizer>, crate::tokenizer::UnknownTokenizer> {
        self.tokenizer.as_deref().map(str::parse).transpose()
    }
}

/// The design's `DependencyConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DependencyConfig {
    /// When false, a dependency's `summary` is injected instead of its
    /// output (the output is used when there is no summary).
    #[serde(default = "default_true")]
    pub include_full_output: bool,
    /// Outputs longer than this many characters are shortened; `null` means
    /// unlimited.
    #[serde(default = "default_max_output_length")]
    #[schemars(range(min = 1))]
    pub max_output_length: Option<usize>,
    /// How an output over `max_output_length` is shortened.
    #[serde(default)]
    pub summarize_strategy: SummarizeStrategy,
    /// Under `llm`: the most tokens a summary may have. It is the summary
    /// call's `max_tokens`, and a longer answer is cut to it (counted with
    /// the producing task's tokenizer).
    #[serde(default = "default_summary_max_tokens")]
    #[schemars(range(min = 1))]
    pub summary_max_tokens: u32,
    /// Under `llm`: the model that writes summaries; the producing task's
    /// `params.model` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_model: Option<String>,
    /// Under `llm`: the summary prompt, a template with `{{OUTPUT}}` (the
    /// output, fenced as untrusted content; required), `{{DESCRIPTION}}`
    /// (the producing task's description) and `{{FOCUS}}` (the dependent's
    /// prompt under `summary_focus: dependent`, else empty). ctx's own
    /// prompt is used when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_prompt: Option<String>,
    /// Under `llm`: one summary per output, shared by every dependent
    /// (`output`), or one per dependent with its prompt as the focus
    /// (`dependent`).
    #[serde(default)]
    pub summary_focus: SummaryFocus,
}

/// The default `summary_max_tokens`.
pub const DEFAULT_SUMMARY_MAX_TOKENS: u32 = 300;

fn default_summary_max_tokens() -> u32 {
    DEFAULT_SUMMARY_MAX_TOKENS
}

/// The placeholders a `summary_prompt` may hold.
pub const SUMMARY_PROMPT_PLACEHOLDERS: [&str; 3] = ["{{OUTPUT}}", "{{DESCRIPTION}}", "{{FOCUS}}"];

/// Whom an `llm` summary is written for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SummaryFocus {
    /// One summary per long output, shared by all its dependents.
    #[default]
    Output,
    /// One summary per (output, dependent) pair, focused on the dependent's
    /// own prompt: more calls, a closer fit.
    Dependent,
}

impl SummaryFocus {
    /// The focus as written in plans and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryFocus::Output => "output",
            SummaryFocus::Dependent => "dependent",
        }
    }
}

/// The design's default `max_output_length`.
pub const DEFAULT_MAX_OUTPUT_LENGTH: usize = 2000;

fn default_true() -> bool {
    true
}

fn default_max_output_length() -> Option<usize> {
    Some(DEFAULT_MAX_OUTPUT_LENGTH)
}

impl Default for DependencyConfig {
    fn default() -> Self {
        DependencyConfig {
            include_full_output: true,
            max_output_length: Some(DEFAULT_MAX_OUTPUT_LENGTH),
            summarize_strategy: SummarizeStrategy::default(),
            summary_max_tokens: DEFAULT_SUMMARY_MAX_TOKENS,
            summary_model: None,
            summary_prompt: None,
            summary_focus: SummaryFocus::default(),
        }
    }
}

/// How long dependency outputs are shortened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SummarizeStrategy {
    /// The design's rule: first half of the limit, then `...`.
    #[default]
    Truncate,
    /// Headings plus the first paragraph under each.
    ExtractKeySections,
    /// Never shortened (the token cap still applies).
    None,
    /// A summary written by a model when the producing task completes
    /// (`summary_*` settings); the `truncate` form when that call fails.
    Llm,
}

impl SummarizeStrategy {
    /// The strategy as written in plans and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            SummarizeStrategy::Truncate => "truncate",
            SummarizeStrategy::ExtractKeySections => "extract_key_sections",
            SummarizeStrategy::None => "none",
            SummarizeStrategy::Llm => "llm",
        }
    }
}

impl Plan {
    /// The strategy by which `task` receives its dependencies' outputs:
    /// its own `dependency.summarize_strategy`, else the plan's.
    pub fn summarize_strategy_for(&self, task: &SubTask) -> SummarizeStrategy {
        task.dependency
            .summarize_strategy
            .unwrap_or(self.config.dependency.summarize_strategy)
    }
}

/// The design's `EntityContextConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EntityContextConfig {
    /// Inject every plan entity into every task, not only the task's own
    /// `entity_context`.
    #[serde(default)]
    pub include_all: bool,
    /// The lowest relevance that is injected.
    #[serde(default)]
    pub filter_by_relevance: RelevanceFilter,
    /// Show the entity's `type` in its line.
    #[serde(default = "default_true")]
    pub include_entity_type: bool,
}

impl Default for EntityContextConfig {
    fn default() -> Self {
        EntityContextConfig {
            include_all: false,
            filter_by_relevance: RelevanceFilter::All,
            include_entity_type: true,
        }
    }
}

/// The lowest relevance an entity needs to be injected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RelevanceFilter {
    /// Only [`Relevance::High`].
    High,
    /// High and medium.
    Medium,
    /// Every relevance (same as `all`).
    Low,
    /// Every entity.
    #[default]
    All,
}

impl RelevanceFilter {
    /// Whether an entity of `relevance` passes this filter.
    pub fn admits(self, relevance: Relevance) -> bool {
        match self {
            RelevanceFilter::High => relevance == Relevance::High,
            RelevanceFilter::Medium => relevance >= Relevance::Medium,
            RelevanceFilter::Low | RelevanceFilter::All => true,
        }
    }
}

/// How much an entity matters to a task, ordered `Low < Medium < High`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Relevance {
    /// Background.
    Low,
    /// Partly relevant.
    Medium,
    /// A constraint the task must obey.
    High,
}

impl Relevance {
    /// Maps the design's free-text `intent_relevance` onto a level.
    ///
    /// The words are compared case-insensitively after trimming:
    ///
    /// | level  | words |
    /// |--------|-------|
    /// | high   | `high`, `constraint`, `required`, `requirement`, `must`, `critical`, `primary`, `direct` |
    /// | medium | `medium`, `partial`, `supporting`, `should`, `secondary`, `related`, `context` |
    /// | low    | anything else, and a missing value |
    ///
    /// A missing value is low so that unannotated entities are the first
    /// ones dropped when a prompt is over its cap.
    pub fn from_intent(intent_relevance: Option<&str>) -> Relevance {
        let Some(word) = intent_relevance else {
            return Relevance::Low;
        };
        match word.trim().to_ascii_lowercase().as_str() {
            "high" | "constraint" | "required" | "requirement" | "must" | "critical"
            | "primary" | "direct" => Relevance::High,
            "medium" | "partial" | "supporting" | "should" | "secondary" | "related"
            | "context" => Relevance::Medium,
            _ => Relevance::Low,
        }
    }
}

/// An entity as it is injected into one task's prompt, after the plan-level
/// entity and the task's `entity_context` entry are merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedEntity {
    /// The entity's name.
    pub name: String,
    /// The plan entity's `type`, when known.
    pub entity_type: Option<String>,
    /// The task's override, else the plan entity's value.
    pub grounded_value: Option<String>,
    /// The task's `intent_relevance` as written.
    pub intent_relevance: Option<String>,
    /// The level `intent_relevance` maps to.
    pub relevance: Relevance,
}

impl Plan {
    /// The task with this id, found by scanning `sub_tasks`: O(tasks).
    ///
    /// For one lookup (a command naming a task). Code that looks ids up
    /// once per task or per dependency builds a [`TaskIndex`] once
    /// ([`Plan::task_index`]) instead: a scan per dependency made
    /// `ctx run` quadratic in the plan's size (43 s at 50,000 tasks).
    pub fn task(&self, id: &str) -> Option<&SubTask> {
        #[cfg(debug_assertions)]
        TASK_SCANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.sub_tasks.iter().find(|t| t.id == id)
    }

    /// The tasks indexed by id, built once in O(tasks): each lookup after
    /// that is O(1). The index borrows the plan, so the plan cannot change
    /// under it.
    pub fn task_index(&self) -> TaskIndex<'_> {
        let mut by_id = HashMap::with_capacity(self.sub_tasks.len());
        for (i, t) in self.sub_tasks.iter().enumerate() {
            // The first of duplicate ids wins, as in `Plan::task`
            // (validation refuses duplicates; an unvalidated plan may
            // still hold them).
            by_id.entry(t.id.as_str()).or_insert(i);
        }
        TaskIndex { plan: self, by_id }
    }

    /// The plan entity with this name.
    pub fn entity(&self, name: &str) -> Option<&Entity> {
        self.entities.iter().find(|e| e.name == name)
    }

    /// The entities injected into `task`'s prompt, in order: the task's own
    /// `entity_context` entries first, then (with `include_all`) every other
    /// plan entity at low relevance; all filtered by `filter_by_relevance`.
    ///
    /// An `entity_context` entry without `grounded_value` takes the plan
    /// entity's. Entries naming unknown entities are kept (validation
    /// reports them) with whatever value the entry itself carries.
    pub fn resolve_entity_context(&self, task: &SubTask) -> Vec<ResolvedEntity> {
        let cfg = &self.config.entities;
        let mut out: Vec<ResolvedEntity> = Vec::new();
        for ec in &task.entity_context {
            let plan_entity = self.entity(&ec.entity_name);
            let relevance = Relevance::from_intent(ec.intent_relevance.as_deref());
            out.push(ResolvedEntity {
                name: ec.entity_name.clone(),
                entity_type: plan_entity.and_then(|e| e.entity_type.clone()),
                grounded_value: ec
                    .grounded_value
                    .clone()
                    .or_else(|| plan_entity.and_then(Entity::grounded_value_text)),
                intent_relevance: ec.intent_relevance.clone(),
                relevance,
            });
        }
        if cfg.include_all {
            for e in &self.entities {
                if out.iter().any(|r| r.name == e.name) {
                    continue;
                }
                out.push(ResolvedEntity {
                    name: e.name.clone(),
                    entity_type: e.entity_type.clone(),
                    grounded_value: e.grounded_value_text(),
                    intent_relevance: None,
                    relevance: Relevance::Low,
                });
            }
        }
        out.retain(|r| cfg.filter_by_relevance.admits(r.relevance));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_mapping() {
        assert_eq!(
            Relevance::from_intent(Some(" Constraint ")),
            Relevance::High
        );
        assert_eq!(Relevance::from_intent(Some("partial")), Relevance::Medium);
        assert_eq!(Relevance::from_intent(Some("nice to have")), Relevance::Low);
        assert_eq!(Relevance::from_intent(None), Relevance::Low);
        assert!(RelevanceFilter::Medium.admits(Relevance::High));
        assert!(!RelevanceFilter::Medium.admits(Relevance::Low));
        assert!(!RelevanceFilter::High.admits(Relevance::Medium));
    }

    #[test]
    fn defaults_match_the_design() {
        let c = PlanConfig::default();
        assert!(c.dependency.include_full_output);
        assert_eq!(c.dependency.max_output_length, Some(2000));
        assert_eq!(c.dependency.summarize_strategy, SummarizeStrategy::Truncate);
        assert_eq!(c.dependency.summary_max_tokens, 300);
        assert_eq!(c.dependency.summary_focus, SummaryFocus::Output);
        assert!(!c.entities.include_all);
        assert_eq!(c.entities.filter_by_relevance, RelevanceFilter::All);
        assert!(c.entities.include_entity_type);
        assert_eq!(c.max_prompt_tokens, 4000);
    }

    #[test]
    fn the_task_index_finds_what_a_scan_finds_without_scanning() {
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [
                {"id": "a", "description": "first a", "tool_or_prompt": {"name": "x", "params": {"prompt": "p"}}},
                {"id": "b", "description": "B", "tool_or_prompt": {"name": "x", "params": {"prompt": "p"}}},
                {"id": "a", "description": "second a", "tool_or_prompt": {"name": "x", "params": {"prompt": "p"}}}
            ]
        }))
        .unwrap();
        let before = task_scans();
        let index = plan.task_index();
        for id in ["a", "b", "c", ""] {
            assert_eq!(
                index.get(id).map(|t| &t.description),
                plan.sub_tasks
                    .iter()
                    .find(|t| t.id == id)
                    .map(|t| &t.description),
                "{id}"
            );
        }
        assert_eq!(index.position("b"), Some(1));
        assert!(index.contains("a") && !index.contains("c"));
        assert_eq!(task_scans(), before);
    }
}
