//! A map of many items on the shared PostgreSQL store (issue 23): the
//! makespan against its lower bound, the CPU the server and the workers
//! spent, and this process's peak memory.
//!
//! ```text
//! cargo xtask bench-map          # starts the test server, runs both rows
//! eval "$(scripts/postgres.sh start)"
//! cargo bench -p ctx-worker --bench shared_map -- \
//!     [--items N] [--workers W] [--slots S] [--call-ms MS]
//! ```
//!
//! The workload is the local map bench's (`ctx_test_support::sim_map`):
//! `src → scan → report`, `scan` mapping over the JSON list of `N` items
//! (10,000) that `src` answers, registered on a fresh database of the
//! test server (`CTX_TEST_POSTGRES_URL`). `W` workers (4) with `S` tasks
//! in flight each (64) run in this process against the store as separate
//! `ctx worker`s would, each with its own connection pool: the claims,
//! the expansion, the commits and the join are the real ones, only the
//! model is not. Its calls take the model-like latencies of the local
//! bench (items 200–5,000 ms), or `MS` milliseconds each with
//! `--call-ms`: the stress case, where the store's cost per item is most
//! of the time.
//!
//! Why the real clock, where the local bench uses Tokio's paused one: the
//! server is another process, so its work cannot be paused. The bound is
//! the same formula (`SimMap::bound`) over `W × S` calls in flight.
//!
//! Reported: makespan ÷ bound; the server's CPU (its postmaster and every
//! backend, exited or live, from `/proc`, when the server runs on this
//! machine) and this process's (the workers and the bench), each per
//! item; peak resident memory (`VmHWM`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctx_deps::{ExecutorOptions, InferenceEngine};
use ctx_run::run_costs::RunPricing;
use ctx_test_support::bench::{
    BenchArgs, TICKS_PER_SECOND, cpu_cell, cpu_ticks, fmt_mib, own_cpu, peak_rss_mib,
};
use ctx_test_support::sim_map::SimMap;
use ctx_worker::{SharedSession, SharedSettings, Worker};

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

/// The parent process of `pid`.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 2..)?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// The CPU seconds the server has spent so far: its postmaster with the
/// backends that exited, plus those still running.
fn server_cpu(postmaster: u32) -> Option<f64> {
    let mut ticks = cpu_ticks(postmaster, true)?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if parent(pid) == Some(postmaster) {
            ticks += cpu_ticks(pid, true).unwrap_or(0);
        }
    }
    Some(ticks as f64 / TICKS_PER_SECOND)
}

/// The server's postmaster, when the server runs on this machine: the
/// parent of this connection's backend.
async fn postmaster(url: &str) -> Option<u32> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .ok()?;
    tokio::spawn(conn);
    let row = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .ok()?;
    let backend: i32 = row.get(0);
    parent(u32::try_from(backend).ok()?)
}

fn main() {
    let Some(args) = BenchArgs::from_env() else {
        return;
    };
    let smoke = args.smoke();
    let value = |flag: &str| args.value(flag).map(|v| v as usize);
    let items = value("--items").unwrap_or(if smoke { 40 } else { 10_000 });
    let workers = value("--workers").unwrap_or(4).max(1);
    let slots = value("--slots").unwrap_or(64).max(1);
    let call_ms = args.value("--call-ms").or(smoke.then_some(5));
    let map = match call_ms {
        Some(ms) => SimMap::new(items).fixed(ms),
        None => SimMap::new(items),
    };
    let Some(url) = pg::fresh_db("shared_map") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let engine: Arc<dyn InferenceEngine> = Arc::new(map.engine());
    let postmaster = rt.block_on(postmaster(&url));
    let server_before = postmaster.and_then(server_cpu);
    let own_before = own_cpu();
    let t0 = Instant::now();
    let session = rt
        .block_on(SharedSession::start(
            map.plan(),
            Arc::clone(&engine),
            SharedSettings {
                url: url.clone(),
                resume: None,
                rerun: Vec::new(),
                work_here: false,
                executor: ExecutorOptions::default(),
                pricing: RunPricing::default(),
                plan_source: None,
                cache: None,
                out: None,
                inputs: None,
                publish: None,
                alert_at: Vec::new(),
                approval_wait: None,
            },
        ))
        .expect("the run registered");
    let run = session.run_id().to_string();
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let store = ctx_worker::runs::open(&url)
                .expect("the store")
                .with_engine(&engine.label());
            let worker = Worker {
                store,
                engine: Arc::clone(&engine),
                options: ExecutorOptions::default(),
                pricing: RunPricing::default(),
                run: Some(run.clone()),
                worker: format!("bench-{w}"),
                concurrency: slots,
                lease: Duration::from_secs(60),
                until_idle: true,
                first_run_wait: Duration::ZERO,
                poll: Duration::from_millis(100),
                approval_wait: None,
            };
            rt.spawn(async move {
                worker
                    .run(std::future::pending::<()>(), |_| {})
                    .await
                    .expect("the worker")
                    .committed
            })
        })
        .collect();
    for h in handles {
        rt.block_on(h).expect("a worker task");
    }
    let outcome = rt
        .block_on(session.execute_with(std::future::pending::<()>(), |_| {}))
        .expect("the report");
    let makespan = t0.elapsed();
    let server = postmaster
        .and_then(server_cpu)
        .zip(server_before)
        .map(|(after, before)| after - before);
    let own = own_cpu()
        .zip(own_before)
        .map(|(after, before)| after - before);
    let completed = outcome
        .report
        .results
        .iter()
        .filter(|r| r.status == ctx_model::TaskStatus::Completed)
        .count();
    assert_eq!(completed, map.tasks(), "every task completes");
    let in_flight = workers * slots;
    let bound = map.bound(in_flight);
    let calls = call_ms.map_or_else(|| "200–5,000 ms".into(), |ms| format!("{ms} ms"));
    println!("## map over a list: {items} items on the shared PostgreSQL store");
    println!();
    println!(
        "| items | workers × slots | calls | makespan | lower bound | ratio | server CPU (an item) | workers' CPU (an item) | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {items} | {workers} × {slots} | {calls} | {:.2} s | {:.2} s | {:.4} | {} | {} | {} |",
        makespan.as_secs_f64(),
        bound.as_secs_f64(),
        makespan.as_secs_f64() / bound.as_secs_f64(),
        cpu_cell(server, items),
        cpu_cell(own, items),
        fmt_mib(peak_rss_mib())
    );
}
