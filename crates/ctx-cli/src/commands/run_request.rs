//! `ctx run`'s flags → the library's one run request
//! ([`ctx_run::request::RunRequest`]), in order: the flags settle (the
//! store, the bounds, the budget; the library's rules), the plan is read
//! (PLAN, or the plan a run stored, from either store) and overridden,
//! its variables and digest are filled, the engine is built and the
//! prices read. Each step enters its own CLI file once; what combines
//! them is the library's, so an embedder resolves the same request.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctx_deps::{InferenceEngine, Schedule};
use ctx_run::RunStore;
use ctx_run::inputs::RunInputs;
use ctx_run::request::{RequestError, RequestPlan, RunFlags, RunRequest};
use ctx_run::settings::{PlanOverrides, StoreChoice, StoreFlags};

use super::run::{Args, ScheduleArg};
use crate::engines;
use crate::exit::CliError;

/// A run as asked for on the command line, ready to start.
pub struct Asked {
    /// The request, every setting resolved.
    pub request: RunRequest,
    /// The engine the flags chose.
    pub engine: Arc<dyn InferenceEngine>,
    /// Where the engine's notices go (the progress bar, once one shows).
    pub notices: engines::Notices,
    /// The plan's path, as messages name it.
    pub plan_path: PathBuf,
}

/// Resolves `args` into the run they ask for, or the first flag at fault.
pub fn resolve(args: &Args) -> Result<Asked, CliError> {
    let mut basis = flags(args).settle(|k| std::env::var(k).ok())?;
    let mut loaded = load_plan(args, &basis.store)?;
    basis.apply(&mut loaded.plan)?;
    let (plan, plan_path) = fill(args, &basis.store, loaded)?;
    basis.executor.canary = crate::telemetry::canary(&plan.plan, &plan_path)?;
    let mask = plan.inputs.as_ref().map(|i| i.mask.clone());
    let mask =
        ctx_deps::canary::mask_with(mask.unwrap_or_default(), basis.executor.canary.as_ref());
    let budget = basis.budget(&plan.plan).is_some();
    let built = engines::for_run(&args.engine, budget, mask, basis.executor.concurrency)?;
    let pricing = args.prices.pricing(built.costs, basis.budget(&plan.plan))?;
    let default_model = pricing.engine.model.is_some();
    let request = basis.request(plan, pricing).map_err(|e| match e {
        RequestError::Budget(e) => super::run_cost::refusal(&e, default_model),
        e => e.into(),
    })?;
    Ok(Asked {
        request,
        engine: built.engine,
        notices: built.notices,
        plan_path,
    })
}

/// The flags as the library takes them.
fn flags(args: &Args) -> RunFlags {
    RunFlags {
        store: StoreFlags {
            store: args.store.clone(),
            no_store: args.no_store,
            root: args.root.clone(),
            run_dir: args.run_dir.clone(),
            resume: args.resume.clone(),
            cache: args.cache,
            no_local: args.no_local,
            batch: args.engine.openai.batch,
        },
        overrides: PlanOverrides {
            max_prompt_tokens: args.limits.max_prompt_tokens,
            max_check_attempts: args.limits.max_check_attempts,
            tokenizer: args.tokenizer,
            summarize_strategy: args.summarize_strategy.map(Into::into),
            cache_warm_up: args.cache_warm_up,
            budget: args.budget.clone(),
        },
        concurrency: Some(args.concurrency),
        schedule: Some(match args.schedule {
            ScheduleArg::Ready => Schedule::ReadyQueue,
            ScheduleArg::Levels => Schedule::Levels,
        }),
        task_timeout_secs: Some(args.bounds.task_timeout),
        max_output_bytes: Some(args.bounds.max_output_bytes),
        max_cost: args.max_cost.clone(),
        alert_at: args.alert_at.clone(),
        rerun: args.rerun.clone(),
        out: args.out.clone(),
        publish_root: args.inputs.publish_root.clone(),
        approval_wait: args.wait_approval,
    }
}

/// A plan as `ctx run` reads it: the plan, the path messages name it by,
/// and the source recorded with the run.
struct LoadedPlan {
    plan: ctx_model::Plan,
    path: PathBuf,
    source: Option<String>,
    /// For a resume: what the run's plan was filled from.
    stored: Option<RunInputs>,
}

/// The plan's variables, its history digest and its publish paths, filled
/// before anything runs (the executor runs the filled plan): from the
/// flags, or for a resume from the run's stored inputs under them.
/// Returns the plan as the request takes it (with what the run records
/// of its inputs), and its path for messages.
fn fill(
    args: &Args,
    store: &StoreChoice,
    loaded: LoadedPlan,
) -> Result<(RequestPlan, PathBuf), CliError> {
    let source = loaded.source.clone().map(PathBuf::from);
    let from = super::plan_inputs::PlanFrom {
        file: args.plan.as_deref(),
        source: source.as_deref(),
        stored: loaded.stored.as_ref(),
    };
    let kind = super::plan_inputs::RunKind {
        dry_run_engine: args.engine.kind() == engines::EngineKind::DryRun,
        shared: matches!(store, StoreChoice::Shared(_)),
    };
    let (plan, inputs) = args.inputs.prepare(loaded.plan, &from, &kind)?;
    let plan = RequestPlan {
        plan,
        source: loaded.source,
        inputs,
    };
    Ok((plan, loaded.path))
}

/// What `run` (of the store chosen) filled its plan from, for a resume
/// given the plan file.
fn stored_inputs(store: &StoreChoice, run: &str) -> Result<Option<RunInputs>, CliError> {
    match store {
        StoreChoice::Shared(s) => {
            crate::runtime::block_on(ctx_worker::runs::stored_inputs(&s.url, run))?
                .map_err(|e| CliError::shared(e, Path::new(run)))
        }
        StoreChoice::Local(RunStore::Sqlite { root, .. }) => {
            ctx_run::stored_inputs(root, run).map_err(|e| CliError::run(e, Path::new(run)))
        }
        StoreChoice::Local(RunStore::Memory) => Ok(None),
    }
}

/// The plan to run: PLAN, or with `--resume RUN` alone the plan the run
/// stored at its last session (before filling, when it was filled),
/// shown as its path as then given.
fn load_plan(args: &Args, store: &StoreChoice) -> Result<LoadedPlan, CliError> {
    let (run, path) = match (&args.resume, &args.plan) {
        (resume, Some(path)) => {
            return Ok(LoadedPlan {
                plan: super::plan_check::load_valid_plan_given(
                    path,
                    args.inputs.plan.content_root.is_some(),
                )?,
                path: path.clone(),
                source: path.to_str().map(str::to_string),
                stored: match resume {
                    Some(run) => stored_inputs(store, run)?,
                    None => None,
                },
            });
        }
        (Some(run), None) => (run, None::<PathBuf>),
        (None, None) => return Err(CliError::usage("a PLAN is needed unless --resume is given")),
    };
    let stored = match store {
        StoreChoice::Shared(s) => {
            crate::runtime::block_on(ctx_worker::runs::stored_plan(&s.url, run))?
                .map_err(|e| CliError::shared(e, Path::new(run)))?
        }
        StoreChoice::Local(RunStore::Sqlite { root, .. }) => ctx_run::stored_plan(root, run)
            .map_err(|e| match e {
                ctx_run::RunError::RedactedPlan { .. } => {
                    CliError::usage(format!("{e}: ctx run PLAN --resume {run}"))
                }
                e => CliError::run(e, Path::new(run)),
            })?,
        StoreChoice::Local(RunStore::Memory) => return Err(needs_stored_run()),
    };
    let shown = format!(
        "{} (the plan stored in run {})",
        stored.source.as_deref().unwrap_or("<plan>"),
        stored.run_id
    );
    Ok(LoadedPlan {
        plan: stored.plan,
        path: path.unwrap_or_else(|| PathBuf::from(shown)),
        source: stored.source,
        stored: stored.inputs,
    })
}

/// `--resume` with `--no-store`.
pub(crate) fn needs_stored_run() -> CliError {
    CliError::usage("--resume needs a stored run (not --no-store)")
}
