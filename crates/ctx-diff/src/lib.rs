//! # ctx-diff: what changed between two runs, and why
//!
//! `ctx runs diff A B` compares two stored runs task by task: each task's
//! status, the checks that flipped (on the first attempt and the final
//! one), its output (identical, or a similarity and a unified diff), the
//! inputs that differ ([`Cause`]: its prompt, an entity, a variable, the
//! digest, a dependency's output, the model, a parameter, the engine, or
//! none: the model's variance), and its tokens, cost, cached tokens,
//! attempts and time. A summary comes first; [`gate`] decides a CI job
//! over it (`--fail-on`).
//!
//! Both runs are read through [`RunHistory`], the seam both durable
//! stores offer, so a run directory and a shared PostgreSQL run compare
//! the same way, and a run of one store with a run of the other too.
//! Tasks match by id, a map's items by content hash as a resume matches
//! them ([`matching`]). The causes come from the stored fingerprints and
//! what each run stored beside them ([`cause`]): no new storage.
//!
//! A crate of its own, not a module of ctx-run: it needs the store seam,
//! the plan model and one placeholder rule of ctx-prompt, and nothing of
//! the executor or the SQLite store ctx-run is built around; and its text
//! differ (`similar`) is nobody else's dependency.
//!
//! Output is deterministic: tasks in a fixed order, figures exact
//! (money in [`Usd`]), similarity rounded to four decimals.

use ctx_model::money::Usd;
use ctx_store::{RunHistory, StoreError};
use serde::Serialize;

pub mod as_of;
pub mod cause;
pub mod gate;
mod html;
pub mod matching;
pub mod side;
pub mod task;
mod text;

pub use as_of::{AsOfSession, parse_run_ref};
pub use cause::Cause;
pub use gate::{Condition, GateError, Threshold, Tripped};
pub use matching::{Pair, pair_tasks};
pub use side::RunSide;
pub use task::{Change, CheckChanges, Cost, Count, Delta, Flip, OutputChange, Statuses, TaskDiff};

/// Why two runs could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// A run could not be read from its store.
    #[error("run {run}: {source}")]
    Read {
        /// The run.
        run: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The runs share no task: they are runs of different plans.
    #[error(
        "runs {a} and {b} have no task in common (runs of different plans?); \
         compare them anyway with --allow-disjoint"
    )]
    Disjoint {
        /// Run A.
        a: String,
        /// Run B.
        b: String,
    },
    /// `RUN@N` named a session the run does not have.
    #[error("run {run} has {sessions} session(s): no session {session} to compare as of")]
    NoSession {
        /// The run.
        run: String,
        /// The session asked for.
        session: i64,
        /// How many sessions the run has.
        sessions: i64,
    },
    /// The task asked for is in neither run.
    #[error("no task `{task}` in run {a} or run {b}")]
    NoTask {
        /// The task asked for.
        task: String,
        /// Run A.
        a: String,
        /// Run B.
        b: String,
    },
}

impl DiffError {
    /// A read error of `run`, for `map_err`.
    pub fn read(run: &str) -> impl FnOnce(StoreError) -> DiffError + '_ {
        move |source| DiffError::Read {
            run: run.to_string(),
            source,
        }
    }
}

/// What to compare.
#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// Compare runs that share no task (every task then new or removed).
    pub allow_disjoint: bool,
    /// Keep only this task, with its unified diff.
    pub task: Option<String>,
    /// Compute the unified diff of every changed output (the HTML page
    /// shows them; the JSON then carries them too).
    pub diffs: bool,
}

/// One run as the comparison saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFacts {
    /// Its id.
    pub run_id: String,
    /// Where it stood when read (`running`: compared as it stands).
    pub state: String,
    /// Where it is stored (a path, or a URL without its password).
    pub location: String,
    /// Its tasks: the plan's and its maps' current items.
    pub tasks: usize,
    /// Every task's latest `cost_usd`, summed.
    pub cost_usd: Usd,
    /// Every task's latest `execution_time_ms`, summed.
    pub time_ms: u64,
}

impl RunFacts {
    fn of(side: &RunSide) -> RunFacts {
        let results = || side.latest.values().map(|r| &r.result.metadata);
        RunFacts {
            run_id: side.run_id().to_string(),
            state: side.header.state.as_str().to_string(),
            location: side.header.location.clone(),
            tasks: side.tasks.len(),
            cost_usd: results().filter_map(|m| m.cost_usd).sum(),
            time_ms: results().filter_map(|m| m.execution_time_ms).sum(),
        }
    }
}

/// The counts that come first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Tasks compared (of either run).
    pub tasks: usize,
    /// How many of each [`Change`].
    pub same: usize,
    /// Same status and checks, another output.
    pub output: usize,
    /// A check flipped, same status.
    pub checks: usize,
    /// Another status.
    pub status: usize,
    /// Only in B.
    pub new: usize,
    /// Only in A.
    pub removed: usize,
    /// The tasks with a check that passed in A and did not in B.
    pub check_regressions: Vec<String>,
    /// The tasks that completed in A and did not in B.
    pub status_regressions: Vec<String>,
    /// The runs' total cost and its change.
    pub cost_usd: Cost,
    /// The runs' total task time and its change.
    pub time_ms: Count,
    /// The tasks whose output is not identical (of either run), for the
    /// gate: not in the JSON, where each task says so.
    #[serde(skip)]
    pub changed_outputs: Vec<String>,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    /// Run A (the baseline).
    pub a: RunFacts,
    /// Run B.
    pub b: RunFacts,
    /// The counts.
    pub summary: Summary,
    /// Every task, changed first ([`Change`]'s order), then in B's plan
    /// order (a map's items by index), then A's tasks that B lacks.
    pub tasks: Vec<TaskDiff>,
}

/// Reads both runs and compares them.
pub fn diff_runs(
    a: &dyn RunHistory,
    b: &dyn RunHistory,
    options: &DiffOptions,
) -> Result<RunDiff, DiffError> {
    compare(&RunSide::read(a)?, &RunSide::read(b)?, options)
}

/// Compares two runs read already.
pub fn compare(a: &RunSide, b: &RunSide, options: &DiffOptions) -> Result<RunDiff, DiffError> {
    let pairs = pair_tasks(a, b);
    let common = pairs.iter().any(|p| p.a.is_some() && p.b.is_some());
    if !common && !pairs.is_empty() && !options.allow_disjoint {
        return Err(DiffError::Disjoint {
            a: a.run_id().to_string(),
            b: b.run_id().to_string(),
        });
    }
    let (facts_a, facts_b) = (RunFacts::of(a), RunFacts::of(b));
    let mut tasks: Vec<TaskDiff> = pairs
        .iter()
        .map(|p| task::task_diff(a, b, p, options.diffs))
        .collect();
    // Stable: within a change, the pairs' order (B's plan order, its
    // items by index, then what only A has).
    tasks.sort_by_key(|t| t.change);
    let summary = summary(&tasks, &facts_a, &facts_b);
    if let Some(id) = &options.task {
        let Some(pair) = pairs
            .iter()
            .find(|p| p.id() == id || p.a.as_ref() == Some(id))
        else {
            return Err(DiffError::NoTask {
                task: id.clone(),
                a: facts_a.run_id,
                b: facts_b.run_id,
            });
        };
        tasks = vec![task::task_diff(a, b, pair, true)];
    }
    Ok(RunDiff {
        a: facts_a,
        b: facts_b,
        summary,
        tasks,
    })
}

fn summary(tasks: &[TaskDiff], a: &RunFacts, b: &RunFacts) -> Summary {
    let n = |c: Change| tasks.iter().filter(|t| t.change == c).count();
    let ids = |f: fn(&TaskDiff) -> bool| {
        let mut v: Vec<String> = tasks
            .iter()
            .filter(|t| f(t))
            .map(|t| t.id.clone())
            .collect();
        v.sort();
        v
    };
    Summary {
        tasks: tasks.len(),
        same: n(Change::Same),
        output: n(Change::Output),
        checks: n(Change::Checks),
        status: n(Change::Status),
        new: n(Change::New),
        removed: n(Change::Removed),
        check_regressions: ids(TaskDiff::check_regressed),
        status_regressions: ids(TaskDiff::status_regressed),
        cost_usd: task::cost(Some(a.cost_usd), Some(b.cost_usd)),
        time_ms: task::count(Some(a.time_ms), Some(b.time_ms)),
        changed_outputs: ids(|t| !t.output.identical),
    }
}

#[cfg(test)]
mod tests;
