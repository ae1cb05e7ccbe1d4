//! What `ctx plan check` prints: a plan's problems as text lines or as one
//! JSON object, and a plan that could not be read at all as JSON.
//!
//! The CLI only picks the format and the exit code; the report itself is
//! here so that an editor plugin or a CI bot gets the same lines and the
//! same keys from a library call. JSON keys come in the order the structs
//! below declare them (docs/architecture.md, "JSON output"), never
//! alphabetically.

use std::fmt;

use serde::Serialize;

use crate::{FieldLocator, Plan, PlanError, Problem, ProblemCode, SCHEMA_VERSION};

/// A read plan's problems, located in its text.
#[derive(Debug)]
pub struct CheckReport<'a> {
    /// The plan's path as given.
    pub origin: &'a str,
    /// Its size.
    pub counts: PlanCounts,
    /// Every problem, with where its field is written (when it can be
    /// found in the text), in line order ([`crate::load::in_line_order`]).
    pub problems: Vec<(&'a Problem, Option<(u64, u64)>)>,
}

impl<'a> CheckReport<'a> {
    /// The report on `plan`, read from `origin`, whose problems are
    /// `problems`, located with `locator`.
    pub fn new(
        origin: &'a str,
        plan: &Plan,
        problems: &'a [Problem],
        locator: &FieldLocator,
    ) -> CheckReport<'a> {
        let mut problems: Vec<_> = problems
            .iter()
            .map(|p| (p, locator.locate_problem(p)))
            .collect();
        crate::load::in_line_order(&mut problems);
        CheckReport {
            origin,
            counts: PlanCounts::of(plan),
            problems,
        }
    }

    /// Whether the plan has no problem.
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    /// One line per problem, `FILE:LINE:COLUMN: task "ID": FIELD:
    /// MESSAGE`, then `FILE: ok (COUNTS)` or `FILE: invalid: N problems
    /// (COUNTS)`.
    pub fn text(&self) -> String {
        let mut text = String::new();
        for (p, at) in &self.problems {
            text.push_str(&crate::problem_line(self.origin, *at, p));
            text.push('\n');
        }
        let (origin, counts) = (self.origin, &self.counts);
        match self.problems.len() {
            0 => text.push_str(&format!("{origin}: ok ({counts})\n")),
            1 => text.push_str(&format!("{origin}: invalid: 1 problem ({counts})\n")),
            n => text.push_str(&format!("{origin}: invalid: {n} problems ({counts})\n")),
        }
        text
    }

    /// The object `--format json` prints.
    pub fn json(&self) -> CheckJson<'_> {
        CheckJson {
            file: self.origin,
            valid: self.is_valid(),
            tasks: self.counts.tasks,
            entities: self.counts.entities,
            dependencies: self.counts.dependencies,
            problems: self
                .problems
                .iter()
                .map(|(p, at)| ProblemJson {
                    code: p.code,
                    task_id: p.task_id.as_deref(),
                    field: &p.field,
                    line: at.map(|(l, _)| l),
                    column: at.map(|(_, c)| c),
                    message: &p.message,
                })
                .collect(),
        }
    }
}

/// A plan's tasks, entities and dependency edges, as `3 tasks, 1 entity,
/// 2 dependencies`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanCounts {
    /// Sub-tasks.
    pub tasks: usize,
    /// Entities.
    pub entities: usize,
    /// Dependency edges, summed over tasks.
    pub dependencies: usize,
}

impl PlanCounts {
    /// The counts of `plan`.
    pub fn of(plan: &Plan) -> PlanCounts {
        PlanCounts {
            tasks: plan.sub_tasks.len(),
            entities: plan.entities.len(),
            dependencies: plan.sub_tasks.iter().map(|t| t.dependencies.len()).sum(),
        }
    }
}

impl fmt::Display for PlanCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::display::count;
        write!(
            f,
            "{}, {}, {}",
            count(self.tasks, "task", "tasks"),
            count(self.entities, "entity", "entities"),
            count(self.dependencies, "dependency", "dependencies")
        )
    }
}

/// [`CheckReport`] as JSON.
#[derive(Debug, Serialize)]
pub struct CheckJson<'a> {
    file: &'a str,
    valid: bool,
    tasks: usize,
    entities: usize,
    dependencies: usize,
    problems: Vec<ProblemJson<'a>>,
}

/// One problem of [`CheckJson`]: its fields plus `line` and `column`
/// (null when the field cannot be found in the text).
#[derive(Debug, Serialize)]
struct ProblemJson<'a> {
    code: ProblemCode,
    task_id: Option<&'a str>,
    field: &'a str,
    line: Option<u64>,
    column: Option<u64>,
    message: &'a str,
}

/// A plan that could not be read as one, as `ctx plan check --format
/// json` prints it: `{"file", "valid": false, "error": {"kind", ...}}`.
#[derive(Debug, Serialize)]
pub struct ReadErrorJson<'a> {
    file: &'a str,
    valid: bool,
    error: ReadErrorKindJson<'a>,
}

impl<'a> ReadErrorJson<'a> {
    /// The JSON form of `e`.
    pub fn of(e: &'a PlanError) -> ReadErrorJson<'a> {
        let error = match e {
            PlanError::Syntax {
                format,
                line,
                column,
                field,
                task_id,
                message,
                ..
            } => ReadErrorKindJson::Syntax {
                format: format.as_str(),
                line: *line,
                column: *column,
                task_id: task_id.as_deref(),
                field: field.as_deref(),
                message,
            },
            PlanError::UnsupportedVersion { found, .. } => ReadErrorKindJson::UnsupportedVersion {
                found,
                supported: SCHEMA_VERSION,
                message: e.to_string(),
            },
            _ => ReadErrorKindJson::Io {
                message: e.to_string(),
            },
        };
        ReadErrorJson {
            file: e.origin(),
            valid: false,
            error,
        }
    }
}

/// What kind of read error, and its facts.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum ReadErrorKindJson<'a> {
    Syntax {
        format: &'static str,
        line: Option<u32>,
        column: Option<u32>,
        task_id: Option<&'a str>,
        field: Option<&'a str>,
        message: &'a str,
    },
    UnsupportedVersion {
        found: &'a str,
        supported: u32,
        message: String,
    },
    Io {
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PlanFormat;

    const PLAN: &str = "schema_version: 1\nsub_tasks:\n  - id: a\n    description: a\n    dependencies: [zz]\n    tool_or_prompt: {name: inference, params: {prompt: p}}\n";

    #[test]
    fn a_problem_is_a_located_line_and_a_json_object_in_declared_order() {
        let parsed =
            crate::parse_plan_with_unknown_fields(PLAN, "p.yaml", PlanFormat::Yaml).expect("reads");
        let problems = parsed.problems();
        let locator = FieldLocator::new(PLAN);
        let report = CheckReport::new("p.yaml", &parsed.plan, &problems, &locator);
        assert!(!report.is_valid());
        let text = report.text();
        assert!(
            text.starts_with("p.yaml:5:20: task \"a\": sub_tasks[0].dependencies[0]:"),
            "{text}"
        );
        assert!(
            text.ends_with("p.yaml: invalid: 1 problem (1 task, 0 entities, 1 dependency)\n"),
            "{text}"
        );
        let json = serde_json::to_string(&report.json()).unwrap();
        assert!(
            json.starts_with(
                r#"{"file":"p.yaml","valid":false,"tasks":1,"entities":0,"dependencies":1,"problems":[{"code":"#
            ),
            "{json}"
        );
        assert!(json.contains(r#""task_id":"a","field":"sub_tasks[0].dependencies[0]","line":5,"column":20,"message":"#), "{json}");
    }

    #[test]
    fn a_read_error_names_its_kind_first() {
        let e = crate::parse_plan("sub_tasks: [", "p.yaml", PlanFormat::Yaml).unwrap_err();
        let json = serde_json::to_string(&ReadErrorJson::of(&e)).unwrap();
        assert!(
            json.starts_with(
                r#"{"file":"p.yaml","valid":false,"error":{"kind":"syntax","format":"yaml","#
            ),
            "{json}"
        );
    }
}
