//! `cargo run -p ctx-run --example run_plan -- PLAN OUT_DIR`: what `ctx
//! run PLAN --run-dir OUT_DIR/run --out OUT_DIR` computes, on the dry-run
//! engine; `ctx run --resume OUT_DIR/run` then reuses every task.
//!
//! The run is asked for as the CLI asks for it: settings given as
//! [`RunFlags`] (here in code, not from flags) settle, the plan is read
//! and overridden, and the one [`ctx_run::request::RunRequest`] both
//! stores take is resolved from them.

use std::{path::PathBuf, sync::Arc};

use ctx_run::ResultsJson;
use ctx_run::request::{RequestPlan, RunFlags};
use ctx_run::run_costs::{EngineCosts, RunPricing};
use ctx_run::settings::{StoreChoice, StoreFlags};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(plan_path), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: run_plan PLAN OUT_DIR".into());
    };
    let flags = RunFlags {
        store: StoreFlags {
            run_dir: Some(out.join("run")),
            ..StoreFlags::default()
        },
        ..RunFlags::default()
    };
    // No environment: this example always writes a local run directory.
    let basis = flags.settle(|_| None)?;
    let mut plan = ctx_checks::load_valid_plan(&plan_path)?;
    basis.apply(&mut plan)?;
    // The dry run calls no model: every task costs $0, as `ctx run` says.
    let pricing = RunPricing {
        engine: EngineCosts {
            free: true,
            ..EngineCosts::default()
        },
        file: None,
        flags: None,
        max_cost: basis.budget(&plan),
    };
    let plan = RequestPlan {
        plan,
        source: plan_path.to_str().map(str::to_string),
        inputs: None,
    };
    let request = basis.request(plan, pricing)?;
    let StoreChoice::Local(store) = request.store.clone() else {
        return Err("the flags chose a shared store".into());
    };
    let (plan, settings) = request.into_local(store);
    let outcome = ctx_run::run_plan(plan, Arc::new(ctx_deps::DryRunEngine), settings).await?;
    let json = ctx_run::json_text(&ResultsJson::of(&outcome.report))?;
    ctx_run::write_atomic(&out.join("results.json"), json.as_bytes())?;
    Ok(())
}
