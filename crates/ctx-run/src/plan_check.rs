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

use ctx_model::{LoadPlanError, ParsedPlan, Plan, Problem, ProblemCode, plan_base_dir};

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
    problems.extend(fallback_price_problems(&parsed.plan));
    problems
}

/// Each `config.budget.fallback` model that neither the shipped price
/// table nor the plan's `config.prices` prices. A run on that tier could
/// not hold its high end, so it would be refused exactly when the budget
/// runs low; the check says so while nothing is at stake. (`--prices` and
/// `--price` are a run's flags, which a check does not see: a run given
/// the price goes through.)
fn fallback_price_problems(plan: &Plan) -> Vec<Problem> {
    let Some(budget) = &plan.config.budget else {
        return Vec::new();
    };
    let mut book = ctx_cost::PriceBook::with_defaults();
    if !plan.config.prices.is_empty() {
        book.push(ctx_cost::plan_table(&plan.config.prices));
    }
    budget
        .fallback
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.model.trim().is_empty() && book.lookup(&f.model).is_none())
        .map(|(i, f)| Problem {
            code: ProblemCode::UnpricedFallback,
            task_id: None,
            field: format!("config.budget.fallback[{i}].model"),
            message: format!(
                "`{}` has no price (shipped table or config.prices): a run on this tier could not hold its high end against the budget",
                f.model
            ),
        })
        .collect()
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
        let mut problems = ctx_prompt::plan_fill::template_problems(plan, content_root_given);
        problems.extend(fallback_price_problems(plan));
        problems
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

    /// A fallback's threshold out of range, thresholds out of order, and
    /// a fallback model with no price are each a finding at its line.
    #[test]
    fn bad_fallbacks_are_located_findings() {
        let dir = ctx_test_support::Dir::new();
        let text = "schema_version: 1\nconfig:\n  budget:\n    period: month\n    usd: 5\n    fallback:\n      - {above: 0.9, model: gpt-4o-mini}\n      - {above: 0.5, model: gpt-4o-mini}\n      - {above: 1.5, model: no-such-model}\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: p}}\n";
        let path = dir.write("plan.yaml", text);
        let source = ctx_model::read_plan_source(&path).expect("read");
        let parsed = source.parse_with_unknown_fields().expect("parse");
        let at = ctx_model::FieldLocator::new(text);
        let found: Vec<String> = plan_problems(&parsed, &path)
            .iter()
            .map(|p| {
                let (line, _) = at.locate_problem(p).expect("located");
                format!("{} {} line {line}", p.code.as_str(), p.field)
            })
            .collect();
        assert_eq!(
            found,
            [
                "invalid_budget_fallback config.budget.fallback[1].above line 8",
                "invalid_budget_fallback config.budget.fallback[2].above line 9",
                "unpriced_fallback config.budget.fallback[2].model line 9",
            ]
        );
        assert!(matches!(
            load_valid_plan(&path, false),
            Err(LoadPlanError::Invalid(_))
        ));
    }
}
