//! `cargo xtask bench-tracing [--runs N] [--tasks N]`: what tracing costs
//! a run (issue 25).
//!
//! 1. Builds `ctx` in release mode and generates a plan of N tasks (1,000
//!    by default; bench-run's generator: each task depends on at most 4
//!    earlier ones).
//! 2. Starts a local OTLP collector: a thread of this process that reads
//!    each HTTP request whole and answers `200` with an empty body, the
//!    cheapest collector there can be, so what is measured is ctx's side.
//! 3. Runs `ctx run PLAN --no-store` (the dry-run engine: every task's
//!    prompt is assembled and "answered", so every task gets its task and
//!    `chat` spans) with tracing off (no `OTEL_*`, no `--otlp`) and on
//!    (`--otlp` to the collector), alternately, N runs each: a busy
//!    machine slows both alike.
//! 4. Reports the median CPU time (user + system of the child) and wall
//!    time of each, their ratio, and what the collector received (requests,
//!    bytes, and any `warning: tracing:` line, which would say spans were
//!    dropped).
//!
//! The figures are recorded in docs/performance.md ("Tracing").

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const DEFAULT_TASKS: usize = 1_000;

/// What the collector received.
#[derive(Default)]
struct Received {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// Starts the collector on a free port; its base URL.
fn collector(received: Arc<Received>) -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("collector: {e}"))?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let received = Arc::clone(&received);
            std::thread::spawn(move || serve(stream, &received));
        }
    });
    Ok(url)
}

/// Answers every request on one connection `200`, empty.
fn serve(stream: TcpStream, received: &Received) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':')
                && k.trim().eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        received.requests.fetch_add(1, Ordering::Relaxed);
        received.bytes.fetch_add(len as u64, Ordering::Relaxed);
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// One run: (CPU seconds, wall seconds, its `warning: tracing:` lines).
fn time_run(
    ctx: &Path,
    plan: &Path,
    otlp: Option<&str>,
) -> Result<(f64, f64, Vec<String>), String> {
    let cpu0 = crate::bench_run::children_cpu_seconds()
        .ok_or("bench-tracing needs /proc/self/stat (Linux)")?;
    let start = Instant::now();
    let mut cmd = Command::new(ctx);
    cmd.arg("run").arg(plan).arg("--no-store");
    if let Some(url) = otlp {
        cmd.args(["--otlp", url]);
    }
    for var in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{}: {e}", ctx.display()))?;
    let wall = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "ctx run {} failed: {}\n{stderr}",
            plan.display(),
            out.status
        ));
    }
    let cpu = crate::bench_run::children_cpu_seconds().ok_or("/proc/self/stat")? - cpu0;
    let warnings = stderr
        .lines()
        .filter(|l| l.starts_with("warning: tracing:"))
        .map(str::to_string)
        .collect();
    Ok((cpu, wall, warnings))
}

/// Runs the benchmark.
pub fn run(args: &[String]) -> Result<(), String> {
    let (mut runs, mut tasks) = (5usize, DEFAULT_TASKS);
    for pair in args.chunks(2) {
        match pair {
            [flag, value] if flag == "--runs" => runs = crate::runs_value(Some(value))?,
            [flag, value] if flag == "--tasks" => tasks = crate::runs_value(Some(value))?,
            _ => {
                return Err(format!(
                    "usage: cargo xtask bench-tracing [--runs N] [--tasks N] (got {})",
                    args.join(" ")
                ));
            }
        }
    }
    let root = crate::root();
    let ctx = crate::build_release_ctx(&root)?;
    let target = crate::target_dir(&root);
    let dir = target.join("bench-tracing");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let plan = dir.join(format!("plan-{tasks}.json"));
    std::fs::write(&plan, crate::bench_run::generate(tasks))
        .map_err(|e| format!("{}: {e}", plan.display()))?;
    let received = Arc::new(Received::default());
    let url = collector(Arc::clone(&received))?;

    // [off, on] per round, alternating which goes first.
    let mut cpu = [Vec::new(), Vec::new()];
    let mut wall = [Vec::new(), Vec::new()];
    let mut warnings = Vec::new();
    for round in 0..runs {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let (c, w, warned) = time_run(&ctx, &plan, (k == 1).then_some(url.as_str()))?;
            cpu[k].push(c);
            wall[k].push(w);
            warnings.extend(warned);
        }
    }
    let requests = received.requests.load(Ordering::Relaxed);
    let bytes = received.bytes.load(Ordering::Relaxed);
    println!(
        "## ctx run --no-store (dry run) of {tasks} tasks, tracing off and on against a local collector ({runs} runs each, alternated)\n"
    );
    println!("| tracing | median CPU s | median wall s | every CPU s |");
    println!("|---|---|---|---|");
    let mut medians = [0.0; 2];
    for (k, name) in ["off", "on"].iter().enumerate() {
        let all: Vec<String> = cpu[k].iter().map(|c| format!("{c:.2}")).collect();
        let c = crate::bench_run::median(&mut cpu[k]);
        let w = crate::bench_run::median(&mut wall[k]);
        medians[k] = c;
        println!("| {name} | {c:.2} | {w:.2} | {} |", all.join(", "));
    }
    println!(
        "\nCPU on ÷ off: {:.2}; the collector received {requests} requests, {:.1} KiB per traced run",
        medians[1] / medians[0].max(0.01),
        bytes as f64 / 1024.0 / runs as f64
    );
    if warnings.is_empty() {
        println!("no `warning: tracing:` line: every span was delivered");
    } else {
        println!(
            "{} `warning: tracing:` line(s), the first: {}",
            warnings.len(),
            warnings[0]
        );
    }
    Ok(())
}
