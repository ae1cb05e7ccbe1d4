//! The figure of docs/runs.md ("Two weeks of the weekly pipeline"): the
//! weekly plan of fixtures/weekly run on two raw exports a week apart
//! (2026-W35, then 2026-W36: the crawl variable `RAW_JSON` changed, with
//! `WEEK` and the date), then `ctx runs diff` of the two runs. The golden
//! (tests/snapshots/) keeps what the figure quotes: each task's change
//! and its causes, and the summary's counts.
//!
//! The engine answers each task with the section its checks require and
//! a checksum of the prompt it received: an output changes exactly when
//! its prompt did.

use ctx_test_support::{Dir, repo_root};
use serde_json::{Value, json};

#[path = "support/diff_json.rs"]
mod diff_json;

const ENGINE: &str = r#"h=$(cksum | cut -d ' ' -f 1)
case "$CTX_TASK_ID" in
  facts) printf '## Facts\n\n- export %s\n' "$h" ;;
  continuity) printf '## Continuity\n\n- history %s\n' "$h" ;;
  report) printf -- '---\nsummary: "report %s"\n---\n\n## Headline\n\n.\n\n## Signal & Noise\n\n.\n\n## Blind Spots\n\n.\n\n## The Week Ahead\n\n.\n' "$h" ;;
  *) printf 'note %s\n' "$h" ;;
esac"#;

/// Runs the weekly plan on `week`'s export at `date`; returns the run id.
fn week(dir: &Dir, week: &str, date: &str) -> String {
    let weekly = repo_root().join("fixtures/weekly");
    let raw = weekly.join(format!("raw/{week}.json"));
    let content = weekly.join("content");
    let out = dir.run(&[
        "run",
        weekly.join("plan.yaml").to_str().unwrap(),
        "--root",
        "runs",
        "--engine",
        "command",
        "--command",
        ENGINE,
        "--var",
        &format!("RAW_JSON=@{}", raw.display()),
        "--var",
        &format!("WEEK={week}"),
        "--date",
        date,
        "--content-root",
        content.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    out.run_id()
}

/// What the figure quotes: per task, its ids in A and B, its change and
/// its causes; the summary's counts (times, costs and run ids vary).
fn figure(diff: &Value) -> Value {
    let tasks: Vec<Value> = diff["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let causes = diff_json::causes_of(t);
            json!({"a": t["a_id"], "b": t["b_id"], "change": t["change"], "causes": causes})
        })
        .collect();
    let mut summary = diff["summary"].clone();
    if let Some(m) = summary.as_object_mut() {
        m.retain(|_, v| v.is_u64() || v.is_array());
    }
    json!({"summary": summary, "tasks": tasks})
}

#[test]
fn two_weeks_of_the_weekly_pipeline_name_their_causes() {
    let dir = Dir::new();
    let a = week(&dir, "2026-W35", "2026-08-27");
    let b = week(&dir, "2026-W36", "2026-09-03");
    let out = dir.run(&["runs", "diff", "--root", "runs", &a, &b, "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let figure = serde_json::to_string_pretty(&figure(&out.json())).unwrap();
    insta::assert_snapshot!("weekly_diff", figure);
}
