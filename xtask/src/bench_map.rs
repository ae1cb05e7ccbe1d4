//! `cargo xtask bench-map [--items N] [--concurrency C]`: a map task of
//! 10,000 items and one of 30,000, on the memory and SQLite stores on the
//! simulated clock, then one of 10,000 on the shared PostgreSQL store on
//! the real one (issue 23). `--items N` runs the one size N everywhere.
//!
//! The benchmark bodies live in `crates/ctx-store-sqlite/benches/map.rs`
//! and `crates/ctx-worker/benches/shared_map.rs` (they need the executor,
//! the stores and tokio, none of which xtask depends on), over one
//! workload (`ctx_test_support::sim_map`); this runs them in the bench
//! profile and passes the arguments through. Each prints markdown rows:
//! makespan ÷ lower bound (the goal is at most 1.05), the time and CPU
//! spent (per item too: the row at 30,000 beside the one at 10,000 shows
//! whether a map's cost per item grows with its list, issue 35) and peak
//! memory. The figures are recorded in docs/performance.md.
//!
//! The shared store's rows need a server: this starts the test server
//! (`scripts/postgres.sh`, as `cargo xtask test` does) and stops it after.
//! They are two: the local bench's model-like latencies with 4 workers of
//! 64 slots (the real clock cannot be paused, so the 10,000 items need
//! many calls in flight to end in about two minutes), and the stress
//! case, calls of 20 ms on 4 workers of 8 slots, where what the store
//! costs an item is most of the makespan.

const USAGE: &str = "cargo xtask bench-map [--items N] [--concurrency C]";

/// The shared store's rows: `shared_map`'s flags for each.
const SHARED_ROWS: &[&[&str]] = &[
    &["--workers", "4", "--slots", "64"],
    &["--workers", "4", "--slots", "8", "--call-ms", "20"],
];

/// Runs the benchmarks with `args` (`--items N`, `--concurrency C`; the
/// shared store's rows take `--items` only, their slots being theirs).
pub fn run(args: &[String]) -> Result<(), String> {
    super::cargo_bench(
        "ctx-store-sqlite",
        "map",
        &["--items", "--concurrency"],
        USAGE,
        args,
    )?;
    let root = super::root();
    let Some(url) = super::postgres(&root)? else {
        eprintln!("bench-map: the shared store's rows are left out: no PostgreSQL server");
        return Ok(());
    };
    let items: Vec<String> = args
        .chunks(2)
        .filter(|pair| pair[0] == "--items")
        .flatten()
        .cloned()
        .collect();
    let result = SHARED_ROWS.iter().try_for_each(|row| {
        let mut flags = items.clone();
        flags.extend(row.iter().map(|f| f.to_string()));
        super::cargo_bench_with(
            "ctx-worker",
            "shared_map",
            &flags,
            &[("CTX_TEST_POSTGRES_URL", &url)],
        )
    });
    super::stop_postgres(&root);
    result
}
