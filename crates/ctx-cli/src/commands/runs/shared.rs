//! `ctx runs list|show|export|report|gc --store postgres://…`: the same
//! output as for run directories, from ctx-worker's reads of a shared
//! store ([`ctx_worker::runs`]).

use super::{ExportFormat, Format};
use crate::exit::{CliError, CliResult, Exit};
use crate::runtime::block_on;

/// `ctx runs list --store URL`.
pub fn list(url: &str, format: Format) -> CliResult {
    let list = block_on(ctx_worker::runs::list(url))?.map_err(shared)?;
    super::print_list(&list, format)?;
    Ok(Exit::Ok)
}

/// `ctx runs show RUN --store URL [--task ID]`: the same page as for a
/// local run, read through the seam both stores share, with the run's
/// claims in place of sessions.
pub fn show(url: &str, run_id: &str, task: Option<&str>, format: Format) -> CliResult {
    let (view, facts) = block_on(ctx_worker::runs::show(url, run_id))?.map_err(shared)?;
    super::print_show(&view, facts, task, format)
}

/// `ctx runs export RUN --store URL`.
pub fn export(url: &str, run_id: &str, format: ExportFormat, to: Option<&str>) -> CliResult {
    super::export_from(&ctx_worker::runs::view(url, run_id)?, format, to)
}

/// `ctx runs report RUN --store URL`.
pub fn report(url: &str, run_id: &str, out: Option<&std::path::Path>) -> CliResult {
    super::report::render(&ctx_worker::runs::view(url, run_id)?, out)
}

/// `ctx runs gc --store URL --keep N [--force]`: removes the closed runs
/// beyond the newest N (and the open ones too with `--force`), printing
/// what it did as the local store's `gc` does.
pub fn gc(url: &str, keep: usize, force: bool) -> CliResult {
    let report = block_on(ctx_worker::runs::gc(url, keep, force))?.map_err(shared)?;
    let mut out = String::new();
    for id in &report.removed {
        out.push_str(&format!("removed {id}\n"));
    }
    for id in &report.open {
        out.push_str(&format!("kept {id} (open, --force removes it)\n"));
    }
    out.push_str(&format!(
        "{} removed, {} kept{}\n",
        report.removed.len(),
        report.kept.len() + report.open.len(),
        if report.open.is_empty() {
            String::new()
        } else {
            format!(" ({} open)", report.open.len())
        }
    ));
    crate::io::print_stdout(&out)?;
    Ok(Exit::Ok)
}

/// A read of the shared store: no plan is involved (`ctx runs`, `ctx
/// spend`).
pub(crate) fn shared(e: ctx_worker::SharedError) -> CliError {
    CliError::shared(e, std::path::Path::new("<shared store>"))
}
