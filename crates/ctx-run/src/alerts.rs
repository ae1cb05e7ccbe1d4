//! `ctx run --alert-at 0.5,0.8,0.95`: one alert per threshold a run's
//! spending crossed, of its period budget (docs/cost.md, "Period
//! budgets"), else of `--max-cost`. A threshold is crossed when the
//! budget's use was below it before the run and at or above it after:
//! a later run does not repeat an alert an earlier one gave.

use ctx_cost::Usd;
use serde::Serialize;
use thiserror::Error;

/// Why `--alert-at` was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AlertError {
    /// A value is not a number.
    #[error("--alert-at: `{value}` is not a number (fractions of the budget: 0.5,0.8,0.95)")]
    NotANumber {
        /// The value.
        value: String,
    },
    /// A value is not above 0 and at most 1.
    #[error("--alert-at: {value} is not a fraction above 0 and at most 1")]
    OutOfRange {
        /// The value.
        value: String,
    },
}

/// Reads `0.5,0.8,0.95`: fractions above 0 and at most 1, kept sorted
/// and without repeats.
pub fn parse_thresholds(text: &str) -> Result<Vec<f64>, AlertError> {
    let mut out = Vec::new();
    for value in text.split(',').map(str::trim) {
        let t: f64 = value.parse().map_err(|_| AlertError::NotANumber {
            value: value.to_string(),
        })?;
        if !(t > 0.0 && t <= 1.0) {
            return Err(AlertError::OutOfRange {
                value: value.to_string(),
            });
        }
        out.push(t);
    }
    out.sort_by(f64::total_cmp);
    out.dedup();
    Ok(out)
}

/// How loud an alert is: from [`ERROR_AT`] on, an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertLevel {
    /// Below [`ERROR_AT`].
    Warning,
    /// At or above [`ERROR_AT`].
    Error,
}

/// The threshold from which an alert is an error (`::error::` under
/// GitHub Actions).
pub const ERROR_AT: f64 = 0.95;

/// One threshold crossed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// What was crossed: `budget `NAME` (PERIOD from DAY, UTC)` or
    /// `--max-cost`.
    pub of: String,
    /// The threshold, a fraction of the budget.
    pub threshold: f64,
    /// What the budget's use came to (spent, and under a period budget
    /// held by runs in progress).
    pub used_usd: Usd,
    /// The budget.
    pub budget_usd: Usd,
    /// Its level.
    pub level: AlertLevel,
}

impl std::fmt::Display for Alert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}% of the budget crossed: ${} of ${} used",
            self.of,
            (self.threshold * 100.0).round(),
            self.used_usd,
            self.budget_usd
        )
    }
}

/// The thresholds crossed going from `before` to `after` of `budget`.
pub fn crossed(thresholds: &[f64], before: Usd, after: Usd, budget: Usd, of: &str) -> Vec<Alert> {
    let fraction = |u: Usd| match budget.picos() {
        0 => f64::INFINITY,
        b => u.picos() as f64 / b as f64,
    };
    let (from, to) = (fraction(before), fraction(after));
    thresholds
        .iter()
        .filter(|&&t| from < t && t <= to)
        .map(|&t| Alert {
            of: of.to_string(),
            threshold: t,
            used_usd: after,
            budget_usd: budget,
            level: if t >= ERROR_AT {
                AlertLevel::Error
            } else {
                AlertLevel::Warning
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Usd {
        Usd::parse(s).unwrap()
    }

    #[test]
    fn thresholds_parse_sorted_and_refuse_what_is_no_fraction() {
        assert_eq!(
            parse_thresholds("0.95, 0.5,0.8,0.5").unwrap(),
            [0.5, 0.8, 0.95]
        );
        for bad in ["", "0", "-0.5", "1.5", "NaN", "half"] {
            assert!(parse_thresholds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_threshold_crossed_alerts_once_with_its_level() {
        let t = [0.5, 0.8, 0.95];
        let got = crossed(&t, d("0.4"), d("0.96"), d("1"), "--max-cost");
        let levels: Vec<_> = got.iter().map(|a| (a.threshold, a.level)).collect();
        assert_eq!(
            levels,
            [
                (0.5, AlertLevel::Warning),
                (0.8, AlertLevel::Warning),
                (0.95, AlertLevel::Error)
            ]
        );
        assert_eq!(
            got[1].to_string(),
            "--max-cost: 80% of the budget crossed: $0.96 of $1 used"
        );
        // Already past 0.5 before: not again; nothing crossed: nothing.
        assert_eq!(crossed(&t, d("0.5"), d("0.6"), d("1"), "x"), []);
        assert_eq!(crossed(&t, d("0.1"), d("0.2"), d("1"), "x"), []);
    }
}
