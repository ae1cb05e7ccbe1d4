//! The prefix-cache warm-up (`config.cache_warm_up`, issue 24): a map's
//! items sharing a long prefix wait for one of them to get its first
//! token, and go then; a failed warm-up call releases them at once; fewer
//! ready items than `K`, or a prefix too short to cache, hold nobody.
//!
//! The engine is scripted on tokio's paused clock: a warm-up call (the one
//! that carries the signal) takes 100 ms to its first token and 1 s more
//! to its end; every other call takes 300 ms. The log of starts, first
//! tokens and ends is what the tests read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctx_deps::{
    BoxFuture, EngineError, Executor, ExecutorOptions, FirstToken, InferenceEngine,
    InferenceRequest, InferenceResponse, MemoryStore, RunReport,
};
use ctx_model::{Plan, TaskStatus};

/// What the scripted engine does.
#[derive(Default)]
struct Scripted {
    /// The warm-up call fails after 100 ms, before any token.
    fail_warm_up: bool,
    /// The engine sees its answers whole: it leaves the signal to its
    /// caller (the trait's default).
    whole_answers: bool,
    log: Mutex<Vec<(&'static str, String)>>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

impl Scripted {
    fn note(&self, what: &'static str, id: &str) {
        self.log.lock().unwrap().push((what, id.to_string()));
    }
    fn begin(&self, id: &str) {
        self.note("start", id);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
    }
    fn finish(&self, id: &str) {
        self.note("end", id);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
    fn log(&self) -> Vec<(&'static str, String)> {
        self.log.lock().unwrap().clone()
    }
    /// Where `what` of `id` is in the log.
    fn at(&self, what: &str, id: &str) -> usize {
        self.log()
            .iter()
            .position(|(w, i)| *w == what && i == id)
            .unwrap_or_else(|| panic!("no {what} of {id} in {:?}", self.log()))
    }
    /// The items started, in order.
    fn item_starts(&self) -> Vec<String> {
        self.log()
            .into_iter()
            .filter(|(w, i)| *w == "start" && i.starts_with("m["))
            .map(|(_, i)| i)
            .collect()
    }
}

fn answer(id: &str) -> InferenceResponse {
    InferenceResponse {
        output: format!("answer of {id}"),
        ..InferenceResponse::default()
    }
}

impl InferenceEngine for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let id = &request.task_id;
            self.begin(id);
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.finish(id);
            Ok(answer(id))
        })
    }
    fn infer_with_first_token<'a>(
        &'a self,
        request: &'a InferenceRequest,
        first_token: &'a FirstToken,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        if self.whole_answers {
            return self.infer(request);
        }
        Box::pin(async move {
            let id = &request.task_id;
            self.note("warm-up", id);
            self.begin(id);
            tokio::time::sleep(Duration::from_millis(100)).await;
            if self.fail_warm_up {
                self.finish(id);
                return Err(EngineError::new(format!("{id} broke")));
            }
            self.note("first", id);
            first_token.fire();
            tokio::time::sleep(Duration::from_millis(1000)).await;
            self.finish(id);
            Ok(answer(id))
        })
    }
}

/// `brief`, then map `m` over four notes, whose prompt shares `guide`
/// before the note; `K` = `warm_up`.
fn plan(guide: &str, warm_up: Option<usize>) -> Plan {
    let mut plan: Plan = serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "config": {"layout": "cache", "max_prompt_tokens": 8000},
        "variables": [{"name": "NOTES", "type": "json"}],
        "sub_tasks": [
            {"id": "m", "description": "Each note",
             "map": {"over": "NOTES", "as": "NOTE", "max_items": 10, "allow_failures": 1},
             "tool_or_prompt": {"name": "inference", "params": {
                 "prompt": format!("{guide}\n<untrusted-content>\n{{{{NOTE}}}}\n</untrusted-content>\nWhy?")}}}
        ]
    }))
    .unwrap();
    plan.sub_tasks[0].map.as_mut().unwrap().variable_value =
        Some(r#"["one", "two", "three", "four"]"#.into());
    plan.config.cache_warm_up = warm_up;
    plan
}

/// About 2,000 tokens the items share: over the 1,024-token minimum.
fn long_guide() -> String {
    "Weigh the note against the standing brief. ".repeat(250)
}

async fn run(plan: Plan, engine: &Arc<Scripted>, concurrency: usize) -> RunReport {
    let options = ExecutorOptions {
        concurrency,
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(plan, engine.clone(), Arc::new(MemoryStore::new()), options).unwrap();
    tokio::time::timeout(Duration::from_secs(600), exec.run())
        .await
        .expect("the run ends (no item waits forever)")
        .unwrap()
}

fn item_statuses(report: &RunReport) -> Vec<TaskStatus> {
    report
        .results
        .iter()
        .filter(|r| r.task_id.starts_with("m["))
        .map(|r| r.status)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn siblings_wait_for_the_warm_up_calls_first_token_then_all_go() {
    let engine = Arc::new(Scripted::default());
    let report = run(plan(&long_guide(), Some(3)), &engine, 2).await;
    assert!(report.all_completed(), "{report:?}");
    assert_eq!(item_statuses(&report), [TaskStatus::Completed; 4]);
    let starts = engine.item_starts();
    assert_eq!(starts.len(), 4, "{:?}", engine.log());
    let warm = &starts[0];
    assert_eq!(engine.at("warm-up", warm), 0, "the first item sent warms");
    let first = engine.at("first", warm);
    // Nobody is sent before the warm-up call's first token ...
    for sibling in &starts[1..] {
        assert!(engine.at("start", sibling) > first, "{:?}", engine.log());
    }
    // ... and the siblings go then, not when the warm-up call ends.
    assert!(engine.at("start", &starts[1]) < engine.at("end", warm));
    // Held items took no slot: never more than `concurrency` in flight.
    assert_eq!(engine.most_in_flight.load(Ordering::SeqCst), 2);
    // One warm-up call per group.
    let warmups = engine.log().iter().filter(|(w, _)| *w == "warm-up").count();
    assert_eq!(warmups, 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_warm_up_call_releases_its_siblings_at_once() {
    let engine = Arc::new(Scripted {
        fail_warm_up: true,
        ..Scripted::default()
    });
    let report = run(plan(&long_guide(), Some(2)), &engine, 4).await;
    let starts = engine.item_starts();
    let warm = &starts[0];
    let failed = engine.at("end", warm);
    for sibling in &starts[1..] {
        assert!(engine.at("start", sibling) > failed, "{:?}", engine.log());
    }
    // The failed item is within `allow_failures`; the others ran.
    let failed_items = item_statuses(&report)
        .iter()
        .filter(|s| **s == TaskStatus::Failed)
        .count();
    assert_eq!(failed_items, 1);
    assert_eq!(starts.len(), 4);
    assert!(report.all_completed(), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn fewer_ready_calls_than_k_warm_nothing() {
    let engine = Arc::new(Scripted::default());
    let report = run(plan(&long_guide(), Some(5)), &engine, 4).await;
    assert!(report.all_completed());
    let log = engine.log();
    assert!(log.iter().all(|(w, _)| *w != "warm-up"), "{log:?}");
    // All four go at once.
    let first_end = log.iter().position(|(w, _)| *w == "end").unwrap();
    assert_eq!(engine.item_starts().len(), 4);
    assert!(
        log[..first_end]
            .iter()
            .filter(|(w, _)| *w == "start")
            .count()
            == 4
    );
    // Off (no `cache_warm_up`) is the same.
    let off = Arc::new(Scripted::default());
    run(plan(&long_guide(), None), &off, 4).await;
    assert!(off.log().iter().all(|(w, _)| *w != "warm-up"));
}

#[tokio::test(start_paused = true)]
async fn a_prefix_too_short_to_cache_holds_nobody() {
    let engine = Arc::new(Scripted::default());
    let report = run(plan("Weigh the note.", Some(2)), &engine, 4).await;
    assert!(report.all_completed());
    // One item still carries the signal, but fires it before it is sent:
    // its siblings go at once, before its first token. They may even
    // reach the engine before it does (they race it from the queue), so
    // the warm-up call is found by its signal, not by its place.
    let log = engine.log();
    let warmed: Vec<&String> = log
        .iter()
        .filter(|(what, _)| *what == "warm-up")
        .map(|(_, id)| id)
        .collect();
    assert_eq!(warmed.len(), 1, "{log:?}");
    let warm = warmed[0];
    let starts = engine.item_starts();
    assert_eq!(starts.len(), 4, "{log:?}");
    for sibling in starts.iter().filter(|s| *s != warm) {
        assert!(
            engine.at("start", sibling) < engine.at("first", warm),
            "{log:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_engine_that_sees_its_answer_whole_releases_at_the_answer() {
    let engine = Arc::new(Scripted {
        whole_answers: true,
        ..Scripted::default()
    });
    let report = run(plan(&long_guide(), Some(2)), &engine, 4).await;
    assert!(report.all_completed());
    let starts = engine.item_starts();
    let warm_end = engine.at("end", &starts[0]);
    for sibling in &starts[1..] {
        assert!(engine.at("start", sibling) > warm_end, "{:?}", engine.log());
    }
}
