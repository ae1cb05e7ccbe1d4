//! `ctx plan check PLAN`: report every problem in a plan at once.
//!
//! Reading a plan can fail two ways, and they exit differently:
//!
//! * the file cannot be read as a plan at all (bad syntax, a wrong type, a
//!   missing field, an unsupported `schema_version`): one error naming
//!   `file:line:column` and the field path, exit 2 (usage/input error);
//! * the plan can be read but is wrong (an unknown field such as
//!   `dependancies`, an unknown dependency, a cycle, an empty prompt, ...):
//!   every problem, one line each, exit 1.
//!
//! A text line reads `FILE:LINE:COLUMN: task "ID": FIELD: MESSAGE`: the
//! position is where the field's value starts (for an unknown field, where
//! its key is written; for a field left at its default, where its nearest
//! written parent starts), and the task part is
//! left out for plan-level fields such as `config.tokenizer`. `--format
//! json` prints one object instead, with each problem's stable `code` and
//! its `line` and `column`.
//!
//! Other commands that must refuse an invalid plan (`ctx run`, `ctx plan
//! graph`) use [`load_valid_plan`], so every command reports problems the
//! same way.

use std::path::{Path, PathBuf};

use ctx_model::{FieldLocator, Plan, PlanError, Problem};
use serde_json::json;

use crate::exit::{CliError, CliResult, Exit};

pub use crate::format::Format;

/// Arguments of `ctx plan check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan: `.json`, `.yaml` or `.yml`; `-` reads JSON from standard
    /// input; any other extension is sniffed (`{` first means JSON).
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Checks the plan and prints the result.
pub fn run(args: Args) -> CliResult {
    let loaded = ctx_model::read_plan_source(&args.plan).and_then(|source| {
        source
            .parse_with_unknown_fields()
            .map(|parsed| (source, parsed))
    });
    let (source, parsed) = match loaded {
        Ok(loaded) => loaded,
        Err(e) if args.format == Format::Json => {
            crate::io::print_stdout(&crate::io::json_text(&parse_error_json(&e))?)?;
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(CliError::usage(e)),
    };
    let origin = source.origin.as_str();
    let problems = parsed.problems_in(ctx_model::plan_base_dir(&args.plan));
    let plan = &parsed.plan;
    let locator = if problems.is_empty() {
        FieldLocator::default()
    } else {
        FieldLocator::new(&source.text)
    };
    let counts = Counts::of(plan);
    match args.format {
        Format::Json => {
            let value = json!({
                "file": origin,
                "valid": problems.is_empty(),
                "tasks": counts.tasks,
                "entities": counts.entities,
                "dependencies": counts.dependencies,
                "problems": problems.iter().map(|p| problem_json(p, &locator)).collect::<Vec<_>>(),
            });
            crate::io::print_stdout(&crate::io::json_text(&value)?)?;
        }
        Format::Text => {
            let mut text = String::new();
            for p in &problems {
                text.push_str(&problem_line(origin, &locator, p));
                text.push('\n');
            }
            if problems.is_empty() {
                text.push_str(&format!("{origin}: ok ({counts})\n"));
            } else {
                let n = problems.len();
                text.push_str(&format!(
                    "{origin}: invalid: {n} problem{} ({counts})\n",
                    if n == 1 { "" } else { "s" }
                ));
            }
            crate::io::print_stdout(&text)?;
        }
    }
    Ok(if problems.is_empty() {
        Exit::Ok
    } else {
        Exit::Findings
    })
}

/// Loads and validates a plan for a command that must not act on an
/// invalid one. A read or parse error, or any problem `ctx plan check`
/// would report (unknown fields among them), becomes a usage error (exit 2)
/// whose message lists every problem, one per line, exactly as `ctx plan
/// check` prints them. The plan returned has its `json_schema` files
/// inlined ([`Plan::inline_check_schemas`]).
pub fn load_valid_plan(path: &Path) -> Result<Plan, CliError> {
    ctx_model::load_valid_plan(path).map_err(|e| match e {
        ctx_model::LoadPlanError::Read(e) => CliError::usage(e),
        ctx_model::LoadPlanError::Invalid(invalid) => {
            CliError::usage(invalid.report(Some("nothing was done")))
        }
    })
}

/// One problem as a line: `FILE:LINE:COLUMN: task "ID": FIELD: MESSAGE`
/// (`FILE: ...` when the field cannot be found in the text).
pub fn problem_line(origin: &str, locator: &FieldLocator, problem: &Problem) -> String {
    ctx_model::problem_line(origin, locator.locate_problem(problem), problem)
}

/// A problem's JSON form: its fields plus `line` and `column` (null when
/// the field cannot be found in the text).
fn problem_json(problem: &Problem, locator: &FieldLocator) -> serde_json::Value {
    let at = locator.locate_problem(problem);
    json!({
        "code": problem.code,
        "task_id": problem.task_id,
        "field": problem.field,
        "line": at.map(|(l, _)| l),
        "column": at.map(|(_, c)| c),
        "message": problem.message,
    })
}

struct Counts {
    tasks: usize,
    entities: usize,
    dependencies: usize,
}

impl Counts {
    fn of(plan: &Plan) -> Counts {
        Counts {
            tasks: plan.sub_tasks.len(),
            entities: plan.entities.len(),
            dependencies: plan.sub_tasks.iter().map(|t| t.dependencies.len()).sum(),
        }
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize, word: &str, words: &str| {
            format!("{n} {}", if n == 1 { word } else { words })
        };
        write!(
            f,
            "{}, {}, {}",
            plural(self.tasks, "task", "tasks"),
            plural(self.entities, "entity", "entities"),
            plural(self.dependencies, "dependency", "dependencies")
        )
    }
}

/// The JSON form of a read or parse error.
fn parse_error_json(e: &PlanError) -> serde_json::Value {
    let error = match e {
        PlanError::Syntax {
            format,
            line,
            column,
            field,
            task_id,
            message,
            ..
        } => json!({
            "kind": "syntax",
            "format": format.as_str(),
            "line": line,
            "column": column,
            "field": field,
            "task_id": task_id,
            "message": message,
        }),
        PlanError::UnsupportedVersion { found, .. } => json!({
            "kind": "unsupported_version",
            "found": found,
            "supported": ctx_model::SCHEMA_VERSION,
            "message": e.to_string(),
        }),
        _ => json!({ "kind": "io", "message": e.to_string() }),
    };
    json!({ "file": e.origin(), "valid": false, "error": error })
}
