//! A plan file read, parsed, validated and made ready to run: one call.

use std::path::Path;

use crate::{FieldLocator, Plan, PlanError, Problem};

/// Why a plan file cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum LoadPlanError {
    /// It could not be read or parsed (the error names file, line, column).
    /// Boxed: a located syntax error is the largest error a plan has, and
    /// every `Result` of a loaded plan would carry its size.
    #[error(transparent)]
    Read(Box<PlanError>),
    /// It parsed, but has the problems `ctx plan check` reports.
    #[error(transparent)]
    Invalid(#[from] InvalidPlan),
}

impl From<PlanError> for LoadPlanError {
    fn from(e: PlanError) -> LoadPlanError {
        LoadPlanError::Read(Box::new(e))
    }
}

/// A plan with problems, each located in its file where the field can be
/// found.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.report(None))]
pub struct InvalidPlan {
    /// The path as given, or `<stdin>`.
    pub origin: String,
    /// Every problem, in `ctx plan check` order (line order, see
    /// [`in_line_order`]), with its line and column (1-based) when the
    /// field is found in the text.
    pub problems: Vec<(Problem, Option<(u64, u64)>)>,
}

impl InvalidPlan {
    /// Each problem as a line: `FILE:LINE:COLUMN: task "ID": FIELD:
    /// MESSAGE` (`FILE: ...` when the field cannot be found in the text).
    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        self.problems
            .iter()
            .map(|(p, at)| problem_line(&self.origin, *at, p))
    }

    /// The whole message: `FILE: invalid plan (N problems)`, with `; NOTE`
    /// inside the parentheses when given, then [`lines`](Self::lines).
    pub fn report(&self, note: Option<&str>) -> String {
        let n = self.problems.len();
        let mut message = format!(
            "{}: invalid plan ({n} problem{}{})",
            self.origin,
            if n == 1 { "" } else { "s" },
            note.map_or_else(String::new, |note| format!("; {note}"))
        );
        for line in self.lines() {
            message.push('\n');
            message.push_str(&line);
        }
        message
    }
}

/// One problem as a line, `FILE:LINE:COLUMN: PROBLEM` or `FILE: PROBLEM`.
pub fn problem_line(origin: &str, at: Option<(u64, u64)>, problem: &Problem) -> String {
    match at {
        Some((line, column)) => format!("{origin}:{line}:{column}: {problem}"),
        None => format!("{origin}: {problem}"),
    }
}

/// Reads the plan at `path` (`-` is standard input), parses it, and checks
/// it as `ctx plan check` does (unknown fields included). A valid plan is
/// returned with its `json_schema` check files inlined
/// ([`Plan::inline_check_schemas`]), so that the plan a run stores checks
/// the same schemas when resumed from anywhere.
pub fn load_valid_plan(path: &Path) -> Result<Plan, LoadPlanError> {
    let source = crate::read_plan_source(path)?;
    let parsed = source.parse_with_unknown_fields()?;
    let base_dir = crate::plan_base_dir(path);
    let problems = parsed.problems_in(base_dir);
    if problems.is_empty() {
        let mut plan = parsed.plan;
        plan.inline_check_schemas(base_dir);
        return Ok(plan);
    }
    let locator = FieldLocator::new(&source.text);
    let mut problems: Vec<(Problem, Option<(u64, u64)>)> = problems
        .into_iter()
        .map(|p| {
            let at = locator.locate_problem(&p);
            (p, at)
        })
        .collect();
    in_line_order(&mut problems);
    Err(InvalidPlan {
        problems,
        origin: source.origin,
    }
    .into())
}

/// Sorts located problems the way a reader scans the file and an editor
/// jumps through them: by line, then column; problems whose field is not
/// written in the text come last. Stable, so problems at one position keep
/// the order validation found them in. (The problems of one plan are all
/// in one file, its `origin`.)
pub fn in_line_order<P>(problems: &mut [(P, Option<(u64, u64)>)]) {
    problems.sort_by_key(|(_, at)| at.unwrap_or((u64::MAX, u64::MAX)));
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
