//! [`EngineCalls`]: the narrow handle every engine call of a task goes
//! through — its own answers, its `judge` checks
//! ([`checking`](crate::checking)) and its `llm` summaries
//! ([`summarize`](crate::summarize)).
//!
//! Why a handle of its own: checking and summarizing used to receive the
//! executor's whole per-run state and call back into the executor for
//! each request. They need only this: send a request to the run's engine,
//! bounded in time by [`ExecutorOptions::task_timeout`] and in output by
//! [`ExecutorOptions::max_output_bytes`], and know that output bound to put
//! it in the request. So the bounds are enforced in one place, and neither
//! module can reach the schedule, the store or the budget.
//!
//! [`ExecutorOptions::task_timeout`]: crate::ExecutorOptions::task_timeout
//! [`ExecutorOptions::max_output_bytes`]: crate::ExecutorOptions::max_output_bytes

use std::sync::Arc;
use std::time::Duration;

use ctx_engine::{EngineError, FirstToken, InferenceEngine, InferenceRequest, InferenceResponse};
use ctx_model::CallOutcome;
use tokio::time::Instant;
use tracing::Instrument;

/// The run's engine with the bounds every call is held to.
#[derive(Clone)]
pub(crate) struct EngineCalls {
    engine: Arc<dyn InferenceEngine>,
    /// `None`: no time bound.
    task_timeout: Option<Duration>,
    max_output_bytes: usize,
    /// The run's canary ([`crate::canary`]): its sentence goes with every
    /// call, its token to the `canary` checks.
    canary: Option<crate::Canary>,
}

impl EngineCalls {
    /// `engine`, each call bounded by `task_timeout` (`None`: unbounded)
    /// and `max_output_bytes`.
    pub(crate) fn new(
        engine: Arc<dyn InferenceEngine>,
        task_timeout: Option<Duration>,
        max_output_bytes: usize,
    ) -> EngineCalls {
        EngineCalls {
            engine,
            task_timeout,
            max_output_bytes,
            canary: None,
        }
    }

    /// These calls each carrying `canary`'s sentence
    /// ([`InferenceRequest::canary`]): a task's answers, its judges and
    /// its summaries alike, since each reads text the run does not trust.
    pub(crate) fn with_canary(mut self, canary: Option<crate::Canary>) -> EngineCalls {
        self.canary = canary;
        self
    }

    /// The run's canary token, which a `canary` check looks for.
    pub(crate) fn canary_token(&self) -> Option<&str> {
        self.canary.as_ref().map(crate::Canary::token)
    }

    /// The output bound a request carries
    /// ([`InferenceRequest::max_output_bytes`]).
    pub(crate) fn max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// The engine's label (its name and model defaults), which a map
    /// item's content hash includes.
    pub(crate) fn label(&self) -> String {
        self.engine.label()
    }

    /// [`InferenceEngine::batch_capacity`] of the engine.
    pub(crate) fn batch_capacity(&self) -> usize {
        self.engine.batch_capacity()
    }

    /// Whether the engine's outputs answer their prompts (only then are
    /// checks evaluated).
    pub(crate) fn answers_prompts(&self) -> bool {
        self.engine.answers_prompts()
    }

    /// One engine call, bounded in time and in output. On expiry the
    /// engine's future is dropped (it kills its command or aborts its
    /// request) and the call fails with outcome `timeout`; an output over
    /// the bound from an engine that does not bound its own reading is
    /// refused all the same, with outcome `output_too_large`.
    pub(crate) async fn call(
        &self,
        request: &InferenceRequest,
    ) -> Result<InferenceResponse, EngineError> {
        self.call_with(request, None).await
    }

    /// [`call`](Self::call), carrying a warm-up call's `first_token`
    /// signal to the engine
    /// ([`InferenceEngine::infer_with_first_token`]). The signal is fired
    /// here too once the call returns, answer or error, whatever the
    /// engine did: an engine that sees its answer only whole leaves it to
    /// its caller, and a failed warm-up call must release its siblings.
    pub(crate) async fn call_with(
        &self,
        request: &InferenceRequest,
        first_token: Option<&FirstToken>,
    ) -> Result<InferenceResponse, EngineError> {
        let planted;
        let request = match &self.canary {
            Some(c) => {
                planted = InferenceRequest {
                    canary: Some(c.sentence()),
                    ..request.clone()
                };
                &planted
            }
            None => request,
        };
        let span =
            crate::spans::chat_span(self.engine.name(), self.engine.default_model(), request);
        let call_started = Instant::now();
        let call = match first_token {
            Some(signal) => self.engine.infer_with_first_token(request, signal),
            None => self.engine.infer(request),
        }
        .instrument(span.clone());
        let response = match self.task_timeout {
            Some(limit) => match tokio::time::timeout(limit, call).await {
                Ok(response) => response,
                Err(_) => Err(timed_out(limit, call_started.elapsed())),
            },
            None => call.await,
        };
        if let Some(signal) = first_token {
            signal.fire();
        }
        let answer = response.and_then(|resp| self.refuse_over_bound(resp));
        crate::spans::record_chat(&span, &answer);
        answer
    }

    /// `resp`, or the failure of an output over the bound, its last
    /// attempt marked `output_too_large`.
    fn refuse_over_bound(&self, resp: InferenceResponse) -> Result<InferenceResponse, EngineError> {
        if resp.output.len() <= self.max_output_bytes {
            return Ok(resp);
        }
        let message = ctx_engine::output_too_large(self.max_output_bytes);
        let mut attempts = resp.attempts;
        if let Some(last) = attempts.last_mut() {
            last.outcome = CallOutcome::OutputTooLarge;
            last.error = Some(message.clone());
        }
        Err(EngineError { message, attempts })
    }
}

/// The failure of an engine call cut off by the task timeout.
fn timed_out(limit: Duration, took: Duration) -> EngineError {
    let message = format!(
        "timed out after {} (task_timeout); the engine was stopped",
        ctx_model::display::duration(limit)
    );
    EngineError {
        attempts: vec![ctx_model::Attempt {
            number: 1,
            duration_ms: millis(took),
            outcome: CallOutcome::Timeout,
            error: Some(message.clone()),
            backoff_ms: None,
            ..ctx_model::Attempt::default()
        }],
        message,
    }
}

/// A duration in whole milliseconds, saturating: what results record.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_engine::BoxFuture;
    use ctx_model::Attempt;

    /// Answers `output` after `delay` (tokio time), with one attempt.
    struct Slow {
        delay: Duration,
        output: String,
    }

    impl InferenceEngine for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn infer<'a>(
            &'a self,
            _: &'a InferenceRequest,
        ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
            Box::pin(async move {
                tokio::time::sleep(self.delay).await;
                Ok(InferenceResponse {
                    output: self.output.clone(),
                    attempts: vec![Attempt::ok(1, 0)],
                    ..InferenceResponse::default()
                })
            })
        }
    }

    fn calls(delay_ms: u64, output: &str, timeout_ms: Option<u64>, bound: usize) -> EngineCalls {
        EngineCalls::new(
            Arc::new(Slow {
                delay: Duration::from_millis(delay_ms),
                output: output.into(),
            }),
            timeout_ms.map(Duration::from_millis),
            bound,
        )
    }

    fn request() -> InferenceRequest {
        InferenceRequest {
            task_id: "t".into(),
            prompt: "p".into(),
            params: Default::default(),
            prompt_tokens: 1,
            max_output_bytes: 0,
            response_schema: None,
            purpose: Default::default(),
            cache_breakpoints: None,
            canary: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_the_timeout_fails_with_one_timeout_attempt() {
        let err = calls(500, "late", Some(300), 100)
            .call(&request())
            .await
            .unwrap_err();
        assert_eq!(
            err.message,
            "timed out after 300 ms (task_timeout); the engine was stopped"
        );
        assert_eq!(err.attempts.len(), 1);
        assert_eq!(err.attempts[0].outcome, CallOutcome::Timeout);
        assert_eq!(err.attempts[0].duration_ms, 300);
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout_waits_and_an_output_at_the_bound_passes() {
        let resp = calls(5_000, "four", None, 4)
            .call(&request())
            .await
            .unwrap();
        assert_eq!(resp.output, "four");
    }

    #[tokio::test(start_paused = true)]
    async fn an_output_over_the_bound_is_refused_and_its_attempt_marked() {
        let err = calls(0, "fives", Some(1_000), 4)
            .call(&request())
            .await
            .unwrap_err();
        assert_eq!(err.message, ctx_engine::output_too_large(4));
        assert_eq!(err.attempts.len(), 1);
        assert_eq!(err.attempts[0].outcome, CallOutcome::OutputTooLarge);
        assert_eq!(err.attempts[0].error.as_deref(), Some(err.message.as_str()));
    }

    #[test]
    fn milliseconds_saturate() {
        assert_eq!(millis(Duration::from_secs(u64::MAX)), u64::MAX);
    }
}
