//! The store under the real executor: a run that fails part-way, a resume
//! that reuses what completed, and a resume after a plan edit that re-runs
//! the edited task and its dependents only. This is also the reference for
//! wiring the store into `ctx run`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ctx_deps::{
    BoxFuture, EngineError, ExecutionStore, Executor, ExecutorOptions, InferenceEngine,
    InferenceRequest, InferenceResponse, RunReport,
};
use ctx_model::{Plan, TaskStatus};
use ctx_store_sqlite::{
    CachingEngine, NewRun, ResumePlan, RunRoot, SessionEnd, SqliteStore, StartAt,
};

/// Counts calls per task; fails the tasks listed in `failing`.
#[derive(Default)]
struct Script {
    calls: Mutex<BTreeMap<String, usize>>,
    failing: Mutex<Vec<String>>,
}

impl InferenceEngine for Script {
    fn name(&self) -> &str {
        "script"
    }
    fn infer<'a>(
        &'a self,
        r: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            *self
                .calls
                .lock()
                .unwrap()
                .entry(r.task_id.clone())
                .or_default() += 1;
            if self.failing.lock().unwrap().contains(&r.task_id) {
                return Err(EngineError::new(format!("{} failed", r.task_id)));
            }
            Ok(InferenceResponse {
                output: format!("out({})", r.prompt.len()),
                ..InferenceResponse::default()
            })
        })
    }
}

impl Script {
    fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
            .into_keys()
            .collect()
    }
}

fn plan() -> Plan {
    // a -> b -> d ; a -> c -> d ; e alone
    serde_json::from_str(
        r#"{"schema_version": 1, "sub_tasks": [
        {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pa"}}},
        {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pb"}}},
        {"id": "c", "description": "C", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pc"}}},
        {"id": "d", "description": "D", "dependencies": ["b", "c"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "pd"}}},
        {"id": "e", "description": "E", "tool_or_prompt": {"name": "inference", "params": {"prompt": "pe"}}}]}"#,
    )
    .unwrap()
}

fn execute(
    plan: &Plan,
    engine: Arc<dyn InferenceEngine>,
    store: &Arc<SqliteStore>,
    resume: Option<&ResumePlan>,
) -> RunReport {
    let options = ExecutorOptions {
        reuse_completed: resume.is_some(),
        force_rerun: resume.map(ResumePlan::forced_ids).unwrap_or_default(),
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(
        plan.clone(),
        engine,
        store.clone() as Arc<dyn ExecutionStore>,
        options,
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(exec.run()).unwrap();
    store.finish(SessionEnd::Finished).unwrap();
    report
}

#[test]
fn failed_run_resumes_and_edited_plan_reruns_downstream_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let script = Arc::new(Script::default());
    script.failing.lock().unwrap().push("c".into());
    let p = plan();
    let new = NewRun {
        plan: &p,
        engine: "script",
        plan_source: None,
        inputs: None,
    };

    // 1. c fails, d is skipped.
    let (store, resume) = root.start(StartAt::NewRun, &new).unwrap();
    assert!(resume.is_none());
    let store = Arc::new(store);
    let report = execute(&p, script.clone(), &store, None);
    assert!(!report.all_completed());
    assert_eq!(script.take_calls(), ["a", "b", "c", "e"]);
    let id = store.run_id().to_string();
    drop(store);

    // 2. Resume: only c and d run; the report covers every task.
    script.failing.lock().unwrap().clear();
    let dir = root.resolve(&id).unwrap();
    let dry = root.open(&id).unwrap().resume_plan(&p, "script").unwrap();
    let (store, resume) = root.start(StartAt::Resume(&id), &new).unwrap();
    let resume = resume.unwrap();
    assert_eq!(dry, resume);
    assert_eq!(resume.reuse, ["a", "b", "e"]);
    let reasons: Vec<String> = resume
        .rerun
        .iter()
        .map(|(id, r)| format!("{id}: {r}"))
        .collect();
    assert_eq!(reasons, ["c: failed", "d: skipped"]);
    let store = Arc::new(store);
    let report = execute(&p, script.clone(), &store, Some(&resume));
    assert!(report.all_completed());
    assert_eq!(report.results.len(), 5);
    assert_eq!(script.take_calls(), ["c", "d"]);
    drop(store);

    // 3. Edit b's prompt: b and d run again, nothing else.
    let mut edited = p.clone();
    edited.sub_tasks[1].tool_or_prompt.params.prompt = "pb, revised".into();
    let new = NewRun {
        plan: &edited,
        ..new
    };
    let (store, resume) = SqliteStore::resume(&dir, &new).unwrap();
    let reasons: Vec<String> = resume
        .rerun
        .iter()
        .map(|(id, r)| format!("{id}: {r}"))
        .collect();
    assert_eq!(reasons, ["b: prompt changed", "d: upstream b re-runs"]);
    let store = Arc::new(store);
    let report = execute(&edited, script.clone(), &store, Some(&resume));
    assert!(report.all_completed());
    assert_eq!(script.take_calls(), ["b", "d"]);
    assert_eq!(store.view().sessions().unwrap().len(), 3);
    assert_eq!(store.view().status_counts().unwrap().completed, 5);
}

#[test]
fn cache_serves_a_new_run_of_an_edited_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let script = Arc::new(Script::default());
    let cache = Arc::new(root.cache().unwrap());
    let p = plan();
    let new = NewRun {
        plan: &p,
        engine: "script",
        plan_source: None,
        inputs: None,
    };
    let store = Arc::new(root.create(&new).unwrap());
    let engine = Arc::new(CachingEngine::new(
        script.clone(),
        cache.clone(),
        "script",
        Some(store.run_id().into()),
    ));
    execute(&p, engine, &store, None);
    assert_eq!(script.take_calls().len(), 5);

    // A fresh run of the plan with c edited: c misses, and so does d (its
    // final prompt holds c's output, which changed length); a, b, e hit.
    let mut edited = p.clone();
    edited.sub_tasks[2].tool_or_prompt.params.prompt = "pc, a longer revision".into();
    let new = NewRun {
        plan: &edited,
        ..new
    };
    let store = Arc::new(root.create(&new).unwrap());
    let engine = Arc::new(CachingEngine::new(
        script.clone(),
        cache,
        "script",
        Some(store.run_id().into()),
    ));
    let stats = engine.stats();
    let report = execute(&edited, engine, &store, None);
    assert_eq!(script.take_calls(), ["c", "d"]);
    assert_eq!((stats.hits(), stats.misses()), (3, 2));
    let cached: Vec<&str> = report
        .results
        .iter()
        .filter(|r| r.metadata.cached)
        .map(|r| r.task_id.as_str())
        .collect();
    assert_eq!(cached, ["a", "b", "e"]);
    assert!(
        report
            .results
            .iter()
            .all(|r| r.status == TaskStatus::Completed)
    );
}

/// src lists two repos as JSON; `scan` maps over them; `report` reduces.
fn map_plan() -> Plan {
    serde_json::from_str(
        r#"{"schema_version": 1, "sub_tasks": [
        {"id": "src", "description": "List", "tool_or_prompt": {"name": "inference", "params": {"prompt": "list"}}},
        {"id": "scan", "description": "Scan", "dependencies": ["src"],
         "map": {"over": "src", "pointer": "/repos", "as": "REPO", "max_items": 5},
         "tool_or_prompt": {"name": "inference", "params": {"prompt": "Rate <untrusted-content>{{REPO}}</untrusted-content>."}}},
        {"id": "report", "description": "Report", "dependencies": ["scan"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "reduce"}}}]}"#,
    )
    .unwrap()
}

/// Answers `src` with a JSON list, every other task as [`Script`] does.
struct Listing(Script);

impl InferenceEngine for Listing {
    fn name(&self) -> &str {
        "script"
    }
    fn infer<'a>(
        &'a self,
        r: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let answer = self.0.infer(r).await?;
            if r.task_id != "src" {
                return Ok(answer);
            }
            Ok(InferenceResponse {
                output: r#"{"repos": ["a", "b"]}"#.into(),
                ..answer
            })
        })
    }
}

/// A session that died mid-map leaves the map task's latest row
/// `in_progress`: on resume the map runs again (it expands anew), but its
/// items all come back unchanged, so the reduce stored before is taken as
/// it is. Before, the map's re-run forced the reduce to run once more.
#[test]
fn a_crash_mid_map_does_not_rerun_a_reduce_whose_items_are_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let engine = Arc::new(Listing(Script::default()));
    let p = map_plan();
    let new = NewRun {
        plan: &p,
        engine: "script",
        plan_source: None,
        inputs: None,
    };
    let (store, _) = root.start(StartAt::NewRun, &new).unwrap();
    let store = Arc::new(store);
    let report = execute(&p, engine.clone(), &store, None);
    assert!(report.all_completed(), "{report:#?}");
    assert_eq!(
        engine.0.take_calls(),
        ["report", "scan[0]", "scan[1]", "src"]
    );
    let id = store.run_id().to_string();
    drop(store);

    // The next session dies as the map starts expanding again.
    let (store, _) = root.start(StartAt::Resume(&id), &new).unwrap();
    let mut started = ctx_model::TaskExecutionResult::new("scan", TaskStatus::InProgress);
    started.prompt = Some(String::new());
    store.store(started).unwrap();
    store.finish(SessionEnd::Finished).unwrap();
    drop(store);

    let (store, resume) = root.start(StartAt::Resume(&id), &new).unwrap();
    let resume = resume.unwrap();
    let reasons: Vec<String> = resume
        .rerun
        .iter()
        .map(|(id, r)| format!("{id}: {r}"))
        .collect();
    assert_eq!(
        reasons,
        [
            "scan: in_progress (crashed)",
            "report: upstream scan re-runs"
        ]
    );
    let store = Arc::new(store);
    let report = execute(&p, engine.clone(), &store, Some(&resume));
    assert!(report.all_completed(), "{report:#?}");
    assert_eq!(engine.0.take_calls(), Vec::<String>::new());
    assert!(
        report.reused.contains(&"report".to_string()),
        "{:?}",
        report.reused
    );
}
