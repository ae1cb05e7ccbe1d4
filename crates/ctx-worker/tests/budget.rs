//! A budget (`--max-cost`) on the shared store, as library sessions and
//! workers against a real PostgreSQL (scripts/postgres.sh; `cargo xtask
//! test` starts it): every claim reserves its task's high end in the
//! run's row before the engine runs and its commit settles it, so what
//! several workers spend together never passes the budget; a task that
//! can never fit is skipped with the budget's reason, and the run ends.
//! Without `CTX_TEST_POSTGRES_URL` each test skips with a message, and
//! fails when `CI` is set.

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

use std::sync::Arc;
use std::time::Duration;

use ctx_cost::Usd;
use ctx_deps::{ExecutorOptions, InferenceEngine};
use ctx_engine_command::CommandEngine;
use ctx_model::{Plan, TaskStatus};
use ctx_run::run_costs::{EngineCosts, RunPricing};
use ctx_worker::{SharedEvent, SharedSession, SharedSettings, Worker, WorkerEvent};

/// `n` independent tasks on model `m1` (priced by the plan), each capped
/// at 16 completion tokens.
fn plan(n: usize) -> Plan {
    let ids: Vec<String> = (0..n).map(|i| format!("t{i:02}")).collect();
    let pairs: Vec<(&str, &[&str])> = ids.iter().map(|i| (i.as_str(), &[][..])).collect();
    let mut plan = ctx_test_support::plan(&pairs);
    for t in &mut plan.sub_tasks {
        t.tool_or_prompt.params.model = Some("m1".into());
        t.tool_or_prompt.params.max_tokens = Some(16);
    }
    plan.config.prices =
        serde_json::from_value(serde_json::json!({"m1": {"input": 1, "output": 2}})).unwrap();
    plan
}

/// A command that takes a moment, as `ctx worker --command` prices it.
fn command(max_cost: Option<Usd>) -> (Arc<dyn InferenceEngine>, RunPricing) {
    let pricing = RunPricing {
        engine: EngineCosts {
            attempts: 1,
            cuts_at_max_tokens: true,
            priced_on_request: true,
            ..EngineCosts::default()
        },
        max_cost,
        ..RunPricing::default()
    };
    let engine = Arc::new(CommandEngine::new(
        "cat >/dev/null; sleep 0.2; printf 'hello world'",
    ));
    (engine, pricing)
}

/// A task's high end under `pricing` (every task of [`plan`] has the same).
fn high_end(pricing: &RunPricing, plan: &Plan) -> Usd {
    let options = pricing.cost_options(plan).unwrap();
    options.model.bound(&plan.sub_tasks[0]).unwrap()
}

fn settings(url: &str, pricing: RunPricing, concurrency: usize) -> SharedSettings {
    SharedSettings {
        url: url.to_string(),
        resume: None,
        rerun: Vec::new(),
        work_here: true,
        executor: ExecutorOptions {
            concurrency,
            ..ExecutorOptions::default()
        },
        pricing,
        plan_source: Some("plan.json".into()),
        cache: None,
        out: None,
        inputs: None,
        publish: None,
        alert_at: Vec::new(),
        approval_wait: None,
    }
}

/// A session on `plan` working here with four slots, and its run's id.
fn start(
    rt: &tokio::runtime::Runtime,
    url: &str,
    plan: Plan,
    engine: &Arc<dyn InferenceEngine>,
    pricing: RunPricing,
) -> (SharedSession, String) {
    let session = rt
        .block_on(SharedSession::start(
            plan,
            Arc::clone(engine),
            settings(url, pricing, 4),
        ))
        .unwrap();
    let run = session.run_id().to_string();
    (session, run)
}

/// Room for three high ends at a time, twelve tasks, and two workers of
/// four slots: tasks wait for the budget instead of running past it, each
/// settles at its cost, and all of them run in the end (each costs far
/// less than its high end). What the run holds at the end is exactly
/// what it spent, and never more than the budget.
#[test]
fn workers_never_spend_past_a_shared_budget_and_wait_for_room() {
    let Some(url) = pg::fresh_db("budget_wait") else {
        return;
    };
    let rt = pg::runtime();
    let p = plan(12);
    let (engine, probe) = command(Some(Usd::ONE_DOLLAR));
    let high = high_end(&probe, &p);
    let budget = high.saturating_mul(3).saturating_add(Usd::from_picos(1));
    let (_, pricing) = command(Some(budget));
    let (session, run) = start(&rt, &url, p, &engine, pricing);
    let waits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let helper = {
        let store = ctx_worker::runs::open(&url)
            .unwrap()
            .with_engine(&engine.label());
        let worker = Worker {
            store,
            engine: Arc::clone(&engine),
            options: ExecutorOptions::default(),
            pricing: command(None).1,
            run: Some(run.clone()),
            worker: "helper".into(),
            concurrency: 4,
            lease: Duration::from_secs(30),
            until_idle: true,
            first_run_wait: Duration::ZERO,
            poll: Duration::from_millis(50),
            approval_wait: None,
        };
        let waits = Arc::clone(&waits);
        rt.spawn(async move {
            worker
                .run(std::future::pending::<()>(), |e| {
                    if let WorkerEvent::WaitingForBudget { .. } = e {
                        waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                })
                .await
                .unwrap()
        })
    };
    let mut waited_here = 0;
    let outcome = rt
        .block_on(session.execute_with(std::future::pending::<()>(), |e| {
            if let SharedEvent::Claim(WorkerEvent::WaitingForBudget { .. }) = e {
                waited_here += 1;
            }
        }))
        .unwrap();
    rt.block_on(helper).unwrap();
    let report = outcome.report;
    assert!(report.all_completed(), "{report:#?}");
    let spent: Usd = report
        .results
        .iter()
        .map(|r| r.metadata.cost_usd.expect("priced"))
        .sum();
    assert!(spent <= budget, "spent {spent} of {budget}");
    let store = ctx_worker::runs::open(&url).unwrap();
    let (stored_budget, held) = rt.block_on(store.budget(&run)).unwrap().unwrap();
    assert_eq!(stored_budget, budget);
    assert_eq!(held, spent, "every reservation settled at its task's cost");
    // Eight slots, room for three high ends: claims waited for room.
    let waited = waited_here + waits.load(std::sync::atomic::Ordering::Relaxed);
    assert!(waited > 0, "no claim waited for the budget");
}

/// A budget smaller than one task's high end: no task can ever fit, so
/// each is skipped with the budget's reason (naming what it needs and
/// what is left), nothing is spent, and the run ends instead of waiting.
#[test]
fn a_task_that_can_never_fit_is_skipped_and_the_run_ends() {
    let Some(url) = pg::fresh_db("budget_skip") else {
        return;
    };
    let rt = pg::runtime();
    let p = plan(3);
    let (engine, probe) = command(Some(Usd::ONE_DOLLAR));
    let high = high_end(&probe, &p);
    let budget = Usd::from_picos(high.picos() - 1);
    let (_, pricing) = command(Some(budget));
    let session = rt
        .block_on(SharedSession::start(p, engine, settings(&url, pricing, 2)))
        .unwrap();
    let outcome = rt
        .block_on(session.execute_with(std::future::pending::<()>(), |_| {}))
        .unwrap();
    for r in &outcome.report.results {
        assert_eq!(r.status, TaskStatus::Skipped, "{r:#?}");
        let error = r.error.as_deref().unwrap_or_default();
        assert!(
            error.starts_with("budget: needs up to") && ctx_deps::is_budget_skip(r),
            "{error}"
        );
        assert_eq!(r.metadata.cost_usd, None);
    }
}

/// A map's items reserve one by one, as a local run's do: each item is
/// claimed and reserves its own high end, so a budget with room for the
/// source and about two items runs a few of the six and skips the rest
/// with the budget's reason; what the run holds at the end is what it
/// spent, within the budget.
#[test]
fn a_maps_items_reserve_one_by_one() {
    let Some(url) = pg::fresh_db("budget_map") else {
        return;
    };
    let rt = pg::runtime();
    // Prompts near the cap, so each call costs near its high end.
    let long = |p: &str| format!("{p}{}", " Be thorough.".repeat(15));
    let mut p: Plan = serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "config": {"prices": {"m1": {"input": 1, "output": 2}}},
        "sub_tasks": [
            {"id": "src", "description": "The list",
             "tool_or_prompt": {"name": "inference",
               "params": {"prompt": long("List them."), "model": "m1", "max_tokens": 64}}},
            {"id": "scan", "description": "One", "dependencies": ["src"],
             "map": {"over": "src", "pointer": "/xs", "as": "X", "max_items": 20},
             "tool_or_prompt": {"name": "inference",
               "params": {"prompt": long("Rate {{X}}."), "model": "m1", "max_tokens": 16}}}
        ]
    }))
    .unwrap();
    p.config.max_prompt_tokens = 64;
    let (_, probe) = command(Some(Usd::ONE_DOLLAR));
    let options = probe.cost_options(&p).unwrap();
    let source = options.model.bound(&p.sub_tasks[0]).unwrap();
    // An item's high end: a task like the map's template with its value
    // (the cap bounds the prompt).
    let mut single = p.clone();
    single.sub_tasks.truncate(1);
    single.sub_tasks[0].tool_or_prompt.params.prompt = long("Rate 1.");
    single.sub_tasks[0].tool_or_prompt.params.max_tokens = Some(16);
    let item = probe
        .cost_options(&single)
        .unwrap()
        .model
        .bound(&single.sub_tasks[0])
        .unwrap();
    let budget = source
        .saturating_add(Usd::from_picos(item.picos() * 5 / 2))
        .saturating_add(Usd::from_picos(1));
    let engine: Arc<dyn InferenceEngine> = Arc::new(CommandEngine::new(
        "cat >/dev/null; case \"$CTX_TASK_ID\" in src) printf '{\"xs\":[1,2,3,4,5,6]}' ;; \
         *) sleep 0.1; yes hello | head -c 400 ;; esac",
    ));
    let (_, pricing) = command(Some(budget));
    let (session, run) = start(&rt, &url, p, &engine, pricing);
    let outcome = rt
        .block_on(session.execute_with(std::future::pending::<()>(), |_| {}))
        .unwrap();
    let items: Vec<_> = outcome
        .report
        .results
        .iter()
        .filter(|r| r.task_id.starts_with("scan["))
        .collect();
    assert_eq!(items.len(), 6, "{:#?}", outcome.report.results);
    let ran = items
        .iter()
        .filter(|r| r.status == TaskStatus::Completed)
        .count();
    let skipped = items.iter().filter(|r| ctx_deps::is_budget_skip(r)).count();
    assert!(ran >= 2 && skipped >= 1 && ran + skipped == 6, "{items:#?}");
    let spent: Usd = outcome
        .report
        .results
        .iter()
        .filter_map(|r| r.metadata.cost_usd)
        .sum();
    let store = ctx_worker::runs::open(&url).unwrap();
    let (_, held) = rt.block_on(store.budget(&run)).unwrap().unwrap();
    assert_eq!(held, spent, "every item's reservation settled at its cost");
    assert!(spent <= budget, "spent {spent} of {budget}");
}
