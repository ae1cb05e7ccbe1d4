//! Approval gates from the CLI (docs/runs.md, "Approval gates"): a run
//! that stops at a gate (exit 6) and the command that approves it, a
//! decision from a second process taken by a run that waits
//! (`--wait-approval`), rejections, the decisions shown by `ctx runs
//! show` and `ctx runs export`, and every refused decision with its exit
//! code. The weekly fixture's e2e: run, stop at the gate, approve while
//! the run waits, publish, unpublish.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ctx_test_support::{Dir, Out, repo_root};

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

/// The weekly plan's answers: each task's required section, so every
/// check passes (the report's output names `ROUND`, to change it; with
/// `FAIL` set, `facts` fails).
const WEEKLY_ENGINE: &str = r#"[ -n "$FAIL" ] && [ "$CTX_TASK_ID" = facts ] && exit 3
case "$CTX_TASK_ID" in
  facts) printf '## Facts\n\n- a fact\n' ;;
  continuity) printf '## Continuity\n\n- open\n' ;;
  report) printf -- '---\nsummary: "week %s"\n---\n\n## Headline\n\n.\n\n## Signal & Noise\n\n.\n\n## Blind Spots\n\n.\n\n## The Week Ahead\n\n.\n' "${ROUND:-1}" ;;
  *) printf 'note\n' ;;
esac"#;

/// The local store's flags: runs under `runs`.
const LOCAL: &[&str] = &["--root", "runs"];

/// `ctx run` of the weekly fixture (or `--resume RUN`) on the command
/// engine, its report published under `site`, with `extra`.
fn weekly_args(resume: Option<&str>, extra: &[&str]) -> Vec<String> {
    weekly_args_on(LOCAL, resume, extra)
}

/// [`weekly_args`] on the store `store` names (its flags).
fn weekly_args_on(store: &[&str], resume: Option<&str>, extra: &[&str]) -> Vec<String> {
    let weekly = repo_root().join("fixtures/weekly");
    let mut args: Vec<String> = vec!["run".into()];
    match resume {
        Some(run) => args.extend(["--resume".into(), run.into()]),
        None => args.extend([
            weekly.join("plan.yaml").display().to_string(),
            "--var".into(),
            format!("RAW_JSON=@{}", weekly.join("raw/2026-W35.json").display()),
            "--var".into(),
            "WEEK=2026-W35".into(),
            "--date".into(),
            "2026-08-27".into(),
            "--content-root".into(),
            weekly.join("content").display().to_string(),
        ]),
    }
    for a in ["--engine", "command", "--command", WEEKLY_ENGINE]
        .iter()
        .chain(store)
        .chain(&["--publish-root", "site"])
        .chain(extra)
    {
        args.push(a.to_string());
    }
    args
}

fn runs(dir: &Dir, args: &[&str]) -> Out {
    runs_on(dir, LOCAL, args)
}

/// `ctx runs ARGS` on the store `store` names.
fn runs_on(dir: &Dir, store: &[&str], args: &[&str]) -> Out {
    let mut all = vec!["runs"];
    all.extend_from_slice(args);
    all.extend_from_slice(store);
    dir.run(&all)
}

fn published(dir: &Dir) -> Option<String> {
    std::fs::read_to_string(dir.path().join("site/weekly/2026-W35.md")).ok()
}

#[test]
fn the_weekly_report_stops_at_its_gate_is_approved_from_another_process_published_and_undone() {
    weekly_e2e(LOCAL);
}

#[test]
fn the_weekly_e2e_on_the_shared_store() {
    let Some(url) = pg::fresh_db("run_gates_weekly") else {
        return;
    };
    weekly_e2e(&["--store", &url]);
}

/// The weekly fixture's e2e on the store `store` names: run; stop at the
/// report's gate (exit 6); a resume waits with `--wait-approval` while a
/// second process approves; it publishes; the run shows and exports the
/// decision, refuses a second one; unpublish.
fn weekly_e2e(store: &[&str]) {
    let dir = Dir::new();
    std::fs::create_dir(dir.path().join("site")).unwrap();
    let runs = |args: &[&str]| runs_on(&dir, store, args);
    // Run: every task completes; the report waits for its approval.
    let first = dir.run(&weekly_args_on(store, None, &[]));
    assert_eq!(first.code, 6, "{}\n{}", first.stdout, first.stderr);
    let id = first.run_id();
    assert!(published(&dir).is_none(), "published before approval");
    assert!(
        first.stdout.contains("7 tasks: 7 completed"),
        "{}",
        first.stdout
    );
    assert!(
        first.stdout.contains(
            "waiting for approval:\n  report (before publish): Read the report before it goes into the archive.\n"
        ),
        "{}",
        first.stdout
    );
    assert!(
        first
            .stdout
            .contains(&format!("approve: ctx runs approve {id} report"))
    );
    let shown = runs(&["show", &id, "--format", "json"]);
    assert_eq!(shown.json()["waiting"][0]["task_id"], "report");

    // Resume, waiting; a second process approves while it waits.
    let mut waiting = Command::new(assert_cmd::cargo::cargo_bin("ctx"))
        .args(weekly_args_on(
            store,
            Some(&id),
            &["--wait-approval", "60s"],
        ))
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(waiting.try_wait().unwrap().is_none(), "it did not wait");
    assert!(published(&dir).is_none());
    let approved = runs(&["approve", &id, "report", "--note", "read it", "--by", "ana"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert!(
        approved
            .stdout
            .starts_with("approved report (before publish, output ")
    );
    let t0 = Instant::now();
    let out = waiting.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the decision was taken late"
    );
    assert!(stdout.contains("published report -> "), "{stdout}");
    assert!(published(&dir).unwrap().contains("summary: \"week 1\""));

    // Shown with the run, its export, and refused a second time.
    let shown = runs(&["show", &id, "--format", "json"]);
    let d = &shown.json()["decisions"][0];
    assert_eq!(
        (d["verdict"].as_str(), d["by"].as_str()),
        (Some("approve"), Some("ana"))
    );
    assert_eq!(d["stage"], "publish");
    assert_eq!(d["note"], "read it");
    assert!(shown.json().get("waiting").is_none());
    let text = runs(&["show", &id]);
    assert!(
        text.stdout
            .contains("decisions:\n  approve report (before publish) by ana at "),
        "{}",
        text.stdout
    );
    let export = runs(&["export", &id]);
    assert_eq!(
        export.json()["decisions"][0]["output_sha256"],
        d["output_sha256"]
    );
    let again = runs(&["approve", &id, "report"]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("is already settled: approve by ana"),
        "{}",
        again.stderr
    );

    // Undone: the archive is as it was.
    let undone = runs(&["unpublish", &id]);
    assert_eq!(undone.code, 0, "{}", undone.stderr);
    assert!(published(&dir).is_none());
}

#[test]
fn an_approval_names_its_output_and_a_rerun_with_another_output_waits_again() {
    let dir = Dir::new();
    let first = dir.run(&weekly_args(None, &[]));
    let id = first.run_id();
    assert_eq!(runs(&dir, &["approve", &id, "report"]).code, 0);
    // The report runs again and answers otherwise: the approval was of
    // the first output, so the second waits.
    let mut again = dir.ctx();
    again
        .args(weekly_args(Some(&id), &["--rerun", "report"]))
        .env("ROUND", "2");
    let again = Out::of(&mut again);
    assert_eq!(again.code, 6, "{}\n{}", again.stdout, again.stderr);
    assert!(published(&dir).is_none());
    // `ctx runs publish` holds it back too, and names the command.
    let held = runs(&dir, &["publish", &id, "--publish-root", "site"]);
    assert_eq!(held.code, 6, "{}", held.stderr);
    assert!(
        held.stderr
            .contains(&format!("ctx runs approve {id} report"))
    );
    assert_eq!(runs(&dir, &["approve", &id, "report"]).code, 0);
    let done = runs(&dir, &["publish", &id, "--publish-root", "site"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(published(&dir).unwrap().contains("week 2"));
}

#[test]
fn a_rejected_output_is_kept_and_never_published() {
    let dir = Dir::new();
    let id = dir.run(&weekly_args(None, &[])).run_id();
    let bare = runs(&dir, &["reject", &id, "report"]);
    assert_eq!(bare.code, 2, "a rejection needs --note: {}", bare.stderr);
    let no = runs(
        &dir,
        &["reject", &id, "report", "--note", "numbers are stale"],
    );
    assert_eq!(no.code, 0, "{}", no.stderr);
    let resumed = dir.run(&weekly_args(Some(&id), &[]));
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed
            .stdout
            .contains("not published: report: rejected by "),
        "{}",
        resumed.stdout
    );
    assert!(resumed.stdout.contains(": numbers are stale"));
    assert!(published(&dir).is_none());
    let publish = runs(&dir, &["publish", &id, "--publish-root", "site"]);
    assert_eq!(publish.code, 0, "{}", publish.stderr);
    assert!(published(&dir).is_none());
    // Kept in the store: the rejected output is there to read.
    let kept = runs(&dir, &["show", &id, "--task", "report"]);
    assert!(
        kept.stdout.contains("summary: \"week 1\""),
        "{}",
        kept.stdout
    );
}

/// `a -> b (before: run) -> c`, and `d` on its own.
const RUN_GATE: &str = "schema_version: 1
sub_tasks:
  - id: a
    description: A
    tool_or_prompt: {name: inference, params: {prompt: do a}}
  - id: b
    description: B
    dependencies: [a]
    approval: {before: run, message: Check a's output first}
    tool_or_prompt: {name: inference, params: {prompt: do b}}
  - id: c
    description: C
    dependencies: [b]
    tool_or_prompt: {name: inference, params: {prompt: do c}}
  - id: d
    description: D
    tool_or_prompt: {name: inference, params: {prompt: do d}}
";

const ECHO: &str = "echo \"$CTX_TASK_ID\"; echo \"$CTX_TASK_ID\" >> calls.txt";

/// `ctx run --resume RUN` on [`ECHO`], with `extra`.
fn resume(dir: &Dir, id: &str, extra: &[&str]) -> Out {
    resume_on(dir, LOCAL, id, extra)
}

/// A resume's JSON summary after `b`'s gate was rejected with the note
/// `a is wrong`: `b` failed with it, `c` below it skipped (exit 1).
fn rejected_below(resumed: &Out) {
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    let json = resumed.json();
    let b = ctx_test_support::task(&json, "b");
    assert_eq!(b["status"], "failed");
    assert!(
        b["error"].as_str().unwrap().ends_with(": a is wrong"),
        "{b}"
    );
    assert_eq!(ctx_test_support::task(&json, "c")["status"], "skipped");
}

/// [`resume`] on the store `store` names.
fn resume_on(dir: &Dir, store: &[&str], id: &str, extra: &[&str]) -> Out {
    let mut args = vec![
        "run",
        "--resume",
        id,
        "--engine",
        "command",
        "--command",
        ECHO,
    ];
    args.extend_from_slice(store);
    args.extend_from_slice(extra);
    dir.run(&args)
}

/// The tasks [`ECHO`] ran, sorted.
fn calls(dir: &Dir) -> Vec<String> {
    let text = std::fs::read_to_string(dir.path().join("calls.txt")).unwrap();
    let mut calls: Vec<String> = text.lines().map(str::to_string).collect();
    calls.sort();
    calls
}

#[test]
fn a_run_gate_holds_its_task_until_approved_and_the_other_branches_go_on() {
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    let first = dir.run_command(ECHO, &["--root", "runs"]);
    assert_eq!(first.code, 6, "{}\n{}", first.stdout, first.stderr);
    let id = first.run_id();
    assert!(
        first
            .stdout
            .contains("  b (before run): Check a's output first\n"),
        "{}",
        first.stdout
    );
    assert!(
        first
            .stdout
            .contains(&format!("approve: ctx runs approve {id} b"))
    );
    assert_eq!(calls(&dir), ["a", "d"]);
    let shown = runs(&dir, &["show", &id, "--format", "json"]);
    let status = |j: &serde_json::Value, t: &str| {
        ctx_test_support::task(j, t)["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(status(&shown.json(), "b"), "pending");
    assert_eq!(status(&shown.json(), "c"), "pending");

    // Nothing but its own gate is decided: an approval of `c` is refused.
    assert_eq!(runs(&dir, &["approve", &id, "c"]).code, 2);
    assert_eq!(runs(&dir, &["approve", &id, "b"]).code, 0);
    let resumed = resume(&dir, &id, &[]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert_eq!(calls(&dir), ["a", "b", "c", "d"]);
    // It ran: a decision now is refused, the gate is not waiting.
    let late = runs(&dir, &["reject", &id, "b", "--note", "too late"]);
    assert_eq!(late.code, 1, "{}", late.stderr);
    assert!(
        late.stderr
            .contains("is not waiting for approval (before: run): it already ran")
    );
}

#[test]
fn a_rejected_run_gate_fails_with_its_note_and_skips_below() {
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    let id = dir.run_command(ECHO, &["--root", "runs"]).run_id();
    let no = runs(
        &dir,
        &["reject", &id, "b", "--note", "a is wrong", "--by", "ana"],
    );
    assert_eq!(no.code, 0, "{}", no.stderr);
    assert!(
        no.stdout.starts_with("rejected b (before run) by ana at "),
        "{}",
        no.stdout
    );
    assert!(no.stdout.ends_with(": a is wrong\n"), "{}", no.stdout);
    rejected_below(&resume(&dir, &id, &["--format", "json"]));
    let calls = std::fs::read_to_string(dir.path().join("calls.txt")).unwrap();
    assert!(!calls.contains('b') && !calls.contains('c'), "{calls}");
}

#[test]
fn a_decision_recorded_while_the_run_executes_earlier_tasks_counts() {
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    // `a` takes a while; the decision on `b` lands meanwhile, before the
    // run reaches the gate: no window in which it is lost.
    let slow = "if [ \"$CTX_TASK_ID\" = a ]; then sleep 2; fi; echo \"$CTX_TASK_ID\"";
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("ctx"))
        .args([
            "run",
            "plan.yaml",
            "--engine",
            "command",
            "--command",
            slow,
            "--root",
            "runs",
            "--run-dir",
            "runs/r1",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Approved as soon as the run directory holds a run (while `a` runs).
    let t0 = Instant::now();
    let approved = loop {
        let out = runs(&dir, &["approve", "runs/r1", "b"]);
        // Not there yet (exit 2), or being initialised (exit 4).
        let early = out.code == 2 || out.stderr.contains("never initialised");
        if !early || t0.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "approved after `a` ended"
    );
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn two_decisions_at_once_one_wins_and_the_other_is_told() {
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    let id = dir.run_command(ECHO, &["--root", "runs"]).run_id();
    let spawn = |verb: &str| {
        Command::new(assert_cmd::cargo::cargo_bin("ctx"))
            .args(["runs", verb, &id, "b", "--note", verb, "--root", "runs"])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (spawn("approve"), spawn("reject"));
    let outs = [
        one.wait_with_output().unwrap(),
        two.wait_with_output().unwrap(),
    ];
    let mut codes: Vec<_> = outs.iter().map(|o| o.status.code().unwrap()).collect();
    codes.sort_unstable();
    assert_eq!(codes, [0, 1]);
    let loser = outs.iter().find(|o| o.status.code() == Some(1)).unwrap();
    assert!(String::from_utf8_lossy(&loser.stderr).contains("is already settled"));
    let shown = runs(&dir, &["show", &id, "--format", "json"]);
    assert_eq!(shown.json()["decisions"].as_array().unwrap().len(), 1);
}

#[test]
fn refused_decisions_are_named_with_their_exit_codes() {
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    let id = dir.run_command(ECHO, &["--root", "runs"]).run_id();
    for (run, task, code, says) in [
        ("nope", "b", 2, "run `nope` not found"),
        (id.as_str(), "zz", 2, "no task `zz` in its plan"),
        (id.as_str(), "a", 2, "task `a` has no approval gate"),
    ] {
        let out = runs(&dir, &["approve", run, task]);
        assert_eq!(out.code, code, "{}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
    }
    // A publish gate with no output yet (the run failed) is not waiting.
    let weekly = Dir::new();
    let mut failing = weekly.ctx();
    failing.args(weekly_args(None, &[])).env("FAIL", "1");
    let failed = Out::of(&mut failing);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    let early = runs(&weekly, &["approve", &failed.run_id(), "report"]);
    assert_eq!(early.code, 1, "{}", early.stderr);
    assert!(
        early
            .stderr
            .contains("is not waiting for approval (before: publish): it was skipped"),
        "{}",
        early.stderr
    );
}

#[test]
fn wait_approval_times_out_with_the_waiting_code() {
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    let t0 = Instant::now();
    let out = dir.run_command(ECHO, &["--root", "runs", "--wait-approval", "1s"]);
    assert_eq!(out.code, 6, "{}", out.stderr);
    assert!(t0.elapsed() >= Duration::from_secs(1));
    let memory = dir.run_command(ECHO, &["--no-store", "--wait-approval", "1s"]);
    assert_eq!(memory.code, 2, "{}", memory.stderr);
    assert!(
        memory
            .stderr
            .contains("--wait-approval: a run in memory keeps no decisions")
    );
}

#[test]
fn an_approval_on_a_task_without_publish_is_a_located_plan_finding() {
    let dir = Dir::new();
    let plan = dir.write(
        "plan.yaml",
        "schema_version: 1
sub_tasks:
  - id: a
    description: A
    approval: {before: publish}
    tool_or_prompt: {name: inference, params: {prompt: do a}}
",
    );
    let out = dir.run(&["plan", "check", plan.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("plan.yaml:5:"), "{all}");
    assert!(all.contains("sub_tasks[0].approval.before"), "{all}");
    assert!(all.contains("has no `publish` path"), "{all}");
}

#[test]
fn an_eval_over_a_gated_plan_never_waits() {
    let dir = Dir::new();
    // An eval measures checks.
    dir.write(
        "plan.yaml",
        &format!("{RUN_GATE}config:\n  checks:\n    - regex: \".\"\n"),
    );
    let t0 = Instant::now();
    let out = dir.run(&[
        "eval",
        "plan.yaml",
        "--engine",
        "command",
        "--command",
        ECHO,
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(t0.elapsed() < Duration::from_secs(30));
    let calls = std::fs::read_to_string(dir.path().join("calls.txt")).unwrap();
    assert!(calls.contains("b\n") && calls.contains("c\n"), "{calls}");
}

/// A `before: run` gate on the shared store: no worker claims the task
/// before a decision; the session ends waiting (exit 6); an approval
/// from another process lets a resume run it; a rejection fails a task
/// and skips below it.
#[test]
fn a_run_gate_on_the_shared_store_is_claimed_only_once_decided() {
    let Some(url) = pg::fresh_db("run_gates_shared") else {
        return;
    };
    let store = ["--store", url.as_str()];
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    let first = dir.run_command(ECHO, &store);
    assert_eq!(first.code, 6, "{}\n{}", first.stdout, first.stderr);
    let id = first.run_id();
    assert!(
        first
            .stdout
            .contains("  b (before run): Check a's output first\n"),
        "{}",
        first.stdout
    );
    assert_eq!(calls(&dir), ["a", "d"]);
    assert_eq!(runs_on(&dir, &store, &["approve", &id, "c"]).code, 2);
    let approved = runs_on(&dir, &store, &["approve", &id, "b", "--by", "ana"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let resumed = resume_on(&dir, &store, &id, &[]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert_eq!(calls(&dir), ["a", "b", "c", "d"]);
    let shown = runs_on(&dir, &store, &["show", &id, "--format", "json"]);
    assert_eq!(shown.json()["decisions"][0]["by"], "ana");

    // A rejection: the task fails with its note, what is below skipped.
    let other = Dir::new();
    other.write("plan.yaml", RUN_GATE);
    let id = other.run_command(ECHO, &store).run_id();
    let no = runs_on(
        &other,
        &store,
        &["reject", &id, "b", "--note", "a is wrong"],
    );
    assert_eq!(no.code, 0, "{}", no.stderr);
    let again = runs_on(&other, &store, &["approve", &id, "b"]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    rejected_below(&resume_on(&other, &store, &id, &["--format", "json"]));
    assert_eq!(calls(&other), ["a", "d"]);
}

/// On the shared store a run that waits (`--wait-approval`) on a
/// `before: run` gate is woken by the decision's notification and goes
/// on at once.
#[test]
fn a_shared_run_waiting_on_a_gate_goes_on_when_another_process_approves() {
    let Some(url) = pg::fresh_db("run_gates_wait") else {
        return;
    };
    let dir = Dir::new();
    dir.write("plan.yaml", RUN_GATE);
    let err = dir.path().join("waiting.err");
    let waiting = Command::new(assert_cmd::cargo::cargo_bin("ctx"))
        .args(["run", "plan.yaml", "--engine", "command", "--command", ECHO])
        .args(["--store", &url, "--wait-approval", "60s"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // Approved once `a` and `d` ran and the run waits on `b`.
    let t0 = Instant::now();
    while !std::fs::read_to_string(dir.path().join("calls.txt"))
        .is_ok_and(|c| c.lines().count() == 2)
    {
        assert!(t0.elapsed() < Duration::from_secs(30), "a and d never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let id = ctx_test_support::run_id(&std::fs::read_to_string(&err).unwrap());
    let approved = runs_on(&dir, &["--store", &url], &["approve", &id, "b"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let out = waiting.wait_with_output().unwrap();
    let said = std::fs::read_to_string(&err).unwrap();
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert_eq!(calls(&dir), ["a", "b", "c", "d"]);
}
