//! `cargo xtask examples`: each library use-case example prints what the
//! CLI prints for the same input.
//!
//! The examples are the proof that a use case is one library call away
//! (issue 9): `render_weekly` renders the README's `ctx render` example with
//! `ctx_prompt::render_prompt`. A test that only called the library would
//! not notice the CLI drifting from it; this one runs both real programs and
//! compares their bytes. `cargo xtask test` runs it after the unit tests.

use std::path::Path;
use std::process::Command;

/// One example and the `ctx` command line it must match, stdout for stdout.
struct Pair {
    package: &'static str,
    example: &'static str,
    ctx_args: &'static [&'static str],
}

const PAIRS: &[Pair] = &[Pair {
    package: "ctx-prompt",
    example: "render_weekly",
    ctx_args: &[
        "render",
        "fixtures/weekly/prompts/analyze-weekly.md",
        "--var",
        "WEEK=2026-W34",
        "--var",
        "PROJECT=Kestrel",
        "--var",
        "MAX_WORDS=600",
        "--var",
        "RAW_JSON=@fixtures/weekly/prompts/raw-2026-W34.json",
        "--content-root",
        "fixtures/weekly/content",
        "--date",
        "2026-08-20",
        "--prompt-budget",
        "8000",
    ],
}];

/// Builds the examples and `ctx`, runs each pair, compares stdout.
pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask examples".into());
    }
    let root = crate::root();
    let mut build = Command::new(crate::cargo());
    build.args(["build", "-q", "-p", "ctx-cli", "--bin", "ctx"]);
    for pair in PAIRS {
        build.args(["-p", pair.package, "--example", pair.example]);
    }
    crate::run_step("build the examples and ctx", build.current_dir(&root))?;
    let target = target_dir(&root)?;
    let mut problems = Vec::new();
    for pair in PAIRS {
        let example = stdout(
            Command::new(target.join("debug/examples").join(pair.example)).current_dir(&root),
            pair.example,
        )?;
        let ctx = stdout(
            Command::new(target.join("debug/ctx"))
                .args(pair.ctx_args)
                .current_dir(&root),
            "ctx",
        )?;
        if example == ctx {
            eprintln!(
                "example {} matches `ctx {}` ({} bytes)",
                pair.example,
                pair.ctx_args[0],
                ctx.len()
            );
        } else {
            problems.push(format!(
                "example {} prints {} bytes that differ from `ctx {}` ({} bytes)",
                pair.example,
                example.len(),
                pair.ctx_args.join(" "),
                ctx.len()
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn target_dir(root: &Path) -> Result<std::path::PathBuf, String> {
    let meta = cargo_metadata::MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .no_deps()
        .exec()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    Ok(meta.target_directory.into_std_path_buf())
}

fn stdout(cmd: &mut Command, what: &str) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what}: failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}
