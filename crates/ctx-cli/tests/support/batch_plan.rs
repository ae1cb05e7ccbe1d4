//! The plan and server of the `--batch` tests (run_batch.rs,
//! run_batch_durable.rs): `a` and `b`, then `c` after both (two waves),
//! against ctx-test-support's honest server counting o200k tokens.
//! tests/eval.rs takes the server alone.

#![allow(dead_code)]

use ctx_test_support::Dir;
use ctx_test_support::openai_server::{Behaviour, HonestServer};
use ctx_tokens::{Tokenizer, TokenizerExt};
use serde_json::json;

/// The model every task asks for.
pub const MODEL: &str = "gpt-5-mini";

/// The honest server, started on `rt`.
pub fn server(rt: &tokio::runtime::Runtime) -> HonestServer {
    rt.block_on(async {
        let counter = Tokenizer::O200kBase.counter();
        HonestServer::start(Behaviour::honest(std::sync::Arc::new(move |s: &str| {
            counter.count(s) as u64
        })))
        .await
    })
}

/// `a` and `b`, then `c` after both: two waves.
pub fn write_plan(dir: &Dir) {
    let params = |p: &str| json!({"prompt": p, "model": MODEL, "max_tokens": 8});
    let plan = json!({"schema_version": 1, "config": {"tokenizer": "o200k_base"},
        "sub_tasks": [
            {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": params("Say a.")}},
            {"id": "b", "description": "B", "tool_or_prompt": {"name": "inference", "params": params("Say b.")}},
            {"id": "c", "description": "C", "dependencies": ["a", "b"],
             "tool_or_prompt": {"name": "inference", "params": params("Join them.")}}]});
    dir.write("plan.json", &plan.to_string());
}
