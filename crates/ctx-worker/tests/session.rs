//! A shared run as a library session against a real PostgreSQL (started
//! by scripts/postgres.sh; `cargo xtask test` does it): registered, worked
//! on here, its report read back, every task priced as a local run prices
//! it. Without `CTX_TEST_POSTGRES_URL` each test skips with a message,
//! and fails when `CI` is set.

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

use std::sync::Arc;

use ctx_deps::{ExecutorOptions, InferenceEngine};
use ctx_engine_command::CommandEngine;
use ctx_model::Plan;
use ctx_run::run_costs::{EngineCosts, RunPricing};
use ctx_worker::{SharedEvent, SharedSession, SharedSettings};

/// a → b and c, each naming model `m1`; `config.prices` prices it when
/// `priced`.
fn plan(priced: bool) -> Plan {
    let mut plan = ctx_test_support::plan(&[("a", &[]), ("b", &["a"]), ("c", &[])]);
    for t in &mut plan.sub_tasks {
        t.tool_or_prompt.params.model = Some("m1".into());
    }
    if priced {
        plan.config.prices =
            serde_json::from_value(serde_json::json!({"m1": {"input": 1, "output": 2}})).unwrap();
    }
    plan
}

/// A local command, as `ctx worker --command` prices it: only when a price
/// is asked for.
fn command() -> (Arc<dyn InferenceEngine>, RunPricing) {
    let pricing = RunPricing {
        engine: EngineCosts {
            attempts: 1,
            cuts_at_max_tokens: true,
            priced_on_request: true,
            ..EngineCosts::default()
        },
        ..RunPricing::default()
    };
    let engine = Arc::new(CommandEngine::new("cat >/dev/null; printf 'hello world'"));
    (engine, pricing)
}

fn settings(url: &str, pricing: RunPricing, work_here: bool) -> SharedSettings {
    SharedSettings {
        url: url.to_string(),
        resume: None,
        rerun: Vec::new(),
        work_here,
        executor: ExecutorOptions::default(),
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

/// The bug this session was moved out of the CLI with: a shared run
/// recorded no `cost_usd`. Priced by the plan's `config.prices`, every
/// task has its cost, and the report sums them; unpriced, a command's
/// cost is unknown (null), as for a local run.
#[test]
fn a_shared_session_prices_each_task_by_its_plan() {
    let Some(url) = pg::fresh_db("worker_session_cost") else {
        return;
    };
    let rt = pg::runtime();
    for priced in [true, false] {
        let (engine, pricing) = command();
        let session = rt
            .block_on(SharedSession::start(
                plan(priced),
                engine,
                settings(&url, pricing, true),
            ))
            .unwrap();
        assert!(session.resumed().is_none());
        let run_id = session.run_id().to_string();
        let mut claims = 0;
        let outcome = rt
            .block_on(session.execute_with(std::future::pending::<()>(), |e| {
                if let SharedEvent::Claim(_) = e {
                    claims += 1;
                }
            }))
            .unwrap();
        assert!(outcome.stopped.is_none());
        assert!(outcome.round_trips > 0);
        assert_eq!(claims, 3, "run {run_id}: one event per committed claim");
        let report = outcome.report;
        assert!(report.all_completed(), "{report:?}");
        assert_eq!(report.order.len(), 3);
        let costs: Vec<_> = report.results.iter().map(|r| r.metadata.cost_usd).collect();
        let spent = report.cost.as_ref().unwrap().spent;
        if priced {
            assert!(
                costs
                    .iter()
                    .all(|c| c.is_some_and(|c| c > ctx_cost::Usd::ZERO)),
                "{costs:?}"
            );
            assert!(spent > ctx_cost::Usd::ZERO);
        } else {
            assert!(costs.iter().all(Option::is_none), "{costs:?}");
            assert_eq!(report.cost.unwrap().unknown, 3);
        }
    }
}

/// A follower (`work_here: false`) works on nothing: the run stays open
/// until a worker (here a second session's) finishes it, and the follower
/// is told each change of the counts and reads the same report.
#[test]
fn a_follower_is_told_each_change_until_a_worker_finishes_the_run() {
    let Some(url) = pg::fresh_db("worker_session_follow") else {
        return;
    };
    let rt = pg::runtime();
    let (engine, pricing) = command();
    let follower = rt
        .block_on(SharedSession::start(
            plan(true),
            Arc::clone(&engine),
            settings(&url, pricing.clone(), false),
        ))
        .unwrap();
    let run_id = follower.run_id().to_string();
    let worker = ctx_worker::Worker {
        store: ctx_worker::runs::open(&url).unwrap(),
        engine,
        options: ExecutorOptions::default(),
        pricing,
        run: Some(run_id.clone()),
        worker: ctx_worker::worker_id(),
        concurrency: 2,
        lease: ctx_worker::DEFAULT_LEASE,
        until_idle: true,
        first_run_wait: std::time::Duration::ZERO,
        poll: ctx_worker::DEFAULT_POLL,
        approval_wait: None,
    };
    let mut seen = Vec::new();
    let (followed, worked) = rt.block_on(async {
        tokio::join!(
            follower.execute_with(std::future::pending::<()>(), |e| {
                if let SharedEvent::Progress { counts, tasks } = e {
                    seen.push((counts.completed, counts.in_progress, counts.failed, tasks));
                }
            }),
            worker.run(std::future::pending::<()>(), |_| {})
        )
    });
    assert_eq!(worked.unwrap().committed, 3);
    let followed = followed.unwrap();
    assert!(followed.report.all_completed());
    assert_eq!(seen.last(), Some(&(3, 0, 0, 3)), "{seen:?}");
    // Told on change only: never the same counts twice in a row.
    assert!(seen.windows(2).all(|w| w[0] != w[1]), "{seen:?}");
    assert!(
        followed
            .report
            .results
            .iter()
            .all(|r| r.metadata.cost_usd.is_some())
    );
}
