//! A map of many items on the shared PostgreSQL store (issue 23): the
//! makespan against its bound, and this process's peak memory.
//!
//! ```text
//! eval "$(scripts/postgres.sh start)"
//! cargo run --release -p ctx-worker --example shared_map_bench -- [ITEMS] [WORKERS] [SLOTS] [MS]
//! ```
//!
//! A plan of one map over a `json` variable of `ITEMS` items (10,000 by
//! default) and its reduce is registered on a fresh database of the test
//! server (`CTX_TEST_POSTGRES_URL`). `WORKERS` workers (4), each with
//! `SLOTS` tasks in flight (8), run in this process against the store as
//! separate `ctx worker`s would (each its own connection pool), on an
//! engine that answers every call after `MS` milliseconds (20) of a real
//! sleep: the store's claims, expansion, commits and the join are the real
//! ones, only the model is not. The bound is the work at full use of
//! every slot: `ceil(ITEMS / (WORKERS × SLOTS)) × MS`, plus one call for
//! the reduce. Peak memory is the process's maximum resident set
//! (`VmHWM`), workers and store runtimes included.
//!
//! Figures are for a quiet machine: store round trips dominate when `MS`
//! is small, so the ratio says what the store costs per item.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctx_deps::{
    BoxFuture, EngineError, ExecutorOptions, InferenceEngine, InferenceRequest, InferenceResponse,
};
use ctx_run::run_costs::RunPricing;
use ctx_worker::{SharedSession, SharedSettings, Worker};

/// Answers every call after a fixed sleep.
struct Sleeper(Duration);

impl InferenceEngine for Sleeper {
    fn name(&self) -> &str {
        "sleeper"
    }

    fn infer<'a>(
        &'a self,
        _request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            Ok(InferenceResponse {
                output: "ok".into(),
                ..InferenceResponse::default()
            })
        })
    }
}

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// The plan: `scan` over the variable `LIST` (filled with `items`
/// numbers), and `report` reducing it.
fn plan(items: usize) -> ctx_model::Plan {
    let mut plan = ctx_test_support::plan(&[("scan", &[]), ("report", &["scan"])]);
    plan.config.max_prompt_tokens = 1_000_000;
    let scan = &mut plan.sub_tasks[0];
    scan.tool_or_prompt.params.prompt =
        "Rate <untrusted-content>{{ITEM}}</untrusted-content>.".into();
    let list: Vec<usize> = (0..items).collect();
    scan.map = Some(ctx_model::MapSpec {
        over: "LIST".into(),
        pointer: None,
        item: "ITEM".into(),
        max_items: Some(items.max(1)),
        allow_failures: 0,
        variable_value: Some(serde_json::to_string(&list).expect("a list")),
    });
    plan.variables = serde_json::from_value(serde_json::json!([
        {"name": "LIST", "type": "json", "class": "untrusted",
         "default": serde_json::to_string(&list).expect("a list")}
    ]))
    .expect("a variable");
    plan
}

/// This process's peak resident set (`VmHWM` in /proc/self/status), in
/// MiB; 0 where there is no /proc.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let items = arg(1, 10_000) as usize;
    let workers = arg(2, 4) as usize;
    let slots = arg(3, 8) as usize;
    let ms = arg(4, 20);
    let Some(url) = pg::fresh_db("shared_map_bench") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let engine: Arc<dyn InferenceEngine> = Arc::new(Sleeper(Duration::from_millis(ms)));
    let t0 = Instant::now();
    let session = rt
        .block_on(SharedSession::start(
            plan(items),
            Arc::clone(&engine),
            SharedSettings {
                url: url.clone(),
                resume: None,
                work_here: false,
                executor: ExecutorOptions::default(),
                pricing: RunPricing::default(),
                plan_source: None,
                cache: None,
                out: None,
                inputs: None,
                publish: None,
            },
        ))
        .expect("the run registered");
    let run = session.run_id().to_string();
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let store = ctx_worker::runs::open(&url)
                .expect("the store")
                .with_engine(&engine.label());
            let worker = Worker {
                store,
                engine: Arc::clone(&engine),
                options: ExecutorOptions::default(),
                pricing: RunPricing::default(),
                run: Some(run.clone()),
                worker: format!("bench-{w}"),
                concurrency: slots,
                lease: Duration::from_secs(60),
                until_idle: true,
                first_run_wait: Duration::ZERO,
                poll: Duration::from_millis(100),
            };
            rt.spawn(async move {
                worker
                    .run(std::future::pending::<()>(), |_| {})
                    .await
                    .expect("the worker")
                    .committed
            })
        })
        .collect();
    let committed: Vec<usize> = handles
        .into_iter()
        .map(|h| rt.block_on(h).expect("a worker task"))
        .collect();
    let outcome = rt
        .block_on(session.execute_with(std::future::pending::<()>(), |_| {}))
        .expect("the report");
    let makespan = t0.elapsed();
    let completed = outcome
        .report
        .results
        .iter()
        .filter(|r| r.status == ctx_model::TaskStatus::Completed)
        .count();
    let rounds = items.div_ceil(workers * slots) as u64;
    let bound = Duration::from_millis((rounds + 1) * ms);
    println!(
        "{items} items, {workers} workers × {slots} slots, {ms} ms a call: \
         {completed} of {} tasks completed, commits per worker {committed:?}",
        items + 2
    );
    println!(
        "makespan {:.2} s, bound {:.2} s, makespan ÷ bound {:.2}, peak memory {:.0} MiB",
        makespan.as_secs_f64(),
        bound.as_secs_f64(),
        makespan.as_secs_f64() / bound.as_secs_f64(),
        peak_rss_mib()
    );
}
