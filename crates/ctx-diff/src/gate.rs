//! The CI gate: `--fail-on` conditions, parsed, and judged on a
//! comparison.
//!
//! A task missing from run B counts against it, never for it: its checks
//! did not pass, it did not complete, its output changed.

use std::fmt;
use std::str::FromStr;

use ctx_model::money::Usd;

use crate::RunDiff;

/// The names `--fail-on` knows, as listed in errors.
pub const CONDITIONS: &str = "check-regression, status, output, cost:+N%, time:+N%";

/// A total's allowed growth, in percent of run A's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// The percentage (`20` for `+20%`), finite and not negative.
    pub percent: f64,
}

/// One `--fail-on` condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    /// A check that passed in A does not pass in B.
    CheckRegression,
    /// A task that completed in A did not complete in B.
    Status,
    /// A task's output changed (or the task is gone, or new).
    Output,
    /// The total cost grew beyond the threshold.
    Cost(Threshold),
    /// The total task time grew beyond the threshold.
    Time(Threshold),
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::CheckRegression => f.write_str("check-regression"),
            Condition::Status => f.write_str("status"),
            Condition::Output => f.write_str("output"),
            Condition::Cost(t) => write!(f, "cost:+{}%", t.percent),
            Condition::Time(t) => write!(f, "time:+{}%", t.percent),
        }
    }
}

/// A `--fail-on` value that is not a condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// Not a condition's name.
    #[error("unknown condition `{condition}` (known: {CONDITIONS})")]
    Unknown {
        /// As given.
        condition: String,
    },
    /// `cost:` or `time:` with a threshold that is not `+N%`.
    #[error("`{condition}`: the threshold must be a percentage such as +20% ({reason})")]
    Threshold {
        /// As given.
        condition: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl FromStr for Condition {
    type Err = GateError;

    fn from_str(s: &str) -> Result<Condition, GateError> {
        let given = s.trim();
        match given {
            "check-regression" => return Ok(Condition::CheckRegression),
            "status" => return Ok(Condition::Status),
            "output" => return Ok(Condition::Output),
            _ => {}
        }
        let (name, threshold) = given.split_once(':').ok_or_else(|| GateError::Unknown {
            condition: given.to_string(),
        })?;
        let make: fn(Threshold) -> Condition = match name {
            "cost" => Condition::Cost,
            "time" => Condition::Time,
            _ => {
                return Err(GateError::Unknown {
                    condition: given.to_string(),
                });
            }
        };
        let bad = |reason: &str| GateError::Threshold {
            condition: given.to_string(),
            reason: reason.to_string(),
        };
        let number = threshold
            .strip_suffix('%')
            .ok_or_else(|| bad("no % sign"))?;
        let number = number.strip_prefix('+').unwrap_or(number);
        let percent: f64 = number.parse().map_err(|_| bad("not a number"))?;
        if !percent.is_finite() || percent < 0.0 {
            return Err(bad("it must be 0 or more"));
        }
        Ok(make(Threshold { percent }))
    }
}

/// Every condition of `values`, each a comma-separated list
/// (`--fail-on a,b --fail-on c`), in order, once each.
pub fn parse_conditions(values: &[String]) -> Result<Vec<Condition>, GateError> {
    let mut out: Vec<Condition> = Vec::new();
    for part in values.iter().flat_map(|v| v.split(',')) {
        let c: Condition = part.parse()?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// A condition that holds, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Tripped {
    /// The condition.
    pub condition: Condition,
    /// What holds it: the tasks, or the totals.
    pub detail: String,
}

/// The conditions of `conditions` that hold on `diff`, in their order.
pub fn judge(diff: &RunDiff, conditions: &[Condition]) -> Vec<Tripped> {
    conditions
        .iter()
        .filter_map(|&condition| {
            let detail = match condition {
                Condition::CheckRegression => tasks(&diff.summary.check_regressions),
                Condition::Status => tasks(&diff.summary.status_regressions),
                Condition::Output => tasks(&diff.summary.changed_outputs),
                Condition::Cost(t) => grew(
                    picos(diff.a.cost_usd),
                    picos(diff.b.cost_usd),
                    t,
                    "total cost",
                ),
                Condition::Time(t) => grew(
                    diff.a.time_ms as f64,
                    diff.b.time_ms as f64,
                    t,
                    "total task time",
                ),
            }?;
            Some(Tripped { condition, detail })
        })
        .collect()
}

fn picos(u: Usd) -> f64 {
    u.picos() as f64
}

fn tasks(ids: &[String]) -> Option<String> {
    const SHOWN: usize = 10;
    if ids.is_empty() {
        return None;
    }
    let mut s = ids
        .iter()
        .take(SHOWN)
        .map(|id| ctx_table::printable(id))
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        s.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    Some(s)
}

/// Whether `b` is more than `t` percent above `a`: any growth from 0
/// counts as beyond every threshold.
fn grew(a: f64, b: f64, t: Threshold, what: &str) -> Option<String> {
    if b <= a {
        return None;
    }
    if a == 0.0 {
        return Some(format!("{what} grew from 0"));
    }
    let pct = (b - a) / a * 100.0;
    (pct > t.percent).then(|| format!("{what} grew {pct:.1}% (more than {}%)", t.percent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_comma_separated_or_repeated_and_bad_ones_are_named() {
        let got =
            parse_conditions(&["check-regression,cost:+20%".into(), "time:50%".into()]).unwrap();
        assert_eq!(
            got,
            [
                Condition::CheckRegression,
                Condition::Cost(Threshold { percent: 20.0 }),
                Condition::Time(Threshold { percent: 50.0 }),
            ]
        );
        let e = parse_conditions(&["status,regression".into()]).unwrap_err();
        assert_eq!(
            e,
            GateError::Unknown {
                condition: "regression".into()
            }
        );
        assert!(e.to_string().contains("check-regression"), "{e}");
        for bad in ["cost:+20", "cost:+x%", "time:-5%", "time:+inf%"] {
            let e = bad.parse::<Condition>().unwrap_err();
            assert!(matches!(e, GateError::Threshold { .. }), "{bad}: {e:?}");
            assert!(e.to_string().contains(bad), "{e}");
        }
        assert!(matches!(
            "memory:+5%".parse::<Condition>(),
            Err(GateError::Unknown { .. })
        ));
    }

    #[test]
    fn a_threshold_is_passed_only_beyond_it() {
        let t = Threshold { percent: 20.0 };
        assert_eq!(grew(100.0, 120.0, t, "x"), None);
        assert_eq!(
            grew(100.0, 121.0, t, "x").as_deref(),
            Some("x grew 21.0% (more than 20%)")
        );
        assert_eq!(grew(100.0, 50.0, t, "x"), None);
        assert_eq!(grew(0.0, 1.0, t, "x").as_deref(), Some("x grew from 0"));
        assert_eq!(grew(0.0, 0.0, t, "x"), None);
    }
}
