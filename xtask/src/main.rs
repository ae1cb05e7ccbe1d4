//! `cargo xtask`: maintainer automation, in Rust, with no tools to install.
//!
//! * `cargo xtask test [--no-e2e]` runs every test the project has: the
//!   workspace's unit, integration, property and golden tests (nextest when
//!   installed, else `cargo test`), the doctests, and the end-to-end run
//!   against a real LiteLLM proxy. `.ci/run` calls exactly this. First it
//!   installs a headless Chromium (`scripts/install-chromium.sh`) for the
//!   tests that load the HTML run report in a browser, and starts a
//!   throw-away PostgreSQL (`scripts/postgres.sh`) for the store tests,
//!   stopped again after them.
//! * `cargo xtask fixtures [--check]` regenerates (or checks) every golden
//!   file listed in `fixtures/*/goldens.toml` by running the real `ctx`
//!   binary.
//! * `cargo xtask bench`, `bench-plan`, `bench-map`, `bench-history`,
//!   `bench-run`, `bench-tracing`, `bench-batch`: the benchmarks
//!   whose figures are in docs/performance.md.
//! * `cargo xtask e2e [--llm]`: end-to-end runs against real servers.
//! * `cargo xtask man [--out DIR]`: man pages from the clap definition.
//! * `cargo xtask examples`: the library use-case examples print what the
//!   CLI prints for the same input (also run by `cargo xtask test`).
//! * `cargo xtask arch`: the architecture checks (also run as tests by
//!   `cargo xtask test`): the dependency-direction block of
//!   docs/architecture.md against the Cargo.toml files, forbidden edges,
//!   broken links.
//! * `cargo xtask mutants [--all] [--base REF]`: cargo-mutants on the lines
//!   changed since main, or on the critical files (see `mutants.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod arch;
mod bench_batch;
mod bench_history;
mod bench_map;
mod bench_plan;
mod bench_run;
mod bench_tokens;
mod bench_tracing;
mod checkout_runs;
mod e2e;
mod examples;
#[path = "../../crates/ctx-cli/tests/support/goldens.rs"]
mod goldens;
mod man;
mod mutants;
mod tour;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("fixtures") => fixtures(&args[1..]),
        Some("test") => test(&args[1..]),
        // Each benchmark has its own flags; `bench` runs them all with their defaults.
        Some("bench") if args.len() == 1 => bench_plan::run(&[])
            .and_then(|()| bench_map::run(&[]))
            .and_then(|()| bench_history::run(&[]))
            .and_then(|()| bench_run::run(&[]))
            .and_then(|()| bench_tracing::run(&[]))
            .and_then(|()| bench_batch::run(&[])),
        Some("bench") => Err(
            "`cargo xtask bench` takes no flags; pass them to bench-plan, bench-map, bench-history, bench-run, bench-tracing or bench-batch"
                .into(),
        ),
        Some("bench-run") => bench_run::run(&args[1..]),
        Some("bench-tracing") => bench_tracing::run(&args[1..]),
        Some("bench-plan") => bench_plan::run(&args[1..]),
        Some("bench-map") => bench_map::run(&args[1..]),
        Some("bench-batch") => bench_batch::run(&args[1..]),
        Some("bench-history") => bench_history::run(&args[1..]),
        Some("bench-tokens") => bench_tokens::run(&args[1..]),
        Some("e2e") => e2e::run(&args[1..]),
        Some("man") => man::run(&args[1..]),
        Some("arch") => arch::run(&args[1..]),
        Some("examples") => examples::run(&args[1..]),
        Some("mutants") => mutants::run(&args[1..]),
        Some("tour") => tour::run(&args[1..]),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  test [--no-e2e]      every test: unit, integration, golden, doc, browser, and the LiteLLM e2e
  fixtures [--check]   regenerate golden files (or only check them)
  bench                run bench-plan, bench-map, bench-history, bench-run, bench-tracing, then bench-batch
  bench-plan           scheduler and prompt-assembly benchmark (docs/performance.md)
  bench-map            maps of 10,000 and 30,000 items: memory and SQLite stores (simulated clock),
                       then the shared PostgreSQL store (real clock; starts the test server)
  bench-history        history digest benchmark on a generated archive
  bench-run            ctx run --no-store at 50,000 and 100,000 tasks: CPU ratio at most 2.5
  bench-tracing        ctx run with tracing off and on against a local collector: CPU and wall
  bench-batch          a map of 10,000 items through the Batch API against the test server:
                       wall, peak memory and spend, real-time, batched and with a deadline fallback
  bench-tokens         token counting: first count, throughput, ctx history per tokenizer
  e2e [--llm]          ctx run against real OpenAI-compatible servers
  man [--out DIR]      man pages for ctx and each subcommand (default target/man)
  arch                 check docs/architecture.md's dependency rules and every doc link
  examples             run the library use-case examples and compare them with the CLI
  tour [--base-url URL] [--no-postgres]
                       run every command block of docs/guide.md, in order, in target/tour
  mutants [--all] [--base REF]
                       cargo-mutants on the lines changed since main (or REF), or with
                       --all on the critical files; prints caught/missed per file";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Builds the `ctx` binary (debug) and returns its path. Cargo's own
/// progress is let through: on a fresh checkout this build takes minutes,
/// and a silent terminal looks hung.
fn build_ctx(root: &Path) -> Result<PathBuf, String> {
    run_cargo(root, &["build", "--package", "ctx-cli", "--bin", "ctx"])?;
    Ok(target_dir(root)
        .join("debug")
        .join(format!("ctx{}", std::env::consts::EXE_SUFFIX)))
}

/// The cargo arguments that build the release `ctx` every benchmark times.
const BUILD_RELEASE_CTX: &[&str] = &[
    "build",
    "--quiet",
    "--release",
    "-p",
    "ctx-cli",
    "--bin",
    "ctx",
];

/// Builds the release `ctx` ([`BUILD_RELEASE_CTX`]); its path.
fn build_release_ctx(root: &Path) -> Result<PathBuf, String> {
    run_cargo(root, BUILD_RELEASE_CTX)?;
    Ok(target_dir(root)
        .join("release")
        .join(format!("ctx{}", std::env::consts::EXE_SUFFIX)))
}

/// The value of a benchmark's `--runs N`: a positive number.
fn runs_value(value: Option<&String>) -> Result<usize, String> {
    value
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| "--runs needs a positive number".to_string())
}

/// The target directory: `CARGO_TARGET_DIR`, else `target/` of the checkout.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

fn fixtures(args: &[String]) -> Result<(), String> {
    let mode = match args {
        [] => goldens::Mode::Write,
        [flag] if flag == "--check" => goldens::Mode::Check,
        _ => return Err(USAGE.to_string()),
    };
    let root = root();
    let bin = build_ctx(&root)?;
    let problems = goldens::run_all(&bin, &root, mode)?;
    if problems.is_empty() {
        match mode {
            goldens::Mode::Write => eprintln!("golden files regenerated"),
            goldens::Mode::Check => eprintln!("golden files are up to date"),
        }
        Ok(())
    } else {
        Err(format!(
            "{}\n{} problem(s); run `cargo xtask fixtures` and review the diff",
            problems.join("\n"),
            problems.len()
        ))
    }
}

/// A command running the cargo that runs xtask (`CARGO`, else the one on
/// PATH), without the variables `cargo run` set for xtask itself
/// ([`RUN_ONLY_VARS`]).
///
/// Why: build scripts declare `cargo:rerun-if-env-changed` on some of
/// them, and cargo compares those with its *own* environment. ring's
/// build script (via the cc crate) declares `CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_NAME` and `CARGO_PKG_VERSION_*`: a plain `cargo build`
/// records them unset, a cargo started by `cargo xtask` saw
/// `CARGO_PKG_NAME=xtask`, so each reran ring's build script and rebuilt
/// ring, rustls, reqwest and every ctx crate above them, in turn, for
/// ever (issue 26; docs/performance.md, "The first hour").
pub(crate) fn cargo_command() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_run_only_var) {
            command.env_remove(name);
        }
    }
    command
}

/// The variables cargo sets for the program `cargo run` starts (here
/// xtask), besides `CARGO` and the library search path: they describe
/// xtask's package, and no cargo started from xtask must see them.
const RUN_ONLY_VARS: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
];

/// Whether `name` is one of [`RUN_ONLY_VARS`] or a `CARGO_PKG_*`.
fn is_run_only_var(name: &str) -> bool {
    name.starts_with("CARGO_PKG_") || RUN_ONLY_VARS.contains(&name)
}

/// Runs the benchmark target `bench` of `package` in release mode with
/// `args` passed through, after checking they are pairs of one of
/// `flags` and a number (else `usage`). The benchmarks that need crates
/// xtask does not depend on (the executor, the stores, tokio's paused
/// clock) live as `[[bench]]` targets of those crates and run this way.
fn cargo_bench(
    package: &str,
    bench: &str,
    flags: &[&str],
    usage: &str,
    args: &[String],
) -> Result<(), String> {
    for pair in args.chunks(2) {
        match pair {
            [flag, value] if flags.contains(&flag.as_str()) && value.parse::<u64>().is_ok() => {}
            _ => return Err(format!("usage: {usage} (got {})", args.join(" "))),
        }
    }
    cargo_bench_with(package, bench, args, &[])
}

/// Runs `cargo bench -p PACKAGE --bench BENCH -- ARGS` from the
/// checkout, with `env` set for it.
fn cargo_bench_with(
    package: &str,
    bench: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> Result<(), String> {
    let status = cargo_command()
        .args(["bench", "--package", package, "--bench", bench, "--"])
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|e| format!("cargo bench: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the {package} {bench} benchmark failed"))
    }
}

/// Runs `cargo ARGS` in `root` to the end; an error names the command.
fn run_cargo(root: &Path, args: &[&str]) -> Result<(), String> {
    let status = cargo_command()
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("cargo {}: {e}", args.join(" ")))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo {} failed", args.join(" ")))
    }
}

/// Runs one step of a longer job: says what it starts (`==> what`),
/// lets the command's own output through (cargo's progress, the
/// scripts' lines), and says how long it took, so a first `cargo xtask
/// test` that spends minutes building is never a silent terminal.
fn run_step(what: &str, cmd: &mut Command) -> Result<(), String> {
    eprintln!("==> {what}");
    let started = std::time::Instant::now();
    let status = cmd.status().map_err(|e| format!("{what}: {e}"))?;
    eprintln!(
        "==> {what}: {} in {:.0} s",
        if status.success() { "done" } else { "failed" },
        started.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what}: failed ({status})"))
    }
}

/// Installs the headless Chromium that the report's browser tests
/// (crates/ctx-report/tests/browser.rs, crates/ctx-cli/tests/runs_report.rs)
/// load pages in, with scripts/install-chromium.sh (idempotent: it does
/// nothing when one is on PATH). Those tests fail when `CI` is set and no
/// browser is found, so in CI a failed install stops here with the
/// script's reason; elsewhere it is a warning and the tests skip their
/// browser part, saying so.
fn browser(root: &Path) -> Result<(), String> {
    let what = "headless Chromium for the report's browser tests (scripts/install-chromium.sh)";
    let installed = run_step(
        what,
        Command::new("sh")
            .arg(root.join("scripts/install-chromium.sh"))
            .current_dir(root),
    );
    match installed {
        Err(e) if std::env::var_os("CI").is_some() => Err(format!(
            "{e}\nCI is set: the browser tests would fail without a browser"
        )),
        Err(e) => {
            eprintln!("warning: {e}; the browser tests will skip (they fail only when CI is set)");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// Starts the throw-away PostgreSQL server the store tests run against
/// (scripts/postgres.sh: Debian's server, as an unprivileged user when run
/// as root) and returns its URL, which the tests read from
/// `CTX_TEST_POSTGRES_URL`. Those tests fail when `CI` is set and the
/// variable is not, so in CI a failed start stops here with the script's
/// reason; elsewhere it is a warning and they skip, saying so.
fn postgres(root: &Path) -> Result<Option<String>, String> {
    eprintln!("==> PostgreSQL for the store tests (scripts/postgres.sh start)");
    let out = Command::new("sh")
        .arg(root.join("scripts/postgres.sh"))
        .arg("start")
        .current_dir(root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("scripts/postgres.sh: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let url = stdout
        .lines()
        .find_map(|l| l.strip_prefix("export CTX_TEST_POSTGRES_URL="))
        .map(str::to_string);
    match url {
        Some(url) if out.status.success() => Ok(Some(url)),
        _ => {
            let e = format!("scripts/postgres.sh start failed ({})", out.status);
            if std::env::var_os("CI").is_some() {
                Err(format!(
                    "{e}\nCI is set: the PostgreSQL store tests would fail without a server"
                ))
            } else {
                eprintln!(
                    "warning: {e}; the PostgreSQL store tests will skip (they fail only when CI is set)"
                );
                Ok(None)
            }
        }
    }
}

fn stop_postgres(root: &Path) {
    let _ = Command::new("sh")
        .arg(root.join("scripts/postgres.sh"))
        .arg("stop")
        .current_dir(root)
        .status();
}

fn has_nextest() -> bool {
    cargo_command()
        .args(["nextest", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn test(args: &[String]) -> Result<(), String> {
    let e2e = match args {
        [] => true,
        [flag] if flag == "--no-e2e" => false,
        _ => return Err(USAGE.to_string()),
    };
    let root = root();
    let started = std::time::Instant::now();
    let runs_before = checkout_runs::checkout_runs(&root);
    browser(&root)?;
    let pg = postgres(&root)?;
    let with_pg = |cmd: &mut Command| {
        if let Some(url) = &pg {
            cmd.env("CTX_TEST_POSTGRES_URL", url);
        }
    };
    let tests = if has_nextest() {
        let mut cmd = cargo_command();
        cmd.args(["nextest", "run", "--workspace", "--no-fail-fast"])
            .current_dir(&root);
        with_pg(&mut cmd);
        run_step(
            "unit, integration, property and golden tests (nextest)",
            &mut cmd,
        )
    } else {
        let mut cmd = cargo_command();
        cmd.args(["test", "--workspace", "--no-fail-fast"])
            .current_dir(&root);
        with_pg(&mut cmd);
        run_step(
            "unit, integration, property and golden tests (cargo test)",
            &mut cmd,
        )
    };
    if pg.is_some() {
        stop_postgres(&root);
    }
    tests?;
    run_step(
        "doctests",
        cargo_command()
            .args(["test", "--workspace", "--doc"])
            .current_dir(&root),
    )?;
    eprintln!("==> library examples against the CLI");
    examples::run(&[])?;
    // The guide's tour as written; its blocks that call a model run in
    // the e2e step, against the LiteLLM proxy.
    tour::run_tour(
        &root,
        &build_ctx(&root)?,
        &tour::Options {
            base_url: None,
            postgres: pg.is_some(),
            only_models: false,
        },
    )?;
    if e2e {
        e2e::run(&[])?;
    }
    checkout_runs::refuse_new(&runs_before, &checkout_runs::checkout_runs(&root))?;
    eprintln!(
        "==> cargo xtask test: every step passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cargo xtask starts does not see the variables cargo set for
    /// xtask's own process (here the test's: cargo sets the same ones for
    /// a test binary), which made ring's build script rerun on every
    /// switch between `cargo xtask` and `cargo build` (issue 26), and keeps
    /// the settings a user gives cargo (`CARGO_TARGET_DIR`, `CARGO_HOME`,
    /// `CARGO_BUILD_JOBS`).
    #[test]
    fn cargo_runs_without_the_variables_of_xtasks_own_run() {
        assert!(
            std::env::var_os("CARGO_PKG_NAME").is_some(),
            "cargo test sets CARGO_PKG_NAME for the test process"
        );
        let command = cargo_command();
        let removed: Vec<String> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .filter_map(|(name, _)| name.to_str().map(String::from))
            .collect();
        for name in ["CARGO_PKG_NAME", "CARGO_PKG_VERSION", "CARGO_MANIFEST_DIR"] {
            assert!(
                removed.iter().any(|r| r == name),
                "{name} kept: {removed:?}"
            );
        }
        for name in [
            "CARGO",
            "CARGO_TARGET_DIR",
            "CARGO_HOME",
            "CARGO_BUILD_JOBS",
            "CARGO_ENCODED_RUSTFLAGS",
        ] {
            assert!(!is_run_only_var(name), "{name} would be removed");
        }
    }
}
