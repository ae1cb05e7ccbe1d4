//! Approval gates (docs/runs.md, "Approval gates"): a task's `approval`
//! block as data, and a person's decision on a gate as every store keeps
//! it and every output shows it.
//!
//! A gate is a stored state, not a process that waits: the block says
//! where a task stops (`before: run`, it does not start; `before:
//! publish`, its output is not published), a [`Decision`] recorded with
//! the run lets it go on (or stops it for good), and a run that reaches
//! a gate with no decision ends, waiting, until `ctx runs approve` or
//! `ctx runs reject` records one. A decision recorded before the run
//! reaches its gate counts as well.
//!
//! A `before: publish` approval names the output it approved by its
//! SHA-256 ([`Decision::output_sha256`]): an output that differs (a
//! resume that ran the task again) waits for a decision of its own.
//!
//! On a map task, `before: run` holds the map as a whole (its expansion
//! and every item) until the map task is approved; its items carry no
//! gate. A map task publishes nothing, so `before: publish` on one is a
//! plan problem (as is `before: publish` on any task without `publish`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::plan::{Plan, SubTask};

/// A task's `approval` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(deny_unknown_fields)]
pub struct Approval {
    /// What waits for the decision: the task's start (`run`), or the
    /// publishing of its output (`publish`).
    pub before: GateStage,
    /// What the person deciding should look at; shown with the waiting
    /// task in the run's summary and in `ctx runs show`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub message: Option<String>,
}

/// Where a gate stops its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateStage {
    /// The task does not start until approved.
    Run,
    /// The task runs and is checked; its output is not published until
    /// approved.
    Publish,
}

impl GateStage {
    /// The stage as written in plans, stores and JSON: `run`, `publish`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateStage::Run => "run",
            GateStage::Publish => "publish",
        }
    }

    /// The stage `s` names, if any.
    pub fn parse(s: &str) -> Option<GateStage> {
        match s {
            "run" => Some(GateStage::Run),
            "publish" => Some(GateStage::Publish),
            _ => None,
        }
    }
}

impl std::fmt::Display for GateStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a decision says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Go on: start the task, or publish its output.
    Approve,
    /// Stop: the task fails (`before: run`), or its output is kept in the
    /// store and never published (`before: publish`).
    Reject,
}

impl Verdict {
    /// The verdict as stored and shown: `approve`, `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Reject => "reject",
        }
    }

    /// The verdict `s` names, if any.
    pub fn parse(s: &str) -> Option<Verdict> {
        match s {
            "approve" => Some(Verdict::Approve),
            "reject" => Some(Verdict::Reject),
            _ => None,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One decision on one gate, as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Decision {
    /// The gated task.
    pub task_id: String,
    /// The gate decided.
    pub stage: GateStage,
    /// What was decided.
    pub verdict: Verdict,
    /// Who decided (`--by`, else `$USER`, else `unknown`).
    pub by: String,
    /// When it was recorded (RFC 3339, UTC).
    pub at: String,
    /// Why; required for a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For a `before: publish` gate: the SHA-256 of the output decided on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_sha256: Option<String>,
}

/// `task`'s gate, if it has one.
pub fn gate(task: &SubTask) -> Option<&Approval> {
    task.approval.as_ref()
}

/// The tasks of `plan` with a gate at `stage`, in plan order.
pub fn gated(plan: &Plan, stage: GateStage) -> impl Iterator<Item = &SubTask> {
    plan.sub_tasks
        .iter()
        .filter(move |t| gate(t).is_some_and(|a| a.before == stage))
}

/// The decision among `decisions` that settles `task_id`'s gate at
/// `stage`: for `run`, the task's one decision; for `publish`, the one
/// on the output whose digest is `output_sha256` (a decision on another
/// output settles nothing).
pub fn settling<'d>(
    decisions: &'d [Decision],
    task_id: &str,
    stage: GateStage,
    output_sha256: Option<&str>,
) -> Option<&'d Decision> {
    decisions.iter().find(|d| {
        d.task_id == task_id
            && d.stage == stage
            && (stage == GateStage::Run || d.output_sha256.as_deref() == output_sha256)
    })
}

/// The command that approves `task_id` of the run `run_id`, as the
/// summary prints it for a waiting gate. The task id is quoted when the
/// shell would read it otherwise (a map item's brackets).
pub fn approve_command(run_id: &str, task_id: &str) -> String {
    let plain = task_id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c));
    if plain {
        format!("ctx runs approve {run_id} {task_id}")
    } else {
        format!(
            "ctx runs approve {run_id} '{}'",
            task_id.replace('\'', r"'\''")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(task: &str, stage: GateStage, sha: Option<&str>) -> Decision {
        Decision {
            task_id: task.into(),
            stage,
            verdict: Verdict::Approve,
            by: "ana".into(),
            at: "2026-12-06T05:00:00Z".into(),
            note: None,
            output_sha256: sha.map(str::to_string),
        }
    }

    #[test]
    fn a_publish_decision_settles_only_the_output_it_names() {
        let ds = [
            decision("report", GateStage::Publish, Some("aaa")),
            decision("draft", GateStage::Run, None),
        ];
        assert!(settling(&ds, "report", GateStage::Publish, Some("aaa")).is_some());
        assert!(settling(&ds, "report", GateStage::Publish, Some("bbb")).is_none());
        assert!(settling(&ds, "draft", GateStage::Run, None).is_some());
        assert!(settling(&ds, "draft", GateStage::Publish, None).is_none());
        assert!(settling(&ds, "report", GateStage::Run, None).is_none());
    }

    #[test]
    fn the_approve_command_quotes_what_a_shell_would_read() {
        assert_eq!(
            approve_command("r1", "report"),
            "ctx runs approve r1 report"
        );
        assert_eq!(
            approve_command("r1", "items[2]"),
            "ctx runs approve r1 'items[2]'"
        );
    }

    #[test]
    fn a_block_reads_and_refuses_unknown_fields() {
        let a: Approval =
            serde_json::from_str(r#"{"before": "publish", "message": "Read it"}"#).unwrap();
        assert_eq!(a.before, GateStage::Publish);
        assert_eq!(a.message.as_deref(), Some("Read it"));
        assert!(serde_json::from_str::<Approval>(r#"{"before": "later"}"#).is_err());
        assert!(serde_json::from_str::<Approval>(r#"{"before": "run", "who": 1}"#).is_err());
    }
}
