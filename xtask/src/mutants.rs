//! `cargo xtask mutants [--all] [--base REF]`: mutation testing with
//! cargo-mutants (`cargo install --locked cargo-mutants`).
//!
//! A test suite can pass while pinning nothing: cargo-mutants changes the
//! code (a `<` becomes `<=`, a function returns a default) and checks that
//! some test fails. A mutant that survives is behaviour no test pins.
//!
//! * Without flags: the mutants of the lines changed since `main` (or
//!   `--base REF`), through `git diff` and cargo-mutants' `--in-diff`. The
//!   habit before a merge request.
//! * `--all`: every mutant of the critical files ([`CRITICAL`]): the fence
//!   matcher, the prompt cap, the budget ledger and reservation, and check
//!   evaluation, one package at a time so only its tests run.
//!
//! Either way one job at a time (`-j 1`) and nextest, whose slow-timeout
//! (`.config/nextest.toml`) fails a hanging mutant fast. Mutants that
//! cannot change behaviour are excluded, each with its reason, in
//! `.cargo/mutants.toml`. At the end it prints, per file, how many mutants
//! were caught, missed, timed out or unviable; docs/testing.md records
//! the figures. Not part of `.ci/run`: on 2 cores a full run takes hours.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::{USAGE, cargo_command, root, run_step};

/// The files whose every mutant must be caught (or excluded with a
/// reason), by package.
pub const CRITICAL: &[(&str, &[&str])] = &[
    (
        "ctx-fence",
        &[
            "crates/ctx-fence/src/matcher.rs",
            "crates/ctx-fence/src/lib.rs",
        ],
    ),
    ("ctx-prompt", &["crates/ctx-prompt/src/assembly/fit.rs"]),
    ("ctx-tokens", &["crates/ctx-tokens/src/prefix.rs"]),
    ("ctx-cost", &["crates/ctx-cost/src/ledger.rs"]),
    ("ctx-checks", &["crates/ctx-checks/src/evaluate.rs"]),
    (
        "ctx-deps",
        &[
            "crates/ctx-deps/src/budget.rs",
            "crates/ctx-deps/src/cost.rs",
            "crates/ctx-deps/src/call_bounds.rs",
        ],
    ),
];

/// One cargo-mutants invocation: its name (the package, or `diff`), which
/// names its output folder, and the arguments that pick its mutants.
type MutantsRun = (String, Vec<String>);

pub fn run(args: &[String]) -> Result<(), String> {
    let (all, base) = parse(args)?;
    let root = root();
    let installed = cargo_command()
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        return Err("cargo-mutants is not installed: cargo install --locked cargo-mutants".into());
    }
    let out_root = root.join("target/mutants");
    let runs = if all {
        critical_runs()
    } else {
        match diff_run(&root, &base, &out_root)? {
            Some(run) => vec![run],
            None => return Ok(()),
        }
    };
    run_mutants(&root, &out_root, runs)
}

/// `--all` and `--base REF` (`main` by default).
fn parse(args: &[String]) -> Result<(bool, String), String> {
    let mut all = false;
    let mut base = "main".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--all" => all = true,
            "--base" => base = it.next().ok_or(USAGE)?.clone(),
            _ => return Err(USAGE.to_string()),
        }
    }
    Ok((all, base))
}

/// `--all`: a run per package of [`CRITICAL`], on its files only.
fn critical_runs() -> Vec<MutantsRun> {
    let mut runs = Vec::new();
    for (package, files) in CRITICAL {
        let mut a = vec!["-p".to_string(), package.to_string()];
        for f in *files {
            a.extend(["-f".to_string(), f.to_string()]);
        }
        runs.push((package.to_string(), a));
    }
    runs
}

/// The run of the lines changed since `base`: the diff written under
/// `out_root` for `--in-diff`. `None` (said on stderr) when nothing
/// changed.
fn diff_run(root: &Path, base: &str, out_root: &Path) -> Result<Option<MutantsRun>, String> {
    let diff = Command::new("git")
        .args(["diff", base])
        .current_dir(root)
        .output()
        .map_err(|e| format!("git diff {base}: {e}"))?;
    if !diff.status.success() {
        return Err(format!(
            "git diff {base}: {}",
            String::from_utf8_lossy(&diff.stderr).trim()
        ));
    }
    if diff.stdout.is_empty() {
        eprintln!("no change since {base}: no mutants to test");
        return Ok(None);
    }
    std::fs::create_dir_all(out_root).map_err(|e| format!("{}: {e}", out_root.display()))?;
    let diff_file = out_root.join(format!("since-{}.diff", base.replace('/', "-")));
    std::fs::write(&diff_file, &diff.stdout)
        .map_err(|e| format!("{}: {e}", diff_file.display()))?;
    Ok(Some((
        "diff".to_string(),
        vec!["--in-diff".to_string(), diff_file.display().to_string()],
    )))
}

/// Runs each in turn, one job at a time under nextest, printing each
/// one's summary; the failures of those that missed mutants, as one
/// error at the end (so one package's misses do not stop the others).
fn run_mutants(root: &Path, out_root: &Path, runs: Vec<MutantsRun>) -> Result<(), String> {
    let mut failed = Vec::new();
    for (name, mut a) in runs {
        let out = out_root.join(&name);
        let mut full = vec!["mutants".to_string()];
        full.append(&mut a);
        full.extend(
            ["--test-tool", "nextest", "-j", "1", "-o"]
                .iter()
                .map(|s| s.to_string()),
        );
        full.push(out.display().to_string());
        let mut cmd = cargo_command();
        cmd.args(&full).current_dir(root);
        // cargo-mutants exits non-zero when a mutant is missed; the
        // summary below says which, so carry on with the other packages.
        if let Err(e) = run_step(&format!("cargo {}", full.join(" ")), &mut cmd) {
            failed.push(e);
        }
        print_summary(&out.join("mutants.out/outcomes.json"))?;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\nmissed mutants: pin them with a test, or exclude an equivalent one in .cargo/mutants.toml with its reason",
            failed.join("\n")
        ))
    }
}

/// Per file: caught, missed, timeout, unviable, from cargo-mutants'
/// `outcomes.json`.
fn print_summary(outcomes: &Path) -> Result<(), String> {
    let text = match std::fs::read_to_string(outcomes) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{}: {e}", outcomes.display());
            return Ok(());
        }
    };
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", outcomes.display()))?;
    let mut per_file: BTreeMap<String, [usize; 4]> = BTreeMap::new();
    for o in json["outcomes"].as_array().into_iter().flatten() {
        let Some(file) = o["scenario"]["Mutant"]["file"].as_str() else {
            continue; // the baseline
        };
        let column = match o["summary"].as_str().unwrap_or("") {
            "CaughtMutant" => 0,
            "MissedMutant" => 1,
            "Timeout" => 2,
            _ => 3,
        };
        per_file.entry(file.to_string()).or_default()[column] += 1;
    }
    println!("\n| file | caught | missed | timeout | unviable |\n|---|---|---|---|---|");
    for (file, [c, m, t, u]) in per_file {
        println!("| {file} | {c} | {m} | {t} | {u} |");
    }
    Ok(())
}
