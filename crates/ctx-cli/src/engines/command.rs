//! `--engine command` (or `--command CMD` alone): `sh -c CMD` once per
//! task, the prompt on stdin, stdout the output.

use std::sync::Arc;

use ctx_deps::InferenceEngine;
use ctx_engine_command::CommandEngine;
use ctx_run::run_costs::EngineCosts;

use super::{Engine, EngineArgs, setting};
use crate::exit::CliError;

/// What `ctx engines` says of it.
pub fn listing() -> Engine {
    Engine {
        name: "command",
        default: false,
        description: "Runs CMD with `sh -c` once per task: the final prompt on stdin, stdout \
                      is the output, a non-zero exit fails the task with the end of stderr. \
                      Past ctx run's --task-timeout or --max-output-bytes its process \
                      group is killed. Chosen by --command alone too.",
        flags: vec![setting(
            "--command CMD",
            None,
            "the shell command (required)",
        )],
        environment: vec![
            setting("CTX_TASK_ID", None, "set for the command: the task's id"),
            setting(
                "CTX_MODEL",
                None,
                "set for the command: the task's params.model, or empty",
            ),
        ],
    }
}

/// Refuses a missing or empty `--command`.
pub fn check(args: &EngineArgs) -> Result<(), CliError> {
    if args.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
        return Err(CliError::usage(
            "--engine command needs --command 'CMD' (for example --command 'ollama run llama3.2')",
        ));
    }
    Ok(())
}

/// `--max-tokens` means something to a command only under a budget: ctx
/// cuts each output there.
pub fn check_budget(args: &EngineArgs, budget: bool) -> Result<(), CliError> {
    if args.openai.max_tokens.is_some() && !budget {
        return Err(CliError::usage(
            "--max-tokens is used by the command engine only with --max-cost (ctx cuts each output there)",
        ));
    }
    Ok(())
}

/// The engine.
pub fn build(args: &EngineArgs) -> Arc<dyn InferenceEngine> {
    Arc::new(CommandEngine::new(
        args.command.as_deref().unwrap_or_default(),
    ))
}

/// The engine's cost facts ([`CommandEngine::costs`]), with `--max-tokens`
/// as the cut of tasks that set no `params.max_tokens`.
pub fn costs(args: &EngineArgs) -> EngineCosts {
    CommandEngine::costs(args.openai.max_tokens)
}
