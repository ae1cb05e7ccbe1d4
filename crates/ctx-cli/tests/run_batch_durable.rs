//! Durable batches (docs/runs.md, "Durable batches"): `ctx run --batch`
//! journals each batch in the run's store before it waits on it, so a
//! `ctx` killed while the provider works loses nothing: `ctx run --resume`
//! finds the batch and goes on polling, and no request is sent twice.
//! `ctx runs show` lists the batches; `ctx runs cancel` cancels the live
//! ones at the provider.
//!
//! Against ctx-test-support's honest server, its batches held
//! `in_progress` (`set_batch_pace(0)`) until the test lets them go.

#![cfg(unix)]

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ctx_test_support::openai_server::HonestServer;
use ctx_test_support::{Dir, Out, task};
use serde_json::Value;

#[path = "support/batch_plan.rs"]
mod batch_plan;
use batch_plan::{server, write_plan};

/// `ctx run plan.json --run-dir run --batch` against `server`, with
/// `extra` flags (`--resume run` in place of the plan for a resume).
fn run_args<'a>(server: &'a HonestServer, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--format",
        "json",
        "--engine",
        "openai",
        "--base-url",
        &server.base_url,
        "--retry-initial-ms",
        "1",
        "--retry-max-ms",
        "5",
        "--batch",
        "--batch-poll-ms",
        "2",
    ]);
    args
}

/// `ctx runs show run --format json`.
fn shown(dir: &Dir) -> Value {
    dir.run(&["runs", "show", "run", "--format", "json"]).json()
}

/// Waits (up to 60 s) until `ready` holds of the run as shown.
fn wait_for_show(dir: &Dir, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let out = dir.run(&["runs", "show", "run", "--format", "json"]);
        if out.code == 0 {
            let json = out.json();
            if ready(&json) {
                return json;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never {what}: {}",
            out.stdout
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many times each task's request went into a batch, over every
/// batch the server created.
fn batched_per_task(server: &HonestServer) -> BTreeMap<String, usize> {
    let mut per_task = BTreeMap::new();
    for id in server.batch_ids() {
        let input = server.batch_input(&id).expect("the batch's input file");
        for line in String::from_utf8(input).unwrap().lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            let custom_id = line["custom_id"].as_str().unwrap();
            let task = custom_id.rsplit(':').next().unwrap().to_string();
            *per_task.entry(task).or_insert(0) += 1;
        }
    }
    per_task
}

/// How the test stops `ctx`.
#[derive(Clone, Copy)]
enum Stop {
    /// SIGKILL: nothing of ctx runs after it.
    Kill,
    /// SIGTERM: the run is stored as interrupted (exit 143).
    Term,
}

/// Starts `ctx run --batch`, waits until its first batch is journaled,
/// and SIGKILLs it.
fn start_and_kill(dir: &Dir, server: &HonestServer) -> Value {
    start_and_stop(dir, server, Stop::Kill)
}

/// Starts `ctx run --batch`, waits until its first batch is journaled,
/// and stops it as `stop` says.
fn start_and_stop(dir: &Dir, server: &HonestServer, stop: Stop) -> Value {
    server.set_batch_pace(0);
    let args = run_args(server, &["plan.json", "--run-dir", "run"]);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ctx"))
        .current_dir(dir.path())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let show = wait_for_show(dir, "a journaled batch", |json| {
        json["batches"][0]["id"].is_string()
    });
    match stop {
        Stop::Kill => child.kill().unwrap(),
        Stop::Term => {
            let pid = child.id().to_string();
            let sent = std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap();
            assert!(sent.success());
        }
    }
    let status = child.wait().unwrap();
    if let Stop::Term = stop {
        assert_eq!(status.code(), Some(143), "stopped by SIGTERM");
    }
    show
}

#[test]
fn a_killed_run_resumes_its_batch_and_pays_each_request_once() {
    resumes_its_batch_and_pays_each_request_once(Stop::Kill);
}

#[test]
fn a_run_stopped_by_sigterm_resumes_its_batch_and_pays_each_request_once() {
    resumes_its_batch_and_pays_each_request_once(Stop::Term);
}

fn resumes_its_batch_and_pays_each_request_once(stop: Stop) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    let dir = Dir::new();
    write_plan(&dir);
    let show = start_and_stop(&dir, &server, stop);
    let batch = &show["batches"][0];
    assert_eq!(batch["requests"], 2, "{show}");
    assert_eq!(server.batch_ids(), [batch["id"].as_str().unwrap()]);
    assert!(server.bills().is_empty(), "held: nothing answered yet");

    // The provider goes on working while no ctx runs.
    server.set_batch_pace(usize::MAX);
    let out = dir.run(&run_args(&server, &["--resume", "run"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    for id in ["a", "b", "c"] {
        let task = task(&json, id);
        assert_eq!(task["status"], "completed", "{task}");
        assert_eq!(task["metadata"]["tokens_used"]["service_tier"], "batch");
    }
    // `a` and `b` went once, in the batch the killed run created; `c` in
    // a second one. Nothing real-time, each request billed once.
    assert_eq!(server.batch_ids().len(), 2);
    let once: BTreeMap<String, usize> = ["a", "b", "c"].map(|t| (t.into(), 1)).into();
    assert_eq!(batched_per_task(&server), once);
    let bills = server.bills();
    assert_eq!(bills.len(), 3, "{bills:?}");
    assert!(bills.iter().all(|b| b.service_tier == "batch"), "{bills:?}");
    assert!(out.stderr.contains("batch "), "progress: {}", out.stderr);

    // Both batches are listed, ended and collected; the input files gone.
    let show = shown(&dir);
    let batches = show["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 2, "{show}");
    for b in batches {
        assert_eq!(b["status"], "completed", "{b}");
        assert!(
            b["ended_at"].is_string() && b["collected_at"].is_string(),
            "{b}"
        );
        assert!(
            !server
                .file_ids()
                .contains(&b["input_file_id"].as_str().unwrap().to_string())
        );
    }
    let first = batches[0]["id"].as_str().unwrap();
    // Each call names its batch, and each task its tier, in the exports.
    let export = dir.run(&["runs", "export", "run"]).json();
    assert_eq!(
        task(&export, "a")["metadata"]["attempts"][0]["batch_id"],
        first
    );
    let csv = dir
        .run(&["runs", "export", "run", "--format", "csv"])
        .stdout;
    let a_row = csv.lines().find(|l| l.contains(",a,")).unwrap();
    // The task's tier, the call's batch, the call's own tier, no fallback.
    assert!(a_row.ends_with(&format!(",batch,{first},batch,")), "{csv}");
    let text = dir.run(&["runs", "show", "run"]).stdout;
    assert!(
        text.contains(&format!(
            "batches\n  {first}  completed  2 total: 2 completed, 0 failed  created "
        )),
        "{text}"
    );
}

#[test]
fn runs_cancel_cancels_the_live_batches_of_a_killed_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    let dir = Dir::new();
    write_plan(&dir);
    start_and_kill(&dir, &server);
    let id = server.batch_ids()[0].clone();
    // A resume that would send its requests real-time while the batch
    // may still answer them is refused, naming the way out.
    let realtime = dir.run(&[
        "run",
        "--resume",
        "run",
        "--engine",
        "openai",
        "--base-url",
        &server.base_url,
    ]);
    assert_eq!(realtime.code, 2, "{}", realtime.stderr);
    assert!(
        realtime
            .stderr
            .contains(&format!("provider batches that may still answer ({id})"))
            && realtime.stderr.contains("ctx runs cancel"),
        "{}",
        realtime.stderr
    );
    assert!(server.bills().is_empty());
    let cancel =
        |dir: &Dir| -> Out { dir.run(&["runs", "cancel", "run", "--base-url", &server.base_url]) };
    let out = cancel(&dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("cancelled batch {id}")),
        "{}",
        out.stdout
    );
    assert_eq!(server.batch_status(&id).as_deref(), Some("cancelling"));
    let show = shown(&dir);
    assert!(
        show["batches"][0]["cancel_requested_at"].is_string(),
        "{show}"
    );
    let out = cancel(&dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "run: no live batch to cancel\n");

    // A resume takes what the cancelled batch answered (nothing) and
    // sends the rest again, real-time; the batch is not waited on again.
    server.set_batch_pace(usize::MAX);
    let out = dir.run(&run_args(&server, &["--resume", "run"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    for id in ["a", "b"] {
        let used = &task(&json, id)["metadata"]["tokens_used"];
        assert_eq!(used["service_tier"], "default", "{json}");
    }
    assert_eq!(server.batch_status(&id).as_deref(), Some("cancelled"));
    let tiers: Vec<String> = server.bills().into_iter().map(|b| b.service_tier).collect();
    assert_eq!(
        tiers.iter().filter(|t| *t == "default").count(),
        2,
        "{tiers:?}"
    );
}

#[test]
fn runs_cancel_of_a_run_without_batches_says_so() {
    let dir = Dir::new();
    write_plan(&dir);
    let out = dir.run(&["run", "plan.json", "--run-dir", "run"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = dir.run(&[
        "runs",
        "cancel",
        "run",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "run: no live batch to cancel\n");
}

#[test]
fn a_server_without_the_batch_api_is_refused_before_anything_runs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    server.close_batch_api();
    let dir = Dir::new();
    write_plan(&dir);
    let out = dir.run(&run_args(&server, &["plan.json", "--run-dir", "run"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    let url = format!("{}/batches?limit=1", server.base_url);
    assert!(
        out.stderr.contains(&format!("{url} answered HTTP 404")),
        "{}",
        out.stderr
    );
    assert!(!dir.path().join("run").exists(), "nothing ran");
    assert!(server.bills().is_empty());
}
