//! `cargo xtask e2e --prefix-cache`: the side-by-side figures of issue 24
//! (docs/performance.md, "Prefix cache on a real server").
//!
//! [`NOTABLE_PLAN`] (a map of 24 notable events of the week, each prompt
//! sharing about 1,500 tokens of standing brief before its item) is
//!
//! * predicted by `ctx plan cost --layout design,cache` at gpt-4o-mini's
//!   price in ctx's default table (the published OpenAI price it ships):
//!   the map's cacheable fraction and the plan's expected cost;
//! * run under each layout on the llama-cpp-python server of `e2e --llm`
//!   (SmolLM2-135M-Instruct), one call at a time, the server started
//!   afresh per layout so neither inherits the other's cache. llama.cpp
//!   keeps the last prompt's state and reuses its longest common prefix;
//!   its log says, per request, how many prompt tokens that reuse served
//!   (`N prefix-match hit`) and how long the rest took to process
//!   (`prompt eval time`), which is the figure: prompt-processing time
//!   per call, for the map's first item and the items after it, and in
//!   total.
//!
//! Nothing is asserted but that the runs complete: the figures are
//! printed and written to `target/e2e/prefix-cache/figures.txt`.
//!
//! `cargo xtask e2e --warm-up` ([`warm_up`]) runs the same plan under
//! `layout: cache` with `--concurrency 4 --stream`, without and with
//! `--cache-warm-up 4`, each on a fresh server, and prints per run the
//! wall time of `ctx run` (the makespan, start-up included), the prompt
//! tokens the server reused from its kept state and those it processed,
//! and the prompt-processing time; written to
//! `target/e2e/warm-up/figures.txt`.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{CtxRun, Server, Venv, free_port, fresh_dir, secret};

/// The measured plan and the week whose 24 notable events it maps over.
pub(super) const NOTABLE_PLAN: &str = "fixtures/weekly/notable.yaml";
const NOTABLE_RAW: &str = "fixtures/weekly/raw/2026-W37.json";
/// What only the `brief` task's prompt says (the other calls are items).
const BRIEF_MARK: &str = "standing brief above in three short lines";
/// Room for the ~1,600-token prompts and their answers.
const N_CTX: &str = "4096";
// One thread: on a machine shared with other work, llama.cpp's threads
// wait for each other at every step and two of them were slower than one
// (a first request took minutes); the figures are ratios either way.

/// One request as the server's log tells it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ServedCall {
    /// Prompt tokens served from the kept state (0 without a hit line).
    reused: u64,
    /// Prompt tokens processed.
    processed: u64,
    /// Time processing them, in milliseconds.
    prompt_ms: f64,
}

pub(super) fn run(root: &Path, work: &Path, venv: &Venv) -> Result<(), String> {
    let ctx = crate::build_ctx(root)?;
    let run_dir = fresh_dir(&work.join("prefix-cache"))?;
    let plan = root.join(NOTABLE_PLAN);
    let raw = format!("RAW_JSON=@{}", root.join(NOTABLE_RAW).display());
    let mut report = format!(
        "prefix cache, {NOTABLE_PLAN} over {NOTABLE_RAW} (24 items)\n\npredicted (ctx plan cost --layout design,cache, gpt-4o-mini at ctx's default table, OpenAI's minimum 1,024 tokens):\n"
    );
    report.push_str(&prediction(&ctx, &plan, &raw)?);
    let text = fs::read_to_string(&plan).map_err(|e| format!("{}: {e}", plan.display()))?;
    report.push_str("\nmeasured (llama-cpp-python + SmolLM2-135M-Instruct, one thread, --concurrency 1, server started afresh per layout):\n");
    report.push_str("| layout | calls | prompt tokens | reused from cache | brief (ms) | item 0 (ms) | items 1.. mean (ms) | map total (ms) | item 0 / later items |\n|---|---|---|---|---|---|---|---|---|\n");
    for layout in ["design", "cache"] {
        let variant = run_dir.join(format!("notable-{layout}.yaml"));
        let variant_text = if layout == "cache" {
            text.replacen("config:\n", "config:\n  layout: cache\n", 1)
        } else {
            text.clone()
        };
        fs::write(&variant, variant_text).map_err(|e| format!("{}: {e}", variant.display()))?;
        let calls = served_calls(&ctx, venv, &run_dir, layout, &variant, &raw)?;
        report.push_str(&row(layout, &calls));
    }
    let figures = run_dir.join("figures.txt");
    fs::write(&figures, &report).map_err(|e| format!("{}: {e}", figures.display()))?;
    print!("{report}");
    println!("e2e: prefix cache figures in {}", figures.display());
    Ok(())
}

/// The prediction's rows: per layout, the map's calls, prompt and
/// cacheable tokens, its fraction, the plan's fraction and expected cost.
fn prediction(ctx: &Path, plan: &Path, raw: &str) -> Result<String, String> {
    use serde_json::Value;
    let out = Command::new(ctx)
        .args(["plan", "cost"])
        .arg(plan)
        .args(["--var", raw, "--model", "gpt-4o-mini"])
        .args(["--layout", "design,cache", "--format", "json"])
        .output()
        .map_err(|e| format!("ctx plan cost: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ctx plan cost: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let j: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("ctx plan cost: {e}"))?;
    let mut rows = String::from(
        "| layout | map calls | map prompt tokens | map cacheable | map fraction | plan fraction | expected cost |\n|---|---|---|---|---|---|---|\n",
    );
    for l in j["cache"]["layouts"].as_array().into_iter().flatten() {
        let map = l["tasks"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["task_id"] == "notable"))
            .ok_or("ctx plan cost: no `notable` row")?;
        let (prompt, cacheable) = (
            map["prompt_tokens"].as_u64().unwrap_or(0),
            map["cacheable_tokens"].as_u64().unwrap_or(0),
        );
        rows.push_str(&format!(
            "| {} | {} | {prompt} | {cacheable} | {:.1}% | {:.1}% | ${} |\n",
            l["layout"].as_str().unwrap_or("?"),
            map["calls"],
            100.0 * cacheable as f64 / prompt.max(1) as f64,
            100.0 * l["cacheable_fraction"].as_f64().unwrap_or(0.0),
            l["expected_usd"],
        ));
    }
    Ok(rows)
}

/// `cargo xtask e2e --warm-up`: see the module documentation.
pub(super) fn warm_up(root: &Path, work: &Path, venv: &Venv) -> Result<(), String> {
    let ctx = crate::build_ctx(root)?;
    let run_dir = fresh_dir(&work.join("warm-up"))?;
    let plan = root.join(NOTABLE_PLAN);
    let raw = format!("RAW_JSON=@{}", root.join(NOTABLE_RAW).display());
    let text = fs::read_to_string(&plan).map_err(|e| format!("{}: {e}", plan.display()))?;
    let variant = run_dir.join("notable-cache.yaml");
    fs::write(
        &variant,
        text.replacen("config:\n", "config:\n  layout: cache\n", 1),
    )
    .map_err(|e| format!("{}: {e}", variant.display()))?;
    let mut report = format!(
        "cache warm-up, {NOTABLE_PLAN} over {NOTABLE_RAW} (24 items), layout: cache, --concurrency 4 --stream\n(llama-cpp-python + SmolLM2-135M-Instruct, one thread, server started afresh per run)\n\n| run | calls | makespan (s) | calls served from the kept state | tokens reused | tokens processed by them | calls with no reuse |\n|---|---|---|---|---|---|---|\n"
    );
    for (name, extra) in [
        ("without warm-up", &[][..]),
        ("--cache-warm-up 4", &["--cache-warm-up", "4"][..]),
    ] {
        let label = if extra.is_empty() { "off" } else { "on" };
        let mut args = vec!["--concurrency", "4", "--stream"];
        args.extend_from_slice(extra);
        let (log, sent, makespan) =
            run_on_server(&ctx, venv, &run_dir, label, &variant, &raw, &args)?;
        // Streamed requests get no `prompt eval time` line from
        // llama-cpp-python, only the hit line of a request whose prefix
        // the kept state served.
        let hits = parse_hits(&log);
        let calls = sent.lines().count();
        let reused: u64 = hits.iter().map(|h| h.0).sum();
        let processed: u64 = hits.iter().map(|h| h.1).sum();
        report.push_str(&format!(
            "| {name} | {calls} | {makespan:.1} | {} | {reused} | {processed} | {} |\n",
            hits.len(),
            calls.saturating_sub(hits.len()),
        ));
    }
    let figures = run_dir.join("figures.txt");
    fs::write(&figures, &report).map_err(|e| format!("{}: {e}", figures.display()))?;
    print!("{report}");
    println!("e2e: warm-up figures in {}", figures.display());
    Ok(())
}

/// Runs `plan` on a fresh llama.cpp server and reads each request's
/// figures from its log, in request order, with whether it was `brief`.
fn served_calls(
    ctx: &Path,
    venv: &Venv,
    run_dir: &Path,
    layout: &str,
    plan: &Path,
    raw: &str,
) -> Result<Vec<(bool, ServedCall)>, String> {
    let (log, sent, _) = run_on_server(
        ctx,
        venv,
        run_dir,
        layout,
        plan,
        raw,
        &["--concurrency", "1"],
    )?;
    let served = parse_log(&log);
    let is_brief: Vec<bool> = sent.lines().map(|l| l.contains(BRIEF_MARK)).collect();
    if is_brief.len() != served.len() {
        return Err(format!(
            "{layout}: {} requests logged, {} timed in the server's log",
            is_brief.len(),
            served.len(),
        ));
    }
    Ok(is_brief.into_iter().zip(served).collect())
}

/// Runs `plan` with `ctx run`'s scheduling flags `run_args` on a fresh
/// llama.cpp server; the server's log, the requests it received (one
/// JSON line each) and how long `ctx run` took, in seconds (the server
/// was ready before it started). `layout` names the run's files.
fn run_on_server(
    ctx: &Path,
    venv: &Venv,
    run_dir: &Path,
    layout: &str,
    plan: &Path,
    raw: &str,
    run_args: &[&str],
) -> Result<(String, String, f64), String> {
    let root = crate::root();
    let port = free_port()?;
    let requests = run_dir.join(format!("requests-{layout}.jsonl"));
    let log = run_dir.join(format!("server-{layout}.log"));
    let mut cmd = Command::new(venv.python());
    cmd.arg(root.join("scripts/e2e/llama_server.py"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--alias", "smollm2", "--n-ctx", N_CTX, "--threads", "1"])
        .env("CTX_E2E_REQUEST_LOG", &requests);
    let mut server = Server::start("llama-cpp-python server", cmd, &log, 3600)?;
    server.wait_ready(port, "/v1/models", Duration::from_secs(300))?;
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let args: Vec<String> = ["--model", "smollm2", "--max-attempts", "2", "--var", raw]
        .iter()
        .chain(run_args)
        .map(|s| s.to_string())
        .collect();
    let mut run = CtxRun::new(
        ctx,
        plan,
        &base_url,
        &secret(),
        &run_dir.join(layout),
        &args,
    );
    let started = std::time::Instant::now();
    let code = run.execute(Duration::from_secs(3600))?;
    let took = started.elapsed().as_secs_f64();
    server.stop();
    if code != 0 {
        return Err(run.failure(&format!("exited with {code}, expected 0")));
    }
    let log = fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let sent = fs::read_to_string(&requests).map_err(|e| format!("{}: {e}", requests.display()))?;
    Ok((log, sent, took))
}

/// The requests of a llama-cpp-python log (`verbose=True`), in order: a
/// `Llama.generate: N prefix-match hit, remaining M prompt tokens to eval`
/// line when the kept state served a prefix, then llama.cpp's
/// `prompt eval time = X ms / M tokens` line.
fn parse_log(log: &str) -> Vec<ServedCall> {
    let mut calls = Vec::new();
    let mut reused = 0;
    for line in log.lines() {
        if let Some(rest) = line.split("Llama.generate: ").nth(1) {
            reused = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        } else if let Some(rest) = line.split("prompt eval time =").nth(1) {
            let mut numbers = rest
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .filter(|s| !s.is_empty());
            let prompt_ms = numbers.next().and_then(|n| n.parse().ok()).unwrap_or(0.0);
            let processed = numbers.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            calls.push(ServedCall {
                reused,
                processed,
                prompt_ms,
            });
            reused = 0;
        }
    }
    calls
}

/// Each `Llama.generate: N prefix-match hit, remaining M prompt tokens to
/// eval` line of a llama-cpp-python log: `(N, M)`.
fn parse_hits(log: &str) -> Vec<(u64, u64)> {
    log.lines()
        .filter_map(|line| line.split("Llama.generate: ").nth(1))
        .map(|rest| {
            let mut numbers = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|n| n.parse().unwrap_or(0));
            (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
        })
        .collect()
}

/// One layout's row of the measured table.
fn row(layout: &str, calls: &[(bool, ServedCall)]) -> String {
    let brief: f64 = calls
        .iter()
        .filter(|(b, _)| *b)
        .map(|(_, c)| c.prompt_ms)
        .sum();
    let items: Vec<ServedCall> = calls.iter().filter(|(b, _)| !b).map(|(_, c)| *c).collect();
    let first = items.first().map_or(0.0, |c| c.prompt_ms);
    let later = &items[items.len().min(1)..];
    let later_mean = later.iter().map(|c| c.prompt_ms).sum::<f64>() / later.len().max(1) as f64;
    let map_total: f64 = items.iter().map(|c| c.prompt_ms).sum();
    let prompt: u64 = calls.iter().map(|(_, c)| c.reused + c.processed).sum();
    let reused: u64 = calls.iter().map(|(_, c)| c.reused).sum();
    format!(
        "| {layout} | {} | {prompt} | {reused} ({:.1}%) | {brief:.0} | {first:.0} | {later_mean:.0} | {map_total:.0} | {:.1}x |\n",
        calls.len(),
        100.0 * reused as f64 / prompt.max(1) as f64,
        first / later_mean.max(f64::MIN_POSITIVE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_lines_give_the_tokens_reused_and_processed() {
        let log = "Llama.generate: 1590 prefix-match hit, remaining 56 prompt tokens to eval\nother\n\
                   x Llama.generate: 32 prefix-match hit, remaining 1600 prompt tokens to eval\n";
        assert_eq!(parse_hits(log), [(1590, 56), (32, 1600)]);
    }

    #[test]
    fn the_log_gives_each_requests_reuse_and_prompt_time() {
        let log = "llama_perf_context_print: prompt eval time =    5401.20 ms /  1602 tokens (    3.37 ms per token,   296.61 tokens per second)\n\
                   Llama.generate: 1570 prefix-match hit, remaining 35 prompt tokens to eval\n\
                   llama_perf_context_print:        eval time =     900.00 ms /    47 runs   (   19.15 ms per token,    52.22 tokens per second)\n\
                   llama_perf_context_print: prompt eval time =     120.50 ms /    35 tokens (    3.44 ms per token,   290.46 tokens per second)\n";
        assert_eq!(
            parse_log(log),
            [
                ServedCall {
                    reused: 0,
                    processed: 1602,
                    prompt_ms: 5401.2
                },
                ServedCall {
                    reused: 1570,
                    processed: 35,
                    prompt_ms: 120.5
                },
            ]
        );
    }
}
