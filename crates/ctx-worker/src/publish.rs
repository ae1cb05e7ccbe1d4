//! A shared run's publishing, as a run directory's is ctx-run's: the
//! backups of what a publish replaces kept in the database
//! ([`PgBackups`]), a stored run published later ([`publish`]) and its
//! publishes undone ([`unpublish`]), through ctx-run's functions of any
//! store (`publish_results`, `undo`), recorded in `ctx_publishes`.
//!
//! These are blocking calls (they write files and wait for the store):
//! call them off the runtime's workers.

use std::path::Path;

use ctx_run::publish::{BackupError, Backups, Published};
use ctx_run::unpublish::UnpublishError;
use ctx_store::RunHistory;
use ctx_store_postgres::{Error as PgError, PgStore};

/// Why a shared run could not be published or unpublished.
#[derive(Debug, thiserror::Error)]
pub enum SharedPublishError {
    /// The store failed or refused (unreachable, a run that does not
    /// exist).
    #[error(transparent)]
    Store(#[from] PgError),
    /// The run's plan or results could not be read.
    #[error(transparent)]
    Read(#[from] ctx_store::StoreError),
    /// The run is still open: tasks are left for workers, so its outputs
    /// are not final (a local run being executed is refused by its lock
    /// alike).
    #[error("run {run} is still open (tasks are left for workers): publish it once it is complete")]
    Open {
        /// The run.
        run: String,
    },
    /// The publish or the undo refused or failed (ctx-run's reasons).
    #[error(transparent)]
    Publish(#[from] UnpublishError),
}

/// A shared run's backups: rows of `ctx_publish_backups`, by digest.
pub struct PgBackups {
    store: PgStore,
    run_id: String,
}

impl PgBackups {
    /// The backups of the run `run_id` in `store`.
    pub fn new(store: PgStore, run_id: &str) -> PgBackups {
        PgBackups {
            store,
            run_id: run_id.to_string(),
        }
    }

    fn error(&self, sha256: &str, e: PgError) -> BackupError {
        BackupError {
            location: self.location(sha256),
            detail: e.to_string(),
        }
    }
}

impl Backups for PgBackups {
    fn keep(&self, sha256: &str, bytes: &[u8]) -> Result<(), BackupError> {
        let (store, run, sha, bytes) = (
            self.store.clone(),
            self.run_id.clone(),
            sha256.to_string(),
            bytes.to_vec(),
        );
        self.store
            .blocking(async move { store.keep_backup(&run, &sha, bytes).await })
            .map_err(|e| self.error(sha256, e))
    }

    fn read(&self, sha256: &str) -> Result<Option<Vec<u8>>, BackupError> {
        let (store, run, sha) = (self.store.clone(), self.run_id.clone(), sha256.to_string());
        self.store
            .blocking(async move { store.read_backup(&run, &sha).await })
            .map_err(|e| self.error(sha256, e))
    }

    fn location(&self, sha256: &str) -> String {
        format!(
            "{} (ctx_publish_backups, run {}, {sha256})",
            self.store.display_url(),
            self.run_id
        )
    }
}

/// `ctx runs publish RUN --store URL`: the completed outputs of the
/// shared run `run_id` published under `root`, recorded with the run.
pub fn publish(
    url: &str,
    run_id: &str,
    root: &Path,
) -> Result<ctx_run::unpublish::PublishedRun, SharedPublishError> {
    let store = crate::runs::open(url)?;
    let view = store.view(run_id)?;
    if view.header()?.state == ctx_store::RunState::Running {
        return Err(SharedPublishError::Open {
            run: run_id.to_string(),
        });
    }
    let results: Vec<_> = view.latest()?.into_iter().map(|r| r.result).collect();
    let backups = PgBackups::new(store.clone(), run_id);
    let done = ctx_run::unpublish::publish_results(
        run_id,
        &view.plan()?,
        &results,
        &view.decisions()?,
        root,
        &backups,
    )?;
    if !done.written.is_empty() {
        record(&store, run_id, &done.written, &[])?;
    }
    Ok(done)
}

/// `ctx runs unpublish RUN --store URL`: the shared run's publishes in
/// effect undone, newest first, by ctx-run's rules; the undo recorded.
pub fn unpublish(
    url: &str,
    run_id: &str,
    force: bool,
) -> Result<Vec<Published>, SharedPublishError> {
    let store = crate::runs::open(url)?;
    let view = store.view(run_id)?;
    let events = view.publish_events()?;
    let backups = PgBackups::new(store.clone(), run_id);
    let Some(undone) = ctx_run::unpublish::undo(run_id, events, &backups, force)? else {
        return Ok(Vec::new());
    };
    record(&store, run_id, &undone.lines, &undone.seqs)?;
    Ok(undone.lines)
}

/// Records a publish or an undo of `run_id` (waiting for the store).
pub(crate) fn record(
    store: &PgStore,
    run_id: &str,
    files: &[Published],
    undone: &[i64],
) -> Result<i64, PgError> {
    let (s, run, files, undone) = (
        store.clone(),
        run_id.to_string(),
        files.to_vec(),
        undone.to_vec(),
    );
    store.blocking(async move { s.record_publish(&run, &files, &undone).await })
}
