//! `ctx spend`: what stored runs spent, summed over a period and grouped
//! by plan, model, day or run, from either store.
//!
//! The figures are the stored costs, never prices applied again: each
//! attempt (a result a run recorded as completed or failed: every
//! execution of a task, the executions of earlier sessions and the retries
//! of a resume included) counts its stored `cost_usd`, which already holds
//! the task's failed calls, its check retries and judge calls and its
//! `llm` summaries (docs/cost.md, "What a run spent"). The sum is
//! [`ResultCost`]'s, the one rule [`crate::spent`] sums a run by, so the
//! spend of one run over every instant is that run's `spent_usd`.
//!
//! An attempt whose `cost_usd` is absent ran on a model no price source
//! knew: it is **unpriced**. It is counted (`unpriced_attempts`) and its
//! models are named (`unpriced_models`: the task's model and those of its
//! judges and summaries, since the stored cost is the attempt's as a
//! whole), and it adds nothing to `spent_usd`: a sum with unpriced
//! attempts is a lower bound, never a figure in which they cost $0.
//!
//! Where an attempt is counted:
//!
//! - its **start** is the instant its result was recorded less its
//!   `execution_time_ms` (the same on both stores; a result without a
//!   duration starts when it was recorded). The period
//!   ([`Period`]) and `--by day` (the start's UTC day) read it;
//! - each attempt is placed by its own start alone, never by the order the
//!   runs or its neighbours were recorded in: a clock that moved
//!   backwards puts an attempt in the day its timestamp says, and no
//!   attempt is counted twice or left out;
//! - its **plan** is the run's plan path as given to its last session,
//!   else the plan's goal (as `ctx runs list` shows it), else `-`;
//! - its **model** is the model the engine reported for it, else the
//!   task's `params.model` in the run's plan (a map item's: its map
//!   task's), else `(engine default)`. A task's judge and summary calls
//!   are in its attempt's cost, so they count under the task's model.
//!
//! Runs are read one at a time ([`SpendTally::add`]), so memory grows with
//! the number of groups, not of runs.

mod output;
pub mod period;

use std::collections::{BTreeMap, BTreeSet};

use ctx_cost::Usd;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_report::{Timestamp, TimestampError};
use ctx_store::{ResultRecord, RunHistory, StoreError};

pub use output::CSV_COLUMNS;
pub use period::{Period, PeriodError};

use crate::ResultCost;

/// How attempts are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    /// By the run's plan.
    Plan,
    /// By the model that answered.
    Model,
    /// By the UTC day each attempt started.
    Day,
    /// By run.
    Run,
}

impl GroupBy {
    /// The grouping's name, as `--by` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Plan => "plan",
            GroupBy::Model => "model",
            GroupBy::Day => "day",
            GroupBy::Run => "run",
        }
    }
}

/// Why a run's spend could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SpendError {
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] StoreError),
    /// A stored time is not RFC 3339 (a damaged or foreign store).
    #[error("{location}: run {run}, task `{task}`: recorded_at: {source}")]
    Time {
        /// The store, as its header names it.
        location: String,
        /// The run's id.
        run: String,
        /// The task whose result holds the time.
        task: String,
        /// The parse error.
        #[source]
        source: TimestampError,
    },
}

/// One group's figures (or the total's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SpendRow {
    /// The plan, model, day or run id; `total` for the total.
    pub key: String,
    /// Runs with at least one attempt counted here.
    pub runs: usize,
    /// Attempts counted here, unpriced ones included.
    pub attempts: usize,
    /// The sum of the priced attempts' stored costs.
    pub spent_usd: Usd,
    /// Attempts with no stored cost (no price was known).
    pub unpriced_attempts: usize,
    /// The models the unpriced attempts called, sorted, each once.
    pub unpriced_models: Vec<String>,
}

/// What `ctx spend` prints: the groups, sorted by key, and their total.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Spend {
    /// The grouping.
    pub by: GroupBy,
    /// The period's first instant counted, if bounded.
    pub since: Option<Timestamp>,
    /// The period's first instant not counted, if bounded.
    pub before: Option<Timestamp>,
    /// Runs read (with or without attempts in the period).
    pub runs_read: usize,
    /// One row per group, sorted by key.
    pub groups: Vec<SpendRow>,
    /// Every group together (`key`: `total`).
    pub total: SpendRow,
}

/// A group's figures while runs are added.
#[derive(Debug, Default)]
struct Acc {
    runs: usize,
    /// The index of the last run counted in `runs`.
    last_run: Option<usize>,
    attempts: usize,
    spent: Usd,
    unpriced: usize,
    models: BTreeSet<String>,
}

impl Acc {
    fn add(&mut self, run: usize, cost: &ResultCost, models: &BTreeSet<String>) {
        if self.last_run != Some(run) {
            self.runs += 1;
            self.last_run = Some(run);
        }
        // A restating row is its execution's, counted with the row it
        // restates.
        if !matches!(cost, ResultCost::Added(_) | ResultCost::AddedUnpriced) {
            self.attempts += 1;
        }
        match cost {
            ResultCost::Priced(c) | ResultCost::Added(c) => {
                self.spent = self.spent.saturating_add(*c);
            }
            ResultCost::Unpriced | ResultCost::AddedUnpriced => {
                self.unpriced += 1;
                self.models.extend(models.iter().cloned());
            }
            ResultCost::NoCost => {}
        }
    }

    fn row(self, key: String) -> SpendRow {
        SpendRow {
            key,
            runs: self.runs,
            attempts: self.attempts,
            spent_usd: self.spent,
            unpriced_attempts: self.unpriced,
            unpriced_models: self.models.into_iter().collect(),
        }
    }
}

/// Runs added one at a time, summed into groups.
#[derive(Debug)]
pub struct SpendTally {
    by: GroupBy,
    period: Period,
    runs_read: usize,
    groups: BTreeMap<String, Acc>,
    total: Acc,
}

impl SpendTally {
    /// An empty tally grouping `by` over `period`.
    pub fn new(by: GroupBy, period: Period) -> Self {
        SpendTally {
            by,
            period,
            runs_read: 0,
            groups: BTreeMap::new(),
            total: Acc::default(),
        }
    }

    /// Adds every attempt `run` recorded in the period. On an error nothing
    /// of the run is added.
    pub fn add(&mut self, run: &dyn RunHistory) -> Result<(), SpendError> {
        let attempts = attempts_of(run, self.by, &self.period)?;
        let index = self.runs_read;
        self.runs_read += 1;
        for a in attempts {
            self.groups
                .entry(a.key)
                .or_default()
                .add(index, &a.cost, &a.models);
            self.total.add(index, &a.cost, &a.models);
        }
        Ok(())
    }

    /// The groups, sorted by key, and their total.
    pub fn finish(self) -> Spend {
        Spend {
            by: self.by,
            since: self.period.since,
            before: self.period.before,
            runs_read: self.runs_read,
            groups: self
                .groups
                .into_iter()
                .map(|(key, acc)| acc.row(key))
                .collect(),
            total: self.total.row("total".to_string()),
        }
    }
}

/// What every run in `runs` spent in `period`, grouped `by`.
pub fn spend<'a>(
    runs: impl IntoIterator<Item = &'a dyn RunHistory>,
    by: GroupBy,
    period: Period,
) -> Result<Spend, SpendError> {
    let mut tally = SpendTally::new(by, period);
    for run in runs {
        tally.add(run)?;
    }
    Ok(tally.finish())
}

/// One attempt counted: its group, its cost, and the models it called when
/// it is unpriced.
struct Counted {
    key: String,
    cost: ResultCost,
    models: BTreeSet<String>,
}

/// The attempts `run` recorded in `period`, each with its group: read in
/// full before any is counted, so a run that cannot be read adds nothing.
fn attempts_of(
    run: &dyn RunHistory,
    by: GroupBy,
    period: &Period,
) -> Result<Vec<Counted>, SpendError> {
    let header = run.header()?;
    let mut plan = LazyPlan::default();
    let plan_key = match (by, &header.plan_source) {
        (GroupBy::Plan, Some(p)) => p.clone(),
        (GroupBy::Plan, None) => plan.get(run)?.goal.clone().unwrap_or_else(|| "-".into()),
        _ => String::new(),
    };
    let mut out = Vec::new();
    for r in run.every_history()? {
        if !matches!(r.result.status, TaskStatus::Completed | TaskStatus::Failed) {
            continue;
        }
        let start = attempt_start(&r).map_err(|source| SpendError::Time {
            location: header.location.clone(),
            run: header.run_id.clone(),
            task: r.result.task_id.clone(),
            source,
        })?;
        if !period.contains(start) {
            continue;
        }
        let cost = ResultCost::of(&r.result);
        let unpriced = matches!(cost, ResultCost::Unpriced | ResultCost::AddedUnpriced);
        let model = if by == GroupBy::Model || unpriced {
            model_of(&r.result, &mut plan, run)?
        } else {
            String::new()
        };
        let models = if unpriced {
            called_models(&r.result, &model)
        } else {
            BTreeSet::new()
        };
        let key = match by {
            GroupBy::Plan => plan_key.clone(),
            GroupBy::Model => model,
            GroupBy::Day => period::utc_day(start),
            GroupBy::Run => header.run_id.clone(),
        };
        out.push(Counted { key, cost, models });
    }
    Ok(out)
}

/// The run's plan, read the first time it is needed.
#[derive(Default)]
struct LazyPlan(Option<Plan>);

impl LazyPlan {
    fn get(&mut self, run: &dyn RunHistory) -> Result<&Plan, StoreError> {
        let plan = match self.0.take() {
            Some(p) => p,
            None => run.plan()?,
        };
        Ok(self.0.insert(plan))
    }
}

/// When an attempt started: its result's `recorded_at` less its
/// `execution_time_ms`.
fn attempt_start(r: &ResultRecord) -> Result<Timestamp, TimestampError> {
    let recorded = Timestamp::parse_rfc3339(&r.recorded_at)?;
    let took = r.result.metadata.execution_time_ms.unwrap_or(0);
    let took = i64::try_from(took).unwrap_or(i64::MAX);
    Ok(Timestamp::from_unix_ms(
        recorded.unix_ms().saturating_sub(took),
    ))
}

/// The model an attempt ran on: the engine's report, else the task's
/// `params.model` in `plan` (a map item's: its map task's), else
/// `(engine default)`.
fn model_of(
    result: &TaskExecutionResult,
    plan: &mut LazyPlan,
    run: &dyn RunHistory,
) -> Result<String, StoreError> {
    if let Some(m) = &result.metadata.model {
        return Ok(m.clone());
    }
    let id = ctx_model::map::parse_item_id(&result.task_id)
        .map_or(result.task_id.as_str(), |(task, _)| task);
    Ok(plan
        .get(run)?
        .sub_tasks
        .iter()
        .find(|t| t.id == id)
        .and_then(|t| t.tool_or_prompt.params.model.clone())
        .unwrap_or_else(|| DEFAULT_MODEL.to_string()))
}

/// The model of an attempt whose engine and plan name none.
const DEFAULT_MODEL: &str = "(engine default)";

/// Every model an unpriced attempt called: its own (`model`), its judges'
/// (a judge without `judge_model` asks the task's) and its summaries'.
fn called_models(result: &TaskExecutionResult, model: &str) -> BTreeSet<String> {
    let m = &result.metadata;
    let judges = m
        .check_attempts
        .iter()
        .flat_map(|a| &a.judge_calls)
        .map(|j| j.model.clone().unwrap_or_else(|| model.to_string()));
    let summaries = m
        .summary
        .iter()
        .flat_map(|s| &s.calls)
        .map(|c| c.model.clone().unwrap_or_else(|| model.to_string()));
    std::iter::once(model.to_string())
        .chain(judges)
        .chain(summaries)
        .collect()
}

#[cfg(test)]
mod tests;
