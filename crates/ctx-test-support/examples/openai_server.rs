//! The honest OpenAI-compatible server (`ctx_test_support::openai_server`,
//! its Files and Batches API included) as a process of its own, for
//! servers outside Rust's tests to talk to: a LiteLLM proxy forwarding
//! batches to it (docs/engines.md, "Batch API", LiteLLM). Prints its base
//! URL on the first line of standard output, then serves until killed.
//! Tokens are counted as words.
//!
//! `cargo run -p ctx-test-support --example openai_server`

use std::io::Write;
use std::sync::Arc;

use ctx_test_support::openai_server::{Behaviour, HonestServer};

fn main() -> std::io::Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let server = HonestServer::start(Behaviour::honest(Arc::new(|t: &str| {
            t.split_whitespace().count() as u64
        })))
        .await;
        let mut out = std::io::stdout();
        writeln!(out, "{}", server.base_url)?;
        out.flush()?;
        std::future::pending::<std::io::Result<()>>().await
    })
}
