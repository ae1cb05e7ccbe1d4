//! `ctx runs publish RUN --publish-root DIR` and `ctx runs unpublish RUN
//! [--force]`: a stored run's outputs published after review, and its
//! publishes undone (ctx-run's `unpublish` for a run directory,
//! ctx-worker's `publish` for a shared store: the same checks and writes).
//!
//! An output its `before: publish` gate holds back is not written: one
//! waiting for a decision on its digest is named with the command that
//! approves it, a rejected one with its note.
//!
//! Exit codes: 0 done (or nothing to undo), 6 an output waits for a
//! decision (the others were published), 1 an undo refused because a
//! file changed since the run wrote it, or is no longer a regular file
//! (nothing was touched), 2 an
//! unknown run, a plan with no `publish:` path, a publish recorded before
//! manifests were kept, 4 a store that cannot be opened, locked or written, or a backup that
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

/// `ctx runs publish`.
pub fn publish(a: PublishArgs) -> CliResult {
    let done = match a.root.shared()? {
        Some(url) => {
            ctx_worker::publish::publish(&url, &a.run, &a.publish_root).map_err(shared_error)?
        }
        None => {
            ctx_run::unpublish::publish_stored(&RunRoot::new(&a.root.root), &a.run, &a.publish_root)
                .map_err(cli_error)?
        }
    };
    print_lines(&done.written, a.format, ctx_run::publish::published_text)?;
    let waiting = ctx_run::gates::awaiting(&done.withheld);
    eprint!(
        "{}{}",
        ctx_run::gates::waiting_text(&waiting),
        ctx_run::gates::rejected_text(&done.withheld)
    );
    if let Some(e) = done.failed {
        eprintln!("error: --publish-root: {e}");
        return Ok(Exit::OutWrite);
    }
    Ok(if waiting.is_empty() {
        Exit::Ok
    } else {
        Exit::AwaitingApproval
    })
}

/// `ctx runs unpublish`.
pub fn unpublish(a: UnpublishArgs) -> CliResult {
    let undone = match a.root.shared()? {
        Some(url) => ctx_worker::publish::unpublish(&url, &a.run, a.force).map_err(shared_error)?,
        None => ctx_run::unpublish::unpublish(&RunRoot::new(&a.root.root), &a.run, a.force)
            .map_err(cli_error)?,
    };
    if undone.is_empty() {
        eprintln!("run {}: nothing to undo", a.run);
    }
    print_lines(&undone, a.format, ctx_run::unpublish::unpublished_text)?;
    Ok(Exit::Ok)
}

/// A shared run's refusal: the store's codes, or the publish's own.
fn shared_error(e: ctx_worker::publish::SharedPublishError) -> CliError {
    use ctx_worker::publish::SharedPublishError;
    match e {
        SharedPublishError::Store(e) => e.into(),
        SharedPublishError::Read(e) => e.into(),
        e @ SharedPublishError::Open { .. } => CliError::with(Exit::Store, e),
        SharedPublishError::Publish(e) => cli_error(e),
    }
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
