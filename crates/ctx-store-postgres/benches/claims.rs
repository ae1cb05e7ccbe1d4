//! Claim rate of the shared store (`cargo bench -p ctx-store-postgres
//! --bench claims`, or scripts/bench-workers.sh, which starts the server).
//!
//! Registers a run of N independent tasks (default 2,000) in a fresh
//! database on `CTX_TEST_POSTGRES_URL`, then C claimers (default 16, each
//! with its own store, so its own connection) claim and commit as fast as
//! they can with no engine in between: the rate the store sustains for
//! the claim → commit cycle, and the statements (round trips) per task;
//! then the same under a budget (`--max-cost`: claim → reserve →
//! commit), and without again, side by side.
//! Figures in docs/scaling.md.

use std::time::{Duration, Instant};

use ctx_model::money::Usd;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store_postgres::{PgStore, RegisterRun, Reservation, StoreOptions, StoreUrl};

fn main() {
    let Ok(server) = std::env::var("CTX_TEST_POSTGRES_URL") else {
        eprintln!(
            "claims bench: skipped: CTX_TEST_POSTGRES_URL is not set (scripts/postgres.sh start)"
        );
        return;
    };
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    let n = value("--tasks").unwrap_or(2000);
    let claimers = value("--claimers").unwrap_or(16);
    let url = fresh_db(&server);
    let open = || {
        PgStore::open(
            &StoreUrl::parse(&url, |_| None).expect("url"),
            StoreOptions::default(),
        )
        .expect("open")
    };
    let store = open();
    let subs: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"id": format!("t{i:05}"), "description": "d",
            "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}})
        })
        .collect();
    let plan: Plan =
        serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": subs}))
            .expect("plan");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let stores: Vec<PgStore> = (0..claimers).map(|_| open()).collect();
    // Side by side in one run of the bench: the same tasks and claimers
    // without a budget, then with one that never binds (every claim
    // reserves in the run's row and its commit settles there), then
    // without again, so a drift of the machine shows.
    for budget in [None, Some(Usd::ONE_DOLLAR), None] {
        let t0 = Instant::now();
        let run = rt
            .block_on(store.register_run(&RegisterRun {
                plan: &plan,
                priorities: &vec![1; n],
                engine: "bench",
                plan_source: None,
                inputs: None,
                budget,
            }))
            .expect("register");
        let register = t0.elapsed();
        let before: u64 = stores.iter().map(PgStore::round_trips).sum();
        let t0 = Instant::now();
        let done = rt.block_on(drain(&stores, &run, budget.is_some()));
        let took = t0.elapsed();
        let trips: u64 = stores.iter().map(PgStore::round_trips).sum::<u64>() - before;
        assert_eq!(done, n, "every task claimed once");
        if let Some(b) = budget {
            let held = rt.block_on(store.budget(&run)).expect("budget");
            let spent = Usd::from_picos(n as u128);
            assert_eq!(held, Some((b, spent)), "every reservation settled once");
        }
        println!(
            "| {n} tasks | {claimers} claimers | {} | register {:.0} ms | {:.0} claim+commit cycles/s | {:.2} statements per task (claim,{} commit, close check; + {claimers} empty claims at the end) |",
            if budget.is_some() {
                "budget"
            } else {
                "no budget"
            },
            register.as_secs_f64() * 1000.0,
            n as f64 / took.as_secs_f64(),
            trips as f64 / n as f64,
            if budget.is_some() { " reserve," } else { "" },
        );
    }
}

/// Every claimer claims and commits until nothing is left; under a
/// budget each claim reserves a pico-dollar's ten first, as a worker
/// reserves its task's high end, and its commit settles it at one.
/// How many tasks were committed.
async fn drain(stores: &[PgStore], run: &str, budget: bool) -> usize {
    let mut set = tokio::task::JoinSet::new();
    for (w, s) in stores.iter().cloned().enumerate() {
        let run = run.to_string();
        set.spawn(async move {
            let mut k = 0;
            while let Some(c) = s
                .claim(Some(&run), &format!("w{w}"), Duration::from_secs(60))
                .await
                .expect("claim")
            {
                let mut r = TaskExecutionResult::new(&c.task_id, TaskStatus::Completed);
                r.output = "x".into();
                if budget {
                    let got = s.reserve(&c, Usd::from_picos(10)).await.expect("reserve");
                    assert_eq!(got, Reservation::Reserved);
                    r.metadata.cost_usd = Some(Usd::from_picos(1));
                }
                s.complete(&c, &r).await.expect("complete");
                k += 1;
            }
            k
        });
    }
    let mut total = 0;
    while let Some(k) = set.join_next().await {
        total += k.expect("claimer");
    }
    total
}

/// A new database on the server for this bench.
fn fresh_db(server: &str) -> String {
    let db = format!("ctx_bench_claims_{}", std::process::id());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(server, tokio_postgres::NoTls)
            .await
            .expect("connect");
        let h = tokio::spawn(conn);
        for sql in [
            format!("DROP DATABASE IF EXISTS {db}"),
            format!("CREATE DATABASE {db}"),
        ] {
            client.batch_execute(&sql).await.expect("create database");
        }
        drop(client);
        let _ = h.await;
    });
    let slash = server.rfind('/').expect("a database in the URL");
    format!("{}/{db}", &server[..slash])
}
