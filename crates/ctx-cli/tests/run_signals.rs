//! SIGTERM and SIGHUP stop `ctx run` the way Ctrl-C does: the commands'
//! process groups are killed, the run is stored as interrupted, the summary
//! is printed, and the exit code is 128 + the signal (143, 129).
//!
//! Before: `timeout 2 ctx run plan --command 'sleep 777; cat'` left one
//! `sleep 777` per task in flight running under PID 1, printed nothing and
//! left the run looking `crashed`.

#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ctx_test_support::task;
use serde_json::Value;

/// a -> b -> c, d independent: a and d are in flight when the signal comes.
fn write_plan(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("plan.json");
    std::fs::write(
        &path,
        r#"{"schema_version": 1, "sub_tasks": [
  {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a."}}},
  {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b."}}},
  {"id": "c", "description": "C", "dependencies": ["b"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say c."}}},
  {"id": "d", "description": "D", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say d."}}}
]}"#,
    )
    .unwrap();
    path
}

/// Whether `pid` is a live process (a zombie waiting for a reaper that is
/// not ctx's business counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => {
            // No procfs: ask `kill -0`.
            Command::new("kill")
                .args(["-0", &pid.to_string()])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        }
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn stop_with(signal: &str, code: i32, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    // The model process is a child of the task's shell, as in
    // `sleep 777; cat`; its pid is written down so the test can look.
    let command = r#"sleep 777 & echo $! > "$CTX_TASK_ID.pid"; wait; cat"#;
    let child = Command::new(assert_cmd::cargo::cargo_bin("ctx"))
        .current_dir(dir.path())
        .args(["run", plan.to_str().unwrap(), "--format", "json"])
        .args(["--command", command])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid_files = [dir.path().join("a.pid"), dir.path().join("d.pid")];
    let waited = Instant::now();
    let pids: Vec<u32> = loop {
        let pids: Vec<u32> = pid_files.iter().filter_map(|p| read_pid(p)).collect();
        if pids.len() == pid_files.len() {
            break pids;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the tasks never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(pids.iter().all(|&p| alive(p)));
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let stopped = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(stopped.elapsed() < Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{signal}: {stderr}");

    // The model processes are gone, not orphaned.
    let gone = Instant::now();
    while pids.iter().any(|&p| alive(p)) && gone.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for &p in &pids {
        assert!(!alive(p), "{signal}: `sleep 777` (pid {p}) outlived ctx");
    }

    // The summary is printed.
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{signal}: no JSON summary ({e}): {stderr}"));
    assert_eq!(json["tasks"].as_array().unwrap().len(), 4);
    let status_of = |id: &str| task(&json, id)["status"].as_str().unwrap().to_string();
    assert_eq!(status_of("a"), "failed");
    assert_eq!(status_of("d"), "failed");
    assert_eq!(status_of("b"), "skipped");
    assert!(
        stderr.contains(&format!("interrupted by {name}: 0 of 4 tasks completed")),
        "{stderr}"
    );
    assert!(
        stderr.contains("resume with: ctx run --resume "),
        "{stderr}"
    );

    // The run is stored as interrupted, not crashed.
    let (runs, bad) = ctx_store_sqlite::RunRoot::new(dir.path().join(".ctx/runs"))
        .list()
        .unwrap();
    assert!(bad.is_empty());
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, ctx_store_sqlite::RunState::Interrupted);
}

#[test]
fn sigterm_kills_the_commands_stores_the_run_and_exits_143() {
    stop_with("TERM", 143, "SIGTERM");
}

#[test]
fn sighup_kills_the_commands_stores_the_run_and_exits_129() {
    stop_with("HUP", 129, "SIGHUP");
}
