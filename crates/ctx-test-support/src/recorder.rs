//! [`Recorder`]: an inference engine for executor tests that answers
//! with what the test says and keeps every request it was sent.
//!
//! Tests of what the executor *sends* (prompt layout, prompt-cache keys
//! and breakpoints, judge and summary calls) need no model: they need the
//! requests, in the order they arrived, and sometimes the order the calls
//! ended in when latencies differ. One engine for all of them, so that a
//! change to the engine seam (a new trait method, a new request field) is
//! made here once.

use std::sync::Mutex;
use std::time::Duration;

use ctx_engine::{BoxFuture, EngineError, InferenceEngine, InferenceRequest, InferenceResponse};

type Reply = dyn Fn(&InferenceRequest) -> String + Send + Sync;
type Latency = dyn Fn(&InferenceRequest) -> Duration + Send + Sync;

/// Answers each request with `reply(request)`, after `latency(request)`
/// when one is set, and records the request and the call's end.
pub struct Recorder {
    reply: Box<Reply>,
    latency: Option<Box<Latency>>,
    requests: Mutex<Vec<InferenceRequest>>,
    finished: Mutex<Vec<String>>,
}

impl Recorder {
    /// An engine answering every request with `reply(request)` at once.
    pub fn new(reply: impl Fn(&InferenceRequest) -> String + Send + Sync + 'static) -> Recorder {
        Recorder {
            reply: Box::new(reply),
            latency: None,
            requests: Mutex::new(Vec::new()),
            finished: Mutex::new(Vec::new()),
        }
    }

    /// The same engine, answering each request after `latency(request)`
    /// (on Tokio's clock, so a paused test clock applies).
    pub fn with_latency(
        mut self,
        latency: impl Fn(&InferenceRequest) -> Duration + Send + Sync + 'static,
    ) -> Recorder {
        self.latency = Some(Box::new(latency));
        self
    }

    /// Every request, in the order it reached the engine.
    pub fn requests(&self) -> Vec<InferenceRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The last request sent for `task_id`.
    ///
    /// # Panics
    /// When the engine was sent none: the test's plan did not run it.
    pub fn request(&self, task_id: &str) -> InferenceRequest {
        self.requests()
            .into_iter()
            .rev()
            .find(|r| r.task_id == task_id)
            .unwrap_or_else(|| panic!("the engine was sent no request for `{task_id}`"))
    }

    /// The task id of each call, in the order the calls ended.
    pub fn finished(&self) -> Vec<String> {
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl InferenceEngine for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            self.requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(request.clone());
            if let Some(latency) = &self.latency {
                tokio::time::sleep(latency(request)).await;
            }
            self.finished
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(request.task_id.clone());
            Ok(InferenceResponse {
                output: (self.reply)(request),
                ..InferenceResponse::default()
            })
        })
    }
}
