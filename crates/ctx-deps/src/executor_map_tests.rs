//! The executor's map tasks: expansion when the source is done, items as
//! tasks of their own, the join within `allow_failures`, the reduce's one
//! block of items, and a source that gives no list.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use ctx_engine::{BoxFuture, EngineError, InferenceEngine, InferenceRequest, InferenceResponse};
use ctx_model::{MapSpec, Plan, TaskStatus};
use ctx_store::{ExecutionStore, MemoryStore};

use super::*;
use crate::options::ExecutorOptions;

/// Answers each task with a scripted output (else `out {id}`), fails the
/// ids asked, and records every prompt.
#[derive(Default)]
struct Scripted {
    outputs: BTreeMap<String, String>,
    /// When set, every task but those in `outputs` answers this many `w `.
    words: Option<usize>,
    fail: HashSet<String>,
    prompts: Mutex<Vec<(String, String)>>,
    /// The engine's label (its model defaults), else its name.
    label: Option<String>,
}

impl Scripted {
    /// The ids the engine was asked for so far, sorted.
    fn asked(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .prompts
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }
}

impl InferenceEngine for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn label(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.name().to_string())
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let id = request.task_id.clone();
            self.prompts
                .lock()
                .unwrap()
                .push((id.clone(), request.prompt.clone()));
            if self.fail.contains(&id) {
                return Err(EngineError {
                    message: format!("{id} broke"),
                    attempts: Vec::new(),
                });
            }
            Ok(InferenceResponse {
                output: self
                    .outputs
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| match self.words {
                        Some(n) => "w ".repeat(n),
                        None => format!("out {id}"),
                    }),
                ..InferenceResponse::default()
            })
        })
    }
}

/// `src → scan (map over src at /repos) → report`, and `other`, which
/// `scan` depends on too.
fn map_plan(allow_failures: usize, max_items: usize) -> Plan {
    let mut plan = ctx_test_support::plan(&[
        ("src", &[]),
        ("other", &[]),
        ("scan", &["src", "other"]),
        ("report", &["scan"]),
    ]);
    let scan = &mut plan.sub_tasks[2];
    scan.tool_or_prompt.params.prompt =
        "Rate <untrusted-content>{{REPO}}</untrusted-content>.".into();
    scan.map = Some(MapSpec {
        over: "src".into(),
        pointer: Some("/repos".into()),
        item: "REPO".into(),
        max_items: Some(max_items),
        allow_failures,
        variable_value: None,
    });
    plan
}

async fn run(plan: Plan, engine: Arc<Scripted>, concurrency: usize) -> RunReport {
    let store = Arc::new(MemoryStore::new());
    let opts = ExecutorOptions {
        concurrency,
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(plan, engine, store.clone(), opts).unwrap();
    let report = exec.run().await.unwrap();
    // Every result, items too, is in the store.
    for r in &report.results {
        let stored = store.get_by_task_id(&r.task_id).unwrap().unwrap();
        assert_eq!(stored.status, r.status, "{}", r.task_id);
    }
    report
}

fn scripted(src: &str, fail: &[&str]) -> Arc<Scripted> {
    Arc::new(Scripted {
        outputs: [("src".to_string(), src.to_string())].into(),
        fail: fail.iter().map(|s| s.to_string()).collect(),
        ..Scripted::default()
    })
}

fn statuses(report: &RunReport) -> Vec<(String, TaskStatus)> {
    report
        .results
        .iter()
        .map(|r| (r.task_id.clone(), r.status))
        .collect()
}

#[tokio::test]
async fn items_run_as_tasks_and_the_reduce_gets_them_in_order() {
    let engine = scripted(r#"{"repos": ["a/b", "c/d", "e/f"]}"#, &[]);
    for concurrency in [1, 4] {
        engine.prompts.lock().unwrap().clear();
        let report = run(map_plan(0, 5), engine.clone(), concurrency).await;
        let ids: Vec<String> = statuses(&report).into_iter().map(|(id, _)| id).collect();
        assert_eq!(
            ids,
            [
                "src", "other", "scan", "scan[0]", "scan[1]", "scan[2]", "report"
            ]
        );
        assert!(report.all_completed(), "{report:#?}");
        let prompts = engine.prompts.lock().unwrap().clone();
        let prompt_of = |id: &str| {
            prompts
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, p)| p.clone())
                .unwrap()
        };
        // The map task itself calls no engine.
        assert!(prompts.iter().all(|(id, _)| id != "scan"));
        let item = prompt_of("scan[1]");
        assert!(
            item.contains("<untrusted-content>c/d</untrusted-content>"),
            "{item}"
        );
        // The item gets `other`'s output, never the whole list.
        assert!(
            item.contains("out other") && !item.contains("a/b"),
            "{item}"
        );
        let reduce = prompt_of("report");
        let at = |s: &str| reduce.find(s).unwrap_or_else(|| panic!("{s} in {reduce}"));
        assert!(at("### Task scan[0]") < at("### Task scan[1]"));
        assert!(at("### Task scan[1]") < at("### Task scan[2]"));
        assert!(!reduce.contains("3 items"), "{reduce}");
    }
}

#[tokio::test]
async fn a_failed_item_fails_the_map_unless_allowed() {
    let src = r#"{"repos": ["a", "b", "c"]}"#;
    let report = run(map_plan(0, 5), scripted(src, &["scan[1]"]), 2).await;
    let s: BTreeMap<String, TaskStatus> = statuses(&report).into_iter().collect();
    assert_eq!(s["scan[0]"], TaskStatus::Completed);
    assert_eq!(s["scan[1]"], TaskStatus::Failed);
    assert_eq!(s["scan"], TaskStatus::Failed);
    assert_eq!(s["report"], TaskStatus::Skipped);

    let engine = scripted(src, &["scan[1]"]);
    let report = run(map_plan(1, 5), engine.clone(), 2).await;
    let s: BTreeMap<String, TaskStatus> = statuses(&report).into_iter().collect();
    assert_eq!(s["scan"], TaskStatus::Completed);
    assert_eq!(s["report"], TaskStatus::Completed);
    let prompts = engine.prompts.lock().unwrap();
    let reduce = &prompts.iter().find(|(i, _)| i == "report").unwrap().1;
    assert!(
        reduce.contains("(this item failed: scan[1] broke)"),
        "{reduce}"
    );
}

#[tokio::test]
async fn an_empty_list_completes_and_the_reduce_still_runs() {
    let report = run(map_plan(0, 5), scripted(r#"{"repos": []}"#, &[]), 2).await;
    assert!(report.all_completed(), "{report:#?}");
    assert_eq!(report.results.len(), 4);
}

#[tokio::test]
async fn a_source_without_a_list_fails_the_map_naming_the_pointer() {
    for (src, found) in [
        (r#"{"repos": {"a": 1}}"#, "reaches an object, not an array"),
        ("not json", "is not JSON"),
        (
            r#"{"repos": [1, 2, 3]}"#,
            "3 items, more than max_items (2)",
        ),
    ] {
        let report = run(map_plan(0, 2), scripted(src, &[]), 2).await;
        let scan = report.results.iter().find(|r| r.task_id == "scan").unwrap();
        assert_eq!(scan.status, TaskStatus::Failed);
        let e = scan.error.as_deref().unwrap();
        assert!(
            e.starts_with(r#"map task `scan`: map over `src` at pointer "/repos": "#),
            "{e}"
        );
        assert!(e.contains(found), "{e}");
        let report_task = report
            .results
            .iter()
            .find(|r| r.task_id == "report")
            .unwrap();
        assert_eq!(report_task.status, TaskStatus::Skipped);
    }
}

#[tokio::test]
async fn a_resumed_map_reruns_only_the_items_whose_content_changed() {
    let store = Arc::new(MemoryStore::new());
    let first = scripted(r#"{"repos": ["a", "b", "c"]}"#, &["scan[1]"]);
    let opts = ExecutorOptions {
        concurrency: 2,
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(map_plan(0, 5), first, store.clone(), opts.clone()).unwrap();
    let report = exec.run().await.unwrap();
    assert_eq!(status_of(&report, "scan"), TaskStatus::Failed);

    // The list changed: `c` moved to the front, `a` to the middle, `b`
    // (which failed) is gone and `x` is new. The source runs again.
    let second = scripted(r#"{"repos": ["c", "a", "x"]}"#, &[]);
    let opts = ExecutorOptions {
        reuse_completed: true,
        force_rerun: ["src".to_string()].into(),
        ..opts
    };
    let exec = Executor::new(map_plan(0, 5), second.clone(), store.clone(), opts).unwrap();
    let report = exec.run().await.unwrap();
    assert!(report.all_completed(), "{report:#?}");
    assert_eq!(second.asked(), ["report", "scan[2]", "src"]);
    // A moved item keeps its result under its new id.
    let moved = store.get_by_task_id("scan[0]").unwrap().unwrap();
    assert_eq!(moved.output, "out scan[2]");
    assert!(report.reused.contains(&"scan[1]".to_string()));
}

fn status_of(report: &RunReport, id: &str) -> TaskStatus {
    report
        .results
        .iter()
        .find(|r| r.task_id == id)
        .map(|r| r.status)
        .unwrap()
}

#[tokio::test]
async fn a_resume_with_the_same_list_reuses_the_reduce_and_a_changed_one_runs_it() {
    let store = Arc::new(MemoryStore::new());
    let resume = |src: &str, reuse: bool| {
        // The source's stored output is this session's list.
        let mut listed = ctx_model::TaskExecutionResult::new("src", TaskStatus::Completed);
        listed.output = src.to_string();
        store.store(listed).unwrap();
        let engine = scripted(src, &[]);
        let opts = ExecutorOptions {
            reuse_completed: reuse,
            ..ExecutorOptions::default()
        };
        let exec = Executor::new(map_plan(0, 5), engine.clone(), store.clone(), opts).unwrap();
        async move {
            let report = exec.run().await.unwrap();
            assert!(report.all_completed(), "{report:#?}");
            let mut called = engine.asked();
            called.retain(|id| id != "src");
            called
        }
    };
    resume(r#"{"repos": ["a", "b"]}"#, false).await;
    assert_eq!(
        resume(r#"{"repos": ["a", "b"]}"#, true).await,
        Vec::<String>::new()
    );
    // One item fewer: every item is reused, but the reduce must run.
    assert_eq!(resume(r#"{"repos": ["a"]}"#, true).await, ["report"]);
    // The same shorter list again: `scan[1]`, left stored by the longer
    // list, is not the run's, and nothing runs (before the map recorded
    // its count, the stale item made the reduce run on every resume).
    assert_eq!(
        resume(r#"{"repos": ["a"]}"#, true).await,
        Vec::<String>::new()
    );
    let scan = store.get_by_task_id("scan").unwrap().unwrap();
    assert_eq!(scan.metadata.map_items, Some(1));
    assert!(store.get_by_task_id("scan[1]").unwrap().is_some(), "kept");
    // Moved (`b` is still stored from the first list): both items are
    // reused under their new ids, and the reduce runs.
    assert_eq!(resume(r#"{"repos": ["b", "a"]}"#, true).await, ["report"]);
    assert_eq!(
        resume(r#"{"repos": ["b", "a"]}"#, true).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_reduce_stored_before_its_items_changed_runs_again() {
    // A session changed an item and died after the map joined, before
    // the reduce stored its result: the reduce stored is the one that
    // read the old item. The next resume sees every item in place, but
    // what the reduce would receive is not what it received: it runs.
    let store = Arc::new(MemoryStore::new());
    resumed_items(&store, scripted(r#"{"repos": ["a", "b"]}"#, &[])).await;
    let old_report = store.get_by_task_id("report").unwrap().unwrap();
    let opts = ExecutorOptions {
        reuse_completed: true,
        force_rerun: ["src".to_string()].into(),
        ..ExecutorOptions::default()
    };
    let changed = Arc::new(Scripted {
        outputs: [
            ("src".to_string(), r#"{"repos": ["a", "c"]}"#.to_string()),
            ("scan[1]".to_string(), "about c".to_string()),
        ]
        .into(),
        ..Scripted::default()
    });
    let exec = Executor::new(map_plan(0, 5), changed, store.clone(), opts).unwrap();
    assert!(exec.run().await.unwrap().all_completed());
    store.store(old_report).unwrap();
    let engine = scripted(r#"{"repos": ["a", "c"]}"#, &[]);
    let opts = ExecutorOptions {
        reuse_completed: true,
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(map_plan(0, 5), engine.clone(), store.clone(), opts).unwrap();
    let report = exec.run().await.unwrap();
    assert!(
        report.reused.contains(&"scan[1]".to_string()),
        "{report:#?}"
    );
    assert_eq!(engine.asked(), ["report"]);
}

#[tokio::test]
async fn an_items_llm_summary_is_written_for_the_reduce_and_reaches_it() {
    // Items answer 300 words, over `max_output_length`; the reduce takes
    // its dependencies under `llm`, focused on itself. Each item's summary
    // is written for `report` (the map task only joins), and the reduce's
    // prompt holds the summaries, not the long outputs.
    let mut plan = map_plan(0, 5);
    plan.config.dependency.max_output_length = Some(100);
    plan.config.dependency.summary_focus = ctx_model::SummaryFocus::Dependent;
    plan.sub_tasks[3].dependency.summarize_strategy = Some(ctx_model::SummarizeStrategy::Llm);
    let engine = Arc::new(Scripted {
        outputs: [
            ("src".to_string(), r#"{"repos": ["a", "b"]}"#.to_string()),
            ("other".to_string(), "short".to_string()),
        ]
        .into(),
        words: Some(300),
        ..Scripted::default()
    });
    let report = run(plan, engine.clone(), 2).await;
    assert!(report.all_completed(), "{report:#?}");
    for id in ["scan[0]", "scan[1]"] {
        let r = report.results.iter().find(|r| r.task_id == id).unwrap();
        let summary = r.metadata.summary.as_ref().expect("a summary record");
        assert!(summary.text_for("report").is_some(), "{id}: {summary:?}");
    }
    let prompts = engine.prompts.lock().unwrap();
    let reduce = &prompts
        .iter()
        .rev()
        .find(|(id, _)| id == "report")
        .unwrap()
        .1;
    assert!(reduce.contains("### Task scan[0]"), "{reduce}");
    assert!(!reduce.contains(&"w ".repeat(300)), "{reduce}");
}

/// Bounds every task, items included, at 3 picodollars; each call costs
/// 1 (`call_cost`), so a task settles at 1.
struct ThreeEach;

impl crate::CostModel for ThreeEach {
    fn bound(&self, _: &ctx_model::SubTask) -> Option<ctx_cost::Usd> {
        Some(ctx_cost::Usd::from_picos(3))
    }
    fn max_tokens(&self, _: &ctx_model::SubTask) -> Option<u64> {
        None
    }
    fn call_cost(&self, _: &ctx_model::SubTask, _: &ctx_cost::Usage) -> Option<ctx_cost::Usd> {
        Some(ctx_cost::Usd::from_picos(1))
    }
}

#[tokio::test]
async fn under_a_budget_each_item_reserves_its_own_bound_and_the_budget_holds() {
    // src, other, three items and the report: six calls of 1, each
    // reserving 3. A budget of 8 runs them all one at a time (the last
    // call reserves 3 with 5 spent); the map task reserves nothing.
    let run_with = |max: u128| async move {
        let engine = scripted(r#"{"repos": ["a", "b", "c"]}"#, &[]);
        let opts = ExecutorOptions {
            concurrency: 1,
            cost: Some(crate::CostOptions {
                model: Arc::new(ThreeEach),
                max_cost: Some(ctx_cost::Usd::from_picos(max)),
                already_spent: ctx_cost::Usd::ZERO,
                cut_output_at_max_tokens: false,
                shared_budget: None,
            }),
            ..ExecutorOptions::default()
        };
        let store = Arc::new(MemoryStore::new());
        let exec = Executor::new(map_plan(0, 5), engine, store, opts).unwrap();
        exec.run().await.unwrap()
    };
    let report = run_with(8).await;
    assert!(report.all_completed(), "{report:#?}");
    let cost = report.cost.as_ref().unwrap();
    assert_eq!(cost.spent, ctx_cost::Usd::from_picos(6), "{cost:?}");
    // A budget of 4: src and other (1 each, 2 spent) leave 2, below an
    // item's bound: the items are skipped as over budget, and nothing is
    // spent past it.
    let report = run_with(4).await;
    assert_eq!(
        status_of(&report, "scan"),
        TaskStatus::Failed,
        "{report:#?}"
    );
    let cost = report.cost.as_ref().unwrap();
    assert!(cost.spent <= ctx_cost::Usd::from_picos(4), "{cost:?}");
}

/// Runs the map plan on `engine` as a resume over `store` (completed
/// results reused), and returns the items the engine was asked, sorted.
async fn resumed_items(store: &Arc<MemoryStore>, engine: Arc<Scripted>) -> Vec<String> {
    let opts = ExecutorOptions {
        reuse_completed: true,
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(map_plan(0, 5), engine.clone(), store.clone(), opts).unwrap();
    let report = exec.run().await.unwrap();
    assert!(report.all_completed(), "{report:#?}");
    let mut called = engine.asked();
    called.retain(|id| id.starts_with("scan["));
    called
}

#[tokio::test]
async fn equal_items_each_take_a_stored_result_on_resume() {
    // Two equal items have one content hash: a resume reuses both, not
    // one of them.
    let store = Arc::new(MemoryStore::new());
    let list = r#"{"repos": ["a", "a", "b"]}"#;
    assert_eq!(
        resumed_items(&store, scripted(list, &[])).await,
        ["scan[0]", "scan[1]", "scan[2]"]
    );
    assert_eq!(
        resumed_items(&store, scripted(list, &[])).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_resume_on_another_engine_runs_every_item_again() {
    // The items' content is the same, but an engine with other model
    // defaults answers them: as for a plain task, nothing it did not
    // answer is reused.
    let store = Arc::new(MemoryStore::new());
    let on = |label: &str| {
        Arc::new(Scripted {
            outputs: [("src".to_string(), r#"{"repos": ["a", "b"]}"#.to_string())].into(),
            label: Some(label.to_string()),
            ..Scripted::default()
        })
    };
    assert_eq!(
        resumed_items(&store, on("m1")).await,
        ["scan[0]", "scan[1]"]
    );
    assert_eq!(resumed_items(&store, on("m1")).await, Vec::<String>::new());
    assert_eq!(
        resumed_items(&store, on("m2")).await,
        ["scan[0]", "scan[1]"]
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        ctx_test_support::proptest_cases(24)
    ))]

    /// Whatever the items and their outputs, no prompt sent to the engine
    /// is over the cap: each item's own (an item too large for it fails
    /// before any call), and the reduce's, whose block of items shrinks.
    #[test]
    fn every_item_prompt_and_the_reduce_prompt_stay_under_the_cap(
        items in proptest::collection::vec(("[a-z ]{0,40}", 0usize..400), 0..8),
        words in 0usize..600,
        cap in 150usize..900,
    ) {
        let list: Vec<String> = items.iter().map(|(s, n)| format!("{s}{}", "z ".repeat(*n))).collect();
        let src = serde_json::json!({ "repos": list }).to_string();
        let mut plan = map_plan(list.len(), 10);
        plan.config.max_prompt_tokens = cap;
        let engine = Arc::new(Scripted {
            outputs: [("src".to_string(), src)].into(),
            words: Some(words),
            ..Scripted::default()
        });
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let report = rt.block_on(run(plan.clone(), engine.clone(), 3));
        let counter = ctx_tokens::TokenizerExt::counter(
            ctx_prompt::tokenizer_for_task(&plan, &plan.sub_tasks[0]).unwrap(),
        );
        for (id, prompt) in engine.prompts.lock().unwrap().iter() {
            let n = counter.count(prompt);
            proptest::prop_assert!(n <= cap, "{id}: {n} tokens over {cap}");
        }
        // Every item ended (the map allows every failure), so the reduce ran
        // or failed on its own cap, never skipped.
        let reduce = report.results.iter().find(|r| r.task_id == "report").unwrap();
        proptest::prop_assert!(reduce.status != TaskStatus::Skipped, "{reduce:?}");
    }
}

#[tokio::test]
async fn the_expansion_is_reported_with_its_item_count() {
    let engine = scripted(r#"{"repos": ["a", "b"]}"#, &[]);
    let exec = Executor::new(
        map_plan(0, 5),
        engine,
        Arc::new(MemoryStore::new()),
        ExecutorOptions::default(),
    )
    .unwrap();
    let mut events = Vec::new();
    exec.run_with(std::future::pending(), |e| events.push(e.clone()))
        .await
        .unwrap();
    let expanded = ProgressEvent::Expanded {
        task_id: "scan".into(),
        items: 2,
    };
    let at = |e: &ProgressEvent| events.iter().position(|x| x == e).unwrap();
    let started = |id: &str| ProgressEvent::Started { task_id: id.into() };
    assert!(at(&started("scan")) < at(&expanded));
    assert!(at(&expanded) < at(&started("scan[0]")));
}
