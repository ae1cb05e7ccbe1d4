//! `cargo xtask bench-history [--runs N]`: the historical-digest benchmark
//! whose figures are in docs/performance.md.
//!
//! 1. Builds `ctx` and the `history_bench` example of ctx-history in
//!    release mode.
//! 2. Generates deterministic archives under `target/bench-history/`: 13
//!    weeks (about the design's archive, ~570 kB), one year, three years and
//!    ten years (weekly, monthly and yearly files and a 50,000-word rolling
//!    report).
//! 3. Times `ctx history` as a whole process (spawn to exit, output
//!    discarded) at prompt budgets 90,000 / 4,000 / 1,000 with cl100k_base,
//!    and reports the median and fastest of N runs.
//! 4. Runs `history_bench meter` for the bytes sent to the tokenizer ÷ the
//!    bytes of the extracted sections (goal ≤ 2), and the in-process
//!    assembly time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const BUDGETS: [usize; 3] = [90_000, 4_000, 1_000];
const DATE: &str = "2026-08-20";

struct Archive {
    name: &'static str,
    weeks: usize,
    rolling_words: usize,
    weekly_words: usize,
}

const ARCHIVES: [Archive; 4] = [
    Archive {
        name: "13-weeks",
        weeks: 13,
        rolling_words: 3_000,
        weekly_words: 5_600,
    },
    Archive {
        name: "1-year",
        weeks: 52,
        rolling_words: 10_000,
        weekly_words: 5_600,
    },
    Archive {
        name: "3-years",
        weeks: 156,
        rolling_words: 25_000,
        weekly_words: 5_600,
    },
    Archive {
        name: "10-years",
        weeks: 520,
        rolling_words: 50_000,
        weekly_words: 5_600,
    },
];

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(m) = p.metadata() {
                total += m.len();
            }
        }
    }
    total
}

fn time_process(
    ctx: &Path,
    archive: &Path,
    budget: usize,
    runs: usize,
) -> Result<(f64, f64), String> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let status = Command::new(ctx)
            .arg("history")
            .arg("--content-root")
            .arg(archive)
            .args(["--date", DATE, "--prompt-budget", &budget.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("{}: {e}", ctx.display()))?;
        let elapsed = start.elapsed().as_secs_f64() * 1000.0;
        if !status.success() {
            return Err(format!("ctx history failed on {}", archive.display()));
        }
        times.push(elapsed);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
    let min = times.first().copied().unwrap_or(0.0);
    Ok((median, min))
}

/// The two release binaries the benchmark drives.
struct Binaries {
    /// `ctx`, timed as a whole process.
    ctx: PathBuf,
    /// The `history_bench` example: generates the archives and meters them.
    helper: PathBuf,
}

/// Runs the benchmark.
pub fn run(args: &[String]) -> Result<(), String> {
    let runs = runs_option(args)?;
    let root = crate::root();
    let bins = build(&root)?;
    let out = crate::target_dir(&root).join("bench-history");

    println!("## ctx history: whole process, cl100k_base, --date {DATE} ({runs} runs each)\n");
    println!(
        "| archive | files | input | budget | cap | median ms | fastest ms | tokenized ÷ extracted bytes | in-process ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for a in &ARCHIVES {
        archive_rows(&bins, a, &out.join(a.name), runs)?;
    }
    Ok(())
}

/// `--runs N` (15 by default), the one argument.
fn runs_option(args: &[String]) -> Result<usize, String> {
    let mut runs = 15usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = crate::runs_value(it.next())?,
            other => {
                return Err(format!(
                    "bench-history: unknown argument `{other}` (known: --runs N)"
                ));
            }
        }
    }
    Ok(runs)
}

/// Builds the release `ctx` and `history_bench`; their paths.
fn build(root: &Path) -> Result<Binaries, String> {
    crate::run_cargo(root, crate::BUILD_RELEASE_CTX)?;
    crate::run_cargo(
        root,
        &[
            "build",
            "--quiet",
            "--release",
            "-p",
            "ctx-history",
            "--example",
            "history_bench",
        ],
    )?;
    let target = crate::target_dir(root);
    let exe = std::env::consts::EXE_SUFFIX;
    Ok(Binaries {
        ctx: target.join("release").join(format!("ctx{exe}")),
        helper: target
            .join("release/examples")
            .join(format!("history_bench{exe}")),
    })
}

/// One archive's rows, a budget each: generates it in `dir`, meters it,
/// then times `ctx history` on it.
fn archive_rows(bins: &Binaries, a: &Archive, dir: &Path, runs: usize) -> Result<(), String> {
    let helper = &bins.helper;
    let status = Command::new(helper)
        .arg("generate")
        .arg(dir)
        .args([
            a.weeks.to_string(),
            a.rolling_words.to_string(),
            a.weekly_words.to_string(),
        ])
        .status()
        .map_err(|e| format!("{}: {e}", helper.display()))?;
    if !status.success() {
        return Err("generating the archive failed".into());
    }
    let bytes = dir_bytes(dir);
    let files = a.weeks + a.weeks.div_ceil(4) + a.weeks.div_ceil(52) + 1;
    let meter_text = meter(helper, dir)?;
    for (i, budget) in BUDGETS.iter().enumerate() {
        let (median, min) = time_process(&bins.ctx, dir, *budget, runs)?;
        let line = meter_text.lines().nth(i).unwrap_or("");
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")).map(str::to_string))
                .unwrap_or_else(|| "?".into())
        };
        println!(
            "| {} | ~{} | {:.0} kB | {} | {} | {:.1} | {:.1} | {} | {} |",
            a.name,
            files,
            bytes as f64 / 1000.0,
            budget,
            field("cap"),
            median,
            min,
            field("ratio"),
            field("assemble_ms"),
        );
    }
    Ok(())
}

/// `history_bench meter` on the archive in `dir`: a line per budget of
/// `key=value` figures (cap, ratio, assemble_ms).
fn meter(helper: &Path, dir: &Path) -> Result<String, String> {
    let meter = Command::new(helper)
        .arg("meter")
        .arg(dir)
        .args([DATE, "cl100k_base"])
        .args(BUDGETS.iter().map(|b| b.to_string()))
        .output()
        .map_err(|e| format!("{}: {e}", helper.display()))?;
    if !meter.status.success() {
        return Err(format!(
            "meter failed: {}",
            String::from_utf8_lossy(&meter.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&meter.stdout).to_string())
}
