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
}
