//! `ctx spend`: what the stored runs spent, from the stored cost of every
//! attempt, summed over a period and grouped by plan, model, day or run
//! (docs/cost.md, "Spend over runs"). The sums are ctx-run's
//! ([`ctx_run::spend`]); this module reads the flags, opens the store and
//! prints.
//!
//! Exit codes: 0 the table was printed (a period with no attempts
//! included: it says so); 2 a malformed `--since`/`--until` (flag and
//! value quoted) or `--since` after `--until`, before any store is read;
//! 4 a store that cannot be read, or a run in it that cannot (named on
//! stderr: every readable run is still summed and printed).

use ctx_run::spend::{GroupBy, Period, Spend, SpendTally};
use ctx_table::printable_lines;

use super::runs::RootArg;
use crate::exit::{CliError, CliResult, Exit};
use crate::io::{json_text, print_stdout};
use crate::runtime::block_on;

// `ctx spend`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Count attempts that started at or after DATE: a day (YYYY-MM-DD,
    /// from its first instant, UTC) or an RFC 3339 time.
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Count attempts that started at or before DATE: a day (YYYY-MM-DD,
    /// through its last instant, UTC) or an RFC 3339 time.
    #[arg(long, value_name = "DATE")]
    until: Option<String>,
    /// Group by the run's plan, the model, the UTC day an attempt started,
    /// or the run.
    #[arg(long, value_enum, default_value = "plan")]
    by: By,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: SpendFormat,
    #[command(flatten)]
    root: RootArg,
}

/// `--by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum By {
    /// The run's plan path as given (else its goal).
    Plan,
    /// The model that answered.
    Model,
    /// The UTC day each attempt started.
    Day,
    /// The run.
    Run,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SpendFormat {
    /// A table, the total and the unpriced models named.
    Text,
    /// One JSON object: the period, the groups and the total.
    Json,
    /// One row per group, for spreadsheets.
    Csv,
}

/// Runs the command.
pub fn run(a: Args) -> CliResult {
    let period = Period::parse(a.since.as_deref(), a.until.as_deref()).map_err(CliError::usage)?;
    let by = match a.by {
        By::Plan => GroupBy::Plan,
        By::Model => GroupBy::Model,
        By::Day => GroupBy::Day,
        By::Run => GroupBy::Run,
    };
    let mut tally = SpendTally::new(by, period);
    let (location, unreadable) = match a.root.shared()? {
        Some(url) => shared(&url, &mut tally)?,
        None => local(&a.root, &mut tally)?,
    };
    print(&tally.finish(), &location, a.format)?;
    Ok(if unreadable == 0 {
        Exit::Ok
    } else {
        Exit::Store
    })
}

/// Adds every run under the root; returns the root and how many runs
/// could not be read (each named on stderr).
fn local(root: &RootArg, tally: &mut SpendTally) -> Result<(String, usize), CliError> {
    let runs = ctx_store_sqlite::RunRoot::new(&root.root);
    let mut unreadable = 0;
    for view in runs.open_each()? {
        let read = match view {
            Ok(view) => tally.add(&view).map_err(|e| e.to_string()),
            Err(bad) => Err(bad.error.to_string()),
        };
        if let Err(e) = read {
            warn(&e);
            unreadable += 1;
        }
    }
    Ok((runs.path().display().to_string(), unreadable))
}

/// Adds every run of the shared store at `url`; as [`local`].
fn shared(url: &str, tally: &mut SpendTally) -> Result<(String, usize), CliError> {
    let (store, ids) =
        block_on(ctx_worker::runs::run_ids(url))?.map_err(super::runs::shared::shared)?;
    let mut unreadable = 0;
    for id in ids {
        let read = match store.view(&id) {
            Ok(view) => tally.add(&view).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = read {
            warn(&e);
            unreadable += 1;
        }
    }
    Ok((store.display_url().to_string(), unreadable))
}

fn warn(error: &str) {
    eprintln!("warning: {}", printable_lines(error));
}

/// Prints `spend` in `format`. A period without attempts is said in
/// words: on stdout as the text, on stderr beside an empty JSON or CSV.
fn print(spend: &Spend, location: &str, format: SpendFormat) -> Result<(), CliError> {
    let empty = spend.total.attempts == 0;
    match format {
        SpendFormat::Text => return print_stdout(&spend.text(location)),
        SpendFormat::Json => print_stdout(&json_text(spend)?)?,
        SpendFormat::Csv => print_stdout(&spend.csv())?,
    }
    if empty {
        eprint!("{}", spend.text(location));
    }
    Ok(())
}
