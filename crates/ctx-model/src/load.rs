//! Why a plan file cannot be run: [`LoadPlanError`] and [`InvalidPlan`],
//! whose lines are exactly `ctx plan check`'s.
//!
//! The call that loads a plan ready to run, `ctx_checks::load_valid_plan`,
//! lives in ctx-checks: it runs this crate's validation and then compiles
//! the plan's checks (patterns, JSON Schemas, schema files), which needs
//! the regex and JSON Schema engines the plan model does not depend on.

use crate::{FieldLocator, PlanError, Problem};

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
    /// Every problem, in line order ([`in_line_order`]), with its line and column
    /// (1-based) when the field is found in the text.
    pub problems: Vec<(Problem, Option<(u64, u64)>)>,
}

impl InvalidPlan {
    /// The problems of the plan read from `origin`, each located in `text`
    /// (the plan as read) where its field can be found.
    pub fn new(origin: String, text: &str, problems: Vec<Problem>) -> InvalidPlan {
        let locator = FieldLocator::new(text);
        let mut problems: Vec<(Problem, Option<(u64, u64)>)> = problems
            .into_iter()
            .map(|p| {
                let at = locator.locate_problem(&p);
                (p, at)
            })
            .collect();
        in_line_order(&mut problems);
        InvalidPlan { problems, origin }
    }

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
            "{}: invalid plan ({}{})",
            self.origin,
            crate::display::count(n, "problem", "problems"),
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

/// Sorts located problems the way a reader scans the file and an editor
/// jumps through them: by line, then column; problems whose field is not
/// written in the text come last. Stable, so problems at one position keep
/// the order validation found them in. (The problems of one plan are all
/// in one file, its `origin`.)
pub fn in_line_order<P>(problems: &mut [(P, Option<(u64, u64)>)]) {
    problems.sort_by_key(|(_, at)| at.unwrap_or((u64::MAX, u64::MAX)));
}
