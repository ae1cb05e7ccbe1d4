//! A map of 10,000 items on the simulated clock, on the memory store and
//! on this SQLite store (`cargo xtask bench-map`, or `cargo bench -p
//! ctx-store-sqlite --bench map -- [--items N] [--concurrency C]`).
//! Figures: docs/performance.md ("Map over a list").
//!
//! The plan is `src → scan → report`: `src` answers a JSON list of N
//! items, `scan` maps over it (`max_items: N`), `report` reduces every
//! item's output. An in-process engine sleeps each task's latency on
//! tokio's *paused* clock (items 200–5,000 ms, seeded, so every run sees
//! the same list), so the makespan measures the schedule, not this
//! machine; the store's own calls run on the blocking pool, during which
//! the paused clock does not advance, so a slower store costs wall time,
//! never simulated time.
//!
//! Reported per store: makespan ÷ lower bound, where the bound is
//! `src + max(longest item, total item work ÷ concurrency) + report`
//! (no schedule beats it: the items cannot start before the list, nor
//! the reduce before the last item); the wall time; peak resident memory
//! (Linux `VmHWM`, reset before each run). The goal is a ratio of at most
//! 1.05.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctx_deps::{
    BoxFuture, EngineError, ExecutionStore, Executor, ExecutorOptions, InferenceEngine,
    InferenceRequest, InferenceResponse, MemoryStore,
};
use ctx_model::{MapSpec, Plan, TaskStatus};
use ctx_store_sqlite::{NewRun, SessionEnd, SqliteStore};
use ctx_test_support::bench::{BenchArgs, fmt_mib, peak_rss_mib, reset_peak};

const SRC_MS: u64 = 500;
const REPORT_MS: u64 = 3_000;

/// Item `i`'s simulated latency: 200–5,000 ms from a fixed generator.
fn item_ms(i: usize) -> u64 {
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    200 + x % 4_801
}

/// Answers `src` with the list, each item with a line naming it, and the
/// reduce with a line, each after its latency on the paused clock.
struct SimEngine {
    list: String,
}

impl InferenceEngine for SimEngine {
    fn name(&self) -> &str {
        "sim"
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let id = request.task_id.as_str();
            let (ms, output) = match ctx_model::map::parse_item_id(id) {
                Some((_, i)) => (item_ms(i), format!("item {i}: rated 4 of 5")),
                None if id == "src" => (SRC_MS, self.list.clone()),
                None => (REPORT_MS, "the report".to_string()),
            };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(InferenceResponse {
                output,
                ..InferenceResponse::default()
            })
        })
    }
}

fn plan(items: usize) -> Plan {
    let mut plan: Plan = serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "sub_tasks": [
            {"id": "src", "description": "The list",
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "List them."}}},
            {"id": "scan", "description": "One repository", "dependencies": ["src"],
             "tool_or_prompt": {"name": "inference", "params": {
                 "prompt": "Rate <untrusted-content>{{REPO}}</untrusted-content>."}}},
            {"id": "report", "description": "The report", "dependencies": ["scan"],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Sum up."}}}
        ]
    }))
    .expect("the plan");
    // The reduce receives every item under its own heading (about 16
    // tokens each even with every output cut): 10,000 items need a cap
    // of some 160,000 tokens, which a long-context model has.
    plan.config.max_prompt_tokens = 400_000;
    plan.sub_tasks[1].map = Some(MapSpec {
        over: "src".into(),
        pointer: Some("/items".into()),
        item: "REPO".into(),
        max_items: Some(items),
        allow_failures: 0,
        variable_value: None,
    });
    plan
}

/// Runs the plan on `store` and prints its row.
fn run(label: &str, items: usize, concurrency: usize, store: Arc<dyn ExecutionStore>) {
    let list: Vec<String> = (0..items).map(|i| format!("org/repo-{i}")).collect();
    let engine = SimEngine {
        list: serde_json::json!({ "items": list }).to_string(),
    };
    reset_peak();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let exec = Executor::new(
        plan(items),
        Arc::new(engine),
        store,
        ExecutorOptions {
            concurrency,
            ..ExecutorOptions::default()
        },
    )
    .expect("valid plan");
    let wall = Instant::now();
    let report = rt.block_on(exec.run()).expect("run");
    let wall = wall.elapsed();
    let done = report.count(TaskStatus::Completed);
    assert_eq!(
        done,
        items + 3,
        "every task completes: {:?}",
        report
            .results
            .iter()
            .find(|r| r.status != TaskStatus::Completed)
    );
    let work: u64 = (0..items).map(item_ms).sum();
    let longest = (0..items).map(item_ms).max().unwrap_or(0);
    let bound = SRC_MS + longest.max(work.div_ceil(concurrency as u64)) + REPORT_MS;
    let makespan = report.makespan.as_millis() as f64;
    println!(
        "| {label} | {items} | {concurrency} | {:.1} s | {:.1} s | {:.4} | {:.2} s | {} |",
        makespan / 1e3,
        bound as f64 / 1e3,
        makespan / bound as f64,
        wall.as_secs_f64(),
        fmt_mib(peak_rss_mib())
    );
}

fn main() {
    let Some(args) = BenchArgs::from_env() else {
        return;
    };
    let smoke = args.smoke();
    let value = |flag: &str| args.value(flag).map(|v| v as usize);
    let items = value("--items").unwrap_or(if smoke { 50 } else { 10_000 });
    let concurrency = value("--concurrency").unwrap_or(16).max(1);
    println!("## map over a list: {items} items on the simulated clock");
    println!();
    println!(
        "| store | items | in flight | makespan (sim) | lower bound | ratio | wall | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    run("memory", items, concurrency, Arc::new(MemoryStore::new()));
    let tmp = tempfile::tempdir().expect("a scratch directory");
    let p = plan(items);
    let store = SqliteStore::create_in(
        &tmp.path().join("run"),
        &NewRun {
            plan: &p,
            engine: "sim",
            plan_source: None,
            inputs: None,
        },
    )
    .expect("a run directory");
    let store = Arc::new(store);
    run("sqlite", items, concurrency, store.clone());
    store
        .finish(SessionEnd::Finished)
        .expect("the session's end");
}
