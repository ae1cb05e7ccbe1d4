//! Choosing and building the `InferenceEngine` a run uses (`--engine`).
//! The executor sees only the trait; this is the edge that knows names,
//! flags and environment variables.
//!
//! | `--engine` | what it does | reads |
//! |------------|--------------|-------|
//! | `dry-run` (default) | no model; output `[dry-run] output of task {id}` | nothing |
//! | `command` | `sh -c CMD` per task, prompt on stdin, stdout = output | `--command` |
//! | `openai`  | OpenAI-compatible chat completions over HTTP | the `openai` flags |
//!
//! `--command CMD` without `--engine` selects `command`. The bounds every
//! engine shares (`--task-timeout`, `--max-output-bytes`) are `ctx run`'s,
//! enforced by the executor, not an engine's.

pub mod openai;

use std::sync::Arc;

use ctx_deps::{DryRunEngine, InferenceEngine};
use ctx_engine_command::CommandEngine;

use crate::exit::CliError;

/// The engines `--engine` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// No model is called; each output is `[dry-run] output of task {id}`.
    DryRun,
    /// Run `--command` with `sh -c` once per task, the prompt on stdin.
    Command,
    /// An OpenAI-compatible HTTP server.
    Openai,
}

/// Engine flags, flattened into `ctx run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EngineArgs {
    /// The engine that runs each task [default: dry-run, or command when
    /// --command is given].
    #[arg(long, value_enum, value_name = "ENGINE", help_heading = crate::heading::ENGINE)]
    pub engine: Option<EngineKind>,

    /// The shell command of `--engine command`: run with `sh -c` once per
    /// task, the final prompt on stdin, stdout taken as the output;
    /// CTX_TASK_ID and CTX_MODEL are set.
    #[arg(long, value_name = "CMD", help_heading = crate::heading::ENGINE)]
    pub command: Option<String>,

    /// Flags of the OpenAI-compatible engine.
    #[command(flatten)]
    pub openai: openai::OpenAiArgs,
}

impl EngineArgs {
    /// The engine selected, after defaults.
    pub fn kind(&self) -> EngineKind {
        match (self.engine, &self.command) {
            (Some(kind), _) => kind,
            (None, Some(_)) => EngineKind::Command,
            (None, None) => EngineKind::DryRun,
        }
    }
}

/// Builds the selected engine, or explains which flag is missing or out of
/// place (exit 2).
pub fn build(args: &EngineArgs) -> Result<Arc<dyn InferenceEngine>, CliError> {
    args.check()?;
    match args.kind() {
        EngineKind::DryRun => Ok(Arc::new(DryRunEngine)),
        EngineKind::Command => Ok(Arc::new(CommandEngine::new(
            args.command.as_deref().unwrap_or_default(),
        ))),
        EngineKind::Openai => openai::build(&args.openai),
    }
}

impl EngineArgs {
    /// Refuses (exit 2) a flag the selected engine does not use, or one it
    /// needs and lacks: what `ctx run` refuses before building the engine,
    /// and `ctx plan cost`, which takes the same flags, refuses too.
    pub fn check(&self) -> Result<(), CliError> {
        let args = self;
        let kind = args.kind();
        if kind != EngineKind::Openai {
            // The command engine takes `--max-tokens` too: under `ctx run
            // --max-cost` ctx cuts its output there (run.rs checks the pair).
            let given: Vec<&str> = args
                .openai
                .given()
                .into_iter()
                .filter(|flag| !(kind == EngineKind::Command && *flag == "--max-tokens"))
                .collect();
            if !given.is_empty() {
                return Err(CliError::usage(format!(
                    "{} {} only used by --engine openai",
                    given.join(", "),
                    if given.len() == 1 { "is" } else { "are" }
                )));
            }
        }
        match kind {
            EngineKind::DryRun => {
                if args.command.is_some() {
                    return Err(CliError::usage(
                        "--command is only used by --engine command (the dry-run engine runs nothing)",
                    ));
                }
                Ok(())
            }
            EngineKind::Command => {
                if args.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    return Err(CliError::usage(
                        "--engine command needs --command 'CMD' (for example --command 'ollama run llama3.2')",
                    ));
                }
                Ok(())
            }
            EngineKind::Openai => {
                if args.command.is_some() {
                    return Err(CliError::usage(
                        "--command is only used by --engine command",
                    ));
                }
                Ok(())
            }
        }
    }
}
