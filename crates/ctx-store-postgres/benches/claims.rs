//! Claim rate of the shared store, and what a budget costs it (`cargo
//! bench -p ctx-store-postgres --bench claims`, or
//! scripts/bench-workers.sh, which starts the server).
//!
//! Registers runs of N independent tasks (default 2,000) in a database
//! of its own on `CTX_TEST_POSTGRES_URL` (dropped at the end), and C
//! claimers (each with its own store, so its own connection) claim and
//! commit as fast as they can with no engine in between: the rate the
//! store sustains for the claim → commit cycle, and the statements
//! (round trips) per task. Each round drains one run without a budget
//! and one under a budget that never binds (`--max-cost`: every claim
//! reserves its task's recorded high end in one of the run's purses,
//! and its commit settles it there), in alternating order, so that a drift of
//! the machine falls on both; the table gives each one's median over
//! the rounds, side by side, for each claimer count.
//!
//! Options: `--tasks N`, `--claimers 1,4,16`, `--rounds R` (default 5),
//! `--rtt-us U`: the claimers reach the server through a proxy on the
//! loopback that delays every read by U/2 µs each way, a network round
//! trip of U µs (a real deployment has one; the loopback hides what a
//! statement more costs). Figures in docs/scaling.md.

use std::time::{Duration, Instant};

use ctx_model::money::Usd;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store_postgres::{PgStore, RegisterRun, Reservation, StoreOptions, StoreUrl};

#[path = "support/proxy.rs"]
mod proxy;

/// The high end every task records, and what its commit settles at.
const HIGH: u128 = 10;
const COST: u128 = 1;

/// The bench's options.
struct Options {
    tasks: usize,
    claimers: Vec<usize>,
    rounds: usize,
    rtt: Duration,
}

impl Options {
    fn parse() -> Options {
        let args: Vec<String> = std::env::args().collect();
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let number = |flag: &str, default: usize| {
            value(flag)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(default)
        };
        let claimers = value("--claimers")
            .map(|v| v.split(',').filter_map(|c| c.parse().ok()).collect())
            .filter(|c: &Vec<usize>| !c.is_empty())
            .unwrap_or_else(|| vec![1, 4, 16]);
        Options {
            tasks: number("--tasks", 2000),
            claimers,
            rounds: number("--rounds", 5).max(1),
            rtt: Duration::from_micros(number("--rtt-us", 0) as u64),
        }
    }
}

/// One drained run: cycles per second and statements per task.
#[derive(Clone, Copy)]
struct Drained {
    rate: f64,
    trips: f64,
}

fn main() {
    let Ok(server) = std::env::var("CTX_TEST_POSTGRES_URL") else {
        eprintln!(
            "claims bench: skipped: CTX_TEST_POSTGRES_URL is not set (scripts/postgres.sh start)"
        );
        return;
    };
    let options = Options::parse();
    let db = format!("ctx_bench_claims_{}", std::process::id());
    let url = database(&server, &db, true);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let claim_url = if options.rtt.is_zero() {
        url.clone()
    } else {
        proxy::start(&url, options.rtt)
    };
    println!(
        "{} tasks a run, {} rounds, round trip added {} µs, {}",
        options.tasks,
        options.rounds,
        options.rtt.as_micros(),
        chrono::Utc::now().format("%Y-%m-%d")
    );
    println!(
        "| claimers | no budget cycles/s | budget cycles/s | budget: fewer | statements per task (no budget / budget) |"
    );
    println!("|---|---|---|---|---|");
    for &claimers in &options.claimers {
        let (plain, budget) = compare(&rt, &url, &claim_url, claimers, &options);
        println!(
            "| {claimers} | {:.0} | {:.0} | {:.1} % | {:.2} / {:.2} |",
            plain.rate,
            budget.rate,
            (1.0 - budget.rate / plain.rate) * 100.0,
            plain.trips,
            budget.trips,
        );
    }
    database(&server, &db, false);
}

/// The medians of `options.rounds` rounds with `claimers` claimers,
/// without a budget and with one, the two alternating in each round's
/// order.
fn compare(
    rt: &tokio::runtime::Runtime,
    url: &str,
    claim_url: &str,
    claimers: usize,
    options: &Options,
) -> (Drained, Drained) {
    let open = |u: &str| {
        PgStore::open(
            &StoreUrl::parse(u, |_| None).expect("url"),
            StoreOptions::default(),
        )
        .expect("open")
    };
    let store = open(url);
    let stores: Vec<PgStore> = (0..claimers).map(|_| open(claim_url)).collect();
    let plan = plan(options.tasks);
    let (mut plain, mut budget) = (Vec::new(), Vec::new());
    for round in 0..options.rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for budgeted in order {
            let d = drain_one(rt, &store, &stores, &plan, budgeted);
            if budgeted {
                budget.push(d);
            } else {
                plain.push(d);
            }
        }
    }
    (median(&mut plain), median(&mut budget))
}

/// Registers a run of `plan` (under a budget that never binds, every
/// task recording [`HIGH`] as its high end, when `budgeted`) and drains
/// it with `stores`, checking every task was committed once and, under
/// the budget, every reservation settled once.
fn drain_one(
    rt: &tokio::runtime::Runtime,
    store: &PgStore,
    stores: &[PgStore],
    plan: &Plan,
    budgeted: bool,
) -> Drained {
    let n = plan.sub_tasks.len();
    let budget = budgeted.then_some(Usd::ONE_DOLLAR);
    let highs = if budgeted {
        vec![Some(Usd::from_picos(HIGH)); n]
    } else {
        Vec::new()
    };
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan,
            priorities: &vec![1; n],
            engine: "bench",
            plan_source: None,
            inputs: None,
            budget,
            highs: &highs,
        }))
        .expect("register");
    let before: u64 = stores.iter().map(PgStore::round_trips).sum();
    let t0 = Instant::now();
    let done = rt.block_on(drain(stores, &run, budgeted));
    let took = t0.elapsed();
    let trips: u64 = stores.iter().map(PgStore::round_trips).sum::<u64>() - before;
    assert_eq!(done, n, "every task claimed once");
    if let Some(b) = budget {
        let held = rt.block_on(store.budget(&run)).expect("budget");
        let spent = Usd::from_picos(n as u128 * COST);
        assert_eq!(held, Some((b, spent)), "every reservation settled once");
    }
    Drained {
        rate: n as f64 / took.as_secs_f64(),
        trips: trips as f64 / n as f64,
    }
}

fn median(runs: &mut [Drained]) -> Drained {
    runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let mut trips: Vec<f64> = runs.iter().map(|d| d.trips).collect();
    trips.sort_by(f64::total_cmp);
    Drained {
        rate: runs[runs.len() / 2].rate,
        trips: trips[trips.len() / 2],
    }
}

fn plan(n: usize) -> Plan {
    let subs: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"id": format!("t{i:05}"), "description": "d",
            "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}})
        })
        .collect();
    serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": subs}))
        .expect("plan")
}

/// Every claimer claims and commits until nothing is left, as a worker
/// does: under a budget the claim reserved the task's recorded high end
/// (a worker reserves only when it did not), and the commit settles it
/// at [`COST`]. How many tasks were committed.
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
                    let high = Usd::from_picos(HIGH);
                    if c.reserved.is_none_or(|got| got < high) {
                        let got = s.reserve(&c, high).await.expect("reserve");
                        assert_eq!(got, Reservation::Reserved);
                    }
                    r.metadata.cost_usd = Some(Usd::from_picos(COST));
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

/// Creates the bench's database `db` on the server (`create`), or drops
/// it (with any connection left to it); the URL of the database.
fn database(server: &str, db: &str, create: bool) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(server, tokio_postgres::NoTls)
            .await
            .expect("connect");
        let h = tokio::spawn(conn);
        let mut sql = vec![format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")];
        if create {
            sql.push(format!("CREATE DATABASE {db}"));
        }
        for s in sql {
            client.batch_execute(&s).await.expect("database");
        }
        drop(client);
        let _ = h.await;
    });
    let slash = server.rfind('/').expect("a database in the URL");
    format!("{}/{db}", &server[..slash])
}
