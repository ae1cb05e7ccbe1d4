//! `cargo xtask e2e --batches` (and a step of the LiteLLM e2e): a batched
//! run (`ctx run --batch`) through the LiteLLM proxy's `/v1/files` and
//! `/v1/batches` to ctx-test-support's server (issue 37).
//!
//! The proxy forwards the Files and Batches endpoints to the base URL its
//! `files_settings` entry for the `openai` provider names (the upload),
//! and, for a batch's create, reads and cancel and a file's content and
//! delete, to `OPENAI_API_BASE` in its environment: both are the test
//! server's, which runs as a process of its own (`cargo run -p
//! ctx-test-support --example openai_server`, its base URL on its first
//! line). The plan has two waves, so two batches; every task must complete
//! with its usage at the `batch` tier, and the proxy's log must show the
//! batches created through it.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Server, Venv, free_port, read_file, tail};

/// `a` and `b`, then `c` after both: two waves, two batches.
const PLAN: &str = r#"{"schema_version": 1, "sub_tasks": [
 {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a.", "model": "gpt-5-mini", "max_tokens": 8}}},
 {"id": "b", "description": "B", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b.", "model": "gpt-5-mini", "max_tokens": 8}}},
 {"id": "c", "description": "C", "dependencies": ["a", "b"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Join them.", "model": "gpt-5-mini", "max_tokens": 8}}}]}
"#;

/// Runs the batched plan through a proxy of its own in `dir`; a line
/// saying what was checked.
pub(super) fn run(root: &Path, ctx: &Path, venv: &Venv, dir: &Path) -> Result<String, String> {
    let started = Instant::now();
    super::super::run_cargo(
        root,
        &[
            "build",
            "--quiet",
            "-p",
            "ctx-test-support",
            "--example",
            "openai_server",
        ],
    )?;
    let example = super::target_dir(root).join("debug/examples/openai_server");
    let server_log = dir.join("test-server.log");
    let mut server = Server::start("test server", Command::new(example), &server_log, 600)?;
    let url = first_line(&server_log, Duration::from_secs(10))?;
    let port = free_port()?;
    let config = dir.join("litellm_batches.yaml");
    let yaml = format!(
        "model_list:\n  - model_name: \"gpt-*\"\n    litellm_params:\n      model: openai/gpt-5-mini\n      \
         api_base: {url}\n      api_key: not-used\nfiles_settings:\n  - custom_llm_provider: openai\n    \
         api_base: {url}\n    api_key: not-used\nlitellm_settings:\n  telemetry: false\n"
    );
    fs::write(&config, yaml).map_err(|e| format!("{}: {e}", config.display()))?;
    let mut cmd = Command::new(venv.bin("litellm"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .env("OPENAI_API_BASE", &url)
        .env("OPENAI_API_KEY", "not-used")
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("NO_PROXY", "127.0.0.1,localhost");
    let proxy_log = dir.join("proxy-batches.log");
    let mut proxy = Server::start("LiteLLM proxy (batches)", cmd, &proxy_log, 600)?;
    proxy.wait_ready(port, "/health/liveliness", Duration::from_secs(180))?;
    let checked = batched_run(ctx, dir, port, &proxy_log);
    proxy.stop();
    server.stop();
    checked?;
    Ok(format!(
        "e2e: LiteLLM proxy: a --batch run of two waves through /v1/files and /v1/batches to the test server, checked in {:.0} s",
        started.elapsed().as_secs_f64()
    ))
}

/// The first line `log` holds, waiting up to `within` for it.
fn first_line(log: &Path, within: Duration) -> Result<String, String> {
    let start = Instant::now();
    loop {
        let text = fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().next().filter(|_| text.contains('\n')) {
            return Ok(line.trim().to_string());
        }
        if start.elapsed() > within {
            return Err(format!("the test server printed no URL: {}", tail(log, 10)));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `ctx run --batch` of [`PLAN`] against the proxy on `port`, checked.
fn batched_run(ctx: &Path, dir: &Path, port: u16, proxy_log: &Path) -> Result<(), String> {
    let plan = dir.join("batch-plan.json");
    fs::write(&plan, PLAN).map_err(|e| format!("{}: {e}", plan.display()))?;
    let out = Command::new(ctx)
        .arg("run")
        .arg(&plan)
        .args(["--no-store", "--format", "json", "--engine", "openai"])
        .args(["--base-url", &format!("http://127.0.0.1:{port}/v1")])
        .args([
            "--batch",
            "--batch-poll-ms",
            "200",
            "--request-timeout",
            "60",
        ])
        .env("OPENAI_API_KEY", "not-used")
        .output()
        .map_err(|e| format!("{}: {e}", ctx.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "the --batch run through LiteLLM exited with {}: {stderr}\nproxy log:\n{}",
            out.status,
            tail(proxy_log, 30)
        ));
    }
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("the --batch run's JSON: {e}"))?;
    let tasks = json["tasks"].as_array().cloned().unwrap_or_default();
    let batched = tasks.iter().filter(|t| {
        t["status"] == "completed" && t["metadata"]["tokens_used"]["service_tier"] == "batch"
    });
    if tasks.len() != 3 || batched.count() != 3 {
        return Err(format!(
            "the --batch run through LiteLLM: not every task answered at the batch tier: {json}"
        ));
    }
    let log = read_file(proxy_log)?;
    let created = log.matches("\"POST /v1/batches HTTP/1.1\" 200").count();
    if created != 2 {
        return Err(format!(
            "LiteLLM created {created} batches, expected 2 (one per wave):\n{}",
            tail(proxy_log, 30)
        ));
    }
    Ok(())
}
