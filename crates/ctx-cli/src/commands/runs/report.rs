//! `ctx runs report RUN [-o FILE]`: a stored run as one self-contained HTML
//! page (drawn by `ctx-report`).
//!
//! The page is drawn from [`ctx_run::export::read_run`], the one mapping
//! from a stored run (either store) onto the report's input, which `ctx
//! runs export --format json|csv` reads too, so the three always agree on
//! every task's times.

use std::path::{Path, PathBuf};

use ctx_deps::RunHistory;
use ctx_report::{RunStatus, render_html};
use ctx_run::export::{ExportError, now, read_run};

use super::{RootArg, open};
use crate::exit::{CliError, CliResult, Exit};
use crate::io::{print_stdout, write_atomic};

// `ctx runs report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    pub(super) run: String,
    /// Write the HTML here (replaced atomically) instead of to standard
    /// output.
    #[arg(short = 'o', long = "out", alias = "output", value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
    #[command(flatten)]
    pub(super) root: RootArg,
}

/// A stored run that could not be read back: exit 4, as for any store
/// read that fails once the store is open.
pub(super) fn export_error(e: ExportError) -> CliError {
    match e {
        ExportError::Read(e) => e.into(),
        e @ ExportError::Time { .. } => CliError::with(Exit::Store, e),
    }
}

/// Runs `ctx runs report`.
pub fn run(a: ReportArgs) -> CliResult {
    let view = open(&a.root, &a.run)?;
    render(&view, a.output.as_deref())
}

/// Draws the run read from either store to `output` (or stdout).
pub(super) fn render(view: &dyn RunHistory, output: Option<&Path>) -> CliResult {
    let run = read_run(view, now()).map_err(export_error)?;
    let html = render_html(&run.input);
    match output {
        None => print_stdout(&html)?,
        Some(path) => {
            write_atomic(path, html.as_bytes())?;
            let note = if run.input.status == RunStatus::Running {
                ", still running: a snapshot"
            } else {
                ""
            };
            print_stdout(&format!(
                "report of run {} ({}{note}) written to {}\n",
                run.input.run_id,
                crate::commands::run::tasks(run.input.tasks.len()),
                path.display()
            ))?;
        }
    }
    Ok(Exit::Ok)
}
