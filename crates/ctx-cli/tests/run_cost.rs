//! `ctx run --max-cost USD` and the cost of every task: budget skips (exit
//! 1), refusals (exit 2), `cost_usd` and `spent_usd` in the JSON, the
//! command engine's output cut at `max_tokens`, and a resumed run's budget
//! counting what earlier sessions spent.

use std::path::Path;

use ctx_test_support::{ctx_in as ctx, task};
use serde_json::Value;

/// A chain a → b → c and an independent d, on model `m` (priced with
/// `--price`), counted with cl100k_base.
const PLAN: &str = r#"{
  "schema_version": 1,
  "config": {"tokenizer": "cl100k_base", "max_prompt_tokens": 200},
  "sub_tasks": [
    {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference",
      "params": {"prompt": "Say a.", "model": "m", "max_tokens": 50}}},
    {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference",
      "params": {"prompt": "Say b.", "model": "m", "max_tokens": 50}}},
    {"id": "c", "description": "C", "dependencies": ["b"], "tool_or_prompt": {"name": "inference",
      "params": {"prompt": "Say c.", "model": "m", "max_tokens": 50}}},
    {"id": "d", "description": "D", "tool_or_prompt": {"name": "inference",
      "params": {"prompt": "Say d.", "model": "m"}}}
  ]
}"#;

struct Out {
    code: i32,
    json: Value,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Out {
    let out = ctx(dir)
        .arg("run")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    Out {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    }
}

fn setup() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("plan.json"), PLAN).unwrap();
    tmp
}

/// The command every test runs: prints `hello world` (2 tokens in
/// cl100k_base) whatever the prompt.
const HELLO: &str = "cat >/dev/null; printf 'hello world'";

#[test]
fn each_task_costs_its_prompt_and_output_exactly() {
    let tmp = setup();
    let out = run(
        tmp.path(),
        &[
            "plan.json",
            "--command",
            HELLO,
            "--price",
            "m=1,2",
            "--root",
            "runs",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut sum = 0.0;
    for id in ["a", "b", "c", "d"] {
        let t = task(&out.json, id);
        let prompt = t["metadata"]["prompt_tokens"].as_f64().unwrap();
        // $1 per million prompt tokens, $2 per million output tokens.
        let expected = (prompt + 2.0 * 2.0) / 1e6;
        let cost = t["cost_usd"].as_f64().unwrap();
        assert!(
            (cost - expected).abs() < 1e-15,
            "{id}: {cost} != {expected}"
        );
        assert_eq!(t["metadata"]["cost_usd"], t["cost_usd"]);
        sum += cost;
    }
    assert!((out.json["spent_usd"].as_f64().unwrap() - sum).abs() < 1e-15);
    assert!(out.json.get("budget_usd").is_none());
}

#[test]
fn without_a_price_the_cost_is_unknown_not_zero() {
    let tmp = setup();
    let out = run(
        tmp.path(),
        &["plan.json", "--command", HELLO, "--root", "runs"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(task(&out.json, "a")["cost_usd"], Value::Null);
    assert!(task(&out.json, "a")["metadata"].get("cost_usd").is_none());
}

#[test]
fn a_budget_too_small_skips_with_reason_budget_and_exits_1() {
    let tmp = setup();
    // Each task's high end: (200 + 16 framing) × $1/M + 50 × $2/M =
    // $0.000316; d's max_tokens comes from --max-tokens 50. The budget
    // holds one: once it has spent anything, no other fits.
    let out = run(
        tmp.path(),
        &[
            "plan.json",
            "--command",
            HELLO,
            "--price",
            "m=1,2",
            "--max-tokens",
            "50",
            "--max-cost",
            "0.00033",
            "--concurrency",
            "1",
            "--root",
            "runs",
        ],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let j = &out.json;
    let spent = j["spent_usd"].as_f64().unwrap();
    assert!(spent > 0.0 && spent <= 0.00033, "{spent}");
    assert_eq!(j["budget_usd"], 0.00033);
    let skipped: Vec<&Value> = j["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "skipped")
        .collect();
    assert!(!skipped.is_empty(), "{j}");
    for t in &skipped {
        let error = t["error"].as_str().unwrap();
        assert!(error.starts_with("budget"), "{error}");
        assert!(t["cost_usd"].is_null());
    }
    assert!(j["needed_usd"].as_f64().unwrap() >= 0.000316 * skipped.len() as f64 - 1e-12);
    // c depends on b: when b is skipped by the budget, c says why.
    if task(j, "b")["status"] == "skipped" {
        assert_eq!(
            task(j, "c")["error"],
            "budget: dependency `b` was not run (over budget)"
        );
    }

    // The text summary says what was spent and what the rest needs.
    let text = ctx(tmp.path())
        .args([
            "run",
            "plan.json",
            "--command",
            HELLO,
            "--price",
            "m=1,2",
            "--max-tokens",
            "50",
            "--max-cost",
            "0.00033",
            "--concurrency",
            "1",
            "--root",
            "runs",
        ])
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(1));
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("of the $0.000330 budget; the tasks skipped by the budget need up to $"),
        "{text}"
    );
    assert!(text.contains("COST"), "{text}");
}

#[test]
fn a_resumed_run_counts_what_was_already_spent() {
    let tmp = setup();
    let args = [
        "--command",
        HELLO,
        "--price",
        "m=1,2",
        "--max-tokens",
        "50",
        "--max-cost",
        "0.00033",
        "--concurrency",
        "1",
        "--root",
        "runs",
    ];
    let mut first_args = vec!["plan.json"];
    first_args.extend(args);
    let first = run(tmp.path(), &first_args);
    assert_eq!(first.code, 1, "{}", first.stderr);
    let run_id = first.stderr.split_whitespace().nth(1).unwrap().to_string();
    // The same budget again: what the first session spent still counts,
    // so nothing more fits.
    let mut again = vec!["--resume", run_id.as_str()];
    again.extend(args);
    let second = run(tmp.path(), &again);
    assert_eq!(second.code, 1, "{}", second.stderr);
    let spent = second.json["spent_usd"].as_f64().unwrap();
    assert!(spent <= 0.00033, "{spent}");
    assert_eq!(spent, first.json["spent_usd"].as_f64().unwrap());
    // A larger budget lets the rest run; the total covers both sessions.
    let mut larger: Vec<&str> = again.clone();
    let at = larger.iter().position(|a| *a == "0.00033").unwrap();
    larger[at] = "0.01";
    let third = run(tmp.path(), &larger);
    assert_eq!(third.code, 0, "{}", third.stderr);
    let total = third.json["spent_usd"].as_f64().unwrap();
    assert!(total > spent, "{total}");
    // `ctx runs export` and `ctx runs show` agree on the total.
    let export = ctx(tmp.path())
        .args(["runs", "export", &run_id, "--root", "runs"])
        .output()
        .unwrap();
    let export: Value = serde_json::from_slice(&export.stdout).unwrap();
    assert_eq!(export["spent_usd"], third.json["spent_usd"]);
    let show = ctx(tmp.path())
        .args([
            "runs", "show", &run_id, "--root", "runs", "--format", "json",
        ])
        .output()
        .unwrap();
    let show: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(show["spent_usd"], third.json["spent_usd"]);
}

#[test]
fn refuses_to_start_without_max_tokens_or_price() {
    let tmp = setup();
    let refused = |args: &[&str], needle: &str| {
        let out = ctx(tmp.path()).arg("run").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(
            !tmp.path().join("runs").exists(),
            "no run may start: {args:?}"
        );
    };
    refused(
        &[
            "plan.json",
            "--command",
            HELLO,
            "--price",
            "m=1,2",
            "--max-cost",
            "1",
            "--root",
            "runs",
        ],
        "1 task without max_tokens (d)",
    );
    refused(
        &[
            "plan.json",
            "--command",
            HELLO,
            "--max-tokens",
            "5",
            "--max-cost",
            "1",
            "--root",
            "runs",
        ],
        "price unknown for m",
    );
    // An exponent is read (`1e3` is a thousand dollars), but a negative
    // one or one without digits is still refused.
    for bad in [
        "0", "-1", "abc", "0.0", "0e3", "-1.2e-5", "1e", "1.2e-5e1", "",
    ] {
        refused(
            &[
                "plan.json",
                "--command",
                HELLO,
                "--price",
                "m=1,2",
                "--max-cost",
                bad,
                "--root",
                "runs",
            ],
            "--max-cost",
        );
    }
    refused(
        &[
            "plan.json",
            "--command",
            HELLO,
            "--max-tokens",
            "5",
            "--root",
            "runs",
        ],
        "--max-tokens is used by the command engine only with --max-cost",
    );
}

#[test]
fn the_command_engine_is_cut_at_max_tokens_under_a_budget() {
    let tmp = setup();
    let out = run(
        tmp.path(),
        &[
            "plan.json",
            "--command",
            "cat >/dev/null; yes word | head -n 500",
            "--price",
            "m=1,2",
            "--max-tokens",
            "50",
            "--max-cost",
            "1",
            "--root",
            "runs",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    for id in ["a", "b", "c", "d"] {
        let t = task(&out.json, id);
        assert_eq!(t["metadata"]["finish_reason"], "length", "{id}");
        let output = t["output"].as_str().unwrap();
        // "word\n" is two tokens in cl100k_base: at most 50 in all.
        assert!(
            output.len() < 500 && output.starts_with("word"),
            "{output:?}"
        );
        let prompt = t["metadata"]["prompt_tokens"].as_f64().unwrap();
        let cost = t["cost_usd"].as_f64().unwrap();
        assert!(cost <= (prompt + 2.0 * 50.0) / 1e6 + 1e-15, "{id}: {cost}");
    }
}

/// A judge on a `judge_model` ten times dearer than its task's model is
/// reserved and charged at its own price: the reservation is `ctx plan
/// cost`'s high end, judge row included ($0.000316 for the task, $0.00255
/// for the judge: 175 prompt tokens x $10/M + 40 x $20/M), so $0.002 is too
/// little (priced at the task's model the judge would need $0.000255 and
/// the task would run).
#[test]
fn a_judge_is_reserved_and_charged_at_its_own_model() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("judged.yaml"),
        "schema_version: 1
config: {tokenizer: cl100k_base, max_prompt_tokens: 200, max_check_attempts: 1}
sub_tasks:
  - id: css
    description: Style
    checks:
      - judge: Is it fine?
        judge_model: dear
        max_tokens: 40
    tool_or_prompt: {name: inference, params: {prompt: Go., model: cheap, max_tokens: 50}}
",
    )
    .unwrap();
    // The task's answer and the judge's verdict alike.
    let verdict = r#"cat >/dev/null; printf '{"pass": true, "reason": "ok"}'"#;
    let args = |budget: &'static str| {
        [
            "judged.yaml",
            "--command",
            verdict,
            "--price",
            "cheap=1,2",
            "--price",
            "dear=10,20",
            "--max-cost",
            budget,
            "--no-store",
        ]
    };
    let out = run(tmp.path(), &args("0.002"));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let css = task(&out.json, "css");
    assert_eq!(css["status"], "skipped");
    assert!(
        css["error"]
            .as_str()
            .unwrap()
            .starts_with("budget: needs up to $0.002866 (its high end)"),
        "{css}"
    );

    let out = run(tmp.path(), &args("0.003"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let css = task(&out.json, "css");
    let judge = &css["metadata"]["check_attempts"][0]["judge_calls"][0];
    assert_eq!(judge["model"], "dear", "{judge}");
    assert_eq!(judge["requests"], 1);
    let used = &judge["tokens_used"];
    let judge_cost = (used["prompt_tokens"].as_f64().unwrap() * 10.0
        + used["completion_tokens"].as_f64().unwrap() * 20.0)
        / 1e6;
    let attempt = &css["metadata"]["check_attempts"][0];
    // The task's own answer, counted by ctx: its prompt and its output,
    // the same text as the judge's verdict.
    let own = (attempt["prompt_tokens"].as_f64().unwrap()
        + 2.0 * used["completion_tokens"].as_f64().unwrap())
        / 1e6;
    let cost = css["cost_usd"].as_f64().unwrap();
    assert!((cost - (judge_cost + own)).abs() < 1e-12, "{cost} {css}");
}

/// `ctx plan cost` takes `ctx run`'s engine flags and gives the high end
/// `ctx run --max-cost` reserves with the same flags: here the command
/// engine (one attempt), where `plan cost` used to assume the openai
/// engine's four. A budget too small for any task skips them all, and
/// what they need is `plan cost`'s total high end.
#[test]
fn plan_cost_gives_the_high_end_run_reserves_with_the_same_flags() {
    let tmp = setup();
    let flags = ["--command", HELLO, "--price", "m=1,2", "--max-tokens", "50"];
    let cost: Value = serde_json::from_str(&plan_cost_json(tmp.path(), &flags)).unwrap();
    for t in cost["tasks"].as_array().unwrap() {
        assert_eq!(t["attempts"], 1, "{t}");
        // (200 + 16 framing) × $1/M + 50 × $2/M.
        assert_eq!(t["cost_usd"]["high"], 0.000316, "{t}");
    }
    let mut args = vec!["plan.json"];
    args.extend(flags);
    args.extend(["--max-cost", "0.0001", "--root", "runs"]);
    let run = run(tmp.path(), &args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.json["needed_usd"], cost["total"]["cost_usd"]["high"]);
    // The openai engine's flags are refused for a command, as `ctx run`
    // refuses them.
    let out = ctx(tmp.path())
        .args([
            "plan",
            "cost",
            "plan.json",
            "--command",
            HELLO,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--model is only used by --engine openai")
    );
}

/// A request parameter the openai engine passes through that no bound
/// covers is refused under `--max-cost` (exit 2, nothing runs), naming
/// the task and the parameter; before, it was sent and billed unpriced.
#[test]
fn max_cost_refuses_a_parameter_no_bound_covers_naming_task_and_parameter() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = PLAN.replace(
        r#""params": {"prompt": "Say b.", "model": "m", "max_tokens": 50}"#,
        r#""params": {"prompt": "Say b.", "model": "m", "max_tokens": 50, "tools": [{"type": "function"}]}"#,
    );
    std::fs::write(tmp.path().join("plan.json"), plan).unwrap();
    let out = ctx(tmp.path())
        .args([
            "run",
            "plan.json",
            "--engine",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--price",
            "m=1,2",
            "--max-tokens",
            "50",
            "--max-cost",
            "1",
            "--root",
            "runs",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr
            .contains("task `b`: `tools` changes what a call can be billed and no bound covers it"),
        "{stderr}"
    );
    assert!(!tmp.path().join("runs").exists());
    // `ctx plan cost` names it too, and leaves b's high end open.
    let out = ctx(tmp.path())
        .args([
            "plan",
            "cost",
            "plan.json",
            "--price",
            "m=1,2",
            "--max-tokens",
            "50",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: task `b`: `tools` changes what a call can be billed"),
        "{stderr}"
    );
    let cost: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(task_row(&cost, "b")["cost_usd"]["high"].is_null(), "{cost}");
}

/// The row of `id` in `ctx plan cost`'s JSON.
fn task_row<'a>(cost: &'a Value, id: &str) -> &'a Value {
    cost["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == id)
        .unwrap()
}

/// The tour's dry run under a budget: the Tetris plan has tasks without
/// `max_tokens`, yet the dry run, which calls no model, takes the budget
/// without sending the user to `--max-tokens` (which it would refuse as
/// an OpenAI flag): a dead end before.
#[test]
fn the_dry_run_takes_a_budget_without_max_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let plan = ctx_test_support::repo_root().join("fixtures/tetris/plan.yaml");
    let plan = plan.to_str().unwrap();
    let out = run(dir.path(), &[plan, "--no-store", "--max-cost", "0.5"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json["spent_usd"], 0.0, "{}", out.json);
    assert!(!out.stderr.contains("--max-tokens"), "{}", out.stderr);
}

/// What `ctx plan cost --format json` prints is what `--max-cost` and
/// `--price` take: serde_json writes an amount under a hundred-thousandth
/// with an exponent (`1.264e-6`), and that text passed on as the budget
/// runs the plan (it was refused: "write a plain decimal"). The exponent
/// is read exactly: the budget equal to the high end lets every task
/// run. (A negative or malformed amount is still refused naming the flag:
/// `refuses_to_start_without_max_tokens_or_price`.)
#[test]
fn plan_costs_high_end_as_printed_is_a_max_cost() {
    let tmp = setup();
    let cost_json = |price: &str| {
        plan_cost_json(
            tmp.path(),
            &["--command", HELLO, "--max-tokens", "50", "--price", price],
        )
    };
    let printed = cost_json("m=0.001,0.002");
    // Prices written with an exponent mean the same prices.
    assert_eq!(cost_json("m=1e-3,2E-3"), printed);
    let cost: Value = serde_json::from_str(&printed).unwrap();
    // (200 + 16 framing) × $0.001/M + 50 × $0.002/M, four tasks.
    let high = cost["total"]["cost_usd"]["high"].to_string();
    assert_eq!(high, "1.264e-6", "{printed}");
    assert!(printed.contains(&high), "{printed}");
    let out = run(
        tmp.path(),
        &[
            "plan.json",
            "--command",
            HELLO,
            "--max-tokens",
            "50",
            "--price",
            "m=0.001,0.002",
            "--root",
            "runs",
            "--max-cost",
            &high,
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.json["budget_usd"], cost["total"]["cost_usd"]["high"],
        "{}",
        out.json
    );
}

/// `ctx plan cost plan.json --format json FLAGS`'s output, which must
/// succeed.
fn plan_cost_json(dir: &Path, flags: &[&str]) -> String {
    let out = ctx(dir)
        .args(["plan", "cost", "plan.json", "--format", "json"])
        .args(flags)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
