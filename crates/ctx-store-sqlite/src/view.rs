//! [`RunView`], the read-only view of a stored run that `ctx runs` and
//! resume planning use, and what it reports (sessions, status counts, the
//! run's state).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use ctx_model::{Plan, TaskStatus};
use ctx_store::{ResultRecord, RunInputs};
use rusqlite::{Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::lock::{self, RunLock};
use crate::schema::{self, Access, RUN_APPLICATION_ID, RUN_MIGRATIONS};
use ctx_store::ResumePlan;

use crate::rows::*;
use crate::store::*;

/// One `ctx run` or `ctx run --resume` of a run (as JSON, in `ctx runs
/// show --format json`: its fields in this order).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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

/// How many of the current plan's tasks are in each status (the count
/// both stores share).
pub use ctx_store::StatusCounts;

/// Where a run stands as a whole: the one state both stores report
/// (`Running` here: a process holds the run's lock now; `Crashed`: the last
/// session never recorded an end and nobody holds the lock).
pub use ctx_store::RunState;

/// A stored run opened for reading. Cheap to open; does not lock, so it
/// works on a run that another process is executing (WAL readers see the
/// last committed state).
#[derive(Debug)]
pub struct RunView {
    pub(crate) conn: Mutex<Connection>,
    pub(crate) path: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) run_id: String,
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

    pub(crate) fn from_conn(conn: Connection, path: PathBuf, dir: &Path) -> Result<RunView> {
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

    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
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

    /// What the last session's plan was filled from (its templates, the
    /// `--var` values, the digest), when it had anything to fill.
    pub fn inputs(&self) -> Result<Option<RunInputs>> {
        self.session_json(
            "SELECT inputs_json FROM sessions ORDER BY seq DESC LIMIT 1",
            "sessions.inputs_json",
        )
    }

    /// The cheaper tier of its period budget the run was started on
    /// (recorded by its first session, and again by each resume, which
    /// keeps it); `None` on the standard tier.
    pub fn fallback(&self) -> Result<Option<ctx_model::FallbackChoice>> {
        self.session_json(
            "SELECT fallback_json FROM sessions WHERE fallback_json IS NOT NULL
             ORDER BY seq ASC LIMIT 1",
            "sessions.fallback_json",
        )
    }

    /// The JSON column one session row `sql` selects, `None` when there is
    /// no row or it is NULL; `field` names it in errors.
    fn session_json<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
        field: &'static str,
    ) -> Result<Option<T>> {
        let json: Option<Option<String>> = self
            .conn()
            .query_row(sql, [], |r| r.get(0))
            .optional()
            .map_err(Error::sql(&self.path))?;
        json.flatten()
            .map(|j| {
                serde_json::from_str(&j).map_err(|e| Error::BadRow {
                    path: self.path.clone(),
                    task_id: String::new(),
                    field,
                    detail: e.to_string(),
                })
            })
            .transpose()
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
