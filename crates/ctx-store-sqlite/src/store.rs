//! [`SqliteStore`], the durable [`ExecutionStore`]: creating and
//! resuming a run, and writing its results.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::{ExecutionStore, StoreError};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::id::{new_run_id, now_rfc3339};
use crate::lock::RunLock;
use crate::schema::{self, Access, RUN_APPLICATION_ID, RUN_MIGRATIONS, STORE_FILE};
use ctx_store::fingerprint::{
    TaskFingerprint, canonical_json, fingerprint_all, redact_plan, sha256_hex,
};
use ctx_store::{ResumePlan, RunInputs, SecretMask};

use crate::view::*;

/// The `synchronous` setting of run stores. `FULL` with WAL fsyncs the WAL
/// at every commit, so a result survives an OS crash or power loss once
/// `store` returned; `NORMAL` would survive only a process crash. One fsync
/// per task is nothing next to an LLM call (see docs/runs.md for figures).
pub(crate) const RUN_SYNCHRONOUS: &str = "FULL";

/// A JSON column of a session a session writes after it started.
#[derive(Debug, Clone, Copy)]
enum SessionJson {
    /// `fallback_json`.
    Fallback,
}

/// What a new run or a resume records about itself.
#[derive(Debug, Clone, Copy)]
pub struct NewRun<'a> {
    /// The plan as it will be run: after CLI overrides (e.g.
    /// `--max-prompt-tokens`) are applied, since fingerprints are taken
    /// from it. Secret-looking `params` keys are redacted before it is
    /// written.
    pub plan: &'a Plan,
    /// The engine label, stored with every result and compared on resume
    /// (a different label re-runs the task): the `--engine` name plus the
    /// engine-level defaults that change outputs and are not in `params`
    /// (for `openai`: `--model`, `--temperature`, ...; e.g. `openai
    /// model=gpt-4o`). Never a credential, base URL or command string.
    pub engine: &'a str,
    /// Where the plan came from (the path as given), for `ctx runs list`.
    pub plan_source: Option<&'a str>,
    /// What `plan` was filled from, for a plan with variables or the
    /// history digest: recorded with the session, and its secrets'
    /// texts hidden in the stored plan. The results a run stores are
    /// masked at the store's door by the executor
    /// (`ExecutorOptions::secret_mask`, `ctx_store::masked_store`), for
    /// every store alike.
    pub inputs: Option<&'a RunInputs>,
}

impl NewRun<'_> {
    /// The secrets to hide in what is written (none without inputs).
    fn mask(&self) -> SecretMask {
        self.inputs.map(|i| i.mask.clone()).unwrap_or_default()
    }
}

/// How a session (one `ctx run` or `ctx run --resume`) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The executor ran to its end (tasks may have failed).
    Finished,
    /// Ctrl-C stopped it.
    Interrupted,
}

impl SessionEnd {
    fn as_str(self) -> &'static str {
        match self {
            SessionEnd::Finished => "finished",
            SessionEnd::Interrupted => "interrupted",
        }
    }
}

/// `dir/store.sqlite`, checking that `dir` is a directory and the file
/// exists.
pub(crate) fn store_path(dir: &Path) -> Result<PathBuf> {
    if !dir.is_dir() {
        return Err(Error::NotFound {
            run: dir.display().to_string(),
            root: dir.parent().map(Path::to_path_buf).unwrap_or_default(),
        });
    }
    let path = dir.join(STORE_FILE);
    if !path.is_file() {
        return Err(Error::NoStore {
            dir: dir.to_path_buf(),
        });
    }
    Ok(path)
}

/// The durable [`ExecutionStore`]: one run's `store.sqlite`, opened for
/// writing, with the run's lock held for as long as the value lives.
///
/// Every [`store`](ExecutionStore::store) appends a row to the attempts
/// history and moves the task's latest-result pointer, in one transaction
/// committed with `synchronous=FULL` before it returns. Reads go through
/// the same connection, so the executor sees its own writes.
#[derive(Debug)]
pub struct SqliteStore {
    view: RunView,
    session: i64,
    engine: String,
    fingerprints: HashMap<String, TaskFingerprint>,
    _lock: RunLock,
}

impl SqliteStore {
    /// Starts a new run in a fresh directory `root/{run-id}`.
    pub fn create(root: &Path, new: &NewRun<'_>) -> Result<SqliteStore> {
        std::fs::create_dir_all(root).map_err(Error::io(root))?;
        let mut tries = 0;
        let (id, dir) = loop {
            let id = new_run_id();
            let dir = root.join(&id);
            match std::fs::create_dir(&dir) {
                Ok(()) => break (id, dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
                Err(e) => return Err(Error::io(&dir)(e)),
            }
        };
        SqliteStore::init(&dir, id, new).inspect_err(|_| {
            // Only our own, just-made directory is removed.
            let _ = std::fs::remove_dir_all(&dir);
        })
    }

    /// Starts a new run in `dir` (`--run-dir`), creating it if needed.
    /// Refuses a directory that already holds a run.
    pub fn create_in(dir: &Path, new: &NewRun<'_>) -> Result<SqliteStore> {
        if dir.join(STORE_FILE).exists() {
            return Err(Error::AlreadyExists {
                dir: dir.to_path_buf(),
            });
        }
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        SqliteStore::init(dir, new_run_id(), new)
    }

    fn init(dir: &Path, id: String, new: &NewRun<'_>) -> Result<SqliteStore> {
        let lock = RunLock::acquire(dir, &id)?;
        let path = dir.join(STORE_FILE);
        // Checked again under the lock: two creators racing on one --run-dir.
        if path.exists() {
            return Err(Error::AlreadyExists {
                dir: dir.to_path_buf(),
            });
        }
        let made = (|| {
            let mut conn = schema::connect(&path, Access::Create)?;
            schema::set_writer_pragmas(&conn, &path, RUN_SYNCHRONOUS)?;
            schema::migrate(&mut conn, &path, RUN_MIGRATIONS)?;
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(Error::sql(&path))?;
            tx.execute(
                "INSERT INTO run (singleton, id, created_at) VALUES (1, ?1, ?2)",
                params![id, now_rfc3339()],
            )
            .map_err(Error::sql(&path))?;
            let session = insert_session(&tx, &path, "run", new)?;
            tx.commit().map_err(Error::sql(&path))?;
            Ok((conn, session))
        })();
        let (conn, session) = match made {
            Ok(x) => x,
            Err(e) => {
                // The file is ours and new: remove it so the directory does
                // not look like a half-made run.
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    let _ = std::fs::remove_file(p);
                }
                return Err(e);
            }
        };
        Ok(SqliteStore {
            view: RunView {
                conn: Mutex::new(conn),
                path,
                dir: dir.to_path_buf(),
                run_id: id,
            },
            session,
            engine: new.engine.to_string(),
            fingerprints: fingerprint_all(new.plan),
            _lock: lock,
        })
    }

    /// Reopens the run in `dir` to resume it with `new.plan` on
    /// `new.engine`: checks the store, takes the lock, migrates an older
    /// schema, decides what to reuse and re-run, and records a new session
    /// with the plan as it will now be run. Pass the returned plan's
    /// [`ResumePlan::forced_ids`] to the executor as its `force_rerun` set.
    pub fn resume(dir: &Path, new: &NewRun<'_>) -> Result<(SqliteStore, ResumePlan)> {
        let (view, lock) = open_writer(dir)?;
        let path = view.path.clone();
        let plan = view.resume_plan(new.plan, new.engine)?;
        let session = {
            let mut conn = view.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(Error::sql(&path))?;
            let s = insert_session(&tx, &path, "resume", new)?;
            tx.commit().map_err(Error::sql(&path))?;
            s
        };
        Ok((
            SqliteStore {
                view,
                session,
                engine: new.engine.to_string(),
                fingerprints: fingerprint_all(new.plan),
                _lock: lock,
            },
            plan,
        ))
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        self.view.run_id()
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        self.view.dir()
    }

    /// This session's number (1 for the first run).
    pub fn session(&self) -> i64 {
        self.session
    }

    /// Read access to everything stored (the same connection).
    pub fn view(&self) -> &RunView {
        &self.view
    }

    /// Records how this session ended. A session without an end is shown
    /// as crashed once its lock is gone. The lock is released when the
    /// store is dropped.
    pub fn finish(&self, end: SessionEnd) -> Result<()> {
        self.view
            .conn()
            .execute(
                "UPDATE sessions SET finished_at = ?1, outcome = ?2 WHERE seq = ?3",
                params![now_rfc3339(), end.as_str(), self.session],
            )
            .map(drop)
            .map_err(Error::sql(&self.view.path))
    }

    /// Records the files this session published (after the run, before
    /// [`finish`](Self::finish)) as a publish of the run's (`publishes`);
    /// nothing is recorded for none.
    pub fn record_published(&self, published: &[ctx_store::Published]) -> Result<()> {
        if published.is_empty() {
            return Ok(());
        }
        crate::publishes::insert(&self.view, Some(self.session), published, &[]).map(drop)
    }

    /// Records the cheaper tier this session runs on (its period budget's
    /// fallback), for `ctx runs show`, the report and a resume.
    pub fn record_fallback(&self, choice: &ctx_model::FallbackChoice) -> Result<()> {
        self.set_session_json(SessionJson::Fallback, choice)
    }

    /// Writes `value` as JSON into this session's `column`.
    fn set_session_json(&self, column: SessionJson, value: &impl serde::Serialize) -> Result<()> {
        let (sql, field) = match column {
            SessionJson::Fallback => (
                "UPDATE sessions SET fallback_json = ?1 WHERE seq = ?2",
                "fallback",
            ),
        };
        let json = serde_json::to_string(value).map_err(|e| Error::BadRow {
            path: self.view.path.clone(),
            task_id: String::new(),
            field,
            detail: e.to_string(),
        })?;
        self.view
            .conn()
            .execute(sql, params![json, self.session])
            .map(drop)
            .map_err(Error::sql(&self.view.path))
    }

    /// [`ExecutionStore::store`] with this crate's error type.
    pub fn record(&self, result: &TaskExecutionResult) -> Result<()> {
        let path = &self.view.path;
        let metadata = serde_json::to_string(&result.metadata).map_err(|e| Error::BadRow {
            path: path.clone(),
            task_id: result.task_id.clone(),
            field: "metadata",
            detail: e.to_string(),
        })?;
        let prompt = result.prompt.as_deref();
        let prompt_hash = prompt.map(|p| sha256_hex(p.as_bytes()));
        let fp = self.fingerprints.get(&result.task_id);
        let status = result.status.as_str();
        let mut conn = self.view.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::sql(path))?;
        tx.prepare_cached(
            "INSERT INTO attempts (task_id, session, recorded_at, status, prompt, prompt_hash,
                 output, summary, error, metadata_json, engine, inputs_hash, model, params_hash,
                 raw_output)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )
        .and_then(|mut s| {
            s.execute(params![
                result.task_id,
                self.session,
                now_rfc3339(),
                status,
                prompt,
                prompt_hash,
                result.output,
                result.summary,
                result.error,
                metadata,
                self.engine,
                fp.map(|f| &f.inputs_hash),
                fp.and_then(|f| f.model.as_ref()),
                fp.map(|f| &f.params_hash),
                result.raw_output,
            ])
        })
        .map_err(Error::sql(path))?;
        let seq = tx.last_insert_rowid();
        let prev: Option<(String, Option<i64>, i64)> = tx
            .prepare_cached(
                "SELECT t.status, t.started_seq, a.session FROM task_results t
                 JOIN attempts a ON a.seq = t.attempt_seq WHERE t.task_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([&result.task_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .optional()
            })
            .map_err(Error::sql(path))?;
        let started = started_seq(result.status, prev, self.session, seq);
        tx.prepare_cached(
            "INSERT INTO task_results (task_id, status, attempt_seq, started_seq)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (task_id) DO UPDATE SET
                 status = excluded.status, attempt_seq = excluded.attempt_seq,
                 started_seq = excluded.started_seq",
        )
        .and_then(|mut s| s.execute(params![result.task_id, status, seq, started]))
        .map_err(Error::sql(path))?;
        tx.commit().map_err(Error::sql(path))
    }
}

/// The execution's start: its first `in_progress` row. A task whose
/// checks failed is asked again, and each attempt stores its prompt as a
/// new `in_progress` row; those rows continue the execution the first one
/// started (in this session), so they keep its start. An `in_progress` row
/// left by an earlier session (a crash) is another execution's: a new one
/// starts here, at `seq`. `prev` is the task's latest row before this one
/// (status, start, session).
fn started_seq(
    status: TaskStatus,
    prev: Option<(String, Option<i64>, i64)>,
    session: i64,
    seq: i64,
) -> Option<i64> {
    match (status, prev) {
        (TaskStatus::Pending | TaskStatus::Skipped, _) => None,
        (_, Some((s, started, prev_session))) if s == "in_progress" && prev_session == session => {
            started.or(Some(seq))
        }
        (TaskStatus::Completed | TaskStatus::Failed, Some((s, started, _)))
            if s == "in_progress" =>
        {
            started.or(Some(seq))
        }
        _ => Some(seq),
    }
}

impl ExecutionStore for SqliteStore {
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        Ok(self.view.result(task_id)?.map(|r| r.result))
    }

    fn get_by_dependency_ids(
        &self,
        ids: &[String],
    ) -> Result<Vec<TaskExecutionResult>, StoreError> {
        Ok(self
            .view
            .results_of(ids)?
            .into_iter()
            .map(|r| r.result)
            .collect())
    }

    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
        Ok(self.record(&result)?)
    }

    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        Ok(self.view.results()?.into_iter().map(|r| r.result).collect())
    }

    fn decisions(&self) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
        Ok(self.view.decisions()?)
    }
}

pub(crate) fn insert_session(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    kind: &str,
    new: &NewRun<'_>,
) -> Result<i64> {
    let bad = |field: &'static str| {
        move |e: serde_json::Error| Error::BadRow {
            path: path.to_path_buf(),
            task_id: String::new(),
            field,
            detail: e.to_string(),
        }
    };
    let plan = redact_plan(new.plan);
    let mut plan_value = serde_json::to_value(&plan).map_err(bad("plan"))?;
    new.mask().apply_json(&mut plan_value);
    let plan_json = canonical_json(&plan_value);
    let plan_hash = sha256_hex(plan_json.as_bytes());
    let inputs_json = new
        .inputs
        .map(serde_json::to_string)
        .transpose()
        .map_err(bad("inputs"))?;
    tx.execute(
        "INSERT INTO sessions (kind, started_at, pid, ctx_version, engine, plan_source, plan_json, plan_hash, inputs_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            kind,
            now_rfc3339(),
            std::process::id(),
            env!("CARGO_PKG_VERSION"),
            new.engine,
            new.plan_source,
            plan_json,
            plan_hash,
            inputs_json
        ],
    )
    .map_err(Error::sql(path))?;
    Ok(tx.last_insert_rowid())
}

/// Opens the run in `dir` for writing: checks the store read-only first
/// (nothing, not even the lock file, is written next to a file that is
/// not ours), takes the run's lock, migrates an older schema and checks
/// the file is intact.
pub(crate) fn open_writer(dir: &Path) -> Result<(RunView, RunLock)> {
    let path = store_path(dir)?;
    let run_id = {
        let ro = schema::connect(&path, Access::Read)?;
        schema::inspect(&ro, &path, RUN_APPLICATION_ID, RUN_MIGRATIONS)?;
        let id: Option<String> = ro
            .query_row("SELECT id FROM run", [], |r| r.get(0))
            .optional()
            .map_err(Error::sql(&path))?;
        id.unwrap_or_else(|| dir.display().to_string())
    };
    let lock = RunLock::acquire(dir, &run_id)?;
    let mut conn = schema::connect(&path, Access::Write)?;
    schema::set_writer_pragmas(&conn, &path, RUN_SYNCHRONOUS)?;
    schema::migrate(&mut conn, &path, RUN_MIGRATIONS)?;
    schema::quick_check(&conn, &path)?;
    Ok((RunView::from_conn(conn, path, dir)?, lock))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        serde_json::from_str(
            r#"{"schema_version": 1, "sub_tasks": [
            {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pa"}}}]}"#,
        )
        .unwrap()
    }

    /// A full disk, simulated with `max_page_count` (SQLite's own cap,
    /// which fails writes with the same SQLITE_FULL a full file system
    /// gives): `store` fails with an error naming the file, and every
    /// result committed before is intact.
    #[test]
    fn a_full_disk_fails_the_write_and_keeps_earlier_results() {
        let tmp = tempfile::tempdir().unwrap();
        let p = plan();
        let new = NewRun {
            plan: &p,
            engine: "dry-run",
            plan_source: None,
            inputs: None,
        };
        let store = SqliteStore::create_in(tmp.path(), &new).unwrap();
        let mut first = TaskExecutionResult::new("a", TaskStatus::Completed);
        first.output = "small".into();
        store.record(&first).unwrap();
        {
            let conn = store.view.conn();
            let pages: i64 = conn
                .query_row("PRAGMA page_count", [], |r| r.get(0))
                .unwrap();
            let _: i64 = conn
                .query_row(&format!("PRAGMA max_page_count = {pages}"), [], |r| {
                    r.get(0)
                })
                .unwrap();
        }
        let mut big = TaskExecutionResult::new("b", TaskStatus::Completed);
        big.output = "x".repeat(1 << 20);
        let err = store.record(&big).unwrap_err().to_string();
        assert!(err.contains("database or disk is full"), "{err}");
        assert!(
            err.contains(&tmp.path().join(STORE_FILE).display().to_string()),
            "{err}"
        );
        assert_eq!(store.view.result("a").unwrap().unwrap().result, first);
        assert!(store.view.result("b").unwrap().is_none());
        assert_eq!(store.view.integrity_check().unwrap(), "ok");
    }
}
