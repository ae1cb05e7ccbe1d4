//! `ctx eval`: variants change pass rates in a known way with an engine
//! whose answer is what its prompt contains.

use std::path::Path;

use assert_cmd::Command;
use serde_json::{Value, json};

/// The engine: `board` answers with the entity's value when the prompt
/// carries the entity block, `script` echoes "uses" and the board's
/// answer when the prompt carries it (a dependency output).
const ENGINE: &str = r#"p=$(cat)
case "$CTX_TASK_ID" in
  board) case "$p" in *"Board: 10 x 20"*) echo "a 10 x 20 grid";; *) echo "a grid";; esac;;
  script) case "$p" in *"a 10 x 20 grid"*) echo "uses a 10 x 20 grid";; *"a grid"*) echo "uses a grid";; *) echo "guesses";; esac;;
esac"#;

const PLAN: &str = r#"schema_version: 1
entities:
  - name: Board
    grounded_value: 10 x 20
sub_tasks:
  - id: board
    description: Board
    entity_context:
      - {entity_name: Board, intent_relevance: constraint}
    checks:
      - entities: true
    tool_or_prompt: {name: inference, params: {prompt: Describe the board.}}
  - id: script
    description: Script
    dependencies: [board]
    checks:
      - contains: uses
      - contains: "10 x 20"
    tool_or_prompt: {name: inference, params: {prompt: Write the script.}}
config:
  max_check_attempts: 1
"#;

fn ctx(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("ctx").expect("ctx binary");
    c.current_dir(dir);
    c
}

#[test]
fn variants_pass_what_their_context_allows() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yaml");
    std::fs::write(&plan, PLAN).unwrap();
    let out = ctx(dir.path())
        .args(["eval"])
        .arg(&plan)
        .args([
            "--command",
            ENGINE,
            "--repeat",
            "2",
            "--format",
            "json",
            "--root",
        ])
        .arg(dir.path().join("runs"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary: Vec<Value> = json["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            json!([
                v["name"],
                v["runs"],
                v["checks_passed"],
                v["checks_total"],
                v["pass_rate"],
                v["tasks_passing"]
            ])
        })
        .collect();
    assert_eq!(
        summary,
        [
            // Full: all three checks pass in both runs.
            json!(["full", 2, 6, 6, 1.0, 4]),
            // No entities: board misses its value and fails, so script is
            // skipped and passes none of its checks.
            json!(["no-entities", 2, 0, 6, 0.0, 0]),
            // No dependencies: board passes; script only guesses.
            json!(["no-dependencies", 2, 2, 6, 0.3333, 2]),
            json!(["bare", 2, 0, 6, 0.0, 0]),
        ]
    );
    assert_eq!(
        json["tasks"],
        json!([
            {"task_id": "board", "checks": 1, "pass_rate": {"full": 1.0, "no-entities": 0.0, "no-dependencies": 1.0, "bare": 0.0}},
            {"task_id": "script", "checks": 2, "pass_rate": {"full": 1.0, "no-entities": 0.0, "no-dependencies": 0.0, "bare": 0.0}}
        ])
    );
    // Every variant run is an ordinary stored run, labelled.
    let ids = json["variants"][1]["run_ids"].as_array().unwrap();
    assert_eq!(ids.len(), 2);
    let listed = ctx(dir.path())
        .args(["runs", "list", "--root"])
        .arg(dir.path().join("runs"))
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(listed.contains("[eval no-entities 2/2]"), "{listed}");
    assert!(listed.contains(ids[0].as_str().unwrap()), "{listed}");

    // Two variants only, as a table.
    let out = ctx(dir.path())
        .args(["eval"])
        .arg(&plan)
        .args(["--command", ENGINE, "--ablate", "full,bare", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("VARIANT"), "{text}");
    assert!(
        text.contains("full") && text.contains("bare") && !text.contains("no-entities"),
        "{text}"
    );
}

#[test]
fn bad_usage_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yaml");
    std::fs::write(&plan, PLAN).unwrap();
    for args in [
        vec!["--command", "cat", "--ablate", "no-context"],
        vec!["--command", "cat", "--repeat", "0"],
        // The dry-run engine's placeholders cannot be checked.
        vec![],
    ] {
        let out = ctx(dir.path())
            .arg("eval")
            .arg(&plan)
            .args(&args)
            .arg("--no-store")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let unchecked = PLAN
        .replace("    checks:\n      - entities: true\n", "")
        .replace(
            "    checks:\n      - contains: uses\n      - contains: \"10 x 20\"\n",
            "",
        );
    std::fs::write(&plan, unchecked).unwrap();
    let out = ctx(dir.path())
        .arg("eval")
        .arg(&plan)
        .args(["--command", "cat", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the plan has no checks"));
}
