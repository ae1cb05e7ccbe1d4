//! A plan's checks compiled: the second pass of loading a plan.
//!
//! The plan model (ctx-model) parses a plan and validates what it can
//! without a regex or JSON Schema engine; this module compiles what it
//! holds in that language: each task's checks ([`compile_task_checks`]),
//! the entities an `entities` check looks for ([`expected_entities`]),
//! every check and entity pattern that does not compile, located at its
//! field ([`plan_problems`], [`check_problems`]), and a plan made
//! self-contained by inlining its schema files ([`inline_check_schemas`]).
//! [`load_valid_plan`] runs both passes, as every command that acts on a
//! plan does; `ctx plan check` reports [`plan_problems`].
//!
//! Compiling needs the plan's directory (a `json_schema` may name a file
//! relative to it), which `ctx_model::validate` does not have.

use std::path::Path;

use ctx_model::{
    InvalidPlan, LoadPlanError, ParsedPlan, Plan, Problem, ProblemCode, Relevance, SubTask,
    plan_base_dir, task_checks,
};

use crate::{Check, CheckSet, CompileError, ExpectedEntity, Rule, SchemaSource};

/// Reads the plan at `path` (`-` is standard input), parses it, and checks
/// it as `ctx plan check` does (unknown fields, the model's rules, then
/// the checks compiled). A valid plan is returned with its `json_schema`
/// check files inlined ([`inline_check_schemas`]), so that the plan a run
/// stores checks the same schemas when resumed from anywhere.
pub fn load_valid_plan(path: &Path) -> Result<Plan, LoadPlanError> {
    load_valid_plan_with(path, &|_| Vec::new())
}

/// [`load_valid_plan`], with the problems `more` finds in the plan after
/// these: a caller with another pass (ctx-prompt's template rules, which
/// this crate does not depend on) gets them located and reported in the
/// same list.
pub fn load_valid_plan_with(
    path: &Path,
    more: &dyn Fn(&Plan) -> Vec<Problem>,
) -> Result<Plan, LoadPlanError> {
    let source = ctx_model::read_plan_source(path)?;
    let parsed = source.parse_with_unknown_fields()?;
    let base_dir = plan_base_dir(path);
    let mut problems = plan_problems(&parsed, base_dir);
    problems.extend(more(&parsed.plan));
    if problems.is_empty() {
        let mut plan = parsed.plan;
        inline_check_schemas(&mut plan, base_dir);
        return Ok(plan);
    }
    Err(InvalidPlan::new(source.origin, &source.text, problems).into())
}

/// Everything `ctx plan check` reports, in its order: the model's problems
/// ([`ParsedPlan::problems_with`], entity patterns compiled in their place)
/// and then [`check_problems`], with schema files read relative to
/// `base_dir` (the plan's directory).
pub fn plan_problems(parsed: &ParsedPlan, base_dir: &Path) -> Vec<Problem> {
    let mut out = parsed.problems_with(&entity_pattern_problem);
    out.extend(check_problems(&parsed.plan, base_dir));
    out.extend(output_problems(&parsed.plan));
    out
}

/// Every `strip_lines` pattern of `plan`'s `output` blocks that does not
/// compile, located at its field (`config.output.strip_lines[0]`,
/// `sub_tasks[2].output.strip_lines[1]`), in plan order.
pub fn output_problems(plan: &Plan) -> Vec<Problem> {
    let blocks = std::iter::once((None, "config".to_string(), plan.config.output.as_ref())).chain(
        plan.sub_tasks.iter().enumerate().map(|(i, t)| {
            let tid = (!t.id.trim().is_empty()).then(|| t.id.clone());
            (tid, format!("sub_tasks[{i}]"), t.output.as_ref())
        }),
    );
    let mut out = Vec::new();
    for (task_id, parent, block) in blocks {
        let Some(Err(e)) = block.map(crate::OutputCleaner::compile) else {
            continue;
        };
        out.push(Problem {
            code: ProblemCode::InvalidOutputPattern,
            task_id,
            field: format!("{parent}.output.{}", e.field_path()),
            message: error_text("invalid pattern", &e.source),
        });
    }
    out
}

/// Why an entity's `check:` pattern does not compile, as a problem's
/// message; the [`ctx_model::PatternCheck`] this crate passes.
pub fn entity_pattern_problem(pattern: &str) -> Option<String> {
    ExpectedEntity::new("", &[], Some(pattern))
        .err()
        .map(|err| error_text("invalid pattern", &err.source))
}

/// Compiles [`task_checks`]; schema files are read relative to `base_dir`.
/// An error's index counts `config.checks` first; [`check_problems`] names
/// the field as written instead.
pub fn compile_task_checks(
    plan: &Plan,
    task: &SubTask,
    base_dir: &Path,
) -> Result<CheckSet, CompileError> {
    CheckSet::compile(&task_checks(plan, task), base_dir)
}

/// The entities `task` names in `entity_context` with high relevance, as
/// an `entities` check looks for them: the entry's `grounded_value` when it
/// overrides the plan entity's, else the plan entity's `grounded_value` or
/// each of its `grounded_values`; the entity's `check:` pattern instead
/// when it has one. Entities added by `include_all` are not named by the
/// task and are not looked for.
pub fn expected_entities(
    plan: &Plan,
    task: &SubTask,
) -> Result<Vec<ExpectedEntity>, crate::EntityPatternError> {
    let mut out = Vec::new();
    for ec in &task.entity_context {
        if Relevance::from_intent(ec.intent_relevance.as_deref()) != Relevance::High {
            continue;
        }
        let entity = plan.entity(&ec.entity_name);
        let values: Vec<String> = match (&ec.grounded_value, entity) {
            (Some(v), _) => vec![v.clone()],
            (None, Some(e)) => match (&e.grounded_value, &e.grounded_values) {
                (Some(v), _) => vec![v.clone()],
                (None, Some(vs)) => vs.clone(),
                (None, None) => Vec::new(),
            },
            (None, None) => Vec::new(),
        };
        let pattern = entity.and_then(|e| e.check.as_deref());
        out.push(ExpectedEntity::new(&ec.entity_name, &values, pattern)?);
    }
    Ok(out)
}

/// Every check of `plan` that does not compile, each located at the field
/// as written (`config.checks[0].regex`, `sub_tasks[2].checks[1].json_schema`),
/// in plan order. Schema files are read relative to `base_dir`.
pub fn check_problems(plan: &Plan, base_dir: &Path) -> Vec<Problem> {
    let mut out = Vec::new();
    if let Err(e) = CheckSet::compile(&plan.config.checks, base_dir) {
        out.push(compile_problem(None, "config", &e));
    }
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        if let Err(e) = CheckSet::compile(&task.checks, base_dir) {
            let tid = (!task.id.trim().is_empty()).then(|| task.id.clone());
            out.push(compile_problem(tid, &format!("sub_tasks[{i}]"), &e));
        }
    }
    out
}

fn compile_problem(task_id: Option<String>, parent: &str, e: &CompileError) -> Problem {
    // The error's own text starts with its path; the problem names the
    // path as its field, so the message is what follows, with the cause.
    let text = e.to_string();
    let what = text
        .split_once(": ")
        .map_or(text.as_str(), |(_, rest)| rest)
        .to_string();
    let message = match std::error::Error::source(e) {
        Some(source) => format!("{what}: {}", one_line(&source.to_string())),
        None => what,
    };
    Problem {
        code: ProblemCode::InvalidCheck,
        task_id,
        field: format!("{parent}.{}", e.field_path()),
        message,
    }
}

/// `what: cause`, the cause on one line.
fn error_text(what: &str, cause: &dyn std::fmt::Display) -> String {
    format!("{what}: {}", one_line(&cause.to_string()))
}

/// Multi-line errors on one line, so every problem stays one line of
/// output: the regex crate's caret line under the pattern means nothing
/// once the lines are joined, so it is left out
/// (`regex parse error: (open; error: unclosed group`).
fn one_line(text: &str) -> String {
    let mut out = String::new();
    let lines = text
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '^' || c.is_whitespace()));
    for line in lines {
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    out
}

/// Replaces every `json_schema` file path of `plan` by the schema it holds
/// (read relative to `base_dir`), so the plan is self-contained: a stored
/// plan resumed from another directory checks the same schemas. Call it on
/// a plan whose [`check_problems`] are empty; a file that cannot be read or
/// parsed is left as a path (and fails to compile again).
pub fn inline_check_schemas(plan: &mut Plan, base_dir: &Path) {
    let lists = std::iter::once(&mut plan.config.checks)
        .chain(plan.sub_tasks.iter_mut().map(|t| &mut t.checks));
    for list in lists {
        for check in list.iter_mut() {
            inline_schema(check, base_dir);
        }
    }
}

fn inline_schema(check: &mut Check, base_dir: &Path) {
    if let Rule::JsonSchema { schema } = &mut check.rule
        && let SchemaSource::Path(path) = schema
        && let Some(value) = read_schema(&base_dir.join(&*path))
    {
        *schema = SchemaSource::Inline(value);
    }
}

fn read_schema(path: &Path) -> Option<serde_json::Value> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(crate::compile::MAX_SCHEMA_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    if text.len() as u64 > crate::compile::MAX_SCHEMA_BYTES {
        return None;
    }
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::{FieldLocator, PlanFormat, judge_checks, parse_plan_with_unknown_fields};

    const PLAN: &str = "\
schema_version: 1
entities:
  - name: Board
    grounded_value: 10 x 20
  - name: Scoring
    grounded_values: [\"40\", \"1200\"]
    check: \"(?i)nintendo\"
sub_tasks:
  - id: css
    description: Style
    entity_context:
      - {entity_name: Board, intent_relevance: constraint}
      - {entity_name: Scoring, intent_relevance: context}
    checks:
      - contains: grid
      - regex: \"(unclosed\"
    tool_or_prompt: {name: inference, params: {prompt: Go.}}
  - id: score
    description: Score
    entity_context:
      - {entity_name: Scoring, intent_relevance: must}
      - {entity_name: Board, intent_relevance: must, grounded_value: 12 x 24}
    tool_or_prompt: {name: inference, params: {prompt: Go.}}
config:
  checks:
    - entities: true
    - judge: Is it good?
  max_check_attempts: 3
";

    fn parsed(text: &str) -> ParsedPlan {
        parse_plan_with_unknown_fields(text, "plan.yaml", PlanFormat::Yaml).unwrap()
    }

    #[test]
    fn config_checks_come_first_and_the_regex_is_located() {
        let parsed = parsed(PLAN);
        let plan = &parsed.plan;
        assert_eq!(plan.config.max_check_attempts, 3);
        let kinds: Vec<&str> = task_checks(plan, &plan.sub_tasks[0])
            .iter()
            .map(|c| c.kind().as_str())
            .collect();
        assert_eq!(kinds, ["entities", "judge", "contains", "regex"]);
        let problems = plan_problems(&parsed, Path::new("."));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].code, ProblemCode::InvalidCheck);
        assert_eq!(problems[0].task_id.as_deref(), Some("css"));
        assert_eq!(problems[0].field, "sub_tasks[0].checks[1].regex");
        assert!(
            problems[0].message.starts_with("invalid pattern: "),
            "{}",
            problems[0].message
        );
        assert_eq!(
            problems[0].message,
            "invalid pattern: regex parse error: (unclosed; error: unclosed group"
        );
        let at = FieldLocator::new(PLAN).locate_problem(&problems[0]);
        assert_eq!(at.map(|(l, _)| l), Some(16));
        assert_eq!(
            judge_checks(plan),
            [(None, "config.checks[1].judge".to_string())]
        );
    }

    #[test]
    fn expected_entities_are_the_high_relevance_ones_with_overrides_and_patterns() {
        let plan = parsed(PLAN).plan;
        let css = expected_entities(&plan, &plan.sub_tasks[0]).unwrap();
        assert_eq!(css.iter().map(|e| e.name()).collect::<Vec<_>>(), ["Board"]);
        assert!(css[0].missing("a 10 X 20 grid").is_empty());
        let score = expected_entities(&plan, &plan.sub_tasks[1]).unwrap();
        assert_eq!(score.len(), 2);
        // The pattern replaces the values.
        assert!(score[0].missing("Nintendo scoring").is_empty());
        assert!(!score[0].missing("40 and 1200").is_empty());
        // The task's override replaces the plan's value.
        assert!(score[1].missing("10 x 20").len() == 1);
        assert!(score[1].missing("12 x 24").is_empty());
    }

    #[test]
    fn entity_patterns_and_zero_attempts_are_validated() {
        let text = PLAN
            .replace("check: \"(?i)nintendo\"", "check: \"[\"")
            .replace("max_check_attempts: 3", "max_check_attempts: 0")
            .replace("      - regex: \"(unclosed\"\n", "");
        let problems = plan_problems(&parsed(&text), Path::new("."));
        let fields: Vec<(&str, ProblemCode)> = problems
            .iter()
            .map(|p| (p.field.as_str(), p.code))
            .collect();
        assert_eq!(
            fields,
            [
                (
                    "config.max_check_attempts",
                    ProblemCode::ZeroMaxCheckAttempts
                ),
                ("entities[1].check", ProblemCode::InvalidEntityCheck),
            ]
        );
    }

    #[test]
    fn schema_files_are_read_from_the_plan_directory_and_inlined() {
        let dir = std::env::temp_dir().join(format!("ctx-model-checks-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("schemas")).unwrap();
        std::fs::write(
            dir.join("schemas/score.json"),
            r#"{"type": "object", "required": ["score"]}"#,
        )
        .unwrap();
        let text = "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    checks:\n      - json_schema: schemas/score.json\n      - json_schema: schemas/missing.json\n    tool_or_prompt: {name: inference, params: {prompt: Go.}}\n";
        let mut parsed = parsed(text);
        let problems = plan_problems(&parsed, &dir);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field, "sub_tasks[0].checks[1].json_schema");
        assert!(
            problems[0].message.starts_with("cannot read "),
            "{}",
            problems[0].message
        );
        inline_check_schemas(&mut parsed.plan, &dir);
        assert!(matches!(
            &parsed.plan.sub_tasks[0].checks[0].rule,
            Rule::JsonSchema { schema: SchemaSource::Inline(v) } if v["required"][0] == "score"
        ));
        assert!(matches!(
            &parsed.plan.sub_tasks[0].checks[1].rule,
            Rule::JsonSchema {
                schema: SchemaSource::Path(_)
            }
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_invalid_plan_names_each_problem_by_line() {
        let dir = std::env::temp_dir().join(format!("ctx-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("plan.yaml");
        std::fs::write(
            &path,
            "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    dependencies: [b]\n    tool_or_prompt:\n      name: inference\n      params: {prompt: hi}\n",
        )
        .unwrap();
        let err = load_valid_plan(&path).unwrap_err();
        let LoadPlanError::Invalid(invalid) = &err else {
            panic!("{err}")
        };
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{}: invalid plan (", path.display())),
            "{text}"
        );
        let line = invalid.lines().next().unwrap();
        assert!(line.contains(":5:"), "{line}");
        assert!(line.contains("dependencies"), "{line}");
        std::fs::write(
            &path,
            "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt:\n      name: inference\n      params: {prompt: hi}\n",
        )
        .unwrap();
        assert_eq!(load_valid_plan(&path).unwrap().sub_tasks.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The entity pattern's problem keeps its place among the entities'
    /// problems (before a conflicting value of the same entity, after a
    /// bad name), as it did when the plan model compiled patterns itself:
    /// the pass split must not reorder `ctx plan check`'s lines.
    #[test]
    fn an_entity_pattern_problem_comes_in_its_place() {
        let text = "\
schema_version: 1
entities:
  - name: \"\"
    check: \"[\"
    grounded_value: a
    grounded_values: [b]
sub_tasks:
  - id: a
    description: A
    dependencies: [zz]
    tool_or_prompt: {name: inference, params: {prompt: Go.}}
";
        let problems = plan_problems(&parsed(text), Path::new("."));
        let codes: Vec<ProblemCode> = problems.iter().map(|p| p.code).collect();
        assert_eq!(
            codes,
            [
                ProblemCode::EmptyEntityName,
                ProblemCode::InvalidEntityCheck,
                ProblemCode::ConflictingGroundedValue,
                ProblemCode::UnknownDependency,
            ]
        );
        assert_eq!(
            problems[1].message,
            "invalid pattern: regex parse error: [; error: unclosed character class"
        );
        // The model alone does not compile patterns.
        assert!(
            !parsed(text)
                .problems()
                .iter()
                .any(|p| p.code == ProblemCode::InvalidEntityCheck)
        );
    }
}
