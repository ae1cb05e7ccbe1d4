//! The store against a real PostgreSQL (see tests/support).

mod support;

use std::time::Duration;

use ctx_model::{TaskExecutionResult, TaskStatus};
use ctx_store::ExecutionStore;
use ctx_store_postgres::{ClaimStore, Commit, Error, PgStore, RegisterRun, StoreOptions, StoreUrl};
use ctx_test_support::plan;

fn open(url: &str) -> Result<PgStore, Error> {
    PgStore::open(&StoreUrl::parse(url, |_| None)?, StoreOptions::default())
}

fn done(id: &str) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(id, TaskStatus::Completed);
    r.output = format!("out {id}");
    r
}

const LEASE: Duration = Duration::from_secs(30);

#[test]
fn an_empty_database_is_migrated_and_reopened() {
    let Some(url) = support::fresh_db("migrate") else {
        return;
    };
    open(&url).unwrap();
    // Twice: the second open finds version 1 and changes nothing.
    let store = open(&url).unwrap();
    assert!(
        !store.display_url().contains(":ctx@"),
        "{}",
        store.display_url()
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let Some(url) = support::fresh_db("newer") else {
        return;
    };
    open(&url).unwrap();
    support::sql(&url, &["UPDATE ctx_meta SET schema_version = 99"]);
    let e = open(&url).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NewerSchema {
                found: 99,
                known: ctx_store_postgres::SCHEMA_VERSION,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("upgrade ctx"), "{e}");
}

#[test]
fn a_foreign_database_is_refused_and_left_alone() {
    let Some(url) = support::fresh_db("foreign") else {
        return;
    };
    support::sql(&url, &["CREATE TABLE users (id int)"]);
    let e = open(&url).unwrap_err();
    assert!(matches!(e, Error::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("users"), "{e}");
    // Nothing was created.
    let e = open(&url).unwrap_err();
    assert!(e.to_string().contains("1 table(s)"), "{e}");

    let Some(url) = support::fresh_db("foreign_meta") else {
        return;
    };
    support::sql(
        &url,
        &[
            "CREATE TABLE ctx_meta (application text, schema_version int); INSERT INTO ctx_meta VALUES ('other', 1)",
        ],
    );
    let e = open(&url).unwrap_err();
    assert!(e.to_string().contains("`other`"), "{e}");
}

#[test]
fn a_wrong_password_and_a_dead_port_are_clear_errors_without_the_password() {
    let Some(url) = support::server_url("auth") else {
        return;
    };
    let bad = url.replacen(":ctx@", ":wrong-secret@", 1);
    assert_ne!(bad, url, "the test server's URL has the password `ctx`");
    let e = open(&bad).unwrap_err();
    assert!(matches!(e, Error::Auth { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("authentication failed"), "{msg}");
    assert!(!msg.contains("wrong-secret"), "{msg}");

    // A port nobody listens on (port 1 needs root to bind; nothing does).
    let e = open("postgres://u:hidden@127.0.0.1:1/x").unwrap_err();
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("cannot connect to postgres://u@127.0.0.1:1/x"),
        "{e}"
    );
    assert!(!e.to_string().contains("hidden"));
}

#[test]
fn claims_follow_readiness_and_the_critical_path() {
    let Some(url) = support::fresh_db("ready") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    // a → b → d, a → c; b is on the longer path.
    let p = plan(&[("a", &[]), ("c", &["a"]), ("b", &["a"]), ("d", &["b"])]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[3, 1, 2, 1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let a = rt
        .block_on(store.claim(Some(&run), "w1", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!((a.task_id.as_str(), a.attempt), ("a", 1));
    // Nothing else is ready until `a` commits.
    assert_eq!(
        rt.block_on(store.claim(Some(&run), "w2", LEASE)).unwrap(),
        None
    );
    assert_eq!(
        rt.block_on(store.complete(&a, &done("a"))).unwrap(),
        Commit::Committed
    );
    let first = rt
        .block_on(store.claim(None, "w2", LEASE))
        .unwrap()
        .unwrap();
    let second = rt
        .block_on(store.claim(None, "w2", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(
        [first.task_id.as_str(), second.task_id.as_str()],
        ["b", "c"]
    );
    assert_eq!(rt.block_on(store.claim(None, "w2", LEASE)).unwrap(), None);
    // Dependencies are read from the store by the worker of `b`.
    let cs = ClaimStore::new(store.clone(), first.clone());
    let deps = cs
        .get_by_dependency_ids(&["a".into(), "zz".into()])
        .unwrap();
    assert_eq!(deps.len(), 1);
    assert_eq!(deps[0].output, "out a");
    cs.store(done("b")).unwrap();
    assert_eq!(cs.outcome(), Some(Commit::Committed));
    rt.block_on(store.complete(&second, &done("c"))).unwrap();
    let d = rt
        .block_on(store.claim(Some(&run), "w3", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(d.task_id, "d");
    assert!(rt.block_on(store.has_open_runs(Some(&run), false)).unwrap());
    rt.block_on(store.complete(&d, &done("d"))).unwrap();
    assert!(!rt.block_on(store.has_open_runs(Some(&run), false)).unwrap());
    let info = rt.block_on(store.runs(Some(&run))).unwrap();
    assert_eq!(info[0].counts.completed, 4);
    assert!(!info[0].open);
    let all = store.run_store(&run).all_results().unwrap();
    assert_eq!(
        all.iter().map(|r| r.task_id.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c", "d"]
    );
}

/// A task whose checks failed is asked again, and each attempt stores its
/// prompt as a new `in_progress` result: through the single-writer
/// [`RunStore`](ctx_store_postgres::RunStore) those continue the execution,
/// so the task keeps the start its first one gave it.
#[test]
fn a_retried_task_keeps_its_first_start() {
    let Some(url) = support::fresh_db("retried") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[])]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    // A claim gives the task its sequence number (reads need one).
    let claim = rt
        .block_on(store.claim(Some(&run), "w1", LEASE))
        .unwrap()
        .unwrap();
    let writer = store.run_store(&run);
    let started = || {
        use ctx_store::RunHistory;
        let view = store.view(&run).unwrap();
        view.latest().unwrap()[0].started_at.clone().unwrap()
    };
    writer
        .store(TaskExecutionResult::new("a", TaskStatus::InProgress))
        .unwrap();
    let first = started();
    std::thread::sleep(Duration::from_millis(20));
    writer
        .store(TaskExecutionResult::new("a", TaskStatus::InProgress))
        .unwrap();
    assert_eq!(started(), first, "the retry's in_progress moved the start");
    writer.store(done("a")).unwrap();
    assert_eq!(started(), first);
    drop(claim);
}

#[test]
fn concurrent_claimers_never_get_the_same_task() {
    let Some(url) = support::fresh_db("skip_locked") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let ids: Vec<String> = (0..60).map(|i| format!("t{i:02}")).collect();
    let tasks: Vec<(&str, &[&str])> = ids.iter().map(|i| (i.as_str(), &[][..])).collect();
    let p = plan(&tasks);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[1; 60],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let mut got: Vec<String> = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for w in 0..8 {
            let (store, run) = (store.clone(), run.clone());
            set.spawn(async move {
                let mut mine = Vec::new();
                while let Some(c) = store
                    .claim(Some(&run), &format!("w{w}"), LEASE)
                    .await
                    .unwrap()
                {
                    mine.push(c.task_id);
                }
                mine
            });
        }
        let mut all = Vec::new();
        while let Some(r) = set.join_next().await {
            all.extend(r.unwrap());
        }
        all
    });
    got.sort();
    assert_eq!(got, ids);
}

#[test]
fn a_lapsed_lease_is_reclaimed_and_the_late_commit_refused() {
    let Some(url) = support::fresh_db("lease") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[]), ("b", &["a"])]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[2, 1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let short = Duration::from_millis(300);
    let old = rt
        .block_on(store.claim(Some(&run), "slow", short))
        .unwrap()
        .unwrap();
    assert!(rt.block_on(store.heartbeat(&old, short)).unwrap());
    // Not yet lapsed: nobody else gets it.
    assert_eq!(
        rt.block_on(store.claim(Some(&run), "other", LEASE))
            .unwrap(),
        None
    );
    std::thread::sleep(Duration::from_millis(700));
    let new = rt
        .block_on(store.claim(Some(&run), "other", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!((new.task_id.as_str(), new.attempt), ("a", 2));
    // The slow worker is fenced out everywhere.
    assert!(!rt.block_on(store.heartbeat(&old, short)).unwrap());
    let mut late = done("a");
    late.output = "late".into();
    assert_eq!(
        rt.block_on(store.complete(&old, &late)).unwrap(),
        Commit::Refused
    );
    assert_eq!(
        rt.block_on(store.complete(&new, &done("a"))).unwrap(),
        Commit::Committed
    );
    let info = &rt.block_on(store.runs(Some(&run))).unwrap()[0];
    assert_eq!(info.late_commits, 1);
    assert_eq!(info.reclaims, 1);
    let a = store.run_store(&run).get_by_task_id("a").unwrap().unwrap();
    assert_eq!(a.output, "out a");
    // A lapsed but not yet reclaimed lease refuses too: a result commits
    // only under a live lease.
    let b = rt
        .block_on(store.claim(Some(&run), "slow", short))
        .unwrap()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        rt.block_on(store.complete(&b, &done("b"))).unwrap(),
        Commit::Refused
    );
}

#[test]
fn a_failure_skips_its_dependents_in_the_commit_and_closes_the_run() {
    let Some(url) = support::fresh_db("failure") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    // `d` depends on `a` directly and through `c`: skipped once, as a
    // direct dependent. The store finds them from its edges.
    let p = plan(&[
        ("a", &[]),
        ("b", &["a"]),
        ("c", &["b"]),
        ("d", &["a", "c"]),
        ("x", &[]),
    ]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[4, 3, 2, 1, 1],
            engine: "dry-run",
            plan_source: Some("p.json"),
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let a = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(a.task_id, "a");
    let mut failed = TaskExecutionResult::new("a", TaskStatus::Failed);
    failed.error = Some("boom".into());
    assert_eq!(
        rt.block_on(store.complete(&a, &failed)).unwrap(),
        Commit::Committed
    );
    let x = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(x.task_id, "x");
    assert!(rt.block_on(store.has_open_runs(None, false)).unwrap());
    rt.block_on(store.complete(&x, &done("x"))).unwrap();
    assert!(!rt.block_on(store.has_open_runs(None, false)).unwrap());
    let rows = rt.block_on(store.tasks(&run)).unwrap();
    let st: Vec<_> = rows
        .iter()
        .map(|r| (r.task_id.as_str(), r.status))
        .collect();
    assert_eq!(
        st,
        [
            ("a", TaskStatus::Failed),
            ("b", TaskStatus::Skipped),
            ("c", TaskStatus::Skipped),
            ("d", TaskStatus::Skipped),
            ("x", TaskStatus::Completed)
        ]
    );
    let reasons: Vec<_> = rows[1..4]
        .iter()
        .map(|r| r.result.as_ref().unwrap().error.as_deref().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "dependency `a` failed",
            "upstream task `a` failed",
            "dependency `a` failed"
        ]
    );
    // A released claim is at once claimable again, with a new token.
    let p2 = plan(&[("r", &[])]);
    let run2 = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p2,
            priorities: &[1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let r1 = rt
        .block_on(store.claim(Some(&run2), "w", LEASE))
        .unwrap()
        .unwrap();
    assert!(rt.block_on(store.release(&r1)).unwrap());
    let r2 = rt
        .block_on(store.claim(Some(&run2), "v", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(r2.attempt, 2);
    let e = rt.block_on(store.plan("no-such-run")).unwrap_err();
    assert!(matches!(e, Error::NoRun { .. }), "{e}");
}

#[test]
fn a_resume_with_a_changed_plan_waits_for_live_claims_and_keeps_dropped_results() {
    use ctx_store::RunHistory;
    use ctx_store_postgres::Reopen;
    let Some(url) = support::fresh_db("reopen") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[]), ("b", &["a"]), ("x", &[])]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[3, 1, 2],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    for _ in 0..2 {
        let c = rt
            .block_on(store.claim(Some(&run), "w1", LEASE))
            .unwrap()
            .unwrap();
        rt.block_on(store.complete(&c, &done(&c.task_id))).unwrap();
    }
    // `b` is claimed now, under a live lease.
    let b = rt
        .block_on(store.claim(Some(&run), "w1", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(b.task_id, "b");
    // A changed plan (x dropped) must wait for it.
    let p2 = plan(&[("a", &[]), ("b", &["a"])]);
    let view = store.view(&run).unwrap();
    let decided = view.resume_plan(&p2, "dry-run").unwrap();
    assert_eq!(decided.dropped, ["x"]);
    let rerun: Vec<String> = decided.rerun_ids().into_iter().collect();
    assert_eq!(rerun, ["b"], "{decided:?}");
    let reopen = Reopen {
        plan: &p2,
        priorities: &[2, 1],
        engine: "dry-run",
        plan_source: None,
        rerun: &rerun,
        keep: &[],
        fresh: &[],
        inputs: None,
        budget: None,
        highs: &[],
    };
    let e = rt.block_on(store.reopen_run(&run, &reopen)).unwrap_err();
    assert!(matches!(e, Error::Busy { claimed: 1, .. }), "{e}");
    // The same plan leaves the live claim to its worker.
    let same = Reopen {
        plan: &p,
        priorities: &[3, 1, 2],
        ..reopen
    };
    assert_eq!(rt.block_on(store.reopen_run(&run, &same)).unwrap(), 0);
    assert_eq!(
        rt.block_on(store.complete(&b, &done("b"))).unwrap(),
        Commit::Committed
    );
    // Once it is done, the changed plan applies: `x` leaves the run's
    // tasks but its result is kept, with the fingerprint it was made under.
    let reopen = Reopen {
        rerun: &[],
        ..reopen
    };
    assert_eq!(rt.block_on(store.reopen_run(&run, &reopen)).unwrap(), 0);
    let tasks = rt.block_on(store.tasks(&run)).unwrap();
    assert_eq!(
        tasks.iter().map(|t| t.task_id.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let latest = view.latest().unwrap();
    let x = latest.iter().find(|r| r.result.task_id == "x").unwrap();
    assert_eq!(x.result.output, "out x");
    assert!(x.fingerprint.is_some());
    assert_eq!(view.header().unwrap().state, ctx_store::RunState::Completed);
    // Bringing `x` back unchanged reuses it.
    let decided = view.resume_plan(&p, "dry-run").unwrap();
    assert_eq!(decided.reuse, ["a", "b", "x"]);
}

#[test]
fn a_listener_wakes_when_a_commit_makes_a_task_ready() {
    let Some(url) = support::fresh_db("listen") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let listener = store.listen();
    let woke = |limit: Duration| {
        rt.block_on(async { tokio::time::timeout(limit, listener.ready()).await.is_ok() })
    };
    // Connecting wakes it once (whatever became ready before it listened).
    assert!(woke(Duration::from_secs(10)), "no wake-up on connecting");
    while woke(Duration::from_millis(300)) {}
    let p = plan(&[("a", &[]), ("b", &["a"])]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[2, 1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    assert!(woke(Duration::from_secs(5)), "no wake-up on registering");
    let a = rt
        .block_on(store.claim(Some(&run), "w1", LEASE))
        .unwrap()
        .unwrap();
    while woke(Duration::from_millis(300)) {}
    // Nothing is ready while `a` runs: no wake-up.
    assert!(!woke(Duration::from_millis(500)));
    rt.block_on(store.complete(&a, &done("a"))).unwrap();
    assert!(
        woke(Duration::from_secs(5)),
        "no wake-up when `b` became ready"
    );
    let b = rt
        .block_on(store.claim(Some(&run), "w1", LEASE))
        .unwrap()
        .unwrap();
    while woke(Duration::from_millis(300)) {}
    // A release makes `b` claimable again: a wake-up.
    assert!(rt.block_on(store.release(&b)).unwrap());
    assert!(woke(Duration::from_secs(5)), "no wake-up on a release");
}

/// `p` (`src`, a map task `m` over it, its reduce `r`) with `n` items of
/// `m` appended as ctx-deps' `plan_with_items` appends them, and their
/// store rows.
fn with_items(
    p: &ctx_model::Plan,
    n: usize,
) -> (ctx_model::Plan, Vec<ctx_store_postgres::ItemRow>) {
    let mut out = p.clone();
    let mut rows = Vec::new();
    for i in 0..n {
        let mut item = out.sub_tasks[1].clone();
        item.id = ctx_model::map::item_id("m", i);
        item.map = None;
        item.dependencies.clear();
        out.sub_tasks[1].dependencies.push(item.id.clone());
        rows.push(ctx_store_postgres::ItemRow {
            task_id: item.id.clone(),
            priority: 2,
            hash: format!("h{i}"),
            dependencies: Vec::new(),
            reused: None,
        });
        out.sub_tasks.push(item);
    }
    (out, rows)
}

/// A map's expansion is registered once, under its claim's fence and
/// only on the plan it was computed on, even when two tries race; its
/// items are claimed like any task, and a failed item releases the map
/// task for its join instead of skipping it.
#[test]
fn a_maps_items_are_registered_once_and_their_ends_release_the_map() {
    use ctx_store_postgres::{Expanded, Expansion};
    let Some(url) = support::fresh_db("expand") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let (p, run, m) = claimed_map(&store, &rt, 5);
    let (expanded, rows) = with_items(&p, 2);
    let go = |claim: &ctx_store_postgres::Claim, base: &str| {
        rt.block_on(store.expand_map(
            claim,
            &Expansion {
                base_hash: base,
                plan: &expanded,
                items: &rows,
            },
        ))
        .unwrap()
    };
    // Computed on another plan: nothing is written.
    assert_eq!(go(&m, "not-the-plan"), Expanded::Stale);
    // A claim that is not the map task's current one: fenced out.
    let mut old = m.clone();
    old.attempt -= 1;
    assert_eq!(go(&old, &m.plan_hash), Expanded::Lost);
    assert_eq!(rt.block_on(store.tasks(&run)).unwrap().len(), 3);
    // Two tries at once on the same plan: exactly one registers.
    let (a, b) = rt.block_on(async {
        let e = Expansion {
            base_hash: &m.plan_hash,
            plan: &expanded,
            items: &rows,
        };
        tokio::join!(store.expand_map(&m, &e), store.expand_map(&m, &e))
    });
    let mut outcomes = [a.unwrap(), b.unwrap()];
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, [Expanded::Stale, Expanded::Waiting(2)]);
    let rows_now = rt.block_on(store.tasks(&run)).unwrap();
    let ids: Vec<_> = rows_now.iter().map(|r| r.task_id.as_str()).collect();
    assert_eq!(ids, ["src", "m", "r", "m[0]", "m[1]"]);
    assert_eq!(rows_now[1].status, TaskStatus::Pending);
    assert_eq!(
        rt.block_on(store.item_hashes(&run)).unwrap(),
        [
            ("m[0]".to_string(), "h0".to_string()),
            ("m[1]".to_string(), "h1".to_string())
        ]
    );
    let (stored_plan, hash) = rt.block_on(store.plan_and_hash(&run)).unwrap();
    assert_eq!(stored_plan, expanded);
    assert_ne!(hash, m.plan_hash);
    // The items are claimed (the map task waits); a failed one releases
    // the map task without skipping it or the reduce.
    let i0 = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    let i1 = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(i0.plan_hash, hash);
    assert_eq!(
        rt.block_on(store.claim(Some(&run), "w", LEASE)).unwrap(),
        None
    );
    let mut broke = TaskExecutionResult::new(&i0.task_id, TaskStatus::Failed);
    broke.error = Some("broke".into());
    rt.block_on(store.complete(&i0, &broke)).unwrap();
    assert_eq!(
        rt.block_on(store.claim(Some(&run), "w", LEASE)).unwrap(),
        None
    );
    rt.block_on(store.complete(&i1, &done(&i1.task_id)))
        .unwrap();
    let join = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!((join.task_id.as_str(), join.attempt), ("m", 2));
    let st: Vec<_> = rt
        .block_on(store.tasks(&run))
        .unwrap()
        .into_iter()
        .map(|r| (r.task_id, r.status))
        .collect();
    assert!(st.contains(&("r".into(), TaskStatus::Pending)), "{st:?}");
    // The run reads back as written: the items are results, not tasks
    // of the plan.
    use ctx_store::RunHistory;
    assert_eq!(store.view(&run).unwrap().plan().unwrap(), p);
}

/// Task `task`'s ready counter in `run`, read by hand.
fn ready_counter(url: &str, run: &str, task: &str) -> i32 {
    support::with_client(url, async |client| {
        client
            .query_one(
                "SELECT pending_deps FROM ctx_tasks WHERE run_id = $1 AND task_id = $2",
                &[&run, &task],
            )
            .await
            .unwrap()
            .get(0)
    })
}

/// `src` and a map task `m` over it (allowing one failure, at most
/// `max_items`) and `r` reducing it, registered; `src` completed and `m`
/// claimed: the plan, the run and the claim on `m`.
fn claimed_map(
    store: &PgStore,
    rt: &tokio::runtime::Runtime,
    max_items: usize,
) -> (ctx_model::Plan, String, ctx_store_postgres::Claim) {
    let mut p = plan(&[("src", &[]), ("m", &["src"]), ("r", &["m"])]);
    p.sub_tasks[1].map = Some(ctx_model::MapSpec {
        over: "src".into(),
        pointer: None,
        item: "X".into(),
        max_items: Some(max_items),
        allow_failures: 1,
        variable_value: None,
    });
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[3, 2, 1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let src = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    rt.block_on(store.complete(&src, &done("src"))).unwrap();
    let m = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(m.task_id, "m");
    (p, run, m)
}

/// `src`, a map task `m` over it (allowing one failure) with `n` items
/// registered and waiting, and `r` reducing it: the run, and the claims
/// on the items, taken in one batch.
fn waiting_map(
    store: &PgStore,
    rt: &tokio::runtime::Runtime,
    n: usize,
) -> (String, Vec<ctx_store_postgres::Claim>) {
    use ctx_store_postgres::{Expanded, Expansion};
    let (p, run, m) = claimed_map(store, rt, n);
    let (expanded, rows) = with_items(&p, n);
    let e = Expansion {
        base_hash: &m.plan_hash,
        plan: &expanded,
        items: &rows,
    };
    assert_eq!(
        rt.block_on(store.expand_map(&m, &e)).unwrap(),
        Expanded::Waiting(n)
    );
    let items: Vec<_> = rt
        .block_on(store.claim_many(Some(&run), "w", LEASE, n))
        .unwrap()
        .into_iter()
        .map(|c| c.claim)
        .collect();
    assert_eq!(items.len(), n);
    (run, items)
}

/// An item's commit does not take its map task's row lock (every commit
/// of one map took it, so a map's commits ran one at a time): with that
/// row locked by another transaction, items still commit, and the map
/// task is released for its join only once the last one has.
#[test]
fn an_items_commit_does_not_wait_on_its_map_tasks_row() {
    let Some(url) = support::fresh_db("item_lock") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let (run, items) = waiting_map(&store, &rt, 3);
    rt.block_on(async {
        let (locker, driver) = support::connect(&url).await;
        locker.batch_execute("BEGIN").await.unwrap();
        locker
            .execute(
                "SELECT 1 FROM ctx_tasks WHERE run_id = $1 AND task_id = 'm' FOR UPDATE",
                &[&run],
            )
            .await
            .unwrap();
        for c in &items[..2] {
            let commit =
                tokio::time::timeout(Duration::from_secs(5), store.complete(c, &done(&c.task_id)))
                    .await
                    .expect("an item's commit waited on its map task's row")
                    .unwrap();
            assert_eq!(commit, Commit::Committed);
        }
        locker.batch_execute("COMMIT").await.unwrap();
        drop(locker);
        let _ = driver.await;
    });
    // One item is still open: the map task waits.
    assert_eq!(
        rt.block_on(store.claim(Some(&run), "w", LEASE)).unwrap(),
        None
    );
    let last = &items[2];
    rt.block_on(store.complete(last, &done(&last.task_id)))
        .unwrap();
    let join = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!((join.task_id.as_str(), join.attempt), ("m", 2));
}

/// Of a map's last items committed at once, the statement behind the
/// later commit sees both and releases the map task, exactly once: its
/// join is claimed once, every time.
#[test]
fn the_last_items_committed_at_once_release_their_map_once() {
    let Some(url) = support::fresh_db("item_race") else {
        return;
    };
    let rt = support::runtime();
    let stores: Vec<PgStore> = (0..2).map(|_| open(&url).unwrap()).collect();
    for round in 0..8 {
        let (run, items) = waiting_map(&stores[0], &rt, 2);
        let (r0, r1) = (done(&items[0].task_id), done(&items[1].task_id));
        let (a, b) = rt.block_on(async {
            tokio::join!(
                stores[0].complete(&items[0], &r0),
                stores[1].complete(&items[1], &r1),
            )
        });
        assert_eq!(
            (a.unwrap(), b.unwrap()),
            (Commit::Committed, Commit::Committed)
        );
        // Released by the statements behind the commits, not by a sweep
        // (which a claim that finds nothing would run, hiding a miss).
        assert_eq!(ready_counter(&url, &run, "m"), 0, "round {round}");
        let joins: Vec<_> = rt
            .block_on(stores[1].claim_many(Some(&run), "w", LEASE, 4))
            .unwrap()
            .into_iter()
            .map(|c| (c.claim.task_id, c.claim.attempt))
            .collect();
        assert_eq!(joins, [("m".to_string(), 2)], "round {round}");
    }
}

/// A worker that died between an item's commit and the statement behind
/// it leaves the map task waiting with every item ended: the next claim
/// that finds nothing ready sweeps it, releases it, and claims it.
#[test]
fn an_idle_claim_releases_a_map_whose_last_commit_did_not() {
    let Some(url) = support::fresh_db("item_sweep") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let (run, items) = waiting_map(&store, &rt, 2);
    rt.block_on(store.complete(&items[0], &done(&items[0].task_id)))
        .unwrap();
    // The last item's commit, without what follows it.
    support::sql(
        &url,
        &[&format!(
            "UPDATE ctx_tasks SET status = 'completed', result_json = '{}', claimed_by = NULL
              WHERE run_id = '{run}' AND task_id = '{}'",
            serde_json::to_string(&done(&items[1].task_id)).unwrap(),
            items[1].task_id
        )],
    );
    let join = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(join.task_id, "m");
    // The join commits, the reduce is claimed and commits: the run closes.
    rt.block_on(store.complete(&join, &done("m"))).unwrap();
    let r = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(r.task_id, "r");
    rt.block_on(store.complete(&r, &done("r"))).unwrap();
    assert!(!rt.block_on(store.has_open_runs(Some(&run), false)).unwrap());
}

/// One claim statement fills several slots, longest remaining path
/// first, each task with its dependencies' results (what its prompt is
/// assembled from), which the claim's store answers without a read.
#[test]
fn a_batch_claim_brings_each_tasks_dependency_results() {
    let Some(url) = support::fresh_db("batch") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    // a → c, a → d → e, b → c; d is on the longest path.
    let p = plan(&[
        ("a", &[]),
        ("b", &[]),
        ("c", &["a", "b"]),
        ("d", &["a"]),
        ("e", &["d"]),
    ]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[3, 2, 1, 2, 1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let first = rt
        .block_on(store.claim_many(Some(&run), "w", LEASE, 8))
        .unwrap();
    let ids: Vec<_> = first.iter().map(|c| c.claim.task_id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert!(first.iter().all(|c| c.inputs.is_empty()));
    for c in &first {
        rt.block_on(store.complete(&c.claim, &done(&c.claim.task_id)))
            .unwrap();
    }
    let next = rt
        .block_on(store.claim_many(Some(&run), "w", LEASE, 8))
        .unwrap();
    let got: Vec<(&str, Vec<&str>)> = next
        .iter()
        .map(|c| {
            (
                c.claim.task_id.as_str(),
                c.inputs.iter().map(|r| r.output.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(got, [("d", vec!["out a"]), ("c", vec!["out a", "out b"])]);
    // The claim's store answers the dependencies from what the claim
    // read: with their rows cleared since, it still does.
    let c = next.into_iter().nth(1).unwrap();
    let cs = ClaimStore::with_inputs(store.clone(), c);
    support::sql(
        &url,
        &["UPDATE ctx_tasks SET result_json = NULL WHERE task_id IN ('a', 'b')"],
    );
    let deps = cs.get_by_dependency_ids(&["b".into(), "a".into()]).unwrap();
    assert_eq!(
        deps.iter().map(|r| r.output.as_str()).collect::<Vec<_>>(),
        ["out b", "out a"]
    );
    // What it did not read, it reads.
    assert_eq!(cs.get_by_task_id("e").unwrap(), None);
}

/// Claims and commits everything claimable in `run`, each task completed
/// with `out ID`.
fn drain(rt: &tokio::runtime::Runtime, store: &PgStore, run: &str) {
    while let Some(c) = rt.block_on(store.claim(Some(run), "w", LEASE)).unwrap() {
        rt.block_on(store.complete(&c, &done(&c.task_id))).unwrap();
    }
}

/// The claim of the ready task `id` of `run`, with what it brings.
fn claim_of(
    rt: &tokio::runtime::Runtime,
    store: &PgStore,
    run: &str,
    id: &str,
) -> ctx_store_postgres::Claimed {
    let mut got = rt
        .block_on(store.claim_many(Some(run), "w", LEASE, 1))
        .unwrap();
    assert_eq!(got.len(), 1, "one claim of {id}");
    let c = got.pop().unwrap();
    assert_eq!(c.claim.task_id, id);
    c
}

/// Schema 6: a resume keeps aside the completed results of the tasks
/// it names in `keep` (those that run again only because a map above
/// them expands again), and each one's claim brings it back. A result
/// committed as unchanged (the kept one, taken) leaves its dependents'
/// kept results standing, and marks the row as taken; a result that
/// ran clears its own kept result and its dependents'. A resume clears
/// every kept result it does not keep again.
#[test]
fn a_resume_keeps_results_aside_and_only_a_task_that_ran_clears_its_dependents() {
    use ctx_store_postgres::Reopen;
    let Some(url) = support::fresh_db("kept") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[]), ("b", &["a"]), ("c", &["b"])]);
    let priorities = [3, 2, 1];
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &priorities,
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    drain(&rt, &store, &run);
    let both = ["b".to_string(), "c".to_string()];
    let reopen = Reopen {
        plan: &p,
        priorities: &priorities,
        engine: "dry-run",
        plan_source: None,
        rerun: &both,
        keep: &both,
        fresh: &[],
        inputs: None,
        budget: None,
        highs: &[],
    };
    assert_eq!(rt.block_on(store.reopen_run(&run, &reopen)).unwrap(), 2);
    // Waiting, each has its kept result, which a resume reads as its
    // latest (a session that dies here loses nothing).
    let kept = rt.block_on(store.kept(&run)).unwrap();
    assert_eq!(
        kept.iter().map(|r| r.task_id.as_str()).collect::<Vec<_>>(),
        ["b", "c"]
    );
    let view = store.view(&run).unwrap();
    {
        use ctx_store::RunHistory;
        let decided = view.resume_plan(&p, "dry-run").unwrap();
        assert_eq!(decided.reuse, ["a", "b", "c"], "{decided:?}");
        assert!(
            view.latest()
                .unwrap()
                .iter()
                .all(|r| r.result.task_id == "a")
        );
    }
    // `b` takes its kept result: `c`'s stands.
    let b = claim_of(&rt, &store, &run, "b");
    let kept_b = b.kept.clone().expect("b's kept result");
    assert_eq!(kept_b.output, "out b");
    assert_eq!(
        rt.block_on(store.complete_taken(&b.claim, &kept_b))
            .unwrap(),
        Commit::Committed
    );
    // Nothing ran: the history, which holds the result already, gets no
    // attempt (what the run spent counts it once).
    let history = rt.block_on(store.attempts(&run, Some("b"))).unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    let c = claim_of(&rt, &store, &run, "c");
    assert_eq!(c.kept.as_ref().map(|r| r.output.as_str()), Some("out c"));
    rt.block_on(store.complete_taken(&c.claim, c.kept.as_ref().unwrap()))
        .unwrap();
    let taken: Vec<(String, bool)> = rt
        .block_on(store.tasks(&run))
        .unwrap()
        .into_iter()
        .map(|t| (t.task_id, t.taken))
        .collect();
    assert_eq!(
        taken,
        [("a".into(), false), ("b".into(), true), ("c".into(), true)]
    );
    // Again, but `b` runs: its commit clears `c`'s kept result, and its
    // own.
    assert_eq!(rt.block_on(store.reopen_run(&run, &reopen)).unwrap(), 2);
    let b = claim_of(&rt, &store, &run, "b");
    assert!(b.kept.is_some());
    let mut ran = done("b");
    ran.output = "out b, again".into();
    rt.block_on(store.complete(&b.claim, &ran)).unwrap();
    let c = claim_of(&rt, &store, &run, "c");
    assert!(c.kept.is_none(), "{:?}", c.kept);
    rt.block_on(store.complete(&c.claim, &done("c"))).unwrap();
    assert!(
        rt.block_on(store.tasks(&run))
            .unwrap()
            .iter()
            .all(|t| !t.taken)
    );
    // A resume that keeps nothing clears what an earlier one kept.
    assert_eq!(rt.block_on(store.reopen_run(&run, &reopen)).unwrap(), 2);
    let none = Reopen {
        keep: &[],
        fresh: &[],
        ..reopen
    };
    assert_eq!(rt.block_on(store.reopen_run(&run, &none)).unwrap(), 2);
    assert!(rt.block_on(store.kept(&run)).unwrap().is_empty());
    let b = claim_of(&rt, &store, &run, "b");
    assert!(b.kept.is_none());
}

/// A store of schema version 5 (before kept results) is migrated to the
/// current version when opened: its runs, tasks and results read as
/// before, with no kept result, and resume by the same rules.
#[test]
fn a_version_5_store_is_migrated_and_its_runs_read_as_before() {
    use ctx_store::RunHistory;
    let Some(url) = support::fresh_db("migrate5") else {
        return;
    };
    let v5: Vec<&str> = ctx_store_postgres::MIGRATIONS
        .iter()
        .filter(|m| m.version <= 5)
        .map(|m| m.sql)
        .collect();
    assert_eq!(v5.len(), 5);
    support::sql(&url, &v5);
    let p = plan(&[("a", &[]), ("b", &["a"])]);
    let plan_json = serde_json::to_string(&p).unwrap();
    let a = serde_json::to_string(&done("a")).unwrap();
    support::sql(
        &url,
        &[
            "INSERT INTO ctx_meta (application, schema_version) VALUES ('ctx-execution-store', 5)",
            &format!(
                "INSERT INTO ctx_runs (run_id, plan_json, plan_hash, engine, ctx_version, task_count, open)
                 VALUES ('r5', '{plan_json}', 'h', 'dry-run', '0.1.0', 2, true)"
            ),
            &format!(
                "INSERT INTO ctx_tasks (run_id, task_id, idx, status, pending_deps, priority, result_json, attempt, claim_seq)
                 VALUES ('r5', 'a', 0, 'completed', 0, 2, '{a}', 1, 1),
                        ('r5', 'b', 1, 'pending', 0, 1, NULL, 0, NULL)"
            ),
            "INSERT INTO ctx_edges (run_id, depends_on, task_id) VALUES ('r5', 'a', 'b')",
        ],
    );
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let tasks = rt.block_on(store.tasks("r5")).unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0].result.as_ref().unwrap().output, "out a");
    assert!(tasks.iter().all(|t| !t.taken));
    assert!(rt.block_on(store.kept("r5")).unwrap().is_empty());
    let decided = store
        .view("r5")
        .unwrap()
        .resume_plan(&p, "dry-run")
        .unwrap();
    assert_eq!(decided.reuse, ["a"]);
    // The run goes on: `b` is claimed, without a kept result.
    let b = claim_of(&rt, &store, "r5", "b");
    assert!(b.kept.is_none());
    assert_eq!(b.inputs.len(), 1);
    rt.block_on(store.complete(&b.claim, &done("b"))).unwrap();
    assert!(!rt.block_on(store.has_open_runs(Some("r5"), false)).unwrap());
    // Opening again finds the current version and changes nothing.
    open(&url).unwrap();
    support::sql(
        &url,
        &[&format!(
            "DO $$ BEGIN IF (SELECT schema_version FROM ctx_meta) <> {} THEN RAISE EXCEPTION 'version'; END IF; END $$",
            ctx_store_postgres::SCHEMA_VERSION
        )],
    );
}

/// A claimed task's `in_progress` prompt is written once its call has
/// run for `PROGRESS_AFTER` (for `ctx runs show` while it runs), not at
/// once: a call that ends sooner writes only its terminal result, which
/// holds the prompt too.
#[test]
fn a_claims_prompt_is_written_once_its_call_has_run_a_while() {
    let Some(url) = support::fresh_db("progress") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[]), ("b", &[])]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[2, 1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let prompt_of = |id: &str| {
        rt.block_on(store.tasks(&run))
            .unwrap()
            .into_iter()
            .find(|t| t.task_id == id)
            .and_then(|t| t.result)
            .and_then(|r| r.prompt)
    };
    let with_prompt = |id: &str, status| {
        let mut r = TaskExecutionResult::new(id, status);
        r.prompt = Some(format!("prompt of {id}"));
        r
    };
    // `a` runs long: its prompt appears after PROGRESS_AFTER.
    let a = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    let cs = ClaimStore::new(store.clone(), a);
    cs.store(with_prompt("a", TaskStatus::InProgress)).unwrap();
    assert_eq!(prompt_of("a"), None);
    std::thread::sleep(ctx_store_postgres::PROGRESS_AFTER + Duration::from_millis(500));
    assert_eq!(prompt_of("a").as_deref(), Some("prompt of a"));
    cs.store(with_prompt("a", TaskStatus::Completed)).unwrap();
    assert_eq!(cs.outcome(), Some(Commit::Committed));
    // `b` ends at once: only its terminal result is written.
    let b = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    let cs = ClaimStore::new(store.clone(), b);
    cs.store(with_prompt("b", TaskStatus::InProgress)).unwrap();
    cs.store(with_prompt("b", TaskStatus::Completed)).unwrap();
    assert_eq!(cs.outcome(), Some(Commit::Committed));
    std::thread::sleep(ctx_store_postgres::PROGRESS_AFTER + Duration::from_millis(500));
    let tasks = rt.block_on(store.tasks(&run)).unwrap();
    assert!(
        tasks.iter().all(|t| t.status == TaskStatus::Completed),
        "{tasks:?}"
    );
    assert_eq!(prompt_of("b").as_deref(), Some("prompt of b"));
}

/// A store that a newer ctx migrated after this build opened it: nothing
/// more is claimed from it (this build's rules may no longer be the
/// store's: schema 6's kept results, say, which an older commit would
/// not clear), and the empty claim says why, as opening it would.
#[test]
fn a_store_a_newer_ctx_migrated_meanwhile_is_claimed_from_no_more() {
    let Some(url) = support::fresh_db("newer_meanwhile") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[])]);
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    support::sql(
        &url,
        &["UPDATE ctx_meta SET schema_version = schema_version + 1"],
    );
    let err = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap_err();
    assert!(
        matches!(err, Error::NewerSchema { found, known, .. } if found == known + 1),
        "{err}"
    );
    // The task was not claimed: back on this build's schema, it is.
    support::sql(
        &url,
        &["UPDATE ctx_meta SET schema_version = schema_version - 1"],
    );
    let a = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(a.task_id, "a");
}

/// Registers `p` as a dry run with `budget`: its id.
fn register(
    rt: &tokio::runtime::Runtime,
    store: &PgStore,
    p: &ctx_model::Plan,
    priorities: &[u64],
    budget: Option<ctx_model::money::Usd>,
) -> String {
    rt.block_on(store.register_run(&RegisterRun {
        plan: p,
        priorities,
        engine: "dry-run",
        plan_source: None,
        inputs: None,
        budget,
        highs: &[],
    }))
    .unwrap()
}

/// A run's budget on the shared store: each claim reserves its task's
/// high end while what the run holds stays within the budget, its commit
/// settles the reservation at the task's cost (an unknown cost keeps it
/// whole), a commit refused as a retry settles nothing twice, and a task
/// that does not fit learns whether live reservations may free room.
#[test]
fn a_budget_is_reserved_by_claims_and_settled_by_their_commits() {
    use ctx_model::money::Usd;
    use ctx_store_postgres::Reservation;
    let Some(url) = support::fresh_db("budget") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[]), ("b", &[]), ("c", &[]), ("d", &[])]);
    let run = register(&rt, &store, &p, &[4, 3, 2, 1], Some(Usd::from_picos(10)));
    let usd = Usd::from_picos;
    let held = || rt.block_on(store.budget(&run)).unwrap().unwrap().1;
    let claims: Vec<_> = rt
        .block_on(store.claim_many(Some(&run), "w", LEASE, 3))
        .unwrap()
        .into_iter()
        .map(|c| c.claim)
        .collect();
    let (a, b, c) = (&claims[0], &claims[1], &claims[2]);
    let reserve = |claim, amount| rt.block_on(store.reserve(claim, usd(amount))).unwrap();
    assert_eq!(reserve(a, 4), Reservation::Reserved);
    assert_eq!(reserve(b, 4), Reservation::Reserved);
    assert_eq!(reserve(c, 4), Reservation::Full { waiting: true });
    assert_eq!(held(), usd(8));
    let cost = |id: &str, picos: Option<u128>| {
        let mut r = done(id);
        r.metadata.cost_usd = picos.map(Usd::from_picos);
        r
    };
    assert_eq!(
        rt.block_on(store.complete(a, &cost("a", Some(1)))).unwrap(),
        Commit::Committed
    );
    assert_eq!(held(), usd(5), "a's 4 settled at its cost of 1");
    // The same commit again (a retry) is refused and settles nothing.
    assert_ne!(
        rt.block_on(store.complete(a, &cost("a", Some(1)))).unwrap(),
        Commit::Committed
    );
    assert_eq!(held(), usd(5));
    assert_eq!(reserve(c, 4), Reservation::Reserved);
    assert_eq!(held(), usd(9));
    rt.block_on(store.complete(b, &cost("b", None))).unwrap();
    assert_eq!(
        held(),
        usd(9),
        "an unknown cost keeps b's reservation whole"
    );
    rt.block_on(store.complete(c, &cost("c", Some(2)))).unwrap();
    assert_eq!(held(), usd(7));
    // Nothing live holds a reservation now: d never fits.
    let d = rt
        .block_on(store.claim(Some(&run), "w", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(reserve(&d, 4), Reservation::Full { waiting: false });
    assert_eq!(reserve(&d, 3), Reservation::Reserved);
    assert_eq!(held(), usd(10));
    // A claim that is no longer held reserves nothing.
    assert_eq!(reserve(a, 0), Reservation::Lost);
    assert_eq!(held(), usd(10));
}

/// A dead worker's reservation: held at its whole amount while its lease
/// lapses, settled at what its late commit records when that came before
/// anyone claimed the task again, else at its whole amount by the next
/// claim (a later late commit settles nothing twice), and never by the
/// next attempt's commit, which settles only its own. A resume that
/// gives the run a budget holds at least what its attempts recorded.
#[test]
fn a_dead_claims_reservation_settles_at_what_its_attempt_stored() {
    use ctx_model::money::Usd;
    use ctx_store_postgres::Reopen;
    let Some(url) = support::fresh_db("budget_dead") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let p = plan(&[("a", &[]), ("b", &[])]);
    let usd = Usd::from_picos;
    let run = register(&rt, &store, &p, &[2, 1], Some(usd(100)));
    let held = || rt.block_on(store.budget(&run)).unwrap().unwrap().1;
    let cost = |id: &str, picos: Option<u128>| {
        let mut r = done(id);
        r.metadata.cost_usd = picos.map(Usd::from_picos);
        r
    };
    let short = Duration::from_millis(300);
    let claim = |who: &str, lease| {
        rt.block_on(store.claim(Some(&run), who, lease))
            .unwrap()
            .unwrap()
    };
    // `a`: its worker stalls past its lease, then commits late at 3.
    let a = claim("stalled", short);
    rt.block_on(store.reserve(&a, usd(10))).unwrap();
    // `b`: its worker dies; nothing is ever stored for its attempt.
    let b = claim("dead", short);
    rt.block_on(store.reserve(&b, usd(20))).unwrap();
    assert_eq!(held(), usd(30));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(held(), usd(30), "a lapsed lease keeps its reservation");
    assert_eq!(
        rt.block_on(store.complete(&a, &cost("a", Some(3))))
            .unwrap(),
        Commit::Refused
    );
    assert_eq!(held(), usd(23), "a's late result settled its 10 at 3");
    // Both claimed again: a's reservation is settled already, b's is
    // settled at its whole 20 by this claim.
    let (a2, b2) = (claim("w", LEASE), claim("w", LEASE));
    assert_eq!((a2.task_id.as_str(), b2.task_id.as_str()), ("a", "b"));
    assert_eq!(held(), usd(23));
    // b's dead worker commits after all: too late to settle anything.
    rt.block_on(store.complete(&b, &cost("b", Some(1))))
        .unwrap();
    assert_eq!(held(), usd(23));
    // The new attempts settle their own reservations only.
    rt.block_on(store.reserve(&a2, usd(10))).unwrap();
    rt.block_on(store.reserve(&b2, usd(20))).unwrap();
    assert_eq!(held(), usd(53));
    rt.block_on(store.complete(&a2, &cost("a", Some(2))))
        .unwrap();
    rt.block_on(store.complete(&b2, &cost("b", Some(4))))
        .unwrap();
    assert_eq!(held(), usd(29), "23 + 2 + 4");
    // A resume without a budget, then one with: what the attempts
    // recorded (3 + 1 + 2 + 4) is less than what is held, which stays.
    fn reopen<'a>(p: &'a ctx_model::Plan, budget: Option<Usd>, rerun: &'a [String]) -> Reopen<'a> {
        Reopen {
            plan: p,
            priorities: &[2, 1],
            engine: "dry-run",
            plan_source: None,
            rerun,
            keep: &[],
            fresh: &[],
            inputs: None,
            budget,
            highs: &[],
        }
    }
    rt.block_on(store.reopen_run(&run, &reopen(&p, None, &[])))
        .unwrap();
    assert_eq!(rt.block_on(store.budget(&run)).unwrap(), None);
    rt.block_on(store.reopen_run(&run, &reopen(&p, Some(usd(100)), &[])))
        .unwrap();
    assert_eq!(held(), usd(29));
    // A run that spent without a budget: its first budget counts it.
    let free = register(&rt, &store, &p, &[2, 1], None);
    for _ in 0..2 {
        let c = rt
            .block_on(store.claim(Some(&free), "w", LEASE))
            .unwrap()
            .unwrap();
        let id = c.task_id.clone();
        rt.block_on(store.complete(&c, &cost(&id, Some(7_000_000_000_000))))
            .unwrap();
    }
    let rerun = ["a".to_string()];
    rt.block_on(store.reopen_run(&free, &reopen(&p, Some(usd(20_000_000_000_000)), &rerun)))
        .unwrap();
    assert_eq!(
        rt.block_on(store.budget(&free)).unwrap(),
        Some((usd(20_000_000_000_000), usd(14_000_000_000_000)))
    );
}

/// Schema version 10 (issue 38): what a run published under version 9
/// (`ctx_runs.published_json`) becomes its first publish, in effect, with
/// the time the run finished; a publish and its undo are numbered in the
/// run, and an undone publish is no longer in effect; backups are kept
/// once per digest.
#[test]
fn a_version_9_publish_carries_forward_and_publishes_are_undone_in_order() {
    let Some(url) = support::fresh_db("migrate9") else {
        return;
    };
    let v9: Vec<&str> = ctx_store_postgres::MIGRATIONS
        .iter()
        .filter(|m| m.version <= 9)
        .map(|m| m.sql)
        .collect();
    support::sql(&url, &v9);
    let plan_json = serde_json::to_string(&plan(&[("a", &[])])).unwrap();
    support::sql(
        &url,
        &[
            "INSERT INTO ctx_meta (application, schema_version) VALUES ('ctx-execution-store', 9)",
            &format!(
                "INSERT INTO ctx_runs (run_id, plan_json, plan_hash, engine, ctx_version, task_count, open, finished_at, published_json)
                 VALUES ('r9', '{plan_json}', 'h', 'dry-run', '0.1.0', 1, false, '2026-01-02T03:04:05.678Z',
                         '[{{\"task_id\":\"a\",\"path\":\"/site/a.md\"}}]')"
            ),
        ],
    );
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let events = rt.block_on(store.publish_events("r9")).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].at, "2026-01-02T03:04:05.678Z");
    let old = events[0].files[0].clone();
    assert_eq!(
        (old.path.as_str(), old.sha256.as_deref()),
        ("/site/a.md", None)
    );
    let new = ctx_store::Published {
        sha256: Some("ab".into()),
        ..old.clone()
    };
    let seq = rt.block_on(store.record_publish("r9", std::slice::from_ref(&new), &[]));
    assert_eq!(seq.unwrap(), 2);
    assert_eq!(rt.block_on(store.published("r9")).unwrap(), [new]);
    let undo = rt.block_on(store.record_publish("r9", std::slice::from_ref(&old), &[2]));
    assert_eq!(undo.unwrap(), 3);
    let events = rt.block_on(store.publish_events("r9")).unwrap();
    assert_eq!(events[1].undone_by, Some(3));
    assert_eq!(events[2].kind, ctx_store::PublishKind::Unpublish);
    assert_eq!(rt.block_on(store.published("r9")).unwrap(), [old]);
    for _ in 0..2 {
        rt.block_on(store.keep_backup("r9", "cd", b"bytes".to_vec()))
            .unwrap();
    }
    let kept = rt.block_on(store.read_backup("r9", "cd")).unwrap();
    assert_eq!(kept.as_deref(), Some(&b"bytes"[..]));
    assert_eq!(rt.block_on(store.read_backup("r9", "ef")).unwrap(), None);
}

/// A `before: run` gate (schema 11): no claim takes the task before its
/// run has a decision; the run then has nothing to work on but is open;
/// of several decisions at once one is recorded; a decision releases the
/// task to a claim.
#[test]
fn a_gated_task_is_claimed_only_once_decided_and_one_decision_wins() {
    use ctx_model::approval::{Approval, GateStage, Verdict};
    use ctx_store::{DecisionRefused, DecisionRequest};
    let Some(url) = support::fresh_db("gates") else {
        return;
    };
    let store = open(&url).unwrap();
    let rt = support::runtime();
    let mut p = plan(&[("a", &[]), ("b", &[])]);
    p.sub_tasks[1].approval = Some(Approval {
        before: GateStage::Run,
        message: None,
    });
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &[1, 1],
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: None,
            highs: &[],
        }))
        .unwrap();
    let a = rt
        .block_on(store.claim(Some(&run), "w1", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(a.task_id, "a");
    assert_eq!(
        rt.block_on(store.claim(Some(&run), "w1", LEASE)).unwrap(),
        None
    );
    rt.block_on(store.complete(&a, &done("a"))).unwrap();
    // Only the gate is left: open, but nothing to work on.
    assert!(!rt.block_on(store.has_open_runs(Some(&run), false)).unwrap());
    assert!(rt.block_on(store.has_open_runs(Some(&run), true)).unwrap());
    let decisions: Vec<_> = (0..4)
        .map(|k| {
            let (store, run) = (store.clone(), run.clone());
            rt.spawn(async move {
                let req = DecisionRequest {
                    task_id: "b".into(),
                    verdict: if k % 2 == 0 {
                        Verdict::Approve
                    } else {
                        Verdict::Reject
                    },
                    by: format!("user{k}"),
                    note: Some("n".into()),
                };
                store.decide(&run, &req).await
            })
        })
        .collect();
    let outcomes: Vec<_> = decisions
        .into_iter()
        .map(|h| rt.block_on(h).unwrap())
        .collect();
    assert_eq!(
        outcomes.iter().filter(|o| o.is_ok()).count(),
        1,
        "{outcomes:?}"
    );
    for lost in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(
            matches!(lost, Error::Decision(d) if matches!(**d, DecisionRefused::AlreadySettled { .. })),
            "{lost}"
        );
    }
    assert_eq!(rt.block_on(store.decisions(&run)).unwrap().len(), 1);
    let b = rt
        .block_on(store.claim(Some(&run), "w2", LEASE))
        .unwrap()
        .unwrap();
    assert_eq!(b.task_id, "b");
    // A task that no longer waits takes no decision.
    let late = rt.block_on(store.decide(
        &run,
        &DecisionRequest {
            task_id: "a".into(),
            verdict: Verdict::Approve,
            by: "u".into(),
            note: None,
        },
    ));
    assert!(matches!(late, Err(Error::Decision(_))), "{late:?}");
}
