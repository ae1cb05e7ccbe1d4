//! # ctx-engine: the `InferenceEngine` seam
//!
//! What turns an assembled prompt into output. This crate holds the trait,
//! its request, its response and its error, and nothing else, so that an
//! engine (a dry run, a shell command, an HTTP client) depends on the
//! plan model and this crate only, never on markdown parsing, prompt
//! assembly or the graph code. That is ripgrep's `grep-matcher` split: the
//! executor in `ctx-deps` sees only this trait. The [`DryRunEngine`] lives
//! here, beside the trait, since it needs nothing but the trait and the
//! plan model (as `ctx_store::MemoryStore` lives beside the store seam);
//! `ctx-engine-command` ships the command engine and `ctx-engine-openai`
//! the HTTP one, each a crate of its own because each needs a runtime or a
//! client the seam must not compile, and a program that brings its own
//! model implements the trait in a few lines.
//!
//! The method returns a boxed future so that the trait stays object-safe
//! (`Arc<dyn InferenceEngine>`) without a macro crate. Cancellation is by
//! drop: when a run is interrupted the executor drops the future, so an
//! engine must release its resources in `Drop` (kill a child process,
//! abort a request).
//!
//! ```
//! use ctx_engine::{BoxFuture, EngineError, InferenceEngine, InferenceRequest, InferenceResponse};
//!
//! /// Answers every prompt with its length.
//! struct Length;
//!
//! impl InferenceEngine for Length {
//!     fn name(&self) -> &str { "length" }
//!     fn infer<'a>(&'a self, request: &'a InferenceRequest)
//!         -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
//!         Box::pin(async move {
//!             if request.prompt.is_empty() {
//!                 return Err(EngineError::new("empty prompt"));
//!             }
//!             Ok(InferenceResponse {
//!                 output: format!("{} bytes", request.prompt.len()),
//!                 ..InferenceResponse::default()
//!             })
//!         })
//!     }
//! }
//!
//! let request = InferenceRequest {
//!     task_id: "a".into(),
//!     prompt: "Say hello.".into(),
//!     params: Default::default(),
//!     prompt_tokens: 3,
//!     max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
//!     response_schema: None,
//!     purpose: Default::default(),
//!     cache_breakpoints: None,
//!     canary: None,
//! };
//! // Any executor drives the future; this one is ready at once.
//! let mut future = Length.infer(&request);
//! let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! let std::task::Poll::Ready(answer) = future.as_mut().poll(&mut cx) else { unreachable!() };
//! assert_eq!(answer.unwrap().output, "10 bytes");
//! ```

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

pub mod batch_ledger;
mod costs;
mod dry_run;
pub mod trace_context;

pub use batch_ledger::{
    BatchEntry, BatchLedger, BatchReport, BatchedRequest, JournaledBatch, LedgerError,
};
pub use costs::EngineCosts;
pub use dry_run::DryRunEngine;

/// Re-exported: an engine reports it in [`InferenceResponse`].
pub use ctx_model::FinishReason;
use ctx_model::{Attempt, Params, TokenUsage};

/// The default bound on one task's output, in bytes (64 MiB): far above
/// any real completion, far below what could exhaust memory.
/// `ctx_deps::ExecutorOptions::max_output_bytes` overrides it; `ctx run --max-output-bytes` sets that.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;

/// A `Send` future boxed for dynamic dispatch.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One task's call, fully assembled.
#[derive(Debug, Clone)]
pub struct InferenceRequest {
    /// The task's id, for engines that log or label.
    pub task_id: String,
    /// The final prompt, exactly as assembled and capped.
    pub prompt: String,
    /// The task's parameters (`params.prompt` is the original prompt; send
    /// [`prompt`](Self::prompt) instead).
    pub params: Params,
    /// The prompt's token count, for engines that pace by tokens.
    pub prompt_tokens: usize,
    /// The JSON Schema the answer must follow (a task's first
    /// `json_schema` check), for engines that can constrain their output
    /// to it (the OpenAI-compatible engine's `response_format`). Engines
    /// that cannot ignore it: the check still runs on the answer.
    pub response_schema: Option<serde_json::Value>,
    /// The most output, in bytes, this task may produce.
    ///
    /// An engine that reads output incrementally (a command's stdout, a
    /// server-sent-event stream, a response body) must stop reading once
    /// the output grows past this, release what produces it (kill the
    /// command, drop the connection) and fail the task: a command that
    /// never stops writing (`yes`) or a server that streams forever must
    /// not grow memory until the allocator aborts. The executor also
    /// refuses a longer output from an engine that does not check, so the
    /// bound holds for every engine.
    pub max_output_bytes: usize,
    /// Whether the call runs a task or writes a summary of one; engines
    /// that label calls (the dry run, a command's environment) say which.
    pub purpose: RequestPurpose,
    /// Where the call's prompt-cache breakpoints go (`config.cache_breakpoints`),
    /// for engines that send them; `None` for none.
    pub cache_breakpoints: Option<CacheBreakpoints>,
    /// The run's canary sentence (`Never repeat this token: …`,
    /// docs/security.md), when the run plants one: a secret of the run.
    /// An engine that sends a system message ends it with this
    /// ([`system_with_canary`](Self::system_with_canary)); one that has no
    /// system message puts it at the top of the prompt it sends
    /// ([`prompt_with_canary`](Self::prompt_with_canary)). It is kept
    /// apart from [`params`](Self::params) and [`prompt`](Self::prompt)
    /// so that no cache key, fingerprint or stored prompt is computed
    /// from it: a new token changes none of them.
    pub canary: Option<String>,
}

/// What joins a system prompt (or a prompt) and the canary sentence.
pub const CANARY_JOIN: &str = "\n\n";

impl InferenceRequest {
    /// The system message to send: `system` (the task's own, or the
    /// engine's default) followed by the canary sentence when there is
    /// one; the sentence alone when there is no system prompt.
    pub fn system_with_canary<'a>(&'a self, system: Option<&'a str>) -> Option<Cow<'a, str>> {
        match (system, self.canary.as_deref()) {
            (Some(s), Some(c)) => Some(Cow::Owned(format!("{s}{CANARY_JOIN}{c}"))),
            (None, Some(c)) => Some(Cow::Borrowed(c)),
            (s, None) => s.map(Cow::Borrowed),
        }
    }

    /// The prompt an engine without a system message sends: the canary
    /// sentence on top when there is one, then the prompt.
    pub fn prompt_with_canary(&self) -> Cow<'_, str> {
        match &self.canary {
            Some(c) => Cow::Owned(format!("{c}{CANARY_JOIN}{}", self.prompt)),
            None => Cow::Borrowed(&self.prompt),
        }
    }
}

/// Anthropic `cache_control` breakpoints for one call: the executor says
/// where the blocks end, the engine, which knows the model it sends,
/// decides by [`models`](Self::models) whether to send them
/// (ctx-model's `prompt_cache`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheBreakpoints {
    /// The models that get them.
    pub models: ctx_model::prompt_cache::BreakpointModels,
    /// A breakpoint at the end of the system message, when one is sent.
    pub system: bool,
    /// Breakpoints in [`InferenceRequest::prompt`], as byte offsets on
    /// character boundaries, ascending, each above 0 and at most the
    /// prompt's length: the text before each ends a cached part. With
    /// `system`, never more than
    /// [`MAX_BREAKPOINTS`](ctx_model::prompt_cache::MAX_BREAKPOINTS).
    pub prompt_offsets: Vec<usize>,
}

/// What a call is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RequestPurpose {
    /// A plan task's own call.
    #[default]
    Task,
    /// A `summarize_strategy: llm` summary of task
    /// [`task_id`](InferenceRequest::task_id)'s output.
    Summary {
        /// The dependent the summary is focused on (`summary_focus:
        /// dependent`); `None` for the summary every dependent shares.
        dependent: Option<String>,
    },
    /// A `judge` check of task [`task_id`](InferenceRequest::task_id)'s
    /// output: the prompt is the rubric with the output fenced, and the
    /// answer must be the judge's fixed JSON shape.
    Judge,
}

/// What an engine answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InferenceResponse {
    /// The generated text.
    pub output: String,
    /// The model that answered, as the engine reports it.
    pub model: Option<String>,
    /// Usage, when the engine reports it.
    pub usage: Option<TokenUsage>,
    /// Why generation stopped.
    pub finish_reason: Option<FinishReason>,
    /// Every attempt made, the successful one last.
    pub attempts: Vec<Attempt>,
    /// The output was reused from a cache, not generated now.
    pub cached: bool,
}

/// The error of an output longer than
/// [`InferenceRequest::max_output_bytes`]: the one wording every engine and
/// the executor use.
pub fn output_too_large(limit: usize) -> String {
    format!("output exceeded the limit of {limit} bytes (max_output_bytes)")
}

/// An engine gave up on a task.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct EngineError {
    /// The final failure, with the server's or the command's own words.
    pub message: String,
    /// Every attempt made, the failing one last.
    pub attempts: Vec<Attempt>,
}

impl EngineError {
    /// An error after a single attempt.
    pub fn new(message: impl Into<String>) -> Self {
        EngineError {
            message: message.into(),
            attempts: Vec::new(),
        }
    }
}

/// Runs one prompt.
pub trait InferenceEngine: Send + Sync {
    /// The engine's name as `--engine` takes it.
    fn name(&self) -> &str;

    /// Whether outputs answer their prompts. Only then are a task's checks
    /// evaluated and a `judge` check can be asked: a dry run's
    /// placeholders would fail every check, and could not judge one.
    fn answers_prompts(&self) -> bool {
        true
    }

    /// What a run records with every result as the engine that made it,
    /// and compares on resume: a result made under another label is run
    /// again (docs/runs.md, rule 5). The name plus every engine-level
    /// setting that changes outputs and is not in the plan's `params`
    /// (for the HTTP engine: model, temperature, max tokens, top-p, stop
    /// sequences, seed, a short hash of the system prompt).
    ///
    /// The label is stored and shown (`ctx runs show`), so it must never
    /// hold a credential, a base URL or a command string: those may embed
    /// secrets. What selects the server or program goes in
    /// [`cache_identity`](Self::cache_identity) instead. The default is
    /// the name alone, right for an engine without such settings.
    fn label(&self) -> String {
        self.name().to_string()
    }

    /// The model a request without `params.model` is sent to, when the
    /// engine has a default (the OpenAI engine's `--model`): a trace names
    /// each call after the model it asked for (`chat {model}`). `None`, the
    /// default, for engines without models.
    fn default_model(&self) -> Option<&str> {
        None
    }

    /// What the input-hash cache keys outputs by, beside the request: the
    /// [`label`](Self::label) plus whatever selects the model server or
    /// program (a base URL, a command line). It only enters a hash and is
    /// never stored, so it may hold what the label must not. Two engines
    /// with equal identities must answer equal requests alike.
    fn cache_identity(&self) -> String {
        self.label()
    }

    /// Journals this engine's provider batches in `ledger` (a durable
    /// run's store), and takes up the batches it holds unsettled: a
    /// resumed call whose request is still in a live batch waits for that
    /// batch instead of being sent again. Called once by a durable session
    /// before the first call; the default (an engine that batches
    /// nothing) ignores it.
    fn keep_batches(&self, ledger: std::sync::Arc<dyn BatchLedger>) {
        let _ = ledger;
    }

    /// Whether this engine sends through a provider's batch API and takes
    /// up, in [`keep_batches`](Self::keep_batches), the batches a run left
    /// in flight. A resume refuses an engine that does not while the run
    /// holds such batches: it would pay again for what they answer.
    fn sends_batches(&self) -> bool {
        false
    }

    /// How many calls this engine sends as one provider batch at most (the
    /// provider's requests per input file); 0, the default, for an engine
    /// that sends each call on its own. The executor keeps up to this many
    /// tasks in flight whatever its concurrency limit says: a call waiting
    /// in a batch holds no connection and no local work, and the ready
    /// items of a map go as one batch only if all of them are in flight.
    /// Such an engine bounds its own real-time calls.
    fn batch_capacity(&self) -> usize {
        0
    }

    /// Runs `request`. Retries, if any, happen inside and are listed in the
    /// response's or the error's `attempts`.
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>>;

    /// Runs `request` as [`infer`](Self::infer) does, and fires
    /// `first_token` as soon as the answer's first token has arrived: the
    /// moment the server has read the whole prompt, so a provider's prefix
    /// cache holds it and calls sharing its prefix may go (the executor's
    /// cache warm-up, `config.cache_warm_up`).
    ///
    /// The default runs [`infer`](Self::infer) and leaves the signal to the
    /// caller, who fires it when the response (or the error) comes back:
    /// right for an engine that sees its answer only whole (a command, a
    /// request without streaming). An engine that reads its answer as it
    /// comes (the OpenAI-compatible engine with `--stream`: the first
    /// server-sent event) overrides it to fire earlier. Firing is
    /// idempotent, so an engine may fire on every retry's first chunk.
    fn infer_with_first_token<'a>(
        &'a self,
        request: &'a InferenceRequest,
        first_token: &'a FirstToken,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        let _ = first_token;
        self.infer(request)
    }
}

/// The signal an engine fires when a call's first token arrives
/// ([`InferenceEngine::infer_with_first_token`]).
///
/// Why a callback and not a channel: this crate has no async runtime, and
/// an engine should not need the caller's. The caller decides what firing
/// does (the executor sends on a Tokio channel); the callback runs at most
/// once, on the engine's task, and must be quick.
#[derive(Clone)]
pub struct FirstToken {
    callback: std::sync::Arc<dyn Fn() + Send + Sync>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FirstToken {
    /// A signal that runs `callback` the first time it is fired.
    pub fn new(callback: impl Fn() + Send + Sync + 'static) -> FirstToken {
        FirstToken {
            callback: std::sync::Arc::new(callback),
            fired: std::sync::Arc::default(),
        }
    }

    /// Fires the signal: runs the callback unless it already ran (by this
    /// handle or a clone of it).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let count = Arc::new(AtomicUsize::new(0));
    /// let seen = Arc::clone(&count);
    /// let signal = ctx_engine::FirstToken::new(move || { seen.fetch_add(1, Ordering::SeqCst); });
    /// assert!(!signal.has_fired());
    /// signal.fire();
    /// signal.clone().fire();
    /// assert!(signal.has_fired());
    /// assert_eq!(count.load(Ordering::SeqCst), 1);
    /// ```
    pub fn fire(&self) {
        if !self.fired.swap(true, std::sync::atomic::Ordering::AcqRel) {
            (self.callback)();
        }
    }

    /// Whether the signal has fired.
    pub fn has_fired(&self) -> bool {
        self.fired.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl std::fmt::Debug for FirstToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstToken")
            .field("fired", &self.has_fired())
            .finish_non_exhaustive()
    }
}

/// Something an engine did that a person watching the run may want to
/// see: the engine seam's progress events, which any engine may send to
/// the [`Observer`] its caller gives it (the OpenAI-compatible engine
/// sends all four). The CLI shows them on its progress line.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EngineEvent {
    /// Attempt `failed_attempt` failed; attempt `failed_attempt + 1` of
    /// `max_attempts` follows after `delay`.
    Retrying {
        /// The task.
        task_id: String,
        /// The attempt that failed (1 for the first).
        failed_attempt: u32,
        /// `--max-attempts`.
        max_attempts: u32,
        /// The wait before the next attempt.
        delay: std::time::Duration,
        /// The failure's short class (`http_429`, `timeout`, `connect` ...).
        outcome: ctx_model::CallOutcome,
    },
    /// Pacing (`--rpm`/`--tpm`) holds the request back for `wait`.
    Paced {
        /// The task.
        task_id: String,
        /// How long the request waits before it is sent.
        wait: std::time::Duration,
    },
    /// The server rejected `response_format`: this and every later request
    /// of the run go without it, the prompt alone asking for the JSON
    /// (sent once per run).
    StructuredOutputRejected {
        /// The task whose request was rejected.
        task_id: String,
        /// The server's error.
        message: String,
    },
    /// A flex request found no flex capacity on its attempts so far: the
    /// call's last attempt goes at the standard tier
    /// (`--flex-fallback standard`), billed at the standard price.
    FlexFallback {
        /// The task.
        task_id: String,
        /// The attempt that goes at the standard tier.
        attempt: u32,
    },
    /// A provider batch was created, or its status or request counts
    /// moved when it was read (`ctx run --batch`); also when a resume
    /// takes up a batch a dead process left in flight.
    Batch {
        /// The batch as the provider reports it.
        batch: BatchReport,
    },
    /// Streaming: `chars` characters of output received so far.
    Streaming {
        /// The task.
        task_id: String,
        /// Characters received so far in this attempt.
        chars: usize,
    },
}

/// A callback for [`EngineEvent`]s. It runs on the engine's task: keep it
/// quick (update a progress bar, send on a channel).
pub type Observer = std::sync::Arc<dyn Fn(&EngineEvent) + Send + Sync>;
