//! [`OpenAiEngine`]: one task, one chat completion, as many attempts as
//! the retry policy allows.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ctx_engine::{
    BoxFuture, EngineError, EngineEvent, FirstToken, InferenceEngine, InferenceRequest,
    InferenceResponse, Observer, output_too_large,
};
use ctx_model::display::duration;
use ctx_model::{Attempt, CallOutcome, Params, TokenUsage};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Client, Response, Url};

use crate::config::{
    ConfigError, OpenAiConfig, RequestDefaults, StructuredOutput, display_url, endpoint,
};
use crate::pacing::Pacer;
use crate::retry::{self, ApiErrorInfo, snippet};
use crate::sse::SseParser;
use crate::wire::{self, BodyError, Completion, StreamAccumulator};

/// Largest error body read (the message is at the start).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The least a completion body may be read up to, whatever the output
/// bound: an answer's JSON around a short output.
const MIN_BODY: usize = 64 * 1024;

/// How much of a whole (non-streamed) completion body is read for an
/// output bound of `max_output` bytes: the output plus room for its JSON
/// escaping and the fields around it. A longer body fails the attempt
/// without being read further.
pub(crate) fn body_cap(max_output: usize) -> usize {
    max_output
        .saturating_add(max_output / 4)
        .saturating_add(MIN_BODY)
}

/// The OpenAI-compatible chat-completions engine (`--engine openai`).
///
/// One engine serves a whole run: it holds the connection pool, the
/// pacing buckets and the retry policy, and is shared by every in-flight
/// task. Dropping an `infer` future aborts its request (the connection is
/// closed), which is how a cancelled run stops.
pub struct OpenAiEngine {
    client: Client,
    endpoint: Url,
    /// The endpoint fit to print (a password in the URL is masked).
    shown: String,
    auth: Option<HeaderValue>,
    config: OpenAiConfig,
    pacer: Pacer,
    observer: Option<Observer>,
    /// The server rejected `response_format` once: prompt-only from then
    /// on, for the rest of the run ([`StructuredOutput::Auto`]).
    structured_rejected: AtomicBool,
}

impl fmt::Debug for OpenAiEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEngine")
            .field("endpoint", &self.shown)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One attempt's failure.
#[derive(Debug)]
struct Failure {
    outcome: CallOutcome,
    message: String,
    retryable: bool,
    hint: Option<Duration>,
    /// A 429 "resource unavailable": no capacity at the request's tier.
    unavailable: bool,
}

impl Failure {
    fn retry(outcome: CallOutcome, message: String) -> Failure {
        Failure {
            outcome,
            message,
            retryable: true,
            hint: None,
            unavailable: false,
        }
    }
    fn fatal(outcome: CallOutcome, message: String) -> Failure {
        Failure {
            outcome,
            message,
            retryable: false,
            hint: None,
            unavailable: false,
        }
    }
}

impl OpenAiEngine {
    /// The engine's name as `--engine` takes it.
    pub const NAME: &'static str = "openai";

    /// Builds the engine. Fails on a base URL that is not `http(s)`, a key
    /// that cannot go in a header, or a setting [`OpenAiConfig::check`]
    /// refuses.
    pub fn new(config: OpenAiConfig) -> Result<OpenAiEngine, ConfigError> {
        let endpoint = endpoint(&config.base_url)?;
        config.check()?;
        let (client, auth) = http_client(&config)?;
        Ok(OpenAiEngine {
            client,
            shown: display_url(&endpoint),
            endpoint,
            auth,
            pacer: Pacer::new(config.requests_per_minute, config.tokens_per_minute),
            config,
            observer: None,
            structured_rejected: AtomicBool::new(false),
        })
    }

    /// Sends [`EngineEvent`]s to `observer`.
    pub fn with_observer(mut self, observer: Observer) -> OpenAiEngine {
        self.observer = Some(observer);
        self
    }

    /// The configuration the engine was built with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The chat-completions URL requests go to (any password masked).
    pub fn endpoint(&self) -> &str {
        &self.shown
    }

    /// The model a task runs on: its `params.model`, else `--model`.
    pub fn model_for<'a>(&'a self, params: &'a Params) -> Option<&'a str> {
        chosen_model(params, &self.config.defaults)
    }

    fn emit(&self, event: EngineEvent) {
        // A rate-limit wait is an event of the call's span, when traced
        // (retries are recorded from the attempts, for every engine).
        if let EngineEvent::Paced { wait, .. } = &event {
            tracing::info!(
                "event.name" = "ctx.rate_limit.wait",
                "ctx.wait_ms" = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            );
        }
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }

    fn redact(&self, text: &str) -> String {
        match &self.config.api_key {
            Some(key) => key.redact(text),
            None => text.to_string(),
        }
    }

    /// Runs `request`, with `response_format` when it carries a schema and
    /// [`StructuredOutput`] allows; in `auto` mode a server that rejects
    /// the field gets the request again without it (its failed attempt is
    /// kept in the record), and never again this run.
    ///
    /// The request sent again is one more attempt of the same call, within
    /// `--max-attempts`, not a fresh count: the rejected request may have
    /// been billed, and `--max-cost` reserves `--max-attempts` requests per
    /// call. When the rejection used the last attempt, the call fails.
    async fn run(
        &self,
        request: &InferenceRequest,
        first_token: Option<&FirstToken>,
    ) -> Result<InferenceResponse, EngineError> {
        let mode = self.config.structured_output;
        let rejected = self.structured_rejected.load(Ordering::Relaxed);
        let schema = schema_to_send(request, mode, rejected);
        let Some(schema) = schema else {
            return self.run_with(request, None, 0, first_token).await;
        };
        match self.run_with(request, Some(schema), 0, first_token).await {
            Err(e) if mode == StructuredOutput::Auto && rejects_response_format(&e) => {
                if !self.structured_rejected.swap(true, Ordering::Relaxed) {
                    self.emit(EngineEvent::StructuredOutputRejected {
                        task_id: request.task_id.clone(),
                        message: e.message.clone(),
                    });
                }
                let used = u32::try_from(e.attempts.len()).unwrap_or(u32::MAX);
                if used >= self.config.retry.max_attempts {
                    return Err(e);
                }
                let mut attempts = e.attempts;
                let mut again = self.run_with(request, None, used, first_token).await;
                let later = match &mut again {
                    Ok(r) => &mut r.attempts,
                    Err(e) => &mut e.attempts,
                };
                attempts.append(later);
                *later = attempts;
                again
            }
            other => other,
        }
    }

    /// Makes the call's attempts after the `used` ones already made (the
    /// structured-output fallback's), numbered on from them, up to
    /// `--max-attempts` in all.
    async fn run_with(
        &self,
        request: &InferenceRequest,
        schema: Option<&serde_json::Value>,
        used: u32,
        first_token: Option<&FirstToken>,
    ) -> Result<InferenceResponse, EngineError> {
        let Some(model) = self.model_for(&request.params) else {
            return Err(EngineError::new(format!(
                "task `{}`: no model: set `params.model` in the plan or give the engine a default model",
                request.task_id
            )));
        };
        let mut body = self.encode_request(request, model, schema)?;
        let tokens = CallTokens::of(request, &self.config.defaults);
        let max = self.config.retry.max_attempts;
        let mut attempts: Vec<Attempt> = Vec::new();
        // Set once flex had no capacity and the request went standard.
        let mut tier_fallback = None;
        for number in used.saturating_add(1)..=max {
            self.pace(&request.task_id, tokens.reserved).await;
            let started = Instant::now();
            let result = self
                .attempt(
                    &request.task_id,
                    body.clone(),
                    request.max_output_bytes,
                    first_token,
                )
                .await;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            match result {
                Ok(completion) => {
                    attempts.push(Attempt {
                        service_tier: completion.service_tier,
                        tier_fallback,
                        ..Attempt::ok(number, duration_ms)
                    });
                    return Ok(tokens.response(completion, model, attempts, started));
                }
                Err(failure) => {
                    let message = self.redact(&failure.message);
                    if !failure.retryable || number == max {
                        let failed = failed_attempt(number, duration_ms, &message, None);
                        attempts.push(Attempt {
                            tier_fallback,
                            ..failed(failure.outcome)
                        });
                        let message = if number > 1 {
                            format!("{message} (gave up after {number} attempts)")
                        } else {
                            message
                        };
                        return Err(EngineError { message, attempts });
                    }
                    let delay = retry::delay(&self.config.retry, number, failure.hint);
                    let failed = failed_attempt(number, duration_ms, &message, Some(delay));
                    attempts.push(failed(failure.outcome.clone()));
                    self.emit(EngineEvent::Retrying {
                        task_id: request.task_id.clone(),
                        failed_attempt: number,
                        max_attempts: max,
                        delay,
                        outcome: failure.outcome,
                    });
                    tokio::time::sleep(delay).await;
                    let last = failure.unavailable && number + 1 == max;
                    if last && self.fall_back_from_flex(&request.task_id, max, &mut body) {
                        tier_fallback = Some(ctx_model::TierFallback::FlexUnavailable);
                    }
                }
            }
        }
        // `max_attempts >= 1` is checked in `new`, so the loop returned.
        Err(EngineError {
            message: "no attempt was made".into(),
            attempts,
        })
    }

    /// Before a call's last attempt, when flex had no capacity on the ones
    /// before: with `--flex-fallback standard` the request `body` goes at
    /// the standard tier instead ([`crate::FlexFallback`]). A request that
    /// did not ask for flex is left as it is. Whether it fell back.
    fn fall_back_from_flex(&self, task_id: &str, attempt: u32, body: &mut Vec<u8>) -> bool {
        if self.config.flex_fallback != crate::FlexFallback::Standard {
            return false;
        }
        let Some(standard) = wire::at_standard_tier(body) else {
            return false;
        };
        *body = standard;
        self.emit(EngineEvent::FlexFallback {
            task_id: task_id.to_string(),
            attempt,
        });
        true
    }

    /// The request's JSON body: the prompt, the model and the task's
    /// parameters over the engine's defaults, and `response_format` when
    /// `schema` is given.
    fn encode_request(
        &self,
        request: &InferenceRequest,
        model: &str,
        schema: Option<&serde_json::Value>,
    ) -> Result<Vec<u8>, EngineError> {
        encode_body(
            request,
            model,
            &self.config.defaults,
            self.config.stream,
            schema,
        )
    }

    /// Waits until the pacer has room for `tokens` (`--rpm`, `--tpm`),
    /// saying so when it has to wait.
    async fn pace(&self, task_id: &str, tokens: u64) {
        let wait = self.pacer.reserve(tokens);
        if !wait.is_zero() {
            self.emit(EngineEvent::Paced {
                task_id: task_id.to_string(),
                wait,
            });
            tokio::time::sleep(wait).await;
        }
    }

    /// One HTTP exchange, its output bounded by `max_output` bytes.
    async fn attempt(
        &self,
        task_id: &str,
        body: Vec<u8>,
        max_output: usize,
        first_token: Option<&FirstToken>,
    ) -> Result<Completion, Failure> {
        let mut builder = self
            .client
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(auth) = &self.auth {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        // W3C trace context, when a tracer is installed: a server that
        // traces (LiteLLM, vLLM) puts its spans under this call's.
        if let Some(traceparent) = ctx_engine::trace_context::traceparent() {
            builder = builder.header("traceparent", traceparent);
        }
        if self.config.stream {
            builder = builder.header(ACCEPT, "text/event-stream");
            let response = tokio::time::timeout(self.config.request_timeout, builder.send())
                .await
                .map_err(|_| self.request_timed_out())?
                .map_err(|e| self.transport_failure(&e))?;
            let response = self.check_status(response).await?;
            let is_json = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            if is_json {
                // The server ignored `stream`; read the whole answer.
                let body = self
                    .read_all(response, self.config.idle_timeout, body_cap(max_output))
                    .await?;
                return self.bounded_completion_of(&body, max_output);
            }
            self.read_stream(task_id, response, max_output, first_token)
                .await
        } else {
            let exchange = async {
                let response = builder
                    .send()
                    .await
                    .map_err(|e| self.transport_failure(&e))?;
                let response = self.check_status(response).await?;
                let body = read_capped(response, body_cap(max_output))
                    .await
                    .map_err(|e| self.transport_failure(&e))?;
                self.bounded_completion_of(&body, max_output)
            };
            tokio::time::timeout(self.config.request_timeout, exchange)
                .await
                .map_err(|_| self.request_timed_out())?
        }
    }

    fn request_timed_out(&self) -> Failure {
        Failure::retry(
            CallOutcome::Timeout,
            format!(
                "no response from {} within {} (request_timeout)",
                self.shown,
                duration(self.config.request_timeout)
            ),
        )
    }

    /// A 2xx passes; anything else becomes a failure with the server's
    /// message and its retry hint.
    async fn check_status(&self, response: Response) -> Result<Response, Failure> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let hint = retry::retry_after(response.headers(), SystemTime::now());
        let body = tokio::time::timeout(
            self.config.idle_timeout,
            read_capped(response, MAX_ERROR_BODY),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
        let info = ApiErrorInfo::from_body(&body);
        let retryable = retry::status_is_retryable(status.as_u16(), &info);
        let mut message = format!("HTTP {status} from {}", self.shown);
        if !info.message.is_empty() {
            message.push_str(": ");
            message.push_str(&info.message);
        }
        if let Some(code) = info
            .code
            .as_ref()
            .or(info.kind.as_ref())
            .filter(|c| !info.message.contains(c.as_str()))
        {
            message.push_str(&format!(" ({code})"));
        }
        Err(Failure {
            outcome: CallOutcome::Http(status.as_u16()),
            message,
            retryable,
            hint,
            unavailable: status.as_u16() == 429 && info.is_resource_unavailable(),
        })
    }

    async fn read_all(
        &self,
        response: Response,
        within: Duration,
        cap: usize,
    ) -> Result<Vec<u8>, Failure> {
        let body = tokio::time::timeout(within, read_capped(response, cap))
            .await
            .map_err(|_| self.idle_timed_out())?
            .map_err(|e| self.transport_failure(&e))?;
        Ok(body)
    }

    fn completion_of(&self, body: &[u8]) -> Result<Completion, Failure> {
        wire::parse_completion(body).map_err(|e| self.body_failure(e, body))
    }

    /// A whole body read by [`read_capped`] up to [`body_cap`]: a body
    /// longer than the cap, or an output longer than `max_output`, fails
    /// the attempt for good (the same request would bring the same answer).
    fn bounded_completion_of(&self, body: &[u8], max_output: usize) -> Result<Completion, Failure> {
        let cap = body_cap(max_output);
        if body.len() > cap {
            return Err(Failure::fatal(
                CallOutcome::OutputTooLarge,
                format!(
                    "response from {} is larger than {cap} bytes, the most read for an \
                     output limit of {max_output} bytes (max_output_bytes)",
                    self.shown
                ),
            ));
        }
        let completion = self.completion_of(body)?;
        if completion.output.len() > max_output {
            return Err(Failure::fatal(
                CallOutcome::OutputTooLarge,
                output_too_large(max_output),
            ));
        }
        Ok(completion)
    }

    fn body_failure(&self, error: BodyError, body: &[u8]) -> Failure {
        match error {
            BodyError::Malformed(reason) => {
                let text = String::from_utf8_lossy(body);
                let cut = serde_json::from_slice::<serde_json::Value>(body)
                    .err()
                    .is_some_and(|e| e.is_eof());
                let shown = snippet(text.trim(), 200);
                if cut && !body.is_empty() {
                    Failure::retry(
                        CallOutcome::Truncated,
                        format!(
                            "response body from {} was cut short ({reason}): {shown}",
                            self.shown
                        ),
                    )
                } else {
                    Failure::fatal(
                        CallOutcome::Malformed,
                        format!("malformed JSON from {} ({reason}): {shown}", self.shown),
                    )
                }
            }
            BodyError::EmptyChoices => Failure::fatal(
                CallOutcome::EmptyChoices,
                format!("response from {} has no choices", self.shown),
            ),
            BodyError::Api(info) => Failure::fatal(
                CallOutcome::ApiError,
                format!("error from {}: {}", self.shown, info.message),
            ),
        }
    }

    fn idle_timed_out(&self) -> Failure {
        Failure::retry(
            CallOutcome::IdleTimeout,
            format!(
                "stream from {} stalled: no data for {} (idle_timeout)",
                self.shown,
                duration(self.config.idle_timeout)
            ),
        )
    }

    /// Reads a server-sent-event stream to `data: [DONE]`. The idle
    /// timeout catches a silent server; `max_output` catches one that never
    /// stops talking (chunks keep arriving, so the idle timeout never
    /// fires): past it the stream is dropped and the attempt fails.
    /// `first_token` fires at the first chunk of the answer that parses
    /// (even one carrying only the assistant's role: a server sends it once
    /// the prompt is read).
    async fn read_stream(
        &self,
        task_id: &str,
        mut response: Response,
        max_output: usize,
        first_token: Option<&FirstToken>,
    ) -> Result<Completion, Failure> {
        let mut parser = SseParser::new();
        let mut acc = StreamAccumulator::default();
        let mut chars = 0usize;
        let mut done = false;
        'read: while !done {
            let chunk = tokio::time::timeout(self.config.idle_timeout, response.chunk())
                .await
                .map_err(|_| self.idle_timed_out())?;
            let chunk = match chunk {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break 'read,
                Err(e) => {
                    return Err(Failure::retry(
                        CallOutcome::Truncated,
                        format!(
                            "stream from {} broke after {chars} characters: {}",
                            self.shown,
                            error_chain(&e)
                        ),
                    ));
                }
            };
            let events = parser.feed(&chunk).map_err(|e| {
                Failure::fatal(
                    CallOutcome::Malformed,
                    format!("stream from {}: {e}", self.shown),
                )
            })?;
            let before = chars;
            for event in events {
                if event.data.trim() == "[DONE]" {
                    done = true;
                    break;
                }
                if event.data.trim().is_empty() {
                    continue;
                }
                chars += self.take_event(&mut acc, &event.data, max_output, first_token)?;
            }
            if chars > before {
                self.emit(EngineEvent::Streaming {
                    task_id: task_id.to_string(),
                    chars,
                });
            }
        }
        if !done && (parser.has_pending() || acc.completion.finish_reason.is_none()) {
            return Err(Failure::retry(
                CallOutcome::Truncated,
                format!(
                    "stream from {} ended before `data: [DONE]` after {chars} characters",
                    self.shown
                ),
            ));
        }
        if !acc.saw_choice {
            return Err(Failure::fatal(
                CallOutcome::EmptyChoices,
                format!("stream from {} carried no choices", self.shown),
            ));
        }
        Ok(acc.completion)
    }

    /// Adds one event of the stream to the completion, and returns the
    /// characters it added. The first event that parses fires
    /// `first_token`; an output past `max_output` bytes fails the attempt
    /// (the stream is dropped), as does an error the server sends in the
    /// stream.
    fn take_event(
        &self,
        acc: &mut StreamAccumulator,
        data: &str,
        max_output: usize,
        first_token: Option<&FirstToken>,
    ) -> Result<usize, Failure> {
        match acc.push(data) {
            Ok(added) => {
                if let Some(signal) = first_token {
                    signal.fire();
                }
                if acc.completion.output.len() > max_output {
                    return Err(Failure::fatal(
                        CallOutcome::OutputTooLarge,
                        format!(
                            "stream from {}: {}; the stream was dropped",
                            self.shown,
                            output_too_large(max_output)
                        ),
                    ));
                }
                Ok(added)
            }
            Err(BodyError::Api(info)) => Err(self.stream_error(&info)),
            Err(e) => Err(self.body_failure(e, data.as_bytes())),
        }
    }

    /// An error the server sent inside the stream: retried when it says
    /// the server failed or is overloaded, else final.
    fn stream_error(&self, info: &ApiErrorInfo) -> Failure {
        let retryable = [info.kind.as_deref(), info.code.as_deref()]
            .into_iter()
            .flatten()
            .any(|k| k.contains("server_error") || k.contains("overloaded"));
        let message = format!("error in the stream from {}: {}", self.shown, info.message);
        if retryable {
            Failure::retry(CallOutcome::StreamError, message)
        } else {
            Failure::fatal(CallOutcome::StreamError, message)
        }
    }

    fn transport_failure(&self, error: &reqwest::Error) -> Failure {
        let chain = error_chain(error);
        if error.is_connect() {
            Failure::retry(
                CallOutcome::Connect,
                format!("cannot connect to {}: {chain}", self.shown),
            )
        } else if error.is_timeout() {
            Failure::retry(
                CallOutcome::Timeout,
                format!("timed out talking to {}: {chain}", self.shown),
            )
        } else if error.is_body() || error.is_decode() {
            Failure::retry(
                CallOutcome::Truncated,
                format!("response body from {} was cut short: {chain}", self.shown),
            )
        } else {
            Failure::retry(
                CallOutcome::Network,
                format!("request to {} failed: {chain}", self.shown),
            )
        }
    }
}

/// The tokens one call may use: what the pacer reserves for each attempt,
/// and the bounds a server's `usage` is read within.
pub(crate) struct CallTokens {
    /// The prompt plus the completion cap.
    reserved: u64,
    /// A partial `usage` is read at the worst case this request allows.
    bounds: wire::RequestBounds,
    /// With `n` or `best_of` above 1 the server bills completions ctx
    /// never sees (it keeps the first choice): each may use the whole cap.
    unseen_completion: Option<u64>,
}

impl CallTokens {
    pub(crate) fn of(request: &InferenceRequest, defaults: &RequestDefaults) -> CallTokens {
        // The same cap the body carries (`request_body` asks `completion_cap`
        // too), so `--tpm` reserves what the server may really generate.
        let cap = wire::completion_cap(&request.params, defaults).and_then(|c| c.tokens());
        CallTokens {
            reserved: (request.prompt_tokens as u64).saturating_add(cap.unwrap_or(0)),
            bounds: wire::RequestBounds {
                prompt_tokens: request.prompt_tokens as u64,
                completion_tokens: request.params.completion_bound(defaults.max_tokens).ok(),
            },
            unseen_completion: request
                .params
                .choices()
                .ok()
                .filter(|&n| n > 1)
                .map(|n| cap.unwrap_or(0).saturating_mul(n - 1)),
        }
    }

    /// The response of the attempt that succeeded (sent at `started`), its
    /// usage read within these bounds, the model named by `model` when the
    /// server named none.
    pub(crate) fn response(
        &self,
        completion: Completion,
        model: &str,
        attempts: Vec<Attempt>,
        started: Instant,
    ) -> InferenceResponse {
        let usage = wire::usage_to_record(
            completion.usage,
            self.bounds,
            completion.output.len() as u64,
            self.unseen_completion,
        );
        record_response_on_span(&completion, started);
        // The tier the server billed goes with the usage it is priced by.
        let usage = usage.map(|u| TokenUsage {
            service_tier: completion.service_tier,
            ..u
        });
        InferenceResponse {
            output: completion.output,
            model: completion.model.or_else(|| Some(model.to_string())),
            usage,
            finish_reason: completion.finish_reason.map(ctx_engine::FinishReason::from),
            attempts,
            cached: false,
        }
    }
}

/// The HTTP client for `config` and its `Authorization` header (marked
/// sensitive, so a `Debug` of the headers hides it): what the real-time
/// engine and the batch client both send with.
pub(crate) fn http_client(
    config: &OpenAiConfig,
) -> Result<(Client, Option<HeaderValue>), ConfigError> {
    let auth = match &config.api_key {
        Some(key) => {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                .map_err(|_| ConfigError::ApiKey)?;
            // Debug output of the header map shows `Sensitive`.
            value.set_sensitive(true);
            Some(value)
        }
        None => None,
    };
    // reqwest is built without a default crypto provider; `ring` builds
    // faster than aws-lc. Installing twice is harmless (the first wins).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = Client::builder()
        .connect_timeout(config.connect_timeout)
        .user_agent(concat!("ctx/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(ConfigError::Client)?;
    Ok((client, auth))
}

/// The model a task runs on: its `params.model`, else the default.
pub(crate) fn chosen_model<'a>(
    params: &'a Params,
    defaults: &'a RequestDefaults,
) -> Option<&'a str> {
    params
        .model
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .or(defaults.model.as_deref())
        .filter(|m| !m.trim().is_empty())
}

/// The JSON Schema a request is sent with as `response_format`: its
/// schema when [`StructuredOutput`] allows (`rejected`: a server already
/// refused the field this run), unless the plan sets `response_format`
/// itself (`params.extra`), which wins.
pub(crate) fn schema_to_send(
    request: &InferenceRequest,
    mode: StructuredOutput,
    rejected: bool,
) -> Option<&serde_json::Value> {
    request
        .response_schema
        .as_ref()
        .filter(|_| {
            mode == StructuredOutput::Always || (mode == StructuredOutput::Auto && !rejected)
        })
        .filter(|_| !request.params.extra.contains_key("response_format"))
}

/// The bytes of a request's JSON body: the prompt, the model and the
/// task's parameters over `defaults`, and `response_format` when `schema`
/// is given. The real-time engine and the batch client both send these
/// bytes, so a batched request is the real-time one, byte for byte.
pub(crate) fn encode_body(
    request: &InferenceRequest,
    model: &str,
    defaults: &RequestDefaults,
    stream: bool,
    schema: Option<&serde_json::Value>,
) -> Result<Vec<u8>, EngineError> {
    let mut body = wire::request_body(request, model, defaults, stream);
    if let (Some(schema), Some(map)) = (schema, body.as_object_mut()) {
        map.insert("response_format".into(), wire::response_format(schema));
    }
    serde_json::to_vec(&body).map_err(|e| {
        EngineError::new(format!(
            "task `{}`: cannot encode the request: {e}",
            request.task_id
        ))
    })
}

impl InferenceEngine for OpenAiEngine {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn default_model(&self) -> Option<&str> {
        self.config.defaults.model.as_deref()
    }

    /// `openai` plus each request default that was set, in a fixed order:
    /// `model`, `temperature`, `max_tokens`, `top_p`, `stop` (each),
    /// `seed`, and `system` as `sha256:` and the first 12 hex digits of
    /// the prompt's hash (the label is shown, the system prompt may be
    /// long or private). Never the base URL or key.
    fn label(&self) -> String {
        let d = &self.config.defaults;
        let mut label = String::from(Self::NAME);
        let mut push = |key: &str, value: String| {
            label.push(' ');
            label.push_str(key);
            label.push('=');
            label.push_str(&value);
        };
        if let Some(m) = &d.model {
            push("model", label_value(m));
        }
        if let Some(t) = d.temperature {
            push("temperature", t.to_string());
        }
        if let Some(n) = d.max_tokens {
            push("max_tokens", n.to_string());
        }
        if let Some(p) = d.top_p {
            push("top_p", p.to_string());
        }
        for s in d.stop.iter().flatten() {
            push("stop", format!("{s:?}"));
        }
        if let Some(n) = d.seed {
            push("seed", n.to_string());
        }
        if let Some(s) = &d.system {
            let hash = ctx_model::digest::sha256_hex(s.as_bytes());
            push("system", format!("sha256:{}", &hash[..12]));
        }
        label
    }

    /// The label plus the base URL (which may carry a password: it only
    /// enters the cache's hash).
    fn cache_identity(&self) -> String {
        format!("{}\nbase_url={}", self.label(), self.config.base_url)
    }

    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(self.run(request, None))
    }

    /// With `--stream`, fires `first_token` at the first server-sent event
    /// that carries a chunk of the answer (the server has read the prompt
    /// by then); without, when the response arrives (its caller's part).
    fn infer_with_first_token<'a>(
        &'a self,
        request: &'a InferenceRequest,
        first_token: &'a FirstToken,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(self.run(request, Some(first_token)))
    }
}

/// A label value: as is when it has no spaces, quotes or control
/// characters, else quoted.
fn label_value(s: &str) -> String {
    if !s.is_empty()
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"')
    {
        s.to_string()
    } else {
        format!("{s:?}")
    }
}

/// Whether a failure is the server refusing `response_format`: a 4xx whose
/// message names the field or its `json_schema` type. Servers word it
/// differently ("response_format is not supported", "Unrecognized request
/// argument supplied: response_format", "json_schema ... not allowed"), and
/// all of them name one or the other.
fn rejects_response_format(e: &EngineError) -> bool {
    let client_error = e
        .attempts
        .last()
        .is_some_and(|a| a.outcome.is_client_error());
    let text = e.message.to_ascii_lowercase();
    client_error && (text.contains("response_format") || text.contains("json_schema"))
}

/// Reads a body, stopping once it is longer than `cap` (the caller sees a
/// body of `cap + 1` bytes or more and can say so).
/// Records what only this engine knows of an answer on the call's `chat`
/// span (ctx-deps declares the fields; the engine runs inside the span):
/// the response id, and with `--stream` the time from sending the request
/// to the stream's first event, in seconds (`gen_ai.response.time_to_first_chunk`,
/// docs/tracing.md). Without a tracer the span is disabled and this is
/// two no-op calls.
fn record_response_on_span(completion: &wire::Completion, sent: Instant) {
    let span = tracing::Span::current();
    if let Some(id) = &completion.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(first) = completion.first_chunk {
        span.record(
            "gen_ai.response.time_to_first_chunk",
            first.saturating_duration_since(sent).as_secs_f64(),
        );
    }
}

pub(crate) async fn read_capped(
    mut response: Response,
    cap: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() > cap {
            break;
        }
    }
    Ok(body)
}

/// The error's causes, outermost first, without the URL reqwest puts in
/// its own text (ours names it already, with any password masked) and
/// without repeats: `client error (Connect): tcp connect error: Connection
/// refused (os error 111)`.
fn error_chain(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        let mut e = error.to_string();
        if let Some(url) = error.url() {
            e = e.replace(url.as_str(), &display_url(url));
        }
        parts.push(e);
    }
    parts.join(": ")
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<OpenAiEngine>();
}

/// A failed call's record, given its outcome: attempt `number`, which
/// took `duration_ms` and failed with `message`, waited `backoff` before
/// the next.
fn failed_attempt(
    number: u32,
    duration_ms: u64,
    message: &str,
    backoff: Option<std::time::Duration>,
) -> impl FnOnce(ctx_model::CallOutcome) -> Attempt {
    let error = Some(message.to_string());
    let backoff_ms = backoff.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    move |outcome| Attempt {
        number,
        duration_ms,
        outcome,
        error,
        backoff_ms,
        ..Attempt::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RequestDefaults;

    #[test]
    fn the_label_holds_output_settings_and_never_secrets() {
        let plain = OpenAiEngine::new(OpenAiConfig::default()).unwrap();
        assert_eq!(plain.label(), "openai");
        let config = OpenAiConfig {
            base_url: "http://user:pw@127.0.0.1:9/v1".into(),
            defaults: RequestDefaults {
                model: Some("gpt-4o".into()),
                temperature: Some(0.0),
                stop: Some(vec!["END".into()]),
                system: Some("be brief".into()),
                ..RequestDefaults::default()
            },
            ..OpenAiConfig::default()
        };
        let engine = OpenAiEngine::new(config).unwrap();
        let label = engine.label();
        assert!(
            label.starts_with("openai model=gpt-4o temperature=0 stop=\"END\" system=sha256:"),
            "{label}"
        );
        assert_eq!(label.len(), label.find("sha256:").unwrap() + 7 + 12);
        assert!(!label.contains("pw@") && !label.contains("be brief"));
        assert!(
            engine
                .cache_identity()
                .ends_with("\nbase_url=http://user:pw@127.0.0.1:9/v1")
        );
        let spaced = OpenAiEngine::new(OpenAiConfig {
            defaults: RequestDefaults {
                model: Some("my model".into()),
                ..RequestDefaults::default()
            },
            ..OpenAiConfig::default()
        })
        .unwrap();
        assert_eq!(spaced.label(), "openai model=\"my model\"");
    }
}
