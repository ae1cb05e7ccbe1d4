//! `ctx run --resume RUN --rerun TASK`: the task and everything below it
//! run again, the rest is reused, and `ctx runs diff RUN@N RUN` compares
//! the run before and after. The engine echoes each prompt, then the file
//! `noise`: a test changes it to see which tasks ran again; a task named
//! in the file `fail` fails. On a run
//! directory, and on the shared PostgreSQL store (that test skips without
//! `CTX_TEST_POSTGRES_URL`, and fails in CI).

use ctx_test_support::{Dir, Out};
use serde_json::Value;

#[path = "support/diff_json.rs"]
mod diff_json;

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

/// The run directories' root every local run of these tests is stored in.
const LOCAL: [&str; 2] = ["--root", "runs"];

/// `a` -> `b` -> `c`; `d` apart; `scan` maps over LIST and `sum` reads it.
const PLAN: &str = r#"
schema_version: 1
variables:
  - {name: LIST, type: json, default: '["x", "y"]'}
sub_tasks:
  - id: a
    description: A
    tool_or_prompt: {name: inference, params: {prompt: "A"}}
  - id: b
    description: B
    dependencies: [a]
    tool_or_prompt: {name: inference, params: {prompt: "B"}}
  - id: c
    description: C
    dependencies: [b]
    tool_or_prompt: {name: inference, params: {prompt: "C"}}
  - id: d
    description: D
    tool_or_prompt: {name: inference, params: {prompt: "D"}}
  - id: scan
    description: Scan
    map: {over: LIST, as: ITEM, max_items: 5}
    tool_or_prompt:
      name: inference
      params:
        prompt: "Read\n<untrusted-content>\n{{ITEM}}\n</untrusted-content>\n"
  - id: sum
    description: Sum
    dependencies: [scan]
    tool_or_prompt: {name: inference, params: {prompt: "Sum"}}
"#;

fn setup() -> Dir {
    let d = Dir::new();
    d.write("plan.yaml", PLAN);
    d
}

/// `ctx run plan.yaml` on the echoing engine, on the store `store` (its
/// flags), with `extra`.
fn run_text_on(d: &Dir, store: &[&str], extra: &[&str]) -> Out {
    let command = format!(
        "grep -qxF \"$CTX_TASK_ID\" '{0}/fail' 2>/dev/null && exit 3; cat; cat '{0}/noise' 2>/dev/null || true",
        d.path().display()
    );
    let mut args = vec![
        "run",
        "plan.yaml",
        "--engine",
        "command",
        "--command",
        &command,
    ];
    args.extend_from_slice(store);
    args.extend_from_slice(extra);
    d.run(&args)
}

/// [`run_text_on`] with `--format json`.
fn run_on(d: &Dir, store: &[&str], extra: &[&str]) -> Out {
    let mut args = vec!["--format", "json"];
    args.extend_from_slice(extra);
    run_text_on(d, store, &args)
}

/// [`run_on`] the local root.
fn run(d: &Dir, extra: &[&str]) -> Out {
    run_on(d, &LOCAL, extra)
}

/// `ctx runs diff A B --format json` on the store `store` (its flags).
fn diff_on(d: &Dir, store: &[&str], a: &str, b: &str) -> Value {
    let mut args = vec!["runs", "diff", a, b, "--format", "json"];
    args.extend_from_slice(store);
    let out = d.run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

/// The tasks a run executed (not reused), sorted.
fn executed(out: &Out) -> Vec<String> {
    let mut ids: Vec<String> = out.json()["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

fn change(json: &Value, id: &str) -> String {
    let t = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {json}"));
    let causes = diff_json::causes_of(t);
    format!("{} {}", t["change"].as_str().unwrap(), causes.join(","))
}

#[test]
fn a_rerun_runs_the_task_and_what_is_below_it_and_diffs_before_and_after() {
    let d = setup();
    a_rerun_on(&d, &LOCAL);
}

/// The same on the shared store: the tasks forced and those below them
/// are reset for the workers in the resume's transaction, the map forced
/// takes none of its stored items, and the session before reads back as
/// `RUN@N`.
#[test]
fn a_rerun_on_the_shared_store_runs_what_is_below_it_and_diffs_before_and_after() {
    let Some(url) = pg::fresh_db("run_rerun_shared") else {
        return;
    };
    let d = setup();
    a_rerun_on(&d, &["--store", &url]);
}

/// `--rerun b`, then `--rerun scan --rerun d`, on the store `store`, each
/// compared with the session before.
fn a_rerun_on(d: &Dir, store: &[&str]) {
    let (run, run_text) = (
        |extra: &[&str]| run_on(d, store, extra),
        |extra: &[&str]| run_text_on(d, store, extra),
    );
    let first = run(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.run_id();
    let unknown = run(&["--resume", &id, "--rerun", "B"]);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(
        unknown
            .stderr
            .contains("--rerun B: no such task in the plan (near: b)"),
        "{}",
        unknown.stderr
    );

    let dry = run_text(&["--resume", &id, "--dry-run", "--rerun", "b"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("rerun   b     --rerun asked"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("rerun   c     upstream b re-runs"),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("reuse   a"), "{}", dry.stdout);

    d.write("noise", "again\n");
    let again = run(&["--resume", &id, "--rerun", "b"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    // A map task expands again on every resume; its items are reused.
    assert_eq!(executed(&again), ["b", "c", "scan"]);

    // The run before the resume (session 1) and after it.
    let before = format!("{id}@1");
    let json = diff_on(d, store, &before, &id);
    assert_eq!(json["a"]["run_id"], before.as_str());
    assert_eq!(change(&json, "b"), "output same_inputs");
    assert_eq!(change(&json, "c"), "output dependency b");
    assert_eq!(change(&json, "a"), "same ");
    assert_eq!(change(&json, "d"), "same ");
    assert_eq!(change(&json, "scan[1]"), "same ");
    let mut gate = vec!["runs", "diff", &before, &id, "--fail-on", "output"];
    gate.extend_from_slice(store);
    let gate = d.run(&gate);
    assert_eq!(gate.code, 1, "{}", gate.stderr);

    // Repeated, and through a map: every item and the reduce run again.
    d.write("noise", "third\n");
    let dry = run_text(&["--resume", &id, "--dry-run", "--rerun", "scan"]);
    assert!(
        dry.stdout.contains("rerun   sum   upstream scan re-runs"),
        "{}",
        dry.stdout
    );
    let map = run(&["--resume", &id, "--rerun", "scan", "--rerun", "d"]);
    assert_eq!(map.code, 0, "{}", map.stderr);
    assert_eq!(executed(&map), ["d", "scan", "scan[0]", "scan[1]", "sum"]);
    let json = diff_on(d, store, &format!("{id}@2"), &id);
    assert_eq!(change(&json, "scan[0]"), "output same_inputs");
    assert_eq!(change(&json, "b"), "same ");
    // The first session still reads as it stood.
    let json = diff_on(d, store, &before, &id);
    assert_eq!(change(&json, "c"), "output dependency b");
}

/// A task a failure skipped reads as skipped in the session before, on
/// either store.
#[test]
fn a_skipped_task_reads_as_skipped_in_the_session_before() {
    let d = setup();
    skipped_before(&d, &LOCAL);
    let Some(url) = pg::fresh_db("run_rerun_skipped") else {
        return;
    };
    let d = setup();
    skipped_before(&d, &["--store", &url]);
}

/// `a` fails (`b` and `c` are skipped), then a resume completes them.
fn skipped_before(d: &Dir, store: &[&str]) {
    d.write("fail", "a\n");
    let first = run_on(d, store, &[]);
    assert_eq!(first.code, 1, "{}", first.stderr);
    let id = first.run_id();
    d.write("fail", "");
    let again = run_on(d, store, &["--resume", &id]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let json = diff_on(d, store, &format!("{id}@1"), &id);
    let status = |t: &str| {
        let t = json["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == t)
            .unwrap();
        format!("{} -> {}", t["status"]["a"], t["status"]["b"])
    };
    assert_eq!(status("a"), r#""failed" -> "completed""#);
    assert_eq!(status("c"), r#""skipped" -> "completed""#);
}

#[test]
fn bad_reruns_are_refused_before_anything_runs() {
    let d = setup();
    let first = run(&d, &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.run_id();

    // (`--rerun B`, near `b`: `a_rerun_on`, on either store.)
    let none = run(&d, &["--resume", &id, "--rerun", "zzz"]);
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(
        none.stderr
            .contains("--rerun zzz: no such task in the plan\n"),
        "{}",
        none.stderr
    );
    let near = run(&d, &["--resume", &id, "--rerun", "scn"]);
    assert_eq!(near.code, 2);
    assert!(near.stderr.contains("(near: scan)"), "{}", near.stderr);
    // Nothing was recorded: the run still has one session.
    let no_session = d.run(&["runs", "diff", "--root", "runs", &format!("{id}@2"), &id]);
    assert_eq!(no_session.code, 2, "{}", no_session.stderr);
    assert!(
        no_session.stderr.contains("has 1 session(s): no session 2"),
        "{}",
        no_session.stderr
    );

    let no_resume = run(&d, &["--rerun", "b"]);
    assert_eq!(no_resume.code, 2, "{}", no_resume.stderr);
    assert!(
        no_resume.stderr.contains("--resume"),
        "{}",
        no_resume.stderr
    );
}
