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

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::graph::DependencyGraph;
use crate::parse::{ParsedPlan, UnknownField};
use crate::plan::{INFERENCE_TOOL, Plan, SubTask};
use crate::suggest::Suggester;

/// The longest task id, in bytes. Ids name files (`prompts/{id}.md`), and
/// most file systems cap a name at 255 bytes.
pub const MAX_ID_BYTES: usize = 128;

/// The tools a plan may name. Only [`INFERENCE_TOOL`] ships.
pub const KNOWN_TOOLS: [&str; 1] = [INFERENCE_TOOL];

/// The accepted range of `params.temperature`.
pub const TEMPERATURE_RANGE: std::ops::RangeInclusive<f64> = 0.0..=2.0;

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
    /// `config.max_check_attempts` is 0.
    ZeroMaxCheckAttempts,
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
            ProblemCode::InvalidEntityCheck => "invalid_entity_check",
            ProblemCode::ZeroMaxCheckAttempts => "zero_max_check_attempts",
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
pub fn validate(plan: &Plan) -> Vec<Problem> {
    let mut out = Vec::new();
    check_config(plan, &mut out);
    let entity_names = check_entities(plan, &mut out);
    if plan.sub_tasks.is_empty() {
        out.push(Problem {
            code: ProblemCode::NoTasks,
            task_id: None,
            field: "sub_tasks".into(),
            message: "the plan has no tasks".into(),
        });
    }

    // First index of each id; later duplicates are reported and ignored.
    let mut first_index: HashMap<&str, usize> = HashMap::new();
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        first_index.entry(task.id.as_str()).or_insert(i);
    }
    let task_ids: Vec<&str> = {
        let mut seen = HashSet::new();
        plan.sub_tasks
            .iter()
            .map(|t| t.id.as_str())
            .filter(|id| seen.insert(*id))
            .collect()
    };

    // Indexed once: a plan can hold thousands of near-miss names.
    let task_names = Suggester::new(task_ids.iter().copied());
    let entity_set: HashSet<&str> = entity_names.iter().copied().collect();
    let entities = Known {
        names: &entity_set,
        suggest: Suggester::new(entity_names.iter().copied()),
    };
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        check_task(i, task, &first_index, &task_names, &entities, &mut out);
    }
    let (cycles, more) = find_cycles_limited(plan, MAX_REPORTED_CYCLES);
    for cycle in &cycles {
        let first = cycle.first().copied().unwrap_or(0);
        let path = cycle
            .iter()
            .chain(cycle.first())
            .map(|&i| quoted(&plan.sub_tasks[i].id))
            .collect::<Vec<_>>()
            .join(" -> ");
        out.push(Problem {
            code: ProblemCode::Cycle,
            task_id: Some(plan.sub_tasks[first].id.clone()),
            field: format!("sub_tasks[{first}].dependencies"),
            message: format!("dependency cycle: {path}"),
        });
    }
    if more {
        out.push(Problem {
            code: ProblemCode::Cycle,
            task_id: None,
            field: "sub_tasks".into(),
            message: format!(
                "more dependency cycles exist; the list stops at {MAX_REPORTED_CYCLES}"
            ),
        });
    }
    out
}

impl ParsedPlan {
    /// Every problem of the plan as read, in a deterministic order: its
    /// unknown fields in file order, each with the known field it is
    /// closest to, then [`validate`]'s problems. Empty when the plan is
    /// valid.
    pub fn problems(&self) -> Vec<Problem> {
        let mut out: Vec<Problem> = self
            .unknown_fields
            .iter()
            .map(|u| unknown_field_problem(&self.plan, u))
            .collect();
        out.extend(validate(&self.plan));
        out
    }
}

fn unknown_field_problem(plan: &Plan, unknown: &UnknownField) -> Problem {
    let hint = match Suggester::new(unknown.expected.iter().copied()).suggest(&unknown.key, None) {
        Some(name) => format!(" (did you mean {}?)", quoted(name)),
        None if unknown.expected.is_empty() => String::new(),
        None => format!(" (known fields: {})", unknown.expected.join(", ")),
    };
    Problem {
        code: ProblemCode::UnknownField,
        task_id: unknown
            .task
            .and_then(|i| plan.sub_tasks.get(i))
            .filter(|t| !t.id.trim().is_empty())
            .map(|t| t.id.clone()),
        field: unknown.field.clone(),
        message: format!("unknown field {}{hint}", quoted(&unknown.key)),
    }
}

fn check_config(plan: &Plan, out: &mut Vec<Problem>) {
    let cfg = &plan.config;
    if let Some(name) = &cfg.tokenizer
        && let Err(e) = ctx_tokens::Tokenizer::from_str(name)
    {
        out.push(Problem {
            code: ProblemCode::UnknownTokenizer,
            task_id: None,
            field: "config.tokenizer".into(),
            message: e.to_string(),
        });
    }
    if cfg.max_prompt_tokens == 0 {
        out.push(Problem {
            code: ProblemCode::ZeroMaxPromptTokens,
            task_id: None,
            field: "config.max_prompt_tokens".into(),
            message: "must be at least 1 (the cap on every assembled prompt)".into(),
        });
    }
    if cfg.max_check_attempts == 0 {
        out.push(Problem {
            code: ProblemCode::ZeroMaxCheckAttempts,
            task_id: None,
            field: "config.max_check_attempts".into(),
            message: "must be at least 1 (the first attempt counts)".into(),
        });
    }
    if cfg.dependency.max_output_length == Some(0) {
        out.push(Problem {
            code: ProblemCode::ZeroMaxOutputLength,
            task_id: None,
            field: "config.dependency.max_output_length".into(),
            message: "must be at least 1, or null for unlimited".into(),
        });
    }
    check_summary_settings(cfg, out);
}

/// The `summary_*` settings are checked whatever the strategy: a plan that
/// sets them means to use them (possibly through a task's override or
/// `--summarize-strategy llm`), and a mistake found before the run costs
/// nothing, while one found at the first long output costs a fallback.
fn check_summary_settings(cfg: &crate::plan::PlanConfig, out: &mut Vec<Problem>) {
    let dep = &cfg.dependency;
    if dep.summary_max_tokens == 0 {
        out.push(Problem {
            code: ProblemCode::ZeroSummaryMaxTokens,
            task_id: None,
            field: "config.dependency.summary_max_tokens".into(),
            message: "must be at least 1 (the most tokens an llm summary may have)".into(),
        });
    }
    if let Some(model) = &dep.summary_model
        && model.trim().is_empty()
    {
        out.push(Problem {
            code: ProblemCode::EmptySummaryModel,
            task_id: None,
            field: "config.dependency.summary_model".into(),
            message: "is empty; leave it out to summarise with each producing task's model".into(),
        });
    }
    if let Some(template) = &dep.summary_prompt {
        let field = "config.dependency.summary_prompt".to_string();
        if !template.contains("{{OUTPUT}}") {
            out.push(Problem {
                code: ProblemCode::BadSummaryPrompt,
                task_id: None,
                field: field.clone(),
                message: "has no {{OUTPUT}} placeholder: the summary call would not see the output"
                    .into(),
            });
        }
        for name in unknown_placeholders(template) {
            out.push(Problem {
                code: ProblemCode::BadSummaryPrompt,
                task_id: None,
                field: field.clone(),
                message: format!(
                    "unknown placeholder {name} (known: {})",
                    crate::plan::SUMMARY_PROMPT_PLACEHOLDERS.join(", ")
                ),
            });
        }
    }
}

/// The `{{NAME}}` placeholders of `template` that a summary prompt does not
/// have, in order of first appearance, each once. A name is upper-case
/// letters, digits and `_`; other `{{` text is left alone (a prompt may
/// show code with braces).
fn unknown_placeholders(template: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with("}}") {
            let placeholder = format!("{{{{{}}}}}", &after[..name_len]);
            if !crate::plan::SUMMARY_PROMPT_PLACEHOLDERS.contains(&placeholder.as_str())
                && !out.contains(&placeholder)
            {
                out.push(placeholder);
            }
            rest = &after[name_len + 2..];
        } else {
            rest = after;
        }
    }
    out
}

/// Checks the plan's entities; returns the set of names, first occurrence
/// winning.
fn check_entities<'p>(plan: &'p Plan, out: &mut Vec<Problem>) -> Vec<&'p str> {
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut names = Vec::new();
    for (i, e) in plan.entities.iter().enumerate() {
        if e.name.trim().is_empty() {
            out.push(Problem {
                code: ProblemCode::EmptyEntityName,
                task_id: None,
                field: format!("entities[{i}].name"),
                message: "entity name is empty".into(),
            });
        } else if let Some(&j) = first.get(e.name.as_str()) {
            out.push(Problem {
                code: ProblemCode::DuplicateEntity,
                task_id: None,
                field: format!("entities[{i}].name"),
                message: format!(
                    "duplicate entity name {} (first at entities[{j}])",
                    quoted(&e.name)
                ),
            });
        } else {
            first.insert(&e.name, i);
            names.push(e.name.as_str());
        }
        if let Some(pattern) = &e.check
            && let Err(err) = ctx_checks::ExpectedEntity::new(&e.name, &[], Some(pattern))
        {
            out.push(Problem {
                code: ProblemCode::InvalidEntityCheck,
                task_id: None,
                field: format!("entities[{i}].check"),
                message: crate::checks::error_text("invalid pattern", &err.source),
            });
        }
        if e.grounded_value.is_some() && e.grounded_values.is_some() {
            out.push(Problem {
                code: ProblemCode::ConflictingGroundedValue,
                task_id: None,
                field: format!("entities[{i}]"),
                message: format!(
                    "entity {} has both grounded_value and grounded_values; keep one",
                    quoted(&e.name)
                ),
            });
        }
    }
    names
}

/// The plan's entity names, for membership and for suggestions.
struct Known<'p> {
    names: &'p HashSet<&'p str>,
    suggest: Suggester<'p>,
}

fn check_task(
    i: usize,
    task: &SubTask,
    first_index: &HashMap<&str, usize>,
    task_names: &Suggester<'_>,
    entities: &Known<'_>,
    out: &mut Vec<Problem>,
) {
    let tid = (!task.id.trim().is_empty()).then(|| task.id.clone());
    let mut push = |code, field: String, message: String| {
        out.push(Problem {
            code,
            task_id: tid.clone(),
            field,
            message,
        })
    };
    let at = |field: &str| format!("sub_tasks[{i}].{field}");

    // Id.
    if task.id.trim().is_empty() {
        push(ProblemCode::EmptyId, at("id"), "task id is empty".into());
    } else if let Some(why) = id_unsafe_reason(&task.id) {
        push(ProblemCode::InvalidId, at("id"), format!("task id {why}"));
    }
    if let Some(&j) = first_index.get(task.id.as_str())
        && j != i
        && !task.id.trim().is_empty()
    {
        push(
            ProblemCode::DuplicateId,
            at("id"),
            format!(
                "duplicate task id {} (first at sub_tasks[{j}])",
                quoted(&task.id)
            ),
        );
    }

    // Description.
    if task.description.trim().is_empty() {
        push(
            ProblemCode::EmptyDescription,
            at("description"),
            "description is empty".into(),
        );
    } else if task.description.trim().contains(['\n', '\r']) {
        push(
            ProblemCode::MultilineDescription,
            at("description"),
            "description must be one line (it becomes the heading `### Task {id}: {description}`)"
                .into(),
        );
    }

    // Dependencies.
    let mut seen_deps: HashMap<&str, usize> = HashMap::new();
    for (k, dep) in task.dependencies.iter().enumerate() {
        let field = || at(&format!("dependencies[{k}]"));
        if let Some(&prev) = seen_deps.get(dep.as_str()) {
            push(
                ProblemCode::DuplicateDependency,
                field(),
                format!(
                    "{} is listed twice (first at dependencies[{prev}])",
                    quoted(dep)
                ),
            );
            continue;
        }
        seen_deps.insert(dep, k);
        if *dep == task.id {
            push(
                ProblemCode::SelfDependency,
                field(),
                "a task cannot depend on itself".into(),
            );
        } else if !first_index.contains_key(dep.as_str()) {
            push(
                ProblemCode::UnknownDependency,
                field(),
                format!(
                    "unknown task id {}{}",
                    quoted(dep),
                    task_names.did_you_mean(dep, Some(task.id.as_str()))
                ),
            );
        }
    }

    // Entity references.
    let mut seen_entities: HashMap<&str, usize> = HashMap::new();
    for (k, ec) in task.entity_context.iter().enumerate() {
        let field = || at(&format!("entity_context[{k}].entity_name"));
        if let Some(&prev) = seen_entities.get(ec.entity_name.as_str()) {
            push(
                ProblemCode::DuplicateEntityContext,
                field(),
                format!(
                    "entity {} is listed twice (first at entity_context[{prev}])",
                    quoted(&ec.entity_name)
                ),
            );
            continue;
        }
        seen_entities.insert(&ec.entity_name, k);
        if !entities.names.contains(ec.entity_name.as_str()) {
            push(
                ProblemCode::UnknownEntity,
                field(),
                format!(
                    "unknown entity {}{}",
                    quoted(&ec.entity_name),
                    entities.suggest.did_you_mean(&ec.entity_name, None)
                ),
            );
        }
    }

    // Tool and parameters.
    let tool = &task.tool_or_prompt;
    if !KNOWN_TOOLS.contains(&tool.name.as_str()) {
        push(
            ProblemCode::UnknownTool,
            at("tool_or_prompt.name"),
            format!(
                "unknown tool {} (this build ships: {}){}",
                quoted(&tool.name),
                KNOWN_TOOLS.join(", "),
                Suggester::new(KNOWN_TOOLS).did_you_mean(&tool.name, None)
            ),
        );
    }
    let p = &tool.params;
    if p.prompt.trim().is_empty() {
        push(
            ProblemCode::EmptyPrompt,
            at("tool_or_prompt.params.prompt"),
            "prompt is empty".into(),
        );
    }
    if let Some(t) = p.temperature
        && !TEMPERATURE_RANGE.contains(&t)
    {
        push(
            ProblemCode::TemperatureOutOfRange,
            at("tool_or_prompt.params.temperature"),
            format!(
                "temperature {t} is outside {}..={}",
                TEMPERATURE_RANGE.start(),
                TEMPERATURE_RANGE.end()
            ),
        );
    }
    if let Some(t) = p.top_p
        && !(0.0..=1.0).contains(&t)
    {
        push(
            ProblemCode::TopPOutOfRange,
            at("tool_or_prompt.params.top_p"),
            format!("top_p {t} is outside 0..=1"),
        );
    }
    if p.max_tokens == Some(0) {
        push(
            ProblemCode::ZeroMaxTokens,
            at("tool_or_prompt.params.max_tokens"),
            "max_tokens must be at least 1".into(),
        );
    }
}

/// Why `id` cannot serve as a file name, if it cannot.
fn id_unsafe_reason(id: &str) -> Option<String> {
    if id.trim() != id {
        return Some(format!("{} has leading or trailing whitespace", quoted(id)));
    }
    if id == "." || id == ".." {
        return Some(format!("{} cannot be used as a file name", quoted(id)));
    }
    if let Some(c) = id
        .chars()
        .find(|c| matches!(c, '/' | '\\') || c.is_control())
    {
        return Some(format!(
            "{} contains {} (ids name files, so no path separators or control characters)",
            quoted(id),
            quoted(&c.to_string())
        ));
    }
    if id.len() > MAX_ID_BYTES {
        return Some(format!(
            "is {} bytes long (at most {MAX_ID_BYTES})",
            id.len()
        ));
    }
    None
}

/// The most cycles one check lists. A dense tangle of tasks can hold
/// exponentially many; past this many, one more problem says the list
/// stops here.
pub const MAX_REPORTED_CYCLES: usize = 100;

/// Every elementary cycle of the dependency graph (Johnson's algorithm),
/// as task indices in "depends on" order, each starting at its smallest
/// index, sorted; at most `limit` of them, and whether more exist.
/// Self-loops, unknown ids and later duplicates of an id take no part.
/// Iterative throughout, so a long chain cannot overflow the stack.
pub(crate) fn find_cycles_limited(plan: &Plan, limit: usize) -> (Vec<Vec<usize>>, bool) {
    let graph = DependencyGraph::new(plan);
    let n = graph.len();
    // Johnson's walk over "depends on" edges; self-dependencies are
    // reported on their own and take no part.
    let adj: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            graph
                .dependencies(i)
                .iter()
                .copied()
                .filter(|&j| j != i)
                .collect()
        })
        .collect();
    let canonical: Vec<bool> = (0..n).map(|i| graph.is_canonical(i)).collect();
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    let mut more = false;

    // Components still to search, each a sorted list of task indices.
    let all: Vec<bool> = canonical;
    let mut pending: Vec<Vec<usize>> = graph.cyclic_components(&all);
    // Process the component with the smallest start first, so the cycles
    // found under a limit do not depend on hash order.
    pending.sort_by(|a, b| b.first().cmp(&a.first()));

    let mut in_scc = vec![false; n];
    let mut blocked = vec![false; n];
    let mut closed = vec![false; n];
    let mut b_sets: Vec<Vec<usize>> = vec![Vec::new(); n];

    'components: while let Some(scc) = pending.pop() {
        let Some(&start) = scc.first() else { continue };
        for &v in &scc {
            in_scc[v] = true;
            blocked[v] = false;
            closed[v] = false;
            b_sets[v].clear();
        }
        let mut path = vec![start];
        blocked[start] = true;
        // (node, next neighbour to try)
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some(top) = stack.last_mut() {
            let (node, edge) = *top;
            let next = adj[node][edge..]
                .iter()
                .position(|&w| in_scc[w])
                .map(|p| edge + p);
            if let Some(k) = next {
                top.1 = k + 1;
                let w = adj[node][k];
                if w == start {
                    if cycles.len() == limit {
                        more = true;
                        break 'components;
                    }
                    cycles.push(path.clone());
                    for &v in &path {
                        closed[v] = true;
                    }
                } else if !blocked[w] {
                    path.push(w);
                    stack.push((w, 0));
                    closed[w] = false;
                    blocked[w] = true;
                }
                continue;
            }
            // Every neighbour tried.
            if closed[node] {
                unblock(node, &mut blocked, &mut b_sets);
            } else {
                for &w in &adj[node] {
                    if in_scc[w] && !b_sets[w].contains(&node) {
                        b_sets[w].push(node);
                    }
                }
            }
            stack.pop();
            path.pop();
        }
        for &v in &scc {
            in_scc[v] = false;
        }
        // The rest of the component, without its start, may hold more.
        let mut rest = vec![false; n];
        for &v in &scc[1..] {
            rest[v] = true;
        }
        let mut found = graph.cyclic_components(&rest);
        found.sort_by(|a, b| b.first().cmp(&a.first()));
        pending.extend(found);
        pending.sort_by(|a, b| b.first().cmp(&a.first()));
    }
    cycles.sort();
    (cycles, more)
}

/// Johnson's unblock: frees `node` and, transitively, whatever waited on it.
fn unblock(node: usize, blocked: &mut [bool], b_sets: &mut [Vec<usize>]) {
    let mut stack = vec![node];
    while let Some(v) = stack.pop() {
        if blocked[v] {
            blocked[v] = false;
            stack.append(&mut b_sets[v]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Entity, EntityContext, Params, PlanConfig, ToolOrPrompt};

    fn task(id: &str, deps: &[&str]) -> SubTask {
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
        }
    }

    fn entity(name: &str) -> Entity {
        Entity {
            name: name.into(),
            entity_type: None,
            intent: None,
            grounded_value: Some("v".into()),
            grounded_values: None,
            check: None,
        }
    }

    fn plan(tasks: Vec<SubTask>) -> Plan {
        Plan {
            schema_version: 1,
            goal: None,
            entities: Vec::new(),
            sub_tasks: tasks,
            config: PlanConfig::default(),
        }
    }

    fn codes(p: &Plan) -> Vec<ProblemCode> {
        validate(p).iter().map(|p| p.code).collect()
    }

    fn only(p: &Plan) -> Problem {
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
    fn empty_and_duplicate_ids() {
        let p = plan(vec![
            task("a", &[]),
            task(" ", &[]),
            task("a", &[]),
            task("", &[]),
        ]);
        let problems = validate(&p);
        assert_eq!(
            problems.iter().map(|p| p.code).collect::<Vec<_>>(),
            [
                ProblemCode::EmptyId,
                ProblemCode::DuplicateId,
                ProblemCode::EmptyId
            ]
        );
        assert_eq!(problems[0].task_id, None);
        assert_eq!(problems[0].field, "sub_tasks[1].id");
        assert_eq!(
            problems[1].to_string(),
            r#"task "a": sub_tasks[2].id: duplicate task id "a" (first at sub_tasks[0])"#
        );
    }

    #[test]
    fn ids_must_be_safe_file_names() {
        for bad in ["../etc", "a/b", "a\\b", ".", "..", " a", "a\n", "x\u{7}"] {
            let p = plan(vec![task(bad, &[])]);
            assert_eq!(codes(&p), [ProblemCode::InvalidId], "{bad:?}");
        }
        let long = "x".repeat(MAX_ID_BYTES + 1);
        assert_eq!(
            codes(&plan(vec![task(&long, &[])])),
            [ProblemCode::InvalidId]
        );
        for good in ["1", "html structure", "css.v2", "ünïcode-id", "a..b"] {
            assert_eq!(validate(&plan(vec![task(good, &[])])), [], "{good:?}");
        }
    }

    #[test]
    fn descriptions() {
        let mut t = task("a", &[]);
        t.description = "  ".into();
        assert_eq!(
            only(&plan(vec![t.clone()])).code,
            ProblemCode::EmptyDescription
        );
        t.description = "line one\nline two".into();
        let p = only(&plan(vec![t.clone()]));
        assert_eq!(p.code, ProblemCode::MultilineDescription);
        assert_eq!(p.field, "sub_tasks[0].description");
        // A trailing newline (YAML `|` blocks) is tolerated.
        t.description = "one line\n".into();
        assert_eq!(validate(&plan(vec![t])), []);
    }

    #[test]
    fn self_unknown_and_duplicate_dependencies() {
        let p = plan(vec![
            task("html", &[]),
            task("js", &[]),
            task("css", &["css", "htm", "html", "html", "zzz"]),
        ]);
        let problems = validate(&p);
        let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            lines,
            [
                r#"task "css": sub_tasks[2].dependencies[0]: a task cannot depend on itself"#,
                r#"task "css": sub_tasks[2].dependencies[1]: unknown task id "htm" (did you mean "html"?)"#,
                r#"task "css": sub_tasks[2].dependencies[3]: "html" is listed twice (first at dependencies[2])"#,
                r#"task "css": sub_tasks[2].dependencies[4]: unknown task id "zzz""#,
            ]
        );
        assert_eq!(
            problems.iter().map(|p| p.code).collect::<Vec<_>>(),
            [
                ProblemCode::SelfDependency,
                ProblemCode::UnknownDependency,
                ProblemCode::DuplicateDependency,
                ProblemCode::UnknownDependency
            ]
        );
    }

    #[test]
    fn a_cycle_is_printed_as_a_path() {
        let p = plan(vec![
            task("a", &["c"]),
            task("b", &["a"]),
            task("c", &["b"]),
        ]);
        let problem = only(&p);
        assert_eq!(problem.code, ProblemCode::Cycle);
        assert_eq!(problem.task_id.as_deref(), Some("a"));
        assert_eq!(problem.field, "sub_tasks[0].dependencies");
        assert_eq!(
            problem.message,
            r#"dependency cycle: "a" -> "c" -> "b" -> "a""#
        );
    }

    #[test]
    fn every_cycle_once_in_a_stable_order() {
        // Two separate cycles, and a two-node cycle sharing a node with a
        // three-node one.
        let p = plan(vec![
            task("x", &["y"]),
            task("y", &["x"]),
            task("a", &["b"]),
            task("b", &["c", "a"]),
            task("c", &["a"]),
            task("ok", &["a"]),
        ]);
        let messages: Vec<String> = validate(&p).into_iter().map(|p| p.message).collect();
        assert_eq!(
            messages,
            [
                r#"dependency cycle: "x" -> "y" -> "x""#,
                r#"dependency cycle: "a" -> "b" -> "a""#,
                r#"dependency cycle: "a" -> "b" -> "c" -> "a""#,
            ]
        );
        // The same plan with tasks listed in another order reports the same
        // cycles (as sets of edges), so reports do not depend on luck.
        let mut shuffled = p.clone();
        shuffled.sub_tasks.reverse();
        assert_eq!(validate(&shuffled).len(), 3);
    }

    #[test]
    fn cycles_sharing_edges_are_all_listed() {
        // a -> b -> c -> a and a -> c -> a share the edge c -> a; a search
        // that reports one cycle per back edge would miss the second.
        let p = plan(vec![
            task("a", &["b", "c"]),
            task("b", &["c"]),
            task("c", &["a"]),
        ]);
        let messages: Vec<String> = validate(&p).into_iter().map(|p| p.message).collect();
        assert_eq!(
            messages,
            [
                r#"dependency cycle: "a" -> "b" -> "c" -> "a""#,
                r#"dependency cycle: "a" -> "c" -> "a""#,
            ]
        );
    }

    #[test]
    fn a_dense_tangle_stops_at_the_limit() {
        // Six tasks each depending on all others: 409 elementary cycles.
        let ids = ["a", "b", "c", "d", "e", "f"];
        let tasks = ids
            .iter()
            .map(|id| {
                let deps: Vec<&str> = ids.iter().copied().filter(|d| d != id).collect();
                task(id, &deps)
            })
            .collect();
        let problems = validate(&plan(tasks));
        assert_eq!(problems.len(), MAX_REPORTED_CYCLES + 1);
        assert!(problems.iter().all(|p| p.code == ProblemCode::Cycle));
        let last = problems.last().unwrap();
        assert_eq!(last.task_id, None);
        assert_eq!(
            last.message,
            format!("more dependency cycles exist; the list stops at {MAX_REPORTED_CYCLES}")
        );
        let (all, more) = find_cycles_limited(
            &plan(
                ids.iter()
                    .map(|id| {
                        let deps: Vec<&str> = ids.iter().copied().filter(|d| d != id).collect();
                        task(id, &deps)
                    })
                    .collect(),
            ),
            usize::MAX,
        );
        assert_eq!(all.len(), 409);
        assert!(!more);
    }

    #[test]
    fn many_cycles_in_a_big_plan_stop_at_the_limit() {
        // 40,000 two-task cycles, and one ladder of 20,000 tasks where each
        // depends on both neighbours: the search stops after the limit
        // instead of walking every component.
        let mut tasks: Vec<SubTask> = (0..40_000)
            .map(|i| {
                let other = if i % 2 == 0 { i + 1 } else { i - 1 };
                task(&format!("p{i}"), &[&format!("p{other}")])
            })
            .collect();
        tasks.extend((0..20_000).map(|i: usize| {
            let mut deps = Vec::new();
            if i > 0 {
                deps.push(format!("l{}", i - 1));
            }
            if i < 19_999 {
                deps.push(format!("l{}", i + 1));
            }
            let mut t = task(&format!("l{i}"), &[]);
            t.dependencies = deps;
            t
        }));
        let problems = validate(&plan(tasks));
        assert_eq!(problems.len(), MAX_REPORTED_CYCLES + 1);
        assert_eq!(
            problems[0].message,
            r#"dependency cycle: "p0" -> "p1" -> "p0""#
        );
    }

    #[test]
    fn cycles_ignore_unknown_ids_and_self_loops() {
        let p = plan(vec![task("a", &["a", "ghost"]), task("b", &["a"])]);
        assert_eq!(
            codes(&p),
            [ProblemCode::SelfDependency, ProblemCode::UnknownDependency]
        );
    }

    #[test]
    fn a_long_chain_does_not_overflow() {
        let n = 100_000;
        let mut tasks: Vec<SubTask> = (0..n)
            .map(|i| {
                let deps: Vec<String> = if i == 0 {
                    vec![]
                } else {
                    vec![(i - 1).to_string()]
                };
                let mut t = task(&i.to_string(), &[]);
                t.dependencies = deps;
                t
            })
            .collect();
        assert_eq!(validate(&plan(tasks.clone())), []);
        tasks[0].dependencies.push((n - 1).to_string());
        let problems = validate(&plan(tasks));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].code, ProblemCode::Cycle);
    }

    #[test]
    fn tools_prompts_and_params() {
        let mut t = task("a", &[]);
        t.tool_or_prompt.name = "inferense".into();
        t.tool_or_prompt.params.prompt = " \n".into();
        t.tool_or_prompt.params.temperature = Some(2.5);
        t.tool_or_prompt.params.top_p = Some(f64::NAN);
        t.tool_or_prompt.params.max_tokens = Some(0);
        let problems = validate(&plan(vec![t]));
        let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            lines,
            [
                r#"task "a": sub_tasks[0].tool_or_prompt.name: unknown tool "inferense" (this build ships: inference) (did you mean "inference"?)"#,
                r#"task "a": sub_tasks[0].tool_or_prompt.params.prompt: prompt is empty"#,
                r#"task "a": sub_tasks[0].tool_or_prompt.params.temperature: temperature 2.5 is outside 0..=2"#,
                r#"task "a": sub_tasks[0].tool_or_prompt.params.top_p: top_p NaN is outside 0..=1"#,
                r#"task "a": sub_tasks[0].tool_or_prompt.params.max_tokens: max_tokens must be at least 1"#,
            ]
        );
        let mut t = task("a", &[]);
        t.tool_or_prompt.params.temperature = Some(f64::NAN);
        assert_eq!(codes(&plan(vec![t])), [ProblemCode::TemperatureOutOfRange]);
        let mut t = task("a", &[]);
        t.tool_or_prompt.params.temperature = Some(0.0);
        t.tool_or_prompt.params.top_p = Some(1.0);
        assert_eq!(validate(&plan(vec![t])), []);
    }

    #[test]
    fn entities_and_their_references() {
        let mut both = entity("Both");
        both.grounded_values = Some(vec!["x".into()]);
        let mut p = plan(vec![task("a", &[])]);
        p.entities = vec![entity("Board"), entity("Board"), entity(""), both];
        p.sub_tasks[0].entity_context = ["Bord", "Board", "Board", "Nothing like it"]
            .iter()
            .map(|n| EntityContext {
                entity_name: n.to_string(),
                intent_relevance: None,
                grounded_value: None,
                usage_note: None,
            })
            .collect();
        let lines: Vec<String> = validate(&p).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            lines,
            [
                r#"entities[1].name: duplicate entity name "Board" (first at entities[0])"#,
                r#"entities[2].name: entity name is empty"#,
                r#"entities[3]: entity "Both" has both grounded_value and grounded_values; keep one"#,
                r#"task "a": sub_tasks[0].entity_context[0].entity_name: unknown entity "Bord" (did you mean "Board"?)"#,
                r#"task "a": sub_tasks[0].entity_context[2].entity_name: entity "Board" is listed twice (first at entity_context[1])"#,
                r#"task "a": sub_tasks[0].entity_context[3].entity_name: unknown entity "Nothing like it""#,
            ]
        );
    }

    #[test]
    fn config_values() {
        let mut p = plan(vec![task("a", &[])]);
        p.config.tokenizer = Some("cl100k".into());
        p.config.max_prompt_tokens = 0;
        p.config.dependency.max_output_length = Some(0);
        let problems = validate(&p);
        assert_eq!(
            problems.iter().map(|p| p.code).collect::<Vec<_>>(),
            [
                ProblemCode::UnknownTokenizer,
                ProblemCode::ZeroMaxPromptTokens,
                ProblemCode::ZeroMaxOutputLength
            ]
        );
        assert_eq!(problems[0].field, "config.tokenizer");
        assert!(problems[0].message.contains("unknown tokenizer `cl100k`"));
        p.config.tokenizer = Some("O200K_BASE".into());
        p.config.max_prompt_tokens = 1;
        p.config.dependency.max_output_length = None;
        assert!(validate(&p).is_empty());
        p.config.dependency.summary_max_tokens = 0;
        p.config.dependency.summary_model = Some(" ".into());
        p.config.dependency.summary_prompt = Some("Sum up {{DESCRIPTION}} {{OUTPT}} {{x}}".into());
        let codes: Vec<(ProblemCode, String)> = validate(&p)
            .into_iter()
            .map(|q| (q.code, q.message))
            .collect();
        assert_eq!(codes.len(), 4, "{codes:?}");
        assert_eq!(codes[0].0, ProblemCode::ZeroSummaryMaxTokens);
        assert_eq!(codes[1].0, ProblemCode::EmptySummaryModel);
        assert_eq!(codes[2].0, ProblemCode::BadSummaryPrompt);
        assert!(codes[3].1.contains("{{OUTPT}}"), "{codes:?}");
        p.config.dependency.summary_max_tokens = 1;
        p.config.dependency.summary_model = None;
        p.config.dependency.summary_prompt = Some("{{FOCUS}} {{OUTPUT}} {{ {{DESCRIPTION}}".into());
        assert_eq!(validate(&p), []);
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
