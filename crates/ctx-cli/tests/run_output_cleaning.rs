//! Cleaned outputs from the CLI (issue 38, item 3; docs/plan-format.md,
//! "Cleaned outputs"): an `output` block removes status lines and a
//! wrapping fence before checks, dependents and publishing see the text;
//! the store keeps the raw output beside it, `ctx runs show` lists what
//! was removed, and a pattern that does not compile is a located plan
//! problem.

use ctx_test_support::{Dir, run_id, task};

/// `draft` is cleaned by `config.output`; `report` has a block of its own,
/// which wins whole (its status line stays), is checked and published.
const PLAN: &str = r#"schema_version: 1
config:
  output:
    strip_lines: ["^Quality score:", "^✅"]
sub_tasks:
  - id: draft
    description: Draft
    tool_or_prompt: {name: inference, params: {prompt: Draft it.}}
  - id: report
    description: Report
    dependencies: [draft]
    publish: report.md
    output:
      unwrap_fence: true
    checks:
      - not_contains: "```"
    tool_or_prompt: {name: inference, params: {prompt: Write the report.}}
"#;

/// `draft` adds status lines around its text; `report` says whether its
/// prompt (its dependency's output) still held one, wrapped in a fence
/// with a status line of its own inside.
const ENGINE: &str = r#"p=$(cat)
case "$CTX_TASK_ID" in
  draft) printf '✅ Draft done.\nDraft body\nQuality score: 9/10\n';;
  report) case "$p" in *"Quality score"*) seen=dirty;; *) seen=clean;; esac
          printf '```markdown\n# Report (%s)\nQuality score: 7/10\n```\n' "$seen";;
esac"#;

#[test]
fn checks_dependents_and_publish_see_the_cleaned_output_and_the_store_keeps_both() {
    let dir = Dir::new();
    dir.write("plan.yaml", PLAN);
    let out = dir.run_command(
        ENGINE,
        &[
            "--format",
            "json",
            "--root",
            "runs",
            "--publish-root",
            "site",
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    let draft = task(&json, "draft");
    assert_eq!(draft["output"], "Draft body\n");
    assert_eq!(
        draft["raw_output"],
        "✅ Draft done.\nDraft body\nQuality score: 9/10\n"
    );
    assert_eq!(
        draft["removed_lines"],
        serde_json::json!(["✅ Draft done.", "Quality score: 9/10"])
    );
    // The dependent read the cleaned text; the fence is gone before the
    // check; the task's own block replaced config's, so its status line
    // stays.
    let report = task(&json, "report");
    assert_eq!(report["output"], "# Report (clean)\nQuality score: 7/10\n");
    assert_eq!(report["checks"][0]["passed"], true, "{report}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("site/report.md")).unwrap(),
        "# Report (clean)\nQuality score: 7/10\n"
    );

    // The store kept both: `ctx runs show RUN --task draft`.
    let id = run_id(&out.stderr);
    let show = |format: &str| {
        let out = dir.run(&[
            "runs", "show", &id, "--task", "draft", "--format", format, "--root", "runs",
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out
    };
    let shown = show("json").json();
    assert_eq!(shown["result"]["raw_output"], draft["raw_output"]);
    assert_eq!(shown["result"]["output"], "Draft body\n");
    let text = show("text").stdout;
    assert!(
        text.contains(
            "## Cleaned\n\nthe output block removed 2 lines from the raw output:\n\
             - ✅ Draft done.\n- Quality score: 9/10\n"
        ),
        "{text}"
    );
    // A task nothing was removed from shows no such section.
    dir.write("plain.yaml", &PLAN.replace("^Quality score:", "^Never"));
    let plain = dir.run(&[
        "run",
        "plain.yaml",
        "--engine",
        "command",
        "--command",
        "echo hi",
        "--root",
        "runs",
        "--format",
        "json",
    ]);
    let plain_json = plain.json();
    assert!(task(&plain_json, "draft").get("raw_output").is_none());
    assert!(task(&plain_json, "draft").get("removed_lines").is_none());
}

#[test]
fn a_strip_lines_pattern_that_does_not_compile_is_a_located_plan_problem() {
    let dir = Dir::new();
    dir.write(
        "plan.yaml",
        &PLAN.replace("unwrap_fence: true", "strip_lines: [\"ok\", \"(open\"]"),
    );
    let check = dir.run(&["plan", "check", "plan.yaml"]);
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    let first = check.stdout.lines().next().unwrap();
    assert!(
        first.starts_with(
            "plan.yaml:14:27: task \"report\": sub_tasks[1].output.strip_lines[1]: invalid pattern: regex parse error: (open; error: unclosed group"
        ),
        "{}",
        check.stdout
    );
    let json = dir.run(&["plan", "check", "plan.yaml", "--format", "json"]);
    assert!(
        json.stdout.contains("\"invalid_output_pattern\""),
        "{}",
        json.stdout
    );
    // `ctx run` refuses it before anything runs.
    let run = dir.run_command("echo hi", &["--no-store"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("sub_tasks[1].output.strip_lines[1]"),
        "{}",
        run.stderr
    );
}

#[cfg(unix)]
#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

/// The shared store keeps both texts too (in its result JSON) and shows
/// the same "Cleaned" section.
#[cfg(unix)]
#[test]
fn a_shared_store_keeps_the_raw_output_and_shows_what_was_removed() {
    let Some(url) = pg::fresh_db("output_cleaning") else {
        return;
    };
    let dir = Dir::new();
    dir.write("plan.yaml", PLAN);
    let out = dir.run_command(ENGINE, &["--store", &url, "--format", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    assert_eq!(task(&json, "draft")["output"], "Draft body\n");
    let id = run_id(&out.stderr);
    let id = id.as_str();
    let show = dir.run(&["runs", "show", id, "--store", &url, "--task", "draft"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout.contains(
            "## Cleaned\n\nthe output block removed 2 lines from the raw output:\n\
             - ✅ Draft done.\n- Quality score: 9/10\n"
        ),
        "{}",
        show.stdout
    );
    let shown = dir.run(&[
        "runs", "show", id, "--store", &url, "--task", "draft", "--format", "json",
    ]);
    assert_eq!(
        shown.json()["result"]["raw_output"],
        "✅ Draft done.\nDraft body\nQuality score: 9/10\n"
    );
}
