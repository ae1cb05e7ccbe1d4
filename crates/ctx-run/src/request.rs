//! One run as asked for, resolved once: [`RunFlags`] (what a caller
//! gives: `ctx run`'s flags, or an embedder's values) settle into a
//! [`RunBasis`] before the plan is read, and the basis with the plan as
//! it runs and its prices becomes a [`RunRequest`], the one typed value
//! both stores take: a local run ([`RunRequest::into_local`], then
//! [`crate::RunSession`]) and a shared one (ctx-worker's
//! `SharedSettings::from_request`).
//!
//! Why two steps and not one call: between them the caller reads the
//! plan (a file, stdin, or the plan a run stored, from either store) and
//! fills its variables and digest, which reads files and prints the
//! digest's warnings. Those are the caller's; every rule of how the
//! settings combine is here, in the manner of uv's `settings.rs`: flags
//! win over the environment, which wins over the plan's config, which
//! wins over the library's defaults ([`ExecutorOptions::default`]), and
//! every refusal of a setting that does not fit the store chosen is made
//! in this one place, before anything is opened or spent.

use std::path::PathBuf;

use ctx_cost::Usd;
use ctx_deps::{CostOptions, ExecutorOptions, Schedule};
use ctx_model::Plan;
use ctx_store::RunInputs;
use thiserror::Error;

use crate::alerts::AlertError;
use crate::run_costs::{BudgetError, RunPricing};
use crate::settings::{PlanOverrides, SettingError, StoreChoice, StoreError, StoreFlags};
use crate::{RunSettings, RunStore};

/// The settings of one run as a caller gives them, none checked yet.
/// `None` is "not given": the plan's config or the library's default
/// applies.
#[derive(Debug, Clone, Default)]
pub struct RunFlags {
    /// Where the run goes (`--store`, `--root`, `--resume`, ...).
    pub store: StoreFlags,
    /// The plan settings this run replaces.
    pub overrides: PlanOverrides,
    /// Most tasks in flight at once; 0 is no limit.
    pub concurrency: Option<usize>,
    /// The scheduling policy.
    pub schedule: Option<Schedule>,
    /// Each engine call's bound in seconds; 0 is none.
    pub task_timeout_secs: Option<f64>,
    /// Most bytes one task's output may have.
    pub max_output_bytes: Option<usize>,
    /// The run's budget in US dollars, as written (`--max-cost`).
    pub max_cost: Option<String>,
    /// The fractions of the budget to alert at, as written
    /// (`--alert-at 0.5,0.8`).
    pub alert_at: Option<String>,
    /// Tasks a resume runs again with everything below them.
    pub rerun: Vec<String>,
    /// The `--out` directory.
    pub out: Option<PathBuf>,
    /// Where completed outputs are published (`--publish-root`).
    pub publish_root: Option<PathBuf>,
    /// `--wait-approval`: how long to keep waiting for decisions on the
    /// run's gates.
    pub approval_wait: Option<std::time::Duration>,
}

/// What [`RunFlags`] settle into before the plan is read: the store, the
/// executor's bounds, the budget and the alerts, each checked.
#[derive(Debug, Clone)]
pub struct RunBasis {
    /// The store chosen from the flags and the environment.
    pub store: StoreChoice,
    /// Concurrency, schedule and the task bounds (its costs are the
    /// request's, [`RunRequest::cost`]).
    pub executor: ExecutorOptions,
    /// `--max-cost`, read.
    pub max_cost: Option<Usd>,
    /// `--alert-at`, read: sorted fractions.
    pub alert_at: Vec<f64>,
    overrides: PlanOverrides,
    rerun: Vec<String>,
    out: Option<PathBuf>,
    publish_root: Option<PathBuf>,
    approval_wait: Option<std::time::Duration>,
}

/// The plan a request runs, as the caller read and filled it.
#[derive(Debug, Clone)]
pub struct RequestPlan {
    /// The plan as it runs: overridden ([`RunBasis::apply`]) and filled.
    pub plan: Plan,
    /// Where it came from (the path as given), recorded with the run.
    pub source: Option<String>,
    /// What it was filled from ([`crate::inputs`]), recorded with the run.
    pub inputs: Option<RunInputs>,
}

/// One run, every setting resolved: what a local session and a shared
/// one both start from.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The plan as it runs.
    pub plan: Plan,
    /// Where the plan came from (the path as given).
    pub plan_source: Option<String>,
    /// What the plan was filled from, recorded with the run.
    pub inputs: Option<RunInputs>,
    /// Where the run goes.
    pub store: StoreChoice,
    /// Concurrency, schedule and the task bounds.
    pub executor: ExecutorOptions,
    /// What each task is priced by, and the run's budget.
    pub pricing: RunPricing,
    /// The prices and the budget as the executor holds them, checked
    /// against the plan: every task has a high end when a budget binds.
    pub cost: CostOptions,
    /// The `--out` directory.
    pub out: Option<PathBuf>,
    /// Where completed outputs are published once the run ends.
    pub publish: Option<crate::publish::PublishTo>,
    /// Tasks a resume runs again with everything below them.
    pub rerun: Vec<String>,
    /// The fractions of the budget to alert at.
    pub alert_at: Vec<f64>,
    /// The cheaper tier of its period budget the run starts on, already
    /// applied to `plan` ([`crate::period_budget::choose_tier`]).
    pub fallback: Option<ctx_model::FallbackChoice>,
    /// How long a local run keeps waiting for decisions on its gates.
    pub approval_wait: Option<std::time::Duration>,
}

/// A setting that cannot be resolved, or does not fit the store chosen.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RequestError {
    /// The store flags do not fit together.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A setting out of its range.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// `--max-cost` is not a positive amount.
    #[error(transparent)]
    MaxCost(#[from] ctx_cost::MaxCostError),
    /// `--alert-at` is not a list of fractions.
    #[error(transparent)]
    Alert(#[from] AlertError),
    /// A budget binds, and some task's cost has no bound.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The tier of a period budget with fallbacks could not be chosen.
    #[error(transparent)]
    Tier(#[from] crate::period_budget::TierError),
    /// `--wait-approval` on a store no decision reaches (in memory).
    #[error("--wait-approval: {0}")]
    WaitApproval(&'static str),
}

impl RunFlags {
    /// Settles the flags that need no plan: the store (from the flags and
    /// `env`, [`StoreFlags::resolve`]), the task bounds, `--max-cost` and
    /// `--alert-at`.
    pub fn settle(&self, env: impl Fn(&str) -> Option<String>) -> Result<RunBasis, RequestError> {
        let store = self.store.resolve(env)?;
        if self.approval_wait.is_some() && matches!(store, StoreChoice::Local(RunStore::Memory)) {
            return Err(RequestError::WaitApproval(
                "a run in memory keeps no decisions; run it with a store",
            ));
        }
        let defaults = ExecutorOptions::default();
        let task_timeout = match self.task_timeout_secs {
            Some(secs) => crate::settings::task_timeout_from_secs(secs)?,
            None => defaults.task_timeout,
        };
        let max_output_bytes = match self.max_output_bytes {
            Some(n) => crate::settings::max_output_bytes(n)?,
            None => defaults.max_output_bytes,
        };
        let executor = ExecutorOptions {
            concurrency: self.concurrency.unwrap_or(defaults.concurrency),
            schedule: self.schedule.unwrap_or(defaults.schedule),
            task_timeout,
            max_output_bytes,
            ..defaults
        };
        Ok(RunBasis {
            store,
            executor,
            max_cost: self
                .max_cost
                .as_deref()
                .map(ctx_cost::parse_max_cost)
                .transpose()?,
            alert_at: match &self.alert_at {
                Some(text) => crate::alerts::parse_thresholds(text)?,
                None => Vec::new(),
            },
            overrides: self.overrides.clone(),
            rerun: self.rerun.clone(),
            out: self.out.clone(),
            publish_root: self.publish_root.clone(),
            approval_wait: self.approval_wait,
        })
    }
}

impl RunBasis {
    /// Applies the run's plan overrides to `plan`, before it is filled
    /// (resume fingerprints are taken from the plan as it runs).
    pub fn apply(&self, plan: &mut Plan) -> Result<(), RequestError> {
        Ok(self.overrides.apply(plan)?)
    }

    /// The budget tasks are priced against on `plan` (overridden): the
    /// run's `--max-cost`, else its period budget, which bounds the run
    /// as `--max-cost` does (its tasks need a high end, and the run is
    /// held at it: [`crate::period_budget`]).
    pub fn budget(&self, plan: &Plan) -> Option<Usd> {
        self.max_cost
            .or_else(|| plan.config.budget.as_ref().map(|b| b.usd))
    }

    /// The request: the basis with the plan as it runs and its prices.
    /// Refuses a budget some task's cost leaves without a bound, before
    /// anything is opened. A local run's cheaper tier of its period
    /// budget is chosen here and applied to the plan before its costs are
    /// computed, so the run is held at the tier's prices (a shared run's,
    /// from the shared store's figures, when its session starts:
    /// ctx-worker's `SharedSession::start`).
    pub fn request(
        self,
        mut plan: RequestPlan,
        pricing: RunPricing,
    ) -> Result<RunRequest, RequestError> {
        let fallback =
            crate::period_budget::choose_tier(&self.store, &mut plan.plan, plan.source.as_deref())?;
        let cost = pricing.cost_options(&plan.plan)?;
        let publish = self.publish_root.map(|root| crate::publish::PublishTo {
            root,
            targets: crate::publish::publish_targets(&plan.plan),
        });
        Ok(RunRequest {
            plan: plan.plan,
            plan_source: plan.source,
            inputs: plan.inputs,
            store: self.store,
            executor: self.executor,
            pricing,
            cost,
            out: self.out,
            publish,
            rerun: self.rerun,
            alert_at: self.alert_at,
            fallback,
            approval_wait: self.approval_wait,
        })
    }
}

impl RunRequest {
    /// The plan and a local session's settings (in memory or a run
    /// directory, `store`): the executor holds the request's prices and
    /// budget.
    pub fn into_local(self, store: RunStore) -> (Plan, RunSettings) {
        let settings = RunSettings {
            executor: ExecutorOptions {
                cost: Some(self.cost),
                ..self.executor
            },
            store,
            plan_source: self.plan_source,
            out: self.out,
            inputs: self.inputs,
            publish: self.publish,
            rerun: self.rerun,
            alert_at: self.alert_at,
            fallback: self.fallback,
            approval_wait: self.approval_wait,
        };
        (self.plan, settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(config: &str) -> Plan {
        serde_json::from_str(&format!(
            r#"{{"schema_version": 1, "config": {{{config}}}, "sub_tasks": [{{"id": "a", "description": "A",
              "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "p", "model": "gpt-4o-mini", "max_tokens": 10}}}}}}]}}"#
        ))
        .unwrap()
    }

    fn usd(text: &str) -> Usd {
        Usd::parse(text).unwrap()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn shared() -> StoreFlags {
        StoreFlags {
            store: Some("postgres://h/d".into()),
            ..StoreFlags::default()
        }
    }

    fn request(basis: RunBasis, plan: Plan) -> Result<RunRequest, RequestError> {
        let pricing = RunPricing {
            engine: crate::run_costs::EngineCosts::default(),
            file: None,
            flags: None,
            max_cost: basis.budget(&plan),
        };
        let plan = RequestPlan {
            plan,
            source: Some("plan.json".into()),
            inputs: None,
        };
        basis.request(plan, pricing)
    }

    /// Nothing given is the library's defaults: the executor's bounds, no
    /// budget, no alerts, a new run directory under the default root.
    #[test]
    fn nothing_given_is_the_library_s_defaults() {
        let basis = RunFlags::default().settle(no_env).unwrap();
        let d = ExecutorOptions::default();
        assert_eq!(basis.executor.concurrency, d.concurrency);
        assert_eq!(basis.executor.task_timeout, d.task_timeout);
        assert_eq!(basis.executor.max_output_bytes, d.max_output_bytes);
        assert_eq!((basis.max_cost, basis.alert_at.len()), (None, 0));
        let (p, settings) = request(basis, plan(""))
            .unwrap()
            .into_local(RunStore::Memory);
        assert_eq!(p.sub_tasks[0].id, "a");
        assert_eq!(settings.plan_source.as_deref(), Some("plan.json"));
        assert!(
            settings.executor.cost.is_some(),
            "prices always reach the executor"
        );
    }

    /// Each flag given is checked and kept; a bad one is refused with the
    /// library's own error.
    #[test]
    fn flags_are_checked_once() {
        let flags = RunFlags {
            concurrency: Some(3),
            task_timeout_secs: Some(0.0),
            max_output_bytes: Some(10),
            max_cost: Some("0.25".into()),
            alert_at: Some("0.8,0.5".into()),
            publish_root: Some("site".into()),
            ..RunFlags::default()
        };
        let basis = flags.settle(no_env).unwrap();
        assert_eq!(basis.executor.concurrency, 3);
        assert_eq!(basis.executor.task_timeout, None, "0 is no bound");
        assert_eq!(basis.executor.max_output_bytes, 10);
        assert_eq!(basis.max_cost, Some(usd("0.25")));
        assert_eq!(basis.alert_at, vec![0.5, 0.8]);
        let r = request(basis, plan("")).unwrap();
        assert_eq!(r.publish.unwrap().root, PathBuf::from("site"));
        for (bad, kind) in [
            (
                RunFlags {
                    max_output_bytes: Some(0),
                    ..RunFlags::default()
                },
                "setting",
            ),
            (
                RunFlags {
                    max_cost: Some("0".into()),
                    ..RunFlags::default()
                },
                "max-cost",
            ),
            (
                RunFlags {
                    alert_at: Some("2".into()),
                    ..RunFlags::default()
                },
                "alert",
            ),
        ] {
            let e = bad.settle(no_env).unwrap_err();
            let got = match e {
                RequestError::Setting(_) => "setting",
                RequestError::MaxCost(_) => "max-cost",
                RequestError::Alert(_) => "alert",
                other => panic!("{other}"),
            };
            assert_eq!(got, kind);
        }
    }

    /// A batched run is refused on a shared store, before anything is
    /// opened; the local store takes it.
    #[test]
    fn a_batched_run_is_refused_on_a_shared_store() {
        let batched = |store: StoreFlags| RunFlags {
            store: StoreFlags {
                batch: true,
                ..store
            },
            ..RunFlags::default()
        };
        let refused = batched(shared()).settle(no_env).unwrap_err();
        assert_eq!(refused, RequestError::Store(StoreError::BatchOnShared));
        assert!(batched(StoreFlags::default()).settle(no_env).is_ok());
    }

    /// A shared store takes a rerun, a period budget and alerts (its
    /// session holds from the store's own ledger); the request chooses no
    /// tier for it (the session does, from the store's figures).
    #[test]
    fn a_shared_store_takes_a_rerun_a_period_budget_and_alerts() {
        let rerun = RunFlags {
            store: StoreFlags {
                resume: Some("r".into()),
                ..shared()
            },
            rerun: vec!["a".into()],
            ..RunFlags::default()
        };
        let basis = rerun.settle(no_env).unwrap();
        assert_eq!(request(basis, plan("")).unwrap().rerun, vec!["a"]);
        let alerts = RunFlags {
            store: shared(),
            alert_at: Some("0.5".into()),
            ..RunFlags::default()
        };
        let basis = alerts.settle(no_env).unwrap();
        assert_eq!(request(basis, plan("")).unwrap().alert_at, vec![0.5]);
        let period = RunFlags {
            store: shared(),
            ..RunFlags::default()
        };
        let basis = period.settle(no_env).unwrap();
        let budgeted = plan(
            r#""budget": {"name": "team", "usd": 0, "period": "week", "fallback": [{"above": 0.5, "model": "gpt-4o-mini"}]}"#,
        );
        let r = request(basis, budgeted).unwrap();
        assert_eq!(r.fallback, None, "chosen by the shared session");
        assert_eq!(r.cost.max_cost, Some(Usd::ZERO));
    }

    /// `--wait-approval` is refused in memory, where no decision is kept.
    #[test]
    fn waiting_is_refused_where_no_decision_reaches_a_gate() {
        let waiting = |store| RunFlags {
            store,
            approval_wait: Some(std::time::Duration::from_secs(1)),
            ..RunFlags::default()
        };
        let memory = StoreFlags {
            no_store: true,
            ..StoreFlags::default()
        };
        assert!(matches!(
            waiting(memory).settle(no_env),
            Err(RequestError::WaitApproval(_))
        ));
        assert!(waiting(shared()).settle(no_env).is_ok());
        assert!(waiting(StoreFlags::default()).settle(no_env).is_ok());
    }

    /// A period budget bounds the run as `--max-cost` does, and the flag
    /// wins; a task with no high end is refused under either.
    #[test]
    fn the_budget_is_the_flag_else_the_period_s() {
        let budgeted = plan(r#""budget": {"name": "team", "usd": 5, "period": "week"}"#);
        let none = RunFlags::default().settle(no_env).unwrap();
        assert_eq!(none.budget(&plan("")), None);
        assert_eq!(none.budget(&budgeted), Some(usd("5")));
        let flag = RunFlags {
            max_cost: Some("2".into()),
            ..RunFlags::default()
        }
        .settle(no_env)
        .unwrap();
        assert_eq!(flag.budget(&budgeted), Some(usd("2")));
        let mut unbounded = plan("");
        unbounded.sub_tasks[0].tool_or_prompt.params.max_tokens = None;
        assert!(matches!(
            request(flag, unbounded).unwrap_err(),
            RequestError::Budget(BudgetError::NoMaxTokens(_))
        ));
    }

    /// The plan overrides go through the basis, checked.
    #[test]
    fn overrides_apply_through_the_basis() {
        let basis = RunFlags {
            overrides: PlanOverrides {
                max_prompt_tokens: Some(77),
                ..PlanOverrides::default()
            },
            ..RunFlags::default()
        }
        .settle(no_env)
        .unwrap();
        let mut p = plan("");
        basis.apply(&mut p).unwrap();
        assert_eq!(p.config.max_prompt_tokens, 77);
        let zero = RunFlags {
            overrides: PlanOverrides {
                max_prompt_tokens: Some(0),
                ..PlanOverrides::default()
            },
            ..RunFlags::default()
        }
        .settle(no_env)
        .unwrap();
        assert!(matches!(
            zero.apply(&mut p).unwrap_err(),
            RequestError::Setting(_)
        ));
    }
}
