//! Speed of the cost arithmetic (`cargo bench -p ctx-cost`): pricing a
//! 2,000-task plan (the bench plan's size), reading a LiteLLM-sized prices
//! file (3,400 entries, generated here), and 2,000 reserve/settle pairs on
//! the budget ledger. Figures are recorded in docs/cost.md.

use std::path::Path;

use ctx_cost::{
    BudgetLedger, PriceBook, TaskEstimate, TokenRange, Usd, estimate_costs, flag_table,
    parse_litellm,
};

fn main() {
    divan::main();
}

const MODELS: [&str; 5] = [
    "gpt-4o-mini",
    "openai/gpt-4.1",
    "claude-sonnet-4-5",
    "my-finetune",
    "unknown-model",
];

fn plan(tasks: usize) -> Vec<TaskEstimate> {
    (0..tasks)
        .map(|i| TaskEstimate {
            task_id: format!("task-{i:05}"),
            model: MODELS[i % MODELS.len()].to_string(),
            prompt_tokens: TokenRange::bounded(100 + (i as u64 * 37) % 900, 4000),
            completion_tokens: if i % 97 == 0 {
                TokenRange::unbounded(0)
            } else {
                TokenRange::bounded(0, 512)
            },
            attempts: 1 + (i % 3) as u32,
        })
        .collect()
}

fn litellm_text(entries: usize) -> String {
    let mut text = String::from("{\n  \"sample_spec\": {\"input_cost_per_token\": 0.0},\n");
    for i in 0..entries {
        text.push_str(&format!(
            "  \"provider-{p}/model-{i}\": {{\"input_cost_per_token\": {a}e-07, \"output_cost_per_token\": {b}e-06, \
             \"cache_read_input_token_cost\": {c}e-08, \"litellm_provider\": \"provider-{p}\", \"mode\": \"chat\", \
             \"max_input_tokens\": 128000, \"supports_vision\": true}},\n",
            p = i % 40,
            a = 1 + i % 50,
            b = 1 + i % 20,
            c = 1 + i % 90,
        ));
    }
    text.push_str(
        "  \"last\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06}\n}\n",
    );
    text
}

#[divan::bench]
fn estimate_2000_tasks(bencher: divan::Bencher<'_, '_>) {
    let mut book = PriceBook::with_defaults();
    book.push(flag_table(["my-finetune=3,12,1.5"]).unwrap());
    let tasks = plan(2000);
    bencher.bench(|| estimate_costs(&book, divan::black_box(&tasks)));
}

#[divan::bench]
fn render_2000_tasks(bencher: divan::Bencher<'_, '_>) {
    let book = PriceBook::with_defaults();
    let report = estimate_costs(&book, &plan(2000));
    bencher.bench(|| (ctx_model::json_text(&report), report.render_text()));
}

#[divan::bench]
fn parse_litellm_3400_entries(bencher: divan::Bencher<'_, '_>) {
    let text = litellm_text(3400);
    bencher
        .counter(divan::counter::BytesCount::of_str(&text))
        .bench(|| parse_litellm(divan::black_box(&text), Path::new("prices.json")).unwrap());
}

#[divan::bench]
fn ledger_2000_reserve_settle(bencher: divan::Bencher<'_, '_>) {
    let ids: Vec<String> = (0..2000).map(|i| format!("task-{i:05}")).collect();
    let high = Usd::from_picos(50_000_000_000);
    bencher.bench(|| {
        let ledger = BudgetLedger::new(Usd::parse("100").unwrap());
        for id in &ids {
            ledger.reserve(id, high).unwrap();
            ledger.settle(id, Usd::from_picos(20_000_000_000)).unwrap();
        }
        ledger.spent()
    });
}
