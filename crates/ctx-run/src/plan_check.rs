//! A plan checked once, the same way for every use case: `ctx plan check`
//! reports [`plan_problems`], and every command that must not act on an
//! invalid plan (a run, an eval, a cost estimate, a graph) loads it with
//! [`load_valid_plan`], which refuses it with exactly those problems.
//!
//! Three passes find them, each in the crate that owns its language: the
//! plan model's own rules (ctx-model), the checks and entity patterns
//! compiled (ctx-checks), and the templates linted (ctx-prompt's
//! `plan_fill`). This module is where they are composed, so that a front
//! end composes nothing and no two commands can report a plan
//! differently.

use std::path::Path;

use ctx_model::{LoadPlanError, ParsedPlan, Plan, Problem, plan_base_dir};

/// Every problem `ctx plan check` reports in a parsed plan read from
/// `plan_path`: the model's rules, checks that do not compile (a
/// `json_schema` file is found relative to the plan), and the template
/// rules with no content root required (a check cannot know whether a run
/// will be given `--content-root`).
pub fn plan_problems(parsed: &ParsedPlan, plan_path: &Path) -> Vec<Problem> {
    let mut problems = ctx_checks::plan_problems(parsed, plan_base_dir(plan_path));
    problems.extend(ctx_prompt::plan_fill::template_problems(
        &parsed.plan,
        false,
    ));
    problems
}

/// Reads, parses and checks the plan at `path` (`-` is standard input).
/// Any problem [`plan_problems`] would report refuses it; but
/// `{{HISTORICAL_CONTEXT}}` without a content root is a problem only
/// unless `content_root_given` (`--content-root`), since a command that
/// fills the plan's templates is given one. The plan returned has its
/// `json_schema` check files inlined, so that a stored plan checks the
/// same schemas when resumed from anywhere.
pub fn load_valid_plan(path: &Path, content_root_given: bool) -> Result<Plan, LoadPlanError> {
    ctx_checks::load_valid_plan_with(path, &|plan| {
        ctx_prompt::plan_fill::template_problems(plan, content_root_given)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HISTORY: &str = "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt:\n      name: inference\n      params:\n        prompt: \"Past:\\n<untrusted-content>\\n{{HISTORICAL_CONTEXT}}\\n</untrusted-content>\"\n";

    #[test]
    fn all_three_passes_are_reported_and_the_content_root_rule_follows_the_flag() {
        let dir = ctx_test_support::Dir::new();
        let bad = dir.write(
            "bad.yaml",
            &format!("{HISTORY}    checks:\n      - regex: \"(\"\n"),
        );
        let source = ctx_model::read_plan_source(&bad).expect("read");
        let parsed = source.parse_with_unknown_fields().expect("parse");
        let codes: Vec<String> = plan_problems(&parsed, &bad)
            .iter()
            .map(|p| format!("{:?} {}", p.code, p.field))
            .collect();
        assert_eq!(codes.len(), 2, "{codes:?}");
        assert!(codes.iter().any(|c| c.contains("checks[0]")), "{codes:?}");
        assert!(
            codes.iter().any(|c| c.starts_with("NoContentRoot")),
            "{codes:?}"
        );
        let good = dir.write("good.yaml", HISTORY);
        assert!(matches!(
            load_valid_plan(&good, false),
            Err(LoadPlanError::Invalid(_))
        ));
        if let Err(e) = load_valid_plan(&good, true) {
            panic!("{e:?}");
        }
    }
}
