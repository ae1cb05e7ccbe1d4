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
    /// A rendered prompt exceeds its token budget (preflight).
    OverBudget = 3,
    /// A run store could not be opened, locked, or written.
    Store = 4,
    /// An output file could not be written (disk full, a path taken by a
    /// directory): `ctx run -o/--out` (the tasks ran and the run is
    /// stored, the summary was printed; or, when the directory cannot be
    /// created, before anything ran), `ctx runs report -o/--out`,
    /// `ctx schema -o/--out`.
    /// No temporary file is left behind.
    OutWrite = 5,
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
    pub const ALL: [Exit; 10] = [
        Exit::Ok,
        Exit::Findings,
        Exit::Usage,
        Exit::OverBudget,
        Exit::Store,
        Exit::OutWrite,
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
                "a rendered prompt exceeds --prompt-budget, or a task's own prompt cannot fit \
                 its max_prompt_tokens"
            }
            Exit::Store => {
                "a run store cannot be opened, locked or written, or a shared store is \
                 unreachable, refuses the login, or is newer or foreign"
            }
            Exit::OutWrite => {
                "an output file (-o/--out, --publish-root) could not be written; no temporary file is left"
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

#[cfg(test)]
mod tests {
    use super::Exit;

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
        assert_eq!(codes.len(), 10);
    }
}
