//! `cargo xtask bench_plan` (being built).

/// Runs the task with its arguments.
pub fn run(_args: &[String]) -> Result<(), String> {
    Err("not built yet".into())
}
