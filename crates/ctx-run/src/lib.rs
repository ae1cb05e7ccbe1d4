//! # ctx-run: a plan run as one library call
//!
//! What `ctx run` computes, for a program that embeds ctx: start a durable
//! run or resume one, wrap the engine in the input-hash cache, force the
//! re-runs a resume decided, execute, record the session's end
//! ([`run_plan`], or [`RunSession`] to report between starting and
//! executing); the results.json wire format ([`ResultsJson`]); the `--out`
//! layout ([`out_dir`]); the one atomic file write every promise of an
//! atomic file rests on ([`write_atomic`]); a stored run's page as
//! `ctx runs show` prints it, from either store ([`show`]); and the
//! context-injection eval of `ctx eval` ([`eval`]).
//!
//! The CLI turns its flags into [`request::RunFlags`], which resolve into
//! the one [`request::RunRequest`] a local session ([`RunSettings`]) and
//! a shared one (ctx-worker) both take; it calls this crate, and prints;
//! it holds none of these rules, so an embedder gets exactly the CLI's
//! resume, cache and results.json. The crate knows no terminal, flag or
//! exit code.
//!
//! Why a crate of its own: the executor (`ctx-deps`) must not know SQLite,
//! and the SQLite adapter (`ctx-store-sqlite`) must not know the executor
//! (an adapter stays light). This crate is where the two meet.
//!
//! ```no_run
//! // examples/run_plan.rs, in short:
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let plan = ctx_checks::load_valid_plan(std::path::Path::new("plan.yaml"))?;
//! let settings = ctx_run::RunSettings {
//!     store: ctx_run::RunStore::Sqlite {
//!         root: ctx_store_sqlite::RunRoot::new(".ctx/runs"),
//!         start: ctx_run::Start::New,
//!         cache: false,
//!     },
//!     ..Default::default()
//! };
//! let engine = std::sync::Arc::new(ctx_deps::DryRunEngine);
//! let outcome = ctx_run::run_plan(plan, engine, settings).await?;
//! print!("{}", ctx_run::json_text(&ctx_run::ResultsJson::of(&outcome.report))?);
//! # Ok(()) }
//! ```

pub mod alerts;
mod atomic;
pub mod batches;
pub mod cache_figures;
pub mod cache_prediction;
mod error;
pub mod estimate;
pub mod eval;
pub mod eval_baseline;
pub mod export;
pub mod gates;
pub mod inputs;
pub mod list;
pub mod map_counts;
pub mod out_dir;
pub mod period_budget;
pub mod plan_check;
pub mod publish;
pub mod request;
mod results;
pub mod run_costs;
mod session;
pub mod settings;
pub mod show;
pub mod spend;
mod stored_plan;
pub mod summary_text;
pub mod unpublish;

pub use atomic::{WriteError, write_atomic};
pub use ctx_store::{UnknownRerunTask, check_rerun_ids};
pub use error::RunError;
pub use results::{ResultsJson, SummariesJson, TaskJson, json_text};
pub use session::{
    ResultCost, RunOutcome, RunSession, RunSettings, RunStore, Start, StoredRun,
    refuse_unjudgeable, run_plan, spent, total_cost, workflow_name,
};
pub use stored_plan::{StoredPlan, redacted_params, stored_inputs, stored_plan};
