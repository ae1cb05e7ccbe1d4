//! What the shared-store CLI tests (shared_store.rs, shared_map.rs) share:
//! `ctx` as a child process, waiting for it and signalling it, a run
//! registered by a follower, and the run read back with `ctx runs`.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn ctx() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("ctx"));
    c.env_remove("CTX_STORE");
    c
}

pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig}");
}

pub fn spawn(cmd: &mut Command, stderr: &Path) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap()
}

pub fn finish(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let t0 = Instant::now();
    let mut child = child;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("process {pid} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn run_id_from(stderr: &Path) -> Option<String> {
    std::fs::read_to_string(stderr).ok()?.lines().find_map(|l| {
        l.strip_prefix("run ")
            .and_then(|r| r.split_once(" registered"))
            .map(|(id, _)| id.to_string())
    })
}

/// `ctx run PLAN --store URL --no-local`, once it registered the run: the
/// follower (its stderr to `stderr`) and the run's id.
pub fn register(url: &str, plan: &Path, stderr: &Path) -> (Child, String) {
    register_with(url, plan, &[], stderr)
}

/// [`register`] with more flags of `ctx run` (`--var`, …).
pub fn register_with(url: &str, plan: &Path, flags: &[&str], stderr: &Path) -> (Child, String) {
    let follower = spawn(
        ctx()
            .arg("run")
            .arg(plan)
            .args(["--store", url, "--no-local"])
            .args(flags),
        stderr,
    );
    wait_for("the registration", Duration::from_secs(20), || {
        run_id_from(stderr).is_some()
    });
    (follower, run_id_from(stderr).unwrap())
}

pub fn export(url: &str, run: &str) -> serde_json::Value {
    let out = ctx()
        .args(["runs", "export", run, "--store", url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn statuses(v: &serde_json::Value) -> Vec<(String, String)> {
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["task_id"].as_str().unwrap().to_string(),
                t["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub fn run_info(url: &str, run: &str) -> serde_json::Value {
    let out = ctx()
        .args(["runs", "list", "--format", "json", "--store", url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run)
        .cloned()
        .unwrap()
}

/// The run id from `ctx run --store`'s `run ID registered` line in
/// `stderr`.
pub fn run_id_from_text(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_once(" registered"))
                .map(|(id, _)| id.to_string())
        })
        .unwrap_or_else(|| panic!("no run id in {stderr}"))
}
