//! # ctx-engine-openai: one engine for every OpenAI-compatible server
//!
//! Hosted APIs and local servers alike (OpenAI, Ollama, vLLM, llama.cpp's
//! server, LM Studio, the LiteLLM proxy) speak the chat-completions API, so
//! one engine done well covers them all. [`OpenAiEngine`] implements
//! ctx-engine's [`InferenceEngine`](ctx_engine::InferenceEngine) seam:
//!
//! * **Configuration** ([`OpenAiConfig`]): base URL, optional API key,
//!   request defaults that a task's own `params` override, `params.extra`
//!   passed through to the server.
//! * **Accounting**: `usage` becomes [`TokenUsage`](ctx_model::TokenUsage)
//!   (with cached prompt tokens when reported), the model the server says
//!   it used, and `finish_reason` (`length` = cut by `max_tokens`).
//! * **Streaming**: server-sent events parsed incrementally ([`sse`]) with
//!   `stream_options.include_usage`, and an idle timeout for stalled
//!   streams.
//! * **Faults**: retries with exponential backoff and full jitter that
//!   honour `Retry-After` and `retry-after-ms`; which failures retry is
//!   tabled in the `retry` module's docs (and docs/engines.md). Every
//!   attempt is recorded; [`EngineEvent`]s let a CLI show retries live.
//! * **Pacing**: requests- and tokens-per-minute buckets spent before
//!   each attempt is sent.
//! * **Batches** ([`batch::BatchClient`]): the same requests, byte for
//!   byte, through the provider's Files and Batches endpoints at half
//!   price, split at its limits, results per `custom_id`;
//!   [`BatchingEngine`] sends each wave of calls as one batch, with a
//!   deadline after which what is pending goes real-time.
//! * **Secrets**: the key travels only in the `Authorization` header; it
//!   never appears in a `Debug`, an error or an attempt record.
//!
//! ## Example
//!
//! An engine pointed at a port where nothing listens fails the task after
//! its attempts, naming the URL and the operating system's error:
//!
//! ```
//! use std::time::Duration;
//! use ctx_engine::{InferenceEngine, InferenceRequest};
//! use ctx_engine_openai::{ApiKey, OpenAiConfig, OpenAiEngine, RequestDefaults, RetryPolicy};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A free port, closed again: connections to it are refused.
//! let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
//! let engine = OpenAiEngine::new(OpenAiConfig {
//!     base_url: format!("http://127.0.0.1:{port}/v1"),
//!     api_key: ApiKey::new("sk-example-secret"),
//!     defaults: RequestDefaults { model: Some("gpt-4o-mini".into()), ..Default::default() },
//!     retry: RetryPolicy {
//!         max_attempts: 2,
//!         initial_backoff: Duration::from_millis(1),
//!         ..RetryPolicy::default()
//!     },
//!     ..OpenAiConfig::default()
//! })
//! .unwrap();
//!
//! let request = InferenceRequest {
//!     task_id: "hello".into(),
//!     prompt: "Say hello.".into(),
//!     params: Default::default(),
//!     prompt_tokens: 3,
//!     max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
//!     purpose: Default::default(),
//!     cache_breakpoints: None,
//!     canary: None,
//!     response_schema: None,
//! };
//! let error = engine.infer(&request).await.unwrap_err();
//! assert!(error.message.starts_with(&format!("cannot connect to http://127.0.0.1:{port}/v1/chat/completions")));
//! assert!(error.message.ends_with("(gave up after 2 attempts)"));
//! assert_eq!(error.attempts.len(), 2);
//! assert_eq!(error.attempts[0].outcome, "connect");
//! assert!(!format!("{error:?}").contains("sk-example-secret"));
//! # }
//! ```

pub mod batch;
mod batch_journal;
mod batching;
mod cache_usage;
mod config;
mod engine;
mod pacing;
mod retry;
pub mod sse;
mod wire;

pub use batch::{BatchClient, BatchError, BatchOutcome};
pub use batching::{BatchingConfig, BatchingEngine};
pub use config::{
    ApiKey, BASE_URL_ENV, ConfigError, DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BACKOFF, DEFAULT_REQUEST_TIMEOUT, FlexFallback, OpenAiConfig, RequestDefaults,
    RetryPolicy, Setting, StructuredOutput,
};
pub use ctx_engine::{BatchReport, EngineEvent, Observer};
pub use engine::OpenAiEngine;
