//! `cargo xtask e2e` (being built).

/// Runs the task with its arguments.
pub fn run(_args: &[String]) -> Result<(), String> {
    Err("not built yet".into())
}
