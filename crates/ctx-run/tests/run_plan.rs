//! `run_plan` and `RunSession` as an embedder uses them: durable runs,
//! resume, the cache, results.json and `--out`.

use std::sync::Arc;

use ctx_deps::{DryRunEngine, InferenceEngine};
use ctx_engine_command::CommandEngine;
use ctx_model::{Plan, TaskStatus};
use ctx_run::{ResultsJson, RunError, RunSession, RunSettings, RunStore, Start, run_plan};
use ctx_store_sqlite::RunRoot;

fn plan() -> Plan {
    serde_json::from_str(
        r#"{"schema_version": 1, "sub_tasks": [
          {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a."}}},
          {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b."}}},
          {"id": "c d", "description": "C", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say c."}}}
        ]}"#,
    )
    .unwrap()
}

fn durable(root: &RunRoot, start: Start, cache: bool) -> RunSettings {
    RunSettings {
        store: RunStore::Sqlite {
            root: root.clone(),
            start,
            cache,
        },
        ..RunSettings::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_durable_run_resumes_reusing_every_completed_task() {
    let dir = tempfile::tempdir().unwrap();
    let root = RunRoot::new(dir.path().join("runs"));
    let rt = runtime();
    let first = rt
        .block_on(run_plan(
            plan(),
            Arc::new(DryRunEngine),
            durable(&root, Start::New, false),
        ))
        .unwrap();
    assert!(first.report.all_completed());
    assert!(first.finish_error.is_none());
    let stored = first.stored.clone().unwrap();
    assert!(stored.dir.join("store.sqlite").is_file());
    assert_eq!(first.report.order.len(), 3);

    let again = rt
        .block_on(run_plan(
            plan(),
            Arc::new(DryRunEngine),
            durable(&root, Start::Resume(stored.run_id.clone()), false),
        ))
        .unwrap();
    assert!(again.report.order.is_empty(), "{:?}", again.report.order);
    assert_eq!(again.resumed.as_ref().unwrap().reuse.len(), 3);
    assert_eq!(again.stored.as_ref().unwrap().run_id, stored.run_id);

    // A changed task runs again with what depends on it.
    let mut changed = plan();
    changed.sub_tasks[0].tool_or_prompt.params.prompt = "Say A.".into();
    let third = rt
        .block_on(run_plan(
            changed,
            Arc::new(DryRunEngine),
            durable(&root, Start::Resume(stored.run_id), false),
        ))
        .unwrap();
    let mut order = third.report.order.clone();
    order.sort();
    assert_eq!(order, ["a", "b", "c d"]);
}

#[test]
fn the_engine_label_decides_what_a_resume_reuses() {
    let dir = tempfile::tempdir().unwrap();
    let root = RunRoot::new(dir.path().join("runs"));
    let rt = runtime();
    let first = rt
        .block_on(run_plan(
            plan(),
            Arc::new(DryRunEngine),
            durable(&root, Start::New, false),
        ))
        .unwrap();
    let run = first.stored.unwrap().run_id;
    // Another engine: every stored result was made under another label.
    let session = RunSession::start(
        plan(),
        Arc::new(CommandEngine::new("cat")),
        durable(&root, Start::Resume(run), false),
    )
    .unwrap();
    let resumed = session.resumed().unwrap();
    assert!(resumed.reuse.is_empty());
    assert_eq!(resumed.rerun.len(), 3);
}

#[test]
fn resuming_a_run_that_does_not_exist_is_a_not_found_store_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = RunRoot::new(dir.path().join("runs"));
    let err = RunSession::start(
        plan(),
        Arc::new(DryRunEngine),
        durable(&root, Start::Resume("nope".into()), false),
    )
    .unwrap_err();
    assert!(
        matches!(&err, RunError::Store(e) if e.is_not_found()),
        "{err}"
    );
    // Nothing was created for it.
    assert!(!dir.path().join("runs/nope").exists());
}

#[test]
fn the_cache_answers_a_second_run_and_results_json_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = RunRoot::new(dir.path().join("runs"));
    let rt = runtime();
    let engine: Arc<dyn InferenceEngine> = Arc::new(CommandEngine::new("cat"));
    let first = rt
        .block_on(run_plan(
            plan(),
            Arc::clone(&engine),
            durable(&root, Start::New, true),
        ))
        .unwrap();
    assert!(first.report.results.iter().all(|r| !r.metadata.cached));
    let second = rt
        .block_on(run_plan(plan(), engine, durable(&root, Start::New, true)))
        .unwrap();
    assert!(second.report.results.iter().all(|r| r.metadata.cached));
    let json = serde_json::to_value(ResultsJson::of(&second.report)).unwrap();
    assert_eq!(json["tasks"][0]["metadata"]["cached"], true);
    // A different command is another identity: nothing is answered for it.
    let other = rt
        .block_on(run_plan(
            plan(),
            Arc::new(CommandEngine::new("cat -")),
            durable(&root, Start::New, true),
        ))
        .unwrap();
    assert!(other.report.results.iter().all(|r| !r.metadata.cached));
}

#[test]
fn out_dir_writes_prompts_outputs_and_results_json() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let outcome = rt
        .block_on(run_plan(
            plan(),
            Arc::new(DryRunEngine),
            RunSettings::default(),
        ))
        .unwrap();
    assert!(outcome.stored.is_none());
    assert_eq!(outcome.report.count(TaskStatus::Completed), 3);
    let out = dir.path().join("out");
    ctx_run::out_dir::prepare(&out).unwrap();
    ctx_run::out_dir::write(&out, &outcome.report).unwrap();
    assert!(out.join("prompts/a.md").is_file());
    assert!(out.join("outputs/c%20d.md").is_file());
    // The documented key order, as written (not as a map would sort it).
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let at = |key: &str| text.find(&format!("\n  \"{key}\":")).unwrap();
    assert!(
        at("order") < at("tasks") && at("tasks") < at("spent_usd"),
        "{text}"
    );
    // A directory where a file must go: the rest is still written.
    std::fs::remove_file(out.join("outputs/b.md")).unwrap();
    std::fs::create_dir_all(out.join("outputs/b.md/x")).unwrap();
    std::fs::remove_file(out.join("results.json")).unwrap();
    let err = ctx_run::out_dir::write(&out, &outcome.report).unwrap_err();
    assert_eq!(err.more, 0);
    assert!(err.to_string().contains("b.md"), "{err}");
    assert!(out.join("results.json").is_file());
}

/// A judge check needs a model: a dry run of a plan with one is refused
/// before anything starts (no run directory is made), as `ctx run` refuses
/// it, instead of passing over the check.
#[test]
fn a_judge_check_on_the_dry_run_engine_is_refused_before_anything_starts() {
    let mut plan = plan();
    plan.sub_tasks[1].checks = serde_json::from_str(r#"[{"judge": "Does it say b?"}]"#).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = RunRoot::new(dir.path().join("runs"));
    let err = RunSession::start(
        plan,
        Arc::new(DryRunEngine),
        durable(&root, Start::New, false),
    )
    .err()
    .unwrap();
    match &err {
        RunError::Unjudgeable { engine, checks } => {
            assert_eq!(engine, "dry-run");
            assert_eq!(
                checks,
                &[(
                    Some("b".to_string()),
                    "sub_tasks[1].checks[0].judge".to_string()
                )]
            );
        }
        other => panic!("{other}"),
    }
    assert!(!dir.path().join("runs").exists(), "{err}");
}

/// Keeps the `prompt_cache_key` of every request it answers.
#[derive(Default)]
struct KeyRecorder {
    keys: std::sync::Mutex<Vec<(String, Option<String>)>>,
}

impl InferenceEngine for KeyRecorder {
    fn name(&self) -> &str {
        "key-recorder"
    }
    fn infer<'a>(
        &'a self,
        request: &'a ctx_engine::InferenceRequest,
    ) -> ctx_engine::BoxFuture<'a, Result<ctx_engine::InferenceResponse, ctx_engine::EngineError>>
    {
        Box::pin(async move {
            let key = request.params.extra.get("prompt_cache_key");
            self.keys.lock().unwrap().push((
                request.task_id.clone(),
                key.and_then(|k| k.as_str()).map(String::from),
            ));
            Ok(ctx_engine::InferenceResponse {
                output: "ok".into(),
                ..Default::default()
            })
        })
    }
}

/// The keys a run of a plan with a secret `PIN` (in an entity every task
/// shares, and in a system prompt) sends, with `pin` given.
fn keys_with_pin(pin: &str) -> Vec<(String, Option<String>)> {
    let plan: Plan = serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "config": {"cache_key": "auto"},
        "variables": [{"name": "PIN", "secret": true, "class": "trusted"}],
        "entities": [{"name": "Door", "grounded_value": "opens with {{PIN}}"}],
        "sub_tasks": [
            {"id": "a", "description": "A", "entity_context": [{"entity_name": "Door"}],
             "tool_or_prompt": {"name": "inference", "params": {
                 "prompt": "Say a.", "system": "Never say {{PIN}}."}}},
            {"id": "b", "description": "B", "entity_context": [{"entity_name": "Door"}],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b."}}}
        ]
    }))
    .unwrap();
    let given = std::collections::BTreeMap::from([("PIN".to_string(), pin.to_string())]);
    let filled = ctx_prompt::plan_fill::fill_plan(&plan, &given, None).unwrap();
    let inputs = ctx_run::inputs::recorded(&plan, &given, None, &filled.values);
    let engine = Arc::new(KeyRecorder::default());
    let settings = RunSettings {
        inputs,
        ..RunSettings::default()
    };
    let outcome = runtime()
        .block_on(run_plan(filled.plan, engine.clone(), settings))
        .unwrap();
    assert!(outcome.report.all_completed());
    let mut keys = std::mem::take(&mut *engine.keys.lock().unwrap());
    keys.sort();
    keys
}

/// A `prompt_cache_key` is sent where the prompt is not (request
/// parameters, which logs that drop messages keep): a run computes it
/// without its secrets' texts, so runs that differ only in a secret send
/// the same keys, and a guess of the secret cannot be tested against one.
#[test]
fn a_runs_prompt_cache_keys_hold_nothing_of_its_secrets() {
    let first = keys_with_pin("4812");
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|(_, k)| k.is_some()), "{first:?}");
    assert_eq!(first, keys_with_pin("9907"));
}
