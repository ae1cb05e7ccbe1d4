//! [`PgStore`]: the connection, the schema check, and every statement.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use sha2::{Digest, Sha256};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::error::{Error, Result};
use crate::schema::{APPLICATION, MIGRATION_LOCK, MIGRATIONS, SCHEMA_VERSION};
use crate::url::StoreUrl;

/// How a store behaves when the network or the server goes away.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long a statement keeps trying to reconnect when the connection
    /// breaks (the server restarts, a failover) before it fails. Opening a
    /// store does not wait: an unreachable URL fails at once.
    pub reconnect_window: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            reconnect_window: Duration::from_secs(60),
        }
    }
}

/// A claim on one task: who holds it and its fencing token.
///
/// `attempt` increases by one at every claim of the task, so a worker whose
/// lease lapsed and whose task was claimed again holds a token that no
/// longer matches: its heartbeats and its commit are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The run.
    pub run_id: String,
    /// The task.
    pub task_id: String,
    /// The fencing token.
    pub attempt: i32,
    /// The worker holding it.
    pub worker: String,
}

/// What happened to a result committed under a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// The result is the task's, and its dependents were released (or, for
    /// a failure, skipped) in the same transaction.
    Committed,
    /// The lease had lapsed (or the task was claimed again): the result was
    /// discarded, counted in the run's `late_commits` and kept in the
    /// attempts history with `committed = false`.
    Refused,
}

/// What [`PgStore::register_run`] records.
#[derive(Debug, Clone, Copy)]
pub struct RegisterRun<'a> {
    /// The plan as it will be run (secrets already redacted by the caller:
    /// workers run exactly what is stored).
    pub plan: &'a Plan,
    /// Each task's priority, in plan order: its remaining path length, so
    /// that claims take the critical path first as the local executor does.
    pub priorities: &'a [u64],
    /// The engine label, for listings.
    pub engine: &'a str,
    /// Where the plan came from, for listings.
    pub plan_source: Option<&'a str>,
}

/// A run as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    /// Its id.
    pub run_id: String,
    /// When it was registered (RFC 3339, UTC).
    pub created_at: String,
    /// When its last task became terminal.
    pub finished_at: Option<String>,
    /// Whether tasks remain to run.
    pub open: bool,
    /// The engine label given at registration.
    pub engine: String,
    /// The plan's path as given.
    pub plan_source: Option<String>,
    /// SHA-256 of the stored plan JSON.
    pub plan_hash: String,
    /// Tasks in the plan.
    pub task_count: usize,
    /// Tasks per status.
    pub counts: Counts,
    /// Results refused because their lease had lapsed.
    pub late_commits: i64,
    /// Claims beyond the first, summed over tasks: re-runs after a lapsed
    /// lease or a release.
    pub reclaims: i64,
}

/// How many tasks are in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Not started.
    pub pending: usize,
    /// Claimed now.
    pub in_progress: usize,
    /// Completed.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
}

/// One task's row.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// The task.
    pub task_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// Claims so far.
    pub attempt: i32,
    /// Its latest result, once it has one.
    pub result: Option<TaskExecutionResult>,
    /// When its current or last claim started (RFC 3339, UTC).
    pub started_at: Option<String>,
    /// When it became terminal.
    pub finished_at: Option<String>,
    /// Its last claim's place in the order of all claims: sorting by it
    /// gives the dispatch order.
    pub claim_seq: Option<i64>,
    /// The engine label of the worker that claimed it last, when that
    /// worker gave one ([`PgStore::with_engine`]).
    pub engine: Option<String>,
}

/// What [`PgStore::reopen_run`] applies.
#[derive(Debug, Clone, Copy)]
pub struct Reopen<'a> {
    /// The plan the run continues under (redacted, as at registration).
    pub plan: &'a Plan,
    /// Each task's priority, in plan order.
    pub priorities: &'a [u64],
    /// The engine label of this session, compared at the next resume.
    pub engine: &'a str,
    /// Where the plan came from, if known (else the stored one is kept).
    pub plan_source: Option<&'a str>,
    /// The tasks that run again (the resume plan's `rerun`).
    pub rerun: &'a [String],
}

/// What [`PgStore::gc`] did, each list oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Runs deleted.
    pub removed: Vec<String>,
    /// Runs kept because they are among the newest `keep`.
    pub kept: Vec<String>,
    /// Runs beyond `keep` kept because they are open (tasks remain for
    /// workers); `force` removes them.
    pub open: Vec<String>,
}

/// One terminal result a worker committed, or tried to: a row of the
/// run's history.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRow {
    /// Its place in the order of all recorded results.
    pub seq: i64,
    /// The task.
    pub task_id: String,
    /// The claim's fencing token.
    pub attempt: i32,
    /// The worker that sent it.
    pub worker: Option<String>,
    /// `false` for a late commit the fence refused.
    pub committed: bool,
    /// The result.
    pub result: TaskExecutionResult,
    /// When it was recorded (RFC 3339, UTC).
    pub recorded_at: String,
}

enum Reopened {
    Done(u64),
    NoRun,
    BadPlan(serde_json::Error),
    Busy(i64),
}

/// The tasks of an old plan that a new plan drops, with their fingerprints
/// under the old plan, as `unnest` arrays.
#[derive(Debug, Clone, Default)]
struct Dropped {
    ids: Vec<String>,
    inputs: Vec<String>,
    model: Vec<Option<String>>,
    params: Vec<String>,
}

impl Dropped {
    fn of(old: &Plan, kept: &[String]) -> Dropped {
        let kept: std::collections::HashSet<&str> = kept.iter().map(String::as_str).collect();
        let mut fingerprints = ctx_store::fingerprint_all(old);
        let mut out = Dropped::default();
        for t in &old.sub_tasks {
            if kept.contains(t.id.as_str()) {
                continue;
            }
            if let Some(f) = fingerprints.remove(&t.id) {
                out.ids.push(t.id.clone());
                out.inputs.push(f.inputs_hash);
                out.model.push(f.model);
                out.params.push(f.params_hash);
            }
        }
        out
    }
}

/// A kept result of a task a resume dropped from the run (see
/// [`PgStore::dropped`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedRow {
    /// The task.
    pub task_id: String,
    /// Its status when it was dropped.
    pub status: TaskStatus,
    /// Its latest result then.
    pub result: TaskExecutionResult,
    /// The engine label it was produced under.
    pub engine: String,
    /// Its fingerprint under the plan it was produced under.
    pub fingerprint: ctx_store::TaskFingerprint,
    /// Its claim's place in the order of all claims.
    pub claim_seq: Option<i64>,
    /// When that claim started (RFC 3339, UTC).
    pub started_at: Option<String>,
    /// When it became terminal.
    pub finished_at: Option<String>,
}

/// A plan's task rows and edges as `unnest` arrays.
#[derive(Debug, Clone)]
struct TaskRows {
    ids: Vec<String>,
    idx: Vec<i32>,
    deps: Vec<i32>,
    prio: Vec<i64>,
    edge_from: Vec<String>,
    edge_to: Vec<String>,
    count: i32,
}

impl TaskRows {
    fn of(plan: &Plan, priorities: &[u64]) -> TaskRows {
        let n = plan.sub_tasks.len();
        let mut rows = TaskRows {
            ids: Vec::with_capacity(n),
            idx: Vec::with_capacity(n),
            deps: Vec::with_capacity(n),
            prio: Vec::with_capacity(n),
            edge_from: Vec::new(),
            edge_to: Vec::new(),
            count: i32::try_from(n).unwrap_or(i32::MAX),
        };
        for (i, t) in plan.sub_tasks.iter().enumerate() {
            rows.ids.push(t.id.clone());
            rows.idx.push(i32::try_from(i).unwrap_or(i32::MAX));
            rows.deps
                .push(i32::try_from(t.dependencies.len()).unwrap_or(i32::MAX));
            let p = priorities.get(i).copied().unwrap_or(0);
            rows.prio.push(i64::try_from(p).unwrap_or(i64::MAX));
            for d in &t.dependencies {
                rows.edge_from.push(d.clone());
                rows.edge_to.push(t.id.clone());
            }
        }
        rows
    }
}

/// The shared PostgreSQL store. Cheap to clone; every clone shares one
/// connection pool.
///
/// The driver is async, the [`ExecutionStore`](ctx_store::ExecutionStore)
/// seam synchronous. The store therefore owns a small runtime of its own
/// that drives the connections: async methods hand their statement to it
/// and await the answer (from any runtime), and the seam's synchronous
/// methods wait for it on the calling thread, as the SQLite store waits
/// for its file. Nothing depends on the caller's runtime flavour.
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
    rt: Arc<Runtime>,
    /// The engine label this process's claims record (see
    /// [`PgStore::with_engine`]).
    engine: Option<Arc<str>>,
}

struct Shared {
    url: StoreUrl,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    pool: Mutex<Vec<Client>>,
    options: StoreOptions,
    round_trips: AtomicU64,
}

/// The store's runtime, shut down without waiting when the last clone goes
/// (dropping a runtime inside another one's task would panic).
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Runtime {
    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(tokio::runtime::Runtime::handle)
    }
}

type PgError = tokio_postgres::Error;

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.shared.url.display())
            .finish()
    }
}

fn tls_config() -> tokio_postgres_rustls::MakeRustlsConnect {
    let mut roots = rustls::RootCertStore::empty();
    // Certificates the system trusts; ones that do not load are skipped,
    // as every other rustls client on the machine skips them.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        // The ring provider supports the default versions; should it ever
        // not, TLS falls back to the bare default (sslmode=prefer then
        // connects in plain text, sslmode=require fails with a message).
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map(|b| {
                b.with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            })
            .unwrap_or_else(|_| {
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            })
        });
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

/// Whether `e` means the connection is gone (retry on a new one) rather
/// than that the statement failed.
fn is_disconnect(e: &PgError) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        return *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW;
    }
    std::error::Error::source(e).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
}

fn is_auth(e: &PgError) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::INVALID_PASSWORD || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    })
}

impl Shared {
    async fn connect(&self) -> Result<Client, PgError> {
        let (client, connection) = self.url.config.connect(self.tls.clone()).await?;
        tokio::spawn(async move {
            // Ends when the client is dropped or the server goes away; the
            // next statement on this client then fails as closed.
            let _ = connection.await;
        });
        Ok(client)
    }

    async fn client(&self, deadline: Instant) -> Result<Client> {
        loop {
            let pooled = self.pool.lock().ok().and_then(|mut p| p.pop());
            if let Some(c) = pooled {
                if !c.is_closed() {
                    return Ok(c);
                }
                continue;
            }
            match self.connect().await {
                Ok(c) => return Ok(c),
                Err(e) if is_auth(&e) => {
                    return Err(Error::Auth {
                        url: self.url.display().to_string(),
                        source: e,
                    });
                }
                Err(e) if Instant::now() < deadline => {
                    drop(e);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => {
                    return Err(Error::Unreachable {
                        url: self.url.display().to_string(),
                        source: e,
                    });
                }
            }
        }
    }

    fn give_back(&self, client: Client) {
        if !client.is_closed()
            && let Ok(mut p) = self.pool.lock()
            && p.len() < 32
        {
            p.push(client);
        }
    }

    /// Runs `f` on a pooled connection, reconnecting and running it again
    /// while the connection breaks within the reconnect window. `f` gets
    /// the client by value and hands it back, so a transaction can borrow
    /// it mutably. `trips` is how many round trips `f` makes (for the
    /// figures in docs/scaling.md).
    async fn with<T, F, Fut>(
        &self,
        context: &(dyn Fn() -> String + Sync),
        trips: u64,
        window: Duration,
        mut f: F,
    ) -> Result<T>
    where
        F: FnMut(Client, bool) -> Fut,
        Fut: Future<Output = (Client, Result<T, PgError>)>,
    {
        let deadline = Instant::now() + window;
        let mut retry = false;
        loop {
            let client = self.client(deadline).await?;
            self.round_trips.fetch_add(trips, Ordering::Relaxed);
            let (client, r) = f(client, retry).await;
            match r {
                Ok(v) => {
                    self.give_back(client);
                    return Ok(v);
                }
                Err(e) if is_disconnect(&e) && Instant::now() < deadline => {
                    drop(client);
                    retry = true;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) if is_disconnect(&e) => {
                    return Err(Error::Unreachable {
                        url: self.url.display().to_string(),
                        source: e,
                    });
                }
                Err(e) => {
                    self.give_back(client);
                    return Err(Error::Query {
                        url: self.url.display().to_string(),
                        context: context(),
                        source: e,
                    });
                }
            }
        }
    }

    fn corrupt(&self, run_id: &str, what: String, source: serde_json::Error) -> Error {
        Error::Corrupt {
            url: self.url.display().to_string(),
            run_id: run_id.to_string(),
            what,
            source,
        }
    }
}

/// Wakes a worker when tasks may have become ready (see
/// [`PgStore::listen`]). Dropping it closes its connection.
#[derive(Debug)]
pub struct Listener {
    notify: Arc<tokio::sync::Notify>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Listener {
    /// Resolves at the next notification (or at once when one came since
    /// the last call: a wake-up is never lost between two waits).
    pub async fn ready(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// One listening connection, until it breaks: `LISTEN ctx_ready`, then a
/// wake-up per notification.
async fn listen_once(shared: &Shared, notify: &tokio::sync::Notify) -> Result<(), PgError> {
    let (client, mut connection) = shared.url.config.connect(shared.tls.clone()).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        // Polling for messages also drives the client's own statements.
        while let Some(Ok(m)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let tokio_postgres::AsyncMessage::Notification(_) = m
                && tx.send(()).is_err()
            {
                break;
            }
        }
    });
    let listening = client.batch_execute("LISTEN ctx_ready").await;
    if listening.is_ok() {
        // Whatever became ready while this connection was not listening.
        notify.notify_one();
        while rx.recv().await.is_some() {
            notify.notify_one();
        }
    }
    driver.abort();
    drop(client);
    listening
}

/// A run id: `YYYYMMDDTHHMMSS.mmmZ-xxxxxxxx` (UTC time, 32 random bits),
/// the same shape as the SQLite store's, so ids sort by creation time.
fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let mut b = [0u8; 4];
    // The time part alone is unique enough for a retry on a collision; a
    // failing RNG leaves the suffix zero and the primary key catches it.
    let _ = getrandom::fill(&mut b);
    format!(
        "{}-{:08x}",
        now.format("%Y%m%dT%H%M%S%.3fZ"),
        u32::from_be_bytes(b)
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

const TERMINAL: &str = "('completed','failed','skipped')";

/// Wakes the workers listening on `ctx_ready` (at commit) with the run id
/// as payload: a run registered or resumed, a task released.
const NOTIFY_READY: &str = "SELECT pg_notify('ctx_ready', $1)::text";

impl PgStore {
    /// Connects to `url`, checks that the database is a ctx store of a
    /// version this build knows (or empty), and applies missing
    /// migrations. Fails at once, without retrying, when the server cannot
    /// be reached or refuses the credentials.
    pub fn open(url: &StoreUrl, options: StoreOptions) -> Result<PgStore> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ctx-store-postgres")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime(e.to_string()))?;
        let store = PgStore {
            shared: Arc::new(Shared {
                url: url.clone(),
                tls: tls_config(),
                pool: Mutex::new(Vec::new()),
                options,
                round_trips: AtomicU64::new(0),
            }),
            rt: Arc::new(Runtime(Some(rt))),
            engine: None,
        };
        let shared = Arc::clone(&store.shared);
        store.blocking(async move { migrate(&shared).await })?;
        Ok(store)
    }

    /// This store with its claims recording `engine` as the engine label
    /// of the results they produce, which a resume compares with its own
    /// (a shared run is executed by workers whose engines may differ from
    /// the `ctx run` that registered it). Claims of a store without one
    /// record nothing, and their results read as the run's label.
    #[must_use]
    pub fn with_engine(mut self, engine: &str) -> PgStore {
        self.engine = Some(Arc::from(engine));
        self
    }

    /// The URL without its password.
    pub fn display_url(&self) -> &str {
        self.shared.url.display()
    }

    /// Statements sent so far by this store and its clones (each is one
    /// round trip; a transaction counts each of its statements).
    pub fn round_trips(&self) -> u64 {
        self.shared.round_trips.load(Ordering::Relaxed)
    }

    /// Listens for tasks becoming ready: registrations, resumes, releases,
    /// and commits that bring a dependent's ready counter to zero each send
    /// a `NOTIFY ctx_ready` in their transaction, so a waiting worker wakes
    /// at the commit instead of at its next poll. The listener holds a
    /// connection of its own (outside the pool) and reconnects, with a
    /// wake-up, when it breaks: a notification sent while it was away is
    /// covered by that wake-up. Leases that lapse send nothing (no
    /// statement runs when they do), so workers keep polling as well.
    pub fn listen(&self) -> Listener {
        let notify = Arc::new(tokio::sync::Notify::new());
        let task = self.rt.handle().map(|h| {
            let (shared, notify) = (Arc::clone(&self.shared), Arc::clone(&notify));
            h.spawn(async move {
                loop {
                    let _ = listen_once(&shared, &notify).await;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        });
        Listener { notify, task }
    }

    /// Runs `fut` on the store's runtime and waits for it on this thread.
    pub(crate) fn blocking<T, Fut>(&self, fut: Fut) -> Result<T>
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let Some(handle) = self.rt.handle() else {
            return Err(Error::Runtime("stopped".into()));
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| Error::Runtime("stopped before answering".into()))?
    }

    /// Runs `fut` on the store's runtime and awaits it from any runtime.
    async fn call<T, Fut>(&self, fut: Fut) -> Result<T>
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let Some(handle) = self.rt.handle() else {
            return Err(Error::Runtime("stopped".into()));
        };
        handle
            .spawn(fut)
            .await
            .map_err(|e| Error::Runtime(e.to_string()))?
    }

    /// Records a new run: its plan, one row per task (ready when it has no
    /// dependencies) and its edges, in one transaction. Returns its id.
    pub async fn register_run(&self, run: &RegisterRun<'_>) -> Result<String> {
        let plan_json = serde_json::to_string(run.plan)
            .map_err(|e| self.shared.corrupt("(new)", "the plan".into(), e))?;
        let plan_hash = hex(&Sha256::digest(plan_json.as_bytes()));
        let TaskRows {
            ids,
            idx,
            deps,
            prio,
            edge_from,
            edge_to,
            count,
        } = TaskRows::of(run.plan, run.priorities);
        let engine = run.engine.to_string();
        let source = run.plan_source.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let run_id = new_run_id();
            let rid = run_id.clone();
            let window = shared.options.reconnect_window;
            shared
                .with(&|| format!("registering run `{rid}`"), 6, window, |mut c, _| {
                    let (run_id, plan_json, plan_hash, engine, source) = (
                        run_id.clone(),
                        plan_json.clone(),
                        plan_hash.clone(),
                        engine.clone(),
                        source.clone(),
                    );
                    let (ids, idx, deps, prio, ef, et) = (
                        ids.clone(),
                        idx.clone(),
                        deps.clone(),
                        prio.clone(),
                        edge_from.clone(),
                        edge_to.clone(),
                    );
                    async move {
                        let r = async {
                            let tx = c.transaction().await?;
                            tx.execute(
                                "INSERT INTO ctx_runs (run_id, plan_json, plan_hash, plan_source, engine, ctx_version, task_count, open)
                                 VALUES ($1, $2, $3, $4, $5, $6, $7, $7 > 0)",
                                &[&run_id, &plan_json, &plan_hash, &source, &engine, &env!("CARGO_PKG_VERSION"), &count],
                            )
                            .await?;
                            tx.execute(
                                "INSERT INTO ctx_tasks (run_id, task_id, idx, status, pending_deps, priority)
                                 SELECT $1, t.id, t.idx, 'pending', t.deps, t.prio
                                   FROM unnest($2::text[], $3::int[], $4::int[], $5::bigint[]) AS t(id, idx, deps, prio)",
                                &[&run_id, &ids, &idx, &deps, &prio],
                            )
                            .await?;
                            tx.execute(
                                "INSERT INTO ctx_edges (run_id, depends_on, task_id)
                                 SELECT $1, e.f, e.t FROM unnest($2::text[], $3::text[]) AS e(f, t)
                                 ON CONFLICT DO NOTHING",
                                &[&run_id, &ef, &et],
                            )
                            .await?;
                            tx.execute(NOTIFY_READY, &[&run_id]).await?;
                            tx.commit().await
                        }
                        .await;
                        (c, r)
                    }
                })
                .await?;
            Ok(run_id)
        })
        .await
    }

    /// Claims the ready task with the longest remaining path, in `run` or
    /// in any open run: a `pending` task whose dependencies all completed,
    /// or an `in_progress` one whose lease has lapsed (its worker died).
    /// `FOR UPDATE SKIP LOCKED` lets concurrent workers pass over rows
    /// another is claiming, so each claim is one statement and no two
    /// workers get the same task. `None`: nothing is claimable now.
    pub async fn claim(
        &self,
        run: Option<&str>,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<Claim>> {
        let run = run.map(str::to_string);
        let worker = worker.to_string();
        let lease = ms(lease);
        let engine = self.engine.as_deref().map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let row = shared
                .with(&|| "claiming a task".to_string(), 1, window, |c, _| {
                    let (run, worker, engine) = (run.clone(), worker.clone(), engine.clone());
                    async move {
                        let r = c
                            .query_opt(
                                "WITH c AS (
                                   SELECT run_id, task_id FROM ctx_tasks
                                    WHERE ($1::text IS NULL OR run_id = $1) AND pending_deps = 0
                                      AND (status = 'pending' OR (status = 'in_progress' AND lease_until < now()))
                                    ORDER BY priority DESC, run_id, idx
                                    LIMIT 1
                                    FOR UPDATE SKIP LOCKED)
                                 UPDATE ctx_tasks t
                                    SET status = 'in_progress', claimed_by = $2, attempt = t.attempt + 1,
                                        lease_until = now() + $3::float8 * interval '1 millisecond',
                                        started_at = now(), claim_seq = nextval('ctx_claim_seq'),
                                        engine = $4::text
                                   FROM c
                                  WHERE t.run_id = c.run_id AND t.task_id = c.task_id
                                 RETURNING t.run_id, t.task_id, t.attempt",
                                &[&run, &worker, &lease, &engine],
                            )
                            .await;
                        (c, r)
                    }
                })
                .await?;
            Ok(row.map(|r| Claim {
                run_id: r.get(0),
                task_id: r.get(1),
                attempt: r.get(2),
                worker: worker.clone(),
            }))
        })
        .await
    }

    /// Renews `claim`'s lease. `false`: the claim is lost (the lease lapsed
    /// and the task was claimed again, or released); the worker must stop
    /// the task, its result would be refused anyway.
    pub async fn heartbeat(&self, claim: &Claim, lease: Duration) -> Result<bool> {
        let lease = ms(lease);
        self.fenced(
            claim,
            "renewing the lease of",
            "UPDATE ctx_tasks SET lease_until = now() + $5::float8 * interval '1 millisecond'
              WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                AND status = 'in_progress' AND lease_until >= now()",
            Some(lease),
            None,
        )
        .await
    }

    /// Gives `claim` back: the task is `pending` again at once, for any
    /// worker (a worker stopping with SIGTERM releases what it holds).
    pub async fn release(&self, claim: &Claim) -> Result<bool> {
        self.fenced(
            claim,
            "releasing",
            "WITH r AS (
               UPDATE ctx_tasks SET status = 'pending', claimed_by = NULL, lease_until = NULL
                WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                  AND status = 'in_progress'
               RETURNING run_id)
             SELECT pg_notify('ctx_ready', r.run_id)::text FROM r",
            None,
            None,
        )
        .await
    }

    /// Stores the task's `in_progress` result (its exact prompt) under the
    /// claim, for `ctx runs show` while it runs. `false`: the claim is lost.
    pub async fn save_progress(&self, claim: &Claim, result: &TaskExecutionResult) -> Result<bool> {
        let json = serde_json::to_string(result).map_err(|e| {
            self.shared
                .corrupt(&claim.run_id, format!("task `{}`", claim.task_id), e)
        })?;
        self.fenced(
            claim,
            "storing the prompt of",
            "UPDATE ctx_tasks SET result_json = $5
              WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                AND status = 'in_progress' AND lease_until >= now()",
            None,
            Some(json),
        )
        .await
    }

    async fn fenced(
        &self,
        claim: &Claim,
        what: &'static str,
        sql: &'static str,
        lease: Option<f64>,
        text: Option<String>,
    ) -> Result<bool> {
        let claim = claim.clone();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let ctx = || format!("{what} task `{}` of run `{}`", claim.task_id, claim.run_id);
            let n = shared
                .with(&ctx, 1, window, |c, _| {
                    let (claim, text) = (claim.clone(), text.clone());
                    async move {
                        let r = match (lease, text) {
                            (Some(l), _) => {
                                c.execute(
                                    sql,
                                    &[
                                        &claim.run_id,
                                        &claim.task_id,
                                        &claim.attempt,
                                        &claim.worker,
                                        &l,
                                    ],
                                )
                                .await
                            }
                            (None, Some(t)) => {
                                c.execute(
                                    sql,
                                    &[
                                        &claim.run_id,
                                        &claim.task_id,
                                        &claim.attempt,
                                        &claim.worker,
                                        &t,
                                    ],
                                )
                                .await
                            }
                            (None, None) => {
                                c.execute(
                                    sql,
                                    &[&claim.run_id, &claim.task_id, &claim.attempt, &claim.worker],
                                )
                                .await
                            }
                        };
                        (c, r)
                    }
                })
                .await?;
            Ok(n == 1)
        })
        .await
    }

    /// Commits the task's terminal `result` under `claim`, only while the
    /// lease is live and the fencing token matches. In the same statement
    /// (one transaction): a `completed` result decrements the ready counter
    /// of every dependent, which makes the last one's dependents claimable
    /// at the commit that makes its result visible; a failed one marks
    /// `skips` (its transitive dependents, with the reason the executor
    /// gives) `skipped`. A refused result is counted and kept in the
    /// history, never made the task's.
    pub async fn complete(
        &self,
        claim: &Claim,
        result: &TaskExecutionResult,
        skips: &[(String, String)],
    ) -> Result<Commit> {
        let claim = claim.clone();
        let status = result.status.as_str().to_string();
        let json = serde_json::to_string(result).map_err(|e| {
            self.shared
                .corrupt(&claim.run_id, format!("task `{}`", claim.task_id), e)
        })?;
        let mut skip_ids = Vec::with_capacity(skips.len());
        let mut skip_json = Vec::with_capacity(skips.len());
        for (id, reason) in skips {
            let mut r = TaskExecutionResult::new(id, TaskStatus::Skipped);
            r.error = Some(reason.clone());
            skip_ids.push(id.clone());
            skip_json.push(serde_json::to_string(&r).map_err(|e| {
                self.shared
                    .corrupt(&claim.run_id, format!("task `{id}`"), e)
            })?);
        }
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let ctx = || {
                format!(
                    "committing task `{}` of run `{}`",
                    claim.task_id, claim.run_id
                )
            };
            let outcome = shared
                .with(&ctx, 2, window, |c, retry| {
                    let (claim, status, json, skip_ids, skip_json) = (
                        claim.clone(),
                        status.clone(),
                        json.clone(),
                        skip_ids.clone(),
                        skip_json.clone(),
                    );
                    async move {
                        let r = commit_statement(
                            &c, &claim, &status, &json, &skip_ids, &skip_json, retry,
                        )
                        .await;
                        (c, r)
                    }
                })
                .await?;
            Ok(outcome)
        })
        .await
    }

    /// Resumes a run under `reopen.plan` (the stored plan, or a changed
    /// one), applying decisions already taken by
    /// [`ResumePlan::compute`](ctx_store::ResumePlan::compute) over the
    /// run's stored results (see [`PgRunView`](crate::PgRunView)), in one
    /// transaction:
    ///
    /// - the run's plan, its hash, source and engine label become the new
    ///   ones, and it is open again;
    /// - tasks no longer in the plan leave the run's task rows (their
    ///   committed results stay in the attempts history); new tasks get a
    ///   row; every task gets its new plan position and priority;
    /// - the tasks in `reopen.rerun` become `pending` with their latest
    ///   result cleared (the history keeps it) — except, when the plan is
    ///   unchanged, tasks another worker holds under a live lease, which
    ///   are left to it; reused tasks keep their completed result;
    /// - the edges are replaced and every pending task's ready counter is
    ///   recomputed from its dependencies' statuses.
    ///
    /// A changed plan is refused ([`Error::Busy`]) while workers hold
    /// claims in the run under live leases: their results were asked for
    /// under the old plan. Returns how many tasks were made pending.
    pub async fn reopen_run(&self, run_id: &str, reopen: &Reopen<'_>) -> Result<u64> {
        let plan_json = serde_json::to_string(reopen.plan)
            .map_err(|e| self.shared.corrupt(run_id, "the plan".into(), e))?;
        let plan_hash = hex(&Sha256::digest(plan_json.as_bytes()));
        let rows = TaskRows::of(reopen.plan, reopen.priorities);
        let rerun: Vec<String> = reopen.rerun.to_vec();
        let engine = reopen.engine.to_string();
        let source = reopen.plan_source.map(str::to_string);
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let rid = run_id.clone();
            let found = shared
                .with(&|| format!("resuming run `{rid}`"), 15, window, |mut c, _| {
                    let (run_id, plan_json, plan_hash, engine, source, rows, rerun) = (
                        run_id.clone(),
                        plan_json.clone(),
                        plan_hash.clone(),
                        engine.clone(),
                        source.clone(),
                        rows.clone(),
                        rerun.clone(),
                    );
                    async move {
                        let r = async {
                            let tx = c.transaction().await?;
                            let old = tx
                                .query_opt(
                                    "SELECT plan_hash, plan_json, engine FROM ctx_runs WHERE run_id = $1 FOR UPDATE",
                                    &[&run_id],
                                )
                                .await?;
                            let Some(old) = old else {
                                return Ok(Reopened::NoRun);
                            };
                            let same_plan = old.get::<_, String>(0) == plan_hash;
                            let old_engine: String = old.get(2);
                            // The old plan's fingerprints of the tasks the
                            // new plan drops: what their results were
                            // produced under.
                            let old_plan = match serde_json::from_str::<Plan>(&old.get::<_, String>(1)) {
                                Ok(p) => p,
                                Err(e) => return Ok(Reopened::BadPlan(e)),
                            };
                            let dropped = Dropped::of(&old_plan, &rows.ids);
                            let live: i64 = tx
                                .query_one(
                                    "SELECT count(*) FROM ctx_tasks WHERE run_id = $1
                                        AND status = 'in_progress' AND lease_until >= now()",
                                    &[&run_id],
                                )
                                .await?
                                .get(0);
                            if !same_plan && live > 0 {
                                return Ok(Reopened::Busy(live));
                            }
                            tx.execute(
                                "UPDATE ctx_runs SET plan_json = $2, plan_hash = $3,
                                        plan_source = coalesce($4, plan_source), engine = $5,
                                        task_count = $6, finished_at = NULL
                                  WHERE run_id = $1",
                                &[&run_id, &plan_json, &plan_hash, &source, &engine, &rows.count],
                            )
                            .await?;
                            tx.execute(
                                "INSERT INTO ctx_dropped (run_id, task_id, status, result_json, engine,
                                        inputs_hash, model, params_hash, claim_seq, started_at, finished_at)
                                 SELECT t.run_id, t.task_id, t.status, t.result_json, coalesce(t.engine, $6),
                                        f.inputs, f.model, f.params, t.claim_seq, t.started_at, t.finished_at
                                   FROM ctx_tasks t
                                   JOIN unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS f(id, inputs, model, params)
                                     ON f.id = t.task_id
                                  WHERE t.run_id = $1 AND t.status <> 'pending' AND t.result_json IS NOT NULL
                                 ON CONFLICT (run_id, task_id) DO UPDATE SET
                                        status = excluded.status, result_json = excluded.result_json,
                                        engine = excluded.engine, inputs_hash = excluded.inputs_hash,
                                        model = excluded.model, params_hash = excluded.params_hash,
                                        claim_seq = excluded.claim_seq, started_at = excluded.started_at,
                                        finished_at = excluded.finished_at",
                                &[&run_id, &dropped.ids, &dropped.inputs, &dropped.model, &dropped.params, &old_engine],
                            )
                            .await?;
                            tx.execute(
                                "DELETE FROM ctx_tasks WHERE run_id = $1 AND task_id <> ALL($2::text[])",
                                &[&run_id, &rows.ids],
                            )
                            .await?;
                            // A task the plan brings back starts from its
                            // kept result (reused if unchanged, else reset
                            // below with the other re-runs).
                            tx.execute(
                                "INSERT INTO ctx_tasks (run_id, task_id, idx, status, pending_deps, priority,
                                        result_json, claim_seq, started_at, finished_at, engine)
                                 SELECT $1, t.id, t.idx, coalesce(d.status, 'pending'), t.deps, t.prio,
                                        d.result_json, d.claim_seq, d.started_at, d.finished_at, d.engine
                                   FROM unnest($2::text[], $3::int[], $4::int[], $5::bigint[]) AS t(id, idx, deps, prio)
                                   LEFT JOIN ctx_dropped d ON d.run_id = $1 AND d.task_id = t.id
                                 ON CONFLICT (run_id, task_id)
                                 DO UPDATE SET idx = excluded.idx, priority = excluded.priority",
                                &[&run_id, &rows.ids, &rows.idx, &rows.deps, &rows.prio],
                            )
                            .await?;
                            tx.execute(
                                "DELETE FROM ctx_dropped WHERE run_id = $1 AND task_id = ANY($2::text[])",
                                &[&run_id, &rows.ids],
                            )
                            .await?;
                            let n = tx
                                .execute(
                                    "UPDATE ctx_tasks SET status = 'pending', result_json = NULL,
                                            claimed_by = NULL, lease_until = NULL, finished_at = NULL,
                                            engine = NULL
                                      WHERE run_id = $1 AND task_id = ANY($2::text[])
                                        AND NOT (status = 'in_progress' AND lease_until >= now())",
                                    &[&run_id, &rerun],
                                )
                                .await?;
                            tx.execute("DELETE FROM ctx_edges WHERE run_id = $1", &[&run_id])
                                .await?;
                            tx.execute(
                                "INSERT INTO ctx_edges (run_id, depends_on, task_id)
                                 SELECT $1, e.f, e.t FROM unnest($2::text[], $3::text[]) AS e(f, t)
                                 ON CONFLICT DO NOTHING",
                                &[&run_id, &rows.edge_from, &rows.edge_to],
                            )
                            .await?;
                            tx.execute(
                                "UPDATE ctx_tasks t SET pending_deps = (
                                     SELECT count(*) FROM ctx_edges e
                                       JOIN ctx_tasks d ON d.run_id = e.run_id AND d.task_id = e.depends_on
                                      WHERE e.run_id = $1 AND e.task_id = t.task_id AND d.status <> 'completed')
                                  WHERE t.run_id = $1 AND t.status = 'pending'",
                                &[&run_id],
                            )
                            .await?;
                            tx.execute(
                                &format!(
                                    "UPDATE ctx_runs SET open = o.open,
                                            finished_at = CASE WHEN o.open THEN NULL ELSE now() END
                                       FROM (SELECT EXISTS (SELECT 1 FROM ctx_tasks
                                              WHERE run_id = $1 AND status NOT IN {TERMINAL}) AS open) o
                                      WHERE run_id = $1"
                                ),
                                &[&run_id],
                            )
                            .await?;
                            tx.execute(NOTIFY_READY, &[&run_id]).await?;
                            tx.commit().await?;
                            Ok(Reopened::Done(n))
                        }
                        .await;
                        (c, r)
                    }
                })
                .await?;
            match found {
                Reopened::Done(n) => Ok(n),
                Reopened::NoRun => Err(Error::NoRun {
                    url: shared.url.display().to_string(),
                    run_id: rid.clone(),
                }),
                Reopened::BadPlan(e) => Err(shared.corrupt(&rid, "the plan".into(), e)),
                Reopened::Busy(live) => Err(Error::Busy {
                    url: shared.url.display().to_string(),
                    run_id: rid.clone(),
                    claimed: live,
                }),
            }
        })
        .await
    }

    /// Removes the runs beyond the newest `keep` (by registration time)
    /// that are closed, with their tasks, edges and history, in one
    /// statement; open runs (tasks remain for workers) are removed only
    /// with `force`. Workers never call this: a run's data is deleted only
    /// by `ctx runs gc`.
    pub async fn gc(&self, keep: usize, force: bool) -> Result<GcReport> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let rows = shared
                .with(&|| "removing old runs".into(), 1, window, |c, _| async move {
                    let r = c
                        .query(
                            "WITH ranked AS (
                               SELECT run_id, open, created_at,
                                      row_number() OVER (ORDER BY created_at DESC, run_id DESC) AS n
                                 FROM ctx_runs),
                             gone AS (
                               DELETE FROM ctx_runs r USING ranked k
                                WHERE r.run_id = k.run_id AND k.n > $1 AND (NOT r.open OR $2)
                                RETURNING r.run_id)
                             SELECT k.run_id, k.open, k.n > $1, EXISTS (SELECT 1 FROM gone g WHERE g.run_id = k.run_id)
                               FROM ranked k ORDER BY k.created_at, k.run_id",
                            &[&keep, &force],
                        )
                        .await;
                    (c, r)
                })
                .await?;
            let mut report = GcReport::default();
            for r in &rows {
                let id: String = r.get(0);
                match (r.get::<_, bool>(3), r.get::<_, bool>(2)) {
                    (true, _) => report.removed.push(id),
                    (false, true) => report.open.push(id),
                    (false, false) => report.kept.push(id),
                }
            }
            Ok(report)
        })
        .await
    }

    /// The kept results of tasks that resumes dropped from `run_id`'s
    /// plan, by task id.
    pub async fn dropped(&self, run_id: &str) -> Result<Vec<DroppedRow>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let rid = run_id.clone();
            let rows = shared
                .with(
                    &|| format!("reading the dropped tasks of run `{rid}`"),
                    1,
                    window,
                    |c, _| {
                        let run_id = run_id.clone();
                        async move {
                            let r = c
                                .query(
                                    "SELECT task_id, status, result_json, engine, inputs_hash, model, params_hash, claim_seq,
                                            to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                                            to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                                       FROM ctx_dropped WHERE run_id = $1 ORDER BY task_id",
                                    &[&run_id],
                                )
                                .await;
                            (c, r)
                        }
                    },
                )
                .await?;
            rows.iter()
                .map(|r| {
                    let task_id: String = r.get(0);
                    let text: String = r.get(2);
                    let result = serde_json::from_str(&text).map_err(|e| {
                        shared.corrupt(&run_id, format!("dropped task `{task_id}`"), e)
                    })?;
                    Ok(DroppedRow {
                        status: parse_status(&r.get::<_, String>(1)),
                        task_id,
                        result,
                        engine: r.get(3),
                        fingerprint: ctx_store::TaskFingerprint {
                            inputs_hash: r.get(4),
                            model: r.get(5),
                            params_hash: r.get(6),
                        },
                        claim_seq: r.get(7),
                        started_at: r.get(8),
                        finished_at: r.get(9),
                    })
                })
                .collect()
        })
        .await
    }

    /// Every terminal result committed or refused for `run_id` (of
    /// `task_id` only, when given), in the order they were recorded.
    pub async fn attempts(&self, run_id: &str, task_id: Option<&str>) -> Result<Vec<AttemptRow>> {
        let run_id = run_id.to_string();
        let task_id = task_id.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let rid = run_id.clone();
            let rows = shared
                .with(
                    &|| format!("reading the history of run `{rid}`"),
                    1,
                    window,
                    |c, _| {
                        let (run_id, task_id) = (run_id.clone(), task_id.clone());
                        async move {
                            let r = c
                                .query(
                                    "SELECT seq, task_id, attempt, worker, committed, result_json,
                                            to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                                       FROM ctx_attempts
                                      WHERE run_id = $1 AND ($2::text IS NULL OR task_id = $2)
                                      ORDER BY task_id, seq",
                                    &[&run_id, &task_id],
                                )
                                .await;
                            (c, r)
                        }
                    },
                )
                .await?;
            rows.iter()
                .map(|r| {
                    let task_id: String = r.get(1);
                    let text: String = r.get(5);
                    let result = serde_json::from_str(&text).map_err(|e| {
                        shared.corrupt(&run_id, format!("task `{task_id}` (history)"), e)
                    })?;
                    Ok(AttemptRow {
                        seq: r.get(0),
                        task_id,
                        attempt: r.get(2),
                        worker: r.get(3),
                        committed: r.get(4),
                        result,
                        recorded_at: r.get(6),
                    })
                })
                .collect()
        })
        .await
    }

    /// The hash [`register_run`](Self::register_run) stores for `plan`:
    /// SHA-256 of its JSON as stored.
    pub fn plan_hash(plan: &Plan) -> Option<String> {
        serde_json::to_string(plan)
            .ok()
            .map(|j| hex(&Sha256::digest(j.as_bytes())))
    }

    /// Whether `run` (or, without one, any run) still has tasks that are
    /// not terminal.
    pub async fn has_open_runs(&self, run: Option<&str>) -> Result<bool> {
        let run = run.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            shared
                .with(&|| "listing open runs".into(), 1, window, |c, _| {
                    let run = run.clone();
                    async move {
                        let r = c
                            .query_one(
                                "SELECT EXISTS (SELECT 1 FROM ctx_runs WHERE open AND ($1::text IS NULL OR run_id = $1))",
                                &[&run],
                            )
                            .await
                            .map(|row| row.get::<_, bool>(0));
                        (c, r)
                    }
                })
                .await
        })
        .await
    }

    /// The plan stored for `run_id`.
    pub async fn plan(&self, run_id: &str) -> Result<Plan> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let window = shared.options.reconnect_window;
            let rid = run_id.clone();
            let row = shared
                .with(
                    &|| format!("reading the plan of run `{rid}`"),
                    1,
                    window,
                    |c, _| {
                        let run_id = run_id.clone();
                        async move {
                            let r = c
                                .query_opt(
                                    "SELECT plan_json FROM ctx_runs WHERE run_id = $1",
                                    &[&run_id],
                                )
                                .await;
                            (c, r)
                        }
                    },
                )
                .await?;
            let Some(row) = row else {
                return Err(Error::NoRun {
                    url: shared.url.display().to_string(),
                    run_id,
                });
            };
            let text: String = row.get(0);
            serde_json::from_str(&text).map_err(|e| shared.corrupt(&run_id, "the plan".into(), e))
        })
        .await
    }

    /// Every run, newest first (or the one `run_id`), with its counts.
    pub async fn runs(&self, run_id: Option<&str>) -> Result<Vec<RunInfo>> {
        let run_id = run_id.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        let want = run_id.clone();
        let runs = self
            .call(async move {
                let window = shared.options.reconnect_window;
                let rows = shared
                    .with(&|| "listing runs".into(), 1, window, |c, _| {
                        let run_id = run_id.clone();
                        async move {
                            let r = c
                                .query(
                                    "SELECT r.run_id,
                                            to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                                            to_char(r.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                                            r.open, r.engine, r.plan_source, r.plan_hash, r.task_count, r.late_commits,
                                            count(*) FILTER (WHERE t.status = 'pending'),
                                            count(*) FILTER (WHERE t.status = 'in_progress'),
                                            count(*) FILTER (WHERE t.status = 'completed'),
                                            count(*) FILTER (WHERE t.status = 'failed'),
                                            count(*) FILTER (WHERE t.status = 'skipped'),
                                            coalesce(sum(greatest(t.attempt - 1, 0)), 0)::bigint
                                       FROM ctx_runs r LEFT JOIN ctx_tasks t ON t.run_id = r.run_id
                                      WHERE $1::text IS NULL OR r.run_id = $1
                                      GROUP BY r.run_id
                                      ORDER BY r.created_at DESC, r.run_id DESC",
                                    &[&run_id],
                                )
                                .await;
                            (c, r)
                        }
                    })
                    .await?;
                let count = |r: &tokio_postgres::Row, i: usize| {
                    usize::try_from(r.get::<_, i64>(i)).unwrap_or(0)
                };
                Ok(rows
                    .iter()
                    .map(|r| RunInfo {
                        run_id: r.get(0),
                        created_at: r.get(1),
                        finished_at: r.get(2),
                        open: r.get(3),
                        engine: r.get(4),
                        plan_source: r.get(5),
                        plan_hash: r.get(6),
                        task_count: usize::try_from(r.get::<_, i32>(7)).unwrap_or(0),
                        late_commits: r.get(8),
                        counts: Counts {
                            pending: count(r, 9),
                            in_progress: count(r, 10),
                            completed: count(r, 11),
                            failed: count(r, 12),
                            skipped: count(r, 13),
                        },
                        reclaims: r.get(14),
                    })
                    .collect::<Vec<_>>())
            })
            .await?;
        if let Some(id) = want
            && runs.is_empty()
        {
            return Err(Error::NoRun {
                url: self.display_url().to_string(),
                run_id: id,
            });
        }
        Ok(runs)
    }

    /// Every task of `run_id`, in plan order, with its latest result.
    pub async fn tasks(&self, run_id: &str) -> Result<Vec<TaskRow>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move { tasks(&shared, &run_id).await })
            .await
    }

    /// An [`ExecutionStore`](ctx_store::ExecutionStore) over one run, for
    /// one writer (see [`RunStore`](crate::RunStore)).
    pub fn run_store(&self, run_id: &str) -> crate::RunStore {
        crate::RunStore::new(self.clone(), run_id.to_string())
    }

    pub(crate) fn blocking_results(
        &self,
        run_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<TaskExecutionResult>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.blocking(async move { results(&shared, &run_id, ids).await })
    }

    pub(crate) fn blocking_store(&self, run_id: &str, result: &TaskExecutionResult) -> Result<()> {
        let run_id = run_id.to_string();
        let status = result.status.as_str().to_string();
        let task_id = result.task_id.clone();
        let json = serde_json::to_string(result)
            .map_err(|e| self.shared.corrupt(&run_id, format!("task `{task_id}`"), e))?;
        let shared = Arc::clone(&self.shared);
        self.blocking(async move {
            let window = shared.options.reconnect_window;
            let ctx = || format!("storing task `{task_id}` of run `{run_id}`");
            shared
                .with(&ctx, 2, window, |c, _| {
                    let (run_id, task_id, status, json) = (
                        run_id.clone(),
                        task_id.clone(),
                        status.clone(),
                        json.clone(),
                    );
                    async move {
                        let r = unfenced_store(&c, &run_id, &task_id, &status, &json).await;
                        (c, r)
                    }
                })
                .await
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

async fn migrate(shared: &Shared) -> Result<()> {
    let url = shared.url.display().to_string();
    // Opening does not wait for a server that is not there.
    let mut client = shared.client(Instant::now()).await?;
    let q = |context: &str, source: PgError| {
        if is_disconnect(&source) {
            Error::Unreachable {
                url: url.clone(),
                source,
            }
        } else {
            Error::Query {
                url: url.clone(),
                context: context.to_string(),
                source,
            }
        }
    };
    let tx = client
        .transaction()
        .await
        .map_err(|e| q("starting the schema check", e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| q("taking the migration lock", e))?;
    let tables: Vec<String> = tx
        .query(
            "SELECT table_name::text FROM information_schema.tables
              WHERE table_schema = current_schema() ORDER BY 1",
            &[],
        )
        .await
        .map_err(|e| q("listing tables", e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let current = if tables.iter().any(|t| t == "ctx_meta") {
        let rows = tx
            .query("SELECT application, schema_version FROM ctx_meta", &[])
            .await
            .map_err(|e| q("reading ctx_meta", e))?;
        match rows.as_slice() {
            [row] => {
                let app: String = row.get(0);
                if app != APPLICATION {
                    return Err(Error::Foreign {
                        url,
                        reason: format!("its ctx_meta names the application `{app}`"),
                    });
                }
                row.get::<_, i32>(1)
            }
            _ => {
                return Err(Error::Foreign {
                    url,
                    reason: format!("its ctx_meta has {} rows, not one", rows.len()),
                });
            }
        }
    } else if tables.is_empty() {
        0
    } else {
        let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
        return Err(Error::Foreign {
            url,
            reason: format!(
                "it has {} table(s) ({}{}) and no ctx_meta",
                tables.len(),
                shown.join(", "),
                if tables.len() > 5 { ", ..." } else { "" }
            ),
        });
    };
    if current > SCHEMA_VERSION {
        return Err(Error::NewerSchema {
            url,
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > current) {
        tx.batch_execute(m.sql)
            .await
            .map_err(|e| q(&format!("migrating to schema version {}", m.version), e))?;
    }
    if current == 0 {
        tx.execute(
            "INSERT INTO ctx_meta (application, schema_version) VALUES ($1, $2)",
            &[&APPLICATION, &SCHEMA_VERSION],
        )
        .await
        .map_err(|e| q("writing ctx_meta", e))?;
    } else if current < SCHEMA_VERSION {
        tx.execute(
            "UPDATE ctx_meta SET schema_version = $1",
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(|e| q("writing ctx_meta", e))?;
    }
    tx.commit()
        .await
        .map_err(|e| q("committing the schema", e))?;
    shared.give_back(client);
    Ok(())
}

/// The commit of a terminal result under a claim: one statement, so one
/// transaction and one round trip, plus one to close the run when this was
/// its last task.
async fn commit_statement(
    c: &Client,
    claim: &Claim,
    status: &str,
    json: &str,
    skip_ids: &[String],
    skip_json: &[String],
    retry: bool,
) -> Result<Commit, PgError> {
    let row = c
        .query_one(
            "WITH done AS (
               UPDATE ctx_tasks SET status = $5, result_json = $6, claimed_by = NULL,
                      lease_until = NULL, finished_at = now()
                WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                  AND status = 'in_progress' AND lease_until >= now()
                RETURNING task_id),
             hist AS (
               INSERT INTO ctx_attempts (run_id, task_id, attempt, worker, status, committed, result_json)
               SELECT $1, $2, $3, $4, $5, true, $6 FROM done),
             released AS (
               UPDATE ctx_tasks t SET pending_deps = t.pending_deps - 1
                 FROM ctx_edges e, done
                WHERE $5 = 'completed' AND e.run_id = $1 AND e.depends_on = $2
                  AND t.run_id = $1 AND t.task_id = e.task_id
               RETURNING t.pending_deps),
             skipped AS (
               UPDATE ctx_tasks t SET status = 'skipped', result_json = s.j, finished_at = now()
                 FROM unnest($7::text[], $8::text[]) AS s(id, j), done
                WHERE $5 <> 'completed' AND t.run_id = $1 AND t.task_id = s.id
                  AND t.status = 'pending')
             SELECT (SELECT count(*) FROM done),
                    -- Idle workers wake when this commit makes a task
                    -- ready (delivered at commit; see `PgStore::listen`).
                    (SELECT pg_notify('ctx_ready', $1)
                      WHERE EXISTS (SELECT 1 FROM released WHERE pending_deps = 0))::text",
            &[
                &claim.run_id,
                &claim.task_id,
                &claim.attempt,
                &claim.worker,
                &status,
                &json,
                &skip_ids,
                &skip_json,
            ],
        )
        .await?;
    let committed = row.get::<_, i64>(0) == 1;
    if !committed && retry {
        // The connection broke around an earlier try of this commit: if it
        // went through, the row holds our attempt's result already.
        let row = c
            .query_opt(
                "SELECT 1 FROM ctx_tasks WHERE run_id = $1 AND task_id = $2 AND attempt = $3
                    AND status = $4 AND result_json = $5",
                &[
                    &claim.run_id,
                    &claim.task_id,
                    &claim.attempt,
                    &status,
                    &json,
                ],
            )
            .await?;
        if row.is_some() {
            close_if_done(c, &claim.run_id).await?;
            return Ok(Commit::Committed);
        }
    }
    if committed {
        close_if_done(c, &claim.run_id).await?;
        Ok(Commit::Committed)
    } else {
        c.execute(
            "WITH late AS (
               INSERT INTO ctx_attempts (run_id, task_id, attempt, worker, status, committed, result_json)
               VALUES ($1, $2, $3, $4, $5, false, $6))
             UPDATE ctx_runs SET late_commits = late_commits + 1 WHERE run_id = $1",
            &[
                &claim.run_id,
                &claim.task_id,
                &claim.attempt,
                &claim.worker,
                &status,
                &json,
            ],
        )
        .await?;
        Ok(Commit::Refused)
    }
}

async fn close_if_done(c: &Client, run_id: &str) -> Result<(), PgError> {
    c.execute(
        &format!(
            "UPDATE ctx_runs SET open = false, finished_at = now()
              WHERE run_id = $1 AND open
                AND NOT EXISTS (SELECT 1 FROM ctx_tasks WHERE run_id = $1 AND status NOT IN {TERMINAL})"
        ),
        &[&run_id],
    )
    .await?;
    Ok(())
}

/// The single-writer path of [`RunStore`](crate::RunStore): the result is
/// the task's whatever its claim; a completion still releases dependents.
async fn unfenced_store(
    c: &Client,
    run_id: &str,
    task_id: &str,
    status: &str,
    json: &str,
) -> Result<(), PgError> {
    c.execute(
        "WITH prev AS (
           SELECT status FROM ctx_tasks WHERE run_id = $1 AND task_id = $2 FOR UPDATE),
         upd AS (
           UPDATE ctx_tasks SET status = $3, result_json = $4, claimed_by = NULL, lease_until = NULL,
                  started_at = CASE WHEN $3 = 'in_progress' THEN now() ELSE started_at END,
                  finished_at = CASE WHEN $3 IN ('completed','failed','skipped') THEN now() END
            WHERE run_id = $1 AND task_id = $2
            RETURNING task_id)
         UPDATE ctx_tasks t SET pending_deps = t.pending_deps - 1
           FROM ctx_edges e, prev, upd
          WHERE $3 = 'completed' AND prev.status <> 'completed'
            AND e.run_id = $1 AND e.depends_on = $2 AND t.run_id = $1 AND t.task_id = e.task_id",
        &[&run_id, &task_id, &status, &json],
    )
    .await?;
    close_if_done(c, run_id).await
}

async fn results(
    shared: &Shared,
    run_id: &str,
    ids: Option<Vec<String>>,
) -> Result<Vec<TaskExecutionResult>> {
    let window = shared.options.reconnect_window;
    let rid = run_id.to_string();
    let rows = shared
        .with(
            &|| format!("reading results of run `{rid}`"),
            1,
            window,
            |c, _| {
                let (run_id, ids) = (rid.clone(), ids.clone());
                async move {
                    let r = c
                        .query(
                            "SELECT task_id, result_json FROM ctx_tasks
                          WHERE run_id = $1 AND result_json IS NOT NULL
                            AND ($2::text[] IS NULL OR task_id = ANY($2))
                          ORDER BY task_id",
                            &[&run_id, &ids],
                        )
                        .await;
                    (c, r)
                }
            },
        )
        .await?;
    rows.iter()
        .map(|r| {
            let id: String = r.get(0);
            let text: String = r.get(1);
            serde_json::from_str(&text)
                .map_err(|e| shared.corrupt(run_id, format!("task `{id}`"), e))
        })
        .collect()
}

async fn tasks(shared: &Shared, run_id: &str) -> Result<Vec<TaskRow>> {
    let window = shared.options.reconnect_window;
    let rid = run_id.to_string();
    let rows = shared
        .with(&|| format!("reading tasks of run `{rid}`"), 1, window, |c, _| {
            let run_id = rid.clone();
            async move {
                let r = c
                    .query(
                        "SELECT task_id, status, attempt, result_json,
                                to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                                to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                                claim_seq, engine
                           FROM ctx_tasks WHERE run_id = $1 ORDER BY idx",
                        &[&run_id],
                    )
                    .await;
                (c, r)
            }
        })
        .await?;
    if rows.is_empty() {
        // A run of no tasks still exists; a missing run is an error.
        let exists = shared
            .with(&|| format!("reading run `{rid}`"), 1, window, |c, _| {
                let run_id = rid.clone();
                async move {
                    let r = c
                        .query_opt("SELECT 1 FROM ctx_runs WHERE run_id = $1", &[&run_id])
                        .await;
                    (c, r)
                }
            })
            .await?;
        if exists.is_none() {
            return Err(Error::NoRun {
                url: shared.url.display().to_string(),
                run_id: run_id.to_string(),
            });
        }
    }
    rows.iter()
        .map(|r| {
            let task_id: String = r.get(0);
            let status: String = r.get(1);
            let json: Option<String> = r.get(3);
            let result = json
                .map(|j| serde_json::from_str::<TaskExecutionResult>(&j))
                .transpose()
                .map_err(|e| shared.corrupt(run_id, format!("task `{task_id}`"), e))?;
            Ok(TaskRow {
                status: parse_status(&status),
                task_id,
                attempt: r.get(2),
                result,
                started_at: r.get(4),
                finished_at: r.get(5),
                claim_seq: r.get(6),
                engine: r.get(7),
            })
        })
        .collect()
}

fn parse_status(s: &str) -> TaskStatus {
    match s {
        "in_progress" => TaskStatus::InProgress,
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "skipped" => TaskStatus::Skipped,
        _ => TaskStatus::Pending,
    }
}
