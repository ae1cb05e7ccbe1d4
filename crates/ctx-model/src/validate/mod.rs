//! Checking a parsed plan: every problem at once, each naming its field.
//!
//! Parsing already rejects what the types can express (missing fields,
//! wrong types). Unknown fields are read past and collected
//! ([`ParsedPlan`]); [`ParsedPlan::problems`] reports them first, then
//! [`validate`]'s. [`validate`] checks what the types cannot: that
//! ids are unique and safe as file names, that dependencies name real tasks
//! and form a DAG, that entity references resolve, that prompts are not
//! empty and that config values are in range.
//!
//! Every [`Problem`] carries a stable [`ProblemCode`], the task id when the
//! problem belongs to a task, the field path (`sub_tasks[3].dependencies[1]`)
//! and a message, so the CLI can print a line per problem or emit JSON. The
//! order is deterministic: plan-level fields first, then tasks in file
//! order, then cycles.
//!
//! ## Cycles
//!
//! Every elementary cycle is reported once (Johnson's algorithm, run per
//! strongly connected set of tasks), as a path where each arrow reads
//! "depends on": `a -> b -> c -> a`, starting at the task that comes first
//! in the file; cycles are listed in file order of their tasks. A dense
//! tangle of tasks can hold exponentially many cycles, so the list stops at
//! [`MAX_REPORTED_CYCLES`] with one more problem saying so.
//! Self-dependencies are reported on their own and are not cycles here.
//!
//! ## Where each part lives
//!
//! * `rules`: the per-field checks (config, entities, each task, unknown
//!   fields), in the order above.
//! * `cycles`: the elementary cycles of the dependency graph, over the one
//!   DAG implementation, [`crate::graph::DependencyGraph`].
//! * `variables`: the `variables:` declarations, the `history:` block and
//!   each task's `publish` path, as far as they can be judged without the
//!   template language (placeholders are ctx-prompt's:
//!   `ctx_prompt::plan_fill::template_problems`).
//! * `map`: each task's `map:` block (source, pointer, placeholder,
//!   `max_items`) and the item ids it makes.
//! * `suggestions`: "did you mean", the closest known name to a misspelt
//!   one (a trie walk; see that module for why not a pairwise crate).
//!
//! Everything public is re-exported here, so `ctx_model::X` names the same
//! items as before the split.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[cfg(feature = "parse")]
use crate::parse::ParsedPlan;
use crate::plan::Plan;

mod cycles;
mod map;
mod rules;
mod suggestions;
mod variables;

pub use cycles::MAX_REPORTED_CYCLES;
pub use rules::{KNOWN_TOOLS, MAX_ID_BYTES, TEMPERATURE_RANGE};
pub use variables::publish_path_problem;

/// What kind of problem; the stable, machine-readable part of a
/// [`Problem`]. Serialized in `snake_case` (`unknown_dependency`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemCode {
    /// A key the plan format does not have (`dependancies`).
    UnknownField,
    /// The plan has no sub-tasks.
    NoTasks,
    /// A task id is empty or only whitespace.
    EmptyId,
    /// A task id cannot be used as a file name (path separators, control
    /// characters, `.`/`..`, surrounding whitespace, too long).
    InvalidId,
    /// Two tasks share an id.
    DuplicateId,
    /// A task's description is empty.
    EmptyDescription,
    /// A task's description spans several lines (it becomes a heading).
    MultilineDescription,
    /// A task depends on itself.
    SelfDependency,
    /// A dependency names no task.
    UnknownDependency,
    /// A dependency is listed twice.
    DuplicateDependency,
    /// Dependencies form a cycle.
    Cycle,
    /// `tool_or_prompt.name` is not a tool this build ships.
    UnknownTool,
    /// `params.prompt` is empty or only whitespace.
    EmptyPrompt,
    /// `params.temperature` is out of range or not a number.
    TemperatureOutOfRange,
    /// `params.top_p` is outside 0..=1 or not a number.
    TopPOutOfRange,
    /// `params.max_tokens` is 0.
    ZeroMaxTokens,
    /// An entity's name is empty.
    EmptyEntityName,
    /// Two entities share a name.
    DuplicateEntity,
    /// An entity has both `grounded_value` and `grounded_values`.
    ConflictingGroundedValue,
    /// An `entity_context` entry names no plan entity.
    UnknownEntity,
    /// A task lists the same entity twice in `entity_context`.
    DuplicateEntityContext,
    /// `config.tokenizer` is not a known tokenizer.
    UnknownTokenizer,
    /// `config.max_prompt_tokens` is 0.
    ZeroMaxPromptTokens,
    /// `config.dependency.max_output_length` is 0.
    ZeroMaxOutputLength,
    /// `config.dependency.summary_max_tokens` is 0.
    ZeroSummaryMaxTokens,
    /// `config.dependency.summary_prompt` has no `{{OUTPUT}}`, or holds a
    /// placeholder that is not `{{OUTPUT}}`, `{{DESCRIPTION}}` or
    /// `{{FOCUS}}`.
    BadSummaryPrompt,
    /// `config.dependency.summary_model` is empty or only whitespace.
    EmptySummaryModel,
    /// A check that does not compile: a malformed pattern, a schema that
    /// cannot be read or is not a valid JSON Schema.
    InvalidCheck,
    /// An entity's `check:` pattern does not compile.
    InvalidEntityCheck,
    /// A `strip_lines` pattern of an `output` block does not compile.
    InvalidOutputPattern,
    /// `config.max_check_attempts` is 0.
    ZeroMaxCheckAttempts,
    /// `config.cache_breakpoints.after` asks for more than 4 breakpoints,
    /// or names a block twice.
    InvalidCacheBreakpoints,
    /// `config.cache_warm_up` is under 2.
    InvalidCacheWarmUp,
    /// A `config.budget.fallback` threshold is out of (0, 1], or not
    /// above the one before it.
    InvalidBudgetFallback,
    /// A `config.budget.fallback` model has no price (found where prices
    /// are known: ctx-run's plan check).
    UnpricedFallback,
    /// A variable's name is not `[A-Z][A-Z0-9_]*`.
    InvalidVariableName,
    /// A variable is named `HISTORICAL_CONTEXT`, which the `history:`
    /// digest fills.
    ReservedVariable,
    /// Two variables share a name.
    DuplicateVariable,
    /// A variable's `default` does not parse as its `type`, or its
    /// `max_tokens` is 0.
    InvalidVariable,
    /// A `history:` setting out of range (`share` outside (0, 1], a zero
    /// budget or word count, an empty path).
    InvalidHistorySetting,
    /// A `publish` path that is empty, absolute or climbs out with `..`.
    InvalidPublishPath,
    /// Two tasks publish to the same path.
    DuplicatePublishPath,
    /// A `{{NAME}}` placeholder names no declared variable.
    UndeclaredVariable,
    /// A task template breaks a rule of `ctx lint` (an untrusted
    /// placeholder outside a fence, an unbalanced or non-canonical fence,
    /// a malformed placeholder).
    TemplateLint,
    /// A `publish` path holds an untrusted variable.
    UntrustedPublishVariable,
    /// `{{HISTORICAL_CONTEXT}}` is used and the plan names no
    /// `history.content_root`.
    NoContentRoot,
    /// A `map:` block that is malformed: a bad pointer or placeholder
    /// name, `max_items: 0`, a map task with `publish`.
    InvalidMap,
    /// `map.over` names neither a declared variable nor a dependency of
    /// the task.
    UnknownMapSource,
    /// `map.over` names a variable that is not `type: json`.
    MapSourceNotJson,
    /// `map.max_items` is missing.
    MissingMaxItems,
    /// `map.as` names a declared variable (or `HISTORICAL_CONTEXT`).
    MapItemClash,
    /// `map.over` names another map task: a map over the items of another
    /// map is not supported.
    MapOverMap,
    /// A task is named like an item of a map task (`TASK[3]`).
    ItemIdClash,
    /// An item placeholder (`map.as`) outside an `<untrusted-content>`
    /// fence; the item is always untrusted.
    BareItemPlaceholder,
    /// An `approval` block that cannot hold anything: `before: publish`
    /// on a task without `publish` (a map task publishes nothing), or an
    /// empty `message`.
    InvalidApproval,
}

impl ProblemCode {
    /// The code as written in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemCode::UnknownField => "unknown_field",
            ProblemCode::NoTasks => "no_tasks",
            ProblemCode::EmptyId => "empty_id",
            ProblemCode::InvalidId => "invalid_id",
            ProblemCode::DuplicateId => "duplicate_id",
            ProblemCode::EmptyDescription => "empty_description",
            ProblemCode::MultilineDescription => "multiline_description",
            ProblemCode::SelfDependency => "self_dependency",
            ProblemCode::UnknownDependency => "unknown_dependency",
            ProblemCode::DuplicateDependency => "duplicate_dependency",
            ProblemCode::Cycle => "cycle",
            ProblemCode::UnknownTool => "unknown_tool",
            ProblemCode::EmptyPrompt => "empty_prompt",
            ProblemCode::TemperatureOutOfRange => "temperature_out_of_range",
            ProblemCode::TopPOutOfRange => "top_p_out_of_range",
            ProblemCode::ZeroMaxTokens => "zero_max_tokens",
            ProblemCode::EmptyEntityName => "empty_entity_name",
            ProblemCode::DuplicateEntity => "duplicate_entity",
            ProblemCode::ConflictingGroundedValue => "conflicting_grounded_value",
            ProblemCode::UnknownEntity => "unknown_entity",
            ProblemCode::DuplicateEntityContext => "duplicate_entity_context",
            ProblemCode::UnknownTokenizer => "unknown_tokenizer",
            ProblemCode::ZeroMaxPromptTokens => "zero_max_prompt_tokens",
            ProblemCode::ZeroMaxOutputLength => "zero_max_output_length",
            ProblemCode::ZeroSummaryMaxTokens => "zero_summary_max_tokens",
            ProblemCode::BadSummaryPrompt => "bad_summary_prompt",
            ProblemCode::EmptySummaryModel => "empty_summary_model",
            ProblemCode::InvalidCheck => "invalid_check",
            ProblemCode::InvalidOutputPattern => "invalid_output_pattern",
            ProblemCode::InvalidEntityCheck => "invalid_entity_check",
            ProblemCode::ZeroMaxCheckAttempts => "zero_max_check_attempts",
            ProblemCode::InvalidCacheBreakpoints => "invalid_cache_breakpoints",
            ProblemCode::InvalidCacheWarmUp => "invalid_cache_warm_up",
            ProblemCode::InvalidBudgetFallback => "invalid_budget_fallback",
            ProblemCode::UnpricedFallback => "unpriced_fallback",
            ProblemCode::InvalidVariableName => "invalid_variable_name",
            ProblemCode::ReservedVariable => "reserved_variable",
            ProblemCode::DuplicateVariable => "duplicate_variable",
            ProblemCode::InvalidVariable => "invalid_variable",
            ProblemCode::InvalidHistorySetting => "invalid_history_setting",
            ProblemCode::InvalidPublishPath => "invalid_publish_path",
            ProblemCode::DuplicatePublishPath => "duplicate_publish_path",
            ProblemCode::UndeclaredVariable => "undeclared_variable",
            ProblemCode::TemplateLint => "template_lint",
            ProblemCode::UntrustedPublishVariable => "untrusted_publish_variable",
            ProblemCode::NoContentRoot => "no_content_root",
            ProblemCode::InvalidMap => "invalid_map",
            ProblemCode::UnknownMapSource => "unknown_map_source",
            ProblemCode::MapSourceNotJson => "map_source_not_json",
            ProblemCode::MissingMaxItems => "missing_max_items",
            ProblemCode::MapItemClash => "map_item_clash",
            ProblemCode::MapOverMap => "map_over_map",
            ProblemCode::ItemIdClash => "item_id_clash",
            ProblemCode::BareItemPlaceholder => "bare_item_placeholder",
            ProblemCode::InvalidApproval => "invalid_approval",
        }
    }
}

impl fmt::Display for ProblemCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing wrong with a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// What kind of problem.
    pub code: ProblemCode,
    /// The id of the task the problem belongs to, when it belongs to one
    /// (for a cycle, the first task of the path); `null` in JSON for
    /// plan-level fields.
    #[serde(default)]
    pub task_id: Option<String>,
    /// Where, as a path into the plan: `sub_tasks[3].dependencies[1]`,
    /// `entities[0].name`, `config.tokenizer`.
    pub field: String,
    /// What is wrong, for people.
    pub message: String,
}

impl fmt::Display for Problem {
    /// `task "css": sub_tasks[3].dependencies[1]: unknown task id "htm"`,
    /// or without the task part for plan-level fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(id) = &self.task_id {
            write!(f, "task {}: ", quoted(id))?;
        }
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// `"id"` with quotes and control characters escaped, so an odd id never
/// breaks a line of output.
pub(crate) fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// Checks `plan` and returns every problem found, in a deterministic order;
/// an empty vector means the plan is valid.
///
/// ```
/// use ctx_model::{parse_plan, validate, PlanFormat, ProblemCode};
///
/// let plan = parse_plan(r#"{"schema_version": 1, "sub_tasks": [
///   {"id": "html", "description": "Page", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write it."}}},
///   {"id": "css", "description": "Style", "dependencies": ["htm"],
///    "tool_or_prompt": {"name": "inference", "params": {"prompt": "Style it."}}}
/// ]}"#, "plan.json", PlanFormat::Json).unwrap();
/// let problems = validate(&plan);
/// assert_eq!(problems.len(), 1);
/// assert_eq!(problems[0].code, ProblemCode::UnknownDependency);
/// assert_eq!(problems[0].to_string(),
///     r#"task "css": sub_tasks[1].dependencies[0]: unknown task id "htm" (did you mean "html"?)"#);
/// ```
///
/// An entity's `check:` pattern is not compiled here (the pattern language
/// is ctx-checks'); [`validate_with`] takes the compiler, and
/// `ctx_checks::plan_problems` passes it.
pub fn validate(plan: &Plan) -> Vec<Problem> {
    validate_with(plan, &|_| None)
}

/// The known name closest to a misspelt `word` among `candidates`, found
/// as the plan's own "did you mean" finds it (case first, then a bounded
/// edit distance), or `None` when none is close enough. For messages
/// outside validation that name an unknown task id (`ctx run --rerun`).
pub fn closest_name<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    suggestions::Suggester::new(candidates).suggest(word, None)
}

/// Why an entity's `check:` pattern does not compile, as the message of an
/// [`InvalidEntityCheck`](ProblemCode::InvalidEntityCheck) problem
/// (`invalid pattern: regex parse error: ...`), or `None` when it compiles.
///
/// Patterns are `regex` patterns, compiled by ctx-checks; the plan model
/// does not depend on a regex engine (the engine and store seams read
/// plans and must not compile one), so the caller that has the compiler
/// passes it in, and the problem still comes in its place among the
/// entities' problems.
pub type PatternCheck<'a> = &'a dyn Fn(&str) -> Option<String>;

/// [`validate`], with each entity's `check:` pattern judged by
/// `entity_pattern`.
pub fn validate_with(plan: &Plan, entity_pattern: PatternCheck<'_>) -> Vec<Problem> {
    let mut out = Vec::new();
    rules::check_plan(plan, entity_pattern, &mut out);
    variables::check_variables(plan, &mut out);
    variables::check_publish_paths(plan, &mut out);
    map::check_maps(plan, &mut out);
    cycles::check_cycles(plan, &mut out);
    out
}

#[cfg(feature = "parse")]
impl ParsedPlan {
    /// Every problem of the plan as read, in a deterministic order: its
    /// unknown fields in file order, each with the known field it is
    /// closest to, then [`validate`]'s problems. Empty when the plan is
    /// valid.
    pub fn problems(&self) -> Vec<Problem> {
        self.problems_with(&|_| None)
    }

    /// [`problems`](Self::problems), with each entity's `check:` pattern
    /// judged by `entity_pattern` ([`validate_with`]).
    pub fn problems_with(&self, entity_pattern: PatternCheck<'_>) -> Vec<Problem> {
        let mut out: Vec<Problem> = self
            .unknown_fields
            .iter()
            .map(|u| rules::unknown_field_problem(&self.plan, u))
            .collect();
        out.extend(validate_with(&self.plan, entity_pattern));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Entity, INFERENCE_TOOL, Params, PlanConfig, SubTask, ToolOrPrompt};

    pub(super) fn task(id: &str, deps: &[&str]) -> SubTask {
        SubTask {
            id: id.into(),
            description: format!("Task {id}"),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            entity_context: Vec::new(),
            tool_or_prompt: ToolOrPrompt {
                name: INFERENCE_TOOL.into(),
                params: Params {
                    prompt: format!("Do {id}."),
                    ..Params::default()
                },
            },
            dependency: Default::default(),
            checks: Vec::new(),
            publish: None,
            map: None,
            output: None,
            approval: None,
        }
    }

    pub(super) fn entity(name: &str) -> Entity {
        Entity {
            name: name.into(),
            entity_type: None,
            intent: None,
            grounded_value: Some("v".into()),
            grounded_values: None,
            check: None,
        }
    }

    pub(super) fn plan(tasks: Vec<SubTask>) -> Plan {
        Plan {
            schema_version: 1,
            goal: None,
            entities: Vec::new(),
            sub_tasks: tasks,
            config: PlanConfig::default(),
            variables: Vec::new(),
            history: None,
        }
    }

    pub(super) fn codes(p: &Plan) -> Vec<ProblemCode> {
        validate(p).iter().map(|p| p.code).collect()
    }

    pub(super) fn only(p: &Plan) -> Problem {
        let problems = validate(p);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        problems.into_iter().next().unwrap()
    }

    #[test]
    fn a_valid_plan_has_no_problems() {
        let p = plan(vec![
            task("a", &[]),
            task("b", &["a"]),
            task("c", &["a", "b"]),
        ]);
        assert_eq!(validate(&p), []);
    }

    #[test]
    fn empty_plan() {
        assert_eq!(codes(&plan(vec![])), [ProblemCode::NoTasks]);
    }

    #[test]
    fn problems_serialize_with_stable_codes() {
        let p = plan(vec![task("a", &["b"])]);
        let json = serde_json::to_value(validate(&p)).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{
                "code": "unknown_dependency",
                "task_id": "a",
                "field": "sub_tasks[0].dependencies[0]",
                "message": "unknown task id \"b\""
            }])
        );
        for code in [
            ProblemCode::NoTasks,
            ProblemCode::TopPOutOfRange,
            ProblemCode::ZeroMaxOutputLength,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
