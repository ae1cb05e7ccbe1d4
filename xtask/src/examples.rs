//! `cargo xtask examples`: each library use-case example prints what the
//! CLI prints for the same input.
//!
//! The examples are the proof that a use case is one library call away
//! (issue 9): `render_weekly` renders the README's `ctx render` example with
//! `ctx_prompt::render_prompt`; `run_plan` runs the Tetris plan durably with
//! `ctx_run::run_plan`, and its results.json must equal the one `ctx run
//! --out` writes (times aside), and `ctx run --resume` of its run directory
//! must reuse every task. A test that only called the library would
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
    let mut build = crate::cargo_command();
    build.args(["build", "-p", "ctx-cli", "--bin", "ctx"]);
    for pair in PAIRS {
        build.args(["-p", pair.package, "--example", pair.example]);
    }
    build.args(["-p", "ctx-run", "--example", "run_plan"]);
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
    if let Err(e) = run_plan_matches_ctx_run(&root, &target) {
        problems.push(e);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The plan `run_plan` is checked on: checks, entities, dependencies.
const RUN_PLAN: &str = "fixtures/tetris/plan.yaml";

/// `run_plan PLAN A` and `ctx run PLAN --out B` write the same
/// results.json but for times and the dispatch order of tasks ready at
/// once; `ctx run --resume A/run` then dispatches
/// nothing (every task reused).
fn run_plan_matches_ctx_run(root: &Path, target: &Path) -> Result<(), String> {
    let scratch = target.join("xtask-examples");
    let _ = std::fs::remove_dir_all(&scratch);
    let (a, b) = (scratch.join("example"), scratch.join("ctx"));
    let ctx = target.join("debug/ctx");
    stdout(
        Command::new(target.join("debug/examples/run_plan"))
            .arg(RUN_PLAN)
            .arg(&a)
            .current_dir(root),
        "run_plan",
    )?;
    stdout(
        Command::new(&ctx)
            .args(["run", RUN_PLAN, "--out"])
            .arg(&b)
            .arg("--run-dir")
            .arg(b.join("run"))
            .current_dir(root),
        "ctx run",
    )?;
    let read = |dir: &Path| -> Result<serde_json::Value, String> {
        let path = dir.join("results.json");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        without_times(&mut v);
        // Tasks that become ready together are dispatched as their
        // dependencies finish, which is timing: compare `order` as a set.
        if let Some(order) = v.get_mut("order").and_then(|o| o.as_array_mut()) {
            order.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
        }
        Ok(v)
    };
    let (example, cli) = (read(&a)?, read(&b)?);
    if example != cli {
        return Err(format!(
            "example run_plan: {}/results.json differs from `ctx run {RUN_PLAN} --out`'s ({}/results.json), times aside",
            a.display(),
            b.display()
        ));
    }
    let resumed = stdout(
        Command::new(&ctx)
            .args(["run", "--resume"])
            .arg(a.join("run"))
            .args(["--format", "json"])
            .current_dir(root),
        "ctx run --resume",
    )?;
    let resumed: serde_json::Value = serde_json::from_slice(&resumed)
        .map_err(|e| format!("ctx run --resume --format json: {e}"))?;
    let tasks = resumed["tasks"].as_array().map_or(0, Vec::len);
    let dispatched = resumed["order"].as_array().map_or(usize::MAX, Vec::len);
    if tasks == 0 || dispatched != 0 {
        return Err(format!(
            "example run_plan: `ctx run --resume` of its run dispatched {dispatched} of {tasks} tasks; it must reuse them all"
        ));
    }
    eprintln!(
        "example run_plan matches `ctx run --out` ({} tasks), and `ctx run --resume` reuses them all",
        tasks
    );
    Ok(())
}

/// Nulls what differs between two runs of the same plan: durations and
/// timestamps (`*_ms`, `*_at`).
fn without_times(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if k.ends_with("_ms") || k.ends_with("_at") {
                    *val = serde_json::Value::Null;
                } else {
                    without_times(val);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(without_times),
        _ => {}
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
