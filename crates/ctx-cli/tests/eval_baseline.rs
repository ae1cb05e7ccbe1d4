//! `ctx eval … --baseline RUN`: each variant's rates against a stored
//! eval's, with the changes the 95 % intervals do not separate marked.
//! The engine of the baseline answers from what its prompt contains (as in
//! tests/eval.rs); the second engine answers every task right, so `bare`
//! rises from 0 % to 100 % (separated) and `full` stays at 100 % (not).

use std::path::Path;

use ctx_test_support::ctx_in as ctx;
use serde_json::Value;

#[path = "support/eval_plan.rs"]
mod eval_plan;
use eval_plan::PLAN;

const READING: &str = r#"p=$(cat)
case "$CTX_TASK_ID" in
  board) case "$p" in *"Board: 10 x 20"*) echo "a 10 x 20 grid";; *) echo "a grid";; esac;;
  script) case "$p" in *"a 10 x 20 grid"*) echo "uses a 10 x 20 grid";; *) echo "guesses";; esac;;
esac"#;

const KNOWING: &str = r#"cat >/dev/null
case "$CTX_TASK_ID" in
  board) echo "a 10 x 20 grid";;
  script) echo "uses a 10 x 20 grid";;
esac"#;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn eval(dir: &Path, engine: &str, extra: &[&str]) -> Run {
    let out = ctx(dir)
        .args(["eval", "plan.yaml", "--command", engine, "--root", "runs"])
        .args(extra)
        .output()
        .unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The first run id `ctx eval` names on stderr (`eval full 1/2: run ID`).
fn first_run(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split_once(": run ").map(|(_, id)| id.trim().to_string()))
        .unwrap_or_else(|| panic!("no run id in {stderr}"))
}

fn setup() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.yaml"), PLAN).unwrap();
    let base = eval(
        dir.path(),
        READING,
        &["--ablate", "full,bare", "--repeat", "2"],
    );
    assert_eq!(base.code, Some(0), "{}", base.stderr);
    let id = first_run(&base.stderr);
    (dir, id)
}

#[test]
fn each_variant_is_compared_with_the_stored_eval() {
    let (dir, id) = setup();
    let args = ["--ablate", "full,bare", "--repeat", "2", "--baseline", &id];
    let out = eval(
        dir.path(),
        KNOWING,
        &[&args[..], &["--format", "json"]].concat(),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let json: Value = serde_json::from_str(&out.stdout).unwrap();
    let b = &json["baseline"];
    assert_eq!(b["baseline"], id.as_str());
    // The whole eval is found from one of its runs: 2 variants x 2.
    assert_eq!(b["run_ids"].as_array().unwrap().len(), 4, "{b}");
    let variant = |name: &str| {
        b["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {b}"))
            .clone()
    };
    let full = variant("full");
    assert_eq!(full["first_attempt"]["delta"], 0.0);
    assert_eq!(full["first_attempt"]["separated"], false);
    let bare = variant("bare");
    assert_eq!(bare["baseline_runs"], 2);
    assert_eq!(bare["first_attempt"]["baseline"], 0.0);
    assert_eq!(bare["first_attempt"]["now"], 1.0);
    assert_eq!(bare["first_attempt"]["separated"], true);
    assert_eq!(bare["final"]["delta"], 1.0);

    let text = eval(dir.path(), KNOWING, &args);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(
        text.stdout
            .contains(&format!("against baseline {id} (4 runs)")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("100 % -> 100 % (+0 pt) ~"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("0 % -> 100 % (+100 pt)\n")
            || text.stdout.contains("0 % -> 100 % (+100 pt) "),
        "{}",
        text.stdout
    );
}

#[test]
fn a_bad_baseline_is_refused_before_anything_runs() {
    let (dir, id) = setup();
    let unknown = eval(dir.path(), KNOWING, &["--baseline", "nope"]);
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("--baseline nope"),
        "{}",
        unknown.stderr
    );
    assert!(!unknown.stderr.contains("eval full"), "{}", unknown.stderr);

    let disjoint = eval(
        dir.path(),
        KNOWING,
        &["--ablate", "no-entities", "--baseline", &id],
    );
    assert_eq!(disjoint.code, Some(2), "{}", disjoint.stderr);
    assert!(
        disjoint.stderr.contains(&format!(
            "--baseline {id}: no variant in common: the baseline has full, bare, this eval runs no-entities"
        )),
        "{}",
        disjoint.stderr
    );

    // A plain run is the baseline of `full`.
    let run = ctx(dir.path())
        .args(["run", "plan.yaml", "--command", READING, "--root", "runs"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let plain = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_whitespace().next())
        })
        .unwrap()
        .to_string();
    let full = eval(
        dir.path(),
        KNOWING,
        &[
            "--ablate",
            "full,bare",
            "--baseline",
            &plain,
            "--format",
            "json",
        ],
    );
    assert_eq!(full.code, Some(0), "{}", full.stderr);
    let json: Value = serde_json::from_str(&full.stdout).unwrap();
    assert_eq!(json["baseline"]["variants"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["baseline"]["not_in_baseline"],
        serde_json::json!(["bare"])
    );
}
