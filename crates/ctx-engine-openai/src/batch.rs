//! [`BatchClient`]: requests sent through an OpenAI-compatible Batch API
//! (the Files and Batches endpoints at the engine's base URL), for half
//! the price of real-time calls and within a 24-hour window.
//!
//! The reference followed: <https://platform.openai.com/docs/api-reference/batch>,
//! <https://platform.openai.com/docs/api-reference/files> and the guide
//! <https://platform.openai.com/docs/guides/batch>.
//!
//! * **Encoding** ([`BatchClient::encode`]): one JSONL line per request,
//!   `{"custom_id", "method": "POST", "url": "/v1/chat/completions",
//!   "body"}`. The `body` is the very bytes the real-time engine sends
//!   for the request without streaming (the same encoder), so a batched
//!   request keeps the prompt layout and its provider-side prefix cache.
//!   The `custom_id` names run, attempt and task ([`custom_id`]). A batch
//!   holds one model (the provider's rule), so requests are grouped by
//!   model, then split at the provider's limits per file
//!   ([`MAX_REQUESTS_PER_FILE`], [`MAX_BYTES_PER_FILE`]).
//! * **Running**: upload (`purpose=batch`), create (`completion_window:
//!   24h`), poll with a doubling wait ([`PollPolicy`]) until the batch ends
//!   or a deadline passes, download the output and error files, delete
//!   the input; [`BatchClient::cancel`] cancels.
//! * **Results** ([`BatchClient::collect`]): one [`BatchOutcome`] per
//!   request sent: an answer (an [`InferenceResponse`] whose usage says
//!   [`ServiceTier::Batch`], priced at batch rates), a failure classified
//!   retryable or not by the real-time engine's rules (the `retry`
//!   module's table; an expired or cancelled request is retryable: nothing
//!   was wrong with it), or no answer at all.
//!
//! Bad input is a [`BatchError`] that says where, never a panic: an output
//! line that does not parse (its line number), a `custom_id` ctx did not
//! write, one that repeats, an answer to a request this batch never sent,
//! an output file larger than the requests' output bounds allow, a batch
//! that failed validation or was cancelled by someone else, a server
//! without the endpoints (its URL and status).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use ctx_engine::{EngineError, InferenceRequest, InferenceResponse, output_too_large};
use ctx_model::{Attempt, CallOutcome, ServiceTier, TokenUsage};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Client, Method, Url};
use serde_json::{Value, json};

use crate::config::{ConfigError, OpenAiConfig, display_url, endpoint};
use crate::engine::{
    CallTokens, body_cap, chosen_model, encode_body, http_client, read_capped, schema_to_send,
};
use crate::retry::{self, ApiErrorInfo, snippet};
use crate::wire::{self, BodyError};

/// The most requests one batch input file may hold (OpenAI's limit).
pub const MAX_REQUESTS_PER_FILE: usize = 50_000;
/// The largest batch input file, in bytes (OpenAI's 200 MB).
pub const MAX_BYTES_PER_FILE: usize = 200_000_000;
/// The endpoint every batched request is for.
pub const BATCH_ENDPOINT: &str = "/v1/chat/completions";
/// The largest batch or file object read (they are small JSON objects).
const MAX_OBJECT_BYTES: usize = 1 << 20;

/// Where a batch input file is cut: at most this many requests and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Requests per file.
    pub requests: usize,
    /// Bytes per file.
    pub bytes: usize,
}

impl Default for BatchLimits {
    fn default() -> BatchLimits {
        BatchLimits {
            requests: MAX_REQUESTS_PER_FILE,
            bytes: MAX_BYTES_PER_FILE,
        }
    }
}

/// How often a batch is read while it runs: first after `initial`, the
/// wait doubling up to `max`. A batch takes minutes to hours, so the
/// default starts at 5 seconds and settles at one read a minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollPolicy {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for PollPolicy {
    fn default() -> PollPolicy {
        PollPolicy {
            initial: Duration::from_secs(5),
            max: Duration::from_secs(60),
        }
    }
}

/// The `custom_id` of attempt `attempt` of task `task` in run `run`:
/// `ctx:RUN:ATTEMPT:TASK` (a run id holds no `:`; a task id may).
pub fn custom_id(run: &str, task: &str, attempt: u32) -> String {
    format!("ctx:{run}:{attempt}:{task}")
}

/// The run, attempt and task a ctx `custom_id` names.
pub fn parse_custom_id(id: &str) -> Option<(&str, u32, &str)> {
    let mut parts = id.strip_prefix("ctx:")?.splitn(3, ':');
    let run = parts.next().filter(|r| !r.is_empty())?;
    let attempt = parts.next()?.parse().ok()?;
    let task = parts.next().filter(|t| !t.is_empty())?;
    Some((run, attempt, task))
}

/// One request to batch: attempt `attempt` of `request.task_id` in `run`.
#[derive(Debug, Clone)]
pub struct BatchCall {
    /// The run's id.
    pub run: String,
    /// The attempt's number (1 for the first).
    pub attempt: u32,
    /// The request, as the real-time engine would get it.
    pub request: InferenceRequest,
}

/// What ctx keeps of a request it put in a file: enough to read its
/// answer.
pub(crate) struct Sent {
    model: String,
    task_id: String,
    attempt: u32,
    tokens: CallTokens,
    max_output_bytes: usize,
    /// SHA-256 of the body the request would have without the session's
    /// canary: what tells a resumed request from another one.
    body_sha256: String,
}

impl Sent {
    /// SHA-256 of the request's body without the session's canary.
    pub(crate) fn body_sha256(&self) -> &str {
        &self.body_sha256
    }
}

/// One batch input file: the requests of one model, within the limits.
pub struct BatchFile {
    /// The model every request of the file asks for.
    pub model: String,
    /// The JSONL bytes uploaded.
    pub jsonl: Vec<u8>,
    sent: BTreeMap<String, Sent>,
}

impl fmt::Debug for BatchFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchFile")
            .field("model", &self.model)
            .field("requests", &self.sent.len())
            .field("bytes", &self.jsonl.len())
            .finish()
    }
}

impl BatchFile {
    /// The `custom_id` of every request in the file, sorted.
    pub fn custom_ids(&self) -> impl Iterator<Item = &str> {
        self.sent.keys().map(String::as_str)
    }

    /// Each request of the file as the run's batch ledger keeps it.
    pub fn journal(&self) -> Vec<ctx_engine::BatchedRequest> {
        self.sent
            .iter()
            .map(|(id, sent)| ctx_engine::BatchedRequest {
                custom_id: id.clone(),
                task_id: sent.task_id.clone(),
                attempt: sent.attempt,
                body_sha256: sent.body_sha256.clone(),
                max_output_bytes: sent.max_output_bytes,
            })
            .collect()
    }

    /// How many requests the file holds.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// Whether the file holds no request.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// The most bytes the output and error files of this file's batch may
    /// take: each request's whole-body bound for its `max_output_bytes`
    /// (the real-time engine's, which leaves room for the JSON around an
    /// output) plus 1 KiB for the line around the body.
    pub fn output_limit(&self) -> usize {
        output_limit(self.sent.values().map(|s| s.max_output_bytes))
    }
}

/// The most bytes the output and error files of requests bounded at
/// `bounds` (each its `max_output_bytes`) may take.
pub(crate) fn output_limit(bounds: impl Iterator<Item = usize>) -> usize {
    bounds.fold(0usize, |sum, bound| {
        sum.saturating_add(body_cap(bound).saturating_add(1024))
    })
}

/// A batch's status as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchState {
    /// The input file is being checked.
    Validating,
    /// The input failed validation (see [`BatchStatus::errors`]).
    Failed,
    /// Requests are being answered.
    InProgress,
    /// The output files are being written.
    Finalizing,
    /// Every request was answered.
    Completed,
    /// The window passed first.
    Expired,
    /// A cancellation is under way.
    Cancelling,
    /// Cancelled; what was answered before is kept.
    Cancelled,
    /// A status ctx does not know.
    Other(String),
}

impl BatchState {
    fn of(name: &str) -> BatchState {
        match name {
            "validating" => BatchState::Validating,
            "failed" => BatchState::Failed,
            "in_progress" => BatchState::InProgress,
            "finalizing" => BatchState::Finalizing,
            "completed" => BatchState::Completed,
            "expired" => BatchState::Expired,
            "cancelling" => BatchState::Cancelling,
            "cancelled" => BatchState::Cancelled,
            other => BatchState::Other(other.to_string()),
        }
    }

    /// The status's name, as the provider spells it.
    pub fn name(&self) -> &str {
        match self {
            BatchState::Validating => "validating",
            BatchState::Failed => "failed",
            BatchState::InProgress => "in_progress",
            BatchState::Finalizing => "finalizing",
            BatchState::Completed => "completed",
            BatchState::Expired => "expired",
            BatchState::Cancelling => "cancelling",
            BatchState::Cancelled => "cancelled",
            BatchState::Other(name) => name,
        }
    }

    /// Whether the batch will change no more.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            BatchState::Failed
                | BatchState::Completed
                | BatchState::Expired
                | BatchState::Cancelled
        )
    }
}

/// A batch object, the parts ctx reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStatus {
    /// The batch's id.
    pub id: String,
    /// Its status.
    pub state: BatchState,
    /// `request_counts.total`.
    pub total: u64,
    /// `request_counts.completed`.
    pub completed: u64,
    /// `request_counts.failed`.
    pub failed: u64,
    /// The input file's id.
    pub input_file_id: String,
    /// The file of answered requests, once there is one.
    pub output_file_id: Option<String>,
    /// The file of failed requests, once there is one.
    pub error_file_id: Option<String>,
    /// Validation errors, each `line N: code: message`.
    pub errors: Vec<String>,
}

impl BatchStatus {
    /// The status as the run's batch ledger and progress lines show it.
    pub fn report(&self) -> ctx_engine::BatchReport {
        ctx_engine::BatchReport {
            id: self.id.clone(),
            status: self.state.name().to_string(),
            total: self.total,
            completed: self.completed,
            failed: self.failed,
        }
    }
}

/// What became of one request of a batch.
#[derive(Debug, Clone)]
pub enum BatchOutcome {
    /// Answered; the usage says [`ServiceTier::Batch`].
    Answered(InferenceResponse),
    /// Failed; `retryable` by the real-time engine's rules.
    Failed {
        /// The failure, its attempt recorded.
        error: EngineError,
        /// Whether sending it again may succeed.
        retryable: bool,
    },
    /// The batch ended (cancelled) without a word on it.
    NotAnswered,
}

/// Why a batch could not be sent or read.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// A request could not be put in a file.
    #[error("task `{task}`: {reason}")]
    Encode {
        /// The task.
        task: String,
        /// Why.
        reason: String,
    },
    /// The server has no Files or Batches endpoint.
    #[error(
        "{url} answered HTTP {status}: the server has no Batch API (OpenAI's Files and Batches endpoints)"
    )]
    NoBatchApi {
        /// The URL asked.
        url: String,
        /// Its status.
        status: u16,
    },
    /// Any other HTTP failure.
    #[error("HTTP {status} from {url}: {message}")]
    Http {
        /// The URL asked.
        url: String,
        /// Its status.
        status: u16,
        /// The server's words.
        message: String,
    },
    /// No answer at all.
    #[error("cannot reach {url}: {message}")]
    Transport {
        /// The URL asked.
        url: String,
        /// The cause.
        message: String,
    },
    /// An answer that is not the object asked for.
    #[error("{url} did not answer a {what}: {reason}")]
    BadObject {
        /// The URL asked.
        url: String,
        /// The object expected (`file`, `batch`).
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The provider refused the input file.
    #[error("batch {batch} failed validation: {}", errors.join("; "))]
    Validation {
        /// The batch.
        batch: String,
        /// Each error, `line N: code: message`.
        errors: Vec<String>,
    },
    /// The batch was cancelled, and not by ctx.
    #[error("batch {batch} was cancelled by someone else (status {state})")]
    CancelledElsewhere {
        /// The batch.
        batch: String,
        /// `cancelling` or `cancelled`.
        state: String,
    },
    /// A line of an output or error file is not a result.
    #[error("{file} line {line}: {reason}")]
    Unparseable {
        /// The file's id.
        file: String,
        /// Its line, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A `custom_id` ctx does not write.
    #[error("{file} line {line}: custom_id `{custom_id}` is not one ctx writes")]
    UnknownCustomId {
        /// The file's id.
        file: String,
        /// Its line, from 1.
        line: usize,
        /// The id.
        custom_id: String,
    },
    /// A second result for one request.
    #[error("{file} line {line}: a second result for custom_id `{custom_id}`")]
    RepeatedCustomId {
        /// The file's id.
        file: String,
        /// Its line, from 1.
        line: usize,
        /// The id.
        custom_id: String,
    },
    /// A result for a request this batch did not hold.
    #[error("{file} line {line}: a result for `{custom_id}`, a request this batch never sent")]
    NeverSent {
        /// The file's id.
        file: String,
        /// Its line, from 1.
        line: usize,
        /// The id.
        custom_id: String,
    },
    /// An output or error file past its bound.
    #[error(
        "{file} is larger than {limit} bytes, the most the outputs of {requests} requests may take (max_output_bytes)"
    )]
    OutputTooLarge {
        /// The file's id.
        file: String,
        /// The bound.
        limit: usize,
        /// The requests of the batch.
        requests: usize,
    },
}

impl BatchError {
    /// Whether asking again may succeed, by the real-time rules: no
    /// answer at all, or a status they retry (408, 409, 429, 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            BatchError::Transport { .. } => true,
            BatchError::Http {
                status, message, ..
            } => retry::status_is_retryable(
                *status,
                &ApiErrorInfo {
                    message: message.clone(),
                    ..ApiErrorInfo::default()
                },
            ),
            _ => false,
        }
    }
}

/// A batch client for an OpenAI-compatible server.
pub struct BatchClient {
    client: Client,
    auth: Option<HeaderValue>,
    base: String,
    config: OpenAiConfig,
    limits: BatchLimits,
    poll: PollPolicy,
}

impl fmt::Debug for BatchClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchClient")
            .field("base", &self.shown(""))
            .field("limits", &self.limits)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

/// A batch created from an uploaded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The uploaded input file.
    pub file_id: String,
    /// The batch.
    pub batch: BatchStatus,
}

impl BatchClient {
    /// A client for the server at `config.base_url`, sending what the
    /// real-time engine built from `config` would.
    pub fn new(config: OpenAiConfig) -> Result<BatchClient, ConfigError> {
        endpoint(&config.base_url)?;
        config.check()?;
        let (client, auth) = http_client(&config)?;
        Ok(BatchClient {
            client,
            auth,
            base: config.base_url.trim().trim_end_matches('/').to_string(),
            config,
            limits: BatchLimits::default(),
            poll: PollPolicy::default(),
        })
    }

    /// Files cut at `limits` instead of the provider's.
    pub fn with_limits(mut self, limits: BatchLimits) -> BatchClient {
        self.limits = limits;
        self
    }

    /// Where files are cut.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    /// Batches read on `poll`.
    pub fn with_poll(mut self, poll: PollPolicy) -> BatchClient {
        self.poll = poll;
        self
    }

    /// `path` under the base URL, any password masked.
    fn shown(&self, path: &str) -> String {
        let url = format!("{}{path}", self.base);
        Url::parse(&url).map_or(url, |u| display_url(&u))
    }

    /// The input files for `calls`: grouped by model (sorted), each group
    /// cut at the limits, in the calls' order within a group.
    pub fn encode(&self, calls: &[BatchCall]) -> Result<Vec<BatchFile>, BatchError> {
        let (files, mut refused) = self.encode_each(calls);
        match refused.is_empty() {
            true => Ok(files),
            false => Err(refused.swap_remove(0).1),
        }
    }

    /// [`encode`](Self::encode), keeping every call it can: the files,
    /// and each call it could not encode (its index in `calls`) with why.
    /// One task without a model does not keep its wave from the batch.
    pub fn encode_each(&self, calls: &[BatchCall]) -> (Vec<BatchFile>, Vec<(usize, BatchError)>) {
        let mut by_model: BTreeMap<String, Vec<(String, Vec<u8>, Sent)>> = BTreeMap::new();
        let (mut seen, mut refused) = (BTreeSet::new(), Vec::new());
        for (index, call) in calls.iter().enumerate() {
            let (id, line, sent) = match self.encode_one(call) {
                Ok(encoded) => encoded,
                Err(e) => {
                    refused.push((index, e));
                    continue;
                }
            };
            if !seen.insert(id.clone()) {
                let reason = format!("custom_id `{id}` is in the batch twice");
                let task = call.request.task_id.clone();
                refused.push((index, BatchError::Encode { task, reason }));
                continue;
            }
            by_model
                .entry(sent.model.clone())
                .or_default()
                .push((id, line, sent));
        }
        (self.cut(by_model), refused)
    }

    /// The files of each model's lines, cut at the limits.
    fn cut(&self, by_model: BTreeMap<String, Vec<(String, Vec<u8>, Sent)>>) -> Vec<BatchFile> {
        let mut files: Vec<BatchFile> = Vec::new();
        for (model, lines) in by_model {
            for (id, line, sent) in lines {
                let fits = files.last().is_some_and(|f| {
                    f.model == model
                        && f.sent.len() < self.limits.requests
                        && f.jsonl.len() + line.len() <= self.limits.bytes
                });
                if !fits {
                    files.push(BatchFile {
                        model: model.clone(),
                        jsonl: Vec::new(),
                        sent: BTreeMap::new(),
                    });
                }
                if let Some(file) = files.last_mut() {
                    file.jsonl.extend_from_slice(&line);
                    file.sent.insert(id, sent);
                }
            }
        }
        files
    }

    /// One request's `custom_id`, JSONL line (newline included) and what
    /// is kept to read its answer.
    pub(crate) fn encode_one(
        &self,
        call: &BatchCall,
    ) -> Result<(String, Vec<u8>, Sent), BatchError> {
        let request = &call.request;
        let error = |reason: String| BatchError::Encode {
            task: request.task_id.clone(),
            reason,
        };
        let defaults = &self.config.defaults;
        let model = chosen_model(&request.params, defaults).ok_or_else(|| {
            error(
                "no model: set `params.model` in the plan or give the engine a default model"
                    .into(),
            )
        })?;
        let schema = schema_to_send(request, self.config.structured_output, false);
        let body =
            encode_body(request, model, defaults, false, schema).map_err(|e| error(e.message))?;
        // A resumed session plants a new canary: the request is the same
        // one without it.
        let body_sha256 = match request.canary {
            None => ctx_model::digest::sha256_hex(&body),
            Some(_) => {
                let bare = InferenceRequest {
                    canary: None,
                    ..request.clone()
                };
                let schema = schema_to_send(&bare, self.config.structured_output, false);
                let bare = encode_body(&bare, model, defaults, false, schema)
                    .map_err(|e| error(e.message))?;
                ctx_model::digest::sha256_hex(&bare)
            }
        };
        let id = custom_id(&call.run, &request.task_id, call.attempt);
        let line = batch_line(&id, &body);
        if line.len() > self.limits.bytes {
            return Err(error(format!(
                "its request takes {} bytes, more than a batch file may ({} bytes)",
                line.len(),
                self.limits.bytes
            )));
        }
        let sent = Sent {
            model: model.to_string(),
            task_id: request.task_id.clone(),
            attempt: call.attempt,
            tokens: CallTokens::of(request, defaults),
            max_output_bytes: request.max_output_bytes,
            body_sha256,
        };
        Ok((id, line, sent))
    }

    /// One HTTP exchange; the body of a 2xx answer, read up to `cap`
    /// bytes (one more tells a longer body). `probe`: a 404, 405 or 501
    /// means the server has no Batch API.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<(String, Vec<u8>)>,
        cap: usize,
        probe: bool,
    ) -> Result<Vec<u8>, BatchError> {
        let url = self.shown(path);
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .timeout(self.config.request_timeout);
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        if let Some((content_type, bytes)) = body {
            request = request.header(CONTENT_TYPE, content_type).body(bytes);
        }
        let transport = |e: reqwest::Error| BatchError::Transport {
            url: url.clone(),
            message: e.to_string(),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        if probe && matches!(status, 404 | 405 | 501) {
            return Err(BatchError::NoBatchApi { url, status });
        }
        let ok = response.status().is_success();
        let bytes = read_capped(response, cap.saturating_add(1))
            .await
            .map_err(transport)?;
        if !ok {
            let info = ApiErrorInfo::from_body(&bytes);
            return Err(BatchError::Http {
                url,
                status,
                message: info.message,
            });
        }
        Ok(bytes)
    }

    /// A JSON object from `path`.
    async fn object(
        &self,
        method: Method,
        path: &str,
        body: Option<(String, Vec<u8>)>,
        what: &'static str,
        probe: bool,
    ) -> Result<Value, BatchError> {
        let bytes = self
            .exchange(method, path, body, MAX_OBJECT_BYTES, probe)
            .await?;
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| BatchError::BadObject {
                url: self.shown(path),
                what,
                reason: format!(
                    "not a JSON object: {}",
                    snippet(&String::from_utf8_lossy(&bytes), 200)
                ),
            })
    }

    /// Asks the server for its batches (`GET /batches?limit=1`): a server
    /// without the Batch API answers [`BatchError::NoBatchApi`] (or
    /// another located error) before anything is sent.
    pub async fn probe(&self) -> Result<(), BatchError> {
        self.object(Method::GET, "/batches?limit=1", None, "batch list", true)
            .await
            .map(drop)
    }

    /// Runs `exchange` again while it fails in a way the real-time rules
    /// retry ([`BatchError::is_transient`]), up to `--max-attempts` in all,
    /// waiting the engine's backoff (doubling from `--retry-initial-ms`
    /// to `--retry-max-ms`) between attempts. Only for calls that pay
    /// nothing twice: an upload sent twice leaves at most an unused file;
    /// a batch is never created twice.
    async fn retrying<T, F, Fut>(&self, mut exchange: F) -> Result<T, BatchError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, BatchError>>,
    {
        let retry = &self.config.retry;
        let mut pause = retry.initial_backoff;
        let mut attempt = 1;
        loop {
            match exchange().await {
                Err(e) if e.is_transient() && attempt < retry.max_attempts => {
                    tokio::time::sleep(pause).await;
                    pause = pause.saturating_mul(2).min(retry.max_backoff);
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Uploads `file` (`purpose=batch`), retried on transient failures;
    /// its id.
    pub async fn upload(&self, file: &BatchFile) -> Result<String, BatchError> {
        let object = self
            .retrying(|| {
                let (content_type, body) = multipart(&file.jsonl);
                self.object(
                    Method::POST,
                    "/files",
                    Some((content_type, body)),
                    "file",
                    true,
                )
            })
            .await?;
        self.id_of(&object, "/files", "file")
    }

    fn id_of(&self, object: &Value, path: &str, what: &'static str) -> Result<String, BatchError> {
        object["id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .ok_or_else(|| BatchError::BadObject {
                url: self.shown(path),
                what,
                reason: "it has no `id`".into(),
            })
    }

    /// Uploads `file` and creates its batch.
    pub async fn submit(&self, file: &BatchFile) -> Result<Submitted, BatchError> {
        let file_id = self.upload(file).await?;
        let batch = self.create(&file_id).await?;
        Ok(Submitted { file_id, batch })
    }

    /// Creates a batch from the uploaded file `file_id`.
    pub async fn create(&self, file_id: &str) -> Result<BatchStatus, BatchError> {
        let create = json!({"input_file_id": file_id, "endpoint": BATCH_ENDPOINT,
                            "completion_window": "24h"});
        let body = (
            "application/json".to_string(),
            create.to_string().into_bytes(),
        );
        let object = self
            .object(Method::POST, "/batches", Some(body), "batch", true)
            .await?;
        self.status_of(&object, "/batches")
    }

    fn status_of(&self, object: &Value, path: &str) -> Result<BatchStatus, BatchError> {
        let id = self.id_of(object, path, "batch")?;
        let state = object["status"]
            .as_str()
            .ok_or_else(|| BatchError::BadObject {
                url: self.shown(path),
                what: "batch",
                reason: "it has no `status`".into(),
            })?;
        let text = |key: &str| object[key].as_str().map(str::to_string);
        let count = |key: &str| object["request_counts"][key].as_u64().unwrap_or(0);
        let errors = object["errors"]["data"]
            .as_array()
            .map(|list| list.iter().map(validation_error).collect())
            .unwrap_or_default();
        Ok(BatchStatus {
            id,
            state: BatchState::of(state),
            total: count("total"),
            completed: count("completed"),
            failed: count("failed"),
            input_file_id: text("input_file_id").unwrap_or_default(),
            output_file_id: text("output_file_id"),
            error_file_id: text("error_file_id"),
            errors,
        })
    }

    /// The batch `id` as it is now.
    pub async fn status(&self, id: &str) -> Result<BatchStatus, BatchError> {
        let path = format!("/batches/{id}");
        let object = self
            .object(Method::GET, &path, None, "batch", false)
            .await?;
        self.status_of(&object, &path)
    }

    /// Cancels batch `id`; its status after.
    pub async fn cancel(&self, id: &str) -> Result<BatchStatus, BatchError> {
        let path = format!("/batches/{id}/cancel");
        let object = self
            .object(Method::POST, &path, None, "batch", false)
            .await?;
        self.status_of(&object, &path)
    }

    /// Deletes file `id`, retried on transient failures.
    pub async fn delete_file(&self, id: &str) -> Result<(), BatchError> {
        let path = format!("/files/{id}");
        self.retrying(|| self.object(Method::DELETE, &path, None, "file", false))
            .await
            .map(drop)
    }

    /// Reads batch `id` until it ends, waiting as [`PollPolicy`] says, or
    /// until `deadline` passes: then its status as it is (not final).
    ///
    /// A read that fails in a way the real-time rules retry (no
    /// connection, a 5xx, a 429) is read again at the next wait: a batch
    /// runs for hours, and one bad read must not lose it. Only
    /// `--max-attempts` such failures in a row end the wait.
    pub async fn wait(
        &self,
        id: &str,
        deadline: Option<Instant>,
    ) -> Result<BatchStatus, BatchError> {
        self.wait_seen(id, deadline, &mut |_| {}).await
    }

    /// [`wait`](Self::wait), handing `seen` every status read.
    pub async fn wait_seen(
        &self,
        id: &str,
        deadline: Option<Instant>,
        seen: &mut (dyn FnMut(&BatchStatus) + Send),
    ) -> Result<BatchStatus, BatchError> {
        let mut pause = self.poll.initial;
        let mut failures = 0u32;
        loop {
            let read = self.status(id).await;
            let now = Instant::now();
            if let Ok(status) = &read {
                seen(status);
            }
            match read {
                Ok(status) if status.state.is_final() || deadline.is_some_and(|d| now >= d) => {
                    return Ok(status);
                }
                Ok(_) => failures = 0,
                Err(e) if e.is_transient() && failures + 1 < self.config.retry.max_attempts => {
                    failures += 1;
                }
                Err(e) => return Err(e),
            }
            let sleep = deadline.map_or(pause, |d| pause.min(d - now));
            tokio::time::sleep(sleep).await;
            pause = pause.saturating_mul(2).min(self.poll.max);
        }
    }

    /// Sends `file` as one batch and waits for its end: one outcome per
    /// request. A batch that fails validation, or that someone else
    /// cancels, is an error; the input file is deleted when the batch
    /// ends.
    pub async fn run(
        &self,
        file: &BatchFile,
    ) -> Result<BTreeMap<String, BatchOutcome>, BatchError> {
        let submitted = self.submit(file).await?;
        let status = self.wait(&submitted.batch.id, None).await?;
        let _ = self.delete_file(&submitted.file_id).await;
        match status.state {
            BatchState::Failed => Err(BatchError::Validation {
                batch: status.id,
                errors: status.errors,
            }),
            BatchState::Cancelled | BatchState::Cancelling => Err(BatchError::CancelledElsewhere {
                batch: status.id,
                state: "cancelled".into(),
            }),
            _ => self.collect(&status, file).await,
        }
    }

    /// The outcome of every request of `file` from its batch's output and
    /// error files; a request in neither is [`BatchOutcome::NotAnswered`].
    pub async fn collect(
        &self,
        status: &BatchStatus,
        file: &BatchFile,
    ) -> Result<BTreeMap<String, BatchOutcome>, BatchError> {
        let mut outcomes = BTreeMap::new();
        for file_id in [&status.output_file_id, &status.error_file_id]
            .into_iter()
            .flatten()
        {
            let bytes = self.download(file_id, file).await?;
            read_results(&bytes, file_id, &status.id, file, &mut outcomes)?;
        }
        for id in file.sent.keys() {
            outcomes
                .entry(id.clone())
                .or_insert(BatchOutcome::NotAnswered);
        }
        Ok(outcomes)
    }

    /// An output or error file, refused past [`BatchFile::output_limit`].
    async fn download(&self, file_id: &str, file: &BatchFile) -> Result<Vec<u8>, BatchError> {
        self.download_within(file_id, file.output_limit(), file.len())
            .await
    }

    /// An output or error file of a batch of `requests` requests, refused
    /// past `limit` bytes.
    pub(crate) async fn download_within(
        &self,
        file_id: &str,
        limit: usize,
        requests: usize,
    ) -> Result<Vec<u8>, BatchError> {
        let path = format!("/files/{file_id}/content");
        let bytes = self
            .retrying(|| self.exchange(Method::GET, &path, None, limit, false))
            .await?;
        if bytes.len() > limit {
            return Err(BatchError::OutputTooLarge {
                file: file_id.to_string(),
                limit,
                requests,
            });
        }
        Ok(bytes)
    }
}

/// Reads each line of a result file (`bytes`, the output or error file
/// `file_id` of batch `batch`, for the requests of `file`) into
/// `outcomes`: a line that does not parse, an id never sent or unknown,
/// an id answered twice is a located [`BatchError`], never a panic (a
/// fuzz target feeds it arbitrary bytes).
pub fn read_results(
    bytes: &[u8],
    file_id: &str,
    batch: &str,
    file: &BatchFile,
    outcomes: &mut BTreeMap<String, BatchOutcome>,
) -> Result<(), BatchError> {
    let sent = |id: &str| file.sent.contains_key(id);
    each_result(bytes, file_id, &sent, &mut |number, id, value| {
        if outcomes.contains_key(&id) {
            return Err(BatchError::RepeatedCustomId {
                file: file_id.to_string(),
                line: number,
                custom_id: id,
            });
        }
        let outcome = outcome_of(&value, &file.sent[&id], batch).map_err(|reason| {
            BatchError::Unparseable {
                file: file_id.to_string(),
                line: number,
                reason,
            }
        })?;
        outcomes.insert(id, outcome);
        Ok(())
    })
}

/// The result lines of a file (`bytes`, the output or error file
/// `file_id` of a batch of the requests `sent` says it sent) into `lines`
/// by `custom_id`, unread: the located errors of [`read_results`] for a
/// line that does not parse or names a request the batch never held or
/// names twice.
pub(crate) fn result_lines(
    bytes: &[u8],
    file_id: &str,
    sent: &dyn Fn(&str) -> bool,
    lines: &mut BTreeMap<String, Value>,
) -> Result<(), BatchError> {
    each_result(bytes, file_id, sent, &mut |number, id, value| {
        if lines.contains_key(&id) {
            return Err(BatchError::RepeatedCustomId {
                file: file_id.to_string(),
                line: number,
                custom_id: id,
            });
        }
        lines.insert(id, value);
        Ok(())
    })
}

/// Hands `each` every result line of a file with its number, its
/// `custom_id` (one `sent` knows) and its JSON.
fn each_result(
    bytes: &[u8],
    file_id: &str,
    sent: &dyn Fn(&str) -> bool,
    each: &mut dyn FnMut(usize, String, Value) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let number = index + 1;
        let unparseable = |reason: String| BatchError::Unparseable {
            file: file_id.to_string(),
            line: number,
            reason,
        };
        let value: Value =
            serde_json::from_slice(line).map_err(|e| unparseable(format!("not JSON: {e}")))?;
        let id = value["custom_id"]
            .as_str()
            .ok_or_else(|| unparseable("no `custom_id`".into()))?
            .to_string();
        if !sent(&id) {
            let (file, line, custom_id) = (file_id.to_string(), number, id.clone());
            return Err(match parse_custom_id(&id) {
                Some(_) => BatchError::NeverSent {
                    file,
                    line,
                    custom_id,
                },
                None => BatchError::UnknownCustomId {
                    file,
                    line,
                    custom_id,
                },
            });
        }
        each(number, id, value)?;
    }
    Ok(())
}

/// One result line's outcome; `Err` names what the line lacks.
pub(crate) fn outcome_of(line: &Value, sent: &Sent, batch: &str) -> Result<BatchOutcome, String> {
    let response = &line["response"];
    if response.is_null() {
        let error = &line["error"];
        let code = error["code"].as_str().unwrap_or_default();
        if !error.is_object() {
            return Err("neither `response` nor `error`".into());
        }
        // Nothing was wrong with the request: the batch ran out of time
        // or was cancelled before it.
        let retryable = matches!(code, "batch_expired" | "batch_cancelled");
        let message = format!(
            "batch {batch}: {code}: {}",
            error["message"].as_str().unwrap_or_default()
        );
        return Ok(failed(
            sent,
            batch,
            CallOutcome::ApiError,
            message,
            retryable,
        ));
    }
    let status = response["status_code"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .ok_or("no `response.status_code`")?;
    let body = &response["body"];
    if !(200..300).contains(&status) {
        let info = ApiErrorInfo::from_value(body).unwrap_or_default();
        let retryable = retry::status_is_retryable(status, &info);
        let message = format!("HTTP {status} in batch {batch}: {}", info.message);
        return Ok(failed(
            sent,
            batch,
            CallOutcome::Http(status),
            message,
            retryable,
        ));
    }
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let completion = match wire::parse_completion(&bytes) {
        Ok(completion) => completion,
        Err(e) => {
            let (outcome, why) = match e {
                BodyError::Malformed(reason) => (CallOutcome::Malformed, reason),
                BodyError::EmptyChoices => (CallOutcome::EmptyChoices, "no choices".into()),
                BodyError::Api(info) => (CallOutcome::ApiError, info.message),
            };
            let message = format!("batch {batch}: {why}");
            return Ok(failed(sent, batch, outcome, message, false));
        }
    };
    if completion.output.len() > sent.max_output_bytes {
        let message = output_too_large(sent.max_output_bytes);
        return Ok(failed(
            sent,
            batch,
            CallOutcome::OutputTooLarge,
            message,
            false,
        ));
    }
    let attempts = vec![Attempt {
        batch_id: Some(batch.to_string()),
        service_tier: Some(ServiceTier::Batch),
        ..Attempt::ok(sent.attempt, 0)
    }];
    let mut response = sent
        .tokens
        .response(completion, &sent.model, attempts, Instant::now());
    // A batched request is billed at the batch rate, whatever tier the
    // answer names.
    response.usage = response.usage.map(|u| TokenUsage {
        service_tier: Some(ServiceTier::Batch),
        ..u
    });
    Ok(BatchOutcome::Answered(response))
}

fn failed(
    sent: &Sent,
    batch: &str,
    outcome: CallOutcome,
    message: String,
    retryable: bool,
) -> BatchOutcome {
    let attempt = Attempt {
        number: sent.attempt,
        duration_ms: 0,
        outcome,
        error: Some(message.clone()),
        batch_id: Some(batch.to_string()),
        ..Attempt::default()
    };
    BatchOutcome::Failed {
        error: EngineError {
            message,
            attempts: vec![attempt],
        },
        retryable,
    }
}

/// `line N: code: message` of a validation error.
fn validation_error(error: &Value) -> String {
    let text = |key: &str| error[key].as_str().unwrap_or_default().to_string();
    match error["line"].as_u64() {
        Some(line) => format!("line {line}: {}: {}", text("code"), text("message")),
        None => format!("{}: {}", text("code"), text("message")),
    }
}

/// The JSONL line of one request: `body` (already encoded, and kept
/// byte for byte) wrapped in the batch format.
fn batch_line(custom_id: &str, body: &[u8]) -> Vec<u8> {
    let mut line = format!(
        "{{\"custom_id\":{},\"method\":\"POST\",\"url\":\"{BATCH_ENDPOINT}\",\"body\":",
        Value::String(custom_id.to_string())
    )
    .into_bytes();
    line.extend_from_slice(body);
    line.extend_from_slice(b"}\n");
    line
}

/// A `multipart/form-data` upload of `jsonl` with `purpose=batch`: its
/// content type and body. The boundary is drawn until the file does not
/// hold it.
fn multipart(jsonl: &[u8]) -> (String, Vec<u8>) {
    let boundary = loop {
        let candidate = format!("ctx-batch-{:016x}", fastrand::u64(..));
        let needle = candidate.as_bytes();
        if !jsonl.windows(needle.len()).any(|w| w == needle) {
            break candidate;
        }
    };
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"ctx-batch.jsonl\"\r\n\
         Content-Type: application/jsonl\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(jsonl);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use ctx_engine::InferenceEngine;
    use ctx_model::Params;
    use ctx_test_support::openai_server::{Behaviour, HonestServer};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::{OpenAiEngine, RequestDefaults, RetryPolicy};

    /// The honest server's behaviour these tests use: words as tokens.
    pub(crate) fn words() -> Behaviour {
        Behaviour {
            rejects_response_format: true,
            ..Behaviour::honest(Arc::new(|t: &str| t.split_whitespace().count() as u64))
        }
    }

    /// An engine configuration for `base_url`: one attempt, 5 tokens.
    pub(crate) fn config(base_url: &str) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.to_string(),
            defaults: RequestDefaults {
                model: Some("gpt-4o-mini".into()),
                max_tokens: Some(5),
                temperature: Some(0.0),
                ..RequestDefaults::default()
            },
            retry: RetryPolicy {
                max_attempts: 1,
                ..RetryPolicy::default()
            },
            ..OpenAiConfig::default()
        }
    }

    fn client(base_url: &str) -> BatchClient {
        BatchClient::new(config(base_url))
            .unwrap()
            .with_poll(PollPolicy {
                initial: Duration::from_millis(1),
                max: Duration::from_millis(4),
            })
    }

    /// Attempt 1 of `task` in run `r1`, a system message before `prompt`.
    pub(crate) fn call(task: &str, prompt: &str) -> BatchCall {
        BatchCall {
            run: "r1".into(),
            attempt: 1,
            request: InferenceRequest {
                task_id: task.into(),
                prompt: prompt.into(),
                params: Params {
                    system: Some("Be brief.".into()),
                    ..Params::default()
                },
                prompt_tokens: 2,
                max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
                purpose: Default::default(),
                cache_breakpoints: None,
                canary: None,
                response_schema: None,
            },
        }
    }

    fn answered(outcome: &BatchOutcome) -> &InferenceResponse {
        match outcome {
            BatchOutcome::Answered(response) => response,
            other => panic!("not answered: {other:?}"),
        }
    }

    fn failure(outcome: &BatchOutcome) -> (&EngineError, bool) {
        match outcome {
            BatchOutcome::Failed { error, retryable } => (error, *retryable),
            other => panic!("not failed: {other:?}"),
        }
    }

    #[test]
    fn custom_ids_name_run_attempt_and_task() {
        let id = custom_id("r-7", "map[2]:x", 3);
        assert_eq!(id, "ctx:r-7:3:map[2]:x");
        assert_eq!(parse_custom_id(&id), Some(("r-7", 3, "map[2]:x")));
        for bad in ["r-7:3:t", "ctx::3:t", "ctx:r:x:t", "ctx:r:3:", "ctx:r:3"] {
            assert_eq!(parse_custom_id(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn each_body_is_the_bytes_the_real_time_engine_sends() {
        let mock = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]
            })))
            .mount(&mock)
            .await;
        let base = format!("{}/v1", mock.uri());
        let mut schema_call = call("s", "Give JSON.");
        schema_call.request.response_schema = Some(json!({"type": "object"}));
        let calls = [call("a", "Say \"hi\"\n\u{e9}."), schema_call];
        let engine = OpenAiEngine::new(config(&base)).unwrap();
        for c in &calls {
            engine.infer(&c.request).await.unwrap();
        }
        let sent: Vec<Vec<u8>> = mock
            .received_requests()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.body)
            .collect();
        let files = client(&base).encode(&calls).unwrap();
        assert_eq!(files.len(), 1);
        let lines: Vec<&[u8]> = files[0].jsonl.split(|b| *b == b'\n').collect();
        for (c, (line, body)) in calls.iter().zip(lines.iter().zip(&sent)) {
            let head = format!(
                "{{\"custom_id\":\"ctx:r1:1:{}\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":",
                c.request.task_id
            );
            let expected = [head.as_bytes(), body.as_slice(), b"}"].concat();
            assert_eq!(
                String::from_utf8_lossy(line),
                String::from_utf8_lossy(&expected)
            );
        }
        assert!(String::from_utf8_lossy(&sent[1]).contains("response_format"));
    }

    #[test]
    fn files_are_one_model_each_and_cut_at_the_limits() {
        let batch = client("http://127.0.0.1:9/v1").with_limits(BatchLimits {
            requests: 2,
            bytes: 100_000,
        });
        let mut other = call("o", "x");
        other.request.params.model = Some("gpt-4o".into());
        let calls = [call("a", "x"), other, call("b", "x"), call("c", "x")];
        let files = batch.encode(&calls).unwrap();
        let shape: Vec<(&str, usize)> = files.iter().map(|f| (f.model.as_str(), f.len())).collect();
        assert_eq!(
            shape,
            [("gpt-4o", 1), ("gpt-4o-mini", 2), ("gpt-4o-mini", 1)]
        );
        let line = files[1].jsonl.len() / 2;
        let by_bytes = batch.with_limits(BatchLimits {
            requests: 100,
            bytes: 2 * line + 1,
        });
        let sizes: Vec<usize> = by_bytes
            .encode(&calls[2..])
            .unwrap()
            .iter()
            .map(|f| f.len())
            .collect();
        assert_eq!(sizes, [2]);
        let tight = by_bytes.with_limits(BatchLimits {
            requests: 100,
            bytes: line,
        });
        let three = [call("a", "x"), call("b", "x"), call("c", "x")];
        assert_eq!(tight.encode(&three).unwrap().len(), 3);
        let too_small = tight.with_limits(BatchLimits {
            requests: 100,
            bytes: 10,
        });
        let error = too_small.encode(&three).unwrap_err().to_string();
        assert!(error.starts_with("task `a`: its request takes"), "{error}");
        let twice = client("http://127.0.0.1:9/v1").encode(&[call("a", "x"), call("a", "y")]);
        assert!(
            twice
                .unwrap_err()
                .to_string()
                .contains("in the batch twice")
        );
    }

    #[tokio::test]
    async fn a_batch_answers_each_request_at_the_batch_tier() {
        let server = HonestServer::start(words()).await;
        let batch = client(&server.base_url);
        let files = batch
            .encode(&[call("a", "one two"), call("b", "three")])
            .unwrap();
        let outcomes = batch.run(&files[0]).await.unwrap();
        assert_eq!(outcomes.len(), 2);
        let a = answered(&outcomes["ctx:r1:1:a"]);
        assert_eq!(a.output, " yes yes yes yes yes");
        let usage = a.usage.unwrap();
        assert_eq!(usage.service_tier, Some(ServiceTier::Batch));
        // "Be brief." and "one two", 2 words and 3 of framing each, and 3
        // for the reply.
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (13, 5));
        let in_batch = Attempt {
            batch_id: server.batch_ids().first().cloned(),
            service_tier: Some(ServiceTier::Batch),
            ..Attempt::ok(1, 0)
        };
        assert_eq!(a.attempts, [in_batch], "the call names its batch and tier");
        let bills = server.bills();
        assert_eq!(bills.len(), 2);
        assert!(bills.iter().all(|b| b.service_tier == "batch"));
        assert_eq!(
            server.file_ids().len(),
            1,
            "the input is deleted, the output kept"
        );
    }

    #[tokio::test]
    async fn failed_requests_are_classified_as_real_time_errors_are() {
        let server = HonestServer::start(words()).await;
        server.fail_batch_requests(1);
        let batch = client(&server.base_url);
        let mut schema = call("s", "json");
        schema.request.response_schema = Some(json!({"type": "object"}));
        let files = batch
            .encode(&[call("a", "x"), schema, call("b", "y")])
            .unwrap();
        let outcomes = batch.run(&files[0]).await.unwrap();
        let (error, retryable) = failure(&outcomes["ctx:r1:1:a"]);
        assert!(retryable);
        assert_eq!(error.attempts[0].outcome, CallOutcome::Http(500));
        assert!(
            error.message.starts_with("HTTP 500 in batch batch-"),
            "{}",
            error.message
        );
        let (error, retryable) = failure(&outcomes["ctx:r1:1:s"]);
        assert!(!retryable);
        assert!(
            error.message.contains("response_format"),
            "{}",
            error.message
        );
        answered(&outcomes["ctx:r1:1:b"]);
    }

    #[tokio::test]
    async fn an_expired_batch_gives_its_answers_and_retryable_expiries() {
        let server = HonestServer::start(words()).await;
        server.set_batch_pace(1);
        let batch = client(&server.base_url);
        let files = batch.encode(&[call("a", "x"), call("b", "y")]).unwrap();
        let submitted = batch.submit(&files[0]).await.unwrap();
        assert_eq!(submitted.batch.state, BatchState::Validating);
        batch.status(&submitted.batch.id).await.unwrap();
        let status = batch.status(&submitted.batch.id).await.unwrap();
        assert_eq!(
            (status.state.clone(), status.completed),
            (BatchState::InProgress, 1)
        );
        server.set_batch_pace(0);
        let soon = Instant::now() + Duration::from_millis(20);
        let held = batch.wait(&submitted.batch.id, Some(soon)).await.unwrap();
        assert_eq!(
            held.state,
            BatchState::InProgress,
            "the deadline ends the wait"
        );
        server.advance_clock(Duration::from_secs(24 * 3600));
        let status = batch.wait(&submitted.batch.id, None).await.unwrap();
        assert_eq!(status.state, BatchState::Expired);
        let outcomes = batch.collect(&status, &files[0]).await.unwrap();
        answered(&outcomes["ctx:r1:1:a"]);
        let (error, retryable) = failure(&outcomes["ctx:r1:1:b"]);
        assert!(
            retryable && error.message.contains("batch_expired"),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn a_batch_cancelled_here_leaves_what_it_did_not_answer_unanswered() {
        let server = HonestServer::start(words()).await;
        server.set_batch_pace(1);
        let batch = client(&server.base_url);
        let files = batch.encode(&[call("a", "x"), call("b", "y")]).unwrap();
        let submitted = batch.submit(&files[0]).await.unwrap();
        batch.status(&submitted.batch.id).await.unwrap();
        batch.status(&submitted.batch.id).await.unwrap();
        let cancelling = batch.cancel(&submitted.batch.id).await.unwrap();
        assert_eq!(cancelling.state, BatchState::Cancelling);
        let status = batch.wait(&submitted.batch.id, None).await.unwrap();
        assert_eq!(status.state, BatchState::Cancelled);
        let outcomes = batch.collect(&status, &files[0]).await.unwrap();
        answered(&outcomes["ctx:r1:1:a"]);
        assert!(matches!(outcomes["ctx:r1:1:b"], BatchOutcome::NotAnswered));
    }

    #[tokio::test]
    async fn a_batch_cancelled_by_someone_else_is_an_error_naming_it() {
        let server = HonestServer::start(words()).await;
        server.set_batch_pace(0);
        let batch = client(&server.base_url);
        let files = batch.encode(&[call("a", "x")]).unwrap();
        let run = batch.run(&files[0]);
        let cancel = async {
            while server.batch_ids().is_empty() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert!(server.cancel_batch(&server.batch_ids()[0]));
        };
        let (result, ()) = tokio::join!(run, cancel);
        let error = result.unwrap_err();
        assert!(
            matches!(error, BatchError::CancelledElsewhere { .. }),
            "{error}"
        );
        assert!(error.to_string().starts_with("batch batch-"), "{error}");
    }

    #[tokio::test]
    async fn a_file_the_provider_refuses_fails_validation_naming_the_line() {
        let server = HonestServer::start(words()).await;
        let batch = client(&server.base_url);
        let mut files = batch.encode(&[call("a", "x")]).unwrap();
        let line = files[0].jsonl.clone();
        files[0].jsonl.extend_from_slice(&line);
        let error = batch.run(&files[0]).await.unwrap_err();
        let BatchError::Validation { batch: id, errors } = &error else {
            panic!("{error}");
        };
        assert!(id.starts_with("batch-"));
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with("line 2: duplicate_custom_id"),
            "{errors:?}"
        );
        assert!(server.bills().is_empty());
    }

    #[tokio::test]
    async fn a_server_without_the_batch_api_is_named_with_its_status() {
        let mock = MockServer::start().await;
        let base = format!("{}/v1", mock.uri());
        let batch = client(&base);
        let files = batch.encode(&[call("a", "x")]).unwrap();
        let error = batch.run(&files[0]).await.unwrap_err();
        assert!(
            matches!(error, BatchError::NoBatchApi { status: 404, .. }),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .starts_with(&format!("{base}/files answered HTTP 404")),
            "{error}"
        );
    }

    /// An upload and a download that fail transiently are made again, a
    /// create never: a create sent twice could run its requests twice.
    #[tokio::test]
    async fn uploads_and_downloads_are_retried_and_a_create_is_not() {
        let mock = MockServer::start().await;
        let busy = || ResponseTemplate::new(503).set_body_string("busy");
        for (verb, route) in [("POST", "/v1/files"), ("GET", "/v1/files/out/content")] {
            Mock::given(method(verb))
                .and(path(route))
                .respond_with(busy())
                .up_to_n_times(1)
                .with_priority(1)
                .mount(&mock)
                .await;
        }
        Mock::given(method("POST"))
            .and(path("/v1/files"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "in"})))
            .with_priority(2)
            .mount(&mock)
            .await;
        Mock::given(method("GET"))
            .and(path("/v1/files/out/content"))
            .respond_with(ResponseTemplate::new(200).set_body_string(""))
            .with_priority(2)
            .mount(&mock)
            .await;
        Mock::given(method("POST"))
            .and(path("/v1/batches"))
            .respond_with(busy())
            .mount(&mock)
            .await;
        let base = format!("{}/v1", mock.uri());
        let mut config = config(&base);
        config.retry.max_attempts = 2;
        config.retry.initial_backoff = Duration::from_millis(1);
        let batch = BatchClient::new(config).unwrap();
        let file = batch.encode(&[call("a", "x")]).unwrap().remove(0);
        assert_eq!(batch.upload(&file).await.unwrap(), "in");
        let bytes = batch.download_within("out", 1024, 1).await.unwrap();
        assert!(bytes.is_empty());
        let error = batch.create("in").await.unwrap_err();
        assert!(error.is_transient(), "{error}");
        let creates = mock
            .received_requests()
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.url.path() == "/v1/batches")
            .count();
        assert_eq!(creates, 1, "a create is never sent twice");
    }

    #[tokio::test]
    async fn a_failed_read_of_a_running_batch_is_read_again() {
        let mock = MockServer::start().await;
        let object = |status: &str| {
            json!({"id": "b1", "object": "batch", "status": status, "input_file_id": "in",
                   "request_counts": {"total": 1, "completed": 0, "failed": 0}})
        };
        Mock::given(method("GET"))
            .and(path("/v1/batches/b1"))
            .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
            .up_to_n_times(2)
            .with_priority(1)
            .mount(&mock)
            .await;
        Mock::given(method("GET"))
            .and(path("/v1/batches/b1"))
            .respond_with(ResponseTemplate::new(200).set_body_json(object("completed")))
            .with_priority(2)
            .mount(&mock)
            .await;
        let base = format!("{}/v1", mock.uri());
        let mut config = config(&base);
        config.retry.max_attempts = 3;
        let batch = BatchClient::new(config.clone())
            .unwrap()
            .with_poll(PollPolicy {
                initial: Duration::from_millis(1),
                max: Duration::from_millis(2),
            });
        let status = batch.wait("b1", None).await.unwrap();
        assert_eq!(status.state, BatchState::Completed);
        // With one attempt allowed, one failure ends the wait.
        mock.reset().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
            .mount(&mock)
            .await;
        let error = client(&base).wait("b1", None).await.unwrap_err();
        assert!(error.is_transient(), "{error}");
        assert!(error.to_string().starts_with("HTTP 503 from"), "{error}");
        let gone = BatchError::Http {
            url: base,
            status: 404,
            message: "no such batch".into(),
        };
        assert!(!gone.is_transient());
    }

    /// A mock server whose batch `b1` completed with `output` as its
    /// output file.
    async fn completed_with(output: &[u8]) -> MockServer {
        let mock = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/v1/files/out/content"))
            .respond_with(ResponseTemplate::new(200).set_body_bytes(output.to_vec()))
            .mount(&mock)
            .await;
        mock
    }

    fn status_with_output() -> BatchStatus {
        BatchStatus {
            id: "b1".into(),
            state: BatchState::Completed,
            total: 1,
            completed: 1,
            failed: 0,
            input_file_id: "in".into(),
            output_file_id: Some("out".into()),
            error_file_id: None,
            errors: Vec::new(),
        }
    }

    async fn collect_error(output: &str, max_output_bytes: usize) -> BatchError {
        let mock = completed_with(output.as_bytes()).await;
        let batch = client(&format!("{}/v1", mock.uri()));
        let mut a = call("a", "x");
        a.request.max_output_bytes = max_output_bytes;
        let files = batch.encode(&[a]).unwrap();
        batch
            .collect(&status_with_output(), &files[0])
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn bad_output_files_are_located_errors() {
        let ok = r#"{"custom_id": "ctx:r1:1:a", "response": {"status_code": 200, "body": {"choices": [{"message": {"content": "hi"}}]}}}"#;
        let cases = [
            (format!("{ok}\nnot json\n"), "out line 2: not JSON"),
            (
                format!("\n{ok}\n{ok}\n"),
                "out line 3: a second result for custom_id `ctx:r1:1:a`",
            ),
            (
                ok.replace("ctx:r1:1:a", "mine-7"),
                "out line 1: custom_id `mine-7` is not one ctx writes",
            ),
            (
                ok.replace(":a\"", ":z\""),
                "out line 1: a result for `ctx:r1:1:z`, a request this batch never sent",
            ),
            (
                r#"{"custom_id": "ctx:r1:1:a"}"#.to_string(),
                "out line 1: neither `response` nor `error`",
            ),
            (
                r#"{"response": {}}"#.to_string(),
                "out line 1: no `custom_id`",
            ),
        ];
        for (output, expected) in cases {
            let error = collect_error(&output, 1000).await.to_string();
            assert!(error.starts_with(expected), "{error}");
        }
    }

    #[tokio::test]
    async fn an_output_file_past_the_bound_is_refused() {
        let line = format!(
            r#"{{"custom_id": "ctx:r1:1:a", "response": {{"status_code": 200, "body": {{"choices": [{{"message": {{"content": "{}"}}}}]}}}}}}"#,
            "y".repeat(200_000)
        );
        let error = collect_error(&line, 10).await;
        assert!(
            matches!(error, BatchError::OutputTooLarge { requests: 1, .. }),
            "{error}"
        );
        assert!(
            error.to_string().starts_with("out is larger than"),
            "{error}"
        );
    }
}
