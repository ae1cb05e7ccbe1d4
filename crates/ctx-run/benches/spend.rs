//! `ctx spend` over many stored runs: how long summing them takes and how
//! much memory it holds, by each grouping (docs/performance.md, "Spend over
//! 1,000 runs").
//!
//! Writes `--runs N` run directories (default 1,000; each a plan of 10
//! tasks on three models, one unpriced, one task failed once and retried:
//! 11 attempts a run) under the target directory, then reads them the way
//! `ctx spend` does (`RunRoot::open_each`, one run at a time, into a
//! `SpendTally`), `--repeat R` times (default 5) per grouping, and prints
//! the fastest time and the peak resident set. `--keep` leaves the root in
//! place and prints its path, for timing the `ctx spend` binary on it.
//!
//! `cargo bench -p ctx-run --bench spend [-- --runs N --repeat R --keep]`

use std::path::Path;
use std::time::{Duration, Instant};

use ctx_cost::Usd;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_run::spend::{GroupBy, Period, SpendTally};
use ctx_store::ExecutionStore;
use ctx_store_sqlite::{NewRun, RunRoot, SqliteStore};
use ctx_test_support::bench::{BenchArgs, fmt_mib, peak_rss_mib, reset_peak};

const TASKS: usize = 10;

fn main() {
    let Some(args) = BenchArgs::from_env() else {
        return;
    };
    let smoke = args.smoke();
    let runs = args.value("--runs").unwrap_or(if smoke { 5 } else { 1000 }) as usize;
    let repeat = args.value("--repeat").unwrap_or(if smoke { 1 } else { 5 });
    let keep = std::env::args().any(|a| a == "--keep");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("spend-bench");
    let _ = std::fs::remove_dir_all(&dir);
    let root = RunRoot::new(dir.join("runs"));
    let t0 = Instant::now();
    for i in 0..runs {
        write_run(&root, i);
    }
    eprintln!("{runs} runs written in {:.1?}", t0.elapsed());
    println!("grouping  runs  attempts  fastest of {repeat}  peak RSS");
    for by in [GroupBy::Plan, GroupBy::Model, GroupBy::Day, GroupBy::Run] {
        reset_peak();
        let mut fastest = Duration::MAX;
        let mut attempts = 0;
        for _ in 0..repeat {
            let t = Instant::now();
            let mut tally = SpendTally::new(by, Period::ALL);
            for view in root.open_each().unwrap() {
                tally.add(&view.unwrap()).unwrap();
            }
            let spend = tally.finish();
            fastest = fastest.min(t.elapsed());
            attempts = spend.total.attempts;
            assert_eq!(spend.total.runs, runs);
        }
        assert_eq!(attempts, runs * (TASKS + 1));
        println!(
            "{:<8}  {runs:>4}  {attempts:>8}  {:>14.1?}  {:>8}",
            by.as_str(),
            fastest,
            fmt_mib(peak_rss_mib())
        );
    }
    if keep {
        println!("kept: {}", root.path().display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A plan of [`TASKS`] tasks: models `m-a` and `m-b` priced, the last
/// task on `unpriced`.
fn plan() -> Plan {
    let tasks: Vec<serde_json::Value> = (0..TASKS)
        .map(|i| {
            serde_json::json!({"id": format!("t{i}"), "description": format!("task {i}"),
                "tool_or_prompt": {"name": "inference",
                    "params": {"prompt": format!("prompt {i} ").repeat(20), "model": model(i)}}})
        })
        .collect();
    serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": tasks})).unwrap()
}

fn model(task: usize) -> &'static str {
    match task {
        i if i + 1 == TASKS => "unpriced",
        i if i % 2 == 0 => "m-a",
        _ => "m-b",
    }
}

/// Run `i`: every task completed (a 3 KB output, a 6 KB prompt), task 0
/// failed once first; priced tasks cost a few micro-dollars.
fn write_run(root: &RunRoot, i: usize) {
    let plan = plan();
    let source = format!("plans/plan-{}.yaml", i % 7);
    let store = SqliteStore::create_in(
        &root.path().join(format!("run-{i:05}")),
        &NewRun {
            plan: &plan,
            engine: "command",
            plan_source: Some(&source),
            inputs: None,
        },
    )
    .unwrap();
    store.store(result(0, TaskStatus::Failed, i)).unwrap();
    for t in 0..TASKS {
        store.store(result(t, TaskStatus::Completed, i)).unwrap();
    }
}

fn result(task: usize, status: TaskStatus, run: usize) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(format!("t{task}"), status);
    r.output = "x".repeat(3000);
    r.prompt = Some("p".repeat(6000));
    let m = &mut r.metadata;
    m.model = Some(model(task).to_string());
    m.execution_time_ms = Some(1200);
    m.cost_usd = (model(task) != "unpriced")
        .then(|| Usd::from_picos(1_000_000 * (1 + (run + task) as u128 % 50)));
    r
}
