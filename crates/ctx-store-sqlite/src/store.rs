//! [`SqliteStore`], the durable [`ExecutionStore`], and [`RunView`], the
//! read-only view of a stored run that inspection and resume planning use.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use ctx_model::{Plan, ResultMetadata, TaskExecutionResult, TaskStatus};
use ctx_store::{ExecutionStore, ResultRecord, StoreError};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::id::{new_run_id, now_rfc3339};
use crate::lock::{self, RunLock};
use crate::schema::{self, Access, RUN_APPLICATION_ID, RUN_MIGRATIONS, STORE_FILE};
use ctx_store::ResumePlan;
use ctx_store::fingerprint::{
    TaskFingerprint, canonical_json, fingerprint_all, redact_plan, sha256_hex,
};

/// The `synchronous` setting of run stores. `FULL` with WAL fsyncs the WAL
/// at every commit, so a result survives an OS crash or power loss once
/// `store` returned; `NORMAL` would survive only a process crash. One fsync
/// per task is nothing next to an LLM call (see docs/runs.md for figures).
const RUN_SYNCHRONOUS: &str = "FULL";

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

/// One `ctx run` or `ctx run --resume` of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// 1 for the first run, then 2, 3... for each resume.
    pub seq: i64,
    /// `run` or `resume`.
    pub kind: String,
    /// Start time (RFC 3339, UTC).
    pub started_at: String,
    /// End time; `None` while running or after a crash.
    pub finished_at: Option<String>,
    /// `finished` or `interrupted`; `None` while running or after a crash.
    pub outcome: Option<String>,
    /// The process that ran it.
    pub pid: u32,
    /// The ctx version that ran it.
    pub ctx_version: String,
    /// The engine name.
    pub engine: String,
    /// The plan's path as given, if known.
    pub plan_source: Option<String>,
    /// SHA-256 of the plan as run (canonical JSON, secrets redacted).
    pub plan_hash: String,
}

/// How many of the current plan's tasks are in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// Never started (no stored result, or a stored `pending`).
    pub pending: usize,
    /// Started, no result (running, or crashed).
    pub in_progress: usize,
    /// Completed.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
}

impl StatusCounts {
    fn add(&mut self, s: TaskStatus) {
        match s {
            TaskStatus::Pending => self.pending += 1,
            TaskStatus::InProgress => self.in_progress += 1,
            TaskStatus::Completed => self.completed += 1,
            TaskStatus::Failed => self.failed += 1,
            TaskStatus::Skipped => self.skipped += 1,
        }
    }

    /// Every task counted.
    pub fn total(&self) -> usize {
        self.pending + self.in_progress + self.completed + self.failed + self.skipped
    }
}

/// Where a run stands as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// A process holds its lock now.
    Running,
    /// Every task of the plan completed.
    Completed,
    /// The last session finished with failed, skipped or unrun tasks.
    Failed,
    /// The last session was stopped by Ctrl-C, SIGTERM or SIGHUP.
    Interrupted,
    /// The last session never recorded an end and nobody holds the lock:
    /// the process died (kill, crash, power loss).
    Crashed,
}

impl RunState {
    /// The state as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Interrupted => "interrupted",
            RunState::Crashed => "crashed",
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored run opened for reading. Cheap to open; does not lock, so it
/// works on a run that another process is executing (WAL readers see the
/// last committed state).
#[derive(Debug)]
pub struct RunView {
    conn: Mutex<Connection>,
    path: PathBuf,
    dir: PathBuf,
    run_id: String,
}

impl RunView {
    /// Opens the run in `dir` read-only. Fails, leaving the files untouched,
    /// when `dir` holds no `store.sqlite`, or it is not SQLite, foreign, or
    /// from a newer ctx. A store from an older ctx is migrated first, which
    /// takes the run's lock for the moment it needs.
    pub fn open(dir: &Path) -> Result<RunView> {
        let path = store_path(dir)?;
        let conn = schema::connect(&path, Access::Read)?;
        let version = schema::inspect(&conn, &path, RUN_APPLICATION_ID, RUN_MIGRATIONS)?;
        let conn = if version < RUN_MIGRATIONS.len() as i64 {
            drop(conn);
            let _lock = RunLock::acquire(dir, &dir.display().to_string())?;
            let mut w = schema::connect(&path, Access::Write)?;
            schema::set_writer_pragmas(&w, &path, RUN_SYNCHRONOUS)?;
            schema::migrate(&mut w, &path, RUN_MIGRATIONS)?;
            drop(w);
            schema::connect(&path, Access::Read)?
        } else {
            conn
        };
        RunView::from_conn(conn, path, dir)
    }

    fn from_conn(conn: Connection, path: PathBuf, dir: &Path) -> Result<RunView> {
        let run_id: String = conn
            .query_row("SELECT id FROM run", [], |r| r.get(0))
            .optional()
            .map_err(Error::sql(&path))?
            .ok_or_else(|| Error::Foreign {
                path: path.clone(),
                detail: "the run table is empty (the run was never initialised)".into(),
            })?;
        Ok(RunView {
            conn: Mutex::new(conn),
            path,
            dir: dir.to_path_buf(),
            run_id,
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `store.sqlite` file.
    pub fn store_path(&self) -> &Path {
        &self.path
    }

    /// When the run was created (RFC 3339, UTC).
    pub fn created_at(&self) -> Result<String> {
        self.conn()
            .query_row("SELECT created_at FROM run", [], |r| r.get(0))
            .map_err(Error::sql(&self.path))
    }

    /// Every session, first to last.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, kind, started_at, finished_at, outcome, pid, ctx_version, engine,
                        plan_source, plan_hash
                 FROM sessions ORDER BY seq",
            )
            .map_err(Error::sql(&self.path))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionInfo {
                    seq: r.get(0)?,
                    kind: r.get(1)?,
                    started_at: r.get(2)?,
                    finished_at: r.get(3)?,
                    outcome: r.get(4)?,
                    pid: r.get(5)?,
                    ctx_version: r.get(6)?,
                    engine: r.get(7)?,
                    plan_source: r.get(8)?,
                    plan_hash: r.get(9)?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(Error::sql(&self.path))?;
        Ok(rows)
    }

    /// The plan as last run (secret-looking `params` keys redacted).
    pub fn plan(&self) -> Result<Plan> {
        let json: String = self
            .conn()
            .query_row(
                "SELECT plan_json FROM sessions ORDER BY seq DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .map_err(Error::sql(&self.path))?;
        serde_json::from_str(&json).map_err(|e| Error::BadRow {
            path: self.path.clone(),
            task_id: String::new(),
            field: "sessions.plan_json",
            detail: e.to_string(),
        })
    }

    /// Every task's latest result, ordered by task id (tasks of earlier
    /// plans included).
    pub fn results(&self) -> Result<Vec<ResultRecord>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS}, {STARTED} FROM task_results t
                 JOIN attempts a ON a.seq = t.attempt_seq
                 LEFT JOIN attempts s ON s.seq = t.started_seq ORDER BY t.task_id"
            ))
            .map_err(Error::sql(&self.path))?;
        let raw = stmt
            .query_map([], |r| RawRow::read(r, true))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(Error::sql(&self.path))?;
        raw.into_iter().map(|r| r.decode(&self.path)).collect()
    }

    /// `task_id`'s latest result.
    pub fn result(&self, task_id: &str) -> Result<Option<ResultRecord>> {
        Ok(self.results_of(&[task_id])?.pop())
    }

    /// The latest results of `ids`, in the order of `ids`, leaving out ids
    /// without one. One connection lock and one prepared statement for the
    /// batch (the executor's read before each task).
    pub fn results_of<S: AsRef<str>>(&self, ids: &[S]) -> Result<Vec<ResultRecord>> {
        let raw = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS}, {STARTED} FROM task_results t
                     JOIN attempts a ON a.seq = t.attempt_seq
                     LEFT JOIN attempts s ON s.seq = t.started_seq WHERE t.task_id = ?1"
                ))
                .map_err(Error::sql(&self.path))?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(row) = stmt
                    .query_row([id.as_ref()], |r| RawRow::read(r, true))
                    .optional()
                    .map_err(Error::sql(&self.path))?
                {
                    out.push(row);
                }
            }
            out
        };
        raw.into_iter().map(|r| r.decode(&self.path)).collect()
    }

    /// Every result ever stored for `task_id`, oldest first.
    pub fn history(&self, task_id: &str) -> Result<Vec<ResultRecord>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM attempts a WHERE a.task_id = ?1 ORDER BY a.seq"
            ))
            .map_err(Error::sql(&self.path))?;
        let raw = stmt
            .query_map([task_id], |r| RawRow::read(r, false))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(Error::sql(&self.path))?;
        raw.into_iter().map(|r| r.decode(&self.path)).collect()
    }

    /// Status counts over the tasks of the plan as last run.
    pub fn status_counts(&self) -> Result<StatusCounts> {
        let plan = self.plan()?;
        let stored: HashMap<String, String> = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare_cached("SELECT task_id, status FROM task_results")
                .map_err(Error::sql(&self.path))?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(|rows| rows.collect::<rusqlite::Result<HashMap<_, _>>>())
                .map_err(Error::sql(&self.path))?
        };
        let mut counts = StatusCounts::default();
        for t in &plan.sub_tasks {
            let status = match stored.get(&t.id) {
                Some(s) => parse_status(s, &self.path, &t.id)?,
                None => TaskStatus::Pending,
            };
            counts.add(status);
        }
        Ok(counts)
    }

    /// Where the run stands as a whole.
    pub fn state(&self) -> Result<RunState> {
        if lock::probe(&self.dir).is_some() {
            return Ok(RunState::Running);
        }
        let last = self.sessions()?.pop();
        let counts = self.status_counts()?;
        Ok(match last.as_ref().and_then(|s| s.outcome.as_deref()) {
            None => RunState::Crashed,
            Some("interrupted") => RunState::Interrupted,
            Some(_) if counts.completed == counts.total() => RunState::Completed,
            Some(_) => RunState::Failed,
        })
    }

    /// The pid of the process executing the run now, if one is.
    pub fn running_pid(&self) -> Option<Option<u32>> {
        lock::probe(&self.dir)
    }

    /// What a resume with `plan` on `engine` would reuse and re-run, and
    /// why (for `--resume --dry-run`). Writes nothing, takes no lock.
    pub fn resume_plan(&self, plan: &Plan, engine: &str) -> Result<ResumePlan> {
        let stored: BTreeMap<String, ResultRecord> = self
            .results()?
            .into_iter()
            .map(|r| (r.result.task_id.clone(), r))
            .collect();
        Ok(ResumePlan::compute(plan, &stored, engine))
    }

    /// `PRAGMA integrity_check`: `"ok"`, or SQLite's list of problems.
    pub fn integrity_check(&self) -> Result<String> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("PRAGMA integrity_check")
            .map_err(Error::sql(&self.path))?;
        let lines = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(Error::sql(&self.path))?;
        Ok(lines.join("\n"))
    }
}

const COLUMNS: &str = "a.task_id, a.status, a.output, a.summary, a.error, a.prompt, a.prompt_hash,
    a.metadata_json, a.engine, a.inputs_hash, a.model, a.params_hash, a.session, a.recorded_at, a.seq";

/// The latest-result columns after [`COLUMNS`]: where the execution started
/// (`s` is the `attempts` row `t.started_seq` points at, left-joined).
const STARTED: &str = "t.started_seq, s.recorded_at";

/// A row as read, before its JSON and status are decoded (decoding errors
/// must name the path and task, which a rusqlite row mapper cannot).
struct RawRow {
    task_id: String,
    status: String,
    output: String,
    summary: Option<String>,
    error: Option<String>,
    prompt: Option<String>,
    prompt_hash: Option<String>,
    metadata_json: String,
    engine: String,
    inputs_hash: Option<String>,
    model: Option<String>,
    params_hash: Option<String>,
    session: i64,
    recorded_at: String,
    seq: i64,
    started_seq: Option<i64>,
    started_at: Option<String>,
}

impl RawRow {
    fn read(r: &Row<'_>, with_started: bool) -> rusqlite::Result<RawRow> {
        Ok(RawRow {
            task_id: r.get(0)?,
            status: r.get(1)?,
            output: r.get(2)?,
            summary: r.get(3)?,
            error: r.get(4)?,
            prompt: r.get(5)?,
            prompt_hash: r.get(6)?,
            metadata_json: r.get(7)?,
            engine: r.get(8)?,
            inputs_hash: r.get(9)?,
            model: r.get(10)?,
            params_hash: r.get(11)?,
            session: r.get(12)?,
            recorded_at: r.get(13)?,
            seq: r.get(14)?,
            started_seq: if with_started { r.get(15)? } else { None },
            started_at: if with_started { r.get(16)? } else { None },
        })
    }

    fn decode(self, path: &Path) -> Result<ResultRecord> {
        let status = parse_status(&self.status, path, &self.task_id)?;
        let metadata: ResultMetadata =
            serde_json::from_str(&self.metadata_json).map_err(|e| Error::BadRow {
                path: path.to_path_buf(),
                task_id: self.task_id.clone(),
                field: "attempts.metadata_json",
                detail: e.to_string(),
            })?;
        let fingerprint = match (self.inputs_hash, self.params_hash) {
            (Some(inputs_hash), Some(params_hash)) => Some(TaskFingerprint {
                inputs_hash,
                model: self.model,
                params_hash,
            }),
            _ => None,
        };
        Ok(ResultRecord {
            result: TaskExecutionResult {
                task_id: self.task_id,
                status,
                output: self.output,
                summary: self.summary,
                error: self.error,
                prompt: self.prompt,
                metadata,
            },
            prompt_hash: self.prompt_hash,
            engine: self.engine,
            fingerprint,
            session: self.session,
            recorded_at: self.recorded_at,
            seq: self.seq,
            started_seq: self.started_seq,
            started_at: self.started_at,
        })
    }
}

fn parse_status(s: &str, path: &Path, task_id: &str) -> Result<TaskStatus> {
    Ok(match s {
        "pending" => TaskStatus::Pending,
        "in_progress" => TaskStatus::InProgress,
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "skipped" => TaskStatus::Skipped,
        other => {
            return Err(Error::BadRow {
                path: path.to_path_buf(),
                task_id: task_id.to_string(),
                field: "status",
                detail: format!("unknown status `{other}`"),
            });
        }
    })
}

/// `dir/store.sqlite`, checking that `dir` is a directory and the file
/// exists.
fn store_path(dir: &Path) -> Result<PathBuf> {
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
    /// [`ResumePlan::rerun_ids`] to the executor as its `force_rerun` set.
    pub fn resume(dir: &Path, new: &NewRun<'_>) -> Result<(SqliteStore, ResumePlan)> {
        let path = store_path(dir)?;
        // Inspect read-only first: nothing (not even the lock file) is
        // written next to a file that is not ours.
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
        let view = RunView::from_conn(conn, path.clone(), dir)?;
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

    /// [`ExecutionStore::store`] with this crate's error type.
    pub fn record(&self, result: &TaskExecutionResult) -> Result<()> {
        let path = &self.view.path;
        let metadata = serde_json::to_string(&result.metadata).map_err(|e| Error::BadRow {
            path: path.clone(),
            task_id: result.task_id.clone(),
            field: "metadata",
            detail: e.to_string(),
        })?;
        let prompt_hash = result.prompt.as_deref().map(|p| sha256_hex(p.as_bytes()));
        let fp = self.fingerprints.get(&result.task_id);
        let status = result.status.as_str();
        let mut conn = self.view.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::sql(path))?;
        tx.prepare_cached(
            "INSERT INTO attempts (task_id, session, recorded_at, status, prompt, prompt_hash,
                 output, summary, error, metadata_json, engine, inputs_hash, model, params_hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )
        .and_then(|mut s| {
            s.execute(params![
                result.task_id,
                self.session,
                now_rfc3339(),
                status,
                result.prompt,
                prompt_hash,
                result.output,
                result.summary,
                result.error,
                metadata,
                self.engine,
                fp.map(|f| &f.inputs_hash),
                fp.and_then(|f| f.model.as_ref()),
                fp.map(|f| &f.params_hash),
            ])
        })
        .map_err(Error::sql(path))?;
        let seq = tx.last_insert_rowid();
        let prev: Option<(String, Option<i64>)> = tx
            .prepare_cached("SELECT status, started_seq FROM task_results WHERE task_id = ?1")
            .and_then(|mut s| {
                s.query_row([&result.task_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(Error::sql(path))?;
        let started = match result.status {
            TaskStatus::InProgress => Some(seq),
            TaskStatus::Pending | TaskStatus::Skipped => None,
            TaskStatus::Completed | TaskStatus::Failed => match prev {
                Some((s, started)) if s == "in_progress" => started.or(Some(seq)),
                _ => Some(seq),
            },
        };
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
}

fn insert_session(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    kind: &str,
    new: &NewRun<'_>,
) -> Result<i64> {
    let plan = redact_plan(new.plan);
    let plan_value = serde_json::to_value(&plan).map_err(|e| Error::BadRow {
        path: path.to_path_buf(),
        task_id: String::new(),
        field: "plan",
        detail: e.to_string(),
    })?;
    let plan_json = canonical_json(&plan_value);
    let plan_hash = sha256_hex(plan_json.as_bytes());
    tx.execute(
        "INSERT INTO sessions (kind, started_at, pid, ctx_version, engine, plan_source, plan_json, plan_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            kind,
            now_rfc3339(),
            std::process::id(),
            env!("CARGO_PKG_VERSION"),
            new.engine,
            new.plan_source,
            plan_json,
            plan_hash
        ],
    )
    .map_err(Error::sql(path))?;
    Ok(tx.last_insert_rowid())
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
