//! Exit codes and the one error type commands return.
//!
//! `ctx-cli` is the only crate that knows exit codes: libraries return their
//! own `thiserror` enums, and each command maps them here. The codes are
//! documented in README.md ("Exit codes") and must not change meaning.

use std::fmt;
use std::process::ExitCode;

/// Every exit code `ctx` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success: a valid plan, a clean lint, every task completed.
    Ok = 0,
    /// The command ran and found problems: an invalid plan, lint findings,
    /// a task that failed or was skipped.
    Findings = 1,
    /// Bad usage or bad input: unknown flag, unreadable or malformed file,
    /// unknown tokenizer. Nothing was executed.
    Usage = 2,
    /// A rendered prompt exceeds its token budget (preflight), or a run's
    /// high end is over what its period budget has left.
    OverBudget = 3,
    /// A run store could not be opened, locked, or written.
    Store = 4,
    /// An output file could not be written (disk full, a path taken by a
    /// directory): `ctx run -o/--out` (the tasks ran and the run is
    /// stored, the summary was printed; or, when the directory cannot be
    /// created, before anything ran), `ctx runs report -o/--out`,
    /// `ctx runs diff -o/--out`,
    /// `ctx schema -o/--out`.
    /// No temporary file is left behind.
    OutWrite = 5,
    /// `ctx run`: nothing failed, and a task waits for a decision on its
    /// approval gate (`before: run` held, or a `before: publish` output
    /// not published); the summary names each and the command that
    /// approves it. `ctx runs publish`: an output waits for a decision.
    AwaitingApproval = 6,
    /// The system refused what ctx needs to run at all: the async
    /// runtime's threads could not be started (sysexits' `EX_OSERR`).
    System = 71,
    /// Stopped by SIGHUP (128 + 1; the terminal went away); the run is
    /// stored as interrupted and the summary was still printed.
    Hangup = 129,
    /// Interrupted by Ctrl-C (SIGINT, 128 + 2); the summary was still
    /// printed.
    Interrupted = 130,
    /// Stopped by SIGTERM (128 + 15; cron, systemd, Kubernetes and CI
    /// runners stop jobs with it); the run is stored as interrupted and the
    /// summary was still printed.
    Terminated = 143,
}

impl Exit {
    /// Every code, ascending (a test checks the list is complete and in
    /// order).
    pub const ALL: [Exit; 11] = [
        Exit::Ok,
        Exit::Findings,
        Exit::Usage,
        Exit::OverBudget,
        Exit::Store,
        Exit::OutWrite,
        Exit::AwaitingApproval,
        Exit::System,
        Exit::Hangup,
        Exit::Interrupted,
        Exit::Terminated,
    ];

    /// What the code means, in one line: the man pages' EXIT STATUS.
    /// README.md's "Exit codes" table says the same at more length.
    pub fn summary(self) -> &'static str {
        match self {
            Exit::Ok => "success: a valid plan, a clean lint, every task completed",
            Exit::Findings => {
                "findings: an invalid plan, lint findings, a task that failed or was skipped"
            }
            Exit::Usage => {
                "usage or input error: a bad flag, an unreadable or malformed file, a budget \
                 that cannot be bounded; nothing was executed"
            }
            Exit::OverBudget => {
                "a rendered prompt exceeds --prompt-budget, a task's own prompt cannot fit \
                 its max_prompt_tokens, or a run's high end is over its period budget"
            }
            Exit::Store => {
                "a run store cannot be opened, locked or written, or a shared store is \
                 unreachable, refuses the login, or is newer or foreign"
            }
            Exit::OutWrite => {
                "an output file (-o/--out, --publish-root) could not be written; no temporary file is left"
            }
            Exit::AwaitingApproval => {
                "waiting for approval: nothing failed, and a gated task or output waits for \
                 `ctx runs approve`"
            }
            Exit::System => "the system refused what ctx needs to run at all (threads)",
            Exit::Hangup => "stopped by SIGHUP; the run is stored as interrupted",
            Exit::Interrupted => "interrupted by Ctrl-C (SIGINT); the summary was still printed",
            Exit::Terminated => "stopped by SIGTERM; the run is stored as interrupted",
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// A command's failure: what to print and how to exit.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub exit: Exit,
    /// One or more lines naming the file, line, task id or field.
    pub message: String,
}

impl CliError {
    /// A usage or input error (exit 2).
    pub fn usage(message: impl fmt::Display) -> Self {
        CliError {
            exit: Exit::Usage,
            message: message.to_string(),
        }
    }
    /// An error with an explicit exit code.
    pub fn with(exit: Exit, message: impl fmt::Display) -> Self {
        CliError {
            exit,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A prices file (`--prices FILE`) that cannot be read or parsed: bad
/// input, exit 2. The message names the file, and the line and column of
/// the problem when there is one.
impl From<ctx_cost::PricesFileError> for CliError {
    fn from(e: ctx_cost::PricesFileError) -> Self {
        CliError::usage(format!("--prices: {e}"))
    }
}

/// A `--price MODEL=IN,OUT[,CACHED]` value that cannot be read: bad usage,
/// exit 2. The message quotes the flag's value and names the wrong part.
impl From<ctx_cost::PriceFlagError> for CliError {
    fn from(e: ctx_cost::PriceFlagError) -> Self {
        CliError::usage(format!("--price {e}"))
    }
}

/// A `--max-cost USD` value that is not a positive amount: bad usage,
/// exit 2, the flag named here (the library's message starts at the value).
impl From<ctx_cost::MaxCostError> for CliError {
    fn from(e: ctx_cost::MaxCostError) -> Self {
        CliError::usage(format!("--max-cost {e}"))
    }
}

/// What a command returns.
pub type CliResult = Result<Exit, CliError>;

// Every library error a command meets, mapped to its exit code here and
// nowhere else: a command writes `?` (or `CliError::run(e, plan)` where
// the message names the plan), never its own match on a library's enum.

/// A run store error: naming a run that does not exist is a usage error
/// (2), anything else a store error (4).
impl From<ctx_store_sqlite::Error> for CliError {
    fn from(e: ctx_store_sqlite::Error) -> Self {
        if let ctx_store_sqlite::Error::Decision(refused) = e {
            return (*refused).into();
        }
        if e.is_not_found() {
            CliError::usage(e)
        } else {
            CliError::with(Exit::Store, e)
        }
    }
}

/// A decision on an approval gate that was not recorded: a task that does
/// not exist or has no gate, or a rejection without a note, is bad input
/// (2); a gate that does not wait now or that another decision settled
/// first is a finding (1). Nothing was written.
impl From<ctx_run::gates::DecisionRefused> for CliError {
    fn from(e: ctx_run::gates::DecisionRefused) -> Self {
        use ctx_run::gates::DecisionRefused;
        match e {
            DecisionRefused::UnknownTask { .. }
            | DecisionRefused::NoGate { .. }
            | DecisionRefused::NoteRequired { .. } => CliError::usage(e),
            DecisionRefused::NotWaiting { .. } | DecisionRefused::AlreadySettled { .. } => {
                CliError::with(Exit::Findings, e)
            }
        }
    }
}

/// A read of a stored run that failed after it was opened: exit 4.
impl From<ctx_deps::StoreError> for CliError {
    fn from(e: ctx_deps::StoreError) -> Self {
        CliError::with(Exit::Store, e)
    }
}

/// A shared store error: a bad URL or an unknown run is usage (2),
/// everything else a store failure (4), as for a local run another
/// process holds.
impl From<ctx_worker::PgError> for CliError {
    fn from(e: ctx_worker::PgError) -> Self {
        use ctx_worker::PgError;
        match e {
            PgError::Url { .. } | PgError::NoRun { .. } => CliError::usage(e),
            PgError::Decision(refused) => (*refused).into(),
            e => CliError::with(Exit::Store, e),
        }
    }
}

/// A setting out of range, named by its flag (exit 2).
impl From<ctx_run::settings::SettingError> for CliError {
    fn from(e: ctx_run::settings::SettingError) -> Self {
        use ctx_run::settings::Setting;
        let flag = match e.setting() {
            Setting::MaxPromptTokens => "--max-prompt-tokens",
            Setting::MaxCheckAttempts => "--max-check-attempts",
            Setting::MaxOutputBytes => "--max-output-bytes",
            Setting::TaskTimeout => "--task-timeout",
            Setting::CacheWarmUp => "--cache-warm-up",
        };
        CliError::usage(e.message(flag))
    }
}

/// A store flag that does not fit the store chosen, said with the flags
/// (exit 2).
impl From<ctx_run::settings::StoreError> for CliError {
    fn from(e: ctx_run::settings::StoreError) -> Self {
        use ctx_run::settings::StoreError;
        CliError::usage(match e {
            StoreError::Unknown { shown } => {
                format!("--store: `{shown}` is neither `sqlite` nor a postgres:// URL")
            }
            StoreError::RunDirOnShared => {
                "--run-dir works only with the local SQLite store, not with a postgres:// --store"
                    .into()
            }
            StoreError::FollowWithoutShared => "--no-local needs a postgres:// --store".into(),
            StoreError::BatchOnShared => {
                "--batch works only with the local SQLite store, which journals its batches \
                 (docs/engines.md, \"Batch API\")"
                    .into()
            }
            StoreError::NoSharedStore => {
                "ctx worker needs a shared store: --store postgres://... (or CTX_STORE)".into()
            }
        })
    }
}

/// A run request that cannot be resolved: each part by its own mapping
/// above (a setting by its flag, the store flags, `--max-cost`), the
/// rest usage (exit 2). `ctx run` adds the flag that bounds a budget
/// (`run_cost::refusal`) before this one is reached.
impl From<ctx_run::request::RequestError> for CliError {
    fn from(e: ctx_run::request::RequestError) -> Self {
        use ctx_run::request::RequestError;
        match e {
            RequestError::Store(e) => e.into(),
            RequestError::Setting(e) => e.into(),
            RequestError::MaxCost(e) => e.into(),
            RequestError::Budget(e) => CliError::usage(format!("--max-cost: {e}")),
            e @ RequestError::Alert(_) => CliError::usage(e),
            // The period ledger or the stored run could not be read: the
            // store's exit, as any other read of it.
            e @ RequestError::Tier(_) => CliError::with(Exit::Store, e),
            e @ RequestError::WaitApproval(_) => CliError::usage(e),
        }
    }
}

impl CliError {
    /// A run's error, `plan` naming the plan in messages: a run that does
    /// not exist, a plan that is not a DAG and a plan the engine cannot
    /// judge are usage errors (2), a store that fails is 4, an `--out`
    /// directory that cannot be created 5.
    pub fn run(e: ctx_run::RunError, plan: &std::path::Path) -> CliError {
        use ctx_deps::ExecError;
        use ctx_run::RunError;
        match e {
            RunError::Store(e @ ctx_store_sqlite::Error::AlreadyExists { .. }) => CliError::with(
                Exit::Store,
                format!("{e} (ctx run --resume DIR, or another --run-dir)"),
            ),
            RunError::Store(e) => e.into(),
            RunError::Graph(e) | RunError::Exec(ExecError::Graph(e)) => CliError::usage(e),
            RunError::Unjudgeable { engine, checks } => unjudgeable(&engine, &checks, plan),
            RunError::Out(e) => CliError::with(Exit::OutWrite, format!("--out: {e}")),
            e @ (RunError::Exec(ExecError::Store { .. })
            | RunError::History(_)
            | RunError::Blocking(_)) => CliError::with(Exit::Store, e),
            e @ (RunError::RedactedPlan { .. }
            | RunError::UnknownRerunTask(_)
            | RunError::RerunWithoutResume
            | RunError::LiveBatches { .. }) => CliError::usage(e),
            RunError::PeriodBudget(e @ ctx_run::period_budget::PeriodBudgetError::Refused(_)) => {
                CliError::with(Exit::OverBudget, e)
            }
            RunError::PeriodBudget(e) => CliError::usage(e),
        }
    }

    /// `ctx eval`'s error, `plan` naming the plan in messages: what
    /// cannot be compared is a usage error (2), a store that fails 4.
    pub fn eval(e: ctx_run::eval::EvalError, plan: &std::path::Path) -> CliError {
        use ctx_deps::ExecError;
        use ctx_run::eval::EvalError;
        match e {
            e @ EvalError::NoChecks => CliError::usage(format!("{}: {e}", plan.display())),
            EvalError::NoRepeat => CliError::usage("--repeat must be at least 1"),
            e @ EvalError::PlaceholderEngine { .. } => CliError::usage(format!(
                "{e}; give one, for example:\n  ctx eval {plan} --command 'ollama run llama3.2'\n  \
                 ctx eval {plan} --engine openai   (reads OPENAI_API_KEY; --base-url for a local server)",
                plan = plan.display()
            )),
            EvalError::Store(e) => e.into(),
            EvalError::Graph(e) | EvalError::Exec(ExecError::Graph(e)) => {
                CliError::usage(format!("{}: {e}", plan.display()))
            }
            e @ (EvalError::Exec(ExecError::Store { .. }) | EvalError::Join(_)) => {
                CliError::with(Exit::Store, e)
            }
        }
    }

    /// `ctx render`'s error, `shown` naming the template: lint findings
    /// and a broken fence are findings (1, the findings printed to
    /// stderr), a prompt over its budget 3 (the preflight table printed),
    /// the rest usage (2).
    pub fn render(e: ctx_prompt::render_prompt::RenderPromptError, shown: &str) -> CliError {
        use crate::commands::lint::print_findings;
        use crate::commands::render::values_message;
        use ctx_prompt::render_prompt::RenderPromptError;
        use ctx_prompt::template::{HISTORICAL_CONTEXT, RenderError};
        match e {
            RenderPromptError::Lint(ref report) => {
                print_findings(report, &mut std::io::stderr().lock());
                CliError::with(Exit::Findings, e)
            }
            RenderPromptError::Render(RenderError::FenceBroken { .. }) => {
                CliError::with(Exit::Findings, e)
            }
            RenderPromptError::OverBudget { ref preflight, .. } => {
                eprint!("{}", preflight.table());
                CliError::with(Exit::OverBudget, e)
            }
            RenderPromptError::NoHistoryPlaceholder { .. } => CliError::usage(format!(
                "{shown}: --content-root is given but the template has no {{{{{HISTORICAL_CONTEXT}}}}}"
            )),
            RenderPromptError::HistoryGivenTwice { .. } => CliError::usage(format!(
                "--var {HISTORICAL_CONTEXT} and --content-root both give {{{{{HISTORICAL_CONTEXT}}}}}; pass one"
            )),
            RenderPromptError::Render(RenderError::Values {
                ref path,
                ref missing,
                ref unused,
            }) => CliError::usage(values_message(path, missing, unused)),
            other => CliError::usage(other),
        }
    }

    /// A shared run's error, `plan` naming the plan in messages: as
    /// [`CliError::run`] for what a local run refuses too, the store's by
    /// its own rule.
    pub fn shared(e: ctx_worker::SharedError, plan: &std::path::Path) -> CliError {
        use ctx_worker::SharedError;
        match e {
            SharedError::Store(e) => e.into(),
            SharedError::Graph(e) => CliError::usage(format!("{}: {e}", plan.display())),
            SharedError::Read(e) => e.into(),
            SharedError::Run(e) => CliError::run(e, plan),
            SharedError::Cache(e) => e.into(),
            e @ SharedError::Blocking(_) => CliError::with(Exit::Store, e),
            e @ SharedError::Budget(_) => CliError::usage(e),
        }
    }
}

/// [`ctx_run::RunError::Unjudgeable`], said with where each judge check is
/// written in the plan (`FILE:LINE:COL: task "ID": FIELD: a judge check`,
/// one line each) and the engine flags that can run it (exit 2).
pub fn unjudgeable(
    engine: &str,
    checks: &[(Option<String>, String)],
    plan: &std::path::Path,
) -> CliError {
    let source = ctx_model::read_plan_source(plan).ok();
    let locator = source
        .as_ref()
        .map(|s| ctx_model::FieldLocator::new(&s.text))
        .unwrap_or_default();
    let origin = source
        .as_ref()
        .map_or("<stored plan>", |s| s.origin.as_str());
    let mut message = format!(
        "the {engine} engine cannot run `judge` checks (they need a model): use --engine command or --engine openai"
    );
    for (task_id, field) in checks {
        let at = locator
            .locate(field)
            .map(|(l, c)| format!("{origin}:{l}:{c}: "))
            .unwrap_or_else(|| format!("{origin}: "));
        let task = task_id
            .as_ref()
            .map(|t| format!("task {t:?}: "))
            .unwrap_or_default();
        message.push_str(&format!("\n{at}{task}{field}: a judge check"));
    }
    CliError::usage(message)
}

#[cfg(test)]
mod tests {
    use super::{CliError, Exit};

    #[test]
    fn store_errors_map_to_their_exit_codes() {
        use ctx_worker::PgError;
        let e = CliError::from(PgError::NoRun {
            url: "postgres://u@h/d".into(),
            run_id: "r".into(),
        });
        assert_eq!(e.exit, Exit::Usage);
        let e = CliError::from(PgError::NewerSchema {
            url: "postgres://u@h/d".into(),
            found: 2,
            known: 1,
        });
        assert_eq!(e.exit, Exit::Store);
        let e = CliError::from(PgError::Foreign {
            url: "postgres://u@h/d".into(),
            reason: "x".into(),
        });
        assert_eq!(e.exit, Exit::Store);
        let e = CliError::from(
            ctx_run::settings::shared_url(Some("mysql://u:hunter2@h/d"), |_| None).unwrap_err(),
        );
        assert_eq!(e.exit, Exit::Usage);
        assert_eq!(
            e.message,
            "--store: `mysql://u@h/d` is neither `sqlite` nor a postgres:// URL"
        );
    }

    /// `Exit::ALL` holds every variant once, ascending: the match below
    /// stops compiling when a variant is added, and reminds whoever adds
    /// it to list it.
    #[test]
    fn all_lists_every_code_once_in_order() {
        for e in Exit::ALL {
            match e {
                Exit::Ok
                | Exit::Findings
                | Exit::Usage
                | Exit::OverBudget
                | Exit::Store
                | Exit::OutWrite
                | Exit::AwaitingApproval
                | Exit::System
                | Exit::Hangup
                | Exit::Interrupted
                | Exit::Terminated => {}
            }
        }
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| *e as u8).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted);
        assert_eq!(codes.len(), 11);
    }
}
