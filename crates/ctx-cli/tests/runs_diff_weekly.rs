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
//!
//! Every prompt of the weekly plan names the week, so no task of it keeps
//! its inputs a week later. The second figure does: the weekly plan's
//! `notable` map as fixtures/weekly/notable.yaml ships it (the standing
//! brief, then one task per notable event) on the same two exports, with
//! an engine that draws as a sampled model does (its answer also carries
//! the draw of its run), so that the brief, whose inputs stay, answers
//! otherwise and the diff says why: the same inputs.

use ctx_test_support::{Dir, Out, repo_root};
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

/// A sampled model: each answer is a checksum of the prompt and of the
/// run's draw (`DRAW`, one per run), so a prompt sent again in another run
/// is answered otherwise.
const SAMPLED: &str = r#"printf 'note %s\n' "$( (cat; echo "$DRAW") | cksum | cut -d ' ' -f 1)""#;

/// Runs the weekly plan on `week`'s export at `date`; returns the run id.
fn week(dir: &Dir, week: &str, date: &str) -> String {
    let weekly = repo_root().join("fixtures/weekly");
    let content = weekly.join("content");
    run_on(
        dir,
        "plan.yaml",
        week,
        &[
            "--command",
            ENGINE,
            "--var",
            &format!("WEEK={week}"),
            "--date",
            date,
            "--content-root",
            content.to_str().unwrap(),
        ],
    )
}

/// Runs fixtures/weekly/`plan` on `week`'s export with the command engine
/// and `extra`; returns the run id. The run's draw is its week.
fn run_on(dir: &Dir, plan: &str, week: &str, extra: &[&str]) -> String {
    let weekly = repo_root().join("fixtures/weekly");
    let raw = weekly.join(format!("raw/{week}.json"));
    let plan = weekly.join(plan);
    let raw = format!("RAW_JSON=@{}", raw.display());
    let mut args = vec![
        "run",
        plan.to_str().unwrap(),
        "--root",
        "runs",
        "--engine",
        "command",
        "--var",
        &raw,
    ];
    args.extend_from_slice(extra);
    let out = Out::of(dir.ctx().args(&args).env("DRAW", week));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    out.run_id()
}

/// `ctx runs diff A B --format json`, as the figure quotes it.
fn diff_figure(dir: &Dir, a: &str, b: &str) -> String {
    let out = dir.run(&["runs", "diff", "--root", "runs", a, b, "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::to_string_pretty(&figure(&out.json())).unwrap()
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
    insta::assert_snapshot!("weekly_diff", diff_figure(&dir, &a, &b));
}

/// The second figure: the brief's inputs stay from one week to the next,
/// and a sampled model answers it otherwise: `same inputs`.
#[test]
fn a_task_whose_inputs_stay_a_week_later_has_the_same_inputs() {
    let dir = Dir::new();
    let [a, b] =
        ["2026-W35", "2026-W36"].map(|w| run_on(&dir, "notable.yaml", w, &["--command", SAMPLED]));
    insta::assert_snapshot!("weekly_notable_diff", diff_figure(&dir, &a, &b));
}
