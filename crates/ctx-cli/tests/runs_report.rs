//! `ctx runs report` and the timeline exports (`ctx runs export --format
//! json|csv`): on a real dry run of the Tetris plan, on runs stored through
//! the library (in progress, failed with retries, hostile text), and on
//! runs that do not exist or cannot be read.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use ctx_deps::ExecutionStore;
use ctx_model::{Attempt, Plan, TaskExecutionResult, TaskStatus};
use ctx_store_sqlite::{NewRun, RunRoot, STORE_FILE, SessionEnd};
use ctx_test_support::ctx_in as ctx;
use predicates::prelude::*;
use serde_json::Value;

const PLAN: &str = r#"{"schema_version": 1, "goal": "demo", "sub_tasks": [
 {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pa"}}},
 {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pb"}}},
 {"id": "c", "description": "C", "dependencies": ["b"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pc"}}}]}"#;

fn plan() -> Plan {
    serde_json::from_str(PLAN).unwrap()
}

fn tetris() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tetris/plan.yaml")
        .canonicalize()
        .unwrap()
}

fn stdout(c: &mut Command) -> String {
    String::from_utf8(c.assert().success().get_output().stdout.clone()).unwrap()
}

fn bars(html: &str) -> usize {
    html.matches("<rect class=\"bar ").count()
}

/// Runs the Tetris plan (dry run, stored under `dir/runs`) and returns the
/// run id.
fn tetris_run(dir: &Path) -> String {
    ctx(dir)
        .arg("run")
        .arg(tetris())
        .args(["--root", "runs"])
        .assert()
        .success();
    let list: Value = serde_json::from_str(&stdout(
        ctx(dir).args(["runs", "list", "--root", "runs", "--format", "json"]),
    ))
    .unwrap();
    list[0]["id"].as_str().unwrap().to_string()
}

#[test]
fn tetris_report_has_one_bar_per_task_and_the_store_is_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let id = tetris_run(tmp.path());
    let store = tmp.path().join("runs").join(&id).join(STORE_FILE);
    let before = std::fs::read(&store).unwrap();

    let msg = stdout(ctx(tmp.path()).args([
        "runs",
        "report",
        &id,
        "--root",
        "runs",
        "-o",
        "out/report.html",
    ]));
    assert_eq!(
        msg,
        format!("report of run {id} (9 tasks) written to out/report.html\n")
    );
    let html = std::fs::read_to_string(tmp.path().join("out/report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(bars(&html), 9, "one bar per task");
    assert!(html.contains(&format!("<title>ctx run {id}</title>")));
    assert!(!html.contains("still in progress"));
    // Dry-run outputs are in the page, escaped.
    assert!(html.contains("[dry-run] output of task 9"));
    // A finished run reads to the same bytes every time (stdout too).
    let again = stdout(ctx(tmp.path()).args(["runs", "report", &id, "--root", "runs"]));
    assert_eq!(again, html);
    // Reading never writes the store.
    assert_eq!(std::fs::read(&store).unwrap(), before);

    if let Some(browser) = browser() {
        let loaded = load_in_browser(&browser, tmp.path(), &tmp.path().join("out/report.html"));
        assert!(
            loaded.console.is_empty(),
            "console output while loading the report:\n{}",
            loaded.console.join("\n")
        );
        assert!(
            loaded.dom.contains("data-report-script=\"ran\""),
            "the report's script did not run"
        );
        assert_eq!(bars(&loaded.dom), 9, "one bar per task after loading");
    }
}

#[test]
fn tetris_export_json_and_csv_carry_the_report_times() {
    let tmp = tempfile::tempdir().unwrap();
    let id = tetris_run(tmp.path());
    let json: Value = serde_json::from_str(&stdout(
        ctx(tmp.path()).args(["runs", "export", &id, "--root", "runs", "--format", "json"]),
    ))
    .unwrap();
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 9);
    let mut times = std::collections::HashMap::new();
    for t in tasks {
        let start = t["started_at"].as_str().expect("started_at");
        let end = t["ended_at"].as_str().expect("ended_at");
        assert!(start <= end, "{start} > {end}");
        assert!(start.ends_with('Z') && start.len() == 24, "{start}");
        // The dry-run engine calls no model: it spends nothing.
        assert_eq!(t["cost_usd"], 0.0);
        times.insert(
            t["task_id"].as_str().unwrap().to_string(),
            (start.to_string(), end.to_string()),
        );
    }
    // A task starts after its dependencies ended (task 2 depends on 1).
    assert!(times["1"].1 <= times["2"].0);

    let csv_text =
        stdout(ctx(tmp.path()).args(["runs", "export", &id, "--root", "runs", "--format", "csv"]));
    let mut r = csv::Reader::from_reader(csv_text.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header[..3], ["run_id", "task_id", "task_status"]);
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    // The dry-run engine makes one call per task.
    assert_eq!(rows.len(), 9);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for row in &rows {
        assert_eq!(&row[col("run_id")], id);
        let (start, end) = &times[&row[col("task_id")]];
        assert_eq!(&row[col("task_started_at")], start);
        assert_eq!(&row[col("task_ended_at")], end);
        assert_eq!(&row[col("attempt")], "1");
        assert_eq!(&row[col("attempt_outcome")], "success");
        assert_eq!(&row[col("final")], "true");
        assert_eq!(&row[col("cost_usd")], "0");
    }
}

/// A plan whose first task has a check that fails on the first answer and
/// passes on the retry (the answer follows the feedback); every answer
/// takes 300 ms.
const RETRIED_PLAN: &str = r#"schema_version: 1
sub_tasks:
  - id: css
    description: Style the board
    checks:
      - contains: "10 x 20"
    tool_or_prompt: {name: inference, params: {prompt: Write the CSS.}}
  - id: js
    description: Script
    dependencies: [css]
    tool_or_prompt: {name: inference, params: {prompt: Write the JS.}}
"#;

const SLOW_FIXES_ON_FEEDBACK: &str = r#"p=$(cat); sleep 0.3; case "$p" in *"Your previous answer failed these checks"*) echo "a 10 x 20 board";; *) echo "a board";; esac"#;

fn ms(t: &str) -> i64 {
    ctx_report::Timestamp::parse_rfc3339(t).unwrap().unix_ms()
}

/// A task retried after a failed check started at its first attempt: its
/// calls are numbered across attempts and lie within its start and end, and
/// the report's wall time is the run's span (no gap before the retried
/// task, nothing past the last task's end).
#[test]
fn a_retried_task_starts_at_its_first_attempt_in_every_export() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("plan.yaml"), RETRIED_PLAN).unwrap();
    ctx(tmp.path())
        .args(["run", "plan.yaml", "--root", "runs", "--command"])
        .arg(SLOW_FIXES_ON_FEEDBACK)
        .assert()
        .success();
    let list: Value = serde_json::from_str(&stdout(
        ctx(tmp.path()).args(["runs", "list", "--root", "runs", "--format", "json"]),
    ))
    .unwrap();
    let id = list[0]["id"].as_str().unwrap().to_string();
    let export = |format: &str| {
        stdout(ctx(tmp.path()).args(["runs", "export", &id, "--root", "runs", "--format", format]))
    };

    let json: Value = serde_json::from_str(&export("json")).unwrap();
    let css = &json["tasks"][0];
    let js = &json["tasks"][1];
    assert_eq!(css["check_attempts"], 2);
    let (css_start, css_end) = (
        ms(css["started_at"].as_str().unwrap()),
        ms(css["ended_at"].as_str().unwrap()),
    );
    // Both answers (300 ms each) ran between the task's start and end.
    assert!(css_end - css_start >= 600, "{css}");
    assert!(ms(js["started_at"].as_str().unwrap()) >= css_end);
    // The calls as stored, numbered across the two check attempts.
    let numbers: Vec<&Value> = css["metadata"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["number"])
        .collect();
    assert_eq!(numbers, [1, 2]);

    let text = export("csv");
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let css_rows: Vec<_> = rows
        .iter()
        .filter(|r| &r[col("task_id")] == "css")
        .collect();
    let numbers: Vec<&str> = css_rows.iter().map(|r| &r[col("attempt")]).collect();
    assert_eq!(numbers, ["1", "2"]);
    let outcomes: Vec<&str> = css_rows
        .iter()
        .map(|r| &r[col("attempt_outcome")])
        .collect();
    assert_eq!(outcomes, ["check_failure", "success"]);
    for row in &css_rows {
        let end = ms(&row[col("attempt_ended_at")]);
        assert!(end <= css_end, "a call ends after its task: {row:?}");
        assert!(ms(&row[col("attempt_started_at")]) >= css_start);
    }

    // The report's wall time: the first task's start to the last task's
    // end (shown to a tenth of a second under a minute).
    let wall = ms(js["ended_at"].as_str().unwrap()) - css_start;
    assert!(wall < 60_000);
    let shown = if wall < 1_000 {
        format!("{wall} ms")
    } else {
        format!("{}.{} s", wall / 1_000, (wall % 1_000) / 100)
    };
    let html = stdout(ctx(tmp.path()).args(["runs", "report", &id, "--root", "runs"]));
    assert!(
        html.contains(&format!("<dt>Wall time</dt><dd>{shown}</dd>")),
        "wall time {shown} not in the report"
    );
}

/// A finished run: a completed (no engine calls recorded), b failed after a
/// retry with errors full of CSV and spreadsheet syntax, c skipped.
fn hostile_run(root: &RunRoot) -> String {
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
    let mut a = TaskExecutionResult::new("a", TaskStatus::Completed);
    a.output = "output of a".into();
    store.store(a).unwrap();
    store
        .store(TaskExecutionResult::new("b", TaskStatus::InProgress))
        .unwrap();
    let mut b = TaskExecutionResult::new("b", TaskStatus::Failed);
    b.error = Some("=HYPERLINK(\"http://evil\",\"x\")".into());
    b.metadata.attempts = vec![
        Attempt {
            number: 1,
            duration_ms: 10,
            outcome: "http_429".into(),
            error: Some("slow down, \"please\"\nline two".into()),
            backoff_ms: Some(100),
            ..Attempt::default()
        },
        Attempt {
            number: 2,
            duration_ms: 11,
            outcome: "exit_1".into(),
            error: Some("@SUM(1+1)".into()),
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
fn csv_has_a_row_per_engine_call_and_quotes_hostile_text() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    let id = hostile_run(&root);
    let text = stdout(ctx(tmp.path()).args(["runs", "export", &id, "--format", "csv"]));
    // RFC 4180: quotes doubled, the line break kept inside a quoted field.
    assert!(
        text.contains("\"slow down, \"\"please\"\"\nline two\""),
        "{text}"
    );
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let cells = |name: &str| -> Vec<String> { rows.iter().map(|r| r[col(name)].into()).collect() };
    assert_eq!(cells("task_id"), ["a", "b", "b", "c"]);
    assert_eq!(
        cells("task_status"),
        ["completed", "failed", "failed", "skipped"]
    );
    assert_eq!(cells("attempt"), ["", "1", "2", ""]);
    assert_eq!(cells("attempt_outcome"), ["", "retry", "error", ""]);
    assert_eq!(cells("attempt_class"), ["", "http_429", "exit_1", ""]);
    assert_eq!(cells("attempt_duration_ms"), ["", "10", "11", ""]);
    assert_eq!(cells("backoff_ms"), ["", "100", "", ""]);
    assert_eq!(cells("final"), ["true", "false", "true", "true"]);
    // The field reads back exactly; formula starts are made inert.
    assert_eq!(
        cells("error"),
        [
            "",
            "slow down, \"please\"\nline two",
            "'@SUM(1+1)",
            "dependency b failed"
        ]
    );
    // b's calls are laid end to end from its start: the second starts
    // after the first call and its backoff.
    let b1 = &rows[1];
    assert_eq!(&b1[col("attempt_started_at")], &b1[col("task_started_at")]);
    assert!(!rows[2][col("attempt_started_at")].is_empty());
    // A skipped task has no times.
    assert_eq!(&rows[3][col("task_started_at")], "");
    // Deterministic.
    assert_eq!(
        stdout(ctx(tmp.path()).args(["runs", "export", &id, "--format", "csv"])),
        text
    );

    // The same run's report keeps the hostile text inert.
    let html = stdout(ctx(tmp.path()).args(["runs", "report", &id]));
    assert_eq!(bars(&html), 2, "a and b started; c was skipped");
    assert!(html.contains("=HYPERLINK(&quot;http://evil&quot;"));

    // An output path taken by a directory: exit 5 (a file that cannot be
    // written) naming it, nothing left.
    std::fs::create_dir(tmp.path().join("taken")).unwrap();
    ctx(tmp.path())
        .args(["runs", "report", &id, "-o", "taken"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("taken"));
    assert_eq!(
        std::fs::read_dir(tmp.path().join("taken")).unwrap().count(),
        0
    );
}

#[test]
fn a_run_being_executed_is_reported_in_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path().join(".ctx/runs"));
    let p = plan();
    // Holding the store holds the run's lock: the run is running.
    let store = root
        .create(&NewRun {
            plan: &p,
            engine: "dry-run",
            plan_source: Some("plan.json"),
            inputs: None,
        })
        .unwrap();
    store
        .store(TaskExecutionResult::new("a", TaskStatus::InProgress))
        .unwrap();
    let mut a = TaskExecutionResult::new("a", TaskStatus::Completed);
    a.output = "A".into();
    store.store(a).unwrap();
    store
        .store(TaskExecutionResult::new("b", TaskStatus::InProgress))
        .unwrap();
    let id = store.run_id().to_string();

    let msg = stdout(ctx(tmp.path()).args(["runs", "report", &id, "-o", "r.html"]));
    assert_eq!(
        msg,
        format!("report of run {id} (3 tasks, still running: a snapshot) written to r.html\n")
    );
    let html = std::fs::read_to_string(tmp.path().join("r.html")).unwrap();
    assert!(html.contains("This run is still in progress"), "no banner");
    assert_eq!(bars(&html), 2, "a done, b running, c pending");

    let json: Value = serde_json::from_str(&stdout(
        ctx(tmp.path()).args(["runs", "export", &id, "--format", "json"]),
    ))
    .unwrap();
    let t = &json["tasks"];
    assert!(t[0]["ended_at"].is_string());
    assert!(t[1]["started_at"].is_string());
    assert_eq!(t[1]["ended_at"], Value::Null, "b has not ended");
    assert_eq!(
        (&t[2]["status"], &t[2]["started_at"]),
        (&Value::from("pending"), &Value::Null)
    );
    drop(store);
}

/// A run whose process died: the task it was executing has a start and no
/// end (its `in_progress` row is not an end) and is shown as interrupted.
#[test]
fn a_crashed_run_has_no_end_for_the_task_it_was_executing() {
    let tmp = tempfile::tempdir().unwrap();
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
    store
        .store(TaskExecutionResult::new("a", TaskStatus::InProgress))
        .unwrap();
    let id = store.run_id().to_string();
    drop(store); // no finish(): the lock is released, no end recorded.

    let json: Value = serde_json::from_str(&stdout(
        ctx(tmp.path()).args(["runs", "export", &id, "--format", "json"]),
    ))
    .unwrap();
    let a = &json["tasks"][0];
    assert_eq!(a["status"], "in_progress");
    assert!(a["started_at"].is_string());
    assert_eq!(a["ended_at"], Value::Null);
    let csv_text = stdout(ctx(tmp.path()).args(["runs", "export", &id, "--format", "csv"]));
    let mut r = csv::Reader::from_reader(csv_text.as_bytes());
    let first = r.records().next().unwrap().unwrap();
    assert_eq!(&first[2], "interrupted");
    assert_eq!(&first[4], "", "no end time");

    let html = stdout(ctx(tmp.path()).args(["runs", "report", &id]));
    assert!(
        !html.contains("still in progress"),
        "a crashed run is not running"
    );
    assert_eq!(bars(&html), 1);
    assert!(html.contains("interrupted"));
}

#[test]
fn reports_of_missing_or_unreadable_runs_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    ctx(tmp.path())
        .args([
            "runs",
            "report",
            "20261130T000000.000Z-deadbeef",
            "-o",
            "r.html",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "run `20261130T000000.000Z-deadbeef` not found",
        ));
    assert!(!tmp.path().join("r.html").exists());

    let bad = tmp.path().join(".ctx/runs/20261130T000000.000Z-0badf11e");
    std::fs::create_dir_all(&bad).unwrap();
    let junk = "plain text, not a database\n".repeat(20);
    std::fs::write(bad.join(STORE_FILE), &junk).unwrap();
    for args in [
        &["runs", "report", "20261130T000000.000Z-0badf11e"][..],
        &[
            "runs",
            "export",
            "20261130T000000.000Z-0badf11e",
            "--format",
            "csv",
        ][..],
    ] {
        ctx(tmp.path())
            .args(args)
            .assert()
            .code(4)
            .stdout("")
            .stderr(predicate::str::contains(
                "0badf11e/store.sqlite: not a SQLite database, or corrupt",
            ));
    }
    assert_eq!(std::fs::read_to_string(bad.join(STORE_FILE)).unwrap(), junk);
}

// --- The report in a real browser -----------------------------------------
// crates/ctx-report/tests/browser.rs covers rendering in depth (hostile
// content, runs in progress, 2,000 tasks); this loads the report the CLI
// wrote from a real stored run. Same rules: skipped with a message without
// a browser, a failure when `CI` is set.

fn browser() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CTX_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).find_map(|dir| {
            ["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .map(|n| dir.join(n))
                .find(|p| p.is_file())
        })
    });
    if found.is_none() {
        let why = "no headless Chromium on PATH and CTX_CHROMIUM unset; install one with scripts/install-chromium.sh";
        assert!(std::env::var_os("CI").is_none(), "{why} (CI is set)");
        eprintln!("SKIPPED (browser part): {why}");
    }
    found
}

struct Loaded {
    dom: String,
    console: Vec<String>,
}

fn load_in_browser(browser: &Path, scratch: &Path, page: &Path) -> Loaded {
    let mut child = Process::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} did not finish within 120 s", browser.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (dom, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(dom.contains("</html>"), "no DOM dumped; stderr:\n{stderr}");
    Loaded {
        dom,
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect(),
    }
}
