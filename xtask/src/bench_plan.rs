//! `cargo xtask bench-plan [--tasks N] [--seed S]`: the scheduler and
//! prompt-assembly benchmark.
//!
//! The benchmark body lives in `crates/ctx-deps/benches/schedule.rs` (it
//! needs ctx-deps, tokio's paused clock and the real prompt assembly, none
//! of which xtask depends on); this runs it in release mode and passes the
//! arguments through. It prints markdown tables: makespan ÷ critical-path
//! lower bound for the ready queue and for level batches at several
//! concurrencies, prompt-assembly throughput, peak memory. The figures are
//! recorded in docs/performance.md.

/// Runs the benchmark with `args` (`--tasks N`, `--seed S`).
pub fn run(args: &[String]) -> Result<(), String> {
    super::cargo_bench(
        "ctx-deps",
        "schedule",
        &["--tasks", "--seed"],
        "cargo xtask bench-plan [--tasks N] [--seed S]",
        args,
    )
}
