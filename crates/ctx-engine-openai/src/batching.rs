//! [`BatchingEngine`]: an [`InferenceEngine`] that sends the calls it is
//! given through the Batch API ([`crate::batch`]), each wave as one batch.
//!
//! The executor dispatches every ready task at once, a whole file's worth
//! whatever `--concurrency` says ([`InferenceEngine::batch_capacity`]), so
//! the calls that arrive until a short quiet spell
//! ([`BatchingConfig::window`]) are one wave, a map's ready items with the
//! rest: they go as one batch (one per model and per the provider's file
//! limits), and each call resolves when its batch ends.
//!
//! * An answer resolves its call, priced at the batch tier.
//! * A failure the real-time rules call permanent fails the call.
//! * A retryable failure (a 5xx inside the batch, a request the batch
//!   expired before it ran), or a request still pending when the deadline
//!   ([`BatchingConfig::deadline`], from the batch's creation) passes, goes
//!   as a real-time call: the pending requests are cancelled in their
//!   batch first, and what the batch answered meanwhile is kept.
//! * Real-time calls are bounded in number
//!   ([`BatchingConfig::real_time_limit`], `--concurrency`): the batched
//!   calls in flight are not, and a deadline must not send them all at once.
//! * The real-time call has one attempt fewer than `--max-attempts`
//!   (the batched request was one): a call never makes more requests
//!   than a budget reserves for it. With one attempt allowed there is no
//!   real-time call; the batch's failure is the call's.
//! * A batch that fails validation, or that someone else cancels, fails
//!   each of its calls with the batch's error, as does a server without
//!   the Batch API.
//! * The prefix-cache warm-up call (`config.cache_warm_up`,
//!   [`InferenceEngine::infer_with_first_token`]) goes real-time: its
//!   siblings are held until its first token, which a batch gives only
//!   when it ends. It is marked [`TierFallback::WarmUp`] and has the
//!   real-time call's attempts; it goes batched when none is left for a
//!   real-time call, or when a live batch of a dead session may still
//!   answer its task.
//!
//! Durable with a ledger ([`InferenceEngine::keep_batches`], a durable
//! run's store): each batch is journaled before it is waited on, and a
//! resume takes up what a dead process left in flight
//! ([`crate::batch_journal`]). Without one (`--no-store`) a batch lives in
//! this process only.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ctx_engine::{
    BatchLedger, BoxFuture, EngineError, FirstToken, InferenceEngine, InferenceRequest,
    InferenceResponse, Observer,
};
use ctx_model::TierFallback;
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::batch::{
    BatchCall, BatchClient, BatchError, BatchFile, BatchOutcome, BatchState, PollPolicy,
};
use crate::batch_journal::{FollowSettings, Journal, OwnedEntry, Waiting, wait_journaled};
use crate::config::{ConfigError, OpenAiConfig, RetryPolicy};
use crate::engine::OpenAiEngine;

/// How calls are gathered and how long a batch may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchingConfig {
    /// A wave closes once no call has arrived for this long: calls that
    /// follow one another closer than this go as one batch.
    pub window: Duration,
    /// A wave closes this long after its first call at the latest, however
    /// steadily calls still arrive.
    pub gather_limit: Duration,
    /// The most real-time calls (the batches' retryable failures and what
    /// they left past the deadline) in flight at once; 0: no limit.
    pub real_time_limit: usize,
    /// After this long (from a batch's creation) what it has not answered
    /// is cancelled and sent real-time; `None` waits for the provider's
    /// window.
    pub deadline: Option<Duration>,
    /// How often a batch is read.
    pub poll: PollPolicy,
}

impl Default for BatchingConfig {
    fn default() -> BatchingConfig {
        BatchingConfig {
            window: Duration::from_millis(200),
            gather_limit: Duration::from_secs(60),
            real_time_limit: 0,
            deadline: None,
            poll: PollPolicy::default(),
        }
    }
}

type Reply = oneshot::Sender<Result<InferenceResponse, EngineError>>;

/// Calls waiting for the next batch.
#[derive(Default)]
struct Queue {
    waiting: Vec<(BatchCall, Reply)>,
    /// When the last of `waiting` arrived.
    last_arrival: Option<tokio::time::Instant>,
    scheduled: bool,
    attempts: BTreeMap<String, u32>,
}

struct Shared {
    client: Arc<BatchClient>,
    realtime: Option<OpenAiEngine>,
    labels: OpenAiEngine,
    /// The run's name in `custom_id`s until a ledger names the run.
    run: String,
    settings: BatchingConfig,
    queue: Mutex<Queue>,
    /// Permits for real-time calls ([`BatchingConfig::real_time_limit`]).
    real_time_slots: Option<tokio::sync::Semaphore>,
    journal: OnceLock<Journal>,
    observer: Option<Observer>,
}

impl Shared {
    /// The run's id, as each `custom_id` names it.
    fn run_id(&self) -> String {
        self.journal
            .get()
            .map_or_else(|| self.run.clone(), |j| j.run_id().to_string())
    }

    fn follow_settings(&self) -> FollowSettings {
        FollowSettings {
            deadline: self.settings.deadline,
            observer: self.observer.clone(),
        }
    }

    /// A permit for one real-time call, held while it runs: real-time
    /// calls stay within [`BatchingConfig::real_time_limit`] however many
    /// go at once (`None`: no limit).
    async fn real_time_permit(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match &self.real_time_slots {
            Some(slots) => slots.acquire().await.ok(),
            None => None,
        }
    }
}

/// The OpenAI engine through the Batch API (`ctx run --batch`).
pub struct BatchingEngine {
    shared: Arc<Shared>,
}

impl BatchingEngine {
    /// An engine for run `run` (its id goes in each `custom_id`), sending
    /// to `config`'s server.
    pub fn new(
        config: OpenAiConfig,
        run: &str,
        settings: BatchingConfig,
    ) -> Result<BatchingEngine, ConfigError> {
        let labels = OpenAiEngine::new(config.clone())?;
        let left = config.retry.max_attempts.saturating_sub(1);
        let realtime = if left == 0 {
            None
        } else {
            Some(OpenAiEngine::new(OpenAiConfig {
                retry: RetryPolicy {
                    max_attempts: left,
                    ..config.retry
                },
                ..config.clone()
            })?)
        };
        let client = BatchClient::new(config)?.with_poll(settings.poll);
        Ok(BatchingEngine {
            shared: Arc::new(Shared {
                client: Arc::new(client),
                realtime,
                labels,
                run: run.to_string(),
                settings,
                queue: Mutex::default(),
                real_time_slots: (settings.real_time_limit > 0)
                    .then(|| tokio::sync::Semaphore::new(settings.real_time_limit)),
                journal: OnceLock::new(),
                observer: None,
            }),
        })
    }

    /// Sends each batch's state and counts as it moves
    /// ([`ctx_engine::EngineEvent::Batch`]) and the real-time calls'
    /// events (retries, pacing waits) to `observer`, as
    /// [`OpenAiEngine::with_observer`] does. Call it before the engine is
    /// shared: later it changes nothing.
    pub fn with_observer(mut self, observer: ctx_engine::Observer) -> BatchingEngine {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.observer = Some(Arc::clone(&observer));
            shared.realtime = shared.realtime.take().map(|e| e.with_observer(observer));
        }
        self
    }

    /// Checks that the server has the Batch API (`GET /batches?limit=1`)
    /// before anything is sent: its located error when it has not.
    pub async fn probe(&self) -> Result<(), BatchError> {
        self.shared.client.probe().await
    }

    /// Answers `request` from the live batch a dead process left it in,
    /// or queues it for the next batch; its answer.
    async fn call(&self, request: &InferenceRequest) -> Result<InferenceResponse, EngineError> {
        let shared = &self.shared;
        let mut journaled = 0;
        if let Some(journal) = shared.journal.get() {
            let taken = journal
                .taken_up(&shared.client, &shared.follow_settings())
                .await?;
            journaled = taken.attempts.get(&request.task_id).copied().unwrap_or(0);
            if let Some(waiting) = taken.claim(&request.task_id)
                && let Some(answer) = from_live(shared, journal, waiting, request).await
            {
                return answer;
            }
        }
        let (reply, answer) = oneshot::channel();
        let schedule = {
            let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            let attempt = queue
                .attempts
                .entry(request.task_id.clone())
                .or_insert(journaled);
            *attempt += 1;
            let call = BatchCall {
                run: shared.run_id(),
                attempt: *attempt,
                request: request.clone(),
            };
            queue.waiting.push((call, reply));
            queue.last_arrival = Some(tokio::time::Instant::now());
            !std::mem::replace(&mut queue.scheduled, true)
        };
        if schedule {
            // The wave's batches are spans under the call that opened it.
            tokio::spawn(wave(Arc::clone(&self.shared)).instrument(tracing::Span::current()));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(EngineError::new("the batch was dropped before it ended")))
    }

    /// The warm-up call: sent real-time, with the signal, within the
    /// real-time limit; batched as any call when no attempt is left for a
    /// real-time call or a live batch may still answer the task.
    async fn warm_up(
        &self,
        request: &InferenceRequest,
        first_token: &FirstToken,
    ) -> Result<InferenceResponse, EngineError> {
        let shared = &self.shared;
        let Some(realtime) = &shared.realtime else {
            return self.call(request).await;
        };
        if let Some(journal) = shared.journal.get() {
            let taken = journal
                .taken_up(&shared.client, &shared.follow_settings())
                .await?;
            if taken.is_waiting(&request.task_id) {
                return self.call(request).await;
            }
        }
        let _permit = shared.real_time_permit().await;
        let mut result = realtime.infer_with_first_token(request, first_token).await;
        for attempt in attempts_of(&mut result) {
            attempt.tier_fallback = Some(TierFallback::WarmUp);
        }
        result
    }
}

/// The answer a live batch (taken up from the ledger) gives `request`,
/// classified as a fresh batch's would be; `None` when the request is not
/// the one the batch holds (it goes in a new batch).
async fn from_live(
    shared: &Arc<Shared>,
    journal: &Journal,
    waiting: Waiting,
    request: &InferenceRequest,
) -> Option<Result<InferenceResponse, EngineError>> {
    let call = BatchCall {
        run: journal.run_id().to_string(),
        attempt: waiting.request.attempt,
        request: request.clone(),
    };
    let same = shared
        .client
        .encode_one(&call)
        .ok()
        .filter(|(id, _, sent)| {
            *id == waiting.request.custom_id && sent.body_sha256() == waiting.request.body_sha256
        });
    let Some((_, _, sent)) = same else {
        journal.answered(&waiting.batch).await;
        return None;
    };
    let outcome = match waiting.batch.lines().await {
        Err(message) => Err(EngineError::new(message)),
        Ok(lines) => match lines.get(&waiting.request.custom_id) {
            None => Ok(BatchOutcome::NotAnswered),
            Some(line) => crate::batch::outcome_of(line, &sent, &waiting.batch.id).map_err(|why| {
                EngineError::new(format!(
                    "batch {}: the result of `{}`: {why}",
                    waiting.batch.id, waiting.request.custom_id
                ))
            }),
        },
    };
    let answer = match outcome {
        Err(error) => Err(error),
        Ok(outcome) => {
            let (reply, answer) = oneshot::channel();
            resolve(Arc::clone(shared), call, outcome, reply).await;
            answer
                .await
                .unwrap_or_else(|_| Err(EngineError::new("the batch's answer was dropped")))
        }
    };
    journal.answered(&waiting.batch).await;
    Some(answer)
}

/// Gathers calls until none has arrived for the window (or the gather
/// limit passes), then sends them as batches. The executor starts a map's
/// ready items one after another, each storing its prompt first: on a
/// large map that takes longer than any fixed window, but never pauses.
async fn wave(shared: Arc<Shared>) {
    let settings = shared.settings;
    let latest = tokio::time::Instant::now() + settings.gather_limit;
    loop {
        let quiet_at = {
            let queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.last_arrival.map(|t| t + settings.window)
        };
        let close_at = quiet_at.map_or(latest, |t| t.min(latest));
        if tokio::time::Instant::now() >= close_at {
            break;
        }
        tokio::time::sleep_until(close_at).await;
    }
    let waiting = {
        let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.scheduled = false;
        std::mem::take(&mut queue.waiting)
    };
    let (calls, replies): (Vec<BatchCall>, Vec<Reply>) = waiting.into_iter().unzip();
    let (files, refused) = shared.client.encode_each(&calls);
    let mut replies: Vec<Option<Reply>> = replies.into_iter().map(Some).collect();
    for (index, error) in refused {
        if let Some(reply) = replies[index].take() {
            let _ = reply.send(Err(EngineError::new(error.to_string())));
        }
    }
    let mut by_id: BTreeMap<String, (BatchCall, Reply)> = calls
        .into_iter()
        .zip(replies)
        .filter_map(|(call, reply)| {
            let id = crate::batch::custom_id(&call.run, &call.request.task_id, call.attempt);
            Some((id, (call, reply?)))
        })
        .collect();
    for file in files {
        let mine: BTreeMap<String, (BatchCall, Reply)> = file
            .custom_ids()
            .filter_map(|id| by_id.remove_entry(id))
            .collect();
        let span = batch_span(&file.model, file.len(), false);
        tokio::spawn(one_batch(Arc::clone(&shared), file, mine).instrument(span));
    }
}

/// Runs one file's batch and resolves each of its calls.
async fn one_batch(
    shared: Arc<Shared>,
    file: BatchFile,
    calls: BTreeMap<String, (BatchCall, Reply)>,
) {
    let (mut created, mut delivered) = (None, true);
    match batch_outcomes(&shared, &file, &mut created).await {
        Ok(outcomes) => {
            let mut handed = Vec::new();
            for (id, (call, reply)) in calls {
                let outcome = outcomes
                    .get(&id)
                    .cloned()
                    .unwrap_or(BatchOutcome::NotAnswered);
                handed.push(tokio::spawn(resolve(
                    Arc::clone(&shared),
                    call,
                    outcome,
                    reply,
                )));
            }
            for handle in handed {
                delivered &= handle.await.unwrap_or(false);
            }
        }
        Err(message) => {
            for (_, (_, reply)) in calls {
                delivered &= reply.send(Err(EngineError::new(message.clone()))).is_ok();
            }
        }
    }
    // Every call has its answer: a resume need not wait on the batch. A
    // call no longer waited for (a stopped run, a task timeout) leaves the
    // batch to the resume, which hands its answer to the call again.
    if let (Some(journal), Some(batch_id), true) = (shared.journal.get(), created, delivered) {
        let _ = journal.record(OwnedEntry::Collected { batch_id }).await;
    }
}

/// The `tracing` span of one batch of `requests` requests for `model`
/// (`resumed`: taken up from the ledger), in the GenAI conventions' names
/// where they have one (`gen_ai.provider.name`, `gen_ai.request.model`)
/// and ctx's for the batch (`ctx.batch.id`, `ctx.batch.status`, its
/// request counts); an OpenTelemetry exporter installed above picks it
/// up. Its fields are recorded as the batch is created and read
/// ([`record_on_span`]).
pub(crate) fn batch_span(model: &str, requests: usize, resumed: bool) -> tracing::Span {
    tracing::info_span!(
        "batch",
        otel.name = format!("batch {model}"),
        otel.kind = "client",
        "gen_ai.operation.name" = "batch",
        "gen_ai.provider.name" = "openai",
        "gen_ai.request.model" = model,
        "ctx.batch.id" = tracing::field::Empty,
        "ctx.batch.status" = tracing::field::Empty,
        "ctx.batch.requests" = requests as u64,
        "ctx.batch.completed" = tracing::field::Empty,
        "ctx.batch.failed" = tracing::field::Empty,
        "ctx.batch.resumed" = resumed,
        "error.type" = tracing::field::Empty,
    )
}

/// Records `batch` on the current span (a [`batch_span`]): its id, its
/// status and counts; a batch that failed, expired or was cancelled sets
/// `error.type` to its status.
pub(crate) fn record_on_span(batch: &ctx_engine::BatchReport) {
    let span = tracing::Span::current();
    span.record("ctx.batch.id", batch.id.as_str());
    span.record("ctx.batch.status", batch.status.as_str());
    span.record("ctx.batch.completed", batch.completed);
    span.record("ctx.batch.failed", batch.failed);
    if matches!(batch.status.as_str(), "failed" | "expired" | "cancelled") {
        span.record("error.type", batch.status.as_str());
    }
}

/// Uploads `file` and creates its batch, each step journaled before the
/// next: a ledger that cannot be written deletes the file, or cancels
/// the batch, and fails the calls.
async fn submit_journaled(shared: &Shared, file: &BatchFile) -> Result<(String, String), String> {
    let client = &shared.client;
    let journal = shared.journal.get();
    let file_id = client.upload(file).await.map_err(|e| e.to_string())?;
    if let Some(journal) = journal {
        let entry = OwnedEntry::Uploaded {
            file_id: file_id.clone(),
            model: file.model.clone(),
            requests: file.journal(),
        };
        if let Err(e) = journal.record(entry).await {
            let _ = client.delete_file(&file_id).await;
            return Err(e.message);
        }
    }
    let batch = match client.create(&file_id).await {
        Ok(batch) => batch,
        Err(e) => {
            if client.delete_file(&file_id).await.is_ok()
                && let Some(journal) = journal
            {
                let file_id = file_id.clone();
                let _ = journal.record(OwnedEntry::FileDeleted { file_id }).await;
            }
            return Err(e.to_string());
        }
    };
    if let Some(journal) = journal {
        let entry = OwnedEntry::Created {
            file_id: file_id.clone(),
            batch: batch.report(),
        };
        if let Err(e) = journal.record(entry).await {
            let _ = client.cancel(&batch.id).await;
            return Err(e.message);
        }
    }
    record_on_span(&batch.report());
    if let Some(observer) = &shared.observer {
        observer(&ctx_engine::EngineEvent::Batch {
            batch: batch.report(),
        });
    }
    Ok((file_id, batch.id))
}

/// Submits `file`, waits (to the deadline, then cancels what is left) and
/// reads every outcome; `Err` fails every call of the batch.
async fn batch_outcomes(
    shared: &Shared,
    file: &BatchFile,
    created: &mut Option<String>,
) -> Result<BTreeMap<String, BatchOutcome>, String> {
    let client = &shared.client;
    let (file_id, id) = submit_journaled(shared, file).await?;
    *created = Some(id.clone());
    let deadline = shared.settings.deadline.map(|d| Instant::now() + d);
    let ledger = shared.journal.get().map(Journal::ledger);
    let (status, cancelled_here) =
        wait_journaled(client, ledger, shared.observer.as_ref(), &id, deadline)
            .await
            .map_err(|e| e.to_string())?;
    let _ = client.delete_file(&file_id).await;
    match status.state {
        BatchState::Failed => Err(crate::batch::BatchError::Validation {
            batch: id,
            errors: status.errors,
        }
        .to_string()),
        BatchState::Cancelled if !cancelled_here => {
            Err(crate::batch::BatchError::CancelledElsewhere {
                batch: id,
                state: "cancelled".into(),
            }
            .to_string())
        }
        _ => client
            .collect(&status, file)
            .await
            .map_err(|e| e.to_string()),
    }
}

/// Resolves one call from its batch outcome, sending it real-time when
/// the batch did not answer it and it may be tried again; whether the
/// caller got the answer (it may have stopped waiting).
async fn resolve(
    shared: Arc<Shared>,
    call: BatchCall,
    outcome: BatchOutcome,
    reply: Reply,
) -> bool {
    let (batch_attempts, reason, why) = match outcome {
        BatchOutcome::Answered(response) => return reply.send(Ok(response)).is_ok(),
        BatchOutcome::Failed {
            error,
            retryable: false,
        } => return reply.send(Err(error)).is_ok(),
        BatchOutcome::Failed {
            error,
            retryable: true,
        } => (
            error.attempts.clone(),
            Err(error),
            TierFallback::BatchFailed,
        ),
        BatchOutcome::NotAnswered => (Vec::new(), Ok(()), TierFallback::BatchLate),
    };
    // The caller stopped waiting (a task timeout, a stopped run): a
    // real-time call now would be spent for nothing.
    if reply.is_closed() {
        return false;
    }
    let Some(realtime) = &shared.realtime else {
        let error = reason.err().unwrap_or_else(|| {
            EngineError::new(format!(
                "task `{}`: the batch did not answer it and no attempt is left for a real-time call",
                call.request.task_id
            ))
        });
        return reply.send(Err(error)).is_ok();
    };
    let used = u32::try_from(batch_attempts.len()).unwrap_or(u32::MAX);
    // Each real-time call is marked with why it paid the standard price.
    let renumber = |mut later: Vec<ctx_model::Attempt>| {
        for attempt in &mut later {
            attempt.number = attempt.number.saturating_add(used);
            attempt.tier_fallback = Some(why);
        }
        [batch_attempts.clone(), later].concat()
    };
    // The permit is held for the call: real-time calls stay within the
    // limit however many of a batch go real-time at once.
    let _permit = shared.real_time_permit().await;
    let mut result = realtime.infer(&call.request).await;
    let attempts = attempts_of(&mut result);
    *attempts = renumber(std::mem::take(attempts));
    reply.send(result).is_ok()
}

/// The attempts a call's answer or error lists.
fn attempts_of(
    result: &mut Result<InferenceResponse, EngineError>,
) -> &mut Vec<ctx_model::Attempt> {
    match result {
        Ok(response) => &mut response.attempts,
        Err(error) => &mut error.attempts,
    }
}

impl InferenceEngine for BatchingEngine {
    fn name(&self) -> &str {
        OpenAiEngine::NAME
    }

    fn default_model(&self) -> Option<&str> {
        self.shared.labels.default_model()
    }

    /// The real-time engine's label: a batched request is the same
    /// request, so its answer is reused on resume either way.
    fn label(&self) -> String {
        self.shared.labels.label()
    }

    fn cache_identity(&self) -> String {
        self.shared.labels.cache_identity()
    }

    fn keep_batches(&self, ledger: Arc<dyn BatchLedger>) {
        let _ = self.shared.journal.set(Journal::new(ledger));
    }

    fn sends_batches(&self) -> bool {
        true
    }

    /// A whole input file's requests: what the executor may keep in
    /// flight, so that every ready task, and every ready item of a map,
    /// goes in the wave's batch.
    fn batch_capacity(&self) -> usize {
        self.shared.client.limits().requests
    }

    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(self.call(request))
    }

    fn infer_with_first_token<'a>(
        &'a self,
        request: &'a InferenceRequest,
        first_token: &'a FirstToken,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(self.warm_up(request, first_token))
    }
}

#[cfg(test)]
mod tests {

    use ctx_model::{CallOutcome, ServiceTier};
    use ctx_test_support::openai_server::HonestServer;

    use super::*;
    use crate::batch::tests::{call, config, words};

    fn engine(base_url: &str, attempts: u32, deadline: Option<Duration>) -> BatchingEngine {
        let mut config = config(base_url);
        config.retry.max_attempts = attempts;
        config.retry.initial_backoff = Duration::from_millis(1);
        config.defaults.max_tokens = Some(3);
        BatchingEngine::new(config, "r1", fast(deadline)).unwrap()
    }

    /// A 30 ms window, reads every few milliseconds.
    fn fast(deadline: Option<Duration>) -> BatchingConfig {
        BatchingConfig {
            window: Duration::from_millis(30),
            gather_limit: Duration::from_secs(5),
            real_time_limit: 0,
            deadline,
            poll: PollPolicy {
                initial: Duration::from_millis(2),
                max: Duration::from_millis(5),
            },
        }
    }

    fn request(task: &str) -> InferenceRequest {
        let mut call = call(task, &format!("Say {task}."));
        call.request.params.system = None;
        call.request
    }

    fn outcomes(response: &InferenceResponse) -> Vec<CallOutcome> {
        response
            .attempts
            .iter()
            .map(|a| a.outcome.clone())
            .collect()
    }

    fn tiers(server: &HonestServer) -> Vec<String> {
        let mut tiers: Vec<String> = server.bills().into_iter().map(|b| b.service_tier).collect();
        tiers.sort();
        tiers
    }

    /// Calls that keep arriving closer than the window (a large map's
    /// items, each storing its prompt first) stay in the wave however long
    /// they take in all; the wave's batch is one. The engine asks for a
    /// whole file's worth in flight.
    #[tokio::test]
    async fn calls_closer_than_the_window_go_as_one_batch_however_long_they_take() {
        let server = HonestServer::start(words()).await;
        let engine = engine(&server.base_url, 1, None);
        assert_eq!(engine.batch_capacity(), crate::batch::MAX_REQUESTS_PER_FILE);
        let r: Vec<InferenceRequest> = (0..6).map(|i| request(&format!("t{i}"))).collect();
        let late = |i: usize| {
            let engine = &engine;
            let request = &r[i];
            async move {
                tokio::time::sleep(Duration::from_millis(15 * i as u64)).await;
                engine.infer(request).await
            }
        };
        let answers = tokio::join!(late(0), late(1), late(2), late(3), late(4), late(5));
        for answer in [
            answers.0, answers.1, answers.2, answers.3, answers.4, answers.5,
        ] {
            answer.unwrap();
        }
        assert_eq!(server.batch_ids().len(), 1, "75 ms of calls, 15 ms apart");
    }

    /// The warm-up call goes real-time (no batch is made for it) and is
    /// marked; the calls that follow it go batched. With one
    /// attempt allowed (none left for a real-time call) it is batched.
    #[tokio::test]
    async fn the_warm_up_call_goes_real_time_and_its_siblings_batched() {
        let server = HonestServer::start(words()).await;
        let engine = engine(&server.base_url, 3, None);
        let signal = FirstToken::new(|| {});
        let warm = engine
            .infer_with_first_token(&request("w"), &signal)
            .await
            .unwrap();
        assert!(server.batch_ids().is_empty(), "no batch for the warm-up");
        assert_eq!(
            warm.attempts
                .iter()
                .map(|a| a.tier_fallback)
                .collect::<Vec<_>>(),
            [Some(TierFallback::WarmUp)]
        );
        let (a, b) = (request("a"), request("b"));
        let (a, b) = tokio::join!(engine.infer(&a), engine.infer(&b));
        assert!(
            a.unwrap()
                .attempts
                .iter()
                .all(|a| a.tier_fallback.is_none())
        );
        b.unwrap();
        assert_eq!(server.batch_ids().len(), 1);
        assert_eq!(tiers(&server), ["batch", "batch", "default"]);
        // No attempt left for a real-time call: batched.
        let one = engine_one(&server.base_url);
        let r = one
            .infer_with_first_token(&request("x"), &signal)
            .await
            .unwrap();
        assert!(r.attempts.iter().all(|a| a.tier_fallback.is_none()));
        assert_eq!(server.batch_ids().len(), 2);
    }

    #[tokio::test]
    async fn a_wave_of_calls_is_one_batch_at_the_batch_tier() {
        let server = HonestServer::start(words()).await;
        let engine = engine(&server.base_url, 3, None);
        let (a, b, c) = (request("a"), request("b"), request("c"));
        let (a, b, c) = tokio::join!(engine.infer(&a), engine.infer(&b), engine.infer(&c));
        for response in [a, b, c] {
            let response = response.unwrap();
            assert_eq!(response.output, " yes yes yes");
            assert_eq!(
                response.usage.unwrap().service_tier,
                Some(ServiceTier::Batch)
            );
        }
        assert_eq!(server.batch_ids().len(), 1);
        assert_eq!(tiers(&server), ["batch", "batch", "batch"]);
        assert_eq!(
            engine.label(),
            OpenAiEngine::new(engine.shared.labels.config().clone())
                .unwrap()
                .label()
        );
    }

    #[tokio::test]
    async fn past_the_deadline_what_is_pending_is_cancelled_and_sent_real_time() {
        let server = HonestServer::start(words()).await;
        // `a` is answered, then the batch holds.
        server.hold_batches_after(1);
        let engine = engine(&server.base_url, 3, Some(Duration::from_millis(60)));
        let (a, b) = (request("a"), request("b"));
        let (a, b) = tokio::join!(engine.infer(&a), engine.infer(&b));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.usage.unwrap().service_tier, Some(ServiceTier::Batch));
        assert_eq!(b.usage.unwrap().service_tier, Some(ServiceTier::Default));
        assert_eq!(b.attempts.len(), 1, "a cancelled request was never billed");
        assert_eq!(tiers(&server), ["batch", "default"]);
        assert!(
            !server.cancel_batch(&server.batch_ids()[0]),
            "already cancelled"
        );
    }

    #[tokio::test]
    async fn a_retryable_failure_goes_real_time_within_the_attempts() {
        let server = HonestServer::start(words()).await;
        server.fail_batch_requests(1);
        let engine = engine(&server.base_url, 2, None);
        let response = engine.infer(&request("a")).await.unwrap();
        let outcomes = outcomes(&response);
        assert_eq!(outcomes, [CallOutcome::Http(500), CallOutcome::Ok]);
        assert_eq!(response.attempts[1].number, 2);
        assert_eq!(tiers(&server), ["default"]);

        server.fail_batch_requests(1);
        let single = engine_one(&server.base_url);
        let error = single.infer(&request("b")).await.unwrap_err();
        assert_eq!(
            error.attempts.len(),
            1,
            "no attempt is left for a real-time call"
        );
        assert!(
            error.message.starts_with("HTTP 500 in batch"),
            "{}",
            error.message
        );
    }

    fn engine_one(base_url: &str) -> BatchingEngine {
        engine(base_url, 1, None)
    }

    #[tokio::test]
    async fn the_real_time_calls_report_their_retries() {
        let server = HonestServer::start(ctx_test_support::openai_server::Behaviour {
            flex_busy: 1,
            ..words()
        })
        .await;
        server.fail_batch_requests(1);
        let mut config = config(&server.base_url);
        config.retry.max_attempts = 3;
        config.retry.initial_backoff = Duration::from_millis(1);
        config.defaults.service_tier = Some("flex".into());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::clone(&seen);
        let observer: ctx_engine::Observer = Arc::new(move |e: &ctx_engine::EngineEvent| {
            events.lock().unwrap().push(format!("{e:?}"));
        });
        let engine = BatchingEngine::new(config, "r1", fast(None))
            .unwrap()
            .with_observer(observer);
        let response = engine.infer(&request("a")).await.unwrap();
        let outcomes = outcomes(&response);
        assert_eq!(
            outcomes,
            [
                CallOutcome::Http(500),
                CallOutcome::Http(429),
                CallOutcome::Ok
            ]
        );
        let seen = seen.lock().unwrap();
        // The batch as it moved: created, then ended.
        let (batch, seen): (Vec<&String>, Vec<&String>) =
            seen.iter().partition(|e| e.starts_with("Batch"));
        assert!(batch.len() >= 2, "{batch:?}");
        assert!(batch[0].contains("status: \"validating\""), "{batch:?}");
        assert!(
            batch.last().unwrap().contains("status: \"completed\""),
            "{batch:?}"
        );
        // The 429, then the last attempt at the standard tier.
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[0].starts_with("Retrying"), "{seen:?}");
        assert!(seen[1].starts_with("FlexFallback"), "{seen:?}");
    }

    #[tokio::test]
    async fn a_call_given_up_on_is_not_sent_real_time() {
        let server = HonestServer::start(words()).await;
        server.set_batch_pace(0);
        let engine = engine(&server.base_url, 3, Some(Duration::from_millis(60)));
        let a = request("a");
        let gave_up = tokio::time::timeout(Duration::from_millis(10), engine.infer(&a)).await;
        assert!(gave_up.is_err());
        // Past the deadline: the batch is cancelled, and nothing is sent.
        let cancelled = || {
            let ids = server.batch_ids();
            ids.first().and_then(|id| server.batch_status(id)) == Some("cancelled".into())
        };
        while !cancelled() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(server.bills(), []);
    }

    #[tokio::test]
    async fn a_call_that_cannot_be_encoded_fails_alone() {
        let server = HonestServer::start(words()).await;
        let mut config = config(&server.base_url);
        config.defaults.model = None;
        let engine = BatchingEngine::new(config, "r1", fast(None)).unwrap();
        let mut with_model = request("a");
        with_model.params.model = Some("gpt-4o-mini".into());
        let without = request("b");
        let (a, b) = tokio::join!(engine.infer(&with_model), engine.infer(&without));
        assert_eq!(
            a.unwrap().usage.unwrap().service_tier,
            Some(ServiceTier::Batch)
        );
        let error = b.unwrap_err().message;
        assert!(error.starts_with("task `b`: no model"), "{error}");
    }

    #[tokio::test]
    async fn a_server_without_the_batch_api_fails_each_call_naming_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let base = format!("http://127.0.0.1:{port}/v1");
        let error = engine(&base, 2, None)
            .infer(&request("a"))
            .await
            .unwrap_err();
        assert!(
            error
                .message
                .starts_with(&format!("cannot reach {base}/files")),
            "{}",
            error.message
        );
    }
}
