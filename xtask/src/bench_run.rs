//! `cargo xtask bench-run [--runs N]`: how `ctx run` scales with the
//! plan's size (issue 20, §5).
//!
//! 1. Builds `ctx` in release mode.
//! 2. Generates two plans under `target/bench-run/`: 50,000 and 100,000
//!    tasks, each depending on at most 4 earlier tasks (chosen by a fixed
//!    linear congruential generator, so every run sees the same plans).
//! 3. Runs `ctx run PLAN --no-store` (the dry-run engine: no model, no
//!    store; the whole path of a run: parse, validate, graph, schedule,
//!    assemble every prompt with its dependencies, the summary) N times
//!    per size, the sizes interleaved so a busy machine slows both alike.
//! 4. Reports the median CPU time (user + system of the child, from
//!    `/proc/self/stat`) and wall time per size, and their ratio. The
//!    promise is a ratio of at most 2.5 (linear plus hashing and the
//!    allocator's share); a larger one fails the benchmark.
//!
//! Each `plan.task(id)` scan per dependency made this quadratic: 43 s at
//! 50,000 tasks and 4.5× per doubling before the task index.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const SIZES: [usize; 2] = [50_000, 100_000];
const MAX_DEPS: u64 = 4;
const MAX_CPU_RATIO: f64 = 2.5;

/// A plan of `n` tasks, each with 0..=4 dependencies on earlier tasks.
pub(crate) fn generate(n: usize) -> String {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    let mut out = String::with_capacity(n * 160);
    out.push_str("{\"schema_version\": 1, \"sub_tasks\": [\n");
    for i in 0..n {
        let mut deps: Vec<usize> = Vec::new();
        if i > 0 {
            for _ in 0..next() % (MAX_DEPS + 1) {
                let d = (next() % i as u64) as usize;
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
            deps.sort_unstable();
        }
        let deps: Vec<String> = deps.iter().map(|d| format!("\"t{d}\"")).collect();
        if i > 0 {
            out.push_str(",\n");
        }
        out.push_str(&format!(
            "{{\"id\": \"t{i}\", \"description\": \"step {i}\", \"dependencies\": [{}], \
             \"tool_or_prompt\": {{\"name\": \"inference\", \"params\": {{\"prompt\": \"do step {i}\", \"max_tokens\": 16}}}}}}",
            deps.join(", ")
        ));
    }
    out.push_str("\n]}\n");
    out
}

/// The CPU seconds (user + system) of this process's waited-for children,
/// from `/proc/self/stat` (`cutime`, `cstime`, in clock ticks of 1/100 s).
pub(crate) fn children_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, cutime 16 and cstime 17.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |k: usize| fields.get(k - 3)?.parse::<u64>().ok();
    Some((ticks(16)? + ticks(17)?) as f64 / 100.0)
}

/// Runs `ctx run plan --no-store` once: (CPU seconds, wall seconds).
fn time_run(ctx: &Path, plan: &Path) -> Result<(f64, f64), String> {
    let cpu0 = children_cpu_seconds().ok_or("bench-run needs /proc/self/stat (Linux)")?;
    let start = Instant::now();
    let status = Command::new(ctx)
        .arg("run")
        .arg(plan)
        .arg("--no-store")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("{}: {e}", ctx.display()))?;
    let wall = start.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("ctx run {} failed: {status}", plan.display()));
    }
    let cpu = children_cpu_seconds().ok_or("/proc/self/stat")? - cpu0;
    Ok((cpu, wall))
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs the benchmark.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut runs = 3usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = crate::runs_value(it.next())?,
            other => {
                return Err(format!(
                    "bench-run: unknown argument `{other}` (known: --runs N)"
                ));
            }
        }
    }
    let root = crate::root();
    crate::run_cargo(&root, crate::BUILD_RELEASE_CTX)?;
    let target = crate::target_dir(&root);
    let ctx = target
        .join("release")
        .join(format!("ctx{}", std::env::consts::EXE_SUFFIX));
    let dir = target.join("bench-run");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let plans: Vec<PathBuf> = SIZES
        .iter()
        .map(|&n| {
            let path = dir.join(format!("plan-{n}.json"));
            std::fs::write(&path, generate(n))
                .map(|()| path.clone())
                .map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect::<Result<_, _>>()?;

    let mut cpu = vec![Vec::new(); SIZES.len()];
    let mut wall = vec![Vec::new(); SIZES.len()];
    for _ in 0..runs {
        for (k, plan) in plans.iter().enumerate() {
            let (c, w) = time_run(&ctx, plan)?;
            cpu[k].push(c);
            wall[k].push(w);
        }
    }
    println!(
        "## ctx run --no-store (dry run), at most {MAX_DEPS} dependencies per task ({runs} runs each, sizes interleaved)\n"
    );
    println!("| tasks | median CPU s | median wall s | every CPU s |");
    println!("|---|---|---|---|");
    let mut medians = Vec::new();
    for (k, n) in SIZES.iter().enumerate() {
        let all: Vec<String> = cpu[k].iter().map(|c| format!("{c:.2}")).collect();
        let c = median(&mut cpu[k]);
        let w = median(&mut wall[k]);
        medians.push(c);
        println!("| {n} | {c:.2} | {w:.2} | {} |", all.join(", "));
    }
    let ratio = medians[1] / medians[0].max(0.01);
    println!(
        "\nCPU ratio {}÷{} tasks: {ratio:.2} (promise: at most {MAX_CPU_RATIO})",
        SIZES[1], SIZES[0]
    );
    if ratio > MAX_CPU_RATIO {
        return Err(format!(
            "ctx run grew {ratio:.2}× from {} to {} tasks (more than {MAX_CPU_RATIO}×)",
            SIZES[0], SIZES[1]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_plans_are_deterministic_and_bounded() {
        let text = generate(300);
        assert_eq!(text, generate(300));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let tasks = v["sub_tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 300);
        for (i, t) in tasks.iter().enumerate() {
            let deps = t["dependencies"].as_array().unwrap();
            assert!(deps.len() <= MAX_DEPS as usize);
            for d in deps {
                let d: usize = d.as_str().unwrap()[1..].parse().unwrap();
                assert!(d < i);
            }
        }
    }
}
