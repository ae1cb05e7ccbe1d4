//! The plan of the period-budget tests, on either store (run_budget.rs,
//! shared_period_budget.rs): two tasks on `m` (priced by the tests'
//! flags) under `budget`, and `cheap`, a fallback tier's model, priced by
//! the plan itself, as a fallback's model must be.

use serde_json::json;

/// `nightly.json`'s text with `budget` as its `config.budget`.
pub fn nightly_plan(budget: serde_json::Value) -> String {
    let task = |id: &str| {
        json!({"id": id, "description": id, "tool_or_prompt": {"name": "inference",
            "params": {"prompt": format!("Say {id}."), "model": "m", "max_tokens": 50}}})
    };
    json!({"schema_version": 1,
        "config": {"tokenizer": "cl100k_base", "budget": budget,
            "prices": {"cheap": {"input": 0.0001, "output": 0.0002}}},
        "sub_tasks": [task("a"), task("b")]})
    .to_string()
}
