//! Service tiers from the command line (docs/cost.md, "Service tiers";
//! docs/engines.md): `--service-tier flex` is sent with each request
//! whose task names no tier, each call records the tier the server says
//! it billed and is priced at that tier's rates; a server with no flex
//! capacity gets the call's last attempt at the standard tier
//! (`--flex-fallback standard`, the default), billed at the standard
//! price; a tier no bound covers is refused under a budget.
//!
//! Against ctx-test-support's honest server, which names the tier of
//! every answer and can be out of flex capacity.

use ctx_cost::{Usage, Usd};
use ctx_model::ServiceTier;
use ctx_test_support::openai_server::{Behaviour, Bill, HonestServer};
use ctx_test_support::{Dir, Out};
use ctx_tokens::{Tokenizer, TokenizerExt};
use serde_json::{Value, json};

/// gpt-5-mini: the shipped table prices it at 0.25 / 2 (standard) and
/// 0.125 / 1 (flex) dollars per million tokens.
const MODEL: &str = "gpt-5-mini";

fn server(rt: &tokio::runtime::Runtime, flex_busy: usize) -> HonestServer {
    rt.block_on(async {
        let counter = Tokenizer::O200kBase.counter();
        HonestServer::start(Behaviour {
            flex_busy,
            ..Behaviour::honest(std::sync::Arc::new(move |s: &str| counter.count(s) as u64))
        })
        .await
    })
}

fn write_plan(dir: &Dir) {
    let plan = json!({"schema_version": 1, "config": {"tokenizer": "o200k_base"},
        "sub_tasks": [{"id": "a", "description": "A", "tool_or_prompt": {"name": "inference",
            "params": {"prompt": "Say yes.", "model": MODEL, "max_tokens": 20}}}]});
    dir.write("plan.json", &plan.to_string());
}

fn run(dir: &Dir, server: &HonestServer, extra: &[&str]) -> Out {
    server.ctx_run(dir, extra)
}

/// What `bill` costs at `tier` by the shipped table.
fn priced(bill: &Bill, tier: ServiceTier) -> Usd {
    let book = ctx_cost::PriceBook::with_defaults();
    book.lookup(MODEL).unwrap().price.cost(&Usage {
        prompt_tokens: bill.prompt_tokens,
        cached_prompt_tokens: 0,
        cache_write_prompt_tokens: 0,
        completion_tokens: bill.completion_tokens,
        tier: Some(tier),
    })
}

fn task(out: &Out) -> Value {
    out.json()["tasks"][0].clone()
}

fn cost_of(task: &Value) -> Usd {
    Usd::from_f64(task["cost_usd"].as_f64().unwrap()).unwrap()
}

#[test]
fn a_flex_call_is_recorded_and_priced_at_flex() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt, 0);
    let dir = Dir::new();
    write_plan(&dir);
    let out = run(
        &dir,
        &server,
        &["--service-tier", "flex", "--max-cost", "1"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let task = task(&out);
    assert_eq!(
        task["metadata"]["tokens_used"]["service_tier"], "flex",
        "{task}"
    );
    let bills = server.bills();
    assert_eq!(bills.len(), 1);
    assert_eq!(bills[0].service_tier, "flex");
    let flex = priced(&bills[0], ServiceTier::Flex);
    assert_eq!(cost_of(&task), flex);
    assert!(flex < priced(&bills[0], ServiceTier::Default));
}

#[test]
fn no_flex_capacity_falls_back_to_the_standard_tier_and_price() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt, usize::MAX);
    let dir = Dir::new();
    write_plan(&dir);
    let out = run(
        &dir,
        &server,
        &["--service-tier", "flex", "--max-attempts", "2"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("no flex capacity; attempt 2 goes at the standard tier"),
        "{}",
        out.stderr
    );
    let task = task(&out);
    assert_eq!(
        task["metadata"]["tokens_used"]["service_tier"], "default",
        "{task}"
    );
    let bills = server.bills();
    assert_eq!(bills.len(), 1, "the 429 bills nothing");
    // The answered call at the standard price, and the failed one at its
    // high end (docs/cost.md: a call with no answer may have been billed;
    // ctx never counts it as free).
    let standard = priced(&bills[0], ServiceTier::Default);
    let failed_high = priced(
        &Bill {
            // ctx's count of the prompt (3) and the chat framing and system
            // allowance it adds to every call it prices without usage (16).
            prompt_tokens: 19,
            ..bills[0].clone()
        },
        ServiceTier::Default,
    );
    assert_eq!(cost_of(&task), standard.saturating_add(failed_high));

    // `--flex-fallback none`: every attempt stays at flex, the task fails.
    let out = run(
        &dir,
        &server,
        &[
            "--service-tier",
            "flex",
            "--max-attempts",
            "2",
            "--flex-fallback",
            "none",
        ],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(server.bills().len(), 1);
}

#[test]
fn a_tier_no_bound_covers_is_refused_under_a_budget() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = server(&rt, 0);
    let dir = Dir::new();
    write_plan(&dir);
    for tier in ["priority", "auto"] {
        let out = run(&dir, &server, &["--service-tier", tier, "--max-cost", "1"]);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("--service-tier {tier}: no budget bound covers it")),
            "{}",
            out.stderr
        );
    }
    assert_eq!(server.requests(), 0, "nothing was sent");
    // Without a budget it is sent, and recorded as the server billed it.
    let out = run(&dir, &server, &["--service-tier", "priority"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        task(&out)["metadata"]["tokens_used"]["service_tier"],
        "priority"
    );
    // The command engine has no tiers.
    let out = Out::of(dir.ctx().args([
        "run",
        "plan.json",
        "--no-store",
        "--command",
        "cat",
        "--service-tier",
        "flex",
    ]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("--service-tier is only used by --engine openai"),
        "{}",
        out.stderr
    );
}
