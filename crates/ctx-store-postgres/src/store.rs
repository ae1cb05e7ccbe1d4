//! [`PgStore`]: the handle every operation goes through, and the runtime
//! that drives its connections.
//!
//! The operations live beside it, one file per job: [`runs`](crate::runs)
//! (register, resume, gc), [`claims`](crate::claims) (the claim protocol
//! and result writes), [`reads`](crate::reads) (listings and history);
//! the pool is [`connection`](crate::connection), the schema check
//! [`schema`](crate::schema).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::connection::Shared;
use crate::error::{Error, Result};
use crate::url::StoreUrl;

/// How a store behaves when the network or the server goes away.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long a statement keeps trying to reconnect when the connection
    /// breaks (the server restarts, a failover) before it fails. Opening a
    /// store does not wait: an unreachable URL fails at once.
    pub reconnect_window: Duration,
    /// The runtime that drives the connections: the process's own, so a
    /// process runs one (`ctx` hands its). It must be multi-threaded, as
    /// the seam's synchronous calls wait on it from its own tasks; a
    /// current-thread handle is not used. `None`: the store starts a
    /// one-thread runtime of its own, for a program with none.
    pub runtime: Option<tokio::runtime::Handle>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            reconnect_window: Duration::from_secs(60),
            runtime: None,
        }
    }
}

/// The shared PostgreSQL store. Cheap to clone; every clone shares one
/// connection pool.
///
/// The driver is async, the [`ExecutionStore`](ctx_store::ExecutionStore)
/// seam synchronous. The store's statements run on one runtime: the one
/// it is handed ([`StoreOptions::runtime`], the process's), or a small one
/// of its own. Async methods spawn their statement there and await the
/// answer (from any runtime), and the seam's synchronous methods wait for
/// it on the calling thread, as the SQLite store waits for its file; on a
/// worker of a multi-threaded runtime they wait in `block_in_place`, so
/// the runtime's other tasks (the statement among them) move on.
#[derive(Clone)]
pub struct PgStore {
    pub(crate) shared: Arc<Shared>,
    pub(crate) rt: Arc<Runtime>,
    /// The engine label this process's claims record (see
    /// [`PgStore::with_engine`]).
    pub(crate) engine: Option<Arc<str>>,
}

/// The store's runtime: the one it was handed, or its own, which is shut
/// down without waiting when the last clone goes (dropping a runtime
/// inside another one's task would panic).
pub(crate) enum Runtime {
    Handed(tokio::runtime::Handle),
    Own(Option<tokio::runtime::Runtime>),
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Runtime::Own(own) = self
            && let Some(rt) = own.take()
        {
            rt.shutdown_background();
        }
    }
}

impl Runtime {
    /// `handed` when it is multi-threaded, else a one-thread runtime of
    /// the store's own.
    fn new(handed: Option<tokio::runtime::Handle>) -> Result<Runtime> {
        let multi = tokio::runtime::RuntimeFlavor::MultiThread;
        if let Some(h) = handed.filter(|h| h.runtime_flavor() == multi) {
            return Ok(Runtime::Handed(h));
        }
        let own = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ctx-store-postgres")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime(e.to_string()))?;
        Ok(Runtime::Own(Some(own)))
    }

    pub(crate) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        match self {
            Runtime::Handed(h) => Some(h),
            Runtime::Own(own) => own.as_ref().map(tokio::runtime::Runtime::handle),
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.shared.url.display())
            .finish()
    }
}

impl PgStore {
    /// Connects to `url`, checks that the database is a ctx store of a
    /// version this build knows (or empty), and applies missing
    /// migrations. Fails at once, without retrying, when the server cannot
    /// be reached or refuses the credentials.
    pub fn open(url: &StoreUrl, options: StoreOptions) -> Result<PgStore> {
        let rt = Runtime::new(options.runtime.clone())?;
        let store = PgStore {
            shared: Arc::new(Shared::new(url, options)),
            rt: Arc::new(rt),
            engine: None,
        };
        let shared = Arc::clone(&store.shared);
        store.blocking(async move { crate::schema::migrate(&shared).await })?;
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

    /// Runs `fut` on the store's runtime and waits for it on this thread.
    pub fn blocking<T, Fut>(&self, fut: Fut) -> Result<T>
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
        let wait = || rx.recv();
        // On a worker of a multi-threaded runtime (the store's own when it
        // was handed the caller's), waiting would hold a worker the
        // statement may need: hand the worker's other tasks on first. A
        // current-thread runtime cannot, and is never the store's.
        let on_multi = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let answer = if on_multi {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        };
        answer.map_err(|_| Error::Runtime("stopped before answering".into()))?
    }

    /// Runs `fut` on the store's runtime and awaits it from any runtime.
    pub(crate) async fn call<T, Fut>(&self, fut: Fut) -> Result<T>
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

    /// An [`ExecutionStore`](ctx_store::ExecutionStore) over one run, for
    /// one writer (see [`RunStore`](crate::RunStore)).
    pub fn run_store(&self, run_id: &str) -> crate::RunStore {
        crate::RunStore::new(self.clone(), run_id.to_string())
    }
}
