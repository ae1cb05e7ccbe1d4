//! A shared run resumed below a map (issue 23), as library sessions
//! against a real PostgreSQL (scripts/postgres.sh; `cargo xtask test`
//! starts it): what is below a map whose items came back unchanged is
//! taken as stored, not run again; a changed or failed item runs again,
//! and then everything below its map; a session that dies right after
//! reopening the run loses no result a later resume can take. Without
//! `CTX_TEST_POSTGRES_URL` each test skips with a message, and fails
//! when `CI` is set.

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use ctx_deps::{
    BoxFuture, EngineError, ExecutorOptions, InferenceEngine, InferenceRequest, InferenceResponse,
    RunReport,
};
use ctx_model::{Plan, TaskStatus};
use ctx_run::run_costs::RunPricing;
use ctx_worker::{SharedSession, SharedSettings};

/// Records every call's task id; an item echoes its prompt, and fails
/// when its id is in `fail`; any other task answers with its id.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
    fail: Mutex<HashSet<String>>,
}

impl Recorder {
    /// The calls since the last take, sorted.
    fn take_calls(&self) -> Vec<String> {
        let mut calls = std::mem::take(&mut *self.calls.lock().unwrap());
        calls.sort();
        calls
    }
}

impl InferenceEngine for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn infer<'a>(
        &'a self,
        r: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            self.calls.lock().unwrap().push(r.task_id.clone());
            if self.fail.lock().unwrap().contains(&r.task_id) {
                return Err(EngineError::new("broke"));
            }
            let output = if r.task_id.starts_with("scan[") {
                format!("seen {}", r.prompt)
            } else {
                format!("{} done", r.task_id)
            };
            Ok(InferenceResponse {
                output,
                ..InferenceResponse::default()
            })
        })
    }
}

/// `scan` maps over the variable `LIST` (its default: `list`, as JSON),
/// `report` reduces it, `final` follows `report`, and `side` stands
/// alone.
fn plan(list: &[&str], allow_failures: usize) -> Plan {
    let mut plan = ctx_test_support::plan(&[
        ("scan", &[]),
        ("report", &["scan"]),
        ("final", &["report"]),
        ("side", &[]),
    ]);
    let json = serde_json::to_string(list).unwrap();
    plan.sub_tasks[0].tool_or_prompt.params.prompt =
        "Rate <untrusted-content>{{ITEM}}</untrusted-content>.".into();
    plan.sub_tasks[0].map = Some(ctx_model::MapSpec {
        over: "LIST".into(),
        pointer: None,
        item: "ITEM".into(),
        max_items: Some(10),
        allow_failures,
        variable_value: Some(json.as_str().into()),
    });
    plan.variables = serde_json::from_value(serde_json::json!([
        {"name": "LIST", "type": "json", "class": "untrusted", "default": json}
    ]))
    .unwrap();
    plan
}

fn settings(url: &str, resume: Option<&str>) -> SharedSettings {
    SharedSettings {
        url: url.to_string(),
        resume: resume.map(str::to_string),
        rerun: Vec::new(),
        work_here: true,
        executor: ExecutorOptions::default(),
        pricing: RunPricing::default(),
        plan_source: Some("plan.json".into()),
        cache: None,
        out: None,
        inputs: None,
        publish: None,
        alert_at: Vec::new(),
        approval_wait: None,
    }
}

/// Starts (or resumes) `plan` and works on it here to the end.
fn run(
    rt: &tokio::runtime::Runtime,
    url: &str,
    engine: &Arc<Recorder>,
    plan: Plan,
    resume: Option<&str>,
) -> (String, RunReport) {
    let engine: Arc<dyn InferenceEngine> = engine.clone();
    let session = rt
        .block_on(SharedSession::start(plan, engine, settings(url, resume)))
        .unwrap();
    let id = session.run_id().to_string();
    let outcome = rt
        .block_on(session.execute_with(std::future::pending::<()>(), |_| {}))
        .unwrap();
    (id, outcome.report)
}

fn output<'r>(report: &'r RunReport, id: &str) -> &'r str {
    &report
        .results
        .iter()
        .find(|r| r.task_id == id)
        .unwrap_or_else(|| panic!("{id} in {report:#?}"))
        .output
}

fn status(report: &RunReport, id: &str) -> TaskStatus {
    report
        .results
        .iter()
        .find(|r| r.task_id == id)
        .unwrap_or_else(|| panic!("{id} in {report:#?}"))
        .status
}

/// The bug: a shared resume ran the reduce (and what follows it) again
/// even when every item came back unchanged. Now nothing calls the
/// engine: the items are taken by content hash, the map joins them, and
/// `report` and `final` take the results their resume kept, reported as
/// reused with their outputs as before.
#[test]
fn an_unchanged_shared_resume_runs_nothing_below_the_map() {
    let Some(url) = pg::fresh_db("resume_unchanged") else {
        return;
    };
    let rt = pg::runtime();
    let engine = Arc::new(Recorder::default());
    let (run_id, first) = run(&rt, &url, &engine, plan(&["a", "b", "c"], 0), None);
    assert!(first.all_completed(), "{first:#?}");
    assert_eq!(
        engine.take_calls(),
        ["final", "report", "scan[0]", "scan[1]", "scan[2]", "side"]
    );
    let (_, second) = run(&rt, &url, &engine, plan(&["a", "b", "c"], 0), Some(&run_id));
    assert!(second.all_completed(), "{second:#?}");
    assert_eq!(engine.take_calls(), Vec::<String>::new());
    for id in ["report", "final", "side", "scan[0]", "scan[1]", "scan[2]"] {
        assert!(second.reused.iter().any(|r| r == id), "{id}: {second:#?}");
        assert!(!second.order.iter().any(|r| r == id), "{id}: {second:#?}");
        assert_eq!(output(&second, id), output(&first, id), "{id}");
    }
    // A third resume reads the taken results as any stored ones.
    let (_, third) = run(&rt, &url, &engine, plan(&["a", "b", "c"], 0), Some(&run_id));
    assert!(third.all_completed(), "{third:#?}");
    assert_eq!(engine.take_calls(), Vec::<String>::new());
}

/// An item whose value changed runs again, and so do `report` (the
/// items it receives digest differently) and `final` (its dependency ran
/// again, which cleared the result its resume kept); `side` does not.
#[test]
fn a_changed_item_runs_again_and_then_everything_below_its_map() {
    let Some(url) = pg::fresh_db("resume_changed_item") else {
        return;
    };
    let rt = pg::runtime();
    let engine = Arc::new(Recorder::default());
    let (run_id, _) = run(&rt, &url, &engine, plan(&["a", "b", "c"], 0), None);
    engine.take_calls();
    let (_, second) = run(&rt, &url, &engine, plan(&["a", "x", "c"], 0), Some(&run_id));
    assert!(second.all_completed(), "{second:#?}");
    assert_eq!(engine.take_calls(), ["final", "report", "scan[1]"]);
    assert!(output(&second, "scan[1]").contains(">x<"), "{second:#?}");
}

/// A failed item (within `map.allow_failures`, so the map completed and
/// `report` received its failure note) runs again on resume; it now
/// completes, so `report` runs again, then `final`.
#[test]
fn a_failed_item_runs_again_and_then_everything_below_its_map() {
    let Some(url) = pg::fresh_db("resume_failed_item") else {
        return;
    };
    let rt = pg::runtime();
    let engine = Arc::new(Recorder::default());
    engine.fail.lock().unwrap().insert("scan[1]".into());
    let (run_id, first) = run(&rt, &url, &engine, plan(&["a", "b", "c"], 1), None);
    assert_eq!(status(&first, "scan[1]"), TaskStatus::Failed);
    assert_eq!(status(&first, "report"), TaskStatus::Completed);
    engine.take_calls();
    engine.fail.lock().unwrap().clear();
    let (_, second) = run(&rt, &url, &engine, plan(&["a", "b", "c"], 1), Some(&run_id));
    assert!(second.all_completed(), "{second:#?}");
    assert_eq!(engine.take_calls(), ["final", "report", "scan[1]"]);
}

/// A session that dies right after reopening the run has set `report`
/// and `final` pending, their results kept aside: the next resume reads
/// those as their latest results, so it still runs nothing.
#[test]
fn a_session_that_dies_after_reopening_loses_no_kept_result() {
    let Some(url) = pg::fresh_db("resume_dies_after_reopen") else {
        return;
    };
    let rt = pg::runtime();
    let engine = Arc::new(Recorder::default());
    let (run_id, _) = run(&rt, &url, &engine, plan(&["a", "b"], 0), None);
    engine.take_calls();
    let dyn_engine: Arc<dyn InferenceEngine> = engine.clone();
    let reopened = rt
        .block_on(SharedSession::start(
            plan(&["a", "b"], 0),
            dyn_engine,
            settings(&url, Some(&run_id)),
        ))
        .unwrap();
    let reasons: Vec<String> = reopened
        .resumed()
        .unwrap()
        .rerun
        .iter()
        .map(|(id, why)| format!("{id}: {why}"))
        .collect();
    assert_eq!(
        reasons,
        [
            "scan: prompt changed",
            "report: upstream scan re-runs",
            "final: upstream report re-runs"
        ]
    );
    // Dies here: nothing is worked on.
    drop(reopened);
    let (_, third) = run(&rt, &url, &engine, plan(&["a", "b"], 0), Some(&run_id));
    assert!(third.all_completed(), "{third:#?}");
    assert_eq!(engine.take_calls(), Vec::<String>::new());
    assert!(third.reused.iter().any(|r| r == "report"), "{third:#?}");
    assert_eq!(output(&third, "final"), "final done");
}

/// A result a resume kept aside survives a later resume that drops its
/// task: when a plan after that brings the task back unchanged, it is
/// reused, not run again. (The bug: the dropped task's row was pending
/// with no result of its own, so its kept result was deleted with it.)
#[test]
fn a_kept_result_survives_a_resume_that_drops_its_task() {
    let Some(url) = pg::fresh_db("resume_kept_then_dropped") else {
        return;
    };
    let rt = pg::runtime();
    let engine = Arc::new(Recorder::default());
    let (run_id, _) = run(&rt, &url, &engine, plan(&["a", "b"], 0), None);
    engine.take_calls();
    // A resume keeps `report` and `final` aside, then dies.
    let dyn_engine: Arc<dyn InferenceEngine> = engine.clone();
    let reopened = rt
        .block_on(SharedSession::start(
            plan(&["a", "b"], 0),
            dyn_engine,
            settings(&url, Some(&run_id)),
        ))
        .unwrap();
    drop(reopened);
    // The next drops `final` and runs to the end.
    let mut without_final = plan(&["a", "b"], 0);
    without_final.sub_tasks.retain(|t| t.id != "final");
    let (_, second) = run(&rt, &url, &engine, without_final, Some(&run_id));
    assert!(second.all_completed(), "{second:#?}");
    assert_eq!(engine.take_calls(), Vec::<String>::new());
    // The one after brings `final` back unchanged: it is reused.
    let (_, third) = run(&rt, &url, &engine, plan(&["a", "b"], 0), Some(&run_id));
    assert!(third.all_completed(), "{third:#?}");
    assert_eq!(engine.take_calls(), Vec::<String>::new());
    assert_eq!(output(&third, "final"), "final done");
}
