//! A run under a period budget (`config.budget`, `ctx run --budget`):
//! before anything is created or called, the run holds its high end of
//! what the budget's calendar period (UTC) has left, in the store root's
//! ledger ([`ctx_store_sqlite::PeriodLedger`]); a run whose high end does
//! not fit is refused. The run then executes under `--max-cost` set to
//! what it holds, so each task reserves its own high end and settles at
//! its real cost in the executor's ledger, as any `--max-cost` run does
//! (one mechanism). When the session ends, its hold is replaced by what
//! it spent.
//!
//! The period is read from the clock once, when the hold is taken, and
//! the hold names it: a run settles in the period it reserved from even
//! when the clock moved back (or on) across the boundary meanwhile. A
//! killed run's hold is never settled: it stays counted as spent for the
//! rest of its period, so the budget is never exceeded (docs/cost.md).

use std::collections::HashSet;

use chrono::{DateTime, Datelike, Days, Utc};
use ctx_cost::Usd;
use ctx_deps::ExecutorOptions;
use ctx_model::{BudgetPeriod, PeriodBudget, Plan};
use ctx_store_sqlite::{PeriodGrant, PeriodKey, PeriodLedger, PeriodState, RunRoot};
use thiserror::Error;

/// Why a run under a period budget cannot start.
#[derive(Debug, Error)]
pub enum PeriodBudgetError {
    /// What is left of the period is below the run's high end.
    #[error(transparent)]
    Refused(Box<Refusal>),
    /// A task's high end is unknown (no price, no `max_tokens`), so the
    /// run cannot be held against the budget.
    #[error(
        "config.budget: task `{task}` has no high end (no price for its model, or no max_tokens)"
    )]
    Unbounded {
        /// The task.
        task: String,
    },
    /// The run has no prices at all.
    #[error("config.budget: the run has no prices to hold its high end with")]
    NoPrices,
    /// The run keeps no store (`--no-store`): there is no ledger.
    #[error("config.budget: a period budget needs a run store, and this run keeps none")]
    NoStore,
}

/// A run refused by its period budget: the figures.
#[derive(Debug, Error)]
#[error(
    "budget `{name}` ({period} from {start}, UTC): ${left} left of ${budget} (${spent} spent, ${held} held by runs in progress); this run's high end is ${high}; nothing was run"
)]
pub struct Refusal {
    /// The budget's name.
    pub name: String,
    /// Its period.
    pub period: BudgetPeriod,
    /// The period's first day.
    pub start: String,
    /// The budget.
    pub budget: Usd,
    /// Spent by settled runs.
    pub spent: Usd,
    /// Held by runs in progress.
    pub held: Usd,
    /// What is left.
    pub left: Usd,
    /// The run's high end.
    pub high: Usd,
}

/// The first day (UTC) of the `period` holding `now`: the day, the ISO
/// week's Monday, or the month's first day, as `YYYY-MM-DD`.
pub fn period_start(period: BudgetPeriod, now: DateTime<Utc>) -> String {
    let day = now.date_naive();
    let start = match period {
        BudgetPeriod::Day => Some(day),
        BudgetPeriod::Week => {
            day.checked_sub_days(Days::new(u64::from(day.weekday().num_days_from_monday())))
        }
        BudgetPeriod::Month => day.with_day(1),
    };
    start.unwrap_or(day).format("%Y-%m-%d").to_string()
}

/// The budget's name: its own, else the plan file's stem, else the
/// plan's goal, else `plan`.
pub fn budget_name(budget: &PeriodBudget, plan: &Plan, source: Option<&str>) -> String {
    budget
        .name
        .clone()
        .or_else(|| {
            let stem = std::path::Path::new(source?).file_stem()?;
            Some(stem.to_string_lossy().into_owned())
        })
        .or_else(|| plan.goal.clone())
        .unwrap_or_else(|| "plan".to_string())
}

/// Why the tier of a run under a period budget with fallbacks could not
/// be chosen: the figures it is chosen from could not be read.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("config.budget.fallback: the tier could not be chosen from {what}: {detail}")]
pub struct TierError {
    /// What was read: the period ledger under a root, or a stored run.
    pub what: String,
    /// Why it could not be.
    pub detail: String,
}

/// The cheaper tier (`config.budget.fallback`) a local run starts on,
/// applied to `plan`; `None` is the standard tier (no fallbacks, or the
/// period's use below every threshold).
///
/// **Chosen once, when the run starts**, and before its high end is
/// computed and held, so the hold is taken at the tier's prices: a run is
/// one unit of a pipeline (one weekly digest), and moving it to another
/// model midway would change the prompts and the voice of a half-done
/// run. For a new run the tier comes from the period's use in the root's
/// ledger (spent, and held by runs in progress: what another run has
/// taken counts, as it does for the hold), read without holding anything.
/// A resumed run keeps the tier its first session recorded, so its stored
/// results' fingerprints still match; the period's use then does not
/// move it. The use may change between this read and the hold (another
/// run starting): the hold is still atomic, and the tier is the one read.
pub fn choose_tier(
    store: &crate::settings::StoreChoice,
    plan: &mut Plan,
    source: Option<&str>,
) -> Result<Option<ctx_model::FallbackChoice>, TierError> {
    let Some(budget) = with_fallbacks(plan) else {
        return Ok(None);
    };
    let crate::settings::StoreChoice::Local(crate::RunStore::Sqlite { root, start, .. }) = store
    else {
        return Ok(None);
    };
    let choice = match start {
        crate::Start::Resume(run) => stored_tier(root, run)?,
        crate::Start::New | crate::Start::NewIn(_) => {
            let key = period_key(&budget, plan, source);
            let state = root
                .period_ledger()
                .and_then(|l| l.state(&key, budget.usd))
                .map_err(|e| TierError {
                    what: format!("the period ledger under {}", root.path().display()),
                    detail: e.to_string(),
                })?;
            return Ok(tier_for(plan, key, &state));
        }
    };
    if let Some(c) = &choice {
        apply_tier(plan, c);
    }
    Ok(choice)
}

/// `plan`'s period budget when it has cheaper tiers.
pub fn with_fallbacks(plan: &Plan) -> Option<PeriodBudget> {
    plan.config
        .budget
        .clone()
        .filter(|b| !b.fallback.is_empty())
}

/// The tier a new run of `plan` starts on when its period stands at
/// `state` (under `key`), applied to `plan`: any store's rule, the
/// figures being its own ledger's.
pub fn tier_for(
    plan: &mut Plan,
    key: PeriodKey,
    state: &PeriodState,
) -> Option<ctx_model::FallbackChoice> {
    let budget = plan.config.budget.clone()?;
    let used = state.spent.saturating_add(state.held);
    let choice = new_choice(plan, &budget, budget.tier(used)?, key, used);
    apply_tier(plan, &choice);
    Some(choice)
}

/// The period of `budget` a run of `plan` starting now holds from: the
/// budget's name and the first day of the period (UTC) the clock is in.
pub fn period_key(budget: &PeriodBudget, plan: &Plan, source: Option<&str>) -> PeriodKey {
    PeriodKey {
        name: budget_name(budget, plan, source),
        start: period_start(budget.period, Utc::now()),
    }
}

/// A hold's holder: this process and the time, so two runs of one
/// process (or one machine) are told apart.
pub fn new_holder() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        Utc::now().timestamp_nanos_opt().unwrap_or_default()
    )
}

/// How alerts and refusals name a budget's period: `budget `NAME`
/// (PERIOD from DAY, UTC)`.
pub fn hold_label(key: &PeriodKey, period: BudgetPeriod) -> String {
    format!("budget `{}` ({} from {}, UTC)", key.name, period, key.start)
}

/// The refusal of a run whose high end `high` does not fit what
/// `budget`'s period (`key`) has left (`state`).
pub fn refusal(
    key: PeriodKey,
    budget: &PeriodBudget,
    state: PeriodState,
    high: Usd,
) -> PeriodBudgetError {
    let PeriodState { spent, held, left } = state;
    PeriodBudgetError::Refused(Box::new(Refusal {
        name: key.name,
        period: budget.period,
        start: key.start,
        budget: budget.usd,
        spent,
        held,
        left,
        high,
    }))
}

/// The tier run `run` under `root` recorded.
fn stored_tier(root: &RunRoot, run: &str) -> Result<Option<ctx_model::FallbackChoice>, TierError> {
    root.open(run)
        .and_then(|view| view.fallback())
        .map_err(|e| TierError {
            what: format!("run {run}"),
            detail: e.to_string(),
        })
}

/// The tasks `tier` moves in `plan`: each that names another model (or,
/// with a cap, another `max_tokens`), with the model it names.
fn moved_tasks(plan: &Plan, tier: &ctx_model::BudgetFallback) -> Vec<ctx_model::FallbackTask> {
    plan.sub_tasks
        .iter()
        .filter(|t| {
            let p = &t.tool_or_prompt.params;
            p.model.as_deref() != Some(tier.model.as_str())
                || tier.max_tokens.is_some_and(|n| p.max_tokens != Some(n))
        })
        .map(|t| ctx_model::FallbackTask {
            task_id: t.id.clone(),
            from: t.tool_or_prompt.params.model.clone(),
        })
        .collect()
}

/// The record of `tier` chosen for `plan` when the period's use was
/// `used`.
fn new_choice(
    plan: &Plan,
    budget: &PeriodBudget,
    tier: &ctx_model::BudgetFallback,
    key: PeriodKey,
    used: Usd,
) -> ctx_model::FallbackChoice {
    ctx_model::FallbackChoice {
        budget: key.name,
        period: budget.period,
        period_start: key.start,
        budget_usd: budget.usd,
        used_usd: used,
        above: tier.above,
        model: tier.model.clone(),
        max_tokens: tier.max_tokens,
        tasks: moved_tasks(plan, tier),
    }
}

/// Moves each task `choice` names to its model (and cap): the tasks'
/// prices, tokenizers and high ends follow from the plan as it runs.
/// Idempotent, so a resume applies a stored choice to a stored plan that
/// already has it.
pub fn apply_tier(plan: &mut Plan, choice: &ctx_model::FallbackChoice) {
    move_tasks(plan, &choice.model, choice.max_tokens, &choice.tasks);
}

fn move_tasks(
    plan: &mut Plan,
    model: &str,
    max_tokens: Option<u32>,
    tasks: &[ctx_model::FallbackTask],
) {
    let moved: std::collections::HashSet<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
    for t in plan
        .sub_tasks
        .iter_mut()
        .filter(|t| moved.contains(t.id.as_str()))
    {
        let params = &mut t.tool_or_prompt.params;
        params.model = Some(model.to_string());
        if let Some(n) = max_tokens {
            params.max_tokens = Some(n);
        }
    }
}

/// `plan` as it runs on `tier`.
pub fn plan_on_tier(plan: &Plan, tier: &ctx_model::BudgetFallback) -> Plan {
    let mut on = plan.clone();
    let tasks = moved_tasks(plan, tier);
    move_tasks(&mut on, &tier.model, tier.max_tokens, &tasks);
    on
}

/// One tier's range of a plan's cost, as `ctx plan cost` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TierRange {
    /// The threshold (`None`: the standard tier).
    pub above: Option<f64>,
    /// The tier's model (`None`: each task's own).
    pub model: Option<String>,
    /// The tier's cap, when it sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The plan's range on the tier.
    pub total: ctx_cost::CostTotal,
}

/// The plan's range on each tier of its period budget: the standard
/// tier's (`standard`, the report already computed) then each
/// fallback's, each priced by `book` as `ctx plan cost` prices the plan.
/// Empty without fallbacks.
pub fn tier_ranges(
    plan: &Plan,
    standard: &ctx_cost::CostTotal,
    defaults: &crate::estimate::EngineDefaults<'_>,
    book: &ctx_cost::PriceBook,
) -> Result<Vec<TierRange>, crate::estimate::EstimateError> {
    let Some(budget) = plan
        .config
        .budget
        .as_ref()
        .filter(|b| !b.fallback.is_empty())
    else {
        return Ok(Vec::new());
    };
    let mut out = vec![TierRange {
        above: None,
        model: None,
        max_tokens: None,
        total: standard.clone(),
    }];
    for tier in &budget.fallback {
        let on = plan_on_tier(plan, tier);
        let estimates = crate::estimate::estimate_plan(&on, defaults)?;
        out.push(TierRange {
            above: Some(tier.above),
            model: Some(tier.model.clone()),
            max_tokens: tier.max_tokens,
            total: ctx_cost::estimate_costs(book, &estimates).total,
        });
    }
    Ok(out)
}

/// `ctx plan cost --format json`'s object: the report's keys, then
/// `tiers` when the plan has fallbacks.
#[derive(Debug, serde::Serialize)]
pub struct WithTiers<'a> {
    /// The report.
    #[serde(flatten)]
    pub report: &'a ctx_cost::CostReport,
    /// [`tier_ranges`]; left out when empty.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tiers: &'a [TierRange],
}

/// [`tier_ranges`] as text, after `ctx plan cost`'s table.
pub fn tier_ranges_text(tiers: &[TierRange]) -> String {
    if tiers.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 4]> = tiers
        .iter()
        .map(|t| {
            [
                match t.above {
                    Some(a) => format!("from {}% used", a * 100.0),
                    None => "standard".to_string(),
                },
                match (&t.model, t.max_tokens) {
                    (Some(m), Some(n)) => format!("{m} (max_tokens {n})"),
                    (Some(m), None) => m.clone(),
                    (None, _) => "each task's".to_string(),
                },
                t.total.low_text(),
                t.total.high_text(),
            ]
        })
        .collect();
    format!(
        "\nbudget tiers (config.budget.fallback; a run's tier is chosen when it starts, from the period's use):\n{}",
        ctx_table::render(
            &["tier", "model", "cost low", "cost high"],
            &[false, false, true, true],
            &rows
        )
    )
}

/// A run's tier as `--format json`, `ctx runs show --format json` and the
/// report's data give it: the stored record, the use as a fraction, and
/// the reason in words.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FallbackJson {
    /// The record as stored.
    #[serde(flatten)]
    pub choice: ctx_model::FallbackChoice,
    /// The period's use over the budget when the run started.
    pub used_fraction: f64,
    /// Why, in words ([`ctx_model::FallbackChoice::reason`]).
    pub reason: String,
}

impl FallbackJson {
    /// The JSON of `choice`.
    pub fn of(choice: &ctx_model::FallbackChoice) -> FallbackJson {
        FallbackJson {
            used_fraction: choice.used_fraction(),
            reason: choice.reason(),
            choice: choice.clone(),
        }
    }
}

/// The lines a run's text summary and `ctx runs show` give a run on a
/// cheaper tier: why, then each task moved and the model it would have
/// called.
pub fn fallback_text(choice: &ctx_model::FallbackChoice) -> String {
    let mut out = format!("fallback: {}\n", choice.reason());
    for t in &choice.tasks {
        let from = match &t.from {
            Some(model) => format!("`{model}`"),
            None => "the engine's default model".to_string(),
        };
        out.push_str(&format!(
            "  {} ran on `{}` instead of {from}\n",
            t.task_id, choice.model
        ));
    }
    out
}

/// A run's hold on its period, settled when the session ends.
#[derive(Debug)]
pub(crate) struct PeriodHold {
    ledger: PeriodLedger,
    key: PeriodKey,
    holder: String,
    /// What the run holds: its high end.
    high: Usd,
    /// The budget.
    budget: Usd,
    /// What was spent and held of the period before this hold.
    before: Usd,
    /// `budget `NAME` (PERIOD from DAY, UTC)`, for alerts.
    label: String,
}

/// The run's high end under `options`' prices: every task's but the
/// `reused` ones'.
fn high_end(
    plan: &Plan,
    options: &ExecutorOptions,
    reused: &HashSet<String>,
) -> Result<Usd, PeriodBudgetError> {
    let cost = options.cost.as_ref().ok_or(PeriodBudgetError::NoPrices)?;
    left_to_run(plan, cost, reused)
}

/// The high end a run of `plan` holds of its period under `cost`'s
/// prices: every task's (before any map expands), as `ctx plan cost`
/// gives it.
pub fn run_high_end(plan: &Plan, cost: &ctx_deps::CostOptions) -> Result<Usd, PeriodBudgetError> {
    left_to_run(plan, cost, &HashSet::new())
}

/// The high end of what is left to run of `plan`: every task's but those
/// a resume reuses (`reused`: their stored results stand, and what they
/// cost was settled in the period when they ran). The tasks a resume runs
/// again (changed, failed, forced by `--rerun`, or below one of those)
/// are held in full.
pub fn left_to_run(
    plan: &Plan,
    cost: &ctx_deps::CostOptions,
    reused: &HashSet<String>,
) -> Result<Usd, PeriodBudgetError> {
    let run = plan.sub_tasks.iter().filter(|t| !reused.contains(&t.id));
    run.into_iter().try_fold(Usd::ZERO, |sum, t| {
        let high = cost
            .model
            .bound(t)
            .ok_or_else(|| PeriodBudgetError::Unbounded { task: t.id.clone() })?;
        Ok(sum.saturating_add(high))
    })
}

/// Holds the run's high end of `plan`'s period budget in `root`'s ledger
/// (`None`: the plan has none), or refuses the run. A resume holds only
/// what is left to run: every task's high end but the `reused` ones'.
pub(crate) fn reserve(
    root: &RunRoot,
    plan: &Plan,
    source: Option<&str>,
    options: &ExecutorOptions,
    reused: &HashSet<String>,
) -> Result<Option<PeriodHold>, crate::RunError> {
    let Some(budget) = &plan.config.budget else {
        return Ok(None);
    };
    let high = high_end(plan, options, reused)?;
    let key = period_key(budget, plan, source);
    let ledger = root.period_ledger()?;
    let holder = new_holder();
    match ledger.reserve(&key, budget.usd, &holder, high)? {
        PeriodGrant::Held(state) => Ok(Some(PeriodHold {
            label: hold_label(&key, budget.period),
            ledger,
            key,
            holder,
            high,
            budget: budget.usd,
            before: state.spent.saturating_add(state.held),
        })),
        PeriodGrant::Refused(state) => Err(refusal(key, budget, state, high).into()),
    }
}

impl PeriodHold {
    /// Bounds the run by what it holds: `--max-cost` becomes the hold
    /// (on top of what a resumed run spent before), or stays the smaller
    /// one given.
    pub(crate) fn limit(&self, options: &mut ExecutorOptions) {
        if let Some(cost) = options.cost.as_mut() {
            let held = cost.already_spent.saturating_add(self.high);
            cost.max_cost = Some(cost.max_cost.map_or(held, |m| m.min(held)));
        }
    }

    /// The `thresholds` crossed from before the hold to the period's use
    /// now (spent, and held by runs in progress).
    pub(crate) fn alerts(
        &self,
        thresholds: &[f64],
    ) -> Result<Vec<crate::alerts::Alert>, ctx_store_sqlite::Error> {
        let now = self.ledger.state(&self.key, self.budget)?;
        let used = now.spent.saturating_add(now.held);
        Ok(crate::alerts::crossed(
            thresholds,
            self.before,
            used,
            self.budget,
            &self.label,
        ))
    }

    /// Replaces the hold by what the session `spent`.
    pub(crate) fn settle(&self, spent: Usd) -> Result<(), ctx_store_sqlite::Error> {
        self.ledger.settle(&self.key, &self.holder, spent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn periods_start_on_the_utc_day_monday_and_first() {
        // 2026-12-06 is a Sunday; 23:30 at -02:00 is the 7th in UTC.
        let t = at("2026-12-06T23:30:00-02:00");
        assert_eq!(period_start(BudgetPeriod::Day, t), "2026-12-07");
        assert_eq!(period_start(BudgetPeriod::Week, t), "2026-12-07");
        assert_eq!(period_start(BudgetPeriod::Month, t), "2026-12-01");
        let sunday = at("2026-12-06T12:00:00Z");
        assert_eq!(period_start(BudgetPeriod::Week, sunday), "2026-11-30");
        assert_eq!(
            period_start(BudgetPeriod::Month, at("2027-01-01T00:00:00Z")),
            "2027-01-01"
        );
    }

    #[test]
    fn the_name_is_the_budgets_else_the_files_else_the_goal() {
        let mut plan = ctx_test_support::plan(&[("a", &[])]);
        plan.goal = None;
        let b = PeriodBudget {
            period: BudgetPeriod::Day,
            usd: Usd::ZERO,
            name: None,
            fallback: Vec::new(),
        };
        assert_eq!(budget_name(&b, &plan, Some("dir/nightly.yaml")), "nightly");
        plan.goal = Some("Goal".into());
        assert_eq!(budget_name(&b, &plan, None), "Goal");
        let named = PeriodBudget {
            name: Some("team".into()),
            ..b
        };
        assert_eq!(budget_name(&named, &plan, Some("x.yaml")), "team");
    }

    /// A tier moves every task that names another model (or, with a cap,
    /// another `max_tokens`), records the model each named, and applying
    /// the record again changes nothing (a resume applies it to the
    /// stored plan, which has it already).
    #[test]
    fn a_tier_moves_each_task_and_records_what_it_named() {
        let mut plan = ctx_test_support::plan(&[("a", &[]), ("b", &["a"]), ("c", &[])]);
        plan.sub_tasks[0].tool_or_prompt.params.model = Some("big".into());
        plan.sub_tasks[2].tool_or_prompt.params.model = Some("small".into());
        let budget = PeriodBudget {
            period: BudgetPeriod::Week,
            usd: Usd::parse("10").unwrap(),
            name: Some("team".into()),
            fallback: vec![ctx_model::BudgetFallback {
                above: 0.8,
                model: "small".into(),
                max_tokens: None,
            }],
        };
        let key = PeriodKey {
            name: "team".into(),
            start: "2026-11-30".into(),
        };
        let tier = &budget.fallback[0];
        let choice = new_choice(&plan, &budget, tier, key, Usd::parse("8.5").unwrap());
        let moved: Vec<(&str, Option<&str>)> = choice
            .tasks
            .iter()
            .map(|t| (t.task_id.as_str(), t.from.as_deref()))
            .collect();
        assert_eq!(
            moved,
            [("a", Some("big")), ("b", None)],
            "c already calls it"
        );
        apply_tier(&mut plan, &choice);
        let models: Vec<_> = plan
            .sub_tasks
            .iter()
            .map(|t| t.tool_or_prompt.params.model.clone().unwrap())
            .collect();
        assert_eq!(models, ["small", "small", "small"]);
        let once = plan.clone();
        apply_tier(&mut plan, &choice);
        assert_eq!(plan, once);
        assert_eq!(
            choice.reason(),
            "budget `team` (week from 2026-11-30, UTC) was 85% used ($8.5 of $10) when the run started, at or above 80%: tasks use `small`"
        );
    }
}
