//! Approval gates as the use cases see them (docs/runs.md, "Approval
//! gates"): which gates a run left waiting and the command that opens
//! each ([`Waiting`]), which outputs publishing holds back
//! ([`withhold`]), a decision recorded on a stored run ([`decide`]), who
//! decides ([`decision_user`]), and the text every summary shows.
//!
//! The executor holds `before: run` gates (ctx-deps' `gates`); a
//! `before: publish` gate is publishing's: an output is written only when
//! a decision approves its SHA-256, so a resume that produced other text
//! waits for a decision of its own, and a rejected output is kept in the
//! store and never published.

use std::path::Path;

use ctx_model::approval::{Decision, GateStage, Verdict, approve_command, gate, settling};
use ctx_model::digest::sha256_hex;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
/// A decision asked for, and why one was not recorded (ctx-store's).
pub use ctx_store::{DecisionRefused, DecisionRequest};
use ctx_store_sqlite::RunRoot;

use crate::publish::PublishTarget;

/// A gate that waits for a decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    /// The gated task.
    pub task_id: String,
    /// What waits: its start, or the publishing of its output.
    pub stage: GateStage,
    /// The gate's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For `before: publish`: the digest of the output that waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_sha256: Option<String>,
    /// The command that approves it (none for a run in memory, which no
    /// decision can reach).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approve: Option<String>,
}

/// An output publishing held back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Withheld {
    /// It waits for a decision on its digest.
    Awaiting(Waiting),
    /// A decision rejected it: it is never published.
    Rejected(Decision),
}

/// The `before: run` gates the executor left waiting (`awaiting`, ids in
/// plan order) as [`Waiting`]s of the run `run_id`.
pub fn waiting_to_run(plan: &Plan, awaiting: &[String], run_id: Option<&str>) -> Vec<Waiting> {
    awaiting
        .iter()
        .map(|id| Waiting {
            task_id: id.clone(),
            stage: GateStage::Run,
            message: plan
                .sub_tasks
                .iter()
                .find(|t| &t.id == id)
                .and_then(gate)
                .and_then(|a| a.message.clone()),
            output_sha256: None,
            approve: run_id.map(|run| approve_command(run, id)),
        })
        .collect()
}

/// Splits `targets` into what may be published and what is held back:
/// a task with a `before: publish` gate is published only when one of
/// `decisions` approves the digest of its completed output. Targets with
/// no completed output pass through (publishing skips them).
pub fn withhold(
    plan: &Plan,
    targets: &[PublishTarget],
    results: &[TaskExecutionResult],
    decisions: &[Decision],
    run_id: Option<&str>,
) -> (Vec<PublishTarget>, Vec<Withheld>) {
    let mut open = Vec::new();
    let mut held = Vec::new();
    for target in targets {
        let approval = plan
            .sub_tasks
            .iter()
            .find(|t| t.id == target.task_id)
            .and_then(gate)
            .filter(|a| a.before == GateStage::Publish);
        let output = results
            .iter()
            .find(|r| r.task_id == target.task_id && r.status == TaskStatus::Completed);
        let (Some(approval), Some(output)) = (approval, output) else {
            open.push(target.clone());
            continue;
        };
        let sha = sha256_hex(output.output.as_bytes());
        match settling(decisions, &target.task_id, GateStage::Publish, Some(&sha)) {
            Some(d) if d.verdict == Verdict::Approve => open.push(target.clone()),
            Some(d) => held.push(Withheld::Rejected(d.clone())),
            None => held.push(Withheld::Awaiting(Waiting {
                task_id: target.task_id.clone(),
                stage: GateStage::Publish,
                message: approval.message.clone(),
                output_sha256: Some(sha),
                approve: run_id.map(|run| approve_command(run, &target.task_id)),
            })),
        }
    }
    (open, held)
}

/// The gates of a stored run that wait for a decision now, in plan
/// order: a `before: run` task stored `pending` with no decision, and a
/// `before: publish` task whose completed output no decision settles.
pub fn waiting_in(
    plan: &Plan,
    latest: &[TaskExecutionResult],
    decisions: &[Decision],
    run_id: &str,
) -> Vec<Waiting> {
    let status = |id: &str| latest.iter().find(|r| r.task_id == id);
    let mut out = Vec::new();
    for task in &plan.sub_tasks {
        let Some(a) = gate(task) else { continue };
        let result = status(&task.id);
        let sha = match (a.before, result.map(|r| r.status)) {
            (GateStage::Run, Some(TaskStatus::Pending)) => None,
            (GateStage::Publish, Some(TaskStatus::Completed)) => {
                result.map(|r| sha256_hex(r.output.as_bytes()))
            }
            _ => continue,
        };
        if settling(decisions, &task.id, a.before, sha.as_deref()).is_some() {
            continue;
        }
        out.push(Waiting {
            task_id: task.id.clone(),
            stage: a.before,
            message: a.message.clone(),
            output_sha256: sha,
            approve: Some(approve_command(run_id, &task.id)),
        });
    }
    out
}

/// `ctx runs show`'s lines for gates: the decisions, then what waits.
pub fn gates_text(decisions: &[Decision], waiting: &[Waiting]) -> String {
    let mut out = String::new();
    for part in [decisions_text(decisions), waiting_text(waiting)] {
        if !part.is_empty() {
            out.push('\n');
            out.push_str(&part);
        }
    }
    out
}

/// The [`Waiting`]s among `withheld`.
pub fn awaiting(withheld: &[Withheld]) -> Vec<Waiting> {
    withheld
        .iter()
        .filter_map(|w| match w {
            Withheld::Awaiting(w) => Some(w.clone()),
            Withheld::Rejected(_) => None,
        })
        .collect()
}

/// Who decides: `--by`, else `$USER`, else `$USERNAME`, else `unknown`.
pub fn decision_user(by: Option<&str>) -> String {
    let env = |name| {
        std::env::var(name)
            .ok()
            .filter(|v: &String| !v.trim().is_empty())
    };
    by.map(str::to_string)
        .filter(|b| !b.trim().is_empty())
        .or_else(|| env("USER"))
        .or_else(|| env("USERNAME"))
        .unwrap_or_else(|| "unknown".into())
}

/// `ctx runs approve` / `ctx runs reject` on a local run (an id under
/// `root`, or a run directory): the decision recorded, or why not.
pub fn decide(
    root: &RunRoot,
    run: &str,
    req: &DecisionRequest,
) -> Result<Decision, ctx_store_sqlite::Error> {
    decide_in(&root.resolve(run)?, req)
}

/// [`decide`] on the run in `dir`.
pub fn decide_in(dir: &Path, req: &DecisionRequest) -> Result<Decision, ctx_store_sqlite::Error> {
    ctx_store_sqlite::decide(dir, req)
}

/// The summary's lines for gates that wait: each task, its stage and
/// message, and the command that approves it. Empty when none waits.
pub fn waiting_text(waiting: &[Waiting]) -> String {
    if waiting.is_empty() {
        return String::new();
    }
    let mut out = String::from("waiting for approval:\n");
    for w in waiting {
        out.push_str(&format!("  {} (before {})", w.task_id, w.stage));
        if let Some(m) = &w.message {
            out.push_str(&format!(": {m}"));
        }
        out.push('\n');
        match &w.approve {
            Some(cmd) => out.push_str(&format!("    approve: {cmd}\n")),
            None => out.push_str("    (a run in memory: no decision can reach it)\n"),
        }
    }
    out
}

/// The summary's lines for rejected outputs that were not published.
pub fn rejected_text(withheld: &[Withheld]) -> String {
    let mut out = String::new();
    for w in withheld {
        if let Withheld::Rejected(d) = w {
            out.push_str(&format!(
                "not published: {}: {}\n",
                d.task_id,
                ctx_deps::gates::rejected_reason(d)
            ));
        }
    }
    out
}

/// A run's decisions as `ctx runs show` lists them, oldest first.
pub fn decisions_text(decisions: &[Decision]) -> String {
    if decisions.is_empty() {
        return String::new();
    }
    let mut out = String::from("decisions:\n");
    for d in decisions {
        out.push_str(&format!(
            "  {} {} (before {}) by {} at {}",
            d.verdict, d.task_id, d.stage, d.by, d.at
        ));
        if let Some(sha) = &d.output_sha256 {
            out.push_str(&format!(", output {}", &sha[..sha.len().min(12)]));
        }
        if let Some(note) = &d.note {
            out.push_str(&format!(": {note}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::approval::Approval;

    fn plan() -> Plan {
        let mut p = ctx_test_support::plan(&[("report", &[]), ("notes", &[])]);
        p.sub_tasks[0].publish = Some("r.md".into());
        p.sub_tasks[1].publish = Some("n.md".into());
        p.sub_tasks[0].approval = Some(Approval {
            before: GateStage::Publish,
            message: Some("Read it".into()),
        });
        p
    }

    fn done(id: &str, out: &str) -> TaskExecutionResult {
        let mut r = TaskExecutionResult::new(id, TaskStatus::Completed);
        r.output = out.into();
        r
    }

    fn decision(verdict: Verdict, out: &str) -> Decision {
        Decision {
            task_id: "report".into(),
            stage: GateStage::Publish,
            verdict,
            by: "ana".into(),
            at: "t".into(),
            note: Some("why".into()),
            output_sha256: Some(sha256_hex(out.as_bytes())),
        }
    }

    #[test]
    fn a_gated_output_is_published_only_when_its_digest_is_approved() {
        let p = plan();
        let targets = crate::publish::publish_targets(&p);
        let results = [done("report", "v2"), done("notes", "n")];
        let (open, held) = withhold(&p, &targets, &results, &[], Some("r1"));
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].task_id, "notes");
        let waiting = awaiting(&held);
        assert_eq!(
            waiting[0].approve.as_deref(),
            Some("ctx runs approve r1 report")
        );
        assert!(waiting_text(&waiting).contains("report (before publish): Read it"));
        // An approval of another output (the run before a resume) holds
        // nothing open.
        let old = [decision(Verdict::Approve, "v1")];
        let (open, _) = withhold(&p, &targets, &results, &old, Some("r1"));
        assert_eq!(open.len(), 1);
        let ok = [decision(Verdict::Approve, "v2")];
        let (open, held) = withhold(&p, &targets, &results, &ok, Some("r1"));
        assert_eq!((open.len(), held.len()), (2, 0));
        let no = [decision(Verdict::Reject, "v2")];
        let (open, held) = withhold(&p, &targets, &results, &no, Some("r1"));
        assert_eq!(open.len(), 1);
        assert!(awaiting(&held).is_empty());
        assert!(rejected_text(&held).starts_with("not published: report: rejected by ana"));
    }

    #[test]
    fn the_user_is_the_flag_else_the_environment() {
        assert_eq!(decision_user(Some("ana")), "ana");
        assert!(!decision_user(None).is_empty());
    }
}
