//! `ctx runs`: stores are made through the ctx-store-sqlite library, then
//! inspected through the CLI.

use std::path::Path;

use ctx_deps::ExecutionStore;
use ctx_model::{Attempt, Plan, TaskExecutionResult, TaskStatus};
use ctx_store_sqlite::{NewRun, RunRoot, STORE_FILE, SessionEnd, SqliteStore};
use ctx_test_support::ctx_in as ctx;
use predicates::prelude::*;
use serde_json::Value;

#[path = "support/export.rs"]
mod export;

const PLAN: &str = r#"{"schema_version": 1, "goal": "demo", "sub_tasks": [
 {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pa"}}},
 {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pb"}}},
 {"id": "c", "description": "C", "dependencies": ["b"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pc"}}}]}"#;

fn plan() -> Plan {
    serde_json::from_str(PLAN).unwrap()
}

fn result(id: &str, status: TaskStatus, output: &str) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(id, status);
    r.output = output.into();
    r.prompt = Some(format!("the prompt of {id}"));
    r.metadata.prompt_tokens = Some(5);
    r.metadata.execution_time_ms = Some(40);
    r
}

/// A finished run under `root`: a completed, b failed (after a retry), c
/// skipped. Returns its id.
fn failed_run(root: &RunRoot) -> String {
    let p = plan();
    let store = root
        .create(&NewRun {
            plan: &p,
            engine: "command",
            plan_source: Some("plan.json"),
            inputs: None,
        })
        .unwrap();
    store
        .store(TaskExecutionResult::new("a", TaskStatus::InProgress))
        .unwrap();
    store
        .store(result("a", TaskStatus::Completed, "output of a"))
        .unwrap();
    store
        .store(TaskExecutionResult::new("b", TaskStatus::InProgress))
        .unwrap();
    let mut b = result("b", TaskStatus::Failed, "");
    b.error = Some("exit 1: model not found\nsecond line".into());
    b.metadata.attempts = vec![
        Attempt {
            number: 1,
            duration_ms: 10,
            outcome: "exit_1".into(),
            error: Some("model not found".into()),
            backoff_ms: Some(100),
            ..Attempt::default()
        },
        Attempt {
            number: 2,
            duration_ms: 11,
            outcome: "exit_1".into(),
            error: Some("model not found".into()),
            backoff_ms: None,
            ..Attempt::default()
        },
    ];
    store.store(b).unwrap();
    let mut c = TaskExecutionResult::new("c", TaskStatus::Skipped);
    c.error = Some("dependency b failed".into());
    store.store(c).unwrap();
    store.finish(SessionEnd::Finished).unwrap();
    store.run_id().to_string()
}

#[test]
fn list_shows_runs_with_state_and_counts() {
    let tmp = tempfile::tempdir().unwrap();
    ctx(tmp.path())
        .args(["runs", "list"])
        .assert()
        .success()
        .stdout("no runs under .ctx/runs\n");

    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    let id = failed_run(&root);
    let out = ctx(tmp.path())
        .args(["runs", "list"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("RUN "), "{text}");
    assert!(lines[1].starts_with(&id), "{text}");
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(cells[1], "failed");
    assert_eq!(
        &cells[3..],
        ["3", "1", "1", "1", "0", "plan.json"],
        "{text}"
    );

    // --root and JSON.
    let out = ctx(Path::new("/"))
        .args(["runs", "list", "--format", "json", "--root"])
        .arg(root.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v[0]["id"], id.as_str());
    assert_eq!(v[0]["counts"]["completed"], 1);
    assert_eq!(v[0]["counts"]["skipped"], 1);
    assert_eq!(v[0]["state"], "failed");
}

#[test]
fn show_prints_the_status_table_or_one_task() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    let id = failed_run(&root);
    ctx(tmp.path())
        .args(["runs", "show", &id])
        .assert()
        .success()
        .stdout(
            predicate::str::contains(format!("run      {id}"))
                .and(predicate::str::contains("state    failed"))
                .and(predicate::str::contains("#1 run"))
                .and(predicate::str::contains("engine command"))
                .and(predicate::str::is_match(r"(?m)^a\s+completed\s+5\s+40 ms\s*$").unwrap())
                .and(
                    predicate::str::is_match(
                        r"(?m)^b\s+failed\s+5\s+40 ms\s+exit 1: model not found$",
                    )
                    .unwrap(),
                )
                .and(
                    predicate::str::is_match(r"(?m)^c\s+skipped\s+-\s+-\s+dependency b failed$")
                        .unwrap(),
                ),
        );
    // RUN as a directory works too.
    let dir = root.resolve(&id).unwrap();
    ctx(Path::new("/"))
        .args(["runs", "show", dir.to_str().unwrap(), "--task", "b"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("status   failed")
                .and(predicate::str::contains(
                    "## Error\n\nexit 1: model not found\nsecond line",
                ))
                .and(predicate::str::contains("## Prompt\n\nthe prompt of b"))
                .and(predicate::str::contains("## History"))
                .and(predicate::str::is_match(r"(?m)^\s*\d+\s+1\s+\S+\s+in_progress\s*$").unwrap())
                .and(predicate::str::contains("## Engine attempts"))
                .and(
                    predicate::str::is_match(
                        r"(?m)^1\s+exit_1\s+10 ms\s+100 ms\s+model not found$",
                    )
                    .unwrap(),
                ),
        );
    let out = ctx(tmp.path())
        .args(["runs", "show", &id, "--task", "a", "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["result"]["output"], "output of a");
    assert_eq!(v["history"].as_array().unwrap().len(), 2);
    assert_eq!(v["prompt_hash"].as_str().unwrap().len(), 64);

    ctx(tmp.path())
        .args(["runs", "show", &id, "--task", "zz"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("run {id}: no task `zz`")));
}

/// `ctx runs export` prints exactly what `ctx run --format json` printed
/// for the same results, plus each task's `started_at` and `ended_at`
/// after its other keys.
#[test]
fn export_matches_ctx_run_json() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("plan.json"), PLAN).unwrap();
    let out = ctx(tmp.path())
        .args(["run", "plan.json", "--format", "json", "--concurrency", "1"])
        .assert()
        .get_output()
        .stdout
        .clone();
    let from_run: Value = serde_json::from_slice(&out).unwrap();
    let run_out = out;

    // Replay those results into a store, in start order.
    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    let p = plan();
    let store = root
        .create(&NewRun {
            plan: &p,
            engine: "dry-run",
            plan_source: None,
            inputs: None,
        })
        .unwrap();
    for t in from_run["tasks"].as_array().unwrap() {
        let r: TaskExecutionResult = serde_json::from_value(t.clone()).unwrap();
        store
            .store(TaskExecutionResult::new(&r.task_id, TaskStatus::InProgress))
            .unwrap();
        store.store(r).unwrap();
    }
    let id = store.run_id().to_string();
    drop(store);
    let out = ctx(tmp.path())
        .args(["runs", "export", &id, "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let exported: Value = serde_json::from_slice(&out).unwrap();
    for t in exported["tasks"].as_array().unwrap() {
        let (start, end) = (
            t["started_at"].as_str().unwrap(),
            t["ended_at"].as_str().unwrap(),
        );
        assert!(start <= end, "{start} > {end}");
        // A dry run spends nothing, and says so.
        assert_eq!(t["cost_usd"], 0.0);
    }
    // Byte for byte, key order included, once the added keys (the last
    // two of each task) are cut out of the text.
    assert_eq!(
        export::without_task_times(&String::from_utf8(out).unwrap()),
        String::from_utf8(run_out).unwrap()
    );
}

#[test]
fn export_of_an_unfinished_run_lists_every_plan_task() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let p = plan();
    let store = SqliteStore::create_in(
        &tmp.path().join("r"),
        &NewRun {
            plan: &p,
            engine: "dry-run",
            plan_source: None,
            inputs: None,
        },
    )
    .unwrap();
    store
        .store(result("a", TaskStatus::Completed, "A"))
        .unwrap();
    store
        .store(TaskExecutionResult::new("b", TaskStatus::InProgress))
        .unwrap();
    drop(store);
    let out = ctx(tmp.path())
        .args(["runs", "export", "r", "--root"])
        .arg(root.path().join("elsewhere"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["order"], serde_json::json!(["a", "b"]));
    let statuses: Vec<&str> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "in_progress", "pending"]);
    ctx(tmp.path())
        .args(["runs", "show", "r"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("state    crashed")
                .and(predicate::str::contains("no end recorded")),
        );
}

#[test]
fn gc_keeps_the_newest_and_never_a_running_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    let old: Vec<String> = (0..3)
        .map(|_| {
            let id = failed_run(&root);
            std::thread::sleep(std::time::Duration::from_millis(2));
            id
        })
        .collect();
    let p = plan();
    let running = root
        .create(&NewRun {
            plan: &p,
            engine: "dry-run",
            plan_source: None,
            inputs: None,
        })
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let newest = failed_run(&root);

    ctx(tmp.path())
        .args(["runs", "gc", "--keep", "1"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains(format!("removed {}", old[0]))
                .and(predicate::str::contains(format!(
                    "kept {} (running)",
                    running.run_id()
                )))
                .and(predicate::str::contains("3 removed, 2 kept (1 running)")),
        );
    assert!(root.resolve(&newest).is_ok());
    assert!(running.dir().is_dir());
    for id in &old {
        assert!(root.resolve(id).is_err());
    }
    ctx(tmp.path()).args(["runs", "gc"]).assert().code(2);
}

#[test]
fn bad_stores_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    ctx(tmp.path())
        .args(["runs", "show", "20261130T000000.000Z-deadbeef"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "run `20261130T000000.000Z-deadbeef` not found",
        ));

    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    let good = failed_run(&root);
    let bad = root.path().join("20261130T000000.000Z-0badf11e");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join(STORE_FILE),
        "plain text, not a database\n".repeat(20),
    )
    .unwrap();
    ctx(tmp.path())
        .args(["runs", "export", bad.to_str().unwrap()])
        .assert()
        .code(4)
        .stderr(predicate::str::contains(
            "0badf11e/store.sqlite: not a SQLite database, or corrupt",
        ));
    // list still shows the readable runs, warns about the other, exits 4.
    ctx(tmp.path())
        .args(["runs", "list"])
        .assert()
        .code(4)
        .stdout(predicate::str::contains(&good))
        .stderr(predicate::str::contains("warning:").and(predicate::str::contains("0badf11e")));
    assert_eq!(
        std::fs::read_to_string(bad.join(STORE_FILE)).unwrap(),
        "plain text, not a database\n".repeat(20)
    );
}

#[test]
fn gc_keeps_a_run_it_cannot_read_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    // The oldest run's store is damaged: gc used to delete it unread.
    let bad = root.path().join("20200101T000000.000Z-0badf11e");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join(STORE_FILE),
        "plain text, not a database\n".repeat(20),
    )
    .unwrap();
    let old = failed_run(&root);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let newest = failed_run(&root);
    ctx(tmp.path())
        .args(["runs", "gc", "--keep", "1"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains(format!("removed {old}"))
                .and(predicate::str::contains(
                    "kept 20200101T000000.000Z-0badf11e (unreadable, --force removes it): ",
                ))
                .and(predicate::str::contains("1 removed, 2 kept (1 unreadable)")),
        );
    assert!(bad.join(STORE_FILE).is_file());
    assert!(root.resolve(&newest).is_ok());
    ctx(tmp.path())
        .args(["runs", "gc", "--keep", "1", "--force"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "removed 20200101T000000.000Z-0badf11e",
        ));
    assert!(!bad.exists());
    assert!(root.resolve(&newest).is_ok());
}
