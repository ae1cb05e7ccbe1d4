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
use ctx_test_support::openai_server::{Behaviour, HonestServer};
use ctx_test_support::{Dir, Out, task};
use ctx_tokens::TokenizerExt;
use serde_json::json;

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

/// The weekly fixture's answers, by a phrase of each checked task's own
/// prompt: its required sections, so every check passes at the first
/// attempt (each run makes the same calls).
fn weekly_answers() -> Vec<(String, String)> {
    let report = "---\nsummary: \"the week\"\n---\n\n## Headline\n\n.\n\n## Signal & Noise\n\n.\n\n\
                  ## Blind Spots\n\n.\n\n## The Week Ahead\n\n.\n";
    [
        ("weekly report for", report),
        ("List every fact the export supports", "## Facts\n\n-"),
        ("Under a `## Continuity` heading", "## Continuity\n\n-"),
    ]
    .map(|(key, text)| (key.to_string(), text.to_string()))
    .into()
}

/// `ctx run` of the weekly fixture (docs/cost.md, "The weekly fixture at
/// each tier") against `server` on `gpt-5-mini` at the prices of
/// `fixtures/weekly/prices-tiers.json`, stored under `runs`, with `extra`:
/// it stops at the report's gate (exit 6), every task run; the run's id.
fn weekly_run(dir: &Dir, server: &HonestServer, extra: &[&str]) -> String {
    let weekly = ctx_test_support::repo_root().join("fixtures/weekly");
    let path = |p: &str| weekly.join(p).display().to_string();
    let raw = format!("RAW_JSON=@{}", path("raw/2026-W35.json"));
    let mut cmd = dir.ctx();
    cmd.args([
        "run",
        &path("plan.yaml"),
        "--var",
        &raw,
        "--var",
        "WEEK=2026-W35",
    ])
    .args(["--date", "2026-08-27", "--content-root", &path("content")])
    .args(["--engine", "openai", "--base-url", &server.base_url])
    .args(["--model", MODEL, "--prices", &path("prices-tiers.json")])
    .args(["--retry-initial-ms", "1", "--retry-max-ms", "5"])
    .args(["--root", "runs", "--publish-root", "site"])
    .args(extra);
    let out = Out::of(&mut cmd);
    assert_eq!(out.code, 6, "stops at the report's gate: {}", out.stderr);
    out.run_id()
}

/// What run `id` spent, as `ctx runs show --format json` gives it.
fn spent(dir: &Dir, id: &str) -> Usd {
    let out = dir.run(&["runs", "show", id, "--root", "runs", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    let counts = &json["counts"];
    assert_eq!(counts["completed"], 7, "every task ran: {json}");
    Usd::from_f64(json["spent_usd"].as_f64().unwrap()).unwrap()
}

/// The issue's bar on the weekly fixture (its map over the raw export's
/// notable events, then the report): a run with `--batch` spends at most
/// 52 % of the same run real-time, by the costs each run stored. Both runs
/// send the same requests, so the server bills the same tokens; only the
/// tier differs. `--nocapture` prints the figures of docs/cost.md.
#[test]
fn the_weekly_fixture_batched_spends_at_most_52_percent_of_real_time() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(async {
        let counter = ctx_tokens::Tokenizer::O200kBase.counter();
        HonestServer::start(Behaviour {
            answers: weekly_answers(),
            ..Behaviour::honest(std::sync::Arc::new(move |s: &str| counter.count(s) as u64))
        })
        .await
    });
    let dir = Dir::new();
    let real_time = weekly_run(&dir, &server, &[]);
    let real_time_bills = server.bills();
    let batched = weekly_run(&dir, &server, &["--batch", "--batch-poll-ms", "2"]);
    let batch_bills = &server.bills()[real_time_bills.len()..];
    assert!(real_time_bills.iter().all(|b| b.service_tier == "default"));
    assert!(
        batch_bills.iter().all(|b| b.service_tier == "batch"),
        "{batch_bills:?}"
    );
    let tokens = |bills: &[ctx_test_support::openai_server::Bill]| {
        bills.iter().fold((0, 0), |(p, c), b| {
            (p + b.prompt_tokens, c + b.completion_tokens)
        })
    };
    assert_eq!(
        tokens(&real_time_bills),
        tokens(batch_bills),
        "the same calls"
    );
    let (real_time, batched) = (spent(&dir, &real_time), spent(&dir, &batched));
    let ratio = batched.to_f64() / real_time.to_f64();
    assert!(
        ratio > 0.0 && ratio <= 0.52,
        "{batched} / {real_time} = {ratio}"
    );
    let (prompt, completion) = tokens(batch_bills);
    eprintln!(
        "weekly fixture, {} calls, {prompt} prompt and {completion} completion tokens: \
         real-time {real_time}, --batch {batched} ({:.1} %, {} batches)",
        batch_bills.len(),
        ratio * 100.0,
        server.batch_ids().len()
    );
}

/// A map of `items` items over the `--var` list `LIST`, then `sum` over
/// the map: the items are the first wave, all ready at once.
fn write_map_plan(dir: &Dir) {
    let params = |p: &str| json!({"prompt": p, "model": MODEL, "max_tokens": 8});
    let plan = json!({"schema_version": 1, "config": {"tokenizer": "o200k_base"},
        "variables": [{"name": "LIST", "type": "json"}],
        "sub_tasks": [
            {"id": "m", "description": "M", "map": {"over": "LIST", "as": "ITEM", "max_items": 20},
             "tool_or_prompt": {"name": "inference", "params": params("Say it.\n<untrusted-content>\n{{ITEM}}\n</untrusted-content>")}},
            {"id": "sum", "description": "Sum", "dependencies": ["m"],
             "tool_or_prompt": {"name": "inference", "params": params("Join them.")}}]});
    dir.write("plan.json", &plan.to_string());
}

/// All ready items of a map go as one batch, however few tasks
/// `--concurrency` lets run at once: a batched call waits at the provider,
/// so the executor keeps a batch's worth in flight. `--max-cost` still
/// reserves each item before it is sent, and the run stays within it.
#[test]
fn a_maps_ready_items_go_as_one_batch_beyond_the_concurrency() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    let dir = Dir::new();
    write_map_plan(&dir);
    let list: Vec<String> = (0..12).map(|i| format!("item {i}")).collect();
    let list = format!("LIST={}", json!(list));
    let flags = ["--var", &list, "--concurrency", "2", "--max-cost", "1"];
    let out = run(&dir, &server, &flags);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let batches = server.batch_ids();
    assert_eq!(batches.len(), 2, "the items, then `sum`: {batches:?}");
    let first = server.batch_input(&batches[0]).unwrap();
    assert_eq!(
        first
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        12
    );
    let json = out.json();
    for i in 0..12 {
        assert_eq!(
            task(&json, &format!("m[{i}]"))["status"],
            "completed",
            "{json}"
        );
    }
    assert_eq!(task(&json, "sum")["status"], "completed");
}

/// One map item's high end as `ctx plan cost` gives it for the plan in
/// `dir` with `flags` (the run's engine and price flags): the map's row
/// holds `max_items` calls' worth (docs/cost.md, "a map task is
/// `max_items` calls"), and an item reserves one of them under
/// `--max-cost` (docs/engines.md, "Batch API").
fn one_items_high_end(dir: &Dir, map: &str, flags: &[&str]) -> Usd {
    let mut args = vec!["plan", "cost", "plan.json", "--format", "json"];
    args.extend_from_slice(flags);
    let out = dir.run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = task(&out.json(), map).clone();
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("plan.json")).unwrap())
            .unwrap();
    let items = plan["sub_tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == map)
        .and_then(|t| t["map"]["max_items"].as_u64())
        .unwrap();
    let high = Usd::from_f64(row["cost_usd"]["high"].as_f64().unwrap()).unwrap();
    assert_eq!(high.picos() % u128::from(items), 0, "{row}");
    Usd::from_picos(high.picos() / u128::from(items))
}

/// What `server` billed, each request priced at the tier it was billed
/// at by `book` (as the budget proptest sums it, ctx-run's
/// tests/budget_openai.rs).
fn billed(server: &HonestServer, book: &ctx_cost::PriceBook) -> Usd {
    server
        .bills()
        .iter()
        .map(|b| {
            book.lookup(&b.model).unwrap().price.cost(&Usage {
                prompt_tokens: b.prompt_tokens,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
                completion_tokens: b.completion_tokens,
                tier: Some(ServiceTier::from_name(&b.service_tier)),
            })
        })
        .sum()
}

/// The tasks of each batch `server` created, in creation order.
fn batched_tasks(server: &HonestServer) -> Vec<Vec<String>> {
    server
        .batch_ids()
        .iter()
        .map(|id| {
            let input = String::from_utf8(server.batch_input(id).unwrap()).unwrap();
            input
                .lines()
                .map(|l| {
                    let line: serde_json::Value = serde_json::from_str(l).unwrap();
                    let custom_id = line["custom_id"].as_str().unwrap();
                    custom_id.rsplit(':').next().unwrap().to_string()
                })
                .collect()
        })
        .collect()
}

/// The map plan over six items run with `--batch`, `extra` and a
/// `--max-cost` that holds the high ends of three items and not four,
/// derived from `ctx plan cost`: every task completes, and neither what
/// the server billed nor what the run recorded passes the budget. The
/// run's output.
fn run_six_items_on_three_items_budget(server: &HonestServer, extra: &[&str]) -> Out {
    let dir = Dir::new();
    write_map_plan(&dir);
    let prices = dir.write("prices.json", PRICES);
    let prices = prices.to_str().unwrap();
    let list: Vec<String> = (0..6).map(|i| format!("item {i}")).collect();
    let list = format!("LIST={}", json!(list));
    let priced = ["--var", &list, "--engine", "openai", "--prices", prices];
    let item = one_items_high_end(&dir, "m", &priced);
    let budget = item
        .saturating_add(item)
        .saturating_add(item)
        .saturating_add(Usd::from_picos(item.picos() / 2));
    let budget_text = budget.to_string();
    let mut flags = vec![
        "--var",
        &list,
        "--prices",
        prices,
        "--max-cost",
        &budget_text,
    ];
    flags.extend_from_slice(extra);
    let out = run(&dir, server, &flags);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    for id in (0..6).map(|i| format!("m[{i}]")).chain(["sum".into()]) {
        assert_eq!(task(&json, &id)["status"], "completed", "{json}");
    }
    let mut book = ctx_cost::PriceBook::new();
    book.push(ctx_cost::parse_litellm(PRICES, "prices.json".as_ref()).unwrap());
    let billed = billed(server, &book);
    let spent = Usd::from_f64(json["spent_usd"].as_f64().unwrap()).unwrap();
    assert!(
        billed > Usd::ZERO && billed <= spent && spent <= budget,
        "{billed} billed, {spent} spent of {budget}"
    );
    assert_eq!(server.bills().len(), 7, "one request a task");
    out
}

/// A `--max-cost` that holds the high ends of three items and not four:
/// the map's six ready items cannot all be reserved at once, so the first
/// three go as a batch and the others wait for it to settle (each item is
/// reserved at its real-time high end and settled at the batch rate,
/// which frees room for the next). The run finishes within the budget,
/// every item in exactly one batch and no batch holding more items than
/// the budget fits.
#[test]
fn a_budget_for_three_items_sends_the_maps_items_in_several_batches() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    let out = run_six_items_on_three_items_budget(&server, &[]);
    let json = out.json();
    for i in 0..6 {
        let used = &task(&json, &format!("m[{i}]"))["metadata"]["tokens_used"];
        assert_eq!(used["service_tier"], "batch", "{json}");
    }
    let batches = batched_tasks(&server);
    let (last, items) = batches.split_last().unwrap();
    assert_eq!(last, &["sum"], "{batches:?}");
    assert!(items.len() >= 2, "the items waited: {batches:?}");
    assert_eq!(items[0].len(), 3, "three fit at first: {batches:?}");
    assert!(items.iter().all(|b| b.len() <= 3), "{batches:?}");
    let mut sent: Vec<&String> = items.iter().flatten().collect();
    sent.sort();
    let expected: Vec<String> = (0..6).map(|i| format!("m[{i}]")).collect();
    assert_eq!(sent, expected.iter().collect::<Vec<_>>());
}

/// The same budget while the server holds every batch: at the deadline
/// each batch's items are cancelled in it and go real-time, at the
/// standard price, and the next items are sent only once they settle.
/// The reservation (the real-time high end) covers the fallback: the run
/// finishes, and the server billed no more than the budget.
#[test]
fn past_the_deadline_a_tight_budgets_items_go_real_time_within_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    server.set_batch_pace(0);
    run_six_items_on_three_items_budget(&server, &["--batch-deadline", "300ms"]);
    let batches = batched_tasks(&server);
    assert!(batches.len() >= 3, "{batches:?}");
    assert!(batches.iter().all(|b| b.len() <= 3), "{batches:?}");
    let bills = server.bills();
    assert!(
        bills.iter().all(|b| b.service_tier == "default"),
        "{bills:?}"
    );
}

/// With `--cache-warm-up`, the map's first item is the warm-up call: its
/// siblings wait for its first token, which a batch gives only when the
/// whole batch ends, so it alone goes real-time (marked `warm_up`, billed
/// at the standard tier) and the other items go as one batch after it.
#[test]
fn the_warm_up_call_goes_real_time_and_the_other_items_batched() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt);
    let dir = Dir::new();
    // A shared prefix of well over 1,024 tokens before the item.
    let prefix = "Context word. ".repeat(600);
    let params = json!({"prompt": format!("{prefix}\nSay it.\n<untrusted-content>\n{{{{ITEM}}}}\n</untrusted-content>"),
        "model": MODEL, "max_tokens": 8});
    let plan = json!({"schema_version": 1, "config": {"tokenizer": "o200k_base"},
        "variables": [{"name": "LIST", "type": "json"}],
        "sub_tasks": [{"id": "m", "description": "M", "map": {"over": "LIST", "as": "ITEM", "max_items": 10},
            "tool_or_prompt": {"name": "inference", "params": params}}]});
    dir.write("plan.json", &plan.to_string());
    let list = format!("LIST={}", json!(["one", "two", "three", "four", "five"]));
    let out = run(
        &dir,
        &server,
        &[
            "--var",
            &list,
            "--cache-warm-up",
            "2",
            "--max-attempts",
            "2",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    let fallbacks: Vec<serde_json::Value> = (0..5)
        .map(|i| {
            task(&json, &format!("m[{i}]"))["metadata"]["attempts"][0]["tier_fallback"].clone()
        })
        .collect();
    let warm: Vec<usize> = (0..5).filter(|&i| fallbacks[i] == "warm_up").collect();
    assert_eq!(warm.len(), 1, "{fallbacks:?}");
    assert_eq!(fallbacks.iter().filter(|f| f.is_null()).count(), 4);
    let mut tiers: Vec<String> = server.bills().into_iter().map(|b| b.service_tier).collect();
    tiers.sort();
    assert_eq!(tiers, ["batch", "batch", "batch", "batch", "default"]);
    let batches = batched_tasks(&server);
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].len(), 4);
    assert!(!batches[0].contains(&format!("m[{}]", warm[0])));
}
