//! `cargo xtask bench-tokens [--before PATH] [--runs N] [--peer CMD] [--no-build]`: the
//! token-counting benchmark whose figures are in docs/performance.md
//! ("Token counting").
//!
//! 1. Builds `ctx` and the `tokens_bench` (ctx-tokens) and `history_bench`
//!    (ctx-history) examples in release mode (`--no-build`: measure the
//!    ones already in target/release).
//! 2. First count in a fresh process and its peak memory, per tokenizer,
//!    for the static tables and for tiktoken-rs (median of N processes).
//! 3. Counting throughput on every file of ../shared/corpora (MB/s), both
//!    implementations.
//! 4. `ctx history` as a whole process on the generated 13-week and
//!    ten-year archives (the bench-history ones), budgets 90,000 / 4,000 /
//!    1,000, each tokenizer: median wall time, median CPU time (user +
//!    system, to the millisecond, from bash's `time`) and the largest peak
//!    RSS, through `/usr/bin/time`. With
//!    `--before PATH` a second `ctx` binary (the one before a change) runs
//!    side by side, interleaved run by run, so both see the same load. With
//!    `--peer CMD` a peer command (`{archive}` and `{budget}` substituted),
//!    such as the Python assembler called through its interpreter binary,
//!    is timed the same way.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BUDGETS: [usize; 3] = [90_000, 4_000, 1_000];
const DATE: &str = "2026-08-20";
const TOKENIZERS: [&str; 6] = [
    "estimate",
    "cl100k_base",
    "o200k_base",
    "o200k_harmony",
    "p50k_base",
    "r50k_base",
];
/// The bench-history archives used here: (name, weeks, rolling words,
/// weekly words), as in xtask/src/bench_history.rs.
const ARCHIVES: [(&str, usize, usize, usize); 2] = [
    ("13-weeks", 13, 3_000, 5_600),
    ("10-years", 520, 50_000, 5_600),
];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// One process, timed: (wall ms, cpu ms, peak kB).
///
/// Wall and CPU time (user + system) come from bash's `time` keyword,
/// which reads the child's `rusage` to the microsecond and prints it to
/// the millisecond: `/usr/bin/time` prints CPU seconds with two decimals,
/// and a 10 ms resolution cannot tell a 3 ms `ctx history` from a 9 ms
/// one. Peak RSS comes from `/usr/bin/time` wrapped around that shell
/// (the largest of bash's and the program's, and bash's is ~4 MB).
fn timed(program: &Path, args: &[String], report: &Path) -> Result<(f64, f64, f64), String> {
    let times = report.with_extension("times");
    let status = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(report)
        .arg("bash")
        .arg("-c")
        .arg(r#"TIMEFORMAT='%3R %3U %3S'; { time "$@" >/dev/null 2>&1; } 2>"$0""#)
        .arg(&times)
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("/usr/bin/time bash {}: {e}", program.display()))?;
    if !status.success() {
        return Err(format!("{} {} failed", program.display(), args.join(" ")));
    }
    let read = |path: &Path| -> Result<Vec<f64>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(text
            .lines()
            .last()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect())
    };
    match (read(&times)?.as_slice(), read(report)?.as_slice()) {
        ([wall, user, sys], [kb]) => Ok((wall * 1000.0, (user + sys) * 1000.0, *kb)),
        (t, r) => Err(format!("unreadable timings: {t:?} {r:?}")),
    }
}

fn key(line: &str, name: &str) -> String {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")).map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The command line: `--runs N`, `--before PATH`, `--peer CMD`,
/// `--no-build`.
struct Options {
    runs: usize,
    /// The `ctx` before a change, timed side by side with this one.
    before: Option<PathBuf>,
    /// A peer command, `{archive}` and `{budget}` substituted.
    peer: Option<String>,
    build: bool,
}

/// The release binaries the benchmark drives.
struct Binaries {
    ctx: PathBuf,
    tokens_bench: PathBuf,
    history_bench: PathBuf,
}

/// One program timed on an archive and budget: its row's label
/// (`tokenizer|binary`), the program and its arguments.
struct Contender {
    label: String,
    program: PathBuf,
    args: Vec<String>,
}

/// Runs the benchmark.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    let root = crate::root();
    let bins = build(&root, options.build)?;
    let target = crate::target_dir(&root);
    let out = target.join("bench-tokens");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let report = out.join("time.txt");
    first_count_table(&bins.tokens_bench, options.runs)?;
    throughput_table(&root, &bins.tokens_bench)?;
    history_table(&options, &bins, &target, &report)
}

/// The command line into [`Options`].
fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        runs: 9,
        before: None,
        peer: None,
        build: true,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => options.runs = crate::runs_value(it.next())?,
            "--before" => {
                options.before = Some(it.next().ok_or("--before needs a path")?.into());
            }
            "--peer" => {
                options.peer = Some(it.next().ok_or("--peer needs a command")?.clone());
            }
            "--no-build" => options.build = false,
            other => {
                return Err(format!(
                    "bench-tokens: unknown argument `{other}` (known: --runs N, --before PATH, --peer CMD, --no-build)"
                ));
            }
        }
    }
    Ok(options)
}

/// Builds the release `ctx`, `tokens_bench` and `history_bench` unless
/// `build` is false (`--no-build`); their paths either way.
fn build(root: &Path, build: bool) -> Result<Binaries, String> {
    for args in [
        crate::BUILD_RELEASE_CTX,
        &[
            "build",
            "--quiet",
            "--release",
            "-p",
            "ctx-tokens",
            "--example",
            "tokens_bench",
        ],
        &[
            "build",
            "--quiet",
            "--release",
            "-p",
            "ctx-history",
            "--example",
            "history_bench",
        ],
    ] {
        if build {
            crate::run_cargo(root, args)?;
        }
    }
    let target = crate::target_dir(root);
    let exe = std::env::consts::EXE_SUFFIX;
    let examples = target.join("release/examples");
    Ok(Binaries {
        ctx: target.join("release").join(format!("ctx{exe}")),
        tokens_bench: examples.join(format!("tokens_bench{exe}")),
        history_bench: examples.join(format!("history_bench{exe}")),
    })
}

/// The first figure: the first exact count in a fresh process and its
/// peak memory, per tokenizer and implementation.
fn first_count_table(tokens_bench: &Path, runs: usize) -> Result<(), String> {
    println!("## First exact count in a fresh process (median of {runs})\n");
    println!("| tokenizer | implementation | first count µs | peak RSS kB |");
    println!("|---|---|---|---|");
    for t in &TOKENIZERS[1..] {
        for imp in ["static", "tiktoken-rs"] {
            let mut us = Vec::new();
            let mut kb = Vec::new();
            for _ in 0..runs {
                let o = Command::new(tokens_bench)
                    .args(["first", t, imp])
                    .output()
                    .map_err(|e| format!("{}: {e}", tokens_bench.display()))?;
                let line = String::from_utf8_lossy(&o.stdout).to_string();
                us.push(key(&line, "first_us").parse().unwrap_or(f64::NAN));
                kb.push(key(&line, "peak_kb").parse().unwrap_or(f64::NAN));
            }
            println!(
                "| {t} | {imp} | {:.0} | {:.0} |",
                median(&mut us),
                median(&mut kb)
            );
        }
    }
    Ok(())
}

/// The second figure: counting throughput on ../shared/corpora, skipped
/// (with a line saying so) where the checkout has no corpora beside it.
fn throughput_table(root: &Path, tokens_bench: &Path) -> Result<(), String> {
    let corpora = root.join("../shared/corpora");
    if !corpora.is_dir() {
        println!(
            "\n(no corpora at {}: throughput skipped)",
            corpora.display()
        );
        return Ok(());
    }
    println!("\n## Counting throughput, every file of ../shared/corpora\n");
    println!("| tokenizer | implementation | MB | tokens | MB/s |");
    println!("|---|---|---|---|---|");
    for t in &TOKENIZERS[1..] {
        for imp in ["static", "tiktoken-rs"] {
            let o = Command::new(tokens_bench)
                .args(["throughput", t, imp])
                .arg(&corpora)
                .output()
                .map_err(|e| format!("{}: {e}", tokens_bench.display()))?;
            let line = String::from_utf8_lossy(&o.stdout).to_string();
            let mb = key(&line, "bytes").parse::<f64>().unwrap_or(0.0) / 1e6;
            println!(
                "| {t} | {imp} | {mb:.1} | {} | {} |",
                key(&line, "tokens"),
                key(&line, "mb_per_s")
            );
        }
    }
    Ok(())
}

/// The third figure: `ctx history` as a whole process on each generated
/// archive, at each budget, every contender timed `runs` times.
fn history_table(
    options: &Options,
    bins: &Binaries,
    target: &Path,
    report: &Path,
) -> Result<(), String> {
    let runs = options.runs;
    println!("\n## ctx history, whole process, --date {DATE} (median of {runs}; peak = largest)\n");
    println!("| archive | budget | tokenizer | binary | wall ms | CPU ms | peak RSS MB |");
    println!("|---|---|---|---|---|---|---|");
    for (name, weeks, rolling, weekly) in ARCHIVES {
        let dir = target.join("bench-history").join(name);
        let history_bench = &bins.history_bench;
        let status = Command::new(history_bench)
            .arg("generate")
            .arg(&dir)
            .args([weeks.to_string(), rolling.to_string(), weekly.to_string()])
            .status()
            .map_err(|e| format!("{}: {e}", history_bench.display()))?;
        if !status.success() {
            return Err("generating the archive failed".into());
        }
        for budget in BUDGETS {
            let contenders = contenders(options, &bins.ctx, &dir, budget)?;
            let mut samples = time_interleaved(&contenders, runs, report)?;
            for (c, sample) in contenders.iter().zip(samples.iter_mut()) {
                let (t, which) = c.label.split_once('|').unwrap_or((&c.label, ""));
                println!(
                    "| {name} | {budget} | {t} | {which} | {:.1} | {:.1} | {:.1} |",
                    median(&mut sample.wall_ms),
                    median(&mut sample.cpu_ms),
                    sample.peak_kb / 1024.0
                );
            }
        }
    }
    Ok(())
}

/// What is timed on the archive in `dir` at `budget`: `ctx history` per
/// tokenizer (the `--before` binary first where given), then the peer.
fn contenders(
    options: &Options,
    ctx: &Path,
    dir: &Path,
    budget: usize,
) -> Result<Vec<Contender>, String> {
    let mut contenders = Vec::new();
    for t in TOKENIZERS {
        let args: Vec<String> = vec![
            "history".into(),
            "--content-root".into(),
            dir.display().to_string(),
            "--date".into(),
            DATE.into(),
            "--prompt-budget".into(),
            budget.to_string(),
            "--tokenizer".into(),
            t.into(),
        ];
        if let Some(b) = &options.before {
            contenders.push(Contender {
                label: format!("{t}|before"),
                program: b.clone(),
                args: args.clone(),
            });
        }
        contenders.push(Contender {
            label: format!("{t}|after"),
            program: ctx.to_path_buf(),
            args,
        });
    }
    if let Some(cmd) = &options.peer {
        let cmd = cmd
            .replace("{archive}", &dir.display().to_string())
            .replace("{budget}", &budget.to_string());
        let mut words = cmd.split_whitespace().map(str::to_string);
        let program = words.next().ok_or("--peer is empty")?;
        contenders.push(Contender {
            label: "peer|peer".into(),
            program: program.into(),
            args: words.collect(),
        });
    }
    Ok(contenders)
}

/// One contender's timings over the runs.
#[derive(Clone, Default)]
struct Samples {
    wall_ms: Vec<f64>,
    cpu_ms: Vec<f64>,
    /// The largest peak RSS, kB.
    peak_kb: f64,
}

/// Every contender `runs` times, interleaved run by run so that a burst of
/// load hits every one alike.
fn time_interleaved(
    contenders: &[Contender],
    runs: usize,
    report: &Path,
) -> Result<Vec<Samples>, String> {
    let mut samples = vec![Samples::default(); contenders.len()];
    for _ in 0..runs {
        for (i, c) in contenders.iter().enumerate() {
            let (wall, cpu, kb) = timed(&c.program, &c.args, report)?;
            samples[i].wall_ms.push(wall);
            samples[i].cpu_ms.push(cpu);
            samples[i].peak_kb = samples[i].peak_kb.max(kb);
        }
    }
    Ok(samples)
}
