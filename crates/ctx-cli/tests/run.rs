//! `ctx run`: dry runs, the command engine, `--out`, JSON shape, exit codes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use ctx_test_support::task;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn tetris() -> PathBuf {
    root().join("fixtures/tetris/plan.yaml")
}

/// A scratch working directory under target/: `ctx run` records each run
/// in `./.ctx/runs` by default, and tests must not write into the repo.
fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ctx-run-tests");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn ctx() -> Command {
    let mut c = Command::cargo_bin("ctx").expect("ctx binary");
    c.current_dir(scratch());
    c
}

fn run_json(args: &[&str]) -> (i32, Value, String) {
    let out = ctx()
        .arg("run")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        code,
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A small plan: a -> b -> c, d independent.
fn write_plan(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("plan.json");
    let text = format!(
        r#"{{"schema_version": 1, "sub_tasks": [
  {{"id": "a", "description": "A", "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "Say a."}}}}}},
  {{"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "Say b."}}}}}},
  {{"id": "c", "description": "C", "dependencies": ["b"], "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "Say c."}}}}}},
  {{"id": "d", "description": "D", "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "Say d."}}}}}}{extra}
]}}"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn dry_run_of_the_tetris_plan_prints_a_table() {
    let out = ctx().arg("run").arg(tetris()).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut lines = stdout.lines();
    let header = lines.next().unwrap();
    for col in ["TASK", "STATUS", "PROMPT TOKENS", "TIME"] {
        assert!(header.contains(col), "{header}");
    }
    assert_eq!(stdout.matches(" completed ").count(), 9, "{stdout}");
    assert!(
        stdout.contains("9 tasks: 9 completed, 0 failed, 0 skipped"),
        "{stdout}"
    );
    // No progress bar in a pipe: stderr holds only where the run is stored.
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    let id = lines[0]
        .strip_prefix("run ")
        .and_then(|l| l.split(' ').next())
        .unwrap();
    assert!(ctx_store_sqlite::is_run_id(id), "{stderr}");
    assert_eq!(
        lines[1],
        format!("run {id} stored in .ctx/runs/{id}"),
        "{stderr}"
    );
    assert!(
        scratch()
            .join(".ctx/runs")
            .join(id)
            .join("store.sqlite")
            .is_file()
    );
}

#[test]
fn json_shape_and_dependency_outputs_flow_downstream() {
    let (code, json, _) = run_json(&[tetris().to_str().unwrap()]);
    assert_eq!(code, 0);
    let order: Vec<&str> = json["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(order.len(), 9);
    // Every task starts after its dependencies.
    let pos = |id: &str| order.iter().position(|x| *x == id).unwrap();
    for t in json["tasks"].as_array().unwrap() {
        let id = t["task_id"].as_str().unwrap();
        assert_eq!(t["status"], "completed");
        assert_eq!(t["output"], format!("[dry-run] output of task {id}"));
        assert!(t.get("error").is_none());
        assert!(t["prompt"].is_string());
        let meta = &t["metadata"];
        assert!(meta["prompt_tokens"].as_u64().unwrap() > 0);
        assert!(meta["execution_time_ms"].is_u64());
        assert!(meta["tokenizer"].is_string());
        assert_eq!(meta["attempts"].as_array().unwrap().len(), 1);
        // The dry-run engine calls no model: it spends nothing.
        assert_eq!(t["cost_usd"], 0.0);
        // ... and reports no prompt cache: null, never 0.
        for key in [
            "cached_tokens",
            "cached_fraction",
            "cache_write_tokens",
            "cache_saving_usd",
        ] {
            assert_eq!(t.get(key), Some(&Value::Null), "{key}");
        }
        for key in t.as_object().unwrap().keys() {
            assert!(
                [
                    "task_id",
                    "status",
                    "output",
                    "error",
                    "prompt",
                    "metadata",
                    "cost_usd",
                    "cached_tokens",
                    "cached_fraction",
                    "cache_write_tokens",
                    "cache_saving_usd"
                ]
                .contains(&key.as_str()),
                "{key}"
            );
        }
    }
    let plan = ctx_model::load_plan(&tetris()).unwrap();
    for st in &plan.sub_tasks {
        for d in &st.dependencies {
            assert!(pos(d) < pos(&st.id), "{d} before {}", st.id);
            // The dependency's dry-run output is in the dependent's prompt.
            let prompt = task(&json, &st.id)["prompt"].as_str().unwrap();
            assert!(
                prompt.contains(&format!("[dry-run] output of task {d}")),
                "{} lacks {d}",
                st.id
            );
        }
        let prompt = task(&json, &st.id)["prompt"].as_str().unwrap();
        assert!(
            prompt.ends_with(st.tool_or_prompt.params.prompt.trim_end()),
            "{}",
            st.id
        );
    }
}

#[test]
fn out_dir_holds_prompts_outputs_and_results() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let (code, json, _) = run_json(&[
        tetris().to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    for t in json["tasks"].as_array().unwrap() {
        let id = t["task_id"].as_str().unwrap();
        let prompt = std::fs::read_to_string(out_dir.join(format!("prompts/{id}.md"))).unwrap();
        assert_eq!(prompt, t["prompt"].as_str().unwrap());
        let output = std::fs::read_to_string(out_dir.join(format!("outputs/{id}.md"))).unwrap();
        assert_eq!(output, t["output"].as_str().unwrap());
    }
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results, json);
    // Nothing else, and no temporary files left behind.
    let mut top: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["outputs", "prompts", "results.json"]);
}

#[test]
fn command_engine_gets_the_prompt_on_stdin_and_env() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let (code, json, _) = run_json(&[
        plan.to_str().unwrap(),
        "--engine",
        "command",
        "--command",
        "cat",
    ]);
    assert_eq!(code, 0);
    for t in json["tasks"].as_array().unwrap() {
        assert_eq!(t["output"], t["prompt"]);
    }
    // b's prompt carries a's output, which was a's own prompt.
    assert!(
        task(&json, "b")["prompt"]
            .as_str()
            .unwrap()
            .contains("Say a.")
    );

    // --command alone selects the command engine.
    let (code, json, _) = run_json(&[
        plan.to_str().unwrap(),
        "--command",
        "printf '%s' \"$CTX_TASK_ID\"",
    ]);
    assert_eq!(code, 0);
    assert_eq!(task(&json, "c")["output"], "c");
}

#[test]
fn failing_command_skips_dependents_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let (code, json, _) = run_json(&[plan.to_str().unwrap(), "--command", "false"]);
    assert_eq!(code, 1);
    assert_eq!(task(&json, "a")["status"], "failed");
    assert_eq!(
        task(&json, "a")["error"],
        "command exited with status 1 (stderr was empty)"
    );
    assert_eq!(task(&json, "b")["status"], "skipped");
    assert_eq!(task(&json, "b")["error"], "dependency `a` failed");
    assert_eq!(task(&json, "c")["error"], "upstream task `a` failed");

    // Only b fails: a and the independent d complete, c is skipped.
    let cmd = r#"if [ "$CTX_TASK_ID" = b ]; then echo "model crashed" >&2; exit 7; fi; cat"#;
    let out = ctx()
        .args(["run", plan.to_str().unwrap(), "--command", cmd])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("failed b: command exited with status 7; stderr:"),
        "{stdout}"
    );
    assert!(stdout.contains("    model crashed"), "{stdout}");
    assert!(
        stdout.contains("skipped c: dependency `b` failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("4 tasks: 2 completed, 1 failed, 1 skipped"),
        "{stdout}"
    );
}

#[test]
fn task_timeout_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let started = Instant::now();
    let (code, json, _) = run_json(&[
        plan.to_str().unwrap(),
        "--command",
        "sleep 20",
        "--task-timeout",
        "0.3",
    ]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(code, 1);
    assert_eq!(
        task(&json, "a")["error"],
        "timed out after 300 ms (task_timeout); the engine was stopped"
    );
    assert_eq!(
        task(&json, "a")["metadata"]["attempts"][0]["outcome"],
        "timeout"
    );
    assert_eq!(task(&json, "d")["status"], "failed");
}

#[test]
fn invalid_plan_exits_2_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#",
  {"id": "e", "description": "E", "dependencies": ["nope"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "x"}}}"#,
    );
    let marker = dir.path().join("ran");
    let cmd = format!("touch '{}'", marker.display());
    let out = ctx()
        .args(["run", plan.to_str().unwrap(), "--command", &cmd])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("invalid plan"), "{stderr}");
    assert!(stderr.contains("\"nope\""), "{stderr}");
    assert!(!marker.exists(), "a task ran on an invalid plan");

    // A parse error names the file.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema_version\": 1, \"sub_tasks\": [}").unwrap();
    let out = ctx().args(["run", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.json"));
}

#[test]
fn an_unknown_config_tokenizer_is_a_located_plan_error() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yaml");
    std::fs::write(
        &plan,
        "schema_version: 1\nconfig:\n  tokenizer: nope\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: Go.}}\n",
    )
    .unwrap();
    // `ctx plan check` reports an invalid plan with exit 1; the commands
    // that would use the plan refuse it as a usage error, exit 2.
    for (cmd, code) in [
        (["run"].as_slice(), 2),
        (&["plan", "cost", "--model", "gpt-4o"], 2),
        (&["plan", "check"], 1),
    ] {
        let out = ctx().args(cmd).arg(&plan).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{cmd:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let text = format!("{stdout}{stderr}");
        assert!(
            text.contains(&format!(
                "{}:3:14: config.tokenizer: unknown tokenizer `nope` (known: cl100k_base, o200k_base, o200k_harmony, p50k_base, r50k_base, estimate)",
                plan.display()
            )),
            "{cmd:?}: {text}"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let p = plan.to_str().unwrap();
    for (args, needle) in [
        (vec!["--engine", "command"], "needs --command"),
        (
            vec!["--tokenizer", "nope"],
            "invalid value 'nope' for '--tokenizer <T>'",
        ),
        (
            vec!["--engine", "dry-run", "--command", "cat"],
            "only used by --engine command",
        ),
        (vec!["--task-timeout=-1", "--command", "cat"], "positive"),
        (
            vec!["--task-timeout", "nan", "--command", "cat"],
            "positive",
        ),
        (vec!["--max-output-bytes", "0"], "at least 1"),
        (vec!["--max-prompt-tokens", "0"], "at least 1"),
        (vec!["--engine", "bogus"], "bogus"),
        (
            vec!["--command", "cat", "--base-url", "http://127.0.0.1:9"],
            "--base-url is only used by --engine openai",
        ),
    ] {
        let out = ctx().arg("run").arg(p).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn prompt_over_the_cap_fails_with_both_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let (code, json, _) = run_json(&[
        plan.to_str().unwrap(),
        "--max-prompt-tokens",
        "1",
        "--tokenizer",
        "estimate",
    ]);
    assert_eq!(code, 1);
    let err = task(&json, "a")["error"].as_str().unwrap();
    assert!(err.contains("max_prompt_tokens 1"), "{err}");
    assert!(err.contains(" 2 tokens"), "{err}");
    assert!(task(&json, "a")["prompt"].is_null());
    assert_eq!(task(&json, "a")["metadata"]["tokenizer"], "estimate");
}

#[test]
fn unsafe_task_ids_stay_inside_the_out_dir() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"schema_version": 1, "sub_tasks": [
  {"id": "ü", "description": "x", "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}},
  {"id": ".hidden", "description": "y", "tool_or_prompt": {"name": "inference", "params": {"prompt": "q"}}},
  {"id": "a b*", "description": "z", "tool_or_prompt": {"name": "inference", "params": {"prompt": "r"}}}
]}"#,
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = ctx()
        .args([
            "run",
            plan.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Ids with path separators, `.` and `..` never get here (validation
    // refuses them); the file-name rule still covers them (unit test).
    let mut prompts: Vec<String> = std::fs::read_dir(out_dir.join("prompts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    prompts.sort();
    assert_eq!(prompts, ["%2Ehidden.md", "%C3%BC.md", "a%20b%2A.md"]);
    assert_eq!(
        std::fs::read_dir(out_dir.join("outputs")).unwrap().count(),
        3
    );
    assert!(!dir.path().join("prompts").exists());
}

#[test]
fn level_schedule_is_hidden_but_works() {
    let help = ctx().args(["run", "--help"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("--schedule"));
    let (code, json, _) = run_json(&[
        tetris().to_str().unwrap(),
        "--schedule",
        "levels",
        "--concurrency",
        "0",
    ]);
    assert_eq!(code, 0);
    // Level batches start every level-0 task first.
    let order: Vec<&str> = json["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let plan = ctx_model::load_plan(&tetris()).unwrap();
    let g = ctx_deps::PlanGraph::new(&plan).unwrap();
    let levels: Vec<usize> = order
        .iter()
        .map(|id| g.level(g.index_of(id).unwrap()))
        .collect();
    assert!(levels.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_interrupts_and_still_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let out_dir = dir.path().join("out");
    let bin = assert_cmd::cargo::cargo_bin("ctx");
    let child = std::process::Command::new(bin)
        .current_dir(dir.path())
        .args([
            "run",
            plan.to_str().unwrap(),
            "--format",
            "json",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .args([
            "--command",
            r#"if [ "$CTX_TASK_ID" = d ]; then cat; touch d.done; else touch a.started; sleep 30; fi"#,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until d has finished and a is running, however loaded the
    // machine (then a moment for d's result to be stored).
    let waited = Instant::now();
    while !(dir.path().join("d.done").exists() && dir.path().join("a.started").exists()) {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "tasks never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["tasks"].as_array().unwrap().len(), 4);
    assert_eq!(task(&json, "d")["status"], "completed");
    assert_eq!(task(&json, "a")["status"], "failed");
    assert!(
        task(&json, "a")["error"]
            .as_str()
            .unwrap()
            .starts_with("interrupted:")
    );
    assert_eq!(task(&json, "b")["status"], "skipped");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("interrupted by SIGINT: 1 of 4 tasks completed")
    );
    assert!(out_dir.join("results.json").exists());
    assert!(out_dir.join("prompts/a.md").exists());
    // The stored run records the interruption, and d's result.
    let (runs, bad) = ctx_store_sqlite::RunRoot::new(dir.path().join(".ctx/runs"))
        .list()
        .unwrap();
    assert!(bad.is_empty());
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, ctx_store_sqlite::RunState::Interrupted);
    assert_eq!(runs[0].counts.completed, 1);
}

#[test]
fn concurrency_one_starts_tasks_by_priority() {
    let (code, json, _) = run_json(&[tetris().to_str().unwrap(), "--concurrency", "1"]);
    assert_eq!(code, 0);
    let order: Vec<&str> = json["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // Replay the rule: among tasks whose dependencies are done, the highest
    // remaining path first, then plan order.
    let plan = ctx_model::load_plan(&tetris()).unwrap();
    let g = ctx_deps::PlanGraph::new(&plan).unwrap();
    let mut done = vec![false; g.len()];
    let mut expected = Vec::new();
    while expected.len() < g.len() {
        let next = (0..g.len())
            .filter(|&i| !done[i] && g.dependencies(i).all(|d| done[d]))
            .max_by_key(|&i| (g.remaining_path(i), std::cmp::Reverse(i)))
            .unwrap();
        done[next] = true;
        expected.push(g.id(next).to_string());
    }
    assert_eq!(order, expected);
}

#[test]
fn plan_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let plan = std::fs::read_to_string(write_plan(dir.path(), "")).unwrap();
    let out = ctx()
        .args(["run", "-", "--format", "json"])
        .write_stdin(plan)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["tasks"].as_array().unwrap().len(), 4);
}

/// `ctx run plan | true`: the reader is gone before ctx writes a byte.
/// ctx must not panic (as `print!` would), and the run itself must have
/// finished and been stored.
#[test]
fn a_closed_stdout_pipe_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs");
    let bin = assert_cmd::cargo::cargo_bin("ctx");
    let script = format!(
        "'{}' run '{}' --root '{}' --format json | true; echo \"status=${{PIPESTATUS[0]}}\"",
        bin.display(),
        tetris().display(),
        store.display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .current_dir(scratch())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains("status=0"), "{stdout}\n{stderr}");
    let listed = ctx()
        .args(["runs", "list", "--root"])
        .arg(&store)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs[0]["state"], "completed", "{runs}");
}

#[test]
fn ids_that_looked_like_each_others_file_names_get_their_own_files() {
    // Issue 8: `a b*` and `a_b_-aaf960a8` shared prompts/a_b_-aaf960a8.md,
    // `.hidden` and `_hidden-cdcb6865` shared _hidden-cdcb6865.md: four
    // tasks wrote two files and the run exited 0.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let ids = ["a b*", "a_b_-aaf960a8", ".hidden", "_hidden-cdcb6865"];
    let tasks: Vec<Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"id": id, "description": "x",
                "tool_or_prompt": {"name": "inference", "params": {"prompt": format!("prompt of {id}")}}})
        })
        .collect();
    std::fs::write(
        &plan,
        serde_json::json!({"schema_version": 1, "sub_tasks": tasks}).to_string(),
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = ctx()
        .args(["run", plan.to_str().unwrap(), "--no-store", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    for sub in ["prompts", "outputs"] {
        let mut texts: Vec<String> = std::fs::read_dir(out_dir.join(sub))
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        texts.sort();
        assert_eq!(texts.len(), 4, "{sub}: {texts:?}");
        for id in ids {
            assert_eq!(
                texts
                    .iter()
                    .filter(|t| t.contains(&format!(" {id}")))
                    .count(),
                1,
                "{sub}: {id}: {texts:?}"
            );
        }
    }
}

#[test]
fn a_failed_out_write_after_the_run_prints_the_summary_and_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let out_dir = dir.path().join("out");
    // A directory where outputs/a.md should go: writing it fails after
    // every task has run.
    std::fs::create_dir_all(out_dir.join("outputs/a.md/x")).unwrap();
    let out = ctx()
        .current_dir(dir.path())
        .args(["run", plan.to_str().unwrap(), "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("4 tasks: 4 completed"), "{stdout}");
    assert!(stderr.contains("error: --out: "), "{stderr}");
    assert!(stderr.contains("outputs/a.md"), "{stderr}");
    // The other files were written all the same.
    assert!(out_dir.join("outputs/d.md").is_file());
    assert!(out_dir.join("results.json").is_file());
    // No temporary file is left anywhere under --out.
    let mut stack = vec![out_dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.contains("ctx-tmp"), "{}", e.path().display());
            if e.path().is_dir() {
                stack.push(e.path());
            }
        }
    }
    // The run is stored and finished.
    let (runs, bad) = ctx_store_sqlite::RunRoot::new(dir.path().join(".ctx/runs"))
        .list()
        .unwrap();
    assert!(bad.is_empty());
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, ctx_store_sqlite::RunState::Completed);
    assert_eq!(runs[0].counts.completed, 4);
}

#[test]
fn a_command_that_never_stops_writing_fails_at_the_output_bound() {
    // Before the bound: `memory allocation of 2147483648 bytes failed`,
    // death by SIGABRT, no summary.
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "");
    let started = Instant::now();
    let (code, json, stderr) = run_json(&[
        plan.to_str().unwrap(),
        "--no-store",
        "--command",
        r#"if [ "$CTX_TASK_ID" = d ]; then yes; else cat; fi"#,
        "--max-output-bytes",
        "1000000",
    ]);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(task(&json, "d")["status"], "failed");
    assert_eq!(
        task(&json, "d")["error"],
        "output exceeded the limit of 1000000 bytes (max_output_bytes); the command was killed"
    );
    assert_eq!(task(&json, "c")["status"], "completed");
}

#[test]
fn the_default_bounds_are_documented_in_help() {
    let help = ctx().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    assert!(help.contains("--task-timeout <SECS>"), "{help}");
    assert!(help.contains("[default: 3600]"), "{help}");
    assert!(help.contains("--max-output-bytes <BYTES>"), "{help}");
    assert!(help.contains("[default: 67108864]"), "{help}");
}

#[test]
fn one_task_is_one_task() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"schema_version": 1, "sub_tasks": [{"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}}]}"#,
    )
    .unwrap();
    let out = ctx()
        .args(["run", plan.to_str().unwrap(), "--no-store"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\n1 task: 1 completed"), "{stdout}");
}

#[cfg(unix)]
#[test]
fn a_write_error_mid_file_leaves_no_temporary_file() {
    // A file-size limit makes a write fail half-way, as a full disk does
    // (EFBIG instead of ENOSPC; SIGXFSZ is ignored so the write returns
    // the error). The old code left `prompts/a.md.ctx-tmp` and exited 2.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let long = "word ".repeat(2000);
    std::fs::write(
        &plan,
        format!(
            r#"{{"schema_version": 1, "sub_tasks": [{{"id": "a", "description": "A", "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "{long}"}}}}}}]}}"#
        ),
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let bin = assert_cmd::cargo::cargo_bin("ctx");
    let out = std::process::Command::new("sh")
        .current_dir(dir.path())
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 4; exec "$0" run plan.json --no-store --tokenizer estimate --out out"#)
        .arg(&bin)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 task: 1 completed"),
        "{stderr}"
    );
    assert!(stderr.contains("error: --out: "), "{stderr}");
    let left: Vec<String> = std::fs::read_dir(out_dir.join("prompts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The same plan, the same output: dry runs of the Tetris plan print the
/// same bytes in every format and write the same results.json, start
/// order included (its tasks run four at a time, so completions race).
#[test]
fn two_dry_runs_of_a_plan_print_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tetris();
    let once = |i: usize| {
        let out = tmp.path().join(format!("out{i}"));
        let mut texts = Vec::new();
        for format in ["text", "json"] {
            let o = ctx()
                .arg("run")
                .arg(&plan)
                .args(["--no-store", "--format", format, "-o"])
                .arg(&out)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0));
            texts.push(o.stdout);
        }
        texts.push(std::fs::read(out.join("results.json")).unwrap());
        texts
    };
    let first = once(0);
    for i in 1..6 {
        assert!(once(i) == first, "dry run {i} differs from the first");
    }
}
