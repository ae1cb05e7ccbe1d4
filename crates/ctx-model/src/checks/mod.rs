//! A plan's checks as data: the check types exactly as a plan spells them
//! ([`Check`], [`Rule`], [`CheckKind`], with their serde and JSON Schema),
//! the result of one check as reports and stores keep it ([`CheckResult`]),
//! and which checks apply to a task ([`task_checks`], [`judge_checks`]).
//!
//! Why here and not in `ctx-checks`: a plan holds checks and a result holds
//! their verdicts, so every crate that reads a plan or a stored run speaks
//! these types, the engine and store seams among them. Compiling a check
//! (patterns, JSON Schemas, schema files) and evaluating it need `regex` and
//! `jsonschema`, which a seam must not pay for; that stays in `ctx-checks`,
//! which re-exports these types at their old paths (`ctx_checks::Check`,
//! `ctx_checks::spec`, `ctx_checks::CheckResult`). The check kinds and their
//! options are documented for plan authors in `docs/checks.md`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::plan::{Plan, SubTask};

mod spec;

pub use spec::{
    Check, CheckKind, DEFAULT_JUDGE_MAX_TOKENS, JudgeSpec, Rule, SchemaSource, SpecError,
};

/// The result of one check on one output, as reports and stores keep it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckResult {
    /// The check's kind.
    pub kind: CheckKind,
    /// Whether the output passed.
    pub passed: bool,
    /// What to show: on failure the check's own `message` when it has one
    /// (and it is not blank), else the generated explanation; on success
    /// what was verified.
    pub message: String,
    /// The generated explanation, when `message` is the check's own and
    /// says something else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The checks run on `task`'s output, in order: `config.checks` first
/// (they apply to every task), then the task's own `checks`, then under
/// `config.canary: true` a `canary` check when none of those is one.
pub fn task_checks(plan: &Plan, task: &SubTask) -> Vec<Check> {
    let mut checks: Vec<Check> = plan
        .config
        .checks
        .iter()
        .chain(&task.checks)
        .cloned()
        .collect();
    if plan.config.canary && !checks.iter().any(|c| c.rule == Rule::Canary) {
        checks.push(Check::new(Rule::Canary));
    }
    checks
}

/// Whether any task of `plan` has a check to run.
pub fn plan_has_checks(plan: &Plan) -> bool {
    !plan.sub_tasks.is_empty()
        && (plan.config.canary
            || !plan.config.checks.is_empty()
            || plan.sub_tasks.iter().any(|t| !t.checks.is_empty()))
}

/// Whether a run of `plan` plants a canary token in its system prompts:
/// `config.canary: true`, or a `canary` check on any task (or in
/// `config.checks`). One check asks for the token, and every call of the
/// run then carries it: an injected instruction that took over any call
/// may show up in any output.
pub fn plan_has_canary(plan: &Plan) -> bool {
    let is_canary = |c: &Check| c.rule == Rule::Canary;
    plan.config.canary
        || plan.config.checks.iter().any(is_canary)
        || plan
            .sub_tasks
            .iter()
            .any(|t| t.checks.iter().any(is_canary))
}

/// The `judge` checks of `plan`, as `(task id, field)` pairs
/// (`config.checks[1].judge` has no task), for a caller that must refuse a
/// plan no engine of its can judge.
pub fn judge_checks(plan: &Plan) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for (j, c) in plan.config.checks.iter().enumerate() {
        if matches!(c.rule, Rule::Judge(_)) {
            out.push((None, format!("config.checks[{j}].judge")));
        }
    }
    for (i, t) in plan.sub_tasks.iter().enumerate() {
        for (j, c) in t.checks.iter().enumerate() {
            if matches!(c.rule, Rule::Judge(_)) {
                out.push((
                    Some(t.id.clone()),
                    format!("sub_tasks[{i}].checks[{j}].judge"),
                ));
            }
        }
    }
    out
}

/// The directory a plan's relative paths are read from: the plan file's
/// own, or the current directory for standard input and bare file names.
pub fn plan_base_dir(plan_path: &Path) -> &Path {
    match plan_path.parent() {
        Some(p) if !p.as_os_str().is_empty() && plan_path != Path::new("-") => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PlanFormat, parse_plan};

    const PLAN: &str = "\
schema_version: 1
sub_tasks:
  - id: css
    description: Style
    checks:
      - contains: grid
      - regex: \"(unclosed\"
    tool_or_prompt: {name: inference, params: {prompt: Go.}}
  - id: score
    description: Score
    tool_or_prompt: {name: inference, params: {prompt: Go.}}
config:
  checks:
    - entities: true
    - judge: Is it good?
";

    #[test]
    fn config_checks_come_first_and_judges_are_named_by_field() {
        let plan = parse_plan(PLAN, "plan.yaml", PlanFormat::Yaml).unwrap();
        let kinds: Vec<&str> = task_checks(&plan, &plan.sub_tasks[0])
            .iter()
            .map(|c| c.kind().as_str())
            .collect();
        assert_eq!(kinds, ["entities", "judge", "contains", "regex"]);
        assert_eq!(task_checks(&plan, &plan.sub_tasks[1]).len(), 2);
        assert!(plan_has_checks(&plan));
        assert_eq!(
            judge_checks(&plan),
            [(None, "config.checks[1].judge".to_string())]
        );
    }

    #[test]
    fn base_dirs() {
        assert_eq!(plan_base_dir(Path::new("plan.yaml")), Path::new("."));
        assert_eq!(plan_base_dir(Path::new("-")), Path::new("."));
        assert_eq!(plan_base_dir(Path::new("a/b/plan.yaml")), Path::new("a/b"));
    }
}
