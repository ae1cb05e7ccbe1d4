//! `--engine dry-run` (the default): no model is called.

use std::sync::Arc;

use ctx_deps::{DryRunEngine, InferenceEngine};
use ctx_run::run_costs::EngineCosts;

use super::{Engine, EngineArgs};
use crate::exit::CliError;

/// What `ctx engines` says of it.
pub fn listing() -> Engine {
    Engine {
        name: "dry-run",
        default: true,
        description: "No model is called; each task's output is `[dry-run] output of task {id}`, \
                      so downstream prompts show where real outputs will go.",
        flags: vec![],
        environment: vec![],
    }
}

/// Refuses what it does not use (the openai flags are refused for it by
/// [`EngineArgs::check`]).
pub fn check(args: &EngineArgs) -> Result<(), CliError> {
    if args.command.is_some() {
        return Err(CliError::usage(
            "--command is only used by --engine command (the dry-run engine runs nothing)",
        ));
    }
    Ok(())
}

/// The engine.
pub fn build() -> Arc<dyn InferenceEngine> {
    Arc::new(DryRunEngine)
}

/// It calls no model: every task costs $0, whatever the budget
/// ([`DryRunEngine::costs`]).
pub fn costs() -> EngineCosts {
    DryRunEngine::costs()
}
