//! `ctx runs`: inspect, export and prune the runs stored under a store root
//! (`.ctx/runs` by default, `--root DIR` to change it).
//!
//! `RUN` is a run id (a directory under the root) or a run directory path,
//! in every subcommand. Nothing here takes a run's lock except `gc`, and
//! only for the moment it removes a run, so every command works on a run
//! that another `ctx run` is executing (it shows the last committed state).
//!
//! With `--store postgres://...` (or `CTX_STORE`) the runs are those of a
//! shared store. `report`, `export` (JSON and CSV) and what a run spent are
//! read through the shared [`RunHistory`] seam, so both stores give the
//! same page and the same bytes for the same stored facts; `gc` removes a
//! shared store's closed runs, and its open ones only with `--force`.
//!
//! Exit codes: 0 ok, 2 usage error or a `RUN`/`--task` that does not exist
//! (or a `report -o FILE` that cannot be written), 4 a store that cannot be
//! read (foreign, corrupt, newer schema); `list` prints every readable run
//! and exits 4 if any run under the root was not readable.

use std::path::PathBuf;

use ctx_deps::RunHistory;
use ctx_run::list::{RowFacts, RunList, RunRow};
use ctx_run::show::{RunShow, StoreFacts, TaskShow};
use ctx_store_sqlite::{RunRoot, RunSummary, RunView};
use ctx_table::{printable, printable_lines};

use crate::exit::{CliError, CliResult, Exit};
use crate::io::{json_text, print_stdout};

pub mod approve;
mod cancel;
pub mod diff;
mod export_otlp;
pub mod publish;
pub mod report;
pub(crate) mod shared;

/// The `ctx runs` subcommands (deferred like `ctx`'s, see src/lib.rs).
#[derive(Debug, clap::Subcommand)]
#[command(defer = true)]
pub enum RunsCommand {
    /// List stored runs: id, state, start time, status counts, plan.
    List(ListArgs),
    /// Show a run's tasks, or one task's prompt, output, history and error.
    Show(ShowArgs),
    /// Print a run's results (JSON, with task times) or its timeline (CSV,
    /// one row per engine call).
    Export(ExportArgs),
    /// Write a run's self-contained HTML report: timeline, dependency
    /// graph, totals, and each task's tokens, prompt and output.
    Report(report::ReportArgs),
    /// Remove all but the newest N runs (never a running one; in a shared
    /// store, never an open one without --force).
    Gc(GcArgs),
    /// Compare two runs task by task: status, checks, output, the inputs
    /// that changed, tokens, cost and time; --fail-on gates CI.
    Diff(diff::DiffArgs),
    /// Publish a stored run's completed outputs under --publish-root DIR
    /// (after review), as `ctx run --publish-root` would have, and record
    /// it with the run.
    Publish(publish::PublishArgs),
    /// Undo the run's publishes, newest first: put back the files they
    /// replaced and remove those they created (refused for a file changed
    /// since, unless --force).
    Unpublish(publish::UnpublishArgs),
    /// Approve a task's approval gate: a `before: run` task may start, a
    /// `before: publish` output (named by its SHA-256) may be published.
    Approve(approve::ApproveArgs),
    /// Reject a task's approval gate (--note required): a `before: run`
    /// task fails and its dependents are skipped; a `before: publish`
    /// output is kept but never published.
    Reject(approve::RejectArgs),
    /// Cancel the run's live provider batches (`ctx run --batch`) at the
    /// provider (--base-url, the key in --api-key-env), and record it.
    Cancel(cancel::CancelArgs),
}

// Where runs are stored.
#[derive(Debug, Clone, clap::Args)]
pub struct RootArg {
    /// The store root holding run directories and cache.sqlite.
    #[arg(long, value_name = "DIR", default_value = ctx_store_sqlite::DEFAULT_ROOT)]
    pub root: PathBuf,
    /// `sqlite` (the run directories under --root, the default) or a
    /// shared store's postgres:// URL. Default: $CTX_STORE.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

impl RootArg {
    /// The postgres:// URL when the runs are in a shared store.
    pub(crate) fn shared(&self) -> Result<Option<String>, CliError> {
        Ok(ctx_run::settings::shared_url(self.store.as_deref(), |k| {
            std::env::var(k).ok()
        })?)
    }
}

pub use crate::format::Format;

// `ctx runs list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    root: RootArg,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

// `ctx runs show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// Show this task in full instead of the status table.
    #[arg(long, value_name = "ID")]
    task: Option<String>,
    #[command(flatten)]
    root: RootArg,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// The formats `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The object `ctx run --format json` prints, each task with its start,
    /// end and cost.
    Json,
    /// One row per engine call of each task, for spreadsheets.
    Csv,
    /// The run's OpenTelemetry trace (GenAI conventions, recorded times):
    /// OTLP/JSON on stdout or in `--to FILE`, or sent to `--to URL`.
    Otlp,
}

// `ctx runs export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: ExportFormat,
    /// With --format otlp: a collector's base endpoint (http:// or
    /// https://, /v1/traces appended) to send the trace to, or a file to
    /// write its OTLP/JSON to. Without it the JSON goes to stdout.
    #[arg(long, value_name = "URL|FILE")]
    to: Option<String>,
    #[command(flatten)]
    root: RootArg,
}

// `ctx runs gc`.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// How many of the newest runs to keep.
    #[arg(long, value_name = "N")]
    keep: usize,
    /// Also remove old runs whose store cannot be read (corrupt, foreign,
    /// from a newer ctx); without it they are kept and named. With a
    /// shared store: also remove old runs that are still open (tasks left
    /// for workers).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    root: RootArg,
}

/// Runs the command.
pub fn run(cmd: RunsCommand) -> CliResult {
    match &cmd {
        RunsCommand::List(a) => {
            if let Some(url) = a.root.shared()? {
                return shared::list(&url, a.format);
            }
        }
        RunsCommand::Show(a) => {
            if let Some(url) = a.root.shared()? {
                return shared::show(&url, &a.run, a.task.as_deref(), a.format);
            }
        }
        RunsCommand::Export(a) => {
            if let Some(url) = a.root.shared()? {
                return shared::export(&url, &a.run, a.format, a.to.as_deref());
            }
        }
        RunsCommand::Gc(a) => {
            if let Some(url) = a.root.shared()? {
                return shared::gc(&url, a.keep, a.force);
            }
        }
        RunsCommand::Report(a) => {
            if let Some(url) = a.root.shared()? {
                return shared::report(&url, &a.run, a.output.as_deref());
            }
        }
        // Each reads either store itself.
        RunsCommand::Diff(_)
        | RunsCommand::Publish(_)
        | RunsCommand::Unpublish(_)
        | RunsCommand::Approve(_)
        | RunsCommand::Reject(_)
        | RunsCommand::Cancel(_) => {}
    }
    match cmd {
        RunsCommand::List(a) => list(a),
        RunsCommand::Show(a) => show(a),
        RunsCommand::Export(a) => export(a),
        RunsCommand::Report(a) => report::run(a),
        RunsCommand::Gc(a) => gc(a),
        RunsCommand::Diff(a) => diff::run(a),
        RunsCommand::Publish(a) => publish::publish(a),
        RunsCommand::Unpublish(a) => publish::unpublish(a),
        RunsCommand::Approve(a) => approve::approve(a),
        RunsCommand::Reject(a) => approve::reject(a),
        RunsCommand::Cancel(a) => cancel::cancel(a),
    }
}

fn list(a: ListArgs) -> CliResult {
    let root = RunRoot::new(&a.root.root);
    let (runs, bad) = root.list()?;
    for b in &bad {
        eprintln!("warning: {}", printable_lines(&b.error.to_string()));
    }
    let list = RunList::new(
        runs.into_iter().map(row).collect(),
        root.path().display().to_string(),
        false,
    );
    print_list(&list, a.format)?;
    Ok(if bad.is_empty() {
        Exit::Ok
    } else {
        Exit::Store
    })
}

fn row(r: RunSummary) -> RunRow {
    RunRow {
        id: r.id,
        state: r.state.as_str().to_string(),
        created_at: r.created_at,
        plan: r.plan,
        counts: r.counts,
        facts: RowFacts::Local {
            dir: r.dir.display().to_string(),
            sessions: r.sessions,
        },
    }
}

/// `ctx runs list` of either store.
pub(crate) fn print_list(list: &RunList, format: Format) -> Result<(), CliError> {
    match format {
        Format::Json => print_stdout(&json_text(&list.runs)?),
        Format::Text => print_stdout(&list.text()),
    }
}

fn open(root: &RootArg, run: &str) -> Result<RunView, CliError> {
    Ok(RunRoot::new(&root.root).open(run)?)
}

fn show(a: ShowArgs) -> CliResult {
    let view = open(&a.root, &a.run)?;
    let facts = StoreFacts::Local {
        dir: view.dir().display().to_string(),
        created_at: view.created_at()?,
        sessions: view.sessions()?,
    };
    print_show(&view, facts, a.task.as_deref(), a.format)
}

/// `ctx runs show` of a run read through the seam both stores share, with
/// what only its store knows (`facts`): the run, or its task `task`.
pub(crate) fn print_show(
    view: &dyn RunHistory,
    facts: StoreFacts,
    task: Option<&str>,
    format: Format,
) -> CliResult {
    let text = match task {
        Some(task) => {
            let claims = match &facts {
                StoreFacts::Local { .. } => None,
                StoreFacts::Shared { claims, .. } => Some(claims.get(task).copied().unwrap_or(0)),
            };
            let Some(show) = TaskShow::read(view, task, claims)? else {
                return Err(CliError::usage(format!(
                    "run {}: no task `{}` (not in its plan and no stored result)",
                    view.header()?.run_id,
                    printable(task)
                )));
            };
            match format {
                Format::Json => json_text(&show.json())?,
                Format::Text => show.text(),
            }
        }
        None => {
            let show = RunShow::read(view, facts)?;
            match format {
                Format::Json => json_text(&show.json())?,
                Format::Text => show.text(),
            }
        }
    };
    print_stdout(&text)?;
    Ok(Exit::Ok)
}

fn export(a: ExportArgs) -> CliResult {
    let view = open(&a.root, &a.run)?;
    export_from(&view, a.format, a.to.as_deref())
}

/// `ctx runs export` of a run read from either store.
fn export_from(view: &dyn RunHistory, format: ExportFormat, to: Option<&str>) -> CliResult {
    if to.is_some() && format != ExportFormat::Otlp {
        return Err(CliError::usage("--to: only with --format otlp"));
    }
    let run =
        ctx_run::export::read_run(view, ctx_run::export::now()).map_err(report::export_error)?;
    let text = match format {
        ExportFormat::Otlp => {
            let workflow = ctx_run::workflow_name(&view.plan()?, Some(&run.input.plan));
            return export_otlp::export(&run, &workflow, to);
        }
        ExportFormat::Json => {
            let spent = ctx_run::spent(view)?;
            ctx_run::export::export_json(&run, spent)
                .map_err(|e| CliError::usage(format!("cannot encode JSON: {e}")))?
        }
        ExportFormat::Csv => ctx_run::export::export_csv(&run),
    };
    print_stdout(&text)?;
    Ok(Exit::Ok)
}

fn gc(a: GcArgs) -> CliResult {
    let root = RunRoot::new(&a.root.root);
    let report = root.gc(a.keep, a.force)?;
    let mut out = String::new();
    for id in &report.removed {
        out.push_str(&format!("removed {id}\n"));
    }
    for id in &report.running {
        out.push_str(&format!("kept {id} (running)\n"));
    }
    for (id, why) in &report.unreadable {
        out.push_str(&format!(
            "kept {id} (unreadable, --force removes it): {}\n",
            why.lines().next().unwrap_or_default()
        ));
    }
    let notes: Vec<String> = [
        (report.running.len(), "running"),
        (report.unreadable.len(), "unreadable"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    out.push_str(&format!(
        "{} removed, {} kept{}\n",
        report.removed.len(),
        report.kept.len() + report.running.len() + report.unreadable.len(),
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join(", "))
        }
    ));
    print_stdout(&out)?;
    Ok(Exit::Ok)
}

/// The `ctx run --resume RUN --dry-run` listing: the reused tasks, then the
/// tasks that would run with their reasons (each group in topological
/// order), a count line, and a note for stored tasks no longer in the plan.
pub fn resume_listing(run_id: &str, plan: &ctx_store_sqlite::ResumePlan) -> String {
    let mut rows: Vec<Vec<String>> = plan
        .reuse
        .iter()
        .map(|id| vec!["reuse".into(), printable(id), String::new()])
        .collect();
    rows.extend(
        plan.rerun
            .iter()
            .map(|(id, why)| vec!["rerun".into(), printable(id), why.to_string()]),
    );
    let mut out = format!("resume plan for run {run_id}\n\n");
    out.push_str(&table(
        &["ACTION", "TASK", "REASON"],
        &[false, false, false],
        &rows,
    ));
    out.push_str(&format!(
        "\n{}: {} reused, {} to run\n",
        super::run::tasks(plan.reuse.len() + plan.rerun.len()),
        plan.reuse.len(),
        plan.rerun.len()
    ));
    if !plan.dropped.is_empty() {
        let dropped: Vec<String> = plan.dropped.iter().map(|d| printable(d)).collect();
        out.push_str(&format!(
            "stored but no longer in the plan (kept, ignored): {}\n",
            dropped.join(", ")
        ));
    }
    out
}

/// Text with control characters escaped, for tables.
/// An aligned table; `right[i]` right-aligns column `i`. The last column is
/// not padded.
pub(crate) fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    ctx_table::render(header, right, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_store_sqlite::{RerunReason, ResumePlan};

    #[test]
    fn resume_listing_shows_reasons() {
        let plan = ResumePlan {
            reuse: vec!["a".into(), "b".into()],
            rerun: vec![
                ("c".into(), RerunReason::Failed),
                ("d".into(), RerunReason::Upstream("c".into())),
            ],
            dropped: vec!["old".into()],
        };
        assert_eq!(
            resume_listing("R1", &plan),
            "resume plan for run R1\n\n\
             ACTION  TASK  REASON\n\
             reuse   a\n\
             reuse   b\n\
             rerun   c     failed\n\
             rerun   d     upstream c re-runs\n\
             \n4 tasks: 2 reused, 2 to run\n\
             stored but no longer in the plan (kept, ignored): old\n"
        );
    }

    #[test]
    fn table_aligns_and_trims() {
        let t = table(
            &["A", "NUM", "LAST"],
            &[false, true, false],
            &[vec!["long-id".into(), "5".into(), String::new()]],
        );
        assert_eq!(t, "A        NUM  LAST\nlong-id    5\n");
    }
}
