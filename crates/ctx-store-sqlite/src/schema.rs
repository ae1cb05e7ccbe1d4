//! The on-disk schema, its version, and the migrations that carry an older
//! store forward.
//!
//! Each database file carries two header fields: `PRAGMA application_id`
//! says *what* it is (a ctx run store, or the ctx cache), so a foreign
//! SQLite file is recognised before anything is written to it, and
//! `PRAGMA user_version` says *which version* of the schema it has. The
//! version is the number of migrations applied; migration `n` (1-based)
//! takes a store from version `n - 1` to `n`, in one transaction together
//! with the new `user_version`, so a crash mid-migration leaves the old
//! version intact. Adding schema version 2 is one function appended to
//! [`RUN_MIGRATIONS`].
//!
//! Opening never "repairs": a newer version, a foreign file or a file that
//! is not SQLite at all is reported and left as it is.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{Error, Result};

/// The store's file name inside a run directory.
pub const STORE_FILE: &str = "store.sqlite";

/// `PRAGMA application_id` of a run store: `ctxR` in ASCII.
pub const RUN_APPLICATION_ID: i64 = 0x6374_7852;

/// `PRAGMA application_id` of the cache index: `ctxC` in ASCII.
pub const CACHE_APPLICATION_ID: i64 = 0x6374_7843;

/// A migration: applies one schema step inside the given transaction.
pub type Migration = fn(&Transaction<'_>) -> rusqlite::Result<()>;

/// The run store's migrations, oldest first.
pub const RUN_MIGRATIONS: &[Migration] = &[run_v1, run_v2, run_v3, run_v4, run_v5, run_v6, run_v7];

/// The run-store schema version this build writes.
pub const RUN_SCHEMA_VERSION: i64 = RUN_MIGRATIONS.len() as i64;

/// The cache's migrations, oldest first.
pub const CACHE_MIGRATIONS: &[Migration] = &[cache_v1];

/// Schema version 1 of a run store.
///
/// * `run`: one row, the run's id and creation time.
/// * `sessions`: one row per `ctx run` or `ctx run --resume` on this run:
///   the plan as run (secrets redacted), its hash, engine name, ctx version,
///   pid, start and end.
/// * `attempts`: every `ExecutionStore::store` call, appended, never
///   updated: status, exact prompt and its hash, output, error, metadata
///   JSON, and the task's fingerprint at the time.
/// * `task_results`: the latest attempt per task (a pointer plus its
///   status, for cheap counts).
fn run_v1(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE run (
            singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
            id         TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE sessions (
            seq         INTEGER PRIMARY KEY,
            kind        TEXT NOT NULL CHECK (kind IN ('run', 'resume')),
            started_at  TEXT NOT NULL,
            finished_at TEXT,
            outcome     TEXT,
            pid         INTEGER NOT NULL,
            ctx_version TEXT NOT NULL,
            engine      TEXT NOT NULL,
            plan_source TEXT,
            plan_json   TEXT NOT NULL,
            plan_hash   TEXT NOT NULL
        );
        CREATE TABLE attempts (
            seq           INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id       TEXT NOT NULL,
            session       INTEGER NOT NULL REFERENCES sessions(seq),
            recorded_at   TEXT NOT NULL,
            status        TEXT NOT NULL CHECK (status IN
                            ('pending', 'in_progress', 'completed', 'failed', 'skipped')),
            prompt        TEXT,
            prompt_hash   TEXT,
            output        TEXT NOT NULL,
            summary       TEXT,
            error         TEXT,
            metadata_json TEXT NOT NULL,
            engine        TEXT NOT NULL,
            inputs_hash   TEXT,
            model         TEXT,
            params_hash   TEXT
        );
        CREATE INDEX attempts_by_task ON attempts(task_id, seq);
        CREATE TABLE task_results (
            task_id     TEXT PRIMARY KEY,
            status      TEXT NOT NULL,
            attempt_seq INTEGER NOT NULL REFERENCES attempts(seq),
            started_seq INTEGER
        ) WITHOUT ROWID;",
    )?;
    tx.pragma_update(None, "application_id", RUN_APPLICATION_ID)
}

/// Schema version 2 of a run store (issue 22), two columns of `sessions`:
///
/// * `inputs_json`: what the session's plan was filled from
///   (`ctx_store::RunInputs`: the plan before filling, each `--var`
///   value, a secret one only as its hash, and the history digest), so
///   that a resume fills it again without being given them. NULL for a
///   plan with nothing to fill, and for every session recorded before.
/// * `published_json`: the files the session published
///   (`[{task_id, path}]`, `ctx run --publish-root`), for `ctx runs show`
///   and the report. NULL when it published nothing.
fn run_v2(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE sessions ADD COLUMN inputs_json TEXT;
         ALTER TABLE sessions ADD COLUMN published_json TEXT;",
    )
}

/// Schema version 3 of a run store (issue 38), one column of `attempts`:
///
/// * `raw_output`: the output as the engine wrote it, when the task's
///   `output` block removed something from it (`output` then holds the
///   cleaned text that checks, dependents and publishing saw). NULL when
///   nothing was removed, and for every attempt recorded before.
fn run_v3(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE attempts ADD COLUMN raw_output TEXT;")
}

/// Schema version 4 of a run store (issue 40): `sessions.fallback_json`,
/// the cheaper tier of a period budget the run was started on
/// (`ctx_model::FallbackChoice`: the budget's figures when the run
/// started, the threshold, the model, and each task it moved), so that
/// `ctx runs show`, the report and a resume know it later. NULL on the
/// standard tier, and for every session recorded before. A column and
/// not the plan: the plan as run already names the fallback model, but
/// not why.
fn run_v4(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE sessions ADD COLUMN fallback_json TEXT;")
}

/// Schema version 5 of a run store (issue 38): `publishes`, one row per
/// publish and per undo, so that a run's files can be published later
/// (`ctx runs publish`, which opens no session) and undone (`ctx runs
/// unpublish`):
///
/// * `session`: the `ctx run --publish-root` session that published;
///   NULL for `ctx runs publish` and for an undo;
/// * `kind`: `publish` or `unpublish`; `at`: when it was recorded;
/// * `files_json`: its manifest, `[ctx_store::Published]` (path, new and
///   old SHA-256, size, time);
/// * `undone_by`: for a publish, the `seq` of the undo that reverted it.
///
/// The files earlier sessions recorded in `sessions.published_json` are
/// copied in as publishes (their lines carry no digests, so they cannot
/// be undone); that column is no longer written.
fn run_v5(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE publishes (
             seq INTEGER PRIMARY KEY,
             session INTEGER,
             kind TEXT NOT NULL CHECK (kind IN ('publish', 'unpublish')),
             at TEXT NOT NULL,
             files_json TEXT NOT NULL,
             undone_by INTEGER
         );
         INSERT INTO publishes (session, kind, at, files_json)
             SELECT seq, 'publish', COALESCE(finished_at, started_at), published_json
             FROM sessions WHERE published_json IS NOT NULL ORDER BY seq;",
    )
}

/// Schema version 6 of a run store (issue 38): `decisions`, one row per
/// decision on an approval gate (`ctx runs approve`, `ctx runs reject`),
/// written by a process that holds no lock on the run (the run may be
/// executing, waiting for this very decision):
///
/// * `task_id`, `stage` (`run` or `publish`), `verdict` (`approve` or
///   `reject`), `by`, `at`, `note`;
/// * `output_sha256`: for a `before: publish` gate, the digest of the
///   output decided on (NULL for `before: run`).
///
/// The unique index makes one decision per gate (and, for `publish`, per
/// output) the only one: of two decisions at once, the second insert
/// fails and its maker is told which one won.
fn run_v6(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE decisions (
             seq INTEGER PRIMARY KEY,
             task_id TEXT NOT NULL,
             stage TEXT NOT NULL CHECK (stage IN ('run', 'publish')),
             verdict TEXT NOT NULL CHECK (verdict IN ('approve', 'reject')),
             by TEXT NOT NULL,
             at TEXT NOT NULL,
             note TEXT,
             output_sha256 TEXT
         );
         CREATE UNIQUE INDEX decisions_once
             ON decisions (task_id, stage, IFNULL(output_sha256, ''));",
    )
}

/// Schema version 7 of a run store (issue 37): the run's provider
/// batches (`ctx run --batch`), journaled before ctx waits on one, so a
/// resume finds what a dead process left in flight (docs/runs.md,
/// "Durable batches"):
///
/// * `batches`: one row per uploaded input file (`file_id`, the model,
///   the session and time it was uploaded in), then its batch (`batch_id`,
///   created at, `created_unix_ms` for a deadline), the status and request
///   counts last read, when it ended, when its answers were all handed
///   out (`collected_at`), when an input file that never became a batch
///   was deleted, and when `ctx runs cancel` cancelled it;
/// * `batch_requests`: each request of a file: its `custom_id`, task,
///   attempt, the SHA-256 of its body, its output bound.
fn run_v7(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE batches (
             file_id TEXT PRIMARY KEY,
             model TEXT NOT NULL,
             session INTEGER,
             uploaded_at TEXT NOT NULL,
             batch_id TEXT UNIQUE,
             created_at TEXT,
             created_unix_ms INTEGER,
             status TEXT,
             total INTEGER NOT NULL DEFAULT 0,
             completed INTEGER NOT NULL DEFAULT 0,
             failed INTEGER NOT NULL DEFAULT 0,
             ended_at TEXT,
             collected_at TEXT,
             file_deleted_at TEXT,
             cancel_requested_at TEXT
         );
         CREATE TABLE batch_requests (
             file_id TEXT NOT NULL REFERENCES batches(file_id),
             custom_id TEXT NOT NULL,
             task_id TEXT NOT NULL,
             attempt INTEGER NOT NULL,
             body_sha256 TEXT NOT NULL,
             max_output_bytes INTEGER NOT NULL,
             PRIMARY KEY (file_id, custom_id)
         ) WITHOUT ROWID;",
    )
}

/// Schema version 1 of the cache index at the store root.
fn cache_v1(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE entries (
            key            TEXT PRIMARY KEY,
            engine         TEXT NOT NULL,
            model          TEXT,
            output         TEXT NOT NULL,
            response_model TEXT,
            usage_json     TEXT,
            finish_reason  TEXT,
            run_id         TEXT,
            task_id        TEXT NOT NULL,
            created_at     TEXT NOT NULL
        );
        CREATE INDEX entries_by_run ON entries(run_id);",
    )?;
    tx.pragma_update(None, "application_id", CACHE_APPLICATION_ID)
}

/// `PRAGMA application_id` of the period-budget ledger: `ctxB` in ASCII.
pub const BUDGET_APPLICATION_ID: i64 = 0x6374_7842;

/// The period-budget ledger's migrations, oldest first.
pub const BUDGET_MIGRATIONS: &[Migration] = &[budget_v1];

/// Schema version 1 of the period-budget ledger (`budgets.sqlite`):
///
/// * `spent`: what the settled runs of a budget spent in a period (by the
///   period's first day, `YYYY-MM-DD`), in pico-dollars;
/// * `holds`: what each run still running holds of it.
fn budget_v1(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE spent (
            name         TEXT NOT NULL,
            period_start TEXT NOT NULL,
            picos        INTEGER NOT NULL CHECK (picos >= 0),
            PRIMARY KEY (name, period_start)
        );
        CREATE TABLE holds (
            name         TEXT NOT NULL,
            period_start TEXT NOT NULL,
            holder       TEXT NOT NULL,
            picos        INTEGER NOT NULL CHECK (picos >= 0),
            created_at   TEXT NOT NULL,
            PRIMARY KEY (name, period_start, holder)
        );",
    )?;
    tx.pragma_update(None, "application_id", BUDGET_APPLICATION_ID)
}

/// How a connection may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    Write,
    /// Read and write, creating the file.
    Create,
}

/// How long a connection waits on another connection's lock.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens `path`, waiting up to [`BUSY_TIMEOUT`] on another connection's lock.
pub(crate) fn connect(path: &Path, access: Access) -> Result<Connection> {
    let flags = match access {
        Access::Read => OpenFlags::SQLITE_OPEN_READ_ONLY,
        Access::Write => OpenFlags::SQLITE_OPEN_READ_WRITE,
        Access::Create => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(Error::sql(path))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(Error::sql(path))?;
    Ok(conn)
}

/// Sets the writer pragmas. Called only after [`inspect`] accepted the file
/// (or on a file this process just created), because switching to WAL
/// writes the header.
pub(crate) fn set_writer_pragmas(conn: &Connection, path: &Path, synchronous: &str) -> Result<()> {
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(Error::sql(path))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Foreign {
            path: path.to_path_buf(),
            detail: format!("could not switch to WAL journal mode (got `{mode}`)"),
        });
    }
    conn.pragma_update(None, "synchronous", synchronous)
        .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
        .map_err(Error::sql(path))
}

/// Reads the header fields and decides whether `path` is a store of the
/// kind `application_id` this build can open. Returns its version (which
/// may be older than `migrations.len()`: the caller migrates). Writes
/// nothing.
pub(crate) fn inspect(
    conn: &Connection,
    path: &Path,
    application_id: i64,
    migrations: &[Migration],
) -> Result<i64> {
    let corrupt = |source| Error::Corrupt {
        path: path.to_path_buf(),
        source,
    };
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(corrupt)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(corrupt)?;
    if app != application_id {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            .map_err(corrupt)?;
        let tables: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(corrupt)?;
        let detail = if tables.is_empty() {
            "an empty SQLite database (the run was never initialised)".to_string()
        } else {
            let shown: Vec<&str> = tables.iter().take(8).map(String::as_str).collect();
            format!(
                "a SQLite database of another application (application_id {app:#x}, tables: {}{})",
                shown.join(", "),
                if tables.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                }
            )
        };
        return Err(Error::Foreign {
            path: path.to_path_buf(),
            detail,
        });
    }
    let supported = migrations.len() as i64;
    if version > supported {
        return Err(Error::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported,
        });
    }
    Ok(version)
}

/// Opens (creating if needed) a database of the root that several ctx
/// processes share (the cache index, the period-budget ledger), of kind
/// `application_id`, migrated. A foreign, corrupt or newer file is reported
/// and left untouched.
pub(crate) fn open_shared(
    path: &Path,
    application_id: i64,
    migrations: &[Migration],
) -> Result<Connection> {
    // Several ctx processes may open (and create) the file at once.
    // SQLite's busy timeout covers ordinary reads and writes, but not
    // every step of creating a file: switching a fresh file to WAL can
    // answer "database is locked" at once while another connection is
    // doing the same. Those steps are idempotent, so the whole open is
    // tried again, for as long as the busy timeout would have waited.
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        match open_shared_once(path, application_id, migrations) {
            Err(e) if e.is_busy() && std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

fn open_shared_once(
    path: &Path,
    application_id: i64,
    migrations: &[Migration],
) -> Result<Connection> {
    let existed = path.is_file() && std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    let mut conn = connect(path, Access::Create)?;
    if existed {
        match inspect(&conn, path, application_id, migrations) {
            Ok(_) => {}
            // Another process (or thread) created the file a moment ago
            // and has not committed its first migration yet: switching
            // to WAL writes the header before the schema exists. An
            // empty database holds nothing to protect, and `migrate`
            // below initialises it exactly once (an IMMEDIATE
            // transaction that re-reads the version). A run store,
            // which has one writer, keeps refusing such a file.
            //
            // The other may also commit its migration between the read
            // that found the file empty and the one asking whether it is
            // blank: then the file is a store of the kind asked for, and
            // inspecting it again says so.
            Err(Error::Foreign { .. })
                if is_blank(&conn, path)?
                    || inspect(&conn, path, application_id, migrations).is_ok() => {}
            Err(e) => return Err(e),
        }
    }
    set_writer_pragmas(&conn, path, "NORMAL")?;
    migrate(&mut conn, path, migrations)?;
    Ok(conn)
}

/// Whether `path` is a SQLite database with nothing in it yet: no
/// application id, no schema version, no table. Writes nothing.
pub(crate) fn is_blank(conn: &Connection, path: &Path) -> Result<bool> {
    let corrupt = |source| Error::Corrupt {
        path: path.to_path_buf(),
        source,
    };
    conn.query_row(
        "SELECT (SELECT application_id FROM pragma_application_id) = 0
            AND (SELECT user_version FROM pragma_user_version) = 0
            AND NOT EXISTS (SELECT 1 FROM sqlite_schema)",
        [],
        |r| r.get(0),
    )
    .map_err(corrupt)
}

/// Applies every migration after the file's current version, each in its
/// own `IMMEDIATE` transaction that re-reads the version first (so two
/// processes opening one file at once migrate it once). Returns the version
/// reached.
pub fn migrate(conn: &mut Connection, path: &Path, migrations: &[Migration]) -> Result<i64> {
    for (i, step) in migrations.iter().enumerate() {
        let target = i as i64 + 1;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::sql(path))?;
        let current: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(Error::sql(path))?;
        if current >= target {
            continue;
        }
        step(&tx).map_err(Error::sql(path))?;
        tx.pragma_update(None, "user_version", target)
            .map_err(Error::sql(path))?;
        tx.commit().map_err(Error::sql(path))?;
    }
    Ok(migrations.len() as i64)
}

/// `PRAGMA quick_check`: `Ok(())` when SQLite finds no damage.
pub(crate) fn quick_check(conn: &Connection, path: &Path) -> Result<()> {
    let verdict: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|source| Error::Corrupt {
            path: path.to_path_buf(),
            source,
        })?;
    if verdict == "ok" {
        Ok(())
    } else {
        Err(Error::Foreign {
            path: path.to_path_buf(),
            detail: format!("damaged: PRAGMA quick_check says `{verdict}`"),
        })
    }
}
