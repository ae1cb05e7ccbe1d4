//! A map of 10,000 items on the simulated clock, on the memory store and
//! on this SQLite store (`cargo xtask bench-map`, or `cargo bench -p
//! ctx-store-sqlite --bench map -- [--items N] [--concurrency C]`).
//! Figures: docs/performance.md ("Map over a list").
//!
//! The workload is `ctx_test_support::sim_map` (the one the shared
//! store's `shared_map` bench in ctx-worker runs too): `src → scan →
//! report`, `scan` mapping over `src`'s JSON list of N items, items of
//! 200–5,000 ms (seeded, so every run sees the same list). The engine
//! sleeps each call's latency on tokio's *paused* clock, so the makespan
//! measures the schedule, not this machine; the store's own calls run on
//! the blocking pool, during which the paused clock does not advance, so
//! a slower store costs wall time, never simulated time.
//!
//! Reported per store: makespan ÷ lower bound, where the bound is
//! `src + max(longest item, total item work ÷ concurrency) + report`
//! (no schedule beats it: the items cannot start before the list, nor
//! the reduce before the last item); the wall time; peak resident memory
//! (Linux `VmHWM`, reset before each run). The goal is a ratio of at most
//! 1.05.

use std::sync::Arc;
use std::time::Instant;

use ctx_deps::{ExecutionStore, Executor, ExecutorOptions, MemoryStore};
use ctx_model::TaskStatus;
use ctx_store_sqlite::{NewRun, SessionEnd, SqliteStore};
use ctx_test_support::bench::{BenchArgs, fmt_mib, peak_rss_mib, reset_peak};
use ctx_test_support::sim_map::SimMap;

/// Runs the plan on `store` and prints its row.
fn run(label: &str, map: SimMap, concurrency: usize, store: Arc<dyn ExecutionStore>) {
    let items = map.items;
    reset_peak();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let exec = Executor::new(
        map.plan(),
        Arc::new(map.engine()),
        store,
        ExecutorOptions {
            concurrency,
            ..ExecutorOptions::default()
        },
    )
    .expect("valid plan");
    let wall = Instant::now();
    let report = rt.block_on(exec.run()).expect("run");
    let wall = wall.elapsed();
    let done = report.count(TaskStatus::Completed);
    assert_eq!(
        done,
        map.tasks(),
        "every task completes: {:?}",
        report
            .results
            .iter()
            .find(|r| r.status != TaskStatus::Completed)
    );
    let bound = map.bound(concurrency).as_millis();
    let makespan = report.makespan.as_millis() as f64;
    println!(
        "| {label} | {items} | {concurrency} | {:.1} s | {:.1} s | {:.4} | {:.2} s | {} |",
        makespan / 1e3,
        bound as f64 / 1e3,
        makespan / bound as f64,
        wall.as_secs_f64(),
        fmt_mib(peak_rss_mib())
    );
}

fn main() {
    let Some(args) = BenchArgs::from_env() else {
        return;
    };
    let smoke = args.smoke();
    let value = |flag: &str| args.value(flag).map(|v| v as usize);
    let items = value("--items").unwrap_or(if smoke { 50 } else { 10_000 });
    let concurrency = value("--concurrency").unwrap_or(16).max(1);
    println!("## map over a list: {items} items on the simulated clock");
    println!();
    println!(
        "| store | items | in flight | makespan (sim) | lower bound | ratio | wall | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let map = SimMap::new(items);
    run("memory", map, concurrency, Arc::new(MemoryStore::new()));
    let tmp = tempfile::tempdir().expect("a scratch directory");
    let p = map.plan();
    let store = SqliteStore::create_in(
        &tmp.path().join("run"),
        &NewRun {
            plan: &p,
            engine: "sim",
            plan_source: None,
            inputs: None,
        },
    )
    .expect("a run directory");
    let store = Arc::new(store);
    run("sqlite", map, concurrency, store.clone());
    store
        .finish(SessionEnd::Finished)
        .expect("the session's end");
}
