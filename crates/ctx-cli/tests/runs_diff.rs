//! `ctx runs diff A B`: two runs of a plan made with the command engine,
//! compared. The engine echoes each prompt, then the file `noise` (the
//! model's variance, as a test can script it); task `count` answers
//! `bad` while the file `break` exists, which fails its check.

use ctx_test_support::Out;
use serde_json::Value;

#[cfg(unix)]
#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

#[cfg(unix)]
#[path = "support/shared_cli.rs"]
mod shared_cli;

#[path = "support/diff_json.rs"]
mod diff_json;

/// `facts` reads WEEK, `tone` reads TONE (default `plain`), `report`
/// depends on both, `count` has a check and `extra` is plain.
const PLAN: &str = r#"
schema_version: 1
variables:
  - {name: WEEK, class: trusted}
  - {name: TONE, class: trusted, default: plain}
sub_tasks:
  - id: facts
    description: Facts
    tool_or_prompt: {name: inference, params: {prompt: "Facts of {{WEEK}}"}}
  - id: tone
    description: Tone
    tool_or_prompt: {name: inference, params: {prompt: "Be {{TONE}}"}}
  - id: report
    description: Report
    dependencies: [facts, tone]
    tool_or_prompt: {name: inference, params: {prompt: "Report"}}
  - id: count
    description: Count
    checks: [{contains: "OK"}]
    tool_or_prompt: {name: inference, params: {prompt: "Say OK"}}
  - id: extra
    description: Extra
    tool_or_prompt: {name: inference, params: {prompt: "Extra"}}
"#;

struct Dir(ctx_test_support::Dir);

impl Dir {
    fn new() -> Dir {
        let d = Dir(ctx_test_support::Dir::new());
        d.0.write("plan.yaml", PLAN);
        d
    }

    fn command(&self) -> String {
        format!(
            r#"if [ "$CTX_TASK_ID" = count ] && [ -e '{dir}/break' ]; then echo bad; else cat; cat '{dir}/noise' 2>/dev/null || true; fi"#,
            dir = self.0.path().display()
        )
    }

    /// Runs the plan with `--var WEEK=week` and returns the run's id.
    fn run(&self, week: &str) -> String {
        let week = format!("WEEK={week}");
        let out = self.0.run(&[
            "run",
            "plan.yaml",
            "--root",
            "runs",
            "--engine",
            "command",
            "--command",
            &self.command(),
            "--var",
            &week,
        ]);
        assert!(out.code <= 1, "{}", out.stderr);
        out.run_id()
    }

    fn diff(&self, args: &[&str]) -> Out {
        let mut all = vec!["runs", "diff", "--root", "runs"];
        all.extend_from_slice(args);
        self.0.run(&all)
    }
}

fn task<'a>(json: &'a Value, id: &str) -> &'a Value {
    json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {json}"))
}

fn causes(json: &Value, id: &str) -> Vec<String> {
    diff_json::causes_of(task(json, id))
}

#[test]
fn a_changed_variable_and_a_changed_dependency_output_are_named() {
    let d = Dir::new();
    let a = d.run("W1");
    d.0.write("noise", "again\n");
    let b = d.run("W2");
    let out = d.diff(&[&a, &b, "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    assert_eq!(causes(&json, "facts"), ["variable WEEK"]);
    // Same prompt, other output: the model's variance.
    assert_eq!(causes(&json, "tone"), ["same_inputs"]);
    assert_eq!(causes(&json, "extra"), ["same_inputs"]);
    assert_eq!(
        causes(&json, "report"),
        ["dependency facts", "dependency tone"]
    );
    assert_eq!(task(&json, "facts")["change"], "output");
    let similarity = task(&json, "facts")["output"]["similarity"]
        .as_f64()
        .unwrap();
    assert!(similarity > 0.5 && similarity < 1.0, "{similarity}");
    assert_eq!(json["summary"]["output"], 5);
    assert_eq!(json["a"]["run_id"], a.as_str());

    // The text: the summary, then the table, causes in words.
    let text = d.diff(&[&a, &b]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("5 tasks: 0 same, 5 output changed, 0 checks changed"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("variable WEEK"), "{}", text.stdout);
    assert!(
        text.stdout.contains("output of facts, output of tone"),
        "{}",
        text.stdout
    );

    // One task in full, with its unified diff.
    let one = d.diff(&[&a, &b, "--task", "facts"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert!(
        one.stdout.contains(
            "@@ -1 +1 @@\n-Facts of W1\n\\ No newline at end of file\n+Facts of W2again\n"
        ),
        "{}",
        one.stdout
    );
    assert!(
        one.stdout.contains("--- a/facts\n+++ b/facts\n"),
        "{}",
        one.stdout
    );
    let unknown = d.diff(&[&a, &b, "--task", "nope"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("no task `nope`"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn the_gate_exits_1_naming_each_condition_that_holds() {
    let d = Dir::new();
    let a = d.run("W1");
    d.0.write("break", "");
    let b = d.run("W1");
    // Nothing but `count` changed.
    let out = d.diff(&[
        &a,
        &b,
        "--fail-on",
        "check-regression,status",
        "--fail-on",
        "output",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("fail-on check-regression: count"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("fail-on status: count"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("fail-on output: count"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("checks regressed: count"),
        "{}",
        out.stdout
    );
    // The same runs the other way round: a fix, nothing regressed.
    let back = d.diff(&[&b, &a, "--fail-on", "check-regression,status"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    // A run against itself holds no condition.
    let same = d.diff(&[
        &a,
        &a,
        "--fail-on",
        "check-regression,status,output,cost:+0%,time:+0%",
    ]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(same.stderr.is_empty(), "{}", same.stderr);
}

#[test]
fn a_task_missing_from_b_counts_as_a_regression() {
    let d = Dir::new();
    let a = d.run("W1");
    d.0.write("plan.yaml", &PLAN.replace(
        "  - id: extra\n    description: Extra\n    tool_or_prompt: {name: inference, params: {prompt: \"Extra\"}}\n",
        "",
    ));
    let b = d.run("W1");
    let out = d.diff(&[&a, &b, "--fail-on", "status", "--format", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("fail-on status: extra"),
        "{}",
        out.stderr
    );
    let json = out.json();
    assert_eq!(task(&json, "extra")["change"], "removed");
    assert_eq!(task(&json, "extra")["status"]["b"], Value::Null);
    assert_eq!(json["summary"]["removed"], 1);
}

#[test]
fn bad_input_is_refused_with_exit_2() {
    let d = Dir::new();
    let a = d.run("W1");
    // Another plan, no task in common.
    d.0.write(
        "plan.yaml",
        "schema_version: 1\nsub_tasks:\n  - {id: other, description: O, tool_or_prompt: {name: inference, params: {prompt: o}}}\n",
    );
    let out = d.0.run(&[
        "run",
        "plan.yaml",
        "--root",
        "runs",
        "--engine",
        "command",
        "--command",
        "cat",
    ]);
    let b = out.run_id();
    let disjoint = d.diff(&[&a, &b]);
    assert_eq!(disjoint.code, 2, "{}", disjoint.stderr);
    assert!(
        disjoint.stderr.contains("no task in common"),
        "{}",
        disjoint.stderr
    );
    assert!(
        disjoint.stderr.contains("--allow-disjoint"),
        "{}",
        disjoint.stderr
    );
    let allowed = d.diff(&[&a, &b, "--allow-disjoint", "--format", "json"]);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    assert_eq!(allowed.json()["summary"]["new"], 1);

    let bad = d.diff(&[&a, &a, "--fail-on", "status,regressions"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("unknown condition `regressions`"),
        "{}",
        bad.stderr
    );
    let bad = d.diff(&[&a, &a, "--fail-on", "cost:20"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("`cost:20`"), "{}", bad.stderr);
    let unknown = d.diff(&[&a, "no-such-run"]);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("no-such-run"), "{}", unknown.stderr);
}

/// The same comparison on the shared store: two runs of the plan made
/// with `ctx run --store URL` (this process the one worker), compared with
/// `ctx runs diff --store URL`. Skips without PostgreSQL (fails in CI).
#[cfg(unix)]
#[test]
fn two_shared_runs_compare_as_two_local_ones() {
    let Some(url) = pg::fresh_db("runs_diff") else {
        return;
    };
    let d = Dir::new();
    let run = |week: &str| {
        let out = shared_cli::ctx()
            .current_dir(d.0.path())
            .args([
                "run",
                "plan.yaml",
                "--store",
                &url,
                "--engine",
                "command",
                "--command",
            ])
            .arg(d.command())
            .args(["--var", &format!("WEEK={week}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(0), "{err}");
        shared_cli::run_id_from_text(&err)
    };
    let a = run("W1");
    let b = run("W2");
    let diff = |args: &[&str]| {
        let out = shared_cli::ctx()
            .args(["runs", "diff", "--store", &url])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stdout, stderr) = diff(&[&a, &b, "--format", "json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(causes(&json, "facts"), ["variable WEEK"]);
    assert_eq!(causes(&json, "report"), ["dependency facts"]);
    assert_eq!(task(&json, "tone")["change"], "same");
    assert_eq!(json["summary"]["output"], 2);
    let (code, _, stderr) = diff(&[&a, &b, "--fail-on", "output"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("fail-on output: facts, report"), "{stderr}");
    let (code, _, stderr) = diff(&[&a, "no-such-run"]);
    assert_eq!(code, Some(2), "{stderr}");
    // A local run against a shared one: run A under --root, B in the store.
    let local = d.run("W1");
    let out = shared_cli::ctx()
        .current_dir(d.0.path())
        .args([
            "runs",
            "diff",
            &local,
            &b,
            "--root",
            "runs",
            "--b-store",
            &url,
        ])
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(causes(&json, "facts"), ["variable WEEK"]);
    assert_eq!(task(&json, "tone")["change"], "same");
}

/// A map's items match by content: an item put in front of the list moves
/// the others down one index, and each is compared with itself; an item
/// whose content changed is compared with the item of its id, if that one
/// was not taken by its content, and names `item` as its cause.
#[test]
fn map_items_match_by_content_hash() {
    let d = ctx_test_support::Dir::new();
    d.write(
        "plan.yaml",
        r#"
schema_version: 1
variables:
  - {name: LIST, type: json}
sub_tasks:
  - id: scan
    description: Scan
    map: {over: LIST, as: ITEM, max_items: 10}
    tool_or_prompt:
      name: inference
      params:
        prompt: "Read\n<untrusted-content>\n{{ITEM}}\n</untrusted-content>\n"
"#,
    );
    let run = |list: &str| {
        let out = d.run(&[
            "run",
            "plan.yaml",
            "--root",
            "runs",
            "--engine",
            "command",
            "--command",
            "cat",
            "--var",
            &format!("LIST={list}"),
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.run_id()
    };
    let items = |a: &str, b: &str| -> Vec<(Value, Value, String)> {
        let out = d.run(&["runs", "diff", "--root", "runs", a, b, "--format", "json"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let json = out.json();
        json["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["id"] != "scan")
            .map(|t| {
                let mut change = t["change"].as_str().unwrap().to_string();
                if !t["causes"].as_array().unwrap().is_empty() {
                    change = format!("{change} ({})", t["causes"][0]["kind"].as_str().unwrap());
                }
                (t["a_id"].clone(), t["b_id"].clone(), change)
            })
            .collect()
    };
    let s = |x: &str| Value::String(x.into());
    let n = Value::Null;
    let a = run(r#"["one", "two", "three"]"#);
    let moved = run(r#"["zero", "one", "two"]"#);
    assert_eq!(
        items(&a, &moved),
        [
            (n.clone(), s("scan[0]"), "new".to_string()),
            (s("scan[2]"), n.clone(), "removed".to_string()),
            (s("scan[0]"), s("scan[1]"), "same".to_string()),
            (s("scan[1]"), s("scan[2]"), "same".to_string()),
        ]
    );
    let page = d.run(&[
        "runs", "diff", "--root", "runs", &a, &moved, "--task", "scan[1]",
    ]);
    assert!(
        page.stdout.contains("was      scan[0] in A\n"),
        "{}",
        page.stdout
    );
    let changed = run(r#"["one", "TWO", "three"]"#);
    assert_eq!(
        items(&a, &changed),
        [
            (s("scan[1]"), s("scan[1]"), "output (item)".to_string()),
            (s("scan[0]"), s("scan[0]"), "same".to_string()),
            (s("scan[2]"), s("scan[2]"), "same".to_string()),
        ]
    );
}

/// `-o FILE` writes the HTML page beside the usual output.
#[test]
fn the_html_page_is_written_with_o() {
    let d = Dir::new();
    let a = d.run("W1");
    let b = d.run("W2");
    let out = d.diff(&[&a, &b, "-o", "diff.html", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("comparison written to diff.html"),
        "{}",
        out.stderr
    );
    // Standard output keeps its form: no diffs without --task.
    assert_eq!(task(&out.json(), "facts")["output"]["diff"], Value::Null);
    let html = std::fs::read_to_string(d.0.path().join("diff.html")).unwrap();
    assert!(
        html.contains("<span class=\"del\">-Facts of W1</span>"),
        "{html}"
    );
    assert!(
        html.contains("<span class=\"add\">+Facts of W2</span>"),
        "{html}"
    );
    // A path taken by a directory.
    let bad = d.diff(&[&a, &b, "-o", "runs"]);
    assert_eq!(bad.code, 5, "{}", bad.stderr);
}

/// Runs of two stores compare too: B under another root (`--b-root`).
#[test]
fn runs_of_two_roots_compare() {
    let d = Dir::new();
    let a = d.run("W1");
    let out = d.0.run(&[
        "run",
        "plan.yaml",
        "--root",
        "other",
        "--engine",
        "command",
        "--command",
        &d.command(),
        "--var",
        "WEEK=W2",
    ]);
    let b = out.run_id();
    let json = d
        .diff(&[&a, &b, "--b-root", "other", "--format", "json"])
        .json();
    assert_eq!(causes(&json, "facts"), ["variable WEEK"]);
    assert!(
        json["b"]["location"]
            .as_str()
            .unwrap()
            .starts_with("other/"),
        "{json}"
    );
    // Without --b-root, B is looked for under --root: not there.
    assert_eq!(d.diff(&[&a, &b]).code, 2);
}
