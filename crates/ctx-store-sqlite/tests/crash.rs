//! Crash safety and the lock across processes. The second process is the
//! helper binary `ctx-store-sqlite-crash-child` (`src/bin/crash_child.rs`),
//! not a `#[test]` of this file: a child's entry point written as a test
//! passed by returning in every ordinary run.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use ctx_model::{Plan, TaskStatus};
use ctx_store_sqlite::{Error, NewRun, RunView, SqliteStore};

fn plan() -> Plan {
    let tasks: Vec<String> = (0..300)
        .map(|i| format!(r#"{{"id": "t{i}", "description": "T", "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "p{i}"}}}}}}"#))
        .collect();
    serde_json::from_str(&format!(
        r#"{{"schema_version": 1, "sub_tasks": [{}]}}"#,
        tasks.join(",")
    ))
    .unwrap()
}

fn new_run(plan: &Plan) -> NewRun<'_> {
    NewRun {
        plan,
        engine: "command",
        plan_source: None,
        inputs: None,
    }
}

/// The child (`src/bin/crash_child.rs`): either writes results forever
/// (`write`), printing each id once `store` has returned, or holds the
/// lock (`hold`). It reads the plan from `plan.json` beside the run.
fn spawn(what: &str, dir: &Path) -> (Child, BufReader<std::process::ChildStdout>) {
    let plan_file = dir.with_file_name("plan.json");
    std::fs::write(&plan_file, serde_json::to_vec(&plan()).unwrap()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctx-store-sqlite-crash-child"))
        .arg(what)
        .arg(dir)
        .arg(&plan_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

fn kill9(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap();
}

#[test]
fn results_reported_before_sigkill_survive_it() {
    // Kill at several points: after 1, 7, 40 and 150 reported results.
    for kill_after in [1usize, 7, 40, 150] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let (mut child, out) = spawn("write", &dir);
        let mut reported = Vec::new();
        for line in out.lines() {
            let line = line.unwrap();
            if let Some(id) = line.strip_prefix("stored ") {
                reported.push(id.to_string());
                if reported.len() == kill_after {
                    break;
                }
            }
        }
        kill9(&mut child);
        assert_eq!(reported.len(), kill_after);

        let view = RunView::open(&dir).unwrap();
        assert_eq!(view.integrity_check().unwrap(), "ok");
        for id in &reported {
            let r = view
                .result(id)
                .unwrap()
                .unwrap_or_else(|| panic!("{id} lost"));
            assert_eq!(r.result.status, TaskStatus::Completed, "{id}");
        }
        // A dead writer leaves no lock behind: the run resumes.
        let p = plan();
        let (store, resume) = SqliteStore::resume(&dir, &new_run(&p)).unwrap();
        assert!(resume.reuse.len() >= kill_after);
        assert_eq!(store.view().integrity_check().unwrap(), "ok");
    }
}

#[test]
fn a_run_held_by_another_process_is_refused_until_it_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let p = plan();
    drop(SqliteStore::create_in(&dir, &new_run(&p)).unwrap());
    let (mut child, mut out) = spawn("hold", &dir);
    let mut line = String::new();
    while !line.starts_with("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child ended early");
    }
    let err = SqliteStore::resume(&dir, &new_run(&p)).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, Error::Locked { pid: Some(pid), .. } if pid == child.id()),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "is being executed by another ctx process (pid {})",
            child.id()
        )),
        "{msg}"
    );
    kill9(&mut child);
    let (store, _) = SqliteStore::resume(&dir, &new_run(&p)).unwrap();
    assert_eq!(store.session(), 3);
}
