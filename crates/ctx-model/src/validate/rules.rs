//! The per-field rules: config values, entities, each task's id,
//! description, dependencies, entity references, tool and parameters, and
//! the unknown fields collected while reading.

use std::collections::{HashMap, HashSet};

use super::suggestions::Suggester;
use super::{PatternCheck, Problem, ProblemCode, quoted};
#[cfg(feature = "parse")]
use crate::parse::UnknownField;
use crate::plan::{INFERENCE_TOOL, Plan, SubTask};

/// The longest task id, in bytes. Ids name files (`prompts/{id}.md`), and
/// most file systems cap a name at 255 bytes.
pub const MAX_ID_BYTES: usize = 128;

/// The tools a plan may name. Only [`INFERENCE_TOOL`] ships.
pub const KNOWN_TOOLS: [&str; 1] = [INFERENCE_TOOL];

/// The accepted range of `params.temperature`.
pub const TEMPERATURE_RANGE: std::ops::RangeInclusive<f64> = 0.0..=2.0;

/// Every rule's problems for `plan`, in order: config, entities, "no
/// tasks", then each task in file order.
pub(super) fn check_plan(plan: &Plan, entity_pattern: PatternCheck<'_>, out: &mut Vec<Problem>) {
    check_config(plan, out);
    let entity_names = check_entities(plan, entity_pattern, out);
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
        check_task(i, task, &first_index, &task_names, &entities, out);
    }
}

#[cfg(feature = "parse")]
pub(super) fn unknown_field_problem(plan: &Plan, unknown: &UnknownField) -> Problem {
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
    if let Err(e) = cfg.parsed_tokenizer() {
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
    if let Some(message) = cfg.cache_breakpoints.as_ref().and_then(|b| b.problem()) {
        out.push(Problem {
            code: ProblemCode::InvalidCacheBreakpoints,
            task_id: None,
            field: "config.cache_breakpoints.after".into(),
            message,
        });
    }
    if let Some(k) = cfg
        .cache_warm_up
        .filter(|&k| k < crate::prompt_cache::MIN_WARM_UP_CALLS)
    {
        out.push(Problem {
            code: ProblemCode::InvalidCacheWarmUp,
            task_id: None,
            field: "config.cache_warm_up".into(),
            message: format!(
                "{k} calls: must be at least {} (the call that warms the cache and one that uses it), or left out for no warm-up",
                crate::prompt_cache::MIN_WARM_UP_CALLS
            ),
        });
    }
    check_summary_settings(cfg, out);
    if let Some(budget) = &cfg.budget {
        check_fallbacks(&budget.fallback, out);
    }
}

/// Each fallback's `above` is a fraction in (0, 1], and each is above the
/// one before it: tiers are written cheapest-last, so a repeated or
/// unsorted threshold is a mistake (which of two tiers at 0.8 applies?).
fn check_fallbacks(fallbacks: &[crate::BudgetFallback], out: &mut Vec<Problem>) {
    let mut before: Option<f64> = None;
    for (i, f) in fallbacks.iter().enumerate() {
        let field = format!("config.budget.fallback[{i}].above");
        let message = if !(f.above > 0.0 && f.above <= 1.0) {
            Some(format!(
                "{}: must be a fraction of the budget above 0 and at most 1",
                f.above
            ))
        } else {
            before.filter(|&b| f.above <= b).map(|b| {
                format!(
                    "{}: must be above the threshold before it ({b}); write the tiers in rising order, each once",
                    f.above
                )
            })
        };
        if let Some(message) = message {
            out.push(Problem {
                code: ProblemCode::InvalidBudgetFallback,
                task_id: None,
                field,
                message,
            });
        }
        if f.model.trim().is_empty() {
            out.push(Problem {
                code: ProblemCode::InvalidBudgetFallback,
                task_id: None,
                field: format!("config.budget.fallback[{i}].model"),
                message: "is empty: name the model the tier calls".into(),
            });
        }
        if f.max_tokens == Some(0) {
            out.push(Problem {
                code: ProblemCode::InvalidBudgetFallback,
                task_id: None,
                field: format!("config.budget.fallback[{i}].max_tokens"),
                message: "must be at least 1, or left out to keep each task's own".into(),
            });
        }
        before = Some(before.map_or(f.above, |b| b.max(f.above)));
    }
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

/// Checks the plan's entities (each `check:` pattern with
/// `entity_pattern`); returns the set of names, first occurrence winning.
fn check_entities<'p>(
    plan: &'p Plan,
    entity_pattern: PatternCheck<'_>,
    out: &mut Vec<Problem>,
) -> Vec<&'p str> {
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
            && let Some(message) = entity_pattern(pattern)
        {
            out.push(Problem {
                code: ProblemCode::InvalidEntityCheck,
                task_id: None,
                field: format!("entities[{i}].check"),
                message,
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

/// Every problem of task number `i` alone, in field order: its id,
/// description, dependencies, entity references, tool and parameters.
fn check_task(
    i: usize,
    task: &SubTask,
    first_index: &HashMap<&str, usize>,
    task_names: &Suggester<'_>,
    entities: &Known<'_>,
    out: &mut Vec<Problem>,
) {
    // An empty id is no id: the problems name none.
    let mut report = TaskReport {
        i,
        task_id: (!task.id.trim().is_empty()).then(|| task.id.clone()),
        out,
    };
    check_id(task, first_index, &mut report);
    check_description(task, &mut report);
    check_dependencies(task, first_index, task_names, &mut report);
    check_entity_references(task, entities, &mut report);
    check_tool(task, &mut report);
    check_approval(task, &mut report);
}

/// The task's `approval` block: a `before: publish` gate needs a
/// `publish` path to hold, and a message says something.
fn check_approval(task: &SubTask, report: &mut TaskReport<'_>) {
    let Some(approval) = &task.approval else {
        return;
    };
    if approval.before == crate::approval::GateStage::Publish && task.publish.is_none() {
        let why = if task.map.is_some() {
            "a map task publishes nothing; gate it with `before: run`, or gate the reduce"
        } else {
            "`before: publish` holds the task's published output, and the task has no `publish` path"
        };
        report.push(ProblemCode::InvalidApproval, "approval.before", why.into());
    }
    if approval
        .message
        .as_deref()
        .is_some_and(|m| m.trim().is_empty())
    {
        report.push(
            ProblemCode::InvalidApproval,
            "approval.message",
            "the message is empty; say what to look at, or leave it out".into(),
        );
    }
}

/// Where the problems of task number `i` go: each carries `task_id` and
/// a field under `sub_tasks[i]`.
pub(super) struct TaskReport<'o> {
    pub(super) i: usize,
    pub(super) task_id: Option<String>,
    pub(super) out: &'o mut Vec<Problem>,
}

impl TaskReport<'_> {
    /// Reports `message` about the task's `field` (a path below the task).
    pub(super) fn push(&mut self, code: ProblemCode, field: &str, message: String) {
        self.out.push(Problem {
            code,
            task_id: self.task_id.clone(),
            field: format!("sub_tasks[{}].{field}", self.i),
            message,
        });
    }
}

/// The task's id: not empty, safe as a file name and a heading, and not
/// the id of an earlier task.
fn check_id(task: &SubTask, first_index: &HashMap<&str, usize>, report: &mut TaskReport<'_>) {
    if task.id.trim().is_empty() {
        report.push(ProblemCode::EmptyId, "id", "task id is empty".into());
    } else if let Some(why) = id_unsafe_reason(&task.id) {
        report.push(ProblemCode::InvalidId, "id", format!("task id {why}"));
    }
    if let Some(&j) = first_index.get(task.id.as_str())
        && j != report.i
        && !task.id.trim().is_empty()
    {
        report.push(
            ProblemCode::DuplicateId,
            "id",
            format!(
                "duplicate task id {} (first at sub_tasks[{j}])",
                quoted(&task.id)
            ),
        );
    }
}

/// The task's description: not empty, and one line, since it becomes a
/// heading.
fn check_description(task: &SubTask, report: &mut TaskReport<'_>) {
    if task.description.trim().is_empty() {
        report.push(
            ProblemCode::EmptyDescription,
            "description",
            "description is empty".into(),
        );
    } else if task.description.trim().contains(['\n', '\r']) {
        report.push(
            ProblemCode::MultilineDescription,
            "description",
            "description must be one line (it becomes the heading `### Task {id}: {description}`)"
                .into(),
        );
    }
}

/// The task's dependencies: each listed once, not the task itself, and
/// a task of the plan (with the nearest id suggested when it is not).
fn check_dependencies(
    task: &SubTask,
    first_index: &HashMap<&str, usize>,
    task_names: &Suggester<'_>,
    report: &mut TaskReport<'_>,
) {
    let mut seen_deps: HashMap<&str, usize> = HashMap::new();
    for (k, dep) in task.dependencies.iter().enumerate() {
        let field = format!("dependencies[{k}]");
        if let Some(&prev) = seen_deps.get(dep.as_str()) {
            report.push(
                ProblemCode::DuplicateDependency,
                &field,
                format!(
                    "{} is listed twice (first at dependencies[{prev}])",
                    quoted(dep)
                ),
            );
            continue;
        }
        seen_deps.insert(dep, k);
        if *dep == task.id {
            report.push(
                ProblemCode::SelfDependency,
                &field,
                "a task cannot depend on itself".into(),
            );
        } else if !first_index.contains_key(dep.as_str()) {
            report.push(
                ProblemCode::UnknownDependency,
                &field,
                format!(
                    "unknown task id {}{}",
                    quoted(dep),
                    task_names.did_you_mean(dep, Some(task.id.as_str()))
                ),
            );
        }
    }
}

/// The task's entity references: each listed once, and an entity of the
/// plan (with the nearest name suggested when it is not).
fn check_entity_references(task: &SubTask, entities: &Known<'_>, report: &mut TaskReport<'_>) {
    let mut seen_entities: HashMap<&str, usize> = HashMap::new();
    for (k, ec) in task.entity_context.iter().enumerate() {
        let field = format!("entity_context[{k}].entity_name");
        if let Some(&prev) = seen_entities.get(ec.entity_name.as_str()) {
            report.push(
                ProblemCode::DuplicateEntityContext,
                &field,
                format!(
                    "entity {} is listed twice (first at entity_context[{prev}])",
                    quoted(&ec.entity_name)
                ),
            );
            continue;
        }
        seen_entities.insert(&ec.entity_name, k);
        if !entities.names.contains(ec.entity_name.as_str()) {
            report.push(
                ProblemCode::UnknownEntity,
                &field,
                format!(
                    "unknown entity {}{}",
                    quoted(&ec.entity_name),
                    entities.suggest.did_you_mean(&ec.entity_name, None)
                ),
            );
        }
    }
}

/// The task's tool and parameters: a tool this build ships, a prompt,
/// and a temperature, `top_p` and `max_tokens` within their ranges.
fn check_tool(task: &SubTask, report: &mut TaskReport<'_>) {
    let tool = &task.tool_or_prompt;
    if !KNOWN_TOOLS.contains(&tool.name.as_str()) {
        report.push(
            ProblemCode::UnknownTool,
            "tool_or_prompt.name",
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
        report.push(
            ProblemCode::EmptyPrompt,
            "tool_or_prompt.params.prompt",
            "prompt is empty".into(),
        );
    }
    if let Some(t) = p.temperature
        && !TEMPERATURE_RANGE.contains(&t)
    {
        report.push(
            ProblemCode::TemperatureOutOfRange,
            "tool_or_prompt.params.temperature",
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
        report.push(
            ProblemCode::TopPOutOfRange,
            "tool_or_prompt.params.top_p",
            format!("top_p {t} is outside 0..=1"),
        );
    }
    if p.max_tokens == Some(0) {
        report.push(
            ProblemCode::ZeroMaxTokens,
            "tool_or_prompt.params.max_tokens",
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

#[cfg(test)]
mod tests {
    use super::super::tests::{codes, entity, only, plan, task};
    use super::super::validate;
    use super::*;
    use crate::plan::EntityContext;

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
}
