//! `ctx run --engine openai --batch` (docs/engines.md, "Batch API"):
//! each wave of ready tasks goes as one batch through the server's Files
//! and Batches endpoints, each call is recorded and priced at the batch
//! tier, and with `--batch-deadline` what a batch has not answered in time
//! is cancelled in it and sent real-time, at the standard tier.
//!
//! Against ctx-test-support's honest server, whose Batch API answers each
//! request as its chat completions do and bills it at `batch`.

use ctx_cost::{Usage, Usd};
use ctx_model::ServiceTier;
use ctx_test_support::openai_server::HonestServer;
use ctx_test_support::{Dir, Out, task};

#[path = "support/batch_plan.rs"]
mod batch_plan;
use batch_plan::{MODEL, server, write_plan};

/// A LiteLLM prices file with batch rates for [`MODEL`] (the shipped
/// table has none: a batch call would be priced at the standard rates).
const PRICES: &str = r#"{"gpt-5-mini": {"input_cost_per_token": 2.5e-07, "output_cost_per_token": 2e-06,
    "input_cost_per_token_batches": 1.25e-07, "output_cost_per_token_batches": 1e-06}}"#;

fn run(dir: &Dir, server: &HonestServer, extra: &[&str]) -> Out {
    let flags = [&["--batch", "--batch-poll-ms", "2"], extra].concat();
    server.ctx_run(dir, &flags)
}

fn cost_of(task: &serde_json::Value) -> Usd {
    Usd::from_f64(task["cost_usd"].as_f64().unwrap()).unwrap()
}

#[test]
fn each_wave_is_one_batch_priced_at_the_batch_tier() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    let dir = Dir::new();
    write_plan(&dir);
    let prices = dir.write("prices.json", PRICES);
    let prices = prices.to_str().unwrap();
    let out = run(&dir, &server, &["--max-cost", "1", "--prices", prices]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(server.batch_ids().len(), 2, "one batch per wave");
    let bills = server.bills();
    assert_eq!(bills.len(), 3);
    assert!(bills.iter().all(|b| b.service_tier == "batch"), "{bills:?}");
    let json = out.json();
    let mut book = ctx_cost::PriceBook::new();
    book.push(ctx_cost::parse_litellm(PRICES, "prices.json".as_ref()).unwrap());
    let price = book.lookup(MODEL).unwrap().price;
    let mut total = Usd::ZERO;
    for id in ["a", "b", "c"] {
        let task = task(&json, id);
        assert_eq!(task["status"], "completed", "{task}");
        let used = &task["metadata"]["tokens_used"];
        assert_eq!(used["service_tier"], "batch", "{task}");
        let usage = |tier| Usage {
            prompt_tokens: used["prompt_tokens"].as_u64().unwrap(),
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
            completion_tokens: used["completion_tokens"].as_u64().unwrap(),
            tier: Some(tier),
        };
        assert_eq!(cost_of(task), price.cost(&usage(ServiceTier::Batch)));
        assert!(cost_of(task) < price.cost(&usage(ServiceTier::Default)));
        total = total.saturating_add(cost_of(task));
    }
    // The same plan real-time: the same requests, so the same tokens, at
    // the standard rates. The issue's bar: a batch run spends at most
    // 52 % of the real-time one.
    let out = server.ctx_run(&dir, &["--max-cost", "1", "--prices", prices]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    let real_time = ["a", "b", "c"].iter().fold(Usd::ZERO, |sum, id| {
        sum.saturating_add(cost_of(task(&json, id)))
    });
    let ratio = total.to_f64() / real_time.to_f64();
    assert!(
        ratio > 0.0 && ratio <= 0.52,
        "{total} / {real_time} = {ratio}"
    );
    eprintln!(
        "batch run {total}, real-time run {real_time}: {:.1} %",
        ratio * 100.0
    );
}

#[test]
fn past_the_deadline_pending_requests_go_real_time() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    server.set_batch_pace(0);
    let dir = Dir::new();
    write_plan(&dir);
    let out = run(&dir, &server, &["--batch-deadline", "300ms"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let tiers: Vec<String> = server.bills().into_iter().map(|b| b.service_tier).collect();
    assert_eq!(tiers, ["default", "default", "default"]);
    let json = out.json();
    for id in ["a", "b", "c"] {
        assert_eq!(
            task(&json, id)["metadata"]["tokens_used"]["service_tier"],
            "default"
        );
    }
    for id in server.batch_ids() {
        assert!(
            !server.cancel_batch(&id),
            "batch {id} was cancelled by the run"
        );
    }
}

/// The standard error of `ctx run plan.json` with `flags` (`--no-store`
/// unless they name a store), which must exit 2.
fn refused(dir: &Dir, flags: &[&str]) -> String {
    let store: &[&str] = if flags.contains(&"--store") {
        &[]
    } else {
        &["--no-store"]
    };
    let out = Out::of(dir.ctx().args(["run", "plan.json"]).args(store).args(flags));
    assert_eq!(out.code, 2, "{flags:?}: {}", out.stderr);
    out.stderr
}

#[test]
fn batch_flags_out_of_place_are_refused() {
    let dir = Dir::new();
    write_plan(&dir);
    let stderr = refused(&dir, &["--engine", "openai", "--batch-deadline", "6h"]);
    assert!(
        stderr.contains("--batch-deadline needs --batch"),
        "{stderr}"
    );
    let flags = ["--engine", "openai", "--batch", "--batch-deadline", "soon"];
    let stderr = refused(&dir, &flags);
    assert!(stderr.contains("--batch-deadline \"soon\""), "{stderr}");
    let stderr = refused(&dir, &["--engine", "openai", "--batch", "--stream"]);
    assert!(
        stderr.contains("a batch's answers do not stream"),
        "{stderr}"
    );
    let stderr = refused(
        &dir,
        &["--engine", "command", "--command", "cat", "--batch"],
    );
    assert!(stderr.contains("--batch"), "{stderr}");
    // Nothing listens there: refused before any connection.
    let shared = "postgres://ctx@127.0.0.1:9/none";
    let not_shared = "--batch works only with the local SQLite store";
    let stderr = refused(&dir, &["--store", shared, "--engine", "openai", "--batch"]);
    assert!(stderr.contains(not_shared), "{stderr}");
    let worker = ["worker", "--store", shared, "--engine", "openai", "--batch"];
    let out = Out::of(dir.ctx().args(worker));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains(not_shared), "{}", out.stderr);
}
