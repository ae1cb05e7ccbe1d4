//! The one error type of a run.

/// Why a run could not start, or could not go on. A task that fails is not
/// an error: it is a result in the report.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run store could not be created, opened, locked, read or written;
    /// [`ctx_store_sqlite::Error::is_not_found`] tells a run that does not
    /// exist from a store that failed.
    #[error(transparent)]
    Store(#[from] ctx_store_sqlite::Error),
    /// The plan's dependency graph is not a DAG (a plan that passed
    /// validation never is).
    #[error(transparent)]
    Graph(#[from] ctx_deps::GraphError),
    /// A stored run's history could not be read (what a resumed run
    /// spent before).
    #[error(transparent)]
    History(#[from] ctx_store::StoreError),
    /// The executor stopped: its store failed mid-run.
    #[error(transparent)]
    Exec(#[from] ctx_deps::ExecError),
    /// A resume without a plan file, of a run whose stored plan had
    /// secret-looking `params` keys redacted: the plan file must be given
    /// again.
    #[error("run {run}: the stored plan has redacted secrets ({}); the plan file must be given to resume it", keys.join(", "))]
    RedactedPlan {
        /// The run's id.
        run: String,
        /// `task.params.KEY` of each redacted key.
        keys: Vec<String>,
    },
    /// The plan has `judge` checks and the engine's outputs are
    /// placeholders (the dry-run engine): no model could answer them.
    #[error("the {engine} engine cannot run `judge` checks (they need a model): {}", .checks.iter().map(|(_, f)| f.as_str()).collect::<Vec<_>>().join(", "))]
    Unjudgeable {
        /// The engine's name.
        engine: String,
        /// Each judge check: its task (none for `config.checks`) and its
        /// field path (`sub_tasks[0].checks[1].judge`).
        checks: Vec<(Option<String>, String)>,
    },
    /// A run under a period budget cannot start (`Refused`: nothing was
    /// created or called).
    #[error(transparent)]
    PeriodBudget(#[from] crate::period_budget::PeriodBudgetError),
    /// The `--out` directory could not be created (before the run
    /// started: nothing ran, nothing was stored).
    #[error(transparent)]
    Out(crate::WriteError),
    /// A `--rerun` id is not a task of the plan (nothing was opened).
    #[error(transparent)]
    UnknownRerunTask(#[from] ctx_store::UnknownRerunTask),
    /// A resume with an engine that sends no batches, of a run whose
    /// provider batches may still answer (created, not collected, not
    /// cancelled by `ctx runs cancel`): it would pay for them again.
    #[error(
        "run {run} has provider batches that may still answer ({}): resume it with the batching engine (--engine openai --batch), which takes them up, or cancel them first (ctx runs cancel)",
        batches.join(", ")
    )]
    LiveBatches {
        /// The run.
        run: String,
        /// Each batch's id.
        batches: Vec<String>,
    },
    /// Tasks were asked to run again in a run that is not a resume: there
    /// is nothing stored to run them again from.
    #[error("--rerun needs a stored run to resume (--resume RUN)")]
    RerunWithoutResume,
    /// A store call on the blocking pool did not return (it panicked, or
    /// the runtime is shutting down).
    #[error("a store call on the blocking pool did not return: {0}")]
    Blocking(#[from] tokio::task::JoinError),
}
