//! # ctx-deps: graph, schedule, execute
//!
//! A plan's sub-tasks form a DAG. This crate turns a validated
//! [`ctx_model::Plan`] into a [`PlanGraph`] (topological order, dependency
//! levels, critical path, per-task priority) and runs it with the
//! [`Executor`]: a ready queue that starts each task the moment its
//! dependencies have completed, longest remaining path first, up to a
//! concurrency limit.
//!
//! Two seams keep the executor ignorant of the outside world. Each trait
//! lives in a crate of its own, so that an implementation depends on that
//! crate and the plan model only (re-exported here for convenience):
//!
//! * [`ExecutionStore`] (crate `ctx-store`) — where results live.
//!   [`MemoryStore`] ships beside the trait; durable stores live in
//!   `ctx-store-sqlite` and `ctx-store-postgres`.
//! * [`InferenceEngine`] (crate `ctx-engine`) — what turns a prompt into
//!   output. [`DryRunEngine`] ships beside the trait; the command engine
//!   lives in `ctx-engine-command`, the OpenAI-compatible HTTP engine in
//!   `ctx-engine-openai`.
//!
//! Prompts are assembled by `ctx-prompt` (entity block, dependency outputs,
//! the task's own prompt, under a token cap); this crate only feeds it the
//! dependencies' stored results.
//!
//! ```
//! use std::sync::Arc;
//! use ctx_deps::{Executor, ExecutorOptions, PlanGraph};
//! use ctx_engine::DryRunEngine;
//! use ctx_store::{ExecutionStore, MemoryStore};
//! use ctx_model::TaskStatus;
//!
//! let plan: ctx_model::Plan = serde_json::from_str(r#"{"schema_version": 1, "sub_tasks": [
//!   {"id": "html", "description": "Page", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write the page."}}},
//!   {"id": "css", "description": "Style", "dependencies": ["html"],
//!    "tool_or_prompt": {"name": "inference", "params": {"prompt": "Style it."}}}
//! ]}"#).unwrap();
//!
//! let graph = PlanGraph::new(&plan).unwrap();
//! assert_eq!(graph.critical_path_length(), 2);
//!
//! let store = Arc::new(MemoryStore::new());
//! let exec = Executor::new(plan, Arc::new(DryRunEngine), store.clone(),
//!                          ExecutorOptions::default()).unwrap();
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let report = rt.block_on(exec.run()).unwrap();
//! assert!(report.all_completed());
//! let css = store.get_by_task_id("css").unwrap().unwrap();
//! assert_eq!(css.status, TaskStatus::Completed);
//! assert_eq!(css.output, "[dry-run] output of task css");
//! ```

mod attempt;
mod budget;
pub mod call_bounds;
pub mod canary;
pub mod checking;
pub mod cost;
mod engine_call;
pub mod executor;
pub mod gates;
pub mod graph;
mod in_flight;
pub mod map;
mod offload;
pub mod options;
pub mod prompt_cache;
mod scheduling;
pub mod spans;
pub mod summarize;
mod task;
mod warm_up;

// Pins of the cost module's edges (cargo-mutants survivors), kept apart
// from `cost.rs` so that changes to the module and to its pins merge apart.
#[cfg(test)]
mod cost_tests;

// What this crate defines, by name, so that `ctx_deps::Executor` and the
// like keep working while the module path says where each lives.
pub use canary::Canary;
pub use cost::{
    BudgetLedger, CostModel, CostOptions, CostSummary, SharedBudget, budget_skip_reason, dollars,
    is_budget_skip, task_cache_saving, task_cost,
};
pub use executor::{ExecError, Executor, ProgressEvent, RunReport};
pub use graph::{GraphError, GraphSummary, PlanGraph, TaskSummary, Weighting};
pub use options::{
    ContextVariant, DEFAULT_CONCURRENCY, DEFAULT_TASK_TIMEOUT, ExecutorOptions, Schedule,
    concurrency_limit,
};
pub use summarize::{SummaryTotals, summary_for_dependent};
pub use task::TaskRunner;

// The two seams the executor is written against, re-exported for
// convenience: a program that runs plans names the executor, an engine and
// a store from one crate. Each lives in its seam crate.
pub use ctx_engine::{
    BoxFuture, DEFAULT_MAX_OUTPUT_BYTES, EngineError, FirstToken, InferenceEngine,
    InferenceRequest, InferenceResponse, RequestPurpose,
};
pub use ctx_store::{ExecutionStore, RunHistory, StoreError};

/// Lives in `ctx-engine` now, beside the trait (`ctx_engine::DryRunEngine`);
/// this path keeps working.
pub use ctx_engine::DryRunEngine;
/// Lives in `ctx-store` now, beside the trait (`ctx_store::MemoryStore`);
/// this path keeps working.
pub use ctx_store::MemoryStore;
