//! Executor tests. Latencies are simulated with tokio's paused clock, so
//! "100 ms" costs no wall time and start times are exact.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctx_model::{Attempt, Plan, TaskExecutionResult, TaskStatus};
use proptest::prelude::*;
use tokio::time::Instant;

use super::*;
use crate::options::{DEFAULT_TASK_TIMEOUT, ExecutorOptions, Schedule};
use ctx_engine::{BoxFuture, EngineError, InferenceEngine, InferenceRequest, InferenceResponse};
use ctx_store::MemoryStore;
use ctx_store::{ExecutionStore, StoreError};
use ctx_test_support::plan;
use ctx_tokens::TokenizerExt;

/// An engine that sleeps per task, fails on demand, and checks the
/// executor's promises at every call.
struct TestEngine {
    store: Arc<MemoryStore>,
    /// Output length by task, when not the default `out {id}`.
    output_len: BTreeMap<String, usize>,
    deps: BTreeMap<String, Vec<String>>,
    latency_ms: BTreeMap<String, u64>,
    fail: HashSet<String>,
    calls: Mutex<Vec<(String, Instant)>>,
    violations: Mutex<Vec<String>>,
    dropped_unfinished: Arc<AtomicUsize>,
}

impl TestEngine {
    fn new(store: Arc<MemoryStore>, plan: &Plan) -> TestEngine {
        TestEngine {
            store,
            output_len: BTreeMap::new(),
            deps: plan
                .sub_tasks
                .iter()
                .map(|t| (t.id.clone(), t.dependencies.clone()))
                .collect(),
            latency_ms: BTreeMap::new(),
            fail: HashSet::new(),
            calls: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            dropped_unfinished: Arc::new(AtomicUsize::new(0)),
        }
    }
    fn latency(mut self, id: &str, ms: u64) -> Self {
        self.latency_ms.insert(id.into(), ms);
        self
    }
    fn failing(mut self, id: &str) -> Self {
        self.fail.insert(id.into());
        self
    }
    fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect()
    }
    fn start_of(&self, id: &str) -> Instant {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .find(|(i, _)| i == id)
            .unwrap()
            .1
    }
}

struct DropGuard(Arc<AtomicUsize>, bool);
impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl InferenceEngine for TestEngine {
    fn name(&self) -> &str {
        "test"
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let id = request.task_id.clone();
            self.calls
                .lock()
                .unwrap()
                .push((id.clone(), Instant::now()));
            for d in &self.deps[&id] {
                let ok = self
                    .store
                    .get_by_task_id(d)
                    .unwrap()
                    .is_some_and(|r| r.status == TaskStatus::Completed);
                if !ok {
                    self.violations
                        .lock()
                        .unwrap()
                        .push(format!("{id} started before {d} completed"));
                }
            }
            let mine = self.store.get_by_task_id(&id).unwrap();
            if !mine.is_some_and(|r| {
                r.status == TaskStatus::InProgress
                    && r.prompt.as_deref() == Some(request.prompt.as_str())
            }) {
                self.violations
                    .lock()
                    .unwrap()
                    .push(format!("{id}: no in_progress result with the prompt"));
            }
            let mut guard = DropGuard(self.dropped_unfinished.clone(), false);
            let ms = self.latency_ms.get(&id).copied().unwrap_or(10);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            guard.1 = true;
            let attempts = vec![Attempt {
                number: 1,
                duration_ms: ms,
                outcome: "ok".into(),
                ..Attempt::default()
            }];
            if self.fail.contains(&id) {
                return Err(EngineError {
                    message: format!("{id} broke"),
                    attempts,
                });
            }
            Ok(InferenceResponse {
                output: match self.output_len.get(&id) {
                    Some(&n) => "x".repeat(n),
                    None => format!("out {id}"),
                },
                model: Some("test-model".into()),
                attempts,
                ..InferenceResponse::default()
            })
        })
    }
}

fn executor(
    plan: Plan,
    engine: Arc<TestEngine>,
    store: Arc<MemoryStore>,
    opts: ExecutorOptions,
) -> Executor {
    Executor::new(plan, engine, store, opts).unwrap()
}

fn status_of(report: &RunReport, id: &str) -> TaskStatus {
    report
        .results
        .iter()
        .find(|r| r.task_id == id)
        .unwrap()
        .status
}

fn error_of<'a>(report: &'a RunReport, id: &str) -> &'a str {
    report
        .results
        .iter()
        .find(|r| r.task_id == id)
        .unwrap()
        .error
        .as_deref()
        .unwrap_or("")
}

#[tokio::test(start_paused = true)]
async fn concurrency_one_follows_priority_then_plan_order() {
    // a alone (remaining 1); b -> c -> d chain (remaining 3, 2, 1).
    let p = plan(&[("a", &[]), ("b", &[]), ("c", &["b"]), ("d", &["c"])]);
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(TestEngine::new(store.clone(), &p));
    let opts = ExecutorOptions {
        concurrency: 1,
        ..ExecutorOptions::default()
    };
    let report = executor(p, engine.clone(), store, opts)
        .run()
        .await
        .unwrap();
    // d and a tie at 1: plan order puts a first.
    assert_eq!(report.order, ["b", "c", "a", "d"]);
    assert_eq!(engine.calls(), report.order);
    assert!(report.all_completed());
    assert!(engine.violations.lock().unwrap().is_empty());
    // Results come back in plan order with metadata filled.
    let ids: Vec<&str> = report.results.iter().map(|r| r.task_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    let c = &report.results[2];
    assert_eq!(c.output, "out c");
    assert_eq!(c.metadata.model.as_deref(), Some("test-model"));
    assert_eq!(c.metadata.execution_time_ms, Some(10));
    assert_eq!(c.metadata.attempts.len(), 1);
    assert!(c.metadata.prompt_tokens.is_some());
    assert!(c.metadata.tokenizer.is_some());
    assert_eq!(c.prompt.as_deref().map(|p| p.ends_with("do c")), Some(true));
}

#[tokio::test(start_paused = true)]
async fn ready_queue_starts_tasks_without_waiting_for_the_level() {
    // Level 0: slow (100 ms) and quick (10 ms); level 1: after_quick.
    let p = plan(&[("slow", &[]), ("quick", &[]), ("after_quick", &["quick"])]);
    for (schedule, expected_ms) in [(Schedule::ReadyQueue, 10), (Schedule::Levels, 100)] {
        let store = Arc::new(MemoryStore::new());
        let engine = Arc::new(
            TestEngine::new(store.clone(), &p)
                .latency("slow", 100)
                .latency("quick", 10),
        );
        let opts = ExecutorOptions {
            concurrency: 0,
            schedule,
            ..ExecutorOptions::default()
        };
        let t0 = Instant::now();
        let report = executor(p.clone(), engine.clone(), store, opts)
            .run()
            .await
            .unwrap();
        assert!(report.all_completed());
        let started = engine.start_of("after_quick") - t0;
        assert_eq!(started, Duration::from_millis(expected_ms), "{schedule:?}");
        assert!(engine.violations.lock().unwrap().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn concurrency_limit_holds() {
    let p = plan(&[("a", &[]), ("b", &[]), ("c", &[]), ("d", &[]), ("e", &[])]);
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(TestEngine::new(store.clone(), &p));
    let opts = ExecutorOptions {
        concurrency: 2,
        ..ExecutorOptions::default()
    };
    let t0 = Instant::now();
    let report = executor(p, engine.clone(), store, opts)
        .run()
        .await
        .unwrap();
    assert!(report.all_completed());
    // 5 tasks of 10 ms, 2 at a time: 30 ms.
    assert_eq!(report.makespan, Duration::from_millis(30));
    let starts: Vec<u128> = engine
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|(_, t)| (*t - t0).as_millis())
        .collect();
    assert_eq!(starts, [0, 0, 10, 10, 20]);
}

#[tokio::test(start_paused = true)]
async fn failure_skips_transitive_dependents_and_independent_branches_run_on() {
    let p = plan(&[
        ("a", &[]),
        ("b", &["a"]),
        ("c", &["b"]),
        ("x", &[]),
        ("y", &["x", "c"]),
        ("z", &["x"]),
    ]);
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(TestEngine::new(store.clone(), &p).failing("a"));
    let mut events = Vec::new();
    let exec = executor(p, engine.clone(), store.clone(), ExecutorOptions::default());
    let report = exec
        .run_with(std::future::pending(), |e| events.push(e.clone()))
        .await
        .unwrap();
    assert_eq!(status_of(&report, "a"), TaskStatus::Failed);
    assert_eq!(error_of(&report, "a"), "a broke");
    for (id, why) in [
        ("b", "dependency `a` failed"),
        ("c", "upstream task `a` failed"),
        ("y", "upstream task `a` failed"),
    ] {
        assert_eq!(status_of(&report, id), TaskStatus::Skipped, "{id}");
        assert_eq!(error_of(&report, id), why);
        assert_eq!(
            store.get_by_task_id(id).unwrap().unwrap().status,
            TaskStatus::Skipped
        );
    }
    assert_eq!(status_of(&report, "x"), TaskStatus::Completed);
    assert_eq!(status_of(&report, "z"), TaskStatus::Completed);
    assert_eq!(report.count(TaskStatus::Skipped), 3);
    assert!(!report.all_completed());
    assert!(!report.interrupted);
    let mut called = engine.calls();
    called.sort();
    assert_eq!(called, ["a", "x", "z"]);
    // Every task gets exactly one Finished event.
    let finished: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ProgressEvent::Finished { task_id, .. } => Some(task_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 6);
    assert_eq!(finished.iter().collect::<BTreeSet<_>>().len(), 6);
}

#[tokio::test(start_paused = true)]
async fn cancellation_drops_in_flight_and_reports_every_task() {
    let p = plan(&[
        ("long", &[]),
        ("quick", &[]),
        ("after", &["long"]),
        ("later", &["quick"]),
    ]);
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(
        TestEngine::new(store.clone(), &p)
            .latency("long", 10_000)
            .latency("quick", 100)
            .latency("later", 10_000),
    );
    let exec = executor(p, engine.clone(), store.clone(), ExecutorOptions::default());
    let report = exec
        .run_with(tokio::time::sleep(Duration::from_millis(1_000)), |_| {})
        .await
        .unwrap();
    assert!(report.interrupted);
    assert_eq!(report.results.len(), 4);
    assert_eq!(status_of(&report, "quick"), TaskStatus::Completed);
    for id in ["long", "later"] {
        assert_eq!(status_of(&report, id), TaskStatus::Failed);
        assert!(
            error_of(&report, id).starts_with("interrupted: cancelled while running"),
            "{id}"
        );
        // The in-progress prompt survives into the failed result.
        assert!(store.get_by_task_id(id).unwrap().unwrap().prompt.is_some());
    }
    assert_eq!(status_of(&report, "after"), TaskStatus::Skipped);
    assert!(error_of(&report, "after").starts_with("interrupted:"));
    // Both in-flight engine futures were dropped, unfinished.
    assert_eq!(engine.dropped_unfinished.load(Ordering::SeqCst), 2);
    assert!(report.makespan < Duration::from_millis(1_100));
}

#[tokio::test(start_paused = true)]
async fn reuse_completed_skips_execution_and_force_rerun_cascades() {
    let p = plan(&[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("d", &[])]);
    let mut done = TaskExecutionResult::new("a", TaskStatus::Completed);
    done.output = "stored A".into();
    let mut failed = TaskExecutionResult::new("b", TaskStatus::Failed);
    failed.error = Some("earlier".into());
    let mut d_done = TaskExecutionResult::new("d", TaskStatus::Completed);
    d_done.output = "stored D".into();

    let store = Arc::new(MemoryStore::with_results([
        done.clone(),
        failed.clone(),
        d_done.clone(),
    ]));
    let engine = Arc::new(TestEngine::new(store.clone(), &p));
    let opts = ExecutorOptions {
        reuse_completed: true,
        ..ExecutorOptions::default()
    };
    let report = executor(p.clone(), engine.clone(), store.clone(), opts)
        .run()
        .await
        .unwrap();
    assert_eq!(engine.calls(), ["b", "c"]);
    assert_eq!(report.reused, ["a", "d"]);
    assert_eq!(report.order, ["b", "c"]);
    assert!(report.all_completed());
    assert_eq!(report.results[0].output, "stored A");
    assert!(engine.violations.lock().unwrap().is_empty());

    // Without reuse every task runs.
    let store = Arc::new(MemoryStore::with_results([
        done.clone(),
        failed.clone(),
        d_done.clone(),
    ]));
    let engine = Arc::new(TestEngine::new(store.clone(), &p));
    executor(p.clone(), engine.clone(), store, ExecutorOptions::default())
        .run()
        .await
        .unwrap();
    assert_eq!(engine.calls().len(), 4);

    // Forcing a re-runs a and everything downstream; d stays reused.
    let store = Arc::new(MemoryStore::with_results([done, failed, d_done]));
    let engine = Arc::new(TestEngine::new(store.clone(), &p));
    let opts = ExecutorOptions {
        reuse_completed: true,
        force_rerun: BTreeSet::from(["a".to_string()]),
        ..ExecutorOptions::default()
    };
    let report = executor(p, engine.clone(), store, opts)
        .run()
        .await
        .unwrap();
    assert_eq!(engine.calls(), ["a", "b", "c"]);
    assert_eq!(report.reused, ["d"]);
}

#[tokio::test(start_paused = true)]
async fn prompt_over_cap_fails_before_the_engine() {
    let mut p = plan(&[("big", &[]), ("after", &["big"]), ("ok", &[])]);
    p.sub_tasks[0].tool_or_prompt.params.prompt = "word ".repeat(200);
    p.config.max_prompt_tokens = 50;
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(TestEngine::new(store.clone(), &p));
    let report = executor(p, engine.clone(), store, ExecutorOptions::default())
        .run()
        .await
        .unwrap();
    assert_eq!(status_of(&report, "big"), TaskStatus::Failed);
    let err = error_of(&report, "big");
    let tokens = ctx_tokens::Tokenizer::Cl100kBase
        .counter()
        .count(&"word ".repeat(200));
    assert!(err.contains(&format!(" {tokens} ")), "{err}");
    assert!(err.contains("50"), "{err}");
    assert_eq!(status_of(&report, "after"), TaskStatus::Skipped);
    assert_eq!(engine.calls(), ["ok"]);
}

#[tokio::test]
async fn dry_run_engine_end_to_end() {
    let p = plan(&[("1", &[]), ("2", &["1"])]);
    let store = Arc::new(MemoryStore::new());
    let exec = Executor::new(
        p,
        Arc::new(ctx_engine::DryRunEngine),
        store,
        ExecutorOptions::default(),
    )
    .unwrap();
    let report = exec.run().await.unwrap();
    assert_eq!(report.results[1].output, "[dry-run] output of task 2");
    assert_eq!(report.results[1].metadata.attempts.len(), 1);
    assert_eq!(report.results[1].metadata.tokens_used, None);
}

/// A run looks each dependency up by the graph's index, never by a scan
/// of the plan (`Plan::task` per dependency made `ctx run` quadratic:
/// 43 s at 50,000 tasks). Counts scans, not time.
#[tokio::test]
async fn a_run_never_scans_the_plan_per_dependency() {
    let tasks: Vec<serde_json::Value> = (0..400)
        .map(|i: usize| {
            let deps: Vec<String> = (i.saturating_sub(4)..i).map(|d| format!("t{d}")).collect();
            serde_json::json!({
                "id": format!("t{i}"),
                "description": format!("task {i}"),
                "dependencies": deps,
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}
            })
        })
        .collect();
    let p: Plan =
        serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": tasks}))
            .unwrap();
    let exec = Executor::new(
        p,
        Arc::new(ctx_engine::DryRunEngine),
        Arc::new(MemoryStore::new()),
        ExecutorOptions::default(),
    )
    .unwrap();
    let before = ctx_model::task_scans();
    let report = exec.run().await.unwrap();
    assert_eq!(report.results.len(), 400);
    assert!(
        report.results[399].output.contains("task t399"),
        "{}",
        report.results[399].output
    );
    assert_eq!(
        ctx_model::task_scans() - before,
        0,
        "Plan::task scans in a run"
    );
}

// ---- properties over random DAGs ----

#[derive(Debug, Clone)]
struct RandomPlan {
    deps: Vec<Vec<usize>>,
    latency: Vec<u64>,
    fail: Vec<bool>,
}

fn random_plan() -> impl Strategy<Value = RandomPlan> {
    (1usize..24).prop_flat_map(|n| {
        (
            proptest::collection::vec(
                proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
                n,
            ),
            proptest::collection::vec(1u64..50, n),
            proptest::collection::vec(prop::bool::weighted(0.1), n),
        )
            .prop_map(move |(raw, latency, fail)| {
                let deps = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, picks)| {
                        let mut d: Vec<usize> = if i == 0 {
                            Vec::new()
                        } else {
                            picks.iter().map(|p| p.index(i)).collect()
                        };
                        d.sort_unstable();
                        d.dedup();
                        d
                    })
                    .collect();
                RandomPlan {
                    deps,
                    latency,
                    fail,
                }
            })
    })
}

fn to_plan(rp: &RandomPlan) -> Plan {
    // Ids in reverse so plan order and id order differ.
    let n = rp.deps.len();
    let id = |i: usize| format!("t{:02}", n - i);
    let subs: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "id": id(i), "description": "d",
                "dependencies": rp.deps[i].iter().map(|&d| id(d)).collect::<Vec<_>>(),
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": subs})).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_dags_respect_dependencies_and_priorities(rp in random_plan(), conc in 0usize..4) {
        let p = to_plan(&rp);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let store = Arc::new(MemoryStore::new());
        let mut engine = TestEngine::new(store.clone(), &p);
        for (i, t) in p.sub_tasks.iter().enumerate() {
            engine = engine.latency(&t.id, rp.latency[i]);
            if rp.fail[i] {
                engine = engine.failing(&t.id);
            }
        }
        let engine = Arc::new(engine);
        let opts = ExecutorOptions { concurrency: conc, ..ExecutorOptions::default() };
        let exec = executor(p.clone(), engine.clone(), store.clone(), opts);
        let report = rt.block_on(exec.run()).unwrap();

        // Every task started only after all its dependencies completed.
        prop_assert!(engine.violations.lock().unwrap().is_empty(), "{:?}", engine.violations.lock().unwrap());
        // Every task ends terminal, in the report and in the store.
        prop_assert_eq!(report.results.len(), p.sub_tasks.len());
        for r in &report.results {
            prop_assert!(r.status.is_terminal());
            prop_assert_eq!(store.get_by_task_id(&r.task_id).unwrap().unwrap().status, r.status);
        }
        // Failures: exactly the failing tasks that ran fail, and a task is
        // skipped iff some dependency did not complete.
        let g = exec.graph();
        for i in 0..p.sub_tasks.len() {
            let st = report.results[i].status;
            let deps_ok = g.dependencies(i).all(|d| report.results[d].status == TaskStatus::Completed);
            if deps_ok {
                let expected = if rp.fail[i] { TaskStatus::Failed } else { TaskStatus::Completed };
                prop_assert_eq!(st, expected);
            } else {
                prop_assert_eq!(st, TaskStatus::Skipped);
            }
        }
        // With one task in flight the start order is exactly the priority
        // rule: among tasks ready at each start, the longest remaining path,
        // then plan order.
        if conc == 1 {
            let mut done = vec![false; p.sub_tasks.len()];
            let mut started = vec![false; p.sub_tasks.len()];
            for id in &report.order {
                let i = g.index_of(id).unwrap();
                let best = (0..p.sub_tasks.len())
                    .filter(|&j| !started[j] && g.dependencies(j).all(|d| done[d]))
                    .max_by_key(|&j| (g.remaining_path(j), std::cmp::Reverse(j)));
                prop_assert_eq!(Some(i), best);
                started[i] = true;
                done[i] = report.results[i].status == TaskStatus::Completed;
            }
        }
    }
}

/// A store that refuses to record a completed result for one task.
struct BrokenStore {
    inner: MemoryStore,
    refuse: String,
}

impl ExecutionStore for BrokenStore {
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        self.inner.get_by_task_id(task_id)
    }
    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
        if result.task_id == self.refuse && result.status == TaskStatus::Completed {
            return Err(StoreError::new("disk full"));
        }
        self.inner.store(result)
    }
    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        self.inner.all_results()
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_failure_stops_the_run_and_names_the_task() {
    let p = plan(&[("a", &[]), ("b", &["a"]), ("slow", &[])]);
    let store = Arc::new(BrokenStore {
        inner: MemoryStore::new(),
        refuse: "a".into(),
    });
    let engine =
        Arc::new(TestEngine::new(Arc::new(MemoryStore::new()), &p).latency("slow", 60_000));
    let exec = Executor::new(p, engine.clone(), store, ExecutorOptions::default()).unwrap();
    let err = exec.run().await.unwrap_err();
    assert_eq!(err.to_string(), "task `a`: execution store: disk full");
    // b never started; the slow task was cancelled, not awaited.
    assert!(!engine.calls().contains(&"b".to_string()));
    assert_eq!(engine.dropped_unfinished.load(Ordering::SeqCst), 1);
}

/// Panics on one task.
struct PanickyEngine;

impl InferenceEngine for PanickyEngine {
    fn name(&self) -> &str {
        "panicky"
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            assert!(request.task_id != "boom", "engine bug");
            Ok(InferenceResponse {
                output: "fine".into(),
                ..InferenceResponse::default()
            })
        })
    }
}

#[tokio::test]
async fn an_engine_panic_fails_only_its_task() {
    let p = plan(&[("boom", &[]), ("after", &["boom"]), ("other", &[])]);
    let store = Arc::new(MemoryStore::new());
    let exec = Executor::new(
        p,
        Arc::new(PanickyEngine),
        store.clone(),
        ExecutorOptions::default(),
    )
    .unwrap();
    let report = exec.run().await.unwrap();
    assert_eq!(status_of(&report, "boom"), TaskStatus::Failed);
    assert_eq!(
        error_of(&report, "boom"),
        "the engine panicked while running this task"
    );
    assert_eq!(
        store.get_by_task_id("boom").unwrap().unwrap().status,
        TaskStatus::Failed
    );
    assert_eq!(status_of(&report, "after"), TaskStatus::Skipped);
    assert_eq!(status_of(&report, "other"), TaskStatus::Completed);
}

#[tokio::test(start_paused = true)]
async fn task_timeout_drops_the_call_and_fails_the_task() {
    let p = plan(&[("slow", &[]), ("after", &["slow"]), ("quick", &[])]);
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(TestEngine::new(store.clone(), &p).latency("slow", 10_000));
    let opts = ExecutorOptions {
        task_timeout: Some(Duration::from_millis(1500)),
        ..ExecutorOptions::default()
    };
    let report = executor(p, engine.clone(), store.clone(), opts)
        .run()
        .await
        .unwrap();
    assert_eq!(status_of(&report, "slow"), TaskStatus::Failed);
    assert_eq!(
        error_of(&report, "slow"),
        "timed out after 1.5 s (task_timeout); the engine was stopped"
    );
    let slow = store.get_by_task_id("slow").unwrap().unwrap();
    assert_eq!(slow.metadata.attempts[0].outcome, "timeout");
    assert_eq!(slow.metadata.attempts[0].duration_ms, 1500);
    assert_eq!(status_of(&report, "after"), TaskStatus::Skipped);
    assert_eq!(status_of(&report, "quick"), TaskStatus::Completed);
    // The engine's future was dropped before it finished.
    assert_eq!(engine.dropped_unfinished.load(Ordering::SeqCst), 1);
    // The default bounds every task; `None` bounds none.
    assert_eq!(
        ExecutorOptions::default().task_timeout,
        Some(DEFAULT_TASK_TIMEOUT)
    );
    let p = plan(&[("slow", &[])]);
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(TestEngine::new(store.clone(), &p).latency("slow", 10_000_000));
    let opts = ExecutorOptions {
        task_timeout: None,
        ..ExecutorOptions::default()
    };
    let report = executor(p, engine, store, opts).run().await.unwrap();
    assert!(report.all_completed());
}

#[tokio::test(start_paused = true)]
async fn output_past_the_bound_fails_whatever_the_engine() {
    let p = plan(&[("big", &[]), ("after", &["big"]), ("exact", &[])]);
    let store = Arc::new(MemoryStore::new());
    let mut engine = TestEngine::new(store.clone(), &p);
    engine.output_len.insert("big".into(), 101);
    engine.output_len.insert("exact".into(), 100);
    let opts = ExecutorOptions {
        max_output_bytes: 100,
        ..ExecutorOptions::default()
    };
    let report = executor(p, Arc::new(engine), store.clone(), opts)
        .run()
        .await
        .unwrap();
    assert_eq!(status_of(&report, "big"), TaskStatus::Failed);
    assert_eq!(
        error_of(&report, "big"),
        "output exceeded the limit of 100 bytes (max_output_bytes)"
    );
    let big = store.get_by_task_id("big").unwrap().unwrap();
    assert!(big.output.is_empty(), "the oversized output is not stored");
    assert_eq!(big.metadata.attempts[0].outcome, "output_too_large");
    assert_eq!(status_of(&report, "after"), TaskStatus::Skipped);
    assert_eq!(status_of(&report, "exact"), TaskStatus::Completed);
}

/// A store whose first write of each task blocks (in plain `std` sync,
/// as an fsync or a network round trip would) until every other task has
/// written something. Were store calls made on the runtime's thread, the
/// first blocked write would stop the executor from ever dispatching the
/// other task, and the wait would time out.
struct RendezvousStore {
    inner: MemoryStore,
    tasks: usize,
    seen: Mutex<BTreeSet<String>>,
    changed: std::sync::Condvar,
    timed_out: AtomicUsize,
}

impl ExecutionStore for RendezvousStore {
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        self.inner.get_by_task_id(task_id)
    }

    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
        let mut seen = self.seen.lock().unwrap();
        seen.insert(result.task_id.clone());
        self.changed.notify_all();
        let (seen, wait) = self
            .changed
            .wait_timeout_while(seen, Duration::from_secs(5), |s| s.len() < self.tasks)
            .unwrap();
        if wait.timed_out() {
            self.timed_out.fetch_add(1, Ordering::SeqCst);
        }
        drop(seen);
        self.inner.store(result)
    }

    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        self.inner.all_results()
    }
}

#[test]
fn a_blocking_store_does_not_stall_dispatching() {
    // One runtime thread: a store call made on it would block everything.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let p = plan(&[("a", &[]), ("b", &[]), ("c", &[])]);
    let store = Arc::new(RendezvousStore {
        inner: MemoryStore::new(),
        tasks: 3,
        seen: Mutex::new(BTreeSet::new()),
        changed: std::sync::Condvar::new(),
        timed_out: AtomicUsize::new(0),
    });
    let exec = Executor::new(
        p,
        Arc::new(ctx_engine::DryRunEngine),
        store.clone(),
        ExecutorOptions {
            concurrency: 3,
            ..ExecutorOptions::default()
        },
    )
    .unwrap();
    let report = rt.block_on(exec.run()).unwrap();
    assert!(report.all_completed());
    assert_eq!(
        store.timed_out.load(Ordering::SeqCst),
        0,
        "a store write blocked the runtime: the other tasks were not dispatched"
    );
}

/// An engine that counts the calls in flight across every executor that
/// shares it, and the most ever seen.
struct CountingEngine {
    latency: Duration,
    now: AtomicUsize,
    most: AtomicUsize,
    calls: AtomicUsize,
}

impl CountingEngine {
    fn new(latency_ms: u64) -> CountingEngine {
        CountingEngine {
            latency: Duration::from_millis(latency_ms),
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
        }
    }
}

impl InferenceEngine for CountingEngine {
    fn name(&self) -> &str {
        "counting"
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.latency).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            Ok(InferenceResponse {
                output: format!("out {}", request.task_id),
                ..InferenceResponse::default()
            })
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_shared_dispatch_gate_bounds_engine_calls_across_executors() {
    // Two runs of six independent tasks, each allowed four in flight,
    // share a gate of two: the engine never sees more than two calls.
    let tasks: Vec<(String, Vec<&str>)> = (0..6).map(|k| (format!("t{k}"), vec![])).collect();
    let refs: Vec<(&str, &[&str])> = tasks.iter().map(|(id, d)| (id.as_str(), &d[..])).collect();
    let p = plan(&refs);
    let engine = Arc::new(CountingEngine::new(100));
    let gate = Arc::new(tokio::sync::Semaphore::new(2));
    let opts = ExecutorOptions {
        concurrency: 4,
        dispatch_gate: Some(gate),
        ..ExecutorOptions::default()
    };
    let one = Executor::new(
        p.clone(),
        engine.clone(),
        Arc::new(MemoryStore::new()),
        opts.clone(),
    )
    .unwrap();
    let two = Executor::new(p, engine.clone(), Arc::new(MemoryStore::new()), opts).unwrap();
    let started = Instant::now();
    let (a, b) = tokio::join!(one.run(), two.run());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.all_completed() && b.all_completed());
    assert_eq!(engine.calls.load(Ordering::SeqCst), 12);
    assert_eq!(engine.most.load(Ordering::SeqCst), 2);
    // Twelve calls of 100 ms, two at a time.
    assert_eq!(started.elapsed(), Duration::from_millis(600));

    // Without the gate the same two runs put eight calls in flight.
    let p = plan(&refs);
    let engine = Arc::new(CountingEngine::new(100));
    let opts = ExecutorOptions {
        concurrency: 4,
        ..ExecutorOptions::default()
    };
    let one = Executor::new(
        p.clone(),
        engine.clone(),
        Arc::new(MemoryStore::new()),
        opts.clone(),
    )
    .unwrap();
    let two = Executor::new(p, engine.clone(), Arc::new(MemoryStore::new()), opts).unwrap();
    let (a, b) = tokio::join!(one.run(), two.run());
    assert!(a.unwrap().all_completed() && b.unwrap().all_completed());
    assert_eq!(engine.most.load(Ordering::SeqCst), 8);
}

#[tokio::test(start_paused = true)]
async fn waiting_for_the_gate_does_not_count_against_the_task_timeout() {
    // Each call takes 80 ms under a 100 ms timeout; with one permit for
    // two runs of three tasks, the last task waits 400 ms for the gate,
    // and still every task completes, each timed from its permit.
    let p = plan(&[("a", &[]), ("b", &[]), ("c", &[])]);
    let engine = Arc::new(CountingEngine::new(80));
    let opts = ExecutorOptions {
        concurrency: 3,
        task_timeout: Some(Duration::from_millis(100)),
        dispatch_gate: Some(Arc::new(tokio::sync::Semaphore::new(1))),
        ..ExecutorOptions::default()
    };
    let one = Executor::new(
        p.clone(),
        engine.clone(),
        Arc::new(MemoryStore::new()),
        opts.clone(),
    )
    .unwrap();
    let two = Executor::new(p, engine.clone(), Arc::new(MemoryStore::new()), opts).unwrap();
    let started = Instant::now();
    let (a, b) = tokio::join!(one.run(), two.run());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.all_completed() && b.all_completed(), "{a:?} {b:?}");
    assert_eq!(started.elapsed(), Duration::from_millis(480));
    assert_eq!(engine.most.load(Ordering::SeqCst), 1);
    for r in a.results.iter().chain(&b.results) {
        assert_eq!(r.metadata.execution_time_ms, Some(80), "{r:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_cancelled_while_waiting_for_the_gate_says_so() {
    let p = plan(&[("a", &[]), ("b", &[])]);
    let engine = Arc::new(CountingEngine::new(1_000));
    let opts = ExecutorOptions {
        concurrency: 2,
        dispatch_gate: Some(Arc::new(tokio::sync::Semaphore::new(1))),
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(p, engine, Arc::new(MemoryStore::new()), opts).unwrap();
    let report = exec
        .run_with(tokio::time::sleep(Duration::from_millis(300)), |_| {})
        .await
        .unwrap();
    assert!(report.interrupted);
    assert_eq!(
        error_of(&report, "a"),
        "interrupted: cancelled while running, after 300 ms"
    );
    assert_eq!(
        error_of(&report, "b"),
        "interrupted: cancelled while waiting for the shared concurrency limit, after 300 ms"
    );
}

/// The dry run, with placeholder "calls" that take the given times (a
/// paused clock), so that they come back in another order than they
/// started.
struct TimedDryRun(BTreeMap<String, u64>);

impl InferenceEngine for TimedDryRun {
    fn name(&self) -> &str {
        "timed-dry-run"
    }
    fn answers_prompts(&self) -> bool {
        false
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        let ms = self.0.get(&request.task_id).copied().unwrap_or(0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ctx_engine::DryRunEngine.infer(request).await
        })
    }
}

/// A dry run settles its jobs in the order they were dispatched, whatever
/// order they come back in, so its start order (and every output) is the
/// plan's alone; a real engine's are settled as they come back. `a` and
/// `b` start together; `b` comes back first; their dependents start in
/// the order of `a` and `b` in a dry run, `b`'s first otherwise.
#[tokio::test(start_paused = true)]
async fn a_dry_run_settles_in_dispatch_order_so_its_start_order_is_the_plans() {
    let p = plan(&[("a", &[]), ("b", &[]), ("c", &["a"]), ("d", &["b"])]);
    let latencies: BTreeMap<String, u64> = [("a".to_string(), 30), ("b".to_string(), 10)].into();
    let options = ExecutorOptions {
        concurrency: 2,
        ..ExecutorOptions::default()
    };
    let dry = Executor::new(
        p.clone(),
        Arc::new(TimedDryRun(latencies.clone())),
        Arc::new(MemoryStore::new()),
        options.clone(),
    )
    .unwrap();
    let report = dry.run().await.unwrap();
    assert_eq!(report.order, ["a", "b", "c", "d"]);
    // No model was called: no time is recorded for a placeholder.
    assert!(
        report
            .results
            .iter()
            .all(|r| r.metadata.execution_time_ms == Some(0)),
        "{:?}",
        report.results
    );
    let store = Arc::new(MemoryStore::new());
    let mut real = TestEngine::new(store.clone(), &p);
    real.latency_ms = latencies;
    let report = executor(p, Arc::new(real), store, options)
        .run()
        .await
        .unwrap();
    assert_eq!(report.order, ["a", "b", "d", "c"]);
}
