//! `cargo run -p ctx-run --example run_plan -- PLAN OUT_DIR`: what `ctx
//! run PLAN --run-dir OUT_DIR/run --out OUT_DIR` computes, on the dry-run
//! engine; `ctx run --resume OUT_DIR/run` then reuses every task.

use std::{path::PathBuf, sync::Arc};

use ctx_deps::ExecutorOptions;
use ctx_run::run_costs::{EngineCosts, cost_options};
use ctx_run::{ResultsJson, RunSettings, RunStore, Start};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(plan_path), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: run_plan PLAN OUT_DIR".into());
    };
    let plan = ctx_checks::load_valid_plan(&plan_path)?;
    // The dry run calls no model: every task costs $0, as `ctx run` says.
    let free = EngineCosts {
        free: true,
        ..EngineCosts::default()
    };
    let cost = cost_options(&plan, &free, ctx_cost::PriceBook::new(), None)?;
    let settings = RunSettings {
        executor: ExecutorOptions {
            cost: Some(cost),
            ..ExecutorOptions::default()
        },
        store: RunStore::Sqlite {
            root: ctx_store_sqlite::RunRoot::new(ctx_store_sqlite::DEFAULT_ROOT),
            start: Start::NewIn(out.join("run")),
            cache: false,
        },
        plan_source: plan_path.to_str().map(str::to_string),
        ..RunSettings::default()
    };
    let outcome = ctx_run::run_plan(plan, Arc::new(ctx_deps::DryRunEngine), settings).await?;
    let json = ctx_run::json_text(&ResultsJson::of(&outcome.report))?;
    ctx_run::write_atomic(&out.join("results.json"), json.as_bytes())?;
    Ok(())
}
