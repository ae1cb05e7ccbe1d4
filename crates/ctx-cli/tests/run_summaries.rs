//! `summarize_strategy: llm` from the CLI, with the `command` engine: the
//! summary reaches the dependent's prompt, the run's JSON, `runs show` and
//! `runs export`; a failing summary call falls back to `truncate` without
//! failing the run; a kill between a task's completion and its summary is
//! resumed without running the task again; `--cache` answers a repeated
//! summary call. The command appends `task:ID` or `summary:ID` to a counts
//! file, so "not executed again" is checked by counting.

#![cfg(unix)]

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;
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

struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    fn new(plan: &str) -> Dir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("plan.yaml"), plan).unwrap();
        Dir { tmp }
    }
    fn path(&self) -> &Path {
        self.tmp.path()
    }
    /// Task calls print 40 lines and a conclusion; summary calls print a
    /// summary, fail while `fail-summary` exists, and SIGKILL ctx while
    /// `kill-summary` exists.
    fn command(&self) -> String {
        format!(
            r##"d='{dir}'; if [ -n "$CTX_SUMMARY" ]; then echo "summary:$CTX_TASK_ID" >> "$d/counts"; if [ -e "$d/kill-summary" ]; then rm "$d/kill-summary"; kill -9 $PPID; sleep 5; fi; if [ -e "$d/fail-summary" ]; then echo refused >&2; exit 2; fi; echo "SUMMARY: option B wins (model $CTX_MODEL, max $CTX_MAX_TOKENS)"; exit 0; fi; echo "task:$CTX_TASK_ID" >> "$d/counts"; i=0; while [ $i -lt 40 ]; do echo "detail line $i"; i=$((i+1)); done; echo "Conclusion: option B.""##,
            dir = self.path().display()
        )
    }
    fn ctx(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::cargo_bin("ctx")
            .unwrap()
            .current_dir(self.path())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
    fn run(&self, extra: &[&str]) -> (i32, String, String) {
        let command = self.command();
        let mut args = vec!["run", "plan.yaml", "--root", "runs", "--command", &command];
        args.extend_from_slice(extra);
        self.ctx(&args)
    }
    fn counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        let text = std::fs::read_to_string(self.path().join("counts")).unwrap_or_default();
        for id in text.lines() {
            *m.entry(id.to_string()).or_default() += 1;
        }
        m
    }
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn task<'a>(json: &'a Value, id: &str) -> &'a Value {
    json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == id)
        .unwrap()
}

fn run_id(stderr: &str) -> String {
    let line = stderr.lines().next().unwrap_or_default();
    let rest = line
        .strip_prefix("run ")
        .or_else(|| line.strip_prefix("resuming run "))
        .unwrap_or_else(|| panic!("no run line: {stderr}"));
    rest.split(' ').next().unwrap().to_string()
}

#[test]
fn the_summary_reaches_the_dependent_the_json_show_and_export() {
    let d = Dir::new(PLAN);
    let (code, stdout, stderr) = d.run(&["--format", "json"]);
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
    let (code, show, _) = d.ctx(&["runs", "show", &id, "--root", "runs", "--task", "research"]);
    assert_eq!(code, 0);
    assert!(
        show.contains("## Summary\n\nfor every dependent: model m1, "),
        "{show}"
    );
    assert!(show.contains(summary));
    let (code, export, _) = d.ctx(&["runs", "export", &id, "--root", "runs"]);
    assert_eq!(code, 0);
    let export: Value = serde_json::from_str(&export).unwrap();
    assert_eq!(task(&export, "research")["summary"], summary);
    assert_eq!(export["summaries"], json["summaries"]);

    // The text table says how many summary calls were made.
    let d = Dir::new(PLAN);
    let (code, table, _) = d.run(&[]);
    assert_eq!(code, 0);
    assert!(table.contains("\nsummaries: 1 call, "), "{table}");
}

#[test]
fn a_failed_summary_falls_back_to_truncate_and_is_flagged() {
    let d = Dir::new(PLAN);
    std::fs::write(d.path().join("fail-summary"), "").unwrap();
    let (code, table, stderr) = d.run(&["--out", "out"]);
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
    let d = Dir::new(PLAN);
    std::fs::write(d.path().join("kill-summary"), "").unwrap();
    let (code, _, stderr) = d.run(&[]);
    assert_ne!(code, 0, "ctx was killed: {stderr}");
    let id = run_id(&stderr);
    assert_eq!(
        d.counts(),
        counts(&[("task:research", 1), ("summary:research", 1)])
    );

    let (code, stdout, stderr) = d.run(&["--resume", &id, "--format", "json"]);
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
    let (code, _, stderr) = d.run(&["--resume", &id]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d.counts()["summary:research"], 2);
}

#[test]
fn cache_answers_a_repeated_summary_call() {
    let d = Dir::new(PLAN);
    let (code, _, stderr) = d.run(&["--cache"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = d.run(&["--cache", "--format", "json"]);
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
    let d = Dir::new(&PLAN.replace("summarize_strategy: llm", "summarize_strategy: truncate"));
    let (code, stdout, stderr) = d.run(&["--summarize-strategy", "llm", "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["summaries"]["calls"], 1);
    let (code, stdout, _) = d.ctx(&[
        "run",
        "plan.yaml",
        "--engine",
        "dry-run",
        "--no-store",
        "--format",
        "json",
        "--summarize-strategy",
        "llm",
    ]);
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let prompt = task(&json, "decide")["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("**Output:**\n[dry-run] summary of task research\n"),
        "{prompt}"
    );
    let (code, _, stderr) = d.ctx(&[
        "run",
        "plan.yaml",
        "--engine",
        "dry-run",
        "--no-store",
        "--summarize-strategy",
        "short",
    ]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn bad_summary_settings_are_located_plan_errors() {
    let plan = PLAN.replace(
        "summary_max_tokens: 50",
        "summary_max_tokens: 0\n    summary_prompt: Sum up {{DESCRIPTION}}",
    );
    let d = Dir::new(&plan);
    let (code, stdout, stderr) = d.ctx(&["plan", "check", "plan.yaml"]);
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
    let (code, _, stderr) = d.run(&[]);
    assert_ne!(code, 0, "{stderr}");
    assert!(!d.path().join("counts").exists(), "nothing ran");
}
