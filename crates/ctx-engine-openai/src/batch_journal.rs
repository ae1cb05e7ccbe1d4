//! Durable batches: [`Journal`], the run's [`BatchLedger`] as the
//! [`BatchingEngine`](crate::BatchingEngine) writes and reads it.
//!
//! * Writing: after the upload, the file's id and each request
//!   ([`BatchEntry::Uploaded`]); after the create, the batch's id
//!   ([`BatchEntry::Created`]); every status or count that moved while the
//!   batch is read; once each answer was handed to its call,
//!   [`BatchEntry::Collected`]. A batch is waited on only once its create
//!   is journaled: a ledger that cannot be written cancels the batch and
//!   fails its calls rather than spend what no resume could find.
//! * Taking up (the first call of a session bound to a ledger): a file
//!   uploaded with no batch created from it is deleted at the provider; a
//!   batch not collected is followed again (read to its end, cancelled at
//!   the deadline counted from its creation, its output and error files
//!   read) and each of its requests waits for the call of its task. A call
//!   whose request is the same (the body's SHA-256 without the session's
//!   canary) takes the batch's answer, classified as a fresh one would be;
//!   nothing it may still get from the live batch is sent again. A call
//!   whose request changed goes in a new batch; the old answer is read and
//!   dropped.
//! * The engine's attempt numbers go on from the ledger's, so a
//!   `custom_id` never repeats within a run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ctx_engine::{BatchEntry, BatchLedger, BatchedRequest, EngineError, JournaledBatch};
use serde_json::Value;
use tokio::sync::{OnceCell, watch};
use tracing::Instrument;

use crate::batch::{BatchClient, BatchError, BatchState, BatchStatus, result_lines};

/// A batch's result lines by `custom_id`, or why it has none.
pub(crate) type Lines = Result<Arc<BTreeMap<String, Value>>, String>;

/// The ledger an engine writes, and what it took up from it.
pub(crate) struct Journal {
    ledger: Arc<dyn BatchLedger>,
    /// What was taken up, or why the ledger could not be read (every
    /// call then fails: sending would risk paying twice).
    taken: OnceCell<Result<TakenUp, String>>,
}

/// The batches a session found in flight.
pub(crate) struct TakenUp {
    /// Each task's request in a live batch, claimed by its first call.
    waiting: Mutex<BTreeMap<String, Waiting>>,
    /// The highest attempt journaled per task.
    pub(crate) attempts: BTreeMap<String, u32>,
}

/// A request a live batch may still answer.
pub(crate) struct Waiting {
    /// The request as journaled.
    pub(crate) request: BatchedRequest,
    /// Its batch.
    pub(crate) batch: Arc<Followed>,
}

/// A batch a resume follows.
pub(crate) struct Followed {
    /// The batch's id.
    pub(crate) id: String,
    lines: watch::Receiver<Option<Lines>>,
    /// Its requests whose calls have not yet been answered.
    left: AtomicUsize,
}

impl Followed {
    /// Its result lines, once the batch ended and they were read.
    pub(crate) async fn lines(&self) -> Lines {
        let mut lines = self.lines.clone();
        match lines.wait_for(Option::is_some).await {
            Ok(seen) => seen.clone().unwrap_or_else(|| Err("no lines".into())),
            Err(_) => Err(format!("batch {}: following it stopped", self.id)),
        }
    }
}

/// Milliseconds since the Unix epoch, now.
fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Journal {
    pub(crate) fn new(ledger: Arc<dyn BatchLedger>) -> Journal {
        Journal {
            ledger,
            taken: OnceCell::new(),
        }
    }

    /// The run's id.
    pub(crate) fn run_id(&self) -> &str {
        self.ledger.run_id()
    }

    /// Records `entry` off the runtime's workers.
    pub(crate) async fn record(&self, entry: OwnedEntry) -> Result<(), EngineError> {
        let ledger = Arc::clone(&self.ledger);
        tokio::task::spawn_blocking(move || ledger.record(&entry.borrowed()))
            .await
            .map_err(|e| EngineError::new(format!("the run's batch ledger: {e}")))?
            .map_err(|e| EngineError::new(e.to_string()))
    }

    /// What the ledger held in flight when this session started, taken up
    /// once (the first call waits for it).
    pub(crate) async fn taken_up(
        &self,
        client: &Arc<BatchClient>,
        follow: &FollowSettings,
    ) -> Result<&TakenUp, EngineError> {
        self.taken
            .get_or_init(|| self.take_up(client, follow))
            .await
            .as_ref()
            .map_err(|message| EngineError::new(message.clone()))
    }

    async fn take_up(
        &self,
        client: &Arc<BatchClient>,
        follow: &FollowSettings,
    ) -> Result<TakenUp, String> {
        let ledger = Arc::clone(&self.ledger);
        let unsettled = tokio::task::spawn_blocking(move || ledger.unsettled())
            .await
            .map_err(|e| format!("the run's batch ledger: {e}"))?
            .map_err(|e| e.to_string())?;
        let mut attempts: BTreeMap<String, u32> = BTreeMap::new();
        let mut waiting = BTreeMap::new();
        for journaled in unsettled {
            for request in &journaled.requests {
                let seen = attempts.entry(request.task_id.clone()).or_insert(0);
                *seen = (*seen).max(request.attempt);
            }
            let Some(batch) = journaled.batch.clone() else {
                // Uploaded, never created: nothing can answer it.
                match client.delete_file(&journaled.file_id).await {
                    Ok(()) | Err(BatchError::Http { status: 404, .. }) => {
                        let file_id = journaled.file_id.clone();
                        let _ = self.record(OwnedEntry::FileDeleted { file_id }).await;
                    }
                    // Tried again at the next resume.
                    Err(_) => {}
                }
                continue;
            };
            let followed = self.follow(client, follow, &journaled, batch.id.clone());
            for request in journaled.requests {
                // A task's latest request is the one its call may take.
                waiting.insert(
                    request.task_id.clone(),
                    Waiting {
                        request,
                        batch: Arc::clone(&followed),
                    },
                );
            }
        }
        Ok(TakenUp {
            waiting: Mutex::new(waiting),
            attempts,
        })
    }

    /// Starts following batch `id` of `journaled`.
    fn follow(
        &self,
        client: &Arc<BatchClient>,
        settings: &FollowSettings,
        journaled: &JournaledBatch,
        id: String,
    ) -> Arc<Followed> {
        let (send, lines) = watch::channel(None);
        let followed = Arc::new(Followed {
            id: id.clone(),
            lines,
            left: AtomicUsize::new(journaled.requests.len()),
        });
        // The deadline counts from the batch's creation, not the resume.
        let deadline = settings.deadline.map(|d| {
            let age = journaled
                .created_unix_ms
                .map_or(0, |at| now_unix_ms().saturating_sub(at));
            Instant::now() + d.saturating_sub(Duration::from_millis(age))
        });
        let task = FollowTask {
            client: Arc::clone(client),
            ledger: Arc::clone(&self.ledger),
            observer: settings.observer.clone(),
            id,
            file_id: journaled.file_id.clone(),
            requests: journaled.requests.clone(),
            deadline,
        };
        let span = crate::batching::batch_span(&journaled.model, journaled.requests.len(), true);
        tokio::spawn(
            async move {
                let lines = task.run().await;
                let _ = send.send(Some(lines));
            }
            .instrument(span),
        );
        followed
    }

    /// The ledger itself.
    pub(crate) fn ledger(&self) -> &Arc<dyn BatchLedger> {
        &self.ledger
    }

    /// Marks one answer of `batch` handed out; the last one records the
    /// batch collected.
    pub(crate) async fn answered(&self, batch: &Followed) {
        if batch.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let batch_id = batch.id.clone();
            let _ = self.record(OwnedEntry::Collected { batch_id }).await;
        }
    }
}

impl TakenUp {
    /// Whether a live batch may still answer a request of `task` that no
    /// call has claimed yet: a call that would go real-time must take it
    /// instead, so that nothing is paid twice.
    pub(crate) fn is_waiting(&self, task: &str) -> bool {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(task)
    }

    /// The request of `task` a live batch may still answer, once.
    pub(crate) fn claim(&self, task: &str) -> Option<Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(task)
    }
}

/// What following a batch needs of the engine's settings.
#[derive(Clone)]
pub(crate) struct FollowSettings {
    /// `--batch-deadline`.
    pub(crate) deadline: Option<Duration>,
    /// Where progress goes.
    pub(crate) observer: Option<ctx_engine::Observer>,
}

/// One followed batch, read to its end.
struct FollowTask {
    client: Arc<BatchClient>,
    ledger: Arc<dyn BatchLedger>,
    observer: Option<ctx_engine::Observer>,
    id: String,
    file_id: String,
    requests: Vec<BatchedRequest>,
    deadline: Option<Instant>,
}

impl FollowTask {
    async fn run(self) -> Lines {
        let (status, _) = wait_journaled(
            &self.client,
            Some(&self.ledger),
            self.observer.as_ref(),
            &self.id,
            self.deadline,
        )
        .await
        .map_err(|e| e.to_string())?;
        let _ = self.client.delete_file(&self.file_id).await;
        match status.state {
            BatchState::Failed => Err(BatchError::Validation {
                batch: status.id,
                errors: status.errors,
            }
            .to_string()),
            _ => self.read(&status).await.map(Arc::new),
        }
    }

    /// The output and error files' lines.
    async fn read(&self, status: &BatchStatus) -> Result<BTreeMap<String, Value>, String> {
        let limit = crate::batch::output_limit(self.requests.iter().map(|r| r.max_output_bytes));
        let known = |id: &str| self.requests.iter().any(|r| r.custom_id == id);
        let mut lines = BTreeMap::new();
        for file_id in [&status.output_file_id, &status.error_file_id]
            .into_iter()
            .flatten()
        {
            let bytes = self
                .client
                .download_within(file_id, limit, self.requests.len())
                .await
                .map_err(|e| e.to_string())?;
            result_lines(&bytes, file_id, &known, &mut lines).map_err(|e| e.to_string())?;
        }
        Ok(lines)
    }
}

/// Waits for batch `id` as [`BatchClient::wait`] does, to `deadline`
/// (then cancels it and waits for its end), journaling in `ledger` each
/// status that moved (the final one before returning) and telling
/// `observer`. Its status at the end, and whether it was cancelled here.
pub(crate) async fn wait_journaled(
    client: &BatchClient,
    ledger: Option<&Arc<dyn BatchLedger>>,
    observer: Option<&ctx_engine::Observer>,
    id: &str,
    deadline: Option<Instant>,
) -> Result<(BatchStatus, bool), BatchError> {
    // The latest status moved, written by whichever write runs: a write
    // never puts back an older status than one already written.
    let latest: Arc<Mutex<Option<ctx_engine::BatchReport>>> = Arc::default();
    let mut last: Option<ctx_engine::BatchReport> = None;
    let mut seen = |status: &BatchStatus| {
        let report = status.report();
        if last.as_ref() == Some(&report) {
            return;
        }
        crate::batching::record_on_span(&report);
        if let Some(observer) = observer {
            observer(&ctx_engine::EngineEvent::Batch {
                batch: report.clone(),
            });
        }
        if let Some(ledger) = ledger {
            *latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(report.clone());
            let (ledger, latest) = (Arc::clone(ledger), Arc::clone(&latest));
            tokio::task::spawn_blocking(move || write_latest(ledger.as_ref(), &latest));
        }
        last = Some(report);
    };
    let mut status = client.wait_seen(id, deadline, &mut seen).await?;
    let cancelled_here = !status.state.is_final();
    if cancelled_here {
        seen(&client.cancel(id).await?);
        status = client.wait_seen(id, None, &mut seen).await?;
    }
    if let Some(ledger) = ledger {
        let ledger = Arc::clone(ledger);
        let _ = tokio::task::spawn_blocking(move || write_latest(ledger.as_ref(), &latest)).await;
    }
    Ok((status, cancelled_here))
}

/// Writes the latest status, holding it while it is written.
fn write_latest(ledger: &dyn BatchLedger, latest: &Mutex<Option<ctx_engine::BatchReport>>) {
    let latest = latest.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(batch) = latest.as_ref() {
        // Only `ctx runs show` reads it: a failed write loses nothing.
        let _ = ledger.record(&BatchEntry::Status { batch });
    }
}

/// A [`BatchEntry`] that owns its data, to cross to the blocking pool.
pub(crate) enum OwnedEntry {
    Uploaded {
        file_id: String,
        model: String,
        requests: Vec<BatchedRequest>,
    },
    Created {
        file_id: String,
        batch: ctx_engine::BatchReport,
    },
    Collected {
        batch_id: String,
    },
    FileDeleted {
        file_id: String,
    },
}

impl OwnedEntry {
    fn borrowed(&self) -> BatchEntry<'_> {
        match self {
            OwnedEntry::Uploaded {
                file_id,
                model,
                requests,
            } => BatchEntry::Uploaded {
                file_id,
                model,
                requests,
            },
            OwnedEntry::Created { file_id, batch } => BatchEntry::Created { file_id, batch },
            OwnedEntry::Collected { batch_id } => BatchEntry::Collected { batch_id },
            OwnedEntry::FileDeleted { file_id } => BatchEntry::FileDeleted { file_id },
        }
    }
}

#[cfg(test)]
mod tests {
    use ctx_engine::{BatchReport, InferenceEngine, LedgerError};
    use ctx_model::ServiceTier;
    use ctx_test_support::openai_server::HonestServer;

    use super::*;
    use crate::batch::tests::{call, config, words};
    use crate::batch::{BatchCall, PollPolicy};
    use crate::{BatchingConfig, BatchingEngine};

    /// A ledger in memory, as the SQLite store keeps one.
    #[derive(Default)]
    struct MemoryLedger {
        batches: Mutex<Vec<JournaledBatch>>,
        collected: Mutex<Vec<String>>,
        deleted: Mutex<Vec<String>>,
        unreadable: bool,
    }

    impl BatchLedger for MemoryLedger {
        fn run_id(&self) -> &str {
            "r1"
        }

        fn record(&self, entry: &BatchEntry<'_>) -> Result<(), LedgerError> {
            let mut batches = self.batches.lock().unwrap();
            match entry {
                BatchEntry::Uploaded {
                    file_id,
                    model,
                    requests,
                } => batches.push(JournaledBatch {
                    file_id: file_id.to_string(),
                    model: model.to_string(),
                    batch: None,
                    created_unix_ms: None,
                    requests: requests.to_vec(),
                }),
                BatchEntry::Created { file_id, batch } => {
                    let journaled = batches.iter_mut().find(|b| b.file_id == *file_id).unwrap();
                    journaled.batch = Some((*batch).clone());
                    journaled.created_unix_ms = Some(now_unix_ms());
                }
                BatchEntry::Status { batch } => {
                    for b in batches.iter_mut() {
                        if b.batch.as_ref().is_some_and(|own| own.id == batch.id) {
                            b.batch = Some((*batch).clone());
                        }
                    }
                }
                BatchEntry::Collected { batch_id } => {
                    self.collected.lock().unwrap().push(batch_id.to_string());
                }
                BatchEntry::FileDeleted { file_id } => {
                    self.deleted.lock().unwrap().push(file_id.to_string());
                }
            }
            Ok(())
        }

        fn unsettled(&self) -> Result<Vec<JournaledBatch>, LedgerError> {
            if self.unreadable {
                return Err(LedgerError::new("store.sqlite: disk I/O error"));
            }
            let (collected, deleted) =
                (self.collected.lock().unwrap(), self.deleted.lock().unwrap());
            Ok(self
                .batches
                .lock()
                .unwrap()
                .iter()
                .filter(|b| match &b.batch {
                    Some(batch) => !collected.contains(&batch.id),
                    None => !deleted.contains(&b.file_id),
                })
                .cloned()
                .collect())
        }
    }

    fn engine(base_url: &str, ledger: &Arc<MemoryLedger>) -> BatchingEngine {
        engine_with_deadline(base_url, ledger, None)
    }

    fn engine_with_deadline(
        base_url: &str,
        ledger: &Arc<MemoryLedger>,
        deadline: Option<Duration>,
    ) -> BatchingEngine {
        let mut config = config(base_url);
        config.retry.max_attempts = 2;
        let settings = BatchingConfig {
            window: Duration::from_millis(20),
            gather_limit: Duration::from_secs(5),
            real_time_limit: 0,
            deadline,
            poll: PollPolicy {
                initial: Duration::from_millis(2),
                max: Duration::from_millis(5),
            },
        };
        let engine = BatchingEngine::new(config, "p1", settings).unwrap();
        engine.keep_batches(Arc::clone(ledger) as Arc<dyn BatchLedger>);
        engine
    }

    /// What a process that died after `created` left: `task`'s request
    /// uploaded and journaled, its batch created (and journaled) when
    /// `created`.
    async fn left_behind(
        server: &HonestServer,
        ledger: &MemoryLedger,
        task: &str,
        created: bool,
    ) -> (String, Option<BatchReport>) {
        let client = BatchClient::new(config(&server.base_url)).unwrap();
        let mut left: BatchCall = call(task, &format!("Say {task}."));
        left.request.params.system = None;
        let file = client.encode(&[left]).unwrap().remove(0);
        let file_id = client.upload(&file).await.unwrap();
        let requests = file.journal();
        ledger
            .record(&BatchEntry::Uploaded {
                file_id: &file_id,
                model: &file.model,
                requests: &requests,
            })
            .unwrap();
        if !created {
            return (file_id, None);
        }
        let batch = client.create(&file_id).await.unwrap().report();
        ledger
            .record(&BatchEntry::Created {
                file_id: &file_id,
                batch: &batch,
            })
            .unwrap();
        (file_id, Some(batch))
    }

    fn request(task: &str) -> ctx_engine::InferenceRequest {
        let mut call = call(task, &format!("Say {task}."));
        call.request.params.system = None;
        call.request
    }

    #[tokio::test]
    async fn a_resumed_call_takes_its_answer_from_the_live_batch() {
        let server = HonestServer::start(words()).await;
        server.set_batch_pace(0);
        let ledger = Arc::new(MemoryLedger::default());
        let (_, batch) = left_behind(&server, &ledger, "a", true).await;
        let batch = batch.unwrap();
        server.set_batch_pace(usize::MAX);
        let engine = engine(&server.base_url, &ledger);
        let response = engine.infer(&request("a")).await.unwrap();
        assert_eq!(response.output, " yes yes yes yes yes");
        assert_eq!(
            response.usage.unwrap().service_tier,
            Some(ServiceTier::Batch)
        );
        assert_eq!(
            server.batch_ids(),
            std::slice::from_ref(&batch.id),
            "no second batch"
        );
        assert_eq!(server.bills().len(), 1);
        assert_eq!(*ledger.collected.lock().unwrap(), [batch.id]);
        // The task's next call is attempt 2: its custom_id never repeats.
        engine.infer(&request("a")).await.unwrap();
        let second = server.batch_ids()[1].clone();
        let input = String::from_utf8(server.batch_input(&second).unwrap()).unwrap();
        assert!(input.contains("\"custom_id\":\"ctx:r1:2:a\""), "{input}");
    }

    #[tokio::test]
    async fn a_resumed_batch_past_its_deadline_is_cancelled_and_sent_real_time() {
        let server = HonestServer::start(words()).await;
        server.set_batch_pace(0);
        let ledger = Arc::new(MemoryLedger::default());
        let (_, batch) = left_behind(&server, &ledger, "a", true).await;
        let batch = batch.unwrap();
        // The deadline counts from the batch's creation: past it already.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let deadline = Some(Duration::from_millis(20));
        let engine = engine_with_deadline(&server.base_url, &ledger, deadline);
        let response = engine.infer(&request("a")).await.unwrap();
        assert_eq!(
            response.usage.unwrap().service_tier,
            Some(ServiceTier::Default)
        );
        assert_eq!(server.batch_status(&batch.id).as_deref(), Some("cancelled"));
        let tiers: Vec<String> = server.bills().into_iter().map(|b| b.service_tier).collect();
        assert_eq!(
            tiers,
            ["default"],
            "the batch answered nothing: billed once"
        );
        assert_eq!(server.batch_ids().len(), 1);
    }

    #[tokio::test]
    async fn a_ledger_that_cannot_be_read_fails_the_calls_and_sends_nothing() {
        let server = HonestServer::start(words()).await;
        let ledger = Arc::new(MemoryLedger {
            unreadable: true,
            ..MemoryLedger::default()
        });
        let error = engine(&server.base_url, &ledger)
            .infer(&request("a"))
            .await
            .unwrap_err();
        assert_eq!(
            error.message,
            "the run's batch ledger: store.sqlite: disk I/O error"
        );
        assert!(server.file_ids().is_empty() && server.bills().is_empty());
    }

    #[tokio::test]
    async fn a_changed_request_goes_in_a_new_batch() {
        let server = HonestServer::start(words()).await;
        let ledger = Arc::new(MemoryLedger::default());
        left_behind(&server, &ledger, "a", true).await;
        let engine = engine(&server.base_url, &ledger);
        let mut changed = request("a");
        changed.prompt = "Say something else.".into();
        engine.infer(&changed).await.unwrap();
        assert_eq!(server.batch_ids().len(), 2);
        // The new batch is recorded collected once its call has its answer.
        let settled = || ledger.collected.lock().unwrap().len();
        for _ in 0..200 {
            if settled() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(settled(), 2, "both settled");
    }

    #[tokio::test]
    async fn a_file_whose_batch_was_never_created_is_deleted() {
        let server = HonestServer::start(words()).await;
        let ledger = Arc::new(MemoryLedger::default());
        let (file_id, _) = left_behind(&server, &ledger, "a", false).await;
        assert!(server.file_ids().contains(&file_id));
        let engine = engine(&server.base_url, &ledger);
        engine.infer(&request("a")).await.unwrap();
        assert!(!server.file_ids().contains(&file_id));
        assert_eq!(*ledger.deleted.lock().unwrap(), [file_id]);
        assert_eq!(server.batch_ids().len(), 1, "sent once, in a new batch");
    }
}
