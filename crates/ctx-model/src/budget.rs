//! `config.budget` and `ctx run --budget NAME=USD/PERIOD`: a dollar budget
//! shared by every run of a plan (or of a named group) over a calendar
//! period, in UTC. The ledger that enforces it is the run store's
//! (docs/cost.md, "Period budgets"); this module only holds what the
//! plan or the flag says.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::money::{DecimalError, Usd};

/// A budget over a calendar period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeriodBudget {
    /// The calendar period (UTC) the budget is for.
    pub period: BudgetPeriod,
    /// What every run of the period may spend together, in US dollars.
    pub usd: Usd,
    /// The budget's name: runs that give the same name share it. Absent:
    /// the plan file's name (its stem), else its `goal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Cheaper models the run's tasks use once the period's use (spent,
    /// and held by runs in progress) is at or above a fraction of `usd`:
    /// the highest `above` reached wins. The tier is chosen once, when a
    /// run starts (docs/cost.md, "Cheaper fallbacks"). `ctx run --budget`
    /// keeps them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<BudgetFallback>,
}

/// One fallback tier of a period budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetFallback {
    /// The fraction of the budget (above 0, at most 1) at or above which
    /// the tier applies.
    pub above: f64,
    /// The model every task of a run on this tier calls: its price, its
    /// tokenizer.
    pub model: String,
    /// The tier's completion cap: each task's `max_tokens` under this
    /// tier, when given (a cheaper model often has a smaller one).
    /// Absent: each task keeps its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
}

// `above` is a finite fraction (the plan check refuses any other), so
// equality is total on every value a checked plan holds.
impl Eq for BudgetFallback {}

/// The tier a run was started on ([`BudgetFallback`] chosen from its
/// period's figures), as stored with the run so that `ctx runs show` and
/// the report say later which tasks ran on a fallback and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FallbackChoice {
    /// The budget's name.
    pub budget: String,
    /// Its period.
    pub period: BudgetPeriod,
    /// The period's first day (UTC), `YYYY-MM-DD`.
    pub period_start: String,
    /// The budget, in US dollars.
    pub budget_usd: crate::money::Usd,
    /// The period's use when the run started: spent, and held by runs
    /// in progress.
    pub used_usd: crate::money::Usd,
    /// The tier's threshold, a fraction of the budget.
    pub above: f64,
    /// The tier's model.
    pub model: String,
    /// The tier's cap, when it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Each task moved to the tier, in plan order, with the model it
    /// names otherwise (`None`: the engine's default).
    pub tasks: Vec<FallbackTask>,
}

/// One task a [`FallbackChoice`] moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FallbackTask {
    /// The task.
    pub task_id: String,
    /// The model it would have called on the standard tier (`None`: the
    /// engine's default, `--model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl FallbackChoice {
    /// Why the run is on this tier, in words: `budget `nightly` (month
    /// from 2026-12-01, UTC) was 85.0% used ($0.85 of $1), at or above
    /// 80%: tasks use `gpt-4o-mini``.
    pub fn reason(&self) -> String {
        format!(
            "budget `{}` ({} from {}, UTC) was {} used (${} of ${}) when the run started, at or above {}: tasks use `{}`{}",
            self.budget,
            self.period,
            self.period_start,
            percent(self.used_fraction()),
            self.used_usd,
            self.budget_usd,
            percent(self.above),
            self.model,
            match self.max_tokens {
                Some(n) => format!(" (max_tokens {n})"),
                None => String::new(),
            }
        )
    }

    /// The period's use over the budget when the run started (1 for a
    /// budget of $0).
    pub fn used_fraction(&self) -> f64 {
        used_fraction(self.used_usd, self.budget_usd)
    }
}

/// `used` over `budget`: at least 1 when the budget is $0 (nothing is
/// left of it).
pub fn used_fraction(used: crate::money::Usd, budget: crate::money::Usd) -> f64 {
    if budget == crate::money::Usd::ZERO {
        return 1.0_f64.max(used.to_f64());
    }
    used.to_f64() / budget.to_f64()
}

fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

impl PeriodBudget {
    /// The tier the period's use `used` puts a run on: the fallback with
    /// the highest `above` that `used / usd` reaches; `None` is the
    /// standard tier.
    pub fn tier(&self, used: crate::money::Usd) -> Option<&BudgetFallback> {
        let fraction = used_fraction(used, self.usd);
        self.fallback
            .iter()
            .filter(|f| fraction >= f.above)
            .max_by(|a, b| a.above.total_cmp(&b.above))
    }
}

/// A calendar period, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BudgetPeriod {
    /// A UTC day.
    Day,
    /// An ISO week (Monday to Sunday, UTC).
    Week,
    /// A calendar month (UTC).
    Month,
}

impl BudgetPeriod {
    /// The period's name, as the plan and `--budget` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Week => "week",
            BudgetPeriod::Month => "month",
        }
    }
}

impl fmt::Display for BudgetPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a `--budget` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BudgetFlagError {
    /// Not `NAME=USD/PERIOD`.
    #[error("`{value}` is not NAME=USD/PERIOD (for example nightly=50/month)")]
    Shape {
        /// The value given.
        value: String,
    },
    /// The name is empty.
    #[error("`{value}`: the name before `=` is empty")]
    NoName {
        /// The value given.
        value: String,
    },
    /// The amount is not a non-negative decimal.
    #[error("`{value}`: the amount {source}")]
    Amount {
        /// The value given.
        value: String,
        /// Why.
        source: DecimalError,
    },
    /// The period is not `day`, `week` or `month`.
    #[error("`{value}`: the period `{period}` is not day, week or month")]
    Period {
        /// The value given.
        value: String,
        /// The period given.
        period: String,
    },
}

impl FromStr for BudgetPeriod {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "day" => Ok(BudgetPeriod::Day),
            "week" => Ok(BudgetPeriod::Week),
            "month" => Ok(BudgetPeriod::Month),
            _ => Err(()),
        }
    }
}

impl FromStr for PeriodBudget {
    type Err = BudgetFlagError;

    /// Reads `NAME=USD/PERIOD` (`nightly=50/month`).
    fn from_str(value: &str) -> Result<Self, BudgetFlagError> {
        let shape = || BudgetFlagError::Shape {
            value: value.to_string(),
        };
        let (name, rest) = value.split_once('=').ok_or_else(shape)?;
        let (usd, period) = rest.rsplit_once('/').ok_or_else(shape)?;
        if name.trim().is_empty() {
            return Err(BudgetFlagError::NoName {
                value: value.to_string(),
            });
        }
        let usd = Usd::parse(usd.trim()).map_err(|source| BudgetFlagError::Amount {
            value: value.to_string(),
            source,
        })?;
        let period = period
            .trim()
            .parse()
            .map_err(|()| BudgetFlagError::Period {
                value: value.to_string(),
                period: period.to_string(),
            })?;
        Ok(PeriodBudget {
            period,
            usd,
            name: Some(name.trim().to_string()),
            fallback: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_reads_name_amount_and_period() {
        let b: PeriodBudget = "nightly=12.5/week".parse().unwrap();
        assert_eq!(b.name.as_deref(), Some("nightly"));
        assert_eq!(b.usd, Usd::parse("12.5").unwrap());
        assert_eq!(b.period, BudgetPeriod::Week);
    }

    #[test]
    fn a_malformed_flag_says_what_is_wrong() {
        let err = |v: &str| v.parse::<PeriodBudget>().unwrap_err();
        assert!(matches!(err("50/month"), BudgetFlagError::Shape { .. }));
        assert!(matches!(err("n=50"), BudgetFlagError::Shape { .. }));
        assert!(matches!(err("=50/day"), BudgetFlagError::NoName { .. }));
        assert!(matches!(
            err("n=-3/day"),
            BudgetFlagError::Amount {
                source: DecimalError::Negative,
                ..
            }
        ));
        assert!(matches!(err("n=abc/day"), BudgetFlagError::Amount { .. }));
        assert!(matches!(err("n=3/year"), BudgetFlagError::Period { .. }));
    }

    #[test]
    fn the_plan_field_refuses_a_negative_amount_and_an_unknown_period() {
        let ok: PeriodBudget = serde_json::from_str(r#"{"period":"month","usd":40}"#).unwrap();
        assert_eq!((ok.period, ok.name), (BudgetPeriod::Month, None));
        assert!(serde_json::from_str::<PeriodBudget>(r#"{"period":"month","usd":-1}"#).is_err());
        assert!(serde_json::from_str::<PeriodBudget>(r#"{"period":"year","usd":1}"#).is_err());
    }

    /// The highest threshold reached wins; below every one is the
    /// standard tier; a $0 budget is used up (every tier reached).
    #[test]
    fn the_highest_threshold_reached_is_the_tier() {
        let b: PeriodBudget = serde_json::from_str(
            r#"{"period": "month", "usd": 10, "fallback": [
                {"above": 0.5, "model": "mid"}, {"above": 0.9, "model": "low", "max_tokens": 100}]}"#,
        )
        .unwrap();
        let tier = |used: &str| b.tier(Usd::parse(used).unwrap()).map(|f| f.model.as_str());
        assert_eq!(tier("0"), None);
        assert_eq!(tier("4.99"), None);
        assert_eq!(tier("5"), Some("mid"));
        assert_eq!(tier("8.99"), Some("mid"));
        assert_eq!(tier("9"), Some("low"));
        assert_eq!(tier("12"), Some("low"));
        let empty = PeriodBudget {
            usd: Usd::ZERO,
            ..b.clone()
        };
        assert_eq!(empty.tier(Usd::ZERO).map(|f| f.model.as_str()), Some("low"));
        assert!(
            serde_json::from_str::<PeriodBudget>(
                r#"{"period": "month", "usd": 1, "fallback": [{"above": 0.5, "model": "m", "price": 1}]}"#
            )
            .is_err(),
            "unknown keys are refused"
        );
    }
}
