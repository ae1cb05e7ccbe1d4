//! Crash safety of `ctx run`, end to end: a generated plan of 30 tasks, the
//! `command` engine running a script that appends its task id to a counts
//! file and sleeps a little; the real `ctx` binary is SIGKILLed after a
//! given number of engine invocations, then resumed. Every task must end
//! completed; no task the store held as completed at the kill may run
//! again; `PRAGMA integrity_check` must be `ok`, after the kill and after
//! the resume. Repeated at several kill points.

#![cfg(unix)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ctx_model::TaskStatus;
use ctx_store_sqlite::RunView;
use ctx_test_support::counts_in;
use serde_json::Value;

const TASKS: usize = 30;

/// 30 tasks in layers: t00..t05 are roots, every later task depends on one
/// or two earlier ones, so the run has fan-in and several levels.
fn plan_json() -> String {
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let deps: Vec<String> = if i < 6 {
            Vec::new()
        } else if i % 3 == 0 {
            vec![format!("t{:02}", i - 6), format!("t{:02}", i - 5)]
        } else {
            vec![format!("t{:02}", i - 6)]
        };
        tasks.push(serde_json::json!({
            "id": format!("t{i:02}"),
            "description": format!("task {i}"),
            "dependencies": deps,
            "tool_or_prompt": {"name": "inference", "params": {"prompt": format!("prompt {i}")}},
        }));
    }
    serde_json::json!({"schema_version": 1, "goal": "crash test", "sub_tasks": tasks}).to_string()
}

fn ctx(dir: &Path, command: &str) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("ctx"));
    c.current_dir(dir)
        .args(["run", "plan.json", "--concurrency", "3", "--format", "json"])
        .args(["--tokenizer", "estimate", "--command", command]);
    c
}

/// SIGKILLs `child` once its engine was invoked `n` times (counted in
/// `dir`), and lets the orphaned scripts of in-flight tasks finish.
fn kill_after_invocations(child: &mut std::process::Child, dir: &Path, n: usize) {
    let start = Instant::now();
    loop {
        let invoked: usize = counts_in(dir).values().sum();
        if invoked >= n {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("ctx ended ({status}) before {n} invocations");
        }
        assert!(start.elapsed() < Duration::from_secs(20), "too slow");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
}

/// One kill-and-resume cycle; returns (tasks completed at the kill,
/// invocations before the kill, invocations of the resume).
fn kill_and_resume(kill_after: usize) -> (usize, usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("plan.json"), plan_json()).unwrap();
    // Count first (an orphaned script of an in-flight task may still be
    // sleeping after the kill; it is counted already), then sleep, then
    // echo the prompt.
    let command = format!(
        r#"echo "$CTX_TASK_ID" >> '{}/counts'; sleep 0.08; cat"#,
        dir.display()
    );
    let mut child = ctx(dir, &command)
        .args(["--run-dir", "run"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_after_invocations(&mut child, dir, kill_after);
    let before = counts_in(dir);

    let run_dir = dir.join("run");
    let completed = completed_after_kill(&run_dir);
    // Every task stored completed did run, exactly once.
    for id in &completed {
        assert_eq!(before.get(id), Some(&1), "{id} at kill {kill_after}");
    }
    // The run is seen as crashed, not running.
    let listed = Command::new(assert_cmd::cargo::cargo_bin("ctx"))
        .current_dir(dir)
        .args(["runs", "show", "run", "--format", "json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(shown["state"], "crashed", "{shown}");

    let out = ctx(dir, &command)
        .args(["--resume", "run"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "resume after kill at {kill_after}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), TASKS);
    assert!(tasks.iter().all(|t| t["status"] == "completed"), "{json}");
    let after = counts_in(dir);
    for (i, t) in tasks.iter().enumerate() {
        let id = format!("t{i:02}");
        assert_eq!(t["task_id"], id.as_str());
        let n = after.get(&id).copied().unwrap_or(0);
        assert!(n >= 1, "{id} never ran");
        if completed.contains(&id) {
            assert_eq!(
                n, 1,
                "{id} was completed before the kill at {kill_after} and ran again"
            );
        }
        // Each task's output is its own prompt (cat): the stored results
        // are the ones of real executions, upstream outputs included.
        assert_eq!(t["output"], t["prompt"]);
    }
    let view = RunView::open(&run_dir).unwrap();
    assert_eq!(view.integrity_check().unwrap(), "ok");
    assert_eq!(view.status_counts().unwrap().completed, TASKS);
    let invoked_before: usize = before.values().sum();
    let invoked_after: usize = after.values().sum::<usize>() - invoked_before;
    (completed.len(), invoked_before, invoked_after)
}

#[test]
fn sigkill_mid_run_then_resume_loses_nothing_and_repeats_nothing() {
    let mut figures = Vec::new();
    for kill_after in [1, 8, 16, 25] {
        let (completed, before, resumed) = kill_and_resume(kill_after);
        eprintln!(
            "kill after {kill_after} invocations: {completed} tasks completed and reused, \
             {before} invocations before the kill, {resumed} on resume"
        );
        figures.push((kill_after, completed, before, resumed));
        // The resume executed exactly the tasks not completed at the kill.
        assert_eq!(resumed, TASKS - completed, "{figures:?}");
    }
    // Later kills found more completed work (the test killed mid-run, not
    // at the start every time).
    assert!(figures.last().unwrap().1 > 0, "{figures:?}");
}

/// A map of 12 items over a variable, and its reduce.
const MAP_PLAN: &str = r#"schema_version: 1
variables:
  - {name: LIST, type: json}
sub_tasks:
  - id: scan
    description: One item
    map: {over: LIST, as: ITEM, max_items: 12}
    tool_or_prompt:
      name: inference
      params: {prompt: "Item <untrusted-content>{{ITEM}}</untrusted-content>"}
  - id: report
    description: The report
    dependencies: [scan]
    tool_or_prompt: {name: inference, params: {prompt: "Sum up."}}
"#;

#[test]
fn sigkill_mid_map_then_resume_keeps_every_completed_item() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("plan.yaml"), MAP_PLAN).unwrap();
    let list: Vec<String> = (0..12).map(|i| format!("item {i}")).collect();
    let var = format!("LIST={}", serde_json::json!(list));
    let command = format!(
        r#"echo "$CTX_TASK_ID" >> '{}/counts'; sleep 0.08; cat"#,
        dir.display()
    );
    let ctx = || {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("ctx"));
        c.current_dir(dir)
            .args(["run", "plan.yaml", "--concurrency", "3", "--format", "json"])
            .args([
                "--tokenizer",
                "estimate",
                "--command",
                &command,
                "--var",
                &var,
            ]);
        c
    };
    let mut child = ctx()
        .args(["--run-dir", "run"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_after_invocations(&mut child, dir, 6);
    let before = counts_in(dir);
    let completed = completed_after_kill(&dir.join("run"));
    assert!(!completed.is_empty(), "killed before any item completed");
    assert!(!completed.contains("report"), "killed after the map");

    let out = ctx().args(["--resume", "run"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 14, "the map, 12 items, the report");
    assert!(tasks.iter().all(|t| t["status"] == "completed"), "{json}");
    let after = counts_in(dir);
    for i in 0..12 {
        let id = format!("scan[{i}]");
        let n = after.get(&id).copied().unwrap_or(0);
        assert!(n >= 1, "{id} never ran");
        if completed.contains(&id) {
            assert_eq!(n, 1, "{id} completed before the kill and ran again");
        }
    }
    assert_eq!(after.get("report"), Some(&1));
    eprintln!(
        "kill after {} invocations: {} items completed and kept",
        before.values().sum::<usize>(),
        completed.len()
    );
}

/// The ids a killed run stored as completed, once its database passed
/// SQLite's integrity check (the view is closed before the resume).
fn completed_after_kill(run_dir: &Path) -> BTreeSet<String> {
    let view = RunView::open(run_dir).unwrap();
    assert_eq!(
        view.integrity_check().unwrap(),
        "ok",
        "{}",
        run_dir.display()
    );
    view.results()
        .unwrap()
        .into_iter()
        .filter(|r| r.result.status == TaskStatus::Completed)
        .map(|r| r.result.task_id)
        .collect()
}
