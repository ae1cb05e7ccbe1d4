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

mod command;
mod dry_run;
mod notices;
pub mod openai;

pub use notices::Notices;

use std::sync::Arc;

use ctx_deps::InferenceEngine;
use ctx_run::run_costs::EngineCosts;

use crate::exit::CliError;

/// The engines `--engine` accepts. Adding one is this enum's variant, the
/// arms of [`EngineKind`]'s and [`EngineArgs`]'s dispatch below, and the
/// engine's own module (its flags, listing, checks, build and costs): two
/// files of the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// No model is called; each output is `[dry-run] output of task {id}`.
    DryRun,
    /// Run `--command` with `sh -c` once per task, the prompt on stdin.
    Command,
    /// An OpenAI-compatible HTTP server.
    Openai,
}

impl EngineKind {
    /// Every engine, in the order `ctx engines` lists them.
    pub const ALL: [EngineKind; 3] = [EngineKind::DryRun, EngineKind::Command, EngineKind::Openai];

    /// What `ctx engines` says of it.
    pub fn listing(self) -> Engine {
        match self {
            EngineKind::DryRun => dry_run::listing(),
            EngineKind::Command => command::listing(),
            EngineKind::Openai => openai::listing(),
        }
    }
}

/// A flag or variable an engine reads (or sets), for `ctx engines`.
pub struct Setting {
    /// `--flag VALUE` or the variable's name.
    pub name: &'static str,
    /// Its default, when it has one.
    pub default: Option<String>,
    /// What it does.
    pub meaning: &'static str,
}

/// An engine as `ctx engines` lists it.
pub struct Engine {
    /// Its `--engine` name.
    pub name: &'static str,
    /// Whether it is the default.
    pub default: bool,
    /// What it does.
    pub description: &'static str,
    /// The flags it reads.
    pub flags: Vec<Setting>,
    /// The variables it reads or sets.
    pub environment: Vec<Setting>,
}

/// A [`Setting`].
pub fn setting(name: &'static str, default: Option<String>, meaning: &'static str) -> Setting {
    Setting {
        name,
        default,
        meaning,
    }
}

// Engine flags, flattened into `ctx run`.
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

    /// Refuses (exit 2) a flag the selected engine does not use, or one it
    /// needs and lacks: what `ctx run` refuses before building the engine,
    /// and `ctx plan cost`, which takes the same flags, refuses too.
    pub fn check(&self) -> Result<(), CliError> {
        let kind = self.kind();
        if kind != EngineKind::Openai {
            // The command engine takes `--max-tokens` too: under `ctx run
            // --max-cost` ctx cuts its output there (`check_budget`).
            let given: Vec<&str> = self
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
            EngineKind::DryRun => dry_run::check(self),
            EngineKind::Command => command::check(self),
            EngineKind::Openai => openai::check(self),
        }
    }

    /// Refuses (exit 2) an engine flag that means something only under a
    /// budget (`budget`: `--max-cost` was given), or a bound of 0.
    pub fn check_budget(&self, budget: bool) -> Result<(), CliError> {
        match self.kind() {
            EngineKind::Command => command::check_budget(self, budget)?,
            EngineKind::Openai => openai::check_budget(&self.openai, budget)?,
            EngineKind::DryRun => {}
        }
        if self.openai.max_tokens == Some(0) {
            return Err(CliError::usage("--max-tokens must be at least 1"));
        }
        Ok(())
    }

    /// What the selected engine and its flags mean for costs (what
    /// `ctx plan cost` estimates and `ctx run` charges with).
    pub fn costs(&self) -> EngineCosts {
        match self.kind() {
            EngineKind::DryRun => dry_run::costs(),
            EngineKind::Command => command::costs(self),
            EngineKind::Openai => openai::costs(&self.openai),
        }
    }
}

/// The engine of one run, with what the run needs of it beside.
pub struct RunEngine {
    /// The engine.
    pub engine: Arc<dyn InferenceEngine>,
    /// Where its notices go, masking the run's secrets.
    pub notices: Notices,
    /// What it means for costs.
    pub costs: EngineCosts,
}

/// The engine a run uses, built once: its flags checked against the
/// run's budget (`budget`: one binds), its notices masking `mask`, at most
/// `concurrency` calls in flight (0: no limit; see [`build`]).
pub fn for_run(
    args: &EngineArgs,
    budget: bool,
    mask: ctx_run::inputs::SecretMask,
    concurrency: usize,
) -> Result<RunEngine, CliError> {
    args.check_budget(budget)?;
    let notices = Notices::masking(mask);
    let engine = build(args, &notices, concurrency)?;
    Ok(RunEngine {
        engine,
        notices,
        costs: args.costs(),
    })
}

/// Builds the selected engine, or explains which flag is missing or out of
/// place (exit 2).
/// `notices` shows the engine's progress events. `concurrency` (the
/// run's `--concurrency`, 0: no limit) bounds the real-time calls of an
/// engine that sends batches, whose batched calls the executor does not
/// bound (`InferenceEngine::batch_capacity`).
pub fn build(
    args: &EngineArgs,
    notices: &Notices,
    concurrency: usize,
) -> Result<Arc<dyn InferenceEngine>, CliError> {
    args.check()?;
    match args.kind() {
        EngineKind::DryRun => Ok(dry_run::build()),
        EngineKind::Command => Ok(command::build(args)),
        EngineKind::Openai => openai::build(&args.openai, notices, concurrency),
    }
}
