//! Crash safety and the lock across processes. The test binary re-runs
//! itself as the child (`CTX_STORE_CHILD` set), the usual way to get a
//! second process without a helper binary.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::ExecutionStore;
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

/// The child: either writes results forever (`write DIR`), printing each
/// id once `store` has returned, or holds the lock (`hold DIR`).
#[test]
fn child_process() {
    let Ok(cmd) = std::env::var("CTX_STORE_CHILD") else {
        return;
    };
    let (what, dir) = cmd.split_once(' ').unwrap();
    let p = plan();
    let store = match what {
        "write" => SqliteStore::create_in(Path::new(dir), &new_run(&p)).unwrap(),
        _ => SqliteStore::resume(Path::new(dir), &new_run(&p)).unwrap().0,
    };
    // libtest has printed `test child_process ... ` without a newline.
    println!();
    println!("ready {}", std::process::id());
    for i in 0.. {
        if what == "write" {
            let id = format!("t{i}");
            store
                .store(TaskExecutionResult::new(&id, TaskStatus::InProgress))
                .unwrap();
            let mut r = TaskExecutionResult::new(&id, TaskStatus::Completed);
            r.output = format!("output {i} ").repeat(40);
            store.store(r).unwrap();
            println!("stored {id}");
        } else {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

fn spawn(what: &str, dir: &Path) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CTX_STORE_CHILD", format!("{what} {}", dir.display()))
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
