//! `before: run` gates in the executor: held, approved before the run
//! reached them, rejected, waited for, ignored (`ctx eval`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctx_model::approval::{Approval, Decision, GateStage, Verdict};
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::{ExecutionStore, MemoryStore, StoreError};
use ctx_test_support::plan;

use super::*;
use crate::gates::ApprovalWait;

/// A memory store that keeps decisions too.
#[derive(Default)]
struct GateStore {
    results: MemoryStore,
    decisions: Mutex<Vec<Decision>>,
}

impl GateStore {
    fn decide(&self, task: &str, verdict: Verdict, note: Option<&str>) {
        self.decisions.lock().unwrap().push(Decision {
            task_id: task.into(),
            stage: GateStage::Run,
            verdict,
            by: "ana".into(),
            at: "2026-12-06T05:00:00Z".into(),
            note: note.map(str::to_string),
            output_sha256: None,
        });
    }
}

impl ExecutionStore for GateStore {
    fn get_by_task_id(&self, id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        self.results.get_by_task_id(id)
    }
    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
        self.results.store(result)
    }
    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        self.results.all_results()
    }
    fn decisions(&self) -> Result<Vec<Decision>, StoreError> {
        Ok(self.decisions.lock().unwrap().clone())
    }
}

/// `a -> b (gated) -> c`, and `d` on its own.
fn gated_plan() -> Plan {
    let mut p = plan(&[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("d", &[])]);
    p.sub_tasks[1].approval = Some(Approval {
        before: GateStage::Run,
        message: Some("Read a first".into()),
    });
    p
}

async fn run(p: Plan, store: &Arc<GateStore>, opts: ExecutorOptions) -> (RunReport, Vec<String>) {
    let exec = Executor::new(p, Arc::new(ctx_engine::DryRunEngine), store.clone(), opts).unwrap();
    let mut held = Vec::new();
    let report = exec
        .run_with(std::future::pending(), |e| {
            if let ProgressEvent::AwaitingApproval { task_id, .. } = e {
                held.push(task_id.clone());
            }
        })
        .await
        .unwrap();
    (report, held)
}

fn status(report: &RunReport, id: &str) -> (TaskStatus, String) {
    let r = report.results.iter().find(|r| r.task_id == id).unwrap();
    (r.status, r.error.clone().unwrap_or_default())
}

#[tokio::test]
async fn an_undecided_gate_holds_its_branch_and_the_others_go_on() {
    let store = Arc::new(GateStore::default());
    let (report, held) = run(gated_plan(), &store, ExecutorOptions::default()).await;
    assert_eq!(report.awaiting, ["b"]);
    assert_eq!(held, ["b"]);
    assert_eq!(status(&report, "a").0, TaskStatus::Completed);
    assert_eq!(status(&report, "d").0, TaskStatus::Completed);
    assert_eq!(
        status(&report, "b"),
        (
            TaskStatus::Pending,
            "awaiting approval (before: run): Read a first".into()
        )
    );
    assert_eq!(
        status(&report, "c"),
        (
            TaskStatus::Pending,
            "waiting: dependency `b` awaits approval".into()
        )
    );
    let stored = store.get_by_task_id("c").unwrap().unwrap();
    assert_eq!(stored.status, TaskStatus::Pending);
    assert!(!report.order.contains(&"b".to_string()));
}

#[tokio::test]
async fn a_decision_recorded_before_the_run_reaches_the_gate_counts() {
    let store = Arc::new(GateStore::default());
    store.decide("b", Verdict::Approve, None);
    let (report, held) = run(gated_plan(), &store, ExecutorOptions::default()).await;
    assert!(report.all_completed(), "{:?}", report.results);
    assert!(report.awaiting.is_empty() && held.is_empty());
}

#[tokio::test]
async fn a_rejected_gate_fails_with_its_note_and_skips_below() {
    let store = Arc::new(GateStore::default());
    store.decide("b", Verdict::Reject, Some("sources are stale"));
    let (report, _) = run(gated_plan(), &store, ExecutorOptions::default()).await;
    let (s, e) = status(&report, "b");
    assert_eq!(s, TaskStatus::Failed);
    assert!(
        e.ends_with("sources are stale") && e.starts_with("rejected by ana"),
        "{e}"
    );
    assert_eq!(status(&report, "c").0, TaskStatus::Skipped);
    assert!(report.awaiting.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_waiting_run_takes_a_decision_as_soon_as_it_is_stored() {
    let store = Arc::new(GateStore::default());
    let later = store.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        later.decide("b", Verdict::Approve, None);
    });
    let opts = ExecutorOptions {
        approval_wait: Some(ApprovalWait::polling(
            Duration::from_secs(60),
            Duration::from_millis(500),
        )),
        ..ExecutorOptions::default()
    };
    let t0 = tokio::time::Instant::now();
    let (report, held) = run(gated_plan(), &store, opts).await;
    assert!(report.all_completed(), "{:?}", report.results);
    assert_eq!(held, ["b"], "held once, reported once");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_ends_at_its_deadline_with_the_gate_still_waiting() {
    let store = Arc::new(GateStore::default());
    let opts = ExecutorOptions {
        approval_wait: Some(ApprovalWait::polling(
            Duration::from_secs(5),
            Duration::from_millis(500),
        )),
        ..ExecutorOptions::default()
    };
    let t0 = tokio::time::Instant::now();
    let (report, _) = run(gated_plan(), &store, opts).await;
    assert_eq!(report.awaiting, ["b"]);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
        "{waited:?}"
    );
}

#[tokio::test]
async fn ignored_gates_run_as_approved() {
    let store = Arc::new(GateStore::default());
    let opts = ExecutorOptions {
        ignore_gates: true,
        ..ExecutorOptions::default()
    };
    let (report, held) = run(gated_plan(), &store, opts).await;
    assert!(report.all_completed() && held.is_empty());
}

#[tokio::test]
async fn a_gated_map_task_holds_the_whole_map() {
    let mut p = plan(&[("m", &[])]);
    p.sub_tasks[0].map = Some(ctx_model::map::MapSpec {
        over: "ITEMS".into(),
        pointer: None,
        item: "ITEM".into(),
        max_items: Some(5),
        allow_failures: 0,
        variable_value: Some(Arc::from("[1, 2]")),
    });
    p.sub_tasks[0].approval = Some(Approval {
        before: GateStage::Run,
        message: None,
    });
    let store = Arc::new(GateStore::default());
    let (report, _) = run(p.clone(), &store, ExecutorOptions::default()).await;
    assert_eq!(report.awaiting, ["m"]);
    assert_eq!(
        report.results.len(),
        1,
        "no item was made: {:?}",
        report.results
    );
    store.decide("m", Verdict::Approve, None);
    let (report, _) = run(p, &store, ExecutorOptions::default()).await;
    assert!(report.all_completed());
    assert_eq!(report.results.len(), 3, "{:?}", report.results);
}
