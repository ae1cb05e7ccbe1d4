//! Prices a small plan three ways and runs it against a dollar budget.
//!
//! ```sh
//! cargo run -p ctx-cost --example plan_budget
//! cargo run -p ctx-cost --example plan_budget -- path/to/model_prices_and_context_window.json
//! ```
//!
//! With a LiteLLM prices file as the argument, its prices win over the
//! shipped default table (but not over the `--price` flag below).

use std::path::Path;
use std::process::ExitCode;

use ctx_cost::{
    BudgetLedger, PriceBook, Reservation, TaskEstimate, TokenRange, Usage, default_table,
    estimate_costs, flag_table, load_litellm, parse_max_cost,
};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    // 1. Prices: defaults, then an optional LiteLLM file, then a flag.
    let mut book = PriceBook::with_defaults();
    if let Some(path) = std::env::args().nth(1) {
        let table = load_litellm(Path::new(&path)).map_err(|e| e.to_string())?;
        println!(
            "read {} prices from {path} ({} entries without token prices skipped)",
            table.len(),
            table.skipped().len()
        );
        book.push(table);
    }
    book.push(flag_table(["my-finetune=3,12,1.5"]).map_err(|e| e.to_string())?);
    println!("prices: {}", default_table().source());
    for model in [
        "gpt-4o-mini",
        "openai/gpt-4.1",
        "my-finetune",
        "llama-local",
    ] {
        match book.lookup(model) {
            Some(m) => println!("  {model}: {} (per 1M tokens; {})", m.price, m.source),
            None => println!("  {model}: price unknown"),
        }
    }

    // 2. Before the run: ranges. Prompt high is max_prompt_tokens, completion
    //    high is max_tokens; attempts = (check retries + 1) × engine attempts.
    let task = |id: &str, model: &str, low: u64, max_tokens: Option<u64>, attempts| TaskEstimate {
        task_id: id.into(),
        model: model.into(),
        prompt_tokens: TokenRange::bounded(low, 4000),
        completion_tokens: TokenRange {
            low: 0,
            high: max_tokens,
        },
        attempts,
    };
    let tasks = vec![
        task("research", "gpt-4o-mini", 350, Some(800), 2),
        task("outline", "openai/gpt-4.1", 900, Some(600), 1),
        task("draft", "my-finetune", 1200, Some(2000), 1),
        task("review", "llama-local", 400, None, 1),
    ];
    println!();
    print!("{}", estimate_costs(&book, &tasks).render_text());

    // 3. During the run: a budget that the priced, bounded tasks must fit.
    let budget = parse_max_cost("0.05").map_err(|e| e.to_string())?;
    let ledger = BudgetLedger::new(budget);
    println!("\nrun with --max-cost {budget}:");
    for t in tasks.iter().filter(|t| t.completion_tokens.high.is_some()) {
        let Some(m) = book.lookup(&t.model) else {
            println!("  {}: not started (price unknown)", t.task_id);
            continue;
        };
        let (Some(p), Some(c)) = (t.prompt_tokens.high, t.completion_tokens.high) else {
            continue;
        };
        let high = m
            .price
            .highest_cost(p, c)
            .saturating_mul(u64::from(t.attempts));
        match ledger
            .reserve(&t.task_id, high)
            .map_err(|e| e.to_string())?
        {
            Reservation::Reserved => {
                // Pretend the call used 70 % of its prompt cap and half of
                // max_tokens, with a quarter of the prompt cached.
                let usage = Usage {
                    prompt_tokens: p * 7 / 10,
                    cached_prompt_tokens: p * 7 / 40,
                    cache_write_prompt_tokens: 0,
                    completion_tokens: c / 2,
                    tier: None,
                };
                let actual = m.price.cost(&usage);
                let s = ledger
                    .settle(&t.task_id, actual)
                    .map_err(|e| e.to_string())?;
                println!(
                    "  {}: reserved ${}, spent ${}, released ${}",
                    t.task_id, s.reserved, s.actual, s.released
                );
            }
            Reservation::MustWait { .. } => println!("  {}: waits for tasks in flight", t.task_id),
            Reservation::NeverFits {
                needed,
                available_at_best,
            } => println!(
                "  {}: skipped (budget): needs ${needed}, at most ${available_at_best} left",
                t.task_id
            ),
        }
    }
    let snap = ledger.snapshot();
    println!(
        "spent ${} of ${} (remaining ${})",
        snap.spent, snap.budget, snap.remaining
    );
    Ok(())
}
