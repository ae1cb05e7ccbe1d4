//! The durable store through its public API: round trips, the lock, bad
//! input, migrations, and the latest-per-task semantics against
//! `MemoryStore`.

use std::path::Path;

use ctx_model::{Plan, ResultMetadata, TaskExecutionResult, TaskStatus, TokenUsage};
use ctx_store::{ExecutionStore, MemoryStore};
use ctx_store_sqlite::{
    Error, NewRun, RUN_MIGRATIONS, RUN_SCHEMA_VERSION, RunRoot, RunState, RunView, STORE_FILE,
    SessionEnd, SqliteStore, migrate, sha256_hex,
};
use proptest::prelude::*;
use rusqlite::Connection;

fn plan() -> Plan {
    serde_json::from_str(
        r#"{"schema_version": 1, "goal": "test goal", "sub_tasks": [
        {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pa", "api_key": "sk-secret-123"}}},
        {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pb"}}},
        {"id": "c", "description": "C", "dependencies": ["b"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pc"}}}]}"#,
    )
    .unwrap()
}

fn new_run(plan: &Plan) -> NewRun<'_> {
    NewRun {
        plan,
        engine: "dry-run",
        plan_source: Some("plan.json"),
        inputs: None,
    }
}

fn completed(id: &str, output: &str) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(id, TaskStatus::Completed);
    r.output = output.into();
    r.prompt = Some(format!("prompt of {id}"));
    r.metadata = ResultMetadata {
        execution_time_ms: Some(12),
        prompt_tokens: Some(3),
        tokens_used: Some(TokenUsage {
            prompt_tokens: 3,
            completion_tokens: 4,
            total_tokens: 7,
            cached_tokens: None,
            cache_write_tokens: None,
            partial: false,
            prompt_counted: false,
            service_tier: None,
        }),
        model: Some("m".into()),
        ..ResultMetadata::default()
    };
    r
}

fn file_digest(p: &Path) -> String {
    sha256_hex(&std::fs::read(p).unwrap())
}

#[test]
fn results_round_trip_with_history() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let p = plan();
    let store = root.create(&new_run(&p)).unwrap();
    let mut started = TaskExecutionResult::new("a", TaskStatus::InProgress);
    started.prompt = Some("prompt of a".into());
    store.store(started).unwrap();
    let a = completed("a", "out a");
    store.store(a.clone()).unwrap();
    let mut failed = TaskExecutionResult::new("b", TaskStatus::Failed);
    failed.error = Some("exit 1: boom".into());
    store.store(failed.clone()).unwrap();

    assert_eq!(store.get_by_task_id("a").unwrap(), Some(a.clone()));
    assert_eq!(store.get_by_task_id("zz").unwrap(), None);
    assert_eq!(
        store
            .get_by_dependency_ids(&["b".into(), "zz".into(), "a".into()])
            .unwrap(),
        vec![failed.clone(), a.clone()]
    );
    store.finish(SessionEnd::Finished).unwrap();
    let id = store.run_id().to_string();
    drop(store);

    let view = root.open(&id).unwrap();
    let results = view.results().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].result, a);
    assert_eq!(
        results[0].prompt_hash.as_deref(),
        Some(sha256_hex(b"prompt of a").as_str())
    );
    assert!(results[0].fingerprint.is_some());
    let history = view.history("a").unwrap();
    assert_eq!(
        history.iter().map(|h| h.result.status).collect::<Vec<_>>(),
        [TaskStatus::InProgress, TaskStatus::Completed]
    );
    // The start of a's execution is its in_progress row.
    assert_eq!(results[0].started_seq, Some(history[0].seq));
    // ...and its time is that row's (for `ctx runs report`), on both reads.
    assert_eq!(
        results[0].started_at.as_deref(),
        Some(history[0].recorded_at.as_str())
    );
    assert_eq!(
        view.result("a").unwrap().unwrap().started_at,
        results[0].started_at
    );
    assert!(history.iter().all(|h| h.started_at.is_none()));
    let counts = view.status_counts().unwrap();
    assert_eq!((counts.completed, counts.failed, counts.pending), (1, 1, 1));
    assert_eq!(view.state().unwrap(), RunState::Failed);
    assert_eq!(view.integrity_check().unwrap(), "ok");
    // Also reachable by directory.
    let by_dir = root.open(view.dir().to_str().unwrap()).unwrap();
    assert_eq!(by_dir.run_id(), id);
}

/// A task whose checks failed is asked again: each attempt stores its
/// prompt as a new `in_progress` row. The execution started at the first
/// one, while it runs and once it ends; a resumed session's `in_progress`
/// row starts a new execution.
#[test]
fn a_retried_task_starts_at_its_first_attempt() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let p = plan();
    let store = root.create(&new_run(&p)).unwrap();
    let attempt = |n: u32| {
        let mut r = TaskExecutionResult::new("a", TaskStatus::InProgress);
        r.prompt = Some(format!("prompt of a, attempt {n}"));
        r
    };
    store.store(attempt(1)).unwrap();
    store.store(attempt(2)).unwrap();
    let id = store.run_id().to_string();
    let first = || root.open(&id).unwrap().history("a").unwrap()[0].seq;
    let started = || root.open(&id).unwrap().result("a").unwrap().unwrap();
    assert_eq!(started().started_seq, Some(first()), "while the retry runs");
    store.store(completed("a", "out a")).unwrap();
    assert_eq!(started().started_seq, Some(first()), "once it ended");
    drop(store); // a crash: no finish

    let dir = root.open(&id).unwrap().dir().to_path_buf();
    let (resumed, _) = SqliteStore::resume(&dir, &new_run(&p)).unwrap();
    resumed.store(attempt(1)).unwrap();
    let history = root.open(&id).unwrap().history("a").unwrap();
    assert_eq!(started().started_seq, Some(history.last().unwrap().seq));
}

#[test]
fn secrets_in_params_never_reach_the_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let p = plan();
    let store = root.create(&new_run(&p)).unwrap();
    store.store(completed("a", "out")).unwrap();
    let dir = store.dir().to_path_buf();
    let stored_plan = store.view().plan().unwrap();
    assert_eq!(
        stored_plan.sub_tasks[0].tool_or_prompt.params.extra["api_key"],
        "[redacted]"
    );
    drop(store);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let hay = String::from_utf8_lossy(&bytes);
        assert!(!hay.contains("sk-secret-123"));
    }
}

#[test]
fn second_writer_is_refused_with_the_holders_pid() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let p = plan();
    let store = root.create(&new_run(&p)).unwrap();
    let dir = store.dir().to_path_buf();
    let err = SqliteStore::resume(&dir, &new_run(&p)).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, Error::Locked { pid: Some(pid), .. } if pid == std::process::id()),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "run {} is being executed by another ctx process (pid {})",
            store.run_id(),
            std::process::id()
        )),
        "{msg}"
    );
    // Readers are not blocked, and see the run as running.
    let view = RunView::open(&dir).unwrap();
    assert_eq!(view.state().unwrap(), RunState::Running);
    assert!(matches!(root.gc(0, false).unwrap().running.as_slice(), [id] if id == store.run_id()));
    drop(store);
    assert_eq!(view.state().unwrap(), RunState::Crashed);
    let (again, _) = SqliteStore::resume(&dir, &new_run(&p)).unwrap();
    assert_eq!(again.session(), 2);
}

#[test]
fn create_in_refuses_an_existing_run_and_a_path_under_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan();
    let dir = tmp.path().join("explicit");
    let store = SqliteStore::create_in(&dir, &new_run(&p)).unwrap();
    drop(store);
    let before = file_digest(&dir.join(STORE_FILE));
    let err = SqliteStore::create_in(&dir, &new_run(&p)).unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err}");
    assert!(err.to_string().contains("explicit"), "{err}");
    assert_eq!(file_digest(&dir.join(STORE_FILE)), before);

    // A directory that cannot be created (its parent is a regular file):
    // the error names the path, even for root.
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let under = file.join("run");
    let err = SqliteStore::create_in(&under, &new_run(&p)).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.to_string().contains("plain-file/run"), "{err}");
    let err = RunRoot::new(&file).create(&new_run(&p)).unwrap_err();
    assert!(err.to_string().contains("plain-file"), "{err}");
}

/// A store directory ctx cannot write into. This was a read-only
/// directory, which root (how CI runs) writes into anyway, so the test
/// skipped there; a path that is a regular file fails for every user (a
/// directory under a regular file is tested above).
#[test]
fn a_store_directory_that_is_a_file_is_a_clear_error_for_every_user() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, "kept").unwrap();
    let err = SqliteStore::create_in(&file, &new_run(&p)).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.to_string().contains("not-a-dir"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");
}

#[test]
fn missing_runs_and_non_run_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path().join("runs"));
    let err = root.open("20261130T090000.000Z-00000000").unwrap_err();
    assert!(err.is_not_found());
    assert!(
        err.to_string()
            .contains("run `20261130T090000.000Z-00000000` not found"),
        "{err}"
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = root.open(empty.to_str().unwrap()).unwrap_err();
    assert!(matches!(err, Error::NoStore { .. }), "{err}");
    let p = plan();
    let err = SqliteStore::resume(&empty, &new_run(&p)).unwrap_err();
    assert!(matches!(err, Error::NoStore { .. }), "{err}");
    // Nothing was written into the directory.
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// Writes `contents` as `dir/store.sqlite` and checks that opening and
/// resuming fail with `expect` in the message and leave the file as it was.
fn assert_refused(dir: &Path, expect: &str) {
    let path = dir.join(STORE_FILE);
    let before = file_digest(&path);
    let p = plan();
    let e1 = RunView::open(dir).unwrap_err().to_string();
    let e2 = SqliteStore::resume(dir, &new_run(&p))
        .unwrap_err()
        .to_string();
    for e in [&e1, &e2] {
        assert!(e.contains(expect), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
    assert_eq!(file_digest(&path), before, "the file was modified");
    assert!(
        !dir.join("store.sqlite-wal").exists()
            || std::fs::metadata(dir.join("store.sqlite-wal"))
                .unwrap()
                .len()
                == 0
    );
}

#[test]
fn a_text_file_named_store_sqlite_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join(STORE_FILE),
        "these are my notes, not a database\n".repeat(50),
    )
    .unwrap();
    assert_refused(tmp.path(), "not a SQLite database, or corrupt");
}

#[test]
fn a_foreign_sqlite_database_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let c = Connection::open(tmp.path().join(STORE_FILE)).unwrap();
        c.execute_batch("CREATE TABLE customers (id INTEGER, name TEXT); INSERT INTO customers VALUES (1, 'x');")
            .unwrap();
    }
    assert_refused(tmp.path(), "application_id 0x0, tables: customers");
    // An empty SQLite file (0 bytes) is not a run either.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join(STORE_FILE), "").unwrap();
    assert_refused(tmp.path(), "never initialised");
}

#[test]
fn a_store_from_a_newer_ctx_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan();
    let dir = tmp.path().join("run");
    let store = SqliteStore::create_in(&dir, &new_run(&p)).unwrap();
    store.store(completed("a", "out")).unwrap();
    drop(store);
    {
        let c = Connection::open(dir.join(STORE_FILE)).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    assert_refused(
        &dir,
        &format!(
            "store schema version 99 is newer than this ctx supports ({})",
            RUN_SCHEMA_VERSION
        ),
    );
}

#[test]
fn a_truncated_store_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan();
    let dir = tmp.path().join("run");
    let store = SqliteStore::create_in(&dir, &new_run(&p)).unwrap();
    for i in 0..200 {
        store
            .store(completed(&format!("t{i}"), &"x".repeat(2000)))
            .unwrap();
    }
    drop(store); // checkpoints the WAL into the main file
    let path = dir.join(STORE_FILE);
    let bytes = std::fs::read(&path).unwrap();
    // Keep the header, damage the pages after it.
    let mut damaged = bytes[..bytes.len() / 2].to_vec();
    damaged.extend(std::iter::repeat_n(0xA5u8, 4096));
    std::fs::write(&path, &damaged).unwrap();
    let err = SqliteStore::resume(&dir, &new_run(&p))
        .unwrap_err()
        .to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        damaged,
        "the file was modified"
    );
}

/// The schema version after this build's, of a hypothetical future ctx:
/// one added column.
fn test_next(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE sessions ADD COLUMN note TEXT; UPDATE sessions SET note = 'migrated';",
    )
}

#[test]
fn migrations_carry_an_older_store_forward() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan();
    let dir = tmp.path().join("run");
    let store = SqliteStore::create_in(&dir, &new_run(&p)).unwrap();
    store
        .store(completed("a", "kept across the migration"))
        .unwrap();
    drop(store);
    let path = dir.join(STORE_FILE);
    let mut c = Connection::open(&path).unwrap();
    let mut with_next: Vec<ctx_store_sqlite::Migration> = RUN_MIGRATIONS.to_vec();
    with_next.push(test_next);
    let next = RUN_SCHEMA_VERSION + 1;
    assert_eq!(migrate(&mut c, &path, &with_next).unwrap(), next);
    // Applying again is a no-op (each step re-checks the version).
    assert_eq!(migrate(&mut c, &path, &with_next).unwrap(), next);
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, next);
    let note: String = c
        .query_row("SELECT note FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(note, "migrated");
    let out: String = c
        .query_row("SELECT output FROM attempts WHERE task_id = 'a'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(out, "kept across the migration");
    drop(c);
    // This build does not know the next version: the store is "newer".
    let err = RunView::open(&dir).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NewerSchema { found, supported, .. } if found == next && supported == RUN_SCHEMA_VERSION
        ),
        "{err}"
    );
}

/// A run directory `under/run` whose store has the first `version`
/// migrations only: one an older ctx wrote.
fn store_at_version(under: &Path, version: usize) -> (std::path::PathBuf, Connection) {
    let dir = under.join("run");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join(STORE_FILE);
    let mut c = Connection::open(&path).unwrap();
    let reached = migrate(&mut c, &path, &RUN_MIGRATIONS[..version]).unwrap();
    assert_eq!(reached, version as i64);
    (dir, c)
}

/// A run directory written before schema version 2 (issue 22's inputs
/// and published files) opens, is carried forward, and reads as a run
/// with nothing filled and nothing published.
#[test]
fn a_version_1_store_reads_with_no_inputs_and_nothing_published() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, c) = store_at_version(tmp.path(), 1);
    let plan_json = serde_json::to_string(&plan()).unwrap();
    c.execute_batch(&format!(
        "INSERT INTO run VALUES (1, 'old', '2026-01-01T00:00:00Z');
         INSERT INTO sessions (kind, started_at, pid, ctx_version, engine, plan_json, plan_hash)
         VALUES ('run', '2026-01-01T00:00:00Z', 1, '0.1.0', 'dry-run', '{}', 'h');",
        plan_json.replace('\'', "''")
    ))
    .unwrap();
    drop(c);
    let view = RunView::open(&dir).unwrap();
    assert_eq!(view.inputs().unwrap(), None);
    assert_eq!(view.published().unwrap(), []);
    assert_eq!(view.fallback().unwrap(), None);
    assert_eq!(view.plan().unwrap(), plan());
}

/// Schema version 3 (issue 38): an attempt keeps the raw output beside
/// the cleaned one; an attempt stored under version 2 reads with none.
#[test]
fn the_raw_output_is_kept_beside_the_cleaned_one_and_older_rows_read_without() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, c) = store_at_version(tmp.path(), 2);
    c.execute_batch(
        "INSERT INTO run VALUES (1, 'old', '2026-01-01T00:00:00Z');
         INSERT INTO sessions (kind, started_at, pid, ctx_version, engine, plan_json, plan_hash)
         VALUES ('run', '2026-01-01T00:00:00Z', 1, '0.1.0', 'dry-run', '{}', 'h');
         INSERT INTO attempts (task_id, session, recorded_at, status, output, metadata_json, engine)
         VALUES ('a', 1, '2026-01-01T00:00:01Z', 'completed', 'old', '{}', 'dry-run');
         INSERT INTO task_results VALUES ('a', 'completed', 1, 1);",
    )
    .unwrap();
    drop(c);
    let view = RunView::open(&dir).unwrap();
    let old = view.results().unwrap();
    assert_eq!(old[0].result.output, "old");
    assert_eq!(old[0].result.raw_output, None);

    let root = RunRoot::new(tmp.path().join("new"));
    let s = root.create(&new_run(&plan())).unwrap();
    let mut r = completed("a", "# Report\n");
    r.raw_output = Some("```markdown\n# Report\n```\nDone!\n".into());
    s.store(r.clone()).unwrap();
    s.store(completed("b", "plain")).unwrap();
    s.finish(SessionEnd::Finished).unwrap();
    let view = RunView::open(s.dir()).unwrap();
    let read = view.results().unwrap();
    let of = |id: &str| read.iter().find(|x| x.result.task_id == id).unwrap();
    assert_eq!(of("a").result.output, r.output);
    assert_eq!(of("a").result.raw_output, r.raw_output);
    assert_eq!(of("b").result.raw_output, None);
}

#[test]
fn list_and_gc() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let p = plan();
    let mut ids = Vec::new();
    for _ in 0..4 {
        let s = root.create(&new_run(&p)).unwrap();
        s.store(completed("a", "x")).unwrap();
        s.finish(SessionEnd::Finished).unwrap();
        ids.push(s.run_id().to_string());
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // A directory that is not a run, and one that looks like one but is
    // damaged: gc never touches the first; list reports the second.
    std::fs::create_dir(tmp.path().join("notes")).unwrap();
    let running = root.create(&new_run(&p)).unwrap();
    let (runs, bad) = root.list().unwrap();
    assert!(bad.is_empty());
    assert_eq!(runs.len(), 5);
    assert_eq!(runs[0].id, ids[0]);
    assert_eq!(runs[0].plan.as_deref(), Some("plan.json"));
    assert_eq!(runs[0].counts.completed, 1);
    assert_eq!(runs[4].state, RunState::Running);

    let report = root.gc(1, false).unwrap();
    assert_eq!(report.kept, [running.run_id().to_string()]);
    assert_eq!(report.removed, ids);
    // keep 0: the running run stays anyway.
    let report = root.gc(0, false).unwrap();
    assert_eq!(report.running, [running.run_id().to_string()]);
    assert!(tmp.path().join("notes").is_dir());
    assert!(running.dir().is_dir());
}

#[derive(Debug, Clone)]
enum Op {
    Store(usize, TaskStatus, String),
    Get(usize),
    Deps(Vec<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    let status = prop_oneof![
        Just(TaskStatus::Pending),
        Just(TaskStatus::InProgress),
        Just(TaskStatus::Completed),
        Just(TaskStatus::Failed),
        Just(TaskStatus::Skipped),
    ];
    prop_oneof![
        3 => (0..6usize, status, ".{0,12}").prop_map(|(t, s, o)| Op::Store(t, s, o)),
        1 => (0..7usize).prop_map(Op::Get),
        1 => proptest::collection::vec(0..7usize, 0..5).prop_map(Op::Deps),
    ]
}

proptest! {
    // 24 cases locally (each opens a SQLite store), 256 in CI.
    #![proptest_config(ProptestConfig::with_cases(ctx_test_support::proptest_cases(24)))]

    /// Any sequence of calls gives the same answers as `MemoryStore`, and
    /// the history keeps every call.
    #[test]
    fn latest_per_task_matches_memory_store(ops in proptest::collection::vec(op(), 1..40)) {
        let tmp = tempfile::tempdir().unwrap();
        let p = plan();
        let sql = SqliteStore::create_in(tmp.path(), &new_run(&p)).unwrap();
        let mem = MemoryStore::new();
        let id = |i: usize| format!("t{i}");
        let mut stores = 0;
        for op in ops {
            match op {
                Op::Store(t, s, o) => {
                    let mut r = TaskExecutionResult::new(id(t), s);
                    r.output = o;
                    sql.store(r.clone()).unwrap();
                    mem.store(r).unwrap();
                    stores += 1;
                }
                Op::Get(t) => prop_assert_eq!(sql.get_by_task_id(&id(t)).unwrap(), mem.get_by_task_id(&id(t)).unwrap()),
                Op::Deps(ts) => {
                    let ids: Vec<String> = ts.into_iter().map(id).collect();
                    prop_assert_eq!(sql.get_by_dependency_ids(&ids).unwrap(), mem.get_by_dependency_ids(&ids).unwrap());
                }
            }
        }
        prop_assert_eq!(sql.all_results().unwrap(), mem.all_results().unwrap());
        let history: usize = (0..6).map(|t| sql.view().history(&id(t)).unwrap().len()).sum();
        prop_assert_eq!(history, stores);
    }
}

/// Schema version 5 (issue 38): the files a session published under
/// version 4 become the run's first publish, read back as what is in
/// effect, with no digests (so they cannot be undone); a publish recorded
/// outside any session (`ctx runs publish`) and its undo are kept in
/// order, and an undone publish is no longer in effect.
#[test]
fn publishes_carry_forward_and_an_undone_publish_is_no_longer_in_effect() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, c) = store_at_version(tmp.path(), 4);
    let plan_json = serde_json::to_string(&plan()).unwrap();
    c.execute_batch(&format!(
        "INSERT INTO run VALUES (1, 'old', '2026-01-01T00:00:00Z');
         INSERT INTO sessions (kind, started_at, finished_at, pid, ctx_version, engine, plan_json, plan_hash, published_json)
         VALUES ('run', '2026-01-01T00:00:00Z', '2026-01-01T00:00:05Z', 1, '0.1.0', 'dry-run', '{}', 'h',
                 '[{{\"task_id\":\"a\",\"path\":\"/site/a.md\"}}]');",
        plan_json.replace('\'', "''")
    ))
    .unwrap();
    drop(c);
    let old = ctx_store::Published {
        task_id: "a".into(),
        path: "/site/a.md".into(),
        sha256: None,
        old_sha256: None,
        size: None,
        published_at: None,
    };
    let view = RunView::open(&dir).unwrap();
    assert_eq!(view.published().unwrap(), std::slice::from_ref(&old));
    let events = view.publish_events().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].at, "2026-01-01T00:00:05Z");
    drop(view);
    let log = ctx_store_sqlite::PublishLog::open(&dir).unwrap();
    let new = ctx_store::Published {
        sha256: Some("ab".into()),
        ..old.clone()
    };
    assert_eq!(log.record_publish(std::slice::from_ref(&new)).unwrap(), 2);
    assert_eq!(log.view().published().unwrap(), [new]);
    assert_eq!(
        log.record_unpublish(&[2], std::slice::from_ref(&old))
            .unwrap(),
        3
    );
    // The earlier publish is in effect again; the undo is recorded.
    assert_eq!(log.view().published().unwrap(), [old]);
    let events = log.view().publish_events().unwrap();
    assert_eq!(events[1].undone_by, Some(3));
    assert_eq!(events[2].kind, ctx_store::PublishKind::Unpublish);
    // A publish outside any session opens none.
    assert_eq!(log.view().sessions().unwrap().len(), 1);
}

/// Decisions on a gate (schema 6): recorded while a writer holds the
/// run (no lock taken), read back by the writer's store and the view,
/// one per gate however many threads decide at once.
#[test]
fn decisions_are_recorded_beside_a_writer_and_one_wins_a_race() {
    use ctx_model::approval::{Approval, GateStage, Verdict};
    use ctx_store::{DecisionRefused, DecisionRequest};
    let tmp = tempfile::tempdir().unwrap();
    let mut p = plan();
    p.sub_tasks[1].approval = Some(Approval {
        before: GateStage::Run,
        message: None,
    });
    let store = SqliteStore::create(tmp.path(), &new_run(&p)).unwrap();
    let dir = store.dir().to_path_buf();
    let threads: Vec<_> = (0..4)
        .map(|k| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let req = DecisionRequest {
                    task_id: "b".into(),
                    verdict: if k % 2 == 0 {
                        Verdict::Approve
                    } else {
                        Verdict::Reject
                    },
                    by: format!("user{k}"),
                    note: Some(format!("note {k}")),
                };
                ctx_store_sqlite::decide(&dir, &req)
            })
        })
        .collect();
    let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let won: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    for lost in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(
            matches!(lost, Error::Decision(d) if matches!(**d, DecisionRefused::AlreadySettled { .. })),
            "{lost}"
        );
    }
    let seen = store.decisions().unwrap();
    assert_eq!(seen, vec![won[0].clone()]);
    assert_eq!(RunView::open(&dir).unwrap().decisions().unwrap(), seen);
    // A task with no gate is refused, nothing written.
    let none = ctx_store_sqlite::decide(
        &dir,
        &DecisionRequest {
            task_id: "a".into(),
            verdict: Verdict::Approve,
            by: "u".into(),
            note: None,
        },
    );
    assert!(matches!(none, Err(Error::Decision(_))));
    assert_eq!(store.decisions().unwrap().len(), 1);
}
