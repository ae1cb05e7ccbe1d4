//! `ctx runs diff A B`: two stored runs compared task by task, and the CI
//! gate over the comparison (`--fail-on`). The comparison is ctx-diff's;
//! here are the flags, the output and the exit codes: 0 compared (no
//! condition holds), 1 a `--fail-on` condition holds (each named on
//! stderr), 2 bad input (an unknown run or task, a `RUN@N` session the
//! run does not have, an unknown condition or
//! threshold, runs with no task in common without `--allow-disjoint`),
//! 4 a store that cannot be read, 5 an `-o` page that cannot be written.

use std::path::PathBuf;

use ctx_deps::RunHistory;
use ctx_diff::DiffOptions;

use super::{Format, RootArg, open};
use crate::exit::{CliError, CliResult, Exit};
use crate::io::{json_text, print_stdout, write_atomic};

// `ctx runs diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The baseline run: a run id or a run directory; `RUN@N` is the run
    /// as it stood after its session N (before a resume).
    #[arg(value_name = "A")]
    a: String,
    /// The run compared with it.
    #[arg(value_name = "B")]
    b: String,
    /// Show this task in full, with the unified diff of its output.
    #[arg(long, value_name = "ID")]
    task: Option<String>,
    /// Exit 1 when a condition holds, naming it on stderr:
    /// check-regression, status, output, cost:+N%, time:+N%.
    /// Comma-separated or repeated.
    #[arg(long = "fail-on", value_name = "CONDITION")]
    fail_on: Vec<String>,
    /// Compare runs that share no task (runs of different plans).
    #[arg(long)]
    allow_disjoint: bool,
    /// Also write the comparison as one self-contained HTML page, each
    /// changed task with its unified diff, to FILE (replaced atomically).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    root: RootArg,
    /// Run B's store root, when it is not --root.
    #[arg(long, value_name = "DIR")]
    b_root: Option<PathBuf>,
    /// Run B's store, when it is not --store: `sqlite` (the run
    /// directories under --b-root, or --root) or a shared store's
    /// postgres:// URL.
    #[arg(long, value_name = "URL")]
    b_store: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// Runs the command.
pub fn run(a: DiffArgs) -> CliResult {
    // Bad conditions are refused before any store is read.
    let conditions = ctx_diff::gate::parse_conditions(&a.fail_on)
        .map_err(|e| CliError::usage(format!("--fail-on: {e}")))?;
    let options = DiffOptions {
        allow_disjoint: a.allow_disjoint,
        task: a.task.clone(),
        diffs: a.out.is_some(),
    };
    let b_root = RootArg {
        root: a.b_root.clone().unwrap_or_else(|| a.root.root.clone()),
        store: a.b_store.clone().or_else(|| a.root.store.clone()),
    };
    let (ra, rb) = (ctx_diff::parse_run_ref(&a.a), ctx_diff::parse_run_ref(&a.b));
    let (x, y) = (open_run(&a.root, ra.0)?, open_run(&b_root, rb.0)?);
    // `RUN@N`: the run as it stood after session N (a resume's before).
    let (x_cut, y_cut);
    let x: &dyn RunHistory = match ra.1 {
        Some(n) => {
            x_cut = ctx_diff::AsOfSession::new(x.as_ref(), n).map_err(diff_error)?;
            &x_cut
        }
        None => x.as_ref(),
    };
    let y: &dyn RunHistory = match rb.1 {
        Some(n) => {
            y_cut = ctx_diff::AsOfSession::new(y.as_ref(), n).map_err(diff_error)?;
            &y_cut
        }
        None => y.as_ref(),
    };
    let mut diff = ctx_diff::diff_runs(x, y, &options).map_err(diff_error)?;
    if let Some(path) = &a.out {
        write_atomic(path, diff.html().as_bytes())?;
        eprintln!("comparison written to {}", path.display());
        // Standard output is as without -o: diffs only for --task.
        if a.task.is_none() {
            diff.tasks.iter_mut().for_each(|t| t.output.diff = None);
        }
    }
    let text = match (a.format, a.task.is_some()) {
        (Format::Json, _) => json_text(&diff)?,
        (Format::Text, true) => diff.task_text(),
        (Format::Text, false) => diff.text(),
    };
    print_stdout(&text)?;
    let tripped = ctx_diff::gate::judge(&diff, &conditions);
    for t in &tripped {
        eprintln!("fail-on {}: {}", t.condition, t.detail);
    }
    Ok(if tripped.is_empty() {
        Exit::Ok
    } else {
        Exit::Findings
    })
}

/// Run `id` of the store `root` names: a run directory, or a shared run.
fn open_run(root: &RootArg, id: &str) -> Result<Box<dyn RunHistory>, CliError> {
    Ok(match root.shared()? {
        Some(url) => Box::new(ctx_worker::runs::view(&url, id)?),
        None => Box::new(open(root, id)?),
    })
}

/// A store that fails once open is exit 4; the rest is bad input (2).
fn diff_error(e: ctx_diff::DiffError) -> CliError {
    match e {
        e @ ctx_diff::DiffError::Read { .. } => CliError::with(Exit::Store, e),
        e => CliError::usage(e),
    }
}
