//! The rules of a plan's run-time inputs that need no template language:
//! `variables:` (names, duplicates, defaults), the `history:` block's
//! ranges, and each task's `publish` path as written.
//!
//! What needs the placeholders of a template (a placeholder naming no
//! variable, an untrusted one outside a fence or in a `publish` path) is
//! judged by ctx-prompt, which owns the template syntax, and reported by
//! `ctx plan check` beside these.

use std::collections::HashMap;

use super::{Problem, ProblemCode, quoted};
use crate::plan::Plan;
use crate::variables::{
    HISTORICAL_CONTEXT, HistorySettings, Variable, VariableType, is_valid_name,
};

/// The problems of `plan.variables` and `plan.history`, in file order.
pub(super) fn check_variables(plan: &Plan, out: &mut Vec<Problem>) {
    // Each name's first declaration.
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, v) in plan.variables.iter().enumerate() {
        check_variable(i, v, &mut first, out);
    }
    if let Some(h) = &plan.history {
        check_history(h, out);
    }
}

/// The problems of variable number `i`: a name that is valid, not
/// reserved and declared once (`first` holds each name's first
/// declaration), a default that is JSON for a `json` variable and absent
/// for a secret one, and a `max_tokens` of at least 1.
fn check_variable<'p>(
    i: usize,
    v: &'p Variable,
    first: &mut HashMap<&'p str, usize>,
    out: &mut Vec<Problem>,
) {
    let field = format!("variables[{i}]");
    let mut push = |code, field: String, message: String| {
        out.push(Problem {
            code,
            task_id: None,
            field,
            message,
        })
    };
    if v.name == HISTORICAL_CONTEXT {
        push(
            ProblemCode::ReservedVariable,
            format!("{field}.name"),
            format!(
                "{HISTORICAL_CONTEXT} is reserved: the `history:` digest fills it, and it needs no declaration"
            ),
        );
    } else if !is_valid_name(&v.name) {
        push(
            ProblemCode::InvalidVariableName,
            format!("{field}.name"),
            format!(
                "{} is not a placeholder name ([A-Z][A-Z0-9_]*)",
                quoted(&v.name)
            ),
        );
    }
    if let Some(&j) = first.get(v.name.as_str()) {
        push(
            ProblemCode::DuplicateVariable,
            format!("{field}.name"),
            format!("{} is already declared at variables[{j}]", quoted(&v.name)),
        );
    } else {
        first.insert(&v.name, i);
    }
    if let (VariableType::Json, Some(default)) = (v.value_type, &v.default)
        && let Err(e) = serde_json::from_str::<serde_json::Value>(default)
    {
        push(
            ProblemCode::InvalidVariable,
            format!("{field}.default"),
            format!(
                "is not JSON (type: json): {e} (line {}, column {})",
                e.line(),
                e.column()
            ),
        );
    }
    if v.secret && v.default.is_some() {
        push(
            ProblemCode::InvalidVariable,
            format!("{field}.default"),
            "a secret variable cannot have a default: the plan file would hold the secret in clear; give it with --var".into(),
        );
    }
    if v.max_tokens == Some(0) {
        push(
            ProblemCode::InvalidVariable,
            format!("{field}.max_tokens"),
            "must be at least 1".into(),
        );
    }
}

/// The `history:` block's settings within their ranges, and its paths
/// not empty.
fn check_history(h: &HistorySettings, out: &mut Vec<Problem>) {
    let mut bad = |key: &str, message: &str| {
        out.push(Problem {
            code: ProblemCode::InvalidHistorySetting,
            task_id: None,
            field: format!("history.{key}"),
            message: message.into(),
        })
    };
    if h.share.is_some_and(|s| !(s > 0.0 && s <= 1.0)) {
        bad("share", "must be above 0 and at most 1");
    }
    if h.prompt_budget == Some(0) {
        bad("prompt_budget", "must be at least 1");
    }
    if h.max_words == Some(0) {
        bad("max_words", "must be at least 1");
    }
    for (key, value) in [("content_root", &h.content_root), ("config", &h.config)] {
        if value.as_deref().is_some_and(|p| p.trim().is_empty()) {
            bad(key, "is empty; leave it out instead");
        }
    }
}

/// Why a `publish` path as written can never stay under the publish root,
/// or `None`. Placeholders are left in: they are filled with trusted
/// values only, and the filled path is checked again before anything is
/// written.
pub fn publish_path_problem(path: &str) -> Option<String> {
    if path.trim().is_empty() {
        return Some("is empty".into());
    }
    if path.chars().any(char::is_control) {
        return Some("holds a control character".into());
    }
    if path.contains('\\') {
        return Some("holds `\\`; separate directories with `/`".into());
    }
    let bytes = path.as_bytes();
    if path.starts_with('/') || (bytes.len() >= 2 && bytes[1] == b':') {
        return Some("is absolute; it must be relative to --publish-root".into());
    }
    if path.split('/').any(|c| c == "..") {
        return Some("climbs out of --publish-root with `..`".into());
    }
    if path.ends_with('/') {
        return Some("names a directory, not a file".into());
    }
    None
}

/// Each task's `publish` path: well formed, and not written by two tasks.
pub(super) fn check_publish_paths(plan: &Plan, out: &mut Vec<Problem>) {
    let mut first: HashMap<&str, &str> = HashMap::new();
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        let Some(path) = &task.publish else { continue };
        let field = format!("sub_tasks[{i}].publish");
        if let Some(message) = publish_path_problem(path) {
            out.push(Problem {
                code: ProblemCode::InvalidPublishPath,
                task_id: Some(task.id.clone()),
                field,
                message,
            });
            continue;
        }
        let key = path.strip_prefix("./").unwrap_or(path);
        if let Some(other) = first.get(key) {
            out.push(Problem {
                code: ProblemCode::DuplicatePublishPath,
                task_id: Some(task.id.clone()),
                field,
                message: format!(
                    "task {} already publishes to {}",
                    quoted(other),
                    quoted(path)
                ),
            });
        } else {
            first.insert(key, &task.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{plan, task};
    use super::*;
    use crate::variables::{HistorySettings, Variable};

    fn var(name: &str) -> Variable {
        serde_json::from_value(serde_json::json!({ "name": name })).unwrap()
    }

    fn problems(p: &Plan) -> Vec<(ProblemCode, String)> {
        super::super::validate(p)
            .into_iter()
            .map(|p| (p.code, p.field))
            .collect()
    }

    #[test]
    fn variable_names_follow_the_template_rule_and_the_digest_is_reserved() {
        let mut p = plan(vec![task("a", &[])]);
        p.variables = vec![var("RAW"), var("raw"), var(HISTORICAL_CONTEXT), var("RAW")];
        assert_eq!(
            problems(&p),
            [
                (
                    ProblemCode::InvalidVariableName,
                    "variables[1].name".to_string()
                ),
                (ProblemCode::ReservedVariable, "variables[2].name".into()),
                (ProblemCode::DuplicateVariable, "variables[3].name".into()),
            ]
        );
    }

    #[test]
    fn a_json_default_must_parse_and_max_tokens_must_count() {
        let mut p = plan(vec![task("a", &[])]);
        let mut v = var("DATA");
        v.value_type = VariableType::Json;
        v.default = Some("{\"a\": ".into());
        v.max_tokens = Some(0);
        p.variables = vec![v];
        let found = super::super::validate(&p);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(found[0].field, "variables[0].default");
        assert!(
            found[0].message.contains("line 1, column 6"),
            "{}",
            found[0]
        );
        assert_eq!(found[1].field, "variables[0].max_tokens");
    }

    #[test]
    fn a_secret_has_no_default() {
        let mut p = plan(vec![task("a", &[])]);
        let mut v = var("KEY");
        v.secret = true;
        p.variables = vec![v.clone()];
        assert!(problems(&p).is_empty());
        v.default = Some("in clear".into());
        p.variables = vec![v];
        assert_eq!(
            problems(&p),
            [(ProblemCode::InvalidVariable, "variables[0].default".into())]
        );
    }

    #[test]
    fn history_settings_are_range_checked() {
        let mut p = plan(vec![task("a", &[])]);
        p.history = Some(HistorySettings {
            share: Some(1.5),
            prompt_budget: Some(0),
            content_root: Some(" ".into()),
            ..HistorySettings::default()
        });
        let fields: Vec<String> = problems(&p).into_iter().map(|(_, f)| f).collect();
        assert_eq!(
            fields,
            [
                "history.share",
                "history.prompt_budget",
                "history.content_root"
            ]
        );
    }

    #[test]
    fn publish_paths_stay_relative_and_distinct() {
        let mut tasks: Vec<_> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|id| task(id, &[]))
            .collect();
        tasks[0].publish = Some("weekly/{{WEEK}}.md".into());
        tasks[1].publish = Some("./weekly/{{WEEK}}.md".into());
        tasks[2].publish = Some("../out.md".into());
        tasks[3].publish = Some("/etc/passwd".into());
        tasks[4].publish = Some("a/../../b.md".into());
        tasks[5].publish = Some("C:x.md".into());
        let p = plan(tasks);
        assert_eq!(
            problems(&p),
            [
                (
                    ProblemCode::DuplicatePublishPath,
                    "sub_tasks[1].publish".to_string()
                ),
                (
                    ProblemCode::InvalidPublishPath,
                    "sub_tasks[2].publish".into()
                ),
                (
                    ProblemCode::InvalidPublishPath,
                    "sub_tasks[3].publish".into()
                ),
                (
                    ProblemCode::InvalidPublishPath,
                    "sub_tasks[4].publish".into()
                ),
                (
                    ProblemCode::InvalidPublishPath,
                    "sub_tasks[5].publish".into()
                ),
            ]
        );
    }

    #[test]
    fn a_plan_without_inputs_writes_back_byte_for_byte() {
        let p = plan(vec![task("a", &[])]);
        let json = serde_json::to_string(&p).unwrap();
        assert!(!json.contains("variables") && !json.contains("history"));
        assert!(!json.contains("publish"));
    }
}
