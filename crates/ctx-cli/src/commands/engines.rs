//! `ctx engines` (being built).

use crate::exit::{CliError, CliResult};

/// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> CliResult {
    Err(CliError::usage("not built yet"))
}
