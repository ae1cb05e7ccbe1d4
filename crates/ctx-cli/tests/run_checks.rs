//! `ctx run` with checks: retries with feedback, a check that never
//! passes, what is stored, `--resume`, and the errors before a run.
//!
//! The engine is `sh` reading the prompt: its answer depends on whether
//! the prompt carries the feedback section, so every outcome is known.

use std::path::{Path, PathBuf};

use ctx_test_support::{ctx_in as ctx, run_id, task};
use serde_json::Value;

/// Answers "a 10 x 20 board" once the prompt carries feedback, "a board"
/// before; a prompt with "DEP-OK" in it (a dependency's output) is echoed
/// back with a marker.
const FIXES_ON_FEEDBACK: &str = r#"p=$(cat); case "$p" in *"Your previous answer failed these checks"*) echo "a 10 x 20 board";; *) echo "a board";; esac"#;

const PLAN: &str = r#"schema_version: 1
entities:
  - name: Board
    grounded_value: 10 x 20
sub_tasks:
  - id: css
    description: Style the board
    entity_context:
      - {entity_name: Board, intent_relevance: constraint}
    checks:
      - contains: "10 x 20"
        message: Keep the 10 x 20 board.
      - entities: true
    tool_or_prompt: {name: inference, params: {prompt: Write the CSS.}}
  - id: js
    description: Script
    dependencies: [css]
    tool_or_prompt: {name: inference, params: {prompt: Write the JS.}}
"#;

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("plan.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `ctx run PLAN --format json --root DIR/runs ARGS`: exit code, JSON,
/// stderr.
fn run(dir: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = ctx(dir)
        .arg("run")
        .args(args)
        .args(["--format", "json", "--root"])
        .arg(dir.join("runs"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

#[test]
fn a_failing_check_is_retried_with_feedback_and_stored() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(dir.path(), PLAN);
    let (code, json, stderr) = run(
        dir.path(),
        &[plan.to_str().unwrap(), "--command", FIXES_ON_FEEDBACK],
    );
    assert_eq!(code, 0, "{json}\n{stderr}");
    let css = task(&json, "css");
    assert_eq!(css["status"], "completed");
    assert_eq!(css["output"], "a 10 x 20 board\n");
    assert_eq!(css["check_attempts"], 2);
    assert_eq!(
        css["checks"],
        serde_json::json!([
            {"kind": "contains", "passed": true, "message": "contains \"10 x 20\""},
            {"kind": "entities", "passed": true, "message": "reflects the entity \"Board\""}
        ]),
    );
    let prompt = css["prompt"].as_str().unwrap();
    assert!(
        prompt.ends_with(
            "Write the CSS.\n\n## Your previous answer failed these checks\n\n\
         - Keep the 10 x 20 board. (does not contain \"10 x 20\")\n\
         - does not reflect the entity \"Board\" (no \"10 x 20\")\n\n\
         Answer the task again, in full, so that every check passes.\n"
        ),
        "{prompt}"
    );
    // The first attempt is kept with its output and results.
    let attempts = css["metadata"]["check_attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["output"], "a board\n");
    assert_eq!(attempts[0]["checks"][0]["passed"], false);
    // A task without checks reports none.
    assert!(task(&json, "js").get("checks").is_none());
    assert!(task(&json, "js").get("check_attempts").is_none());

    // The store keeps every attempt: `ctx runs show RUN --task css`.
    let id = run_id(&stderr);
    let show = |format: &str| {
        let out = ctx(dir.path())
            .args([
                "runs", "show", &id, "--task", "css", "--format", format, "--root",
            ])
            .arg(dir.path().join("runs"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let shown: Value = serde_json::from_str(&show("json")).unwrap();
    let stored = &shown["result"]["metadata"];
    assert_eq!(stored["check_attempts"], css["metadata"]["check_attempts"]);
    assert_eq!(stored["checks"], css["checks"]);
    let text = show("text");
    assert!(text.contains("## Checks (attempt 2 of the task)\n\npass contains: contains \"10 x 20\"\npass entities:"), "{text}");
    assert!(text.contains("## Check attempts"), "{text}");
    // What the failed check found missing, beside the plan's message.
    assert!(
        text.contains(
            "\nattempt 1: FAIL contains: Keep the 10 x 20 board. (does not contain \"10 x 20\")\n"
        ),
        "{text}"
    );
}

#[test]
fn a_check_that_never_passes_fails_the_task_skips_dependents_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(dir.path(), PLAN);
    let (code, json, stderr) = run(
        dir.path(),
        &[
            plan.to_str().unwrap(),
            "--command",
            "echo a board",
            "--max-check-attempts",
            "3",
        ],
    );
    assert_eq!(code, 1, "{json}");
    let css = task(&json, "css");
    assert_eq!(css["status"], "failed");
    assert_eq!(css["check_attempts"], 3);
    assert_eq!(
        css["error"],
        "failed 2 checks after 3 attempts: contains: Keep the 10 x 20 board.; \
         entities: does not reflect the entity \"Board\" (no \"10 x 20\")"
    );
    assert_eq!(task(&json, "js")["status"], "skipped");
    assert_eq!(task(&json, "js")["error"], "dependency `css` failed");

    // `ctx runs show` gives every attempt's failures with what they found
    // missing, the last one's too.
    let id = run_id(&stderr);
    let out = ctx(dir.path())
        .args(["runs", "show", &id, "--task", "css", "--root"])
        .arg(dir.path().join("runs"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let missing = "FAIL contains: Keep the 10 x 20 board. (does not contain \"10 x 20\")";
    assert!(
        text.contains(&format!("## Checks (attempt 3 of the task)\n\n{missing}\n")),
        "{text}"
    );
    for n in 1..=3 {
        assert!(
            text.contains(&format!("\nattempt {n}: {missing}")),
            "{text}"
        );
    }

    // --resume runs the failed task again (and its dependent).
    let (code, json, _) = run(
        dir.path(),
        &["--resume", &id, "--command", FIXES_ON_FEEDBACK],
    );
    assert_eq!(code, 0, "{json}");
    assert_eq!(task(&json, "css")["status"], "completed");
    assert_eq!(task(&json, "js")["status"], "completed");
}

#[test]
fn one_attempt_means_no_retry_and_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        &PLAN.replace("sub_tasks:", "config: {max_check_attempts: 1}\nsub_tasks:"),
    );
    let (code, json, _) = run(
        dir.path(),
        &[plan.to_str().unwrap(), "--command", FIXES_ON_FEEDBACK],
    );
    assert_eq!(code, 1);
    assert_eq!(task(&json, "css")["check_attempts"], 1);
    let out = ctx(dir.path())
        .args([
            "run",
            plan.to_str().unwrap(),
            "--max-check-attempts",
            "0",
            "--no-store",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_dry_run_checks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(dir.path(), PLAN);
    let (code, json, _) = run(dir.path(), &[plan.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(task(&json, "css").get("checks").is_none());
}

#[test]
fn malformed_checks_are_located_plan_problems() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        &PLAN.replace("- entities: true", "- regex: \"(open\""),
    );
    let out = ctx(dir.path())
        .args(["plan", "check"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with(&format!(
            "{}:13:16: task \"css\": sub_tasks[0].checks[1].regex: invalid pattern: regex parse error: (open; error: unclosed group",
            plan.display()
        )),
        "{stdout}"
    );
    // `ctx run` refuses it before anything runs.
    let out = ctx(dir.path())
        .args(["run", plan.to_str().unwrap(), "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sub_tasks[0].checks[1].regex"));

    // An unknown check kind cannot be read at all: a syntax error (exit
    // 2), located, naming its task as the problems above do.
    let plan = write(
        dir.path(),
        &PLAN.replace("- entities: true", "- matches: x"),
    );
    for cmd in [&["plan", "check"][..], &["run", "--no-store"][..]] {
        let out = ctx(dir.path()).args(cmd).arg(&plan).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with(&format!(
                "error: {}:13:9: task \"css\": sub_tasks[0].checks[1].matches: unknown field `matches`, expected one of contains,",
                plan.display()
            )),
            "{cmd:?}: {stderr}"
        );
    }
    let out = ctx(dir.path())
        .args(["plan", "check", "--format", "json"])
        .arg(&plan)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["error"]["task_id"], "css", "{json}");
    assert_eq!(json["error"]["field"], "sub_tasks[0].checks[1].matches");

    // A schema file is read from the plan's directory.
    let schema = PLAN.replace("- entities: true", "- json_schema: schemas/nope.json");
    let plan = write(dir.path(), &schema);
    let out = ctx(dir.path())
        .args(["plan", "check"])
        .arg(&plan)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("sub_tasks[0].checks[1].json_schema: cannot read "),
        "{stdout}"
    );
}

#[test]
fn a_judge_check_needs_an_engine_that_can_judge() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        &PLAN.replace("- entities: true", "- judge: Is the board 10 x 20?"),
    );
    let out = ctx(dir.path())
        .args(["run", plan.to_str().unwrap(), "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the dry-run engine cannot run `judge` checks"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{}:13:16: task \"css\": sub_tasks[0].checks[1].judge",
            plan.display()
        )),
        "{stderr}"
    );
}

/// The Tetris fixture's checks, with an engine that answers each checked
/// task as a model would: the assembly task forgets its `<canvas>` until
/// the feedback says so.
#[test]
fn the_tetris_fixture_checks_pass_after_one_retry_of_the_assembly() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tetris/plan.yaml");
    let script = r#"p=$(cat)
case "$CTX_TASK_ID" in
  2) echo '#board { width: 300px; height: 600px; }';;
  5) echo 'const LINES = [0, 40, 100, 300, 1200]; // x (level + 1); level up every 10 lines; 48 frames at level 0';;
  9) case "$p" in
       *"Your previous answer failed these checks"*) echo '<!DOCTYPE html><html><body><canvas id="board" width="300" height="600"></canvas></body></html>';;
       *) echo '<!DOCTYPE html><html><body></body></html>';;
     esac;;
  *) echo "part $CTX_TASK_ID";;
esac"#;
    let (code, json, stderr) = run(dir.path(), &[plan.to_str().unwrap(), "--command", script]);
    assert_eq!(code, 0, "{json}\n{stderr}");
    for (id, attempts) in [("2", 1), ("5", 1), ("9", 2)] {
        let t = task(&json, id);
        assert_eq!(t["status"], "completed", "{t}");
        assert_eq!(t["check_attempts"], attempts, "task {id}");
        assert!(
            t["checks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["passed"] == true)
        );
    }
    let first = &task(&json, "9")["metadata"]["check_attempts"][0]["checks"];
    assert_eq!(
        first[1]["message"],
        "The file must contain the board's <canvas> element."
    );
    assert_eq!(first[1]["passed"], false);
    // An answer without the scoring values fails task 5 after 2 attempts.
    let script = script.replace("[0, 40, 100, 300, 1200]", "[0, 50, 150]");
    let (code, json, _) = run(dir.path(), &[plan.to_str().unwrap(), "--command", &script]);
    assert_eq!(code, 1);
    let five = task(&json, "5");
    assert_eq!(five["status"], "failed");
    assert!(
        five["error"].as_str().unwrap().starts_with(
            "failed 1 check after 2 attempts: entities: Use the Nintendo scoring values"
        ),
        "{five}"
    );
    for dependent in ["7", "8", "9"] {
        assert_eq!(task(&json, dependent)["status"], "skipped");
    }
}

#[test]
fn a_judge_past_the_task_timeout_fails_its_check_not_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        &PLAN
            .replace("- entities: true", "- judge: Is the board 10 x 20?")
            .replace("sub_tasks:", "config: {max_check_attempts: 1}\nsub_tasks:"),
    );
    // Tasks answer at once; the judge (CTX_JUDGE=1) hangs.
    let engine = r#"cat >/dev/null; if [ "$CTX_JUDGE" = 1 ]; then exec sleep 60; fi; echo "a 10 x 20 board""#;
    let started = std::time::Instant::now();
    let (code, json, stderr) = run(
        dir.path(),
        &[
            plan.to_str().unwrap(),
            "--command",
            engine,
            "--task-timeout",
            "1",
        ],
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // A task failed its checks: exit 1, not a run error.
    assert_eq!(code, 1, "{stderr}");
    let css = task(&json, "css");
    assert_eq!(css["status"], "failed");
    let checks = css["checks"].as_array().unwrap();
    assert_eq!(checks[0]["passed"], true);
    assert_eq!(checks[1]["kind"], "judge");
    assert_eq!(checks[1]["passed"], false);
    assert_eq!(
        checks[1]["message"],
        "the judge could not be asked: timed out after 1.0 s (task_timeout); the engine was stopped"
    );
    assert_eq!(task(&json, "js")["status"], "skipped");
}
