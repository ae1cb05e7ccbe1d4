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
//! Under `config.layout: cache`, a task prompt that puts a placeholder of
//! its own before text other prompts share gets a `hint:` line on stderr
//! ([`ctx_prompt::plan_fill::cache_layout_hints`]); hints change no exit
//! code.
//!
//! Other commands that must refuse an invalid plan (`ctx run`, `ctx plan
//! graph`) use [`load_valid_plan`], so every command reports problems the
//! same way.

use std::path::{Path, PathBuf};

use ctx_model::check_report::{CheckReport, ReadErrorJson};
use ctx_model::{FieldLocator, Plan};

use crate::exit::{CliError, CliResult, Exit};

pub use crate::format::Format;

// Arguments of `ctx plan check`.
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
            crate::io::print_stdout(&crate::io::json_text(&ReadErrorJson::of(&e))?)?;
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(CliError::usage(e)),
    };
    let origin = source.origin.as_str();
    let problems = ctx_run::plan_check::plan_problems(&parsed, &args.plan);
    let locator = if problems.is_empty() {
        FieldLocator::default()
    } else {
        FieldLocator::new(&source.text)
    };
    // Hints are advice, not problems: on stderr, the exit code unchanged.
    for hint in ctx_prompt::plan_fill::cache_layout_hints(&parsed.plan) {
        eprintln!("hint: {}", ctx_table::printable_lines(&hint.to_string()));
    }
    let report = CheckReport::new(origin, &parsed.plan, &problems, &locator);
    match args.format {
        Format::Json => crate::io::print_stdout(&crate::io::json_text(&report.json())?)?,
        Format::Text => crate::io::print_stdout(&report.text())?,
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
/// inlined ([`ctx_run::plan_check::load_valid_plan`]).
pub fn load_valid_plan(path: &Path) -> Result<Plan, CliError> {
    load_valid_plan_given(path, true)
}

/// [`load_valid_plan`] for a command that fills the plan's templates:
/// `{{HISTORICAL_CONTEXT}}` without a content root is a problem unless
/// `content_root_given` (`--content-root`). The template rules are reported
/// with the others, so a plan `ctx plan check` refuses is refused here too.
pub fn load_valid_plan_given(path: &Path, content_root_given: bool) -> Result<Plan, CliError> {
    ctx_run::plan_check::load_valid_plan(path, content_root_given).map_err(|e| match e {
        ctx_model::LoadPlanError::Read(e) => CliError::usage(e),
        ctx_model::LoadPlanError::Invalid(invalid) => {
            CliError::usage(invalid.report(Some("nothing was done")))
        }
    })
}
