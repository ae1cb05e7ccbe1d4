//! `ctx run` on the durable store: the run id and directory, `--resume`
//! (reuse, plan changes, `--dry-run`), one writer, `--cache`, `--no-store`,
//! bad stores. Every test works in its own temp dir; the `command` engine
//! appends each task id it runs to a counts file, so "not executed again"
//! is checked by counting.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ctx_deps::ExecutionStore;
use ctx_store_sqlite::{NewRun, RunRoot, RunView, SessionEnd};
use ctx_test_support::{Out, counts, task};
use serde_json::Value;

#[path = "support/export.rs"]
mod export;

/// a -> b -> c, d independent. `b` fails while `DIR/fail-b` exists.
fn plan_text(prompt_c: &str) -> String {
    format!(
        r#"{{"schema_version": 1, "goal": "resume demo", "sub_tasks": [
 {{"id": "a", "description": "A", "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "prompt a"}}}}}},
 {{"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "prompt b"}}}}}},
 {{"id": "c", "description": "C", "dependencies": ["b"], "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "{prompt_c}"}}}}}},
 {{"id": "d", "description": "D", "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "prompt d"}}}}}}]}}"#
    )
}

/// The shared scratch directory, with this file's plan and command.
struct Dir(ctx_test_support::Dir);

impl std::ops::Deref for Dir {
    type Target = ctx_test_support::Dir;
    fn deref(&self) -> &ctx_test_support::Dir {
        &self.0
    }
}

impl Dir {
    fn new() -> Dir {
        let d = Dir(ctx_test_support::Dir::new());
        d.write_plan("prompt c");
        d
    }
    fn write_plan(&self, prompt_c: &str) {
        self.write("plan.json", &plan_text(prompt_c));
    }
    fn root(&self) -> PathBuf {
        self.path().join("runs")
    }
    /// The command: counts, fails for b while fail-b exists, else echoes
    /// the prompt.
    fn command(&self) -> String {
        format!(
            r#"echo "$CTX_TASK_ID" >> '{dir}/counts'; if [ "$CTX_TASK_ID" = b ] && [ -e '{dir}/fail-b' ]; then echo boom >&2; exit 3; fi; cat"#,
            dir = self.path().display()
        )
    }
    /// `ctx run plan.json --root runs --command ... ARGS`.
    fn run(&self, args: &[&str]) -> Out {
        let mut cmd = self.ctx();
        cmd.args(["run", "plan.json", "--root", "runs", "--command"])
            .arg(self.command())
            .args(args);
        Out::of(&mut cmd)
    }
}

fn status<'a>(json: &'a Value, id: &str) -> &'a str {
    task(json, id)["status"].as_str().unwrap()
}

#[test]
fn every_run_is_stored_and_named_on_stderr() {
    let d = Dir::new();
    let out = d.run(&["--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let id = out.run_id();
    assert!(ctx_store_sqlite::is_run_id(&id), "{id}");
    assert!(out.stderr.contains(&format!("run {id} in runs/{id}")));
    assert!(
        out.stderr
            .contains(&format!("run {id} stored in runs/{id}\n"))
    );
    // stdout is the JSON alone.
    assert_eq!(out.json()["tasks"].as_array().unwrap().len(), 4);
    let view = RunView::open(&d.root().join(&id)).unwrap();
    assert_eq!(view.status_counts().unwrap().completed, 4);
    assert_eq!(view.sessions().unwrap()[0].engine, "command");
    assert_eq!(
        view.sessions().unwrap()[0].outcome.as_deref(),
        Some("finished")
    );
    // The command string (which may hold secrets) is not stored.
    let bytes = std::fs::read(d.root().join(&id).join("store.sqlite")).unwrap();
    let needle = b"fail-b";
    assert!(!bytes.windows(needle.len()).any(|w| w == needle));

    // Default root: ./.ctx/runs of the working directory.
    let out = d.ctx().args(["run", "plan.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let runs: Vec<_> = std::fs::read_dir(d.path().join(".ctx/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1);

    // --run-dir: exactly there; a second run into it is refused.
    let out = d.run(&["--run-dir", "mine"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(d.path().join("mine/store.sqlite").is_file());
    let again = d.run(&["--run-dir", "mine"]);
    assert_eq!(again.code, 4, "{}", again.stderr);
    assert!(again.stderr.contains("mine"), "{}", again.stderr);
    // The library says what is wrong; the CLI adds the flags that fix it.
    assert!(
        again.stderr.contains("already holds a run")
            && again
                .stderr
                .contains("ctx run --resume DIR, or another --run-dir"),
        "{}",
        again.stderr
    );
}

#[test]
fn no_store_writes_nothing() {
    let d = Dir::new();
    let out = d
        .ctx()
        .args(["run", "plan.json", "--no-store", "--command"])
        .arg(d.command())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(d.counts().len(), 4);
    assert!(!d.root().exists());
    assert!(!d.path().join(".ctx").exists());
    for bad in [
        vec!["--no-store", "--resume", "x"],
        vec!["--no-store", "--cache"],
        vec!["--no-store", "--run-dir", "x"],
    ] {
        let out = d.run(&bad);
        assert_eq!(out.code, 2, "{bad:?}: {}", out.stderr);
    }
}

#[test]
fn resume_reuses_completed_tasks_and_runs_the_rest() {
    let d = Dir::new();
    std::fs::write(d.path().join("fail-b"), "").unwrap();
    let first = d.run(&["--format", "json"]);
    assert_eq!(first.code, 1, "{}", first.stderr);
    let id = first.run_id();
    let j = first.json();
    assert_eq!(
        ["a", "b", "c", "d"].map(|t| status(&j, t)),
        ["completed", "failed", "skipped", "completed"]
    );
    assert!(
        first.stderr.contains(&format!("--resume {id}")),
        "{}",
        first.stderr
    );
    assert_eq!(d.counts(), counts(&[("a", 1), ("b", 1), ("d", 1)]));

    // --dry-run: what would run and why; nothing executes.
    let dry = d.run(&["--resume", &id, "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(dry.stdout.contains("reuse   a"), "{}", dry.stdout);
    assert!(dry.stdout.contains("reuse   d"), "{}", dry.stdout);
    assert!(
        dry.stdout.contains("rerun   b     failed"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("rerun   c     skipped"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("4 tasks: 2 reused, 2 to run"),
        "{}",
        dry.stdout
    );
    assert_eq!(d.counts(), counts(&[("a", 1), ("b", 1), ("d", 1)]));

    std::fs::remove_file(d.path().join("fail-b")).unwrap();
    // Text summary marks reused tasks.
    let text = d.run(&["--resume", &id]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("a     completed (reused)"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("d     completed (reused)"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("b     completed "), "{}", text.stdout);
    assert!(
        text.stdout
            .contains("4 tasks: 4 completed, 0 failed, 0 skipped (2 reused)"),
        "{}",
        text.stdout
    );
    assert!(text.stderr.contains(&format!(
        "resuming run {id} in runs/{id}: 2 reused, 2 to run"
    )));
    assert_eq!(
        d.counts(),
        counts(&[("a", 1), ("b", 2), ("c", 1), ("d", 1)])
    );

    // Resuming a finished run runs nothing; JSON covers every task, the
    // reused ones with their stored outputs. A run directory works as RUN.
    let dir = d.root().join(&id);
    let again = d.run(&["--resume", dir.to_str().unwrap(), "--format", "json"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let j = again.json();
    assert_eq!(j["tasks"].as_array().unwrap().len(), 4);
    assert!(
        ["a", "b", "c", "d"]
            .iter()
            .all(|t| status(&j, t) == "completed")
    );
    assert_eq!(j["tasks"][0]["output"], j["tasks"][0]["prompt"]);
    assert_eq!(j["order"].as_array().unwrap().len(), 0);
    assert_eq!(
        d.counts(),
        counts(&[("a", 1), ("b", 2), ("c", 1), ("d", 1)])
    );
    let sessions = RunView::open(&dir).unwrap().sessions().unwrap();
    assert_eq!(
        sessions.iter().map(|s| s.kind.as_str()).collect::<Vec<_>>(),
        ["run", "resume", "resume"]
    );
}

#[test]
fn a_changed_task_reruns_with_its_dependents_only() {
    let d = Dir::new();
    let first = d.run(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.run_id();
    d.write_plan("prompt c, edited");
    let dry = d.run(&["--resume", &id, "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("rerun   c     prompt changed"),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("3 reused, 1 to run"), "{}", dry.stdout);

    // Editing b re-runs b and c (downstream), not a or d.
    d.write_plan("prompt c");
    let text = plan_text("prompt c").replace("prompt b", "prompt b, edited");
    std::fs::write(d.path().join("plan.json"), text).unwrap();
    let out = d.run(&["--resume", &id, "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        d.counts(),
        counts(&[("a", 1), ("b", 2), ("c", 2), ("d", 1)])
    );
    let j = out.json();
    let c_prompt = j["tasks"][2]["prompt"].as_str().unwrap();
    assert!(c_prompt.contains("prompt b, edited"), "{c_prompt}");

    // Another engine label re-runs everything.
    let dry = d
        .ctx()
        .args([
            "run",
            "plan.json",
            "--root",
            "runs",
            "--resume",
            &id,
            "--dry-run",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&dry.stdout);
    assert!(
        stdout.contains("engine changed (command -> dry-run)"),
        "{stdout}"
    );
}

#[test]
fn resume_errors_name_the_run_or_the_store() {
    let d = Dir::new();
    // A run that does not exist: exit 2, named.
    let out = d.run(&["--resume", "20990101T000000.000Z-deadbeef"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("20990101T000000.000Z-deadbeef"),
        "{}",
        out.stderr
    );
    assert!(d.counts().is_empty());

    // --resume with --run-dir: usage error.
    let out = d.run(&["--resume", "x", "--run-dir", "y"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
    // --dry-run alone: usage error (it describes a resume).
    let out = d.run(&["--dry-run"]);
    assert_eq!(out.code, 2, "{}", out.stderr);

    // Not a SQLite file: exit 4 naming the path; the file is untouched.
    let bad = d.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("store.sqlite"), "this is not a database\n").unwrap();
    let out = d.run(&["--resume", bad.to_str().unwrap()]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(out.stderr.contains("bad/store.sqlite"), "{}", out.stderr);
    assert_eq!(
        std::fs::read(bad.join("store.sqlite")).unwrap(),
        b"this is not a database\n"
    );
    assert_eq!(
        std::fs::read_dir(&bad).unwrap().count(),
        1,
        "nothing written next to a foreign file"
    );

    // A store of a newer schema (user_version, bytes 60..64 of the SQLite
    // header, set to 99): exit 4, untouched.
    let first = d.run(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let file = d.root().join(first.run_id()).join("store.sqlite");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[60..64].copy_from_slice(&99u32.to_be_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let before = d.counts();
    let out = d.run(&["--resume", &first.run_id()]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(out.stderr.contains("newer"), "{}", out.stderr);
    assert!(
        out.stderr.contains(&file.display().to_string()) || out.stderr.contains("store.sqlite")
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    assert_eq!(d.counts(), before);
}

#[test]
fn a_running_run_cannot_be_resumed_twice() {
    let d = Dir::new();
    let bin = assert_cmd::cargo::cargo_bin("ctx");
    let slow_command = format!(
        r#"echo "$CTX_TASK_ID" >> '{}/counts'; sleep 2; cat"#,
        d.path().display()
    );
    let mut slow = std::process::Command::new(bin)
        .current_dir(d.path())
        .args([
            "run",
            "plan.json",
            "--run-dir",
            "slow",
            "--command",
            &slow_command,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the run is executing: a and d (the roots) have started;
    // b and c wait for a's 2 s.
    let start = Instant::now();
    while d.counts().len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let running = d.counts();
    let out = d.run(&["--resume", "slow"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("is being executed by another ctx process"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&slow.id().to_string()),
        "{}",
        out.stderr
    );
    assert_eq!(d.counts(), running, "the refused resume ran nothing");
    // --dry-run reads without the lock.
    let dry = d.run(&["--resume", "slow", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let status = slow.wait().unwrap();
    assert!(status.success());
    let total: usize = d.counts().values().sum();
    // Once the writer is gone, the run can be resumed.
    let out = d.run(&["--resume", "slow"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("(4 reused)"), "{}", out.stdout);
    assert_eq!(d.counts().values().sum::<usize>(), total);
}

#[test]
fn cache_reuses_identical_requests_across_runs() {
    let d = Dir::new();
    let first = d.run(&["--cache"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(d.root().join("cache.sqlite").is_file());
    assert_eq!(
        d.counts(),
        counts(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)])
    );

    // A new run of the same plan: every task answered from the cache.
    let second = d.run(&["--cache", "--format", "json"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_ne!(second.run_id(), first.run_id());
    assert_eq!(
        d.counts(),
        counts(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)])
    );
    let j = second.json();
    for t in j["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "completed");
        assert_eq!(t["metadata"]["cached"], true, "{t}");
    }
    // The cached flag is stored with the result.
    let view = RunView::open(&d.root().join(second.run_id())).unwrap();
    assert!(
        view.results()
            .unwrap()
            .iter()
            .all(|r| r.result.metadata.cached)
    );

    // Edit b: b and its dependent c miss; a and d hit.
    let text = plan_text("prompt c").replace("prompt b", "prompt b, edited");
    std::fs::write(d.path().join("plan.json"), text).unwrap();
    let third = d.run(&["--cache"]);
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert_eq!(
        d.counts(),
        counts(&[("a", 1), ("b", 2), ("c", 2), ("d", 1)])
    );
    assert!(
        third.stdout.contains("a     completed (cached)"),
        "{}",
        third.stdout
    );
    assert!(
        third.stdout.contains("d     completed (cached)"),
        "{}",
        third.stdout
    );
    assert!(third.stdout.contains("(2 cached)"), "{}", third.stdout);

    // Without --cache nothing is reused.
    let fourth = d.run(&[]);
    assert_eq!(fourth.code, 0);
    assert_eq!(
        d.counts(),
        counts(&[("a", 2), ("b", 3), ("c", 3), ("d", 2)])
    );

    // Another command is another engine identity: no hits.
    let other = d
        .ctx()
        .args(["run", "plan.json", "--root", "runs", "--cache", "--command"])
        .arg(format!("{}; true", d.command()))
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(0));
    assert_eq!(
        d.counts(),
        counts(&[("a", 3), ("b", 4), ("c", 4), ("d", 3)])
    );
}

/// A damaged cache index: exit 4 naming it, untouched, and no run started.
#[test]
fn a_bad_cache_index_stops_before_the_run_starts() {
    let d = Dir::new();
    std::fs::create_dir_all(d.root()).unwrap();
    std::fs::write(d.root().join("cache.sqlite"), "garbage").unwrap();
    let out = d.run(&["--cache"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(out.stderr.contains("cache.sqlite"), "{}", out.stderr);
    assert_eq!(
        std::fs::read(d.root().join("cache.sqlite")).unwrap(),
        b"garbage"
    );
    assert_eq!(std::fs::read_dir(d.root()).unwrap().count(), 1);
    assert!(d.counts().is_empty());
}

/// `ctx run --format json` and `ctx runs export` of the run it stored are
/// byte-identical, but for the task times the export adds.
#[test]
fn export_of_the_stored_run_matches_its_json() {
    let d = Dir::new();
    let out = d.run(&["--format", "json", "--concurrency", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let exported = d
        .ctx()
        .args(["runs", "export", &out.run_id(), "--root", "runs"])
        .output()
        .unwrap();
    assert_eq!(exported.status.code(), Some(0));
    assert_eq!(
        export::without_task_times(&String::from_utf8(exported.stdout).unwrap()),
        out.stdout
    );
}

/// A run made through the library (as another tool would) resumes from the
/// CLI: the engine label must match for reuse.
#[test]
fn a_library_made_run_resumes_from_the_cli() {
    let d = Dir::new();
    let plan: ctx_model::Plan = serde_json::from_str(&plan_text("prompt c")).unwrap();
    let root = RunRoot::new(d.root());
    let store = root
        .create(&NewRun {
            plan: &plan,
            engine: "dry-run",
            plan_source: Some("plan.json"),
            inputs: None,
        })
        .unwrap();
    store
        .store(ctx_model::TaskExecutionResult::new(
            "d",
            ctx_model::TaskStatus::InProgress,
        ))
        .unwrap();
    let id = store.run_id().to_string();
    store.finish(SessionEnd::Interrupted).unwrap();
    drop(store);
    let out = d
        .ctx()
        .args([
            "run",
            "plan.json",
            "--root",
            "runs",
            "--resume",
            &id,
            "--dry-run",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("rerun   d     in_progress (crashed)"),
        "{stdout}"
    );
    assert!(stdout.contains("rerun   a     never started"), "{stdout}");
}

#[test]
fn resume_without_a_plan_runs_the_stored_plan() {
    let d = Dir::new();
    std::fs::write(d.path().join("fail-b"), "").unwrap();
    let first = d.run(&[]);
    assert_eq!(first.code, 1, "{}", first.stderr);
    let id = first.run_id();
    // The hint needs no plan path.
    assert!(
        first
            .stderr
            .contains(&format!("resume with: ctx run --resume {id}")),
        "{}",
        first.stderr
    );
    std::fs::remove_file(d.path().join("fail-b")).unwrap();
    // The plan file is gone: the stored plan is what runs.
    std::fs::remove_file(d.path().join("plan.json")).unwrap();
    let dry = d
        .ctx()
        .args(["run", "--root", "runs", "--resume", &id, "--dry-run"])
        .arg("--command")
        .arg(d.command())
        .output()
        .unwrap();
    assert_eq!(dry.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&dry.stdout).contains("4 tasks: 2 reused, 2 to run"));
    let out = d
        .ctx()
        .args(["run", "--root", "runs", "--resume", &id, "--format", "json"])
        .arg("--command")
        .arg(d.command())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        ["a", "b", "c", "d"].map(|t| status(&j, t)),
        ["completed"; 4]
    );
    assert_eq!(
        d.counts(),
        counts(&[("a", 1), ("b", 2), ("c", 1), ("d", 1)])
    );
    assert!(
        stderr.contains(&format!(
            "resuming run {id} in runs/{id}: 2 reused, 2 to run"
        )),
        "{stderr}"
    );

    // Without --resume a plan is still required.
    let out = d.ctx().args(["run", "--root", "runs"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<PLAN>"));
}

#[test]
fn a_stored_plan_with_redacted_secrets_needs_the_plan_file() {
    let d = Dir::new();
    std::fs::write(
        d.path().join("plan.json"),
        r#"{"schema_version": 1, "sub_tasks": [
 {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "api_key": "sk-secret"}}}]}"#,
    )
    .unwrap();
    let first = d.run(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.run_id();
    let out = d
        .ctx()
        .args(["run", "--root", "runs", "--resume", &id])
        .arg("--command")
        .arg(d.command())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("redacted secrets (a.params.api_key)"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-secret"));
}
