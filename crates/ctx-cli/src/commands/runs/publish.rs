//! `ctx runs publish RUN --publish-root DIR` and `ctx runs unpublish RUN
//! [--force]`: a stored run's outputs published after review, and its
//! publishes undone (ctx-run's `unpublish`).
//!
//! Exit codes: 0 done (or nothing to undo), 1 an undo refused because a
//! file changed since the run wrote it, or is no longer a regular file
//! (nothing was touched), 2 an
//! unknown run, a plan with no `publish:` path, a publish recorded before
//! manifests were kept, or the shared store (it keeps no backups yet),
//! 4 a store that cannot be opened, locked or written, or a backup that
//! is missing or damaged (nothing was touched), 5 a file that could not
//! be written (those written before it are recorded).

use std::path::PathBuf;

use ctx_run::unpublish::UnpublishError;
use ctx_store_sqlite::RunRoot;

use super::RootArg;
use crate::exit::{CliError, CliResult, Exit};
use crate::format::Format;
use crate::io::{json_text, print_stdout};

// `ctx runs publish`.
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// Write each completed task's final output under DIR at its plan's
    /// `publish:` path, as `ctx run --publish-root` does.
    #[arg(long, value_name = "DIR")]
    publish_root: PathBuf,
    #[command(flatten)]
    root: RootArg,
    /// Output format: the manifest lines as text or JSON.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

// `ctx runs unpublish`.
#[derive(Debug, clap::Args)]
pub struct UnpublishArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// Undo even files changed since the run wrote them.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    root: RootArg,
    /// Output format: the undo's lines as text or JSON.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// Refuses the shared store, whose publishes keep no backup yet.
fn local_only(root: &RootArg, command: &str) -> Result<RunRoot, CliError> {
    if root.shared()?.is_some() {
        return Err(CliError::usage(format!(
            "ctx runs {command}: not on a shared store yet: it keeps no backup of what a \
             publish replaces (docs/runs.md, \"Publishing later and undoing\")"
        )));
    }
    Ok(RunRoot::new(&root.root))
}

/// `ctx runs publish`.
pub fn publish(a: PublishArgs) -> CliResult {
    let root = local_only(&a.root, "publish")?;
    let (written, failed) =
        ctx_run::unpublish::publish_stored(&root, &a.run, &a.publish_root).map_err(cli_error)?;
    print_lines(&written, a.format, ctx_run::publish::published_text)?;
    if let Some(e) = failed {
        eprintln!("error: --publish-root: {e}");
        return Ok(Exit::OutWrite);
    }
    Ok(Exit::Ok)
}

/// `ctx runs unpublish`.
pub fn unpublish(a: UnpublishArgs) -> CliResult {
    let root = local_only(&a.root, "unpublish")?;
    let undone = ctx_run::unpublish::unpublish(&root, &a.run, a.force).map_err(cli_error)?;
    if undone.is_empty() {
        eprintln!("run {}: nothing to undo", a.run);
    }
    print_lines(&undone, a.format, ctx_run::unpublish::unpublished_text)?;
    Ok(Exit::Ok)
}

fn print_lines(
    lines: &[ctx_run::publish::Published],
    format: Format,
    text: fn(&[ctx_run::publish::Published]) -> String,
) -> Result<(), CliError> {
    match format {
        Format::Json => print_stdout(&json_text(&lines)?),
        Format::Text => print_stdout(&text(lines)),
    }
}

/// Each refusal's exit code (the module's comment lists them).
fn cli_error(e: UnpublishError) -> CliError {
    match e {
        UnpublishError::Store(e) => e.into(),
        UnpublishError::NoTargets { .. } | UnpublishError::NoManifest { .. } => CliError::usage(e),
        UnpublishError::Changed { .. } | UnpublishError::NotRegular { .. } => {
            CliError::with(Exit::Findings, e)
        }
        UnpublishError::MissingBackup { .. } => CliError::with(Exit::Store, e),
        UnpublishError::Write(_) => CliError::with(Exit::OutWrite, e),
    }
}
