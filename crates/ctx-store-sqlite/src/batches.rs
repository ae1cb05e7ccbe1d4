//! A run's provider batches (`batches` and `batch_requests`, schema 7):
//! the [`BatchLedger`] a `ctx run --batch` session journals in
//! ([`SqliteStore`] implements it, on the session's connection), what a
//! resume takes up ([`BatchLedger::unsettled`]), what `ctx runs show`
//! lists ([`RunView::batches`]) and what `ctx runs cancel` records
//! ([`BatchLog`], without the run's lock: a cancel is for a run whose
//! process may still be waiting on its batches).

use std::path::Path;

use ctx_engine::{
    BatchEntry, BatchLedger, BatchReport, BatchedRequest, JournaledBatch, LedgerError,
};
use ctx_store::RunBatch;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::id::now_rfc3339;
use crate::schema::{self, Access};
use crate::store::{SqliteStore, store_path};
use crate::view::RunView;

/// Milliseconds since the Unix epoch, now.
fn now_unix_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn ledger_error(e: Error) -> LedgerError {
    LedgerError::new(e.to_string())
}

/// Writes `entry` in one transaction on `conn` (`session`: the session
/// that uploaded, for an upload).
fn write(
    conn: &mut Connection,
    path: &Path,
    session: Option<i64>,
    entry: &BatchEntry<'_>,
) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(Error::sql(path))?;
    let now = now_rfc3339();
    match entry {
        BatchEntry::Uploaded {
            file_id,
            model,
            requests,
        } => {
            tx.execute(
                "INSERT INTO batches (file_id, model, session, uploaded_at) VALUES (?1, ?2, ?3, ?4)",
                params![file_id, model, session, now],
            )
            .map_err(Error::sql(path))?;
            for r in *requests {
                tx.execute(
                    "INSERT INTO batch_requests (file_id, custom_id, task_id, attempt, body_sha256,
                         max_output_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        file_id,
                        r.custom_id,
                        r.task_id,
                        r.attempt,
                        r.body_sha256,
                        i64::try_from(r.max_output_bytes).unwrap_or(i64::MAX)
                    ],
                )
                .map_err(Error::sql(path))?;
            }
        }
        BatchEntry::Created { file_id, batch } => {
            tx.execute(
                "UPDATE batches SET batch_id = ?2, created_at = ?3, created_unix_ms = ?4
                 WHERE file_id = ?1",
                params![file_id, batch.id, now, now_unix_ms()],
            )
            .map_err(Error::sql(path))?;
            update_status(&tx, path, batch, &now)?;
        }
        BatchEntry::Status { batch } => update_status(&tx, path, batch, &now)?,
        BatchEntry::Collected { batch_id } => {
            tx.execute(
                "UPDATE batches SET collected_at = ?2 WHERE batch_id = ?1 AND collected_at IS NULL",
                params![batch_id, now],
            )
            .map_err(Error::sql(path))?;
        }
        BatchEntry::FileDeleted { file_id } => {
            tx.execute(
                "UPDATE batches SET file_deleted_at = ?2 WHERE file_id = ?1",
                params![file_id, now],
            )
            .map_err(Error::sql(path))?;
        }
    }
    tx.commit().map_err(Error::sql(path))
}

/// The status and counts of `batch`, and when it ended once its status is
/// final.
fn update_status(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    batch: &BatchReport,
    now: &str,
) -> Result<()> {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    tx.execute(
        "UPDATE batches SET status = ?2, total = ?3, completed = ?4, failed = ?5,
             ended_at = CASE WHEN ?6 THEN COALESCE(ended_at, ?7) ELSE ended_at END
         WHERE batch_id = ?1",
        params![
            batch.id,
            batch.status,
            count(batch.total),
            count(batch.completed),
            count(batch.failed),
            batch.is_final(),
            now
        ],
    )
    .map_err(Error::sql(path))?;
    Ok(())
}

/// The columns [`RunBatch`] and [`JournaledBatch`] are read from.
const BATCH_COLUMNS: &str = "file_id, model, batch_id, status, total, completed, failed, \
     uploaded_at, created_at, created_unix_ms, ended_at, collected_at, file_deleted_at, \
     cancel_requested_at, (SELECT COUNT(*) FROM batch_requests r WHERE r.file_id = b.file_id)";

fn batch_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(RunBatch, Option<i64>)> {
    let count =
        |i: usize| -> rusqlite::Result<u64> { Ok(u64::try_from(r.get::<_, i64>(i)?).unwrap_or(0)) };
    Ok((
        RunBatch {
            input_file_id: r.get(0)?,
            model: r.get(1)?,
            id: r.get(2)?,
            status: r.get(3)?,
            total: count(4)?,
            completed: count(5)?,
            failed: count(6)?,
            uploaded_at: r.get(7)?,
            created_at: r.get(8)?,
            ended_at: r.get(10)?,
            collected_at: r.get(11)?,
            file_deleted_at: r.get(12)?,
            cancel_requested_at: r.get(13)?,
            requests: count(14)?,
        },
        r.get(9)?,
    ))
}

/// The batches of the run on `conn` that `filter` (an SQL condition)
/// keeps, oldest first, with each one's creation time in milliseconds.
fn read_batches(
    conn: &Connection,
    path: &Path,
    filter: &str,
) -> Result<Vec<(RunBatch, Option<i64>)>> {
    if !has_batches(conn, path)? {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT {BATCH_COLUMNS} FROM batches b WHERE {filter} ORDER BY rowid");
    let mut stmt = conn.prepare(&sql).map_err(Error::sql(path))?;
    let rows = stmt.query_map([], batch_row).map_err(Error::sql(path))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(Error::sql(path))
}

/// Whether the store has the batch tables (a run opened read-only from
/// before schema 7 has none, and no batches).
fn has_batches(conn: &Connection, path: &Path) -> Result<bool> {
    conn.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'batches'",
        [],
        |_| Ok(()),
    )
    .optional()
    .map(|found| found.is_some())
    .map_err(Error::sql(path))
}

/// The requests of input file `file_id`.
fn requests(conn: &Connection, path: &Path, file_id: &str) -> Result<Vec<BatchedRequest>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT custom_id, task_id, attempt, body_sha256, max_output_bytes
             FROM batch_requests WHERE file_id = ?1 ORDER BY custom_id",
        )
        .map_err(Error::sql(path))?;
    let rows = stmt
        .query_map([file_id], |r| {
            Ok(BatchedRequest {
                custom_id: r.get(0)?,
                task_id: r.get(1)?,
                attempt: r.get(2)?,
                body_sha256: r.get(3)?,
                max_output_bytes: usize::try_from(r.get::<_, i64>(4)?).unwrap_or(usize::MAX),
            })
        })
        .map_err(Error::sql(path))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(Error::sql(path))
}

/// The batches not collected, and the files never made a batch nor
/// deleted, with their requests.
fn unsettled(conn: &Connection, path: &Path) -> Result<Vec<JournaledBatch>> {
    let rows = read_batches(
        conn,
        path,
        "collected_at IS NULL AND NOT (batch_id IS NULL AND file_deleted_at IS NOT NULL)",
    )?;
    rows.into_iter()
        .map(|(batch, created_unix_ms)| {
            Ok(JournaledBatch {
                requests: requests(conn, path, &batch.input_file_id)?,
                batch: batch.id.clone().map(|id| BatchReport {
                    id,
                    status: batch.status.clone().unwrap_or_default(),
                    total: batch.total,
                    completed: batch.completed,
                    failed: batch.failed,
                }),
                created_unix_ms: created_unix_ms.and_then(|ms| u64::try_from(ms).ok()),
                file_id: batch.input_file_id,
                model: batch.model,
            })
        })
        .collect()
}

impl RunView {
    /// Every batch of the run (and every input file uploaded for one),
    /// oldest first.
    pub fn batches(&self) -> Result<Vec<RunBatch>> {
        let conn = self.conn();
        Ok(read_batches(&conn, &self.path, "1")?
            .into_iter()
            .map(|(batch, _)| batch)
            .collect())
    }
}

impl BatchLedger for SqliteStore {
    fn run_id(&self) -> &str {
        SqliteStore::run_id(self)
    }

    fn record(&self, entry: &BatchEntry<'_>) -> std::result::Result<(), LedgerError> {
        let view = self.view();
        write(&mut view.conn(), &view.path, Some(self.session()), entry).map_err(ledger_error)
    }

    fn unsettled(&self) -> std::result::Result<Vec<JournaledBatch>, LedgerError> {
        let view = self.view();
        unsettled(&view.conn(), &view.path).map_err(ledger_error)
    }
}

/// A stored run's batches opened to cancel them (`ctx runs cancel`): a
/// connection of its own that writes without the run's lock, so that a
/// cancel reaches a run whose `ctx run` is still waiting on its batches
/// (that process then sees them cancelled when it next reads them).
#[derive(Debug)]
pub struct BatchLog {
    view: RunView,
}

impl BatchLog {
    /// Opens the run in `dir` (an older schema is migrated first).
    pub fn open(dir: &Path) -> Result<BatchLog> {
        drop(RunView::open(dir)?);
        let path = store_path(dir)?;
        let conn = schema::connect(&path, Access::Write)?;
        Ok(BatchLog {
            view: RunView::from_conn(conn, path, dir)?,
        })
    }

    /// The run's batches a provider may still be working on and no
    /// `ctx runs cancel` cancelled yet: created, their status not final.
    pub fn live(&self) -> Result<Vec<RunBatch>> {
        Ok(self
            .view
            .batches()?
            .into_iter()
            .filter(|b| b.is_live() && b.cancel_requested_at.is_none())
            .collect())
    }

    /// Records that batch `batch` was cancelled, as the provider answered
    /// the cancel.
    pub fn record_cancel(&self, batch: &BatchReport) -> Result<()> {
        let path = &self.view.path;
        let mut conn = self.view.conn();
        write(&mut conn, path, None, &BatchEntry::Status { batch })?;
        conn.execute(
            "UPDATE batches SET cancel_requested_at = ?2 WHERE batch_id = ?1",
            params![batch.id, now_rfc3339()],
        )
        .map_err(Error::sql(path))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ctx_model::Plan;

    use super::*;
    use crate::store::NewRun;

    fn store(dir: &Path) -> SqliteStore {
        let plan: Plan = serde_json::from_str(
            r#"{"schema_version": 1, "sub_tasks": [
            {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pa"}}}]}"#,
        )
        .unwrap();
        let new = NewRun {
            plan: &plan,
            engine: "openai",
            plan_source: None,
            inputs: None,
        };
        SqliteStore::create_in(dir, &new).unwrap()
    }

    fn request(task: &str) -> BatchedRequest {
        BatchedRequest {
            custom_id: format!("ctx:r:1:{task}"),
            task_id: task.into(),
            attempt: 1,
            body_sha256: "ab".repeat(32),
            max_output_bytes: 1024,
        }
    }

    fn report(id: &str, status: &str, completed: u64) -> BatchReport {
        BatchReport {
            id: id.into(),
            status: status.into(),
            total: 2,
            completed,
            failed: 0,
        }
    }

    /// What a resume takes up: a batch created and not collected, a file
    /// never made a batch and not deleted; neither once settled.
    #[test]
    fn a_batch_is_unsettled_until_collected_and_a_file_until_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path());
        let ledger: &dyn BatchLedger = &store;
        let requests = [request("a"), request("b")];
        for file_id in ["file-1", "file-2"] {
            let uploaded = BatchEntry::Uploaded {
                file_id,
                model: "m",
                requests: &requests,
            };
            ledger.record(&uploaded).unwrap();
        }
        let created = report("batch-1", "validating", 0);
        let entry = BatchEntry::Created {
            file_id: "file-1",
            batch: &created,
        };
        ledger.record(&entry).unwrap();
        let unsettled = ledger.unsettled().unwrap();
        assert_eq!(unsettled.len(), 2);
        assert_eq!(unsettled[0].batch, Some(created));
        assert!(unsettled[0].created_unix_ms.is_some());
        assert_eq!(unsettled[0].requests, requests);
        assert_eq!(
            (unsettled[1].file_id.as_str(), &unsettled[1].batch),
            ("file-2", &None)
        );

        let ended = report("batch-1", "completed", 2);
        ledger
            .record(&BatchEntry::Status { batch: &ended })
            .unwrap();
        let shown = store.view().batches().unwrap();
        assert_eq!(shown[0].status.as_deref(), Some("completed"));
        assert_eq!((shown[0].completed, shown[0].requests), (2, 2));
        assert!(shown[0].ended_at.is_some() && shown[1].ended_at.is_none());
        ledger
            .record(&BatchEntry::Collected {
                batch_id: "batch-1",
            })
            .unwrap();
        ledger
            .record(&BatchEntry::FileDeleted { file_id: "file-2" })
            .unwrap();
        assert_eq!(ledger.unsettled().unwrap(), []);
        let shown = store.view().batches().unwrap();
        assert!(shown[0].collected_at.is_some() && shown[1].file_deleted_at.is_some());
    }

    /// `ctx runs cancel`'s log: what is live, and the cancel recorded
    /// while the run's own store is open (no lock taken).
    #[test]
    fn a_cancel_is_recorded_beside_a_running_session() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path());
        let ledger: &dyn BatchLedger = &store;
        let requests = [request("a")];
        for (file_id, id) in [("file-1", "batch-1"), ("file-2", "batch-2")] {
            let uploaded = BatchEntry::Uploaded {
                file_id,
                model: "m",
                requests: &requests,
            };
            ledger.record(&uploaded).unwrap();
            let batch = report(id, "in_progress", 0);
            ledger
                .record(&BatchEntry::Created {
                    file_id,
                    batch: &batch,
                })
                .unwrap();
        }
        let done = report("batch-2", "completed", 1);
        ledger.record(&BatchEntry::Status { batch: &done }).unwrap();
        let log = BatchLog::open(tmp.path()).unwrap();
        let live: Vec<Option<String>> = log.live().unwrap().into_iter().map(|b| b.id).collect();
        assert_eq!(live, [Some("batch-1".to_string())]);
        log.record_cancel(&report("batch-1", "cancelling", 0))
            .unwrap();
        assert_eq!(log.live().unwrap(), []);
        let shown = store.view().batches().unwrap();
        assert_eq!(shown[0].status.as_deref(), Some("cancelling"));
        assert!(shown[0].cancel_requested_at.is_some());
    }
}
