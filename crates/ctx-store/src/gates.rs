//! Which decisions a run's approval gate takes (docs/runs.md, "Approval
//! gates"): one rule for every store, so that `ctx runs approve` refuses
//! the same things on a run directory and on a shared database.
//!
//! A store calls [`check_decision`] with what it read inside the
//! transaction that will insert the decision; its unique index on
//! (task, stage, output) is what makes one of two decisions at once win:
//! the other finds the gate settled, or fails the insert and is told so
//! ([`DecisionRefused::AlreadySettled`]).

use ctx_model::approval::{Decision, GateStage, Verdict, gate, settling};
use ctx_model::digest::sha256_hex;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};

/// A decision someone asks to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRequest {
    /// The gated task.
    pub task_id: String,
    /// Approve or reject.
    pub verdict: Verdict,
    /// Who decides.
    pub by: String,
    /// Why (required to reject).
    pub note: Option<String>,
}

/// A decision that was not recorded, and why. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionRefused {
    /// The run's plan has no such task.
    #[error("run {run}: no task `{task}` in its plan")]
    UnknownTask {
        /// The run.
        run: String,
        /// The id asked for.
        task: String,
    },
    /// The task has no `approval` block (a map's items never do: the map
    /// task's gate holds them).
    #[error("run {run}: task `{task}` has no approval gate{hint}")]
    NoGate {
        /// The run.
        run: String,
        /// The task.
        task: String,
        /// Where the gate is instead, when there is one.
        hint: String,
    },
    /// The gate does not wait for a decision now: a `before: run` task
    /// that already ran, a `before: publish` task with no completed
    /// output yet.
    #[error("run {run}: task `{task}` is not waiting for approval (before: {stage}): {why}")]
    NotWaiting {
        /// The run.
        run: String,
        /// The task.
        task: String,
        /// Its gate.
        stage: GateStage,
        /// What it is doing instead.
        why: String,
    },
    /// Another decision settled the gate first.
    #[error(
        "run {run}: task `{task}` (before: {stage}) is already settled: {verdict} by {by} at {at}"
    )]
    AlreadySettled {
        /// The run.
        run: String,
        /// The task.
        task: String,
        /// Its gate.
        stage: GateStage,
        /// The decision that settled it.
        verdict: Verdict,
        /// Who made it.
        by: String,
        /// When.
        at: String,
    },
    /// A rejection without a note.
    #[error("run {run}: rejecting task `{task}` needs a note (--note TEXT): say why")]
    NoteRequired {
        /// The run.
        run: String,
        /// The task.
        task: String,
    },
}

impl DecisionRefused {
    /// The refusal of a decision that lost to `winner`.
    pub fn settled(run: &str, winner: &Decision) -> DecisionRefused {
        DecisionRefused::AlreadySettled {
            run: run.to_string(),
            task: winner.task_id.clone(),
            stage: winner.stage,
            verdict: winner.verdict,
            by: winner.by.clone(),
            at: winner.at.clone(),
        }
    }
}

/// The decision to record for `req` on run `run` whose plan is `plan`,
/// given the task's latest result and the run's decisions so far; `at`
/// is the time to record. Refuses a task that is unknown, has no gate,
/// does not wait now, or is settled, and a rejection without a note.
pub fn check_decision(
    run: &str,
    plan: &Plan,
    latest: Option<&TaskExecutionResult>,
    decisions: &[Decision],
    req: &DecisionRequest,
    at: String,
) -> Result<Decision, DecisionRefused> {
    let task = req.task_id.as_str();
    let approval = gate_of(run, plan, task)?;
    if req.verdict == Verdict::Reject && req.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        return Err(DecisionRefused::NoteRequired {
            run: run.into(),
            task: task.into(),
        });
    }
    let stage = approval.before;
    let not_waiting = |why: String| DecisionRefused::NotWaiting {
        run: run.into(),
        task: task.into(),
        stage,
        why,
    };
    let output_sha256 = match (stage, latest.map(|r| r.status)) {
        (GateStage::Run, Some(s @ (TaskStatus::Completed | TaskStatus::Failed))) => {
            return Err(not_waiting(format!("it already ran ({s})")));
        }
        (GateStage::Run, Some(TaskStatus::InProgress)) => {
            return Err(not_waiting("it is running".into()));
        }
        (GateStage::Run, _) => None,
        (GateStage::Publish, Some(TaskStatus::Completed)) => {
            latest.map(|r| sha256_hex(r.output.as_bytes()))
        }
        (GateStage::Publish, status) => {
            let now = status.map_or("it has not run", |s| match s {
                TaskStatus::Failed => "it failed",
                TaskStatus::Skipped => "it was skipped",
                _ => "it has not completed",
            });
            return Err(not_waiting(format!(
                "{now}, so it has no output to approve"
            )));
        }
    };
    if let Some(winner) = settling(decisions, task, stage, output_sha256.as_deref()) {
        return Err(DecisionRefused::settled(run, winner));
    }
    Ok(Decision {
        task_id: task.into(),
        stage,
        verdict: req.verdict,
        by: req.by.clone(),
        at,
        note: req.note.clone().filter(|n| !n.trim().is_empty()),
        output_sha256,
    })
}

/// `task`'s gate in `plan`, or why there is none.
fn gate_of<'p>(
    run: &str,
    plan: &'p Plan,
    task: &str,
) -> Result<&'p ctx_model::approval::Approval, DecisionRefused> {
    let no_gate = |hint: String| DecisionRefused::NoGate {
        run: run.into(),
        task: task.into(),
        hint,
    };
    match plan.sub_tasks.iter().find(|t| t.id == task) {
        Some(t) => gate(t).ok_or_else(|| no_gate(String::new())),
        None => match ctx_model::map::parse_item_id(task) {
            Some((map, _)) if plan.sub_tasks.iter().any(|t| t.id == map) => Err(no_gate(format!(
                " (a map's items have none: decide on the map task `{map}`)"
            ))),
            _ => Err(DecisionRefused::UnknownTask {
                run: run.into(),
                task: task.into(),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::approval::Approval;

    fn plan() -> Plan {
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [
                {"id": "draft", "description": "d",
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}},
                {"id": "report", "description": "r", "dependencies": ["draft"],
                 "publish": "r.md",
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}},
                {"id": "plain", "description": "p",
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}}
            ]
        }))
        .unwrap();
        plan.sub_tasks[0].approval = Some(Approval {
            before: GateStage::Run,
            message: None,
        });
        plan.sub_tasks[1].approval = Some(Approval {
            before: GateStage::Publish,
            message: None,
        });
        plan
    }

    fn req(task: &str, verdict: Verdict, note: Option<&str>) -> DecisionRequest {
        DecisionRequest {
            task_id: task.into(),
            verdict,
            by: "ana".into(),
            note: note.map(str::to_string),
        }
    }

    fn done(id: &str, output: &str) -> TaskExecutionResult {
        let mut r = TaskExecutionResult::new(id, TaskStatus::Completed);
        r.output = output.into();
        r
    }

    fn check(
        task: &str,
        latest: Option<&TaskExecutionResult>,
        ds: &[Decision],
        verdict: Verdict,
        note: Option<&str>,
    ) -> Result<Decision, DecisionRefused> {
        check_decision(
            "r1",
            &plan(),
            latest,
            ds,
            &req(task, verdict, note),
            "t".into(),
        )
    }

    #[test]
    fn a_run_gate_takes_a_decision_before_the_run_reaches_it_and_only_one() {
        let d = check("draft", None, &[], Verdict::Approve, None).unwrap();
        assert_eq!(
            (d.stage, d.output_sha256.as_deref()),
            (GateStage::Run, None)
        );
        let again = check("draft", None, &[d], Verdict::Reject, Some("no"));
        assert!(matches!(
            again,
            Err(DecisionRefused::AlreadySettled {
                verdict: Verdict::Approve,
                ..
            })
        ));
        let ran = check(
            "draft",
            Some(&done("draft", "x")),
            &[],
            Verdict::Approve,
            None,
        );
        assert!(matches!(ran, Err(DecisionRefused::NotWaiting { .. })));
    }

    #[test]
    fn a_publish_approval_names_the_output_and_a_new_output_waits_again() {
        assert!(matches!(
            check("report", None, &[], Verdict::Approve, None),
            Err(DecisionRefused::NotWaiting { .. })
        ));
        let first = done("report", "one");
        let d = check("report", Some(&first), &[], Verdict::Approve, None).unwrap();
        assert_eq!(d.output_sha256, Some(sha256_hex(b"one")));
        let settled = check(
            "report",
            Some(&first),
            std::slice::from_ref(&d),
            Verdict::Approve,
            None,
        );
        assert!(matches!(
            settled,
            Err(DecisionRefused::AlreadySettled { .. })
        ));
        let second = done("report", "two");
        assert!(check("report", Some(&second), &[d], Verdict::Approve, None).is_ok());
    }

    #[test]
    fn unknown_tasks_tasks_without_a_gate_items_and_bare_rejections_are_refused() {
        assert!(matches!(
            check("nope", None, &[], Verdict::Approve, None),
            Err(DecisionRefused::UnknownTask { .. })
        ));
        assert!(matches!(
            check("plain", None, &[], Verdict::Approve, None),
            Err(DecisionRefused::NoGate { .. })
        ));
        let item = check("draft[0]", None, &[], Verdict::Approve, None).unwrap_err();
        assert!(
            item.to_string().contains("decide on the map task `draft`"),
            "{item}"
        );
        assert!(matches!(
            check("draft", None, &[], Verdict::Reject, Some("  ")),
            Err(DecisionRefused::NoteRequired { .. })
        ));
    }
}
