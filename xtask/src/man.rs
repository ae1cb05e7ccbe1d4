//! `cargo xtask man [--out DIR]`: man pages for `ctx`, one for `ctx`
//! itself (`ctx.1`) and one per subcommand, each with an EXIT STATUS
//! section. The default directory is `target/man`.
//!
//! The pages are rendered by the `ctx` binary (the hidden `ctx man --out
//! DIR`, crates/ctx-cli/src/commands/man.rs) from the clap definition that
//! parses its command line. xtask builds that binary like every other
//! command does and never links ctx-cli: linking it made every `cargo
//! xtask` compile ctx-cli's whole dependency tree a second time, with
//! features unified with xtask's own dependencies (issue 26;
//! docs/performance.md, "The first hour"). `cargo xtask arch` keeps it so.

use std::path::PathBuf;
use std::process::Command;

/// Parses `[--out DIR]`, builds `ctx` and has it write the pages.
pub fn run(args: &[String]) -> Result<(), String> {
    let root = crate::root();
    let out = match args {
        [] => root.join("target").join("man"),
        [flag, dir] if flag == "--out" => PathBuf::from(dir),
        _ => return Err("usage: cargo xtask man [--out DIR]".into()),
    };
    let ctx = crate::build_ctx(&root)?;
    let status = Command::new(&ctx)
        .arg("man")
        .arg("--out")
        .arg(&out)
        .status()
        .map_err(|e| format!("{}: {e}", ctx.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} man --out {}: {status}",
            ctx.display(),
            out.display()
        ))
    }
}
