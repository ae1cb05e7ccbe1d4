//! `ctx plan cost` and `ctx prices`: cost ranges on the Tetris plan, the
//! order of the price sources, unbounded and unpriced tasks, and located
//! errors for bad prices.

use ctx_test_support::{run as ctx, task, write};
use serde_json::Value;

const TETRIS: &str = "fixtures/tetris/plan.yaml";

fn cost_json(args: &[&str]) -> Value {
    let mut all = vec!["plan", "cost"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let (code, out, err) = ctx(&all);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// Dollars as the JSON prints them, compared to an exact decimal figure.
fn usd(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn json_has_the_issue_shape_with_ranges_per_task_and_total() {
    let j = cost_json(&[TETRIS]);
    let tasks = j["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 9);
    for t in tasks {
        for key in [
            "task_id",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
        ] {
            assert!(t.get(key).is_some(), "task lacks {key}: {t}");
        }
        let low = t["prompt_tokens"]["low"].as_u64().unwrap();
        let high = t["prompt_tokens"]["high"].as_u64().unwrap();
        // The plan's cap is 4000; the high end adds one message's framing
        // allowance and the reply's (16 tokens).
        assert_eq!(high, 4016, "{t}");
        assert!(0 < low && low < 4000, "{t}");
        assert_eq!(t["completion_tokens"]["low"], 0);
        assert_eq!(t["model"], "gpt-4o-mini");
        // Four engine attempts; tasks 2, 5 and 9 have checks and the
        // plan's default two check attempts, each a new request.
        let checked = ["2", "5", "9"].contains(&t["task_id"].as_str().unwrap());
        assert_eq!(t["attempts"], if checked { 8 } else { 4 }, "{t}");
    }
    // Task 3 has max_tokens 3000: 4 attempts x (4016 x $0.15 + 3000 x
    // $0.60) per million tokens.
    let t3 = task(&j, "3");
    assert_eq!(t3["completion_tokens"]["high"], 3000);
    assert!((usd(&t3["cost_usd"]["high"]) - 0.0096096).abs() < 1e-12);
    let total = &j["total"];
    assert!(total["cost_usd"]["high"].is_null());
    assert!(usd(&total["cost_usd"]["low"]) > 0.0);
    assert_eq!(total["unpriced"], serde_json::json!([]));
}

#[test]
fn text_names_the_unbounded_tasks_and_suggests_max_tokens() {
    let (code, out, err) = ctx(&["plan", "cost", TETRIS]);
    assert_eq!(code, 0, "{err}");
    let last = out.lines().find(|l| l.starts_with("unbounded:")).unwrap();
    assert!(last.contains("1, 2, 4, 5, 6, 8"), "{out}");
    assert!(last.contains("--max-tokens"), "{out}");
    let total = out.lines().find(|l| l.starts_with("total")).unwrap();
    assert!(total.ends_with("unbounded"), "{out}");
}

#[test]
fn max_tokens_bounds_the_tasks_without_their_own() {
    let j = cost_json(&[TETRIS, "--max-tokens", "1000", "--max-attempts", "1"]);
    assert_eq!(j["total"]["unbounded"], serde_json::json!([]));
    // A task's own max_tokens wins over the flag.
    assert_eq!(task(&j, "3")["completion_tokens"]["high"], 3000);
    assert_eq!(task(&j, "1")["completion_tokens"]["high"], 1000);
    let sum: f64 = j["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| usd(&t["cost_usd"]["high"]))
        .sum();
    assert!((usd(&j["total"]["cost_usd"]["high"]) - sum).abs() < 1e-12);
    assert_eq!(task(&j, "1")["attempts"], 1);
}

#[test]
fn price_flag_wins_over_the_default_table() {
    let j = cost_json(&[TETRIS, "--price", "gpt-4o-mini=1,2"]);
    let t3 = task(&j, "3");
    assert_eq!(t3["price_source"], "--price");
    // 4 x (4016 x $1 + 3000 x $2) per million tokens.
    assert!((usd(&t3["cost_usd"]["high"]) - 0.040064).abs() < 1e-12);
}

#[test]
fn sources_win_in_order_file_then_plan_then_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "prices.json",
        r#"{"a-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
            "b-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
            "c-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}"#,
    );
    let plan = write(
        dir.path(),
        "plan.yaml",
        r#"schema_version: 1
config:
  prices:
    b-model: {input: 3, output: 4}
    c-model: {input: 3, output: 4}
sub_tasks:
  - id: a
    description: A
    tool_or_prompt: {name: inference, params: {prompt: "Say a.", model: a-model, max_tokens: 10}}
  - id: b
    description: B
    tool_or_prompt: {name: inference, params: {prompt: "Say b.", model: b-model, max_tokens: 10}}
  - id: c
    description: C
    tool_or_prompt: {name: inference, params: {prompt: "Say c.", model: c-model, max_tokens: 10}}
"#,
    );
    let j = cost_json(&[&plan, "--prices", &file, "--price", "c-model=5,6"]);
    assert_eq!(
        task(&j, "a")["price_source"].as_str().unwrap(),
        format!("file {file}")
    );
    assert_eq!(task(&j, "b")["price_source"], "plan config.prices");
    assert_eq!(task(&j, "c")["price_source"], "--price");
    // c: 4 attempts x (4016 x $5 + 10 x $6) per million tokens.
    assert!((usd(&task(&j, "c")["cost_usd"]["high"]) - 0.0805600).abs() < 1e-12);
}

#[test]
fn an_unknown_model_is_listed_as_unpriced_and_leaves_the_total_open() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "plan.json",
        r#"{"schema_version": 1, "sub_tasks": [
          {"id": "known", "description": "K", "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "model": "gpt-4o", "max_tokens": 5}}},
          {"id": "odd", "description": "O", "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "max_tokens": 5}}}
        ]}"#,
    );
    let j = cost_json(&[&plan, "--model", "mystery-model"]);
    assert_eq!(j["total"]["unpriced"], serde_json::json!(["mystery-model"]));
    assert!(j["total"]["cost_usd"]["high"].is_null());
    assert!(task(&j, "odd")["cost_usd"]["low"].is_null());
    assert!(task(&j, "known")["cost_usd"]["high"].is_number());

    let (code, out, _) = ctx(&["plan", "cost", &plan, "--model", "mystery-model"]);
    assert_eq!(code, 0);
    assert!(out.contains("price unknown: mystery-model"), "{out}");
}

#[test]
fn a_task_without_any_model_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "plan.json",
        r#"{"schema_version": 1, "sub_tasks": [
          {"id": "nameless", "description": "N", "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}}
        ]}"#,
    );
    let (code, out, err) = ctx(&["plan", "cost", &plan]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("nameless") && err.contains("--model"), "{err}");
}

#[test]
fn a_prompt_over_its_cap_exits_3_naming_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "plan.json",
        r#"{"schema_version": 1, "config": {"max_prompt_tokens": 3}, "sub_tasks": [
          {"id": "wordy", "description": "W", "tool_or_prompt": {"name": "inference", "params": {"prompt": "one two three four five six seven", "model": "gpt-4o"}}}
        ]}"#,
    );
    let (code, _, err) = ctx(&["plan", "cost", &plan]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("task `wordy`"), "{err}");
}

#[test]
fn a_malformed_prices_file_is_named_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.json",
        "{\n  \"m\": {\n    \"input_cost_per_token\": 1e-6,\n    \"output_cost_per_token\": -1\n  }\n}\n",
    );
    let syntax = write(
        dir.path(),
        "syntax.json",
        "{\n  \"m\": {\n    \"input_cost_per_token\" 1e-6\n  }\n}\n",
    );
    for args in [
        vec!["plan", "cost", TETRIS, "--prices", &bad],
        vec!["prices", "--prices", &bad],
    ] {
        let (code, out, err) = ctx(&args);
        assert_eq!(code, 2, "{out}");
        assert!(
            err.contains(&format!("{bad}:4:31:")) && err.contains("negative"),
            "{err}"
        );
    }
    let (code, _, err) = ctx(&["plan", "cost", TETRIS, "--prices", &syntax]);
    assert_eq!(code, 2);
    assert!(err.contains(&format!("{syntax}:3:28:")), "{err}");
}

#[test]
fn a_bad_price_flag_is_quoted() {
    for args in [
        vec!["plan", "cost", TETRIS, "--price", "gpt-4o-mini=1,ten"],
        vec!["prices", "--price", "gpt-4o-mini=1,ten"],
    ] {
        let (code, out, err) = ctx(&args);
        assert_eq!(code, 2, "{out}");
        assert!(err.contains("--price \"gpt-4o-mini=1,ten\""), "{err}");
        assert!(err.contains("\"ten\""), "{err}");
    }
    let (code, _, err) = ctx(&["prices", "--price", "gpt-4o=-1,2"]);
    assert_eq!(code, 2);
    assert!(err.contains("gpt-4o=-1,2"), "{err}");
}

#[test]
fn prices_lists_the_default_table_with_its_date_and_flags_win() {
    let (code, out, err) = ctx(&["prices"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("default table of 2026-10-07"), "{out}");

    let (code, out, err) = ctx(&["prices", "--price", "gpt-4o=2,8", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["default_table"]["date"], "2026-10-07");
    let gpt4o = j["prices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["model"] == "gpt-4o")
        .unwrap();
    assert_eq!(gpt4o["source"], "--price");
    assert_eq!(gpt4o["input"], 2.0);
    assert_eq!(gpt4o["output"], 8.0);
}

#[test]
fn output_is_byte_identical_across_runs() {
    let a = ctx(&["plan", "cost", TETRIS, "--format", "json"]);
    let b = ctx(&["plan", "cost", TETRIS, "--format", "json"]);
    assert_eq!(a, b);
}

/// Two siblings naming the same long entities in opposite orders: under
/// the cache layout their prompts share the entity block, so the second
/// one's prefix is cacheable; under the design layout nothing is. Each
/// task's expected cost lies between its low and high ends, and without
/// `--layout` the report has no `cache` part.
#[test]
fn layout_prediction_compares_design_and_cache_side_by_side() {
    let long = "lorem ipsum dolor sit amet ".repeat(300);
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "siblings.json",
        &serde_json::json!({
            "schema_version": 1,
            "config": {"max_prompt_tokens": 20000},
            "entities": [{"name": "A", "grounded_value": long}, {"name": "B", "grounded_value": long}],
            "sub_tasks": [
                {"id": "x", "description": "x",
                 "entity_context": [{"entity_name": "A"}, {"entity_name": "B"}],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "first"}}},
                {"id": "y", "description": "y",
                 "entity_context": [{"entity_name": "B"}, {"entity_name": "A"}],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "second"}}}
            ]
        })
        .to_string(),
    );
    let base = [
        plan.as_str(),
        "--model",
        "gpt-4o-mini",
        "--max-tokens",
        "100",
    ];
    assert!(cost_json(&base).get("cache").is_none());
    let mut args = base.to_vec();
    args.extend(["--layout", "design,cache"]);
    let j = cost_json(&args);
    let layouts = j["cache"]["layouts"].as_array().unwrap();
    assert_eq!(j["cache"]["minimum"]["min_tokens"], 1024);
    assert_eq!(
        (layouts[0]["layout"].as_str(), layouts[1]["layout"].as_str()),
        (Some("design"), Some("cache"))
    );
    let cacheable = |l: &Value, id: &str| {
        l["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == id)
            .unwrap()["cacheable_tokens"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(cacheable(&layouts[0], "y"), 0);
    assert!(cacheable(&layouts[1], "y") >= 2048);
    assert_eq!(
        cacheable(&layouts[1], "x"),
        0,
        "the first call has nothing earlier to share"
    );
    assert!(usd(&layouts[1]["expected_usd"]) < usd(&layouts[0]["expected_usd"]));
    assert!(layouts[1]["cacheable_fraction"].as_f64().unwrap() > 0.4);
    // The predicted saving: nothing cacheable under design saves nothing;
    // under cache, y's cacheable tokens at gpt-4o-mini's discount
    // ($0.15 - $0.075 per million).
    assert_eq!(layouts[0]["expected_saving_usd"], 0.0);
    let y_cacheable = cacheable(&layouts[1], "y") as f64;
    let saving = usd(&layouts[1]["expected_saving_usd"]);
    assert!(
        (saving - y_cacheable * 0.075e-6).abs() < 1e-12,
        "{saving} for {y_cacheable} tokens"
    );
    // The text table has the saving beside the expected cost, one row per
    // layout, the same figures as the JSON (rounded up to six decimals).
    let mut text_args = vec!["plan", "cost"];
    text_args.extend_from_slice(&args);
    let (code, text, err) = ctx(&text_args);
    assert_eq!(code, 0, "{err}");
    let table = text
        .split("prefix cache (")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let mut lines = table.lines().skip(1);
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header.last(), Some(&"saving"), "{table}");
    assert!(table.contains("saving: against every prompt token at the input rate"));
    let design_row = lines.next().unwrap();
    let cache_row = lines.next().unwrap();
    assert!(
        design_row.starts_with("design") && design_row.ends_with("$0.000000"),
        "{table}"
    );
    // In whole micro-dollars, rounded up: 75,000 pico-dollars a token.
    let micros = (cacheable(&layouts[1], "y") * 75_000).div_ceil(1_000_000);
    let expected = format!("$0.{micros:06}");
    assert!(
        cache_row.starts_with("cache") && cache_row.ends_with(&expected),
        "{table} {expected}"
    );
    for l in layouts {
        for t in l["tasks"].as_array().unwrap() {
            let row = task(&j, t["task_id"].as_str().unwrap());
            let expected = usd(&t["expected_usd"]);
            assert!(
                usd(&row["cost_usd"]["low"]) <= expected
                    && expected <= usd(&row["cost_usd"]["high"]),
                "{t} {row}"
            );
        }
    }
    // A bigger minimum leaves less to cache; an unknown layout is a usage error.
    let mut args = base.to_vec();
    args.extend(["--layout", "cache", "--cache-min-tokens", "100000"]);
    assert_eq!(
        cost_json(&args)["cache"]["layouts"][0]["cacheable_tokens"],
        0
    );
    let (code, _, err) = ctx(&[
        "plan",
        "cost",
        &plan,
        "--model",
        "gpt-4o-mini",
        "--layout",
        "cached",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("invalid value 'cached' for '--layout"),
        "{err}"
    );
}

/// The weekly `notable` map at scale: 24 items, each sharing about 1,500
/// tokens of standing brief before its item, are 24 calls, and at least
/// 80 % of the map's prompt tokens are cacheable under either layout;
/// the cache layout also lets the first item share the brief `brief`
/// lists in another order, so it predicts more and costs less.
#[test]
fn a_maps_items_are_predicted_as_calls_sharing_their_prefix() {
    let raw = format!("RAW_JSON=@{}", "fixtures/weekly/raw/2026-W37.json");
    let j = cost_json(&[
        "fixtures/weekly/notable.yaml",
        "--var",
        &raw,
        "--model",
        "gpt-4o-mini",
        "--layout",
        "design,cache",
    ]);
    let layouts = j["cache"]["layouts"].as_array().unwrap();
    let map = |l: &Value| {
        l["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == "notable")
            .unwrap()
            .clone()
    };
    let fraction =
        |t: &Value| t["cacheable_tokens"].as_f64().unwrap() / t["prompt_tokens"].as_f64().unwrap();
    let (design, cache) = (map(&layouts[0]), map(&layouts[1]));
    assert_eq!(
        (design["calls"].as_u64(), cache["calls"].as_u64()),
        (Some(24), Some(24))
    );
    assert_eq!(layouts[1]["calls"], 25);
    assert!(fraction(&design) >= 0.8, "{design}");
    assert!(fraction(&cache) > fraction(&design), "{design} {cache}");
    assert!(usd(&layouts[1]["expected_usd"]) < usd(&layouts[0]["expected_usd"]));
    // The saving each layout expects is the gap to the same calls uncached,
    // and the cache layout expects more.
    assert!(usd(&layouts[0]["expected_saving_usd"]) > 0.0);
    assert!(usd(&layouts[1]["expected_saving_usd"]) > usd(&layouts[0]["expected_saving_usd"]));
}

/// `--batch` (and `--service-tier flex`) give the run's range at that
/// tier's prices beside the real-time one: gpt-4o-mini's batch rates are
/// half its standard ones; gpt-5-mini has no batch price in the shipped
/// table, so its task stays at the standard price, and is named.
#[test]
fn batch_and_flex_ranges_are_given_beside_the_real_time_one() {
    let dir = tempfile::tempdir().unwrap();
    let sub = |id: &str, model: &str| {
        serde_json::json!({"id": id, "description": id, "tool_or_prompt": {"name": "inference",
            "params": {"prompt": "Say yes.", "model": model, "max_tokens": 100}}})
    };
    let plan = write(
        dir.path(),
        "plan.json",
        &serde_json::json!({"schema_version": 1,
            "sub_tasks": [sub("a", "gpt-4o-mini"), sub("b", "gpt-5-mini")]})
        .to_string(),
    );
    let plan = plan.as_str();
    let j = cost_json(&[plan, "--batch", "--service-tier", "flex"]);
    let high = |t: &Value| ctx_cost::Usd::from_f64(usd(&t["cost_usd"]["high"])).unwrap();
    let (a, b) = (high(task(&j, "a")), high(task(&j, "b")));
    let tiers = j["service_tiers"].as_array().unwrap();
    assert_eq!(tiers.len(), 2, "{j}");
    assert_eq!(tiers[0]["tier"], "batch");
    assert_eq!(
        high(&tiers[0]),
        ctx_cost::Usd::from_picos(a.picos() / 2).saturating_add(b)
    );
    assert_eq!(
        tiers[0]["standard_priced"],
        serde_json::json!(["gpt-5-mini"])
    );
    // gpt-5-mini's flex rates are half its standard ones; gpt-4o-mini has
    // none.
    assert_eq!(tiers[1]["tier"], "flex");
    assert_eq!(
        high(&tiers[1]),
        a.saturating_add(ctx_cost::Usd::from_picos(b.picos() / 2))
    );
    assert_eq!(
        tiers[1]["standard_priced"],
        serde_json::json!(["gpt-4o-mini"])
    );
    // Without either flag there is no tier key; the text names each tier.
    assert!(cost_json(&[plan]).get("service_tiers").is_none());
    let (code, out, err) = ctx(&["plan", "cost", plan, "--batch"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("at batch prices: $0.000000 to $")
            && out.contains("(gpt-5-mini at the standard price: no batch price known)"),
        "{out}"
    );
}
