//! `ctx runs approve RUN TASK [--note TEXT]` and `ctx runs reject RUN
//! TASK --note TEXT`: a decision on a task's approval gate, recorded with
//! the run (docs/runs.md, "Approval gates"), in its run directory or, with
//! `--store postgres://…`, in the shared store. The run may be executing
//! in another process (waiting with `--wait-approval`): a decision takes
//! no lock on it.
//!
//! Exit codes: 0 recorded; 1 the gate does not wait now (a `before: run`
//! task that already ran, a `before: publish` task with no completed
//! output) or another decision settled it first (named); 2 an unknown run
//! or task, a task with no gate, a rejection without a note; 4 a store
//! that cannot be opened or written. Nothing is written unless it exits 0.

use ctx_model::approval::{Decision, Verdict};
use ctx_run::gates::DecisionRequest;
use ctx_store_sqlite::RunRoot;

use super::RootArg;
use crate::exit::{CliResult, Exit};
use crate::format::Format;
use crate::io::{json_text, print_stdout};

// `ctx runs approve`.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// The gated task (a task with an `approval` block).
    #[arg(value_name = "TASK")]
    task: String,
    /// Why, recorded with the decision.
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    #[command(flatten)]
    who: DeciderArgs,
}

// `ctx runs reject`.
#[derive(Debug, clap::Args)]
pub struct RejectArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// The gated task (a task with an `approval` block).
    #[arg(value_name = "TASK")]
    task: String,
    /// Why (required): shown with the rejected task.
    #[arg(long, value_name = "TEXT")]
    note: String,
    #[command(flatten)]
    who: DeciderArgs,
}

// Who decides, where the run is, and how the decision is printed.
#[derive(Debug, clap::Args)]
pub struct DeciderArgs {
    /// Who decides (default: $USER, else $USERNAME, else `unknown`).
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    #[command(flatten)]
    root: RootArg,
    /// Output format: the decision recorded as text or JSON.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// `ctx runs approve`.
pub fn approve(a: ApproveArgs) -> CliResult {
    decide(&a.run, &a.task, Verdict::Approve, a.note, &a.who)
}

/// `ctx runs reject`.
pub fn reject(a: RejectArgs) -> CliResult {
    decide(&a.run, &a.task, Verdict::Reject, Some(a.note), &a.who)
}

fn decide(
    run: &str,
    task: &str,
    verdict: Verdict,
    note: Option<String>,
    who: &DeciderArgs,
) -> CliResult {
    let req = DecisionRequest {
        task_id: task.to_string(),
        verdict,
        by: ctx_run::gates::decision_user(who.by.as_deref()),
        note,
    };
    let decision = match who.root.shared()? {
        Some(url) => crate::runtime::block_on(ctx_worker::runs::decide(&url, run, &req))?
            .map_err(super::shared::shared)?,
        None => ctx_run::gates::decide(&RunRoot::new(&who.root.root), run, &req)?,
    };
    match who.format {
        Format::Json => print_stdout(&json_text(&decision)?)?,
        Format::Text => print_stdout(&decision_line(&decision))?,
    }
    Ok(Exit::Ok)
}

/// `approved report (before publish, output 1a2b3c4d5e6f) by ana at T`.
fn decision_line(d: &Decision) -> String {
    let done = match d.verdict {
        Verdict::Approve => "approved",
        Verdict::Reject => "rejected",
    };
    let output = d
        .output_sha256
        .as_deref()
        .map(|s| format!(", output {}", &s[..s.len().min(12)]))
        .unwrap_or_default();
    let note = d
        .note
        .as_deref()
        .map(|n| format!(": {n}"))
        .unwrap_or_default();
    format!(
        "{done} {} (before {}{output}) by {} at {}{note}\n",
        d.task_id, d.stage, d.by, d.at
    )
}
