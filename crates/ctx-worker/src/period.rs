//! A shared run under a period budget (`config.budget`, `ctx run
//! --budget`): the local rules (ctx-run's `period_budget`) on the shared
//! store's ledger (PostgreSQL's `ctx_period_spent` and
//! `ctx_period_holds`), so every machine that shares the database draws
//! on one budget (docs/scaling.md, "Period budgets across machines").
//!
//! * The tier (`config.budget.fallback`) is chosen before anything else,
//!   from the period's use in the store (a resume keeps the run's own),
//!   and applied to the plan the run registers: every worker runs the
//!   stored plan, so every claim is priced at the tier.
//! * The run's high end is held before the run is registered: a run
//!   refused leaves nothing in the store for a worker to claim. The
//!   run's own budget in the database (the shared `--max-cost`) is then
//!   what it holds, so the claims of every worker together, killed ones
//!   included, stay within the hold.
//! * The hold is settled when the session sees the run closed, at what
//!   the run's budget row shows it took in this session (each committed
//!   task's cost, and each reservation a dead claim left, counted as
//!   spent). A session stopped while the run is open (other workers may
//!   still spend under it) leaves the hold in place: it stays counted for
//!   the rest of its period, as a killed local run's does. The budget is
//!   never exceeded; it may be under-used.

use std::collections::HashSet;

use ctx_cost::Usd;
use ctx_model::{FallbackChoice, Plan};
use ctx_run::period_budget as pb;
use ctx_run::run_costs::RunPricing;
use ctx_store::period::{PeriodGrant, PeriodKey};
use ctx_store_postgres::PgStore;

use crate::shared::SharedError;

/// A shared run's hold on its period.
#[derive(Debug)]
pub(crate) struct SharedHold {
    key: PeriodKey,
    holder: String,
    /// What the run holds: its high end.
    pub(crate) high: Usd,
    budget: Usd,
    /// What was spent and held of the period before this hold.
    before: Usd,
    label: String,
}

/// The tier the run starts on, applied to `plan`: a resume's is the one
/// its run recorded; a new run's comes from the period's use in the store.
pub(crate) async fn tier(
    store: &PgStore,
    plan: &mut Plan,
    source: Option<&str>,
    resume: Option<&str>,
) -> Result<Option<FallbackChoice>, SharedError> {
    let Some(budget) = pb::with_fallbacks(plan) else {
        return Ok(None);
    };
    if let Some(run) = resume {
        let choice = store.fallback(run).await?;
        if let Some(c) = &choice {
            pb::apply_tier(plan, c);
        }
        return Ok(choice);
    }
    let key = pb::period_key(&budget, plan, source);
    let state = store.period_state(&key, budget.usd).await?;
    Ok(pb::tier_for(plan, key, &state))
}

/// Holds the run's high end of `plan`'s period budget (`None`: the plan
/// has none), or refuses the run with the local refusal (exit 3). A
/// resume holds what is left to run: every task's high end but the
/// `reused` ones'.
pub(crate) async fn hold(
    store: &PgStore,
    plan: &Plan,
    source: Option<&str>,
    pricing: &RunPricing,
    reused: &HashSet<String>,
) -> Result<Option<SharedHold>, SharedError> {
    let Some(budget) = &plan.config.budget else {
        return Ok(None);
    };
    let cost = pricing.cost_options(plan)?;
    let high = pb::left_to_run(plan, &cost, reused).map_err(|e| SharedError::Run(e.into()))?;
    let key = pb::period_key(budget, plan, source);
    let holder = pb::new_holder();
    match store
        .period_reserve(&key, budget.usd, &holder, high)
        .await?
    {
        PeriodGrant::Held(state) => Ok(Some(SharedHold {
            label: pb::hold_label(&key, budget.period),
            key,
            holder,
            high,
            budget: budget.usd,
            before: state.spent.saturating_add(state.held),
        })),
        PeriodGrant::Refused(state) => Err(SharedError::Run(
            pb::refusal(key, budget, state, high).into(),
        )),
    }
}

/// The tasks a resume of `run` with `plan` on the engine `label` reuses
/// (its `--rerun` ids forced), decided as the resume decides them, read
/// before anything is written. Tasks below a map it keeps aside still
/// count as run: the hold may be larger than what runs, never smaller.
pub(crate) async fn reused_by(
    store: &PgStore,
    run: &str,
    plan: &Plan,
    label: &str,
    rerun: &[String],
) -> Result<HashSet<String>, SharedError> {
    let (store, run, plan, label, rerun) = (
        store.clone(),
        run.to_string(),
        plan.clone(),
        label.to_string(),
        rerun.to_vec(),
    );
    // The view reads synchronously (on the store's own runtime): off
    // this one's workers.
    tokio::task::spawn_blocking(move || -> Result<HashSet<String>, SharedError> {
        let mut decided = ctx_store::RunHistory::resume_plan(&store.view(&run)?, &plan, &label)?;
        decided.force(&plan, &rerun);
        Ok(decided.reuse.into_iter().collect())
    })
    .await?
}

impl SharedHold {
    /// Replaces the hold by what the session `spent`.
    pub(crate) async fn settle(&self, store: &PgStore, spent: Usd) -> Result<(), SharedError> {
        Ok(store.period_settle(&self.key, &self.holder, spent).await?)
    }

    /// The `thresholds` crossed from before the hold to the period's use
    /// now (spent, and held by runs in progress).
    pub(crate) async fn alerts(
        &self,
        store: &PgStore,
        thresholds: &[f64],
    ) -> Result<Vec<ctx_run::alerts::Alert>, SharedError> {
        if thresholds.is_empty() {
            return Ok(Vec::new());
        }
        let now = store.period_state(&self.key, self.budget).await?;
        Ok(ctx_run::alerts::crossed(
            thresholds,
            self.before,
            now.spent.saturating_add(now.held),
            self.budget,
            &self.label,
        ))
    }
}
