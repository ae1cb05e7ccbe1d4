//! `cargo xtask bench-map [--items N] [--concurrency C]`: a map task of
//! 10,000 items on the simulated clock, on the memory store and on the
//! SQLite store (issue 23).
//!
//! The benchmark body lives in `crates/ctx-store-sqlite/benches/map.rs` (it
//! needs the executor, both stores and tokio's paused clock, none of which
//! xtask depends on); this runs it in release mode and passes the
//! arguments through. It prints one markdown row per store: makespan ÷
//! lower bound (the goal is at most 1.05), wall time and peak memory. The
//! figures are recorded in docs/performance.md.

/// Runs the benchmark with `args` (`--items N`, `--concurrency C`).
pub fn run(args: &[String]) -> Result<(), String> {
    super::cargo_bench(
        "ctx-store-sqlite",
        "map",
        &["--items", "--concurrency"],
        "cargo xtask bench-map [--items N] [--concurrency C]",
        args,
    )
}
