//! `summarize_strategy: llm` from the CLI, with the `command` engine: the
//! summary reaches the dependent's prompt, the run's JSON, `runs show` and
//! `runs export`; a failing summary call falls back to `truncate` without
//! failing the run; a kill between a task's completion and its summary is
//! resumed without running the task again; `--cache` answers a repeated
//! summary call. The command appends `task:ID` or `summary:ID` to a counts
//! file, so "not executed again" is checked by counting.

#![cfg(unix)]

use ctx_test_support::{Dir, counts, run_id, task};
use serde_json::Value;

/// `research` (long output ending in its conclusion) -> `decide`.
const PLAN: &str = r#"schema_version: 1
config:
  dependency:
    max_output_length: 200
    summarize_strategy: llm
    summary_max_tokens: 50
sub_tasks:
  - id: research
    description: Research the options
    tool_or_prompt: {name: inference, params: {prompt: Compare the options., model: m1}}
  - id: decide
    description: Decide
    dependencies: [research]
    tool_or_prompt: {name: inference, params: {prompt: Pick one.}}
"#;

/// A scratch directory with `plan` as plan.yaml.
fn dir(plan: &str) -> Dir {
    let d = Dir::new();
    d.write("plan.yaml", plan);
    d
}

/// Task calls print 40 lines and a conclusion; summary calls print a
/// summary, fail while `fail-summary` exists, and SIGKILL ctx while
/// `kill-summary` exists. Each call is counted (`task:ID`, `summary:ID`).
fn command(d: &Dir) -> String {
    format!(
        r##"d='{dir}'; if [ -n "$CTX_SUMMARY" ]; then echo "summary:$CTX_TASK_ID" >> "$d/counts"; if [ -e "$d/kill-summary" ]; then rm "$d/kill-summary"; kill -9 $PPID; sleep 5; fi; if [ -e "$d/fail-summary" ]; then echo refused >&2; exit 2; fi; echo "SUMMARY: option B wins (model $CTX_MODEL, max $CTX_MAX_TOKENS)"; exit 0; fi; echo "task:$CTX_TASK_ID" >> "$d/counts"; i=0; while [ $i -lt 40 ]; do echo "detail line $i"; i=$((i+1)); done; echo "Conclusion: option B.""##,
        dir = d.path().display()
    )
}

fn ctx(d: &Dir, args: &[&str]) -> (i32, String, String) {
    d.run(args).parts()
}

/// `ctx run plan.yaml --root runs --command ... EXTRA`.
fn run(d: &Dir, extra: &[&str]) -> (i32, String, String) {
    let command = command(d);
    let mut args = vec!["run", "plan.yaml", "--root", "runs", "--command", &command];
    args.extend_from_slice(extra);
    ctx(d, &args)
}

/// `ctx run plan.yaml --engine dry-run --no-store EXTRA`.
fn dry_run(d: &Dir, extra: &[&str]) -> (i32, String, String) {
    let args = ["run", "plan.yaml", "--engine", "dry-run", "--no-store"];
    ctx(d, &[&args[..], extra].concat())
}

#[test]
fn the_summary_reaches_the_dependent_the_json_show_and_export() {
    let d = dir(PLAN);
    let (code, stdout, stderr) = run(&d, &["--format", "json"]);
    assert_eq!(code, 0, "{stderr}{stdout}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let summary = "SUMMARY: option B wins (model m1, max 50)";
    assert_eq!(task(&json, "research")["summary"], summary);
    let call = &task(&json, "research")["metadata"]["summary"]["calls"][0];
    assert_eq!(call["model"], "m1");
    assert!(call.get("fallback").is_none());
    let prompt = task(&json, "decide")["prompt"].as_str().unwrap();
    assert!(
        prompt.contains(&format!("**Output:**\n{summary}\n")),
        "{prompt}"
    );
    assert!(!prompt.contains("detail line"));
    assert_eq!(json["summaries"]["calls"], 1);
    assert_eq!(json["summaries"]["fallbacks"], 0);
    assert_eq!(
        d.counts(),
        counts(&[
            ("task:research", 1),
            ("summary:research", 1),
            ("task:decide", 1)
        ])
    );

    let id = run_id(&stderr);
    let (code, show, _) = ctx(
        &d,
        &["runs", "show", &id, "--root", "runs", "--task", "research"],
    );
    assert_eq!(code, 0);
    assert!(
        show.contains("## Summary\n\nfor every dependent: model m1, "),
        "{show}"
    );
    assert!(show.contains(summary));
    let (code, export, _) = ctx(&d, &["runs", "export", &id, "--root", "runs"]);
    assert_eq!(code, 0);
    let export: Value = serde_json::from_str(&export).unwrap();
    assert_eq!(task(&export, "research")["summary"], summary);
    assert_eq!(export["summaries"], json["summaries"]);

    // The text table says how many summary calls were made.
    let d = dir(PLAN);
    let (code, table, _) = run(&d, &[]);
    assert_eq!(code, 0);
    assert!(table.contains("\nsummaries: 1 call, "), "{table}");
}

#[test]
fn a_failed_summary_falls_back_to_truncate_and_is_flagged() {
    let d = dir(PLAN);
    std::fs::write(d.path().join("fail-summary"), "").unwrap();
    let (code, table, stderr) = run(&d, &["--out", "out"]);
    assert_eq!(code, 0, "a failed summary never fails the run: {stderr}");
    assert!(
        table.contains("research  completed (summary fell back)"),
        "{table}"
    );
    assert!(
        table.contains("summary of research fell back to truncate: "),
        "{table}"
    );
    assert!(table.contains("\n    refused\n"), "{table}");
    assert!(
        table.contains("summaries: 1 call (1 fell back to truncate)"),
        "{table}"
    );
    let prompt = std::fs::read_to_string(d.path().join("out/prompts/decide.md")).unwrap();
    assert!(prompt.contains("**Output:**\ndetail line 0\n"), "{prompt}");
    assert!(prompt.contains("...\n\n---"), "{prompt}");
    assert!(!prompt.contains("SUMMARY"));
}

#[test]
fn a_kill_between_completion_and_summary_resumes_without_rerunning_the_task() {
    let d = dir(PLAN);
    std::fs::write(d.path().join("kill-summary"), "").unwrap();
    let (code, _, stderr) = run(&d, &[]);
    assert_ne!(code, 0, "ctx was killed: {stderr}");
    let id = run_id(&stderr);
    assert_eq!(
        d.counts(),
        counts(&[("task:research", 1), ("summary:research", 1)])
    );

    let (code, stdout, stderr) = run(&d, &["--resume", &id, "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["order"], serde_json::json!(["decide"]));
    assert_eq!(
        d.counts(),
        counts(&[
            ("task:research", 1),
            ("summary:research", 2),
            ("task:decide", 1)
        ]),
        "the task is not run again; only its summary is written"
    );
    let prompt = task(&json, "decide")["prompt"].as_str().unwrap();
    assert!(prompt.contains("SUMMARY: option B wins"), "{prompt}");

    // Resuming again reuses everything: no call at all.
    let (code, _, stderr) = run(&d, &["--resume", &id]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.counts()["summary:research"], 2);
}

#[test]
fn cache_answers_a_repeated_summary_call() {
    let d = dir(PLAN);
    let (code, _, stderr) = run(&d, &["--cache"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = run(&d, &["--cache", "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["summaries"]["calls"], 1);
    assert_eq!(json["summaries"]["cached"], 1);
    assert_eq!(
        task(&json, "research")["metadata"]["summary"]["calls"][0]["cached"],
        true
    );
    assert_eq!(
        d.counts()["summary:research"],
        1,
        "the second summary came from the cache"
    );
}

#[test]
fn the_flag_and_the_dry_run() {
    let d = dir(&PLAN.replace("summarize_strategy: llm", "summarize_strategy: truncate"));
    let (code, stdout, stderr) = run(&d, &["--summarize-strategy", "llm", "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["summaries"]["calls"], 1);
    let (code, stdout, _) = dry_run(&d, &["--format", "json", "--summarize-strategy", "llm"]);
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let prompt = task(&json, "decide")["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("**Output:**\n[dry-run] summary of task research\n"),
        "{prompt}"
    );
    let (code, _, stderr) = dry_run(&d, &["--summarize-strategy", "short"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn bad_summary_settings_are_located_plan_errors() {
    let plan = PLAN.replace(
        "summary_max_tokens: 50",
        "summary_max_tokens: 0\n    summary_prompt: Sum up {{DESCRIPTION}}",
    );
    let d = dir(&plan);
    let (code, stdout, stderr) = ctx(&d, &["plan", "check", "plan.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains("plan.yaml:6:25: config.dependency.summary_max_tokens: must be at least 1"),
        "{all}"
    );
    assert!(
        all.contains(
            "plan.yaml:7:21: config.dependency.summary_prompt: has no {{OUTPUT}} placeholder"
        ),
        "{all}"
    );
    let (code, _, stderr) = run(&d, &[]);
    assert_ne!(code, 0, "{stderr}");
    assert!(!d.path().join("counts").exists(), "nothing ran");
}
