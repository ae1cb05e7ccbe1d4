//! Maps of 10,000 and 30,000 items on the simulated clock, on the memory
//! store and on this SQLite store (`cargo xtask bench-map`, or `cargo
//! bench -p ctx-store-sqlite --bench map -- [--items N] [--concurrency
//! C]`, which runs the one size N). Figures: docs/performance.md ("Map
//! over a list", and "A map's cost per item" for the CPU column).
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
//! (Linux `VmHWM`, reset before each run); and this process's CPU (every
//! thread: the executor, the store's blocking pool) over the run and per
//! item. The goal is a ratio of at most 1.05, and a CPU per item that
//! does not grow with the list (two sizes, so that the row at 30,000
//! shows it beside the one at 10,000).

use std::sync::Arc;
use std::time::Instant;

use ctx_deps::{ExecutionStore, Executor, ExecutorOptions, MemoryStore};
use ctx_model::TaskStatus;
use ctx_store_sqlite::{NewRun, SessionEnd, SqliteStore};
use ctx_test_support::bench::{BenchArgs, cpu_cell, fmt_mib, own_cpu, peak_rss_mib, reset_peak};
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
    let cpu_before = own_cpu();
    let wall = Instant::now();
    let report = rt.block_on(exec.run()).expect("run");
    let wall = wall.elapsed();
    let cpu = own_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
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
        "| {label} | {items} | {concurrency} | {:.1} s | {:.1} s | {:.4} | {:.2} s | {} | {} |",
        makespan / 1e3,
        bound as f64 / 1e3,
        makespan / bound as f64,
        wall.as_secs_f64(),
        cpu_cell(cpu, items),
        fmt_mib(peak_rss_mib())
    );
}

/// Runs a map of `items` items on the memory store, then on a SQLite run
/// directory of its own, printing a row for each.
fn run_both(items: usize, concurrency: usize) {
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

fn main() {
    let Some(args) = BenchArgs::from_env() else {
        return;
    };
    let smoke = args.smoke();
    let value = |flag: &str| args.value(flag).map(|v| v as usize);
    // Two sizes by default: the CPU an item at 30,000 beside 10,000 shows
    // whether a map's cost grows with its list (docs/performance.md).
    let sizes = match value("--items") {
        Some(n) => vec![n],
        None if smoke => vec![50],
        None => vec![10_000, 30_000],
    };
    let concurrency = value("--concurrency").unwrap_or(16).max(1);
    let names: Vec<String> = sizes.iter().map(usize::to_string).collect();
    println!(
        "## map over a list: {} items on the simulated clock",
        names.join(" and ")
    );
    println!();
    println!(
        "| store | items | in flight | makespan (sim) | lower bound | ratio | wall | CPU (an item) | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for items in sizes {
        run_both(items, concurrency);
    }
}
