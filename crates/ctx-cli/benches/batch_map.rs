//! A map of 10,000 items through the Batch API (`cargo xtask bench-batch`,
//! or `cargo bench -p ctx-cli --bench batch_map -- [--items N] [--runs
//! N]`), issue 37. Figures: docs/performance.md, "Batch runs (issue 37)".
//!
//! The plan maps one `inference` task over a `--var` list of N items (each
//! capped at 8 completion tokens). It runs as
//! `ctx run` on a run directory against ctx-test-support's honest server
//! (in this process; it answers each request as a provider would and bills
//! it at the tier it was sent at), in three ways, interleaved run by run
//! so that a busy machine slows each alike:
//!
//! * `real-time`: every item a chat completion, 4 in flight
//!   (`--concurrency`'s default);
//! * `--batch`: the items go as batches cut at the provider's limits
//!   (50,000 requests and 200 MB a file: one batch here);
//! * `--batch, half late`: the server answers half the items, then holds
//!   the batch; at `--batch-deadline` the rest is cancelled in it and sent
//!   real-time, at most 4 at once: what a deadline fallback costs.
//!
//! Reported per way: the wall time of the `ctx` process, its peak
//! resident memory (`/usr/bin/time`'s maximum resident set), the batches
//! and the real-time calls the server saw, and what the run spent by its
//! stored costs (`ctx runs show --format json`), at the prices of
//! `fixtures/weekly/prices-tiers.json` (gpt-5-mini with its batch rates).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use ctx_test_support::bench::BenchArgs;
use ctx_test_support::openai_server::{Behaviour, HonestServer};
use ctx_tokens::TokenizerExt;
use serde_json::json;

/// How long a batch may run before its late requests go real-time, in the
/// `half late` way: the server answers half at once and holds the rest,
/// so the deadline is all the batch's wait.
const DEADLINE: &str = "2s";

/// The three ways the map runs.
#[derive(Clone, Copy)]
enum Way {
    RealTime,
    Batch,
    HalfLate,
}

impl Way {
    const ALL: [Way; 3] = [Way::RealTime, Way::Batch, Way::HalfLate];

    fn label(self) -> &'static str {
        match self {
            Way::RealTime => "real-time",
            Way::Batch => "--batch",
            Way::HalfLate => "--batch, half late",
        }
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Way::RealTime => &[],
            Way::Batch => &["--batch", "--batch-poll-ms", "100"],
            Way::HalfLate => &[
                "--batch",
                "--batch-poll-ms",
                "100",
                "--batch-deadline",
                DEADLINE,
            ],
        }
    }
}

/// One run's figures.
struct Sample {
    wall_s: f64,
    peak_mib: f64,
    batches: usize,
    real_time_calls: usize,
    spent: f64,
}

/// The scratch directory's plan and list of `items` items.
fn write_plan(dir: &Path, items: usize) -> Result<(), String> {
    let params = json!({"prompt": "Say it.\n<untrusted-content>\n{{ITEM}}\n</untrusted-content>", "model": "gpt-5-mini", "max_tokens": 8});
    let plan = json!({"schema_version": 1, "config": {"tokenizer": "o200k_base"},
        "variables": [{"name": "LIST", "type": "json", "max_tokens": items * 8 + 100}],
        "sub_tasks": [
            {"id": "m", "description": "One item", "map": {"over": "LIST", "as": "ITEM", "max_items": items},
             "tool_or_prompt": {"name": "inference", "params": params}}]});
    let list: Vec<String> = (0..items).map(|i| format!("item {i}")).collect();
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    write("plan.json", plan.to_string())?;
    write("list.json", json!(list).to_string())
}

/// Runs `ctx` with `args` in `dir` under `/usr/bin/time`: its standard
/// output and error, wall seconds and peak resident MiB.
fn timed_ctx(dir: &Path, args: &[&str]) -> Result<(String, String, f64, f64), String> {
    let peak = dir.join("peak.txt");
    let start = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&peak)
        .arg(env!("CARGO_BIN_EXE_ctx"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("/usr/bin/time ctx: {e}"))?;
    let wall = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return Err(format!("ctx {}: {}\n{stderr}", args.join(" "), out.status));
    }
    let kb: f64 = std::fs::read_to_string(&peak)
        .map_err(|e| format!("{}: {e}", peak.display()))?
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("unreadable peak")?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    Ok((stdout, stderr, wall, kb / 1024.0))
}

/// Runs the map one way against `server`; its figures.
fn run_once(dir: &Path, server: &HonestServer, prices: &str, way: Way) -> Result<Sample, String> {
    let (batches, bills) = (server.batch_ids().len(), server.bills());
    let real_time_before = bills.iter().filter(|b| b.service_tier != "batch").count();
    if matches!(way, Way::HalfLate) {
        server.hold_batches_after(items_of(dir)? / 2);
    }
    let mut args = vec![
        "run",
        "plan.json",
        "--var",
        "LIST=@list.json",
        "--root",
        "runs",
    ];
    args.extend(["--engine", "openai", "--base-url", &server.base_url]);
    args.extend(["--prices", prices]);
    args.extend(way.flags());
    let run = timed_ctx(dir, &args);
    server.hold_batches_after(usize::MAX);
    let (_, stderr, wall_s, peak_mib) = run?;
    let id = ctx_test_support::run_id(&stderr);
    let (show, _, _, _) = timed_ctx(
        dir,
        &["runs", "show", &id, "--root", "runs", "--format", "json"],
    )?;
    let show: serde_json::Value =
        serde_json::from_str(&show).map_err(|e| format!("runs show: {e}"))?;
    let real_time_calls = server
        .bills()
        .iter()
        .filter(|b| b.service_tier != "batch")
        .count();
    Ok(Sample {
        wall_s,
        peak_mib,
        batches: server.batch_ids().len() - batches,
        real_time_calls: real_time_calls - real_time_before,
        spent: show["spent_usd"]
            .as_f64()
            .ok_or("runs show: no spent_usd")?,
    })
}

/// The list's length, from the scratch directory's list.
fn items_of(dir: &Path) -> Result<usize, String> {
    let text =
        std::fs::read_to_string(dir.join("list.json")).map_err(|e| format!("list.json: {e}"))?;
    let list: Vec<String> = serde_json::from_str(&text).map_err(|e| format!("list.json: {e}"))?;
    Ok(list.len())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Prints one way's row: medians over its runs.
fn row(way: Way, items: usize, samples: &[Sample], real_time_spent: f64) {
    let pick = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
    let spent = pick(|s| s.spent);
    let last = samples.last();
    println!(
        "| {} | {items} | {:.1} s | {:.0} MiB | {} | {} | ${spent:.6} | {:.1} % |",
        way.label(),
        pick(|s| s.wall_s),
        pick(|s| s.peak_mib),
        last.map_or(0, |s| s.batches),
        last.map_or(0, |s| s.real_time_calls),
        100.0 * spent / real_time_spent,
    );
}

fn main() -> Result<(), String> {
    let Some(args) = BenchArgs::from_env() else {
        return Ok(());
    };
    let items = args
        .value("--items")
        .map_or(if args.smoke() { 20 } else { 10_000 }, |v| v as usize);
    let runs = args.value("--runs").unwrap_or(1).max(1) as usize;
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let server = rt.block_on(async {
        let counter = ctx_tokens::Tokenizer::O200kBase.counter();
        HonestServer::start(Behaviour::honest(std::sync::Arc::new(move |s: &str| {
            counter.count(s) as u64
        })))
        .await
    });
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = scratch.path();
    write_plan(dir, items)?;
    let prices: PathBuf = ctx_test_support::repo_root().join("fixtures/weekly/prices-tiers.json");
    let prices = prices.display().to_string();
    let mut samples: Vec<Vec<Sample>> = Way::ALL.iter().map(|_| Vec::new()).collect();
    for _ in 0..runs {
        for (k, way) in Way::ALL.into_iter().enumerate() {
            samples[k].push(run_once(dir, &server, &prices, way)?);
        }
    }
    println!(
        "## A map of {items} items through the Batch API (median of {runs} runs, interleaved)\n"
    );
    println!(
        "| way | items | wall | peak RSS | batches | real-time calls | spent | of real-time |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let real_time_spent = median(samples[0].iter().map(|s| s.spent).collect());
    for (k, way) in Way::ALL.into_iter().enumerate() {
        row(way, items, &samples[k], real_time_spent);
    }
    Ok(())
}
