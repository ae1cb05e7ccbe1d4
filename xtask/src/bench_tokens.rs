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

/// Runs the benchmark.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut runs = 9usize;
    let mut before: Option<PathBuf> = None;
    let mut peer: Option<String> = None;
    let mut build = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = crate::runs_value(it.next())?,
            "--before" => before = Some(it.next().ok_or("--before needs a path")?.into()),
            "--peer" => peer = Some(it.next().ok_or("--peer needs a command")?.clone()),
            "--no-build" => build = false,
            other => {
                return Err(format!(
                    "bench-tokens: unknown argument `{other}` (known: --runs N, --before PATH, --peer CMD, --no-build)"
                ));
            }
        }
    }
    let root = crate::root();
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
            crate::run_cargo(&root, args)?;
        }
    }
    let target = crate::target_dir(&root);
    let exe = std::env::consts::EXE_SUFFIX;
    let ctx = target.join("release").join(format!("ctx{exe}"));
    let examples = target.join("release/examples");
    let tokens_bench = examples.join(format!("tokens_bench{exe}"));
    let history_bench = examples.join(format!("history_bench{exe}"));
    let out = target.join("bench-tokens");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let report = out.join("time.txt");

    println!("## First exact count in a fresh process (median of {runs})\n");
    println!("| tokenizer | implementation | first count µs | peak RSS kB |");
    println!("|---|---|---|---|");
    for t in &TOKENIZERS[1..] {
        for imp in ["static", "tiktoken-rs"] {
            let mut us = Vec::new();
            let mut kb = Vec::new();
            for _ in 0..runs {
                let o = Command::new(&tokens_bench)
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

    let corpora = root.join("../shared/corpora");
    if corpora.is_dir() {
        println!("\n## Counting throughput, every file of ../shared/corpora\n");
        println!("| tokenizer | implementation | MB | tokens | MB/s |");
        println!("|---|---|---|---|---|");
        for t in &TOKENIZERS[1..] {
            for imp in ["static", "tiktoken-rs"] {
                let o = Command::new(&tokens_bench)
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
    } else {
        println!(
            "\n(no corpora at {}: throughput skipped)",
            corpora.display()
        );
    }

    println!("\n## ctx history, whole process, --date {DATE} (median of {runs}; peak = largest)\n");
    println!("| archive | budget | tokenizer | binary | wall ms | CPU ms | peak RSS MB |");
    println!("|---|---|---|---|---|---|---|");
    for (name, weeks, rolling, weekly) in ARCHIVES {
        let dir = target.join("bench-history").join(name);
        let status = Command::new(&history_bench)
            .arg("generate")
            .arg(&dir)
            .args([weeks.to_string(), rolling.to_string(), weekly.to_string()])
            .status()
            .map_err(|e| format!("{}: {e}", history_bench.display()))?;
        if !status.success() {
            return Err("generating the archive failed".into());
        }
        for budget in BUDGETS {
            let mut binaries: Vec<(String, PathBuf, Vec<String>)> = Vec::new();
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
                if let Some(b) = &before {
                    binaries.push((format!("{t}|before"), b.clone(), args.clone()));
                }
                binaries.push((format!("{t}|after"), ctx.clone(), args));
            }
            if let Some(cmd) = &peer {
                let cmd = cmd
                    .replace("{archive}", &dir.display().to_string())
                    .replace("{budget}", &budget.to_string());
                let mut words = cmd.split_whitespace().map(str::to_string);
                let program = words.next().ok_or("--peer is empty")?;
                binaries.push(("peer|peer".into(), program.into(), words.collect()));
            }
            let mut samples = vec![(Vec::new(), Vec::new(), 0f64); binaries.len()];
            // Interleaved, so a burst of load hits every binary alike.
            for _ in 0..runs {
                for (i, (_, program, args)) in binaries.iter().enumerate() {
                    let (wall, cpu, kb) = timed(program, args, &report)?;
                    samples[i].0.push(wall);
                    samples[i].1.push(cpu);
                    samples[i].2 = samples[i].2.max(kb);
                }
            }
            for ((label, _, _), (wall, cpu, kb)) in binaries.iter().zip(samples.iter_mut()) {
                let (t, which) = label.split_once('|').unwrap_or((label, ""));
                println!(
                    "| {name} | {budget} | {t} | {which} | {:.1} | {:.1} | {:.1} |",
                    median(wall),
                    median(cpu),
                    *kb / 1024.0
                );
            }
        }
    }
    Ok(())
}
