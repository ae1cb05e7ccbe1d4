//! `cargo xtask bench-batch [--items N] [--runs N]`: a map of 10,000 items
//! through the Batch API against ctx-test-support's server (issue 37):
//! the wall time, peak memory and spend of `ctx run` real-time, with
//! `--batch`, and with a deadline that sends half the items real-time.
//!
//! The body is `crates/ctx-cli/benches/batch_map.rs` (it starts the test
//! server in its process and drives the `ctx` binary its bench profile
//! builds; xtask depends on neither); this runs it with the arguments
//! passed through. The figures are in docs/performance.md ("Batch runs
//! (issue 37)").

const USAGE: &str = "cargo xtask bench-batch [--items N] [--runs N]";

/// Runs the benchmark with `args`.
pub fn run(args: &[String]) -> Result<(), String> {
    super::cargo_bench("ctx-cli", "batch_map", &["--items", "--runs"], USAGE, args)
}
