//! `ctx runs` (being built).

use crate::exit::{CliError, CliResult};

/// The `ctx runs` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RunsCommand {
    /// List stored runs.
    List,
}

/// Runs the command.
pub fn run(_cmd: RunsCommand) -> CliResult {
    Err(CliError::usage("not built yet"))
}
