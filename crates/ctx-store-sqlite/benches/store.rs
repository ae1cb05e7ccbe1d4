//! What durability costs: `store()` (one committed, fsynced transaction),
//! reads the executor makes, resume planning and cache lookups, on the
//! file system the benchmark runs on. Figures: docs/runs.md.
//!
//! `cargo bench -p ctx-store-sqlite --bench store`

use std::sync::Arc;

use ctx_engine::{InferenceEngine, InferenceRequest};
use ctx_model::{Params, Plan, TaskExecutionResult, TaskStatus};
use ctx_store::ExecutionStore;
use ctx_store_sqlite::{CachingEngine, NewRun, RunRoot, SqliteStore};

fn main() {
    divan::main();
}

fn plan(n: usize, fan_in: usize) -> Plan {
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let deps: Vec<String> = (i.saturating_sub(fan_in)..i).map(|d| format!("t{d}")).collect();
            serde_json::json!({"id": format!("t{i}"), "description": format!("task {i}"), "dependencies": deps,
                "tool_or_prompt": {"name": "inference", "params": {"prompt": format!("prompt {i} ").repeat(20), "model": "m"}}})
        })
        .collect();
    serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": tasks})).unwrap()
}

fn completed(i: usize) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(format!("t{i}"), TaskStatus::Completed);
    r.output = "x".repeat(3000);
    r.prompt = Some("p".repeat(6000));
    r
}

fn new_store(tmp: &tempfile::TempDir, p: &Plan) -> SqliteStore {
    SqliteStore::create_in(
        &tmp.path().join("run"),
        &NewRun {
            plan: p,
            engine: "dry-run",
            plan_source: None,
            inputs: None,
        },
    )
    .unwrap()
}

/// One `store()` of a completed result (3 KB output, 6 KB prompt),
/// committed with synchronous=FULL.
#[divan::bench(sample_count = 200)]
fn store_completed(bencher: divan::Bencher<'_, '_>) {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan(2000, 0);
    let store = new_store(&tmp, &p);
    let mut i = 0;
    bencher.bench_local(|| {
        store.store(completed(i % 2000)).unwrap();
        i += 1;
    });
}

/// The executor's read before a task: 20 dependency results.
#[divan::bench]
fn get_20_dependencies(bencher: divan::Bencher<'_, '_>) {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan(2000, 0);
    let store = new_store(&tmp, &p);
    for i in 0..2000 {
        store.store(completed(i)).unwrap();
    }
    let ids: Vec<String> = (1000..1020).map(|i| format!("t{i}")).collect();
    bencher.bench_local(|| store.get_by_dependency_ids(&ids).unwrap());
}

/// Resume planning of a 2,000-task plan with fan-in 20, every task stored.
#[divan::bench(sample_count = 10)]
fn resume_plan_2000(bencher: divan::Bencher<'_, '_>) {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan(2000, 20);
    let store = new_store(&tmp, &p);
    for i in 0..2000 {
        store.store(completed(i)).unwrap();
    }
    let view = store.view();
    bencher.bench_local(|| view.resume_plan(&p, "dry-run").unwrap());
}

/// A cache hit through `CachingEngine` (10,000 entries in the cache).
#[divan::bench]
fn cache_hit(bencher: divan::Bencher<'_, '_>) {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Arc::new(RunRoot::new(tmp.path()).cache().unwrap());
    let engine = CachingEngine::new(Arc::new(ctx_engine::DryRunEngine), cache, "dry-run", None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let req = |i: usize| InferenceRequest {
        task_id: format!("t{i}"),
        prompt: format!("final prompt {i} ").repeat(300),
        params: Params {
            prompt: "p".into(),
            model: Some("m".into()),
            ..Params::default()
        },
        prompt_tokens: 1,
        max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
        purpose: Default::default(),
        cache_breakpoints: None,
        canary: None,
        response_schema: None,
    };
    for i in 0..10_000 {
        rt.block_on(engine.infer(&req(i))).unwrap();
    }
    let r = req(5000);
    bencher.bench_local(|| {
        let resp = rt.block_on(engine.infer(&r)).unwrap();
        assert!(resp.cached);
    });
}
