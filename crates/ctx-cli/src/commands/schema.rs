//! `ctx schema`: print the plan format's JSON Schema.
//!
//! Editors validate plans against it as they are typed (for YAML, a
//! `# yaml-language-server: $schema=PATH` first line; see
//! docs/plan-format.md). The text is generated from the types the parser
//! reads (`ctx_model::plan_json_schema`, written by `ctx_model::json_text`) and is byte-identical on
//! every run; `fixtures/plans/plan.schema.json` is a checked-in copy that a
//! test keeps equal to this output.

use std::path::PathBuf;

use crate::exit::{CliResult, Exit};

// Arguments of `ctx schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write the schema to FILE (atomically) instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Prints or writes the schema.
pub fn run(args: Args) -> CliResult {
    let text = crate::io::json_text(&ctx_model::plan_json_schema())?;
    match args.out {
        Some(path) => crate::io::write_atomic(&path, text.as_bytes())?,
        None => crate::io::print_stdout(&text)?,
    }
    Ok(Exit::Ok)
}
