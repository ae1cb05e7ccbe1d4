//! `ctx eval … --baseline RUN`: each variant's first-attempt and final
//! pass rates against a stored eval's.
//!
//! An eval stores no report of its own: it stores its runs, each an
//! ordinary run labelled `[eval VARIANT K/N]` after its plan source
//! ([`crate::eval`]). So the baseline is read back from runs, and scored
//! as the eval scores its own: the same tally over each run's latest
//! results, counted against the checks of the run's own stored plan.
//!
//! * `RUN` tagged `[eval VARIANT K/N]` stands for its whole eval: the runs
//!   next to it in id order (run ids are creation times, and an eval
//!   creates its runs one after another) that carry the same plan source
//!   and the same N, one per (variant, repeat), at most variants x N.
//! * `RUN` without a tag is one run of the plan as designed: the
//!   baseline of the `full` variant alone.
//!
//! Both sides get a 95 % Wilson interval over their checks (whatever
//! `--repeat` was), and a change the two intervals do not separate is
//! marked `~`, as the table marks a variant against `full`. A baseline
//! that shares no variant with the eval is refused before anything runs.

use std::collections::BTreeMap;

use ctx_deps::ContextVariant;
use ctx_model::{Plan, TaskExecutionResult};
use ctx_store_sqlite::{RunRoot, RunSummary};
use serde::Serialize;

use crate::eval::{ALL_VARIANTS, Interval, Tally, VariantScore, percent, rate};

/// Why a baseline cannot be compared with.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The run could not be found or read
    /// ([`ctx_store_sqlite::Error::is_not_found`]: an unknown id).
    #[error("--baseline {id}: {source}")]
    Store {
        /// The id given.
        id: String,
        /// The store's error.
        #[source]
        source: ctx_store_sqlite::Error,
    },
    /// The baseline's variants and the eval's have none in common.
    #[error(
        "--baseline {id}: no variant in common: the baseline has {}, this eval runs {}",
        .baseline.join(", "), .eval.join(", ")
    )]
    NoCommonVariant {
        /// The id given.
        id: String,
        /// The baseline's variants.
        baseline: Vec<&'static str>,
        /// The eval's.
        eval: Vec<&'static str>,
    },
}

/// A stored eval (or run), read back and scored per variant.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The id given.
    pub id: String,
    /// Its runs' ids, in id order.
    pub run_ids: Vec<String>,
    /// Per variant, in [`ALL_VARIANTS`]' order: its score over its runs.
    scores: Vec<(ContextVariant, VariantScore)>,
}

/// `[eval VARIANT K/N]` at the end of a run's plan source: the source
/// before it, the variant and N.
fn eval_tag(source: &str) -> Option<(&str, ContextVariant, u32, u32)> {
    let (base, tag) = source.strip_suffix(']')?.rsplit_once(" [eval ")?;
    let (variant, of) = tag.split_once(' ')?;
    let (k, n) = of.split_once('/')?;
    let variant = ALL_VARIANTS.into_iter().find(|v| v.as_str() == variant)?;
    Some((base, variant, k.parse().ok()?, n.parse().ok()?))
}

/// The runs of `runs` (in id order) that make up the eval of run `at`,
/// with their variants: `at` and its neighbours of the same eval, walking
/// away from it in each direction until a run does not belong.
fn eval_of(runs: &[RunSummary], at: usize) -> Vec<(usize, ContextVariant)> {
    let tag = |i: usize| runs[i].plan.as_deref().and_then(eval_tag);
    let Some((base, variant, k, n)) = tag(at) else {
        return vec![(at, ContextVariant::Full)];
    };
    let mut seen = vec![(variant, k)];
    let mut out = vec![(at, variant)];
    let mut walk = |range: &mut dyn Iterator<Item = usize>| {
        for i in range {
            match tag(i) {
                Some((b, v, k, m)) if b == base && m == n && !seen.contains(&(v, k)) => {
                    seen.push((v, k));
                    out.push((i, v));
                }
                _ => break,
            }
        }
    };
    walk(&mut (0..at).rev());
    walk(&mut (at + 1..runs.len()));
    out.sort_by_key(|&(i, _)| i);
    out
}

impl Baseline {
    /// Reads the eval (or the run) `id` names under `root` and scores it.
    pub fn load(root: &RunRoot, id: &str) -> Result<Baseline, BaselineError> {
        let err = |source| BaselineError::Store {
            id: id.to_string(),
            source,
        };
        let view = root.open(id).map_err(err)?;
        let (runs, _) = root.list().map_err(err)?;
        // A run directory outside the root is a baseline of its own.
        let members: Vec<(String, ContextVariant)> =
            match runs.iter().position(|r| r.id == view.run_id()) {
                Some(at) => eval_of(&runs, at)
                    .into_iter()
                    .map(|(i, v)| (runs[i].id.clone(), v))
                    .collect(),
                None => vec![(id.to_string(), ContextVariant::Full)],
            };
        let mut scores: BTreeMap<ContextVariant, (VariantScore, Vec<Tally>)> = BTreeMap::new();
        let mut run_ids = Vec::new();
        for (run, variant) in members {
            let view = root.open(&run).map_err(err)?;
            let plan = view.plan().map_err(err)?;
            let latest: Vec<TaskExecutionResult> = view
                .results()
                .map_err(err)?
                .into_iter()
                .map(|r| r.result)
                .collect();
            let (score, per_task) = scores
                .entry(variant)
                .or_insert_with(|| (VariantScore::new(variant.as_str()), Vec::new()));
            tally(score, per_task, &plan, &latest);
            score.run_ids.push(view.run_id().to_string());
            run_ids.push(view.run_id().to_string());
        }
        Ok(Baseline {
            id: id.to_string(),
            run_ids,
            scores: scores.into_iter().map(|(v, (s, _))| (v, s)).collect(),
        })
    }

    /// The variants it has, in report order.
    pub fn variants(&self) -> Vec<ContextVariant> {
        self.scores.iter().map(|(v, _)| *v).collect()
    }

    /// Refuses an eval of `variants` (empty: all four) that shares none
    /// with the baseline: there would be nothing to compare.
    pub fn check_common(&self, variants: &[ContextVariant]) -> Result<(), BaselineError> {
        let eval: Vec<ContextVariant> = if variants.is_empty() {
            ALL_VARIANTS.to_vec()
        } else {
            variants.to_vec()
        };
        if eval.iter().any(|v| self.variants().contains(v)) {
            return Ok(());
        }
        Err(BaselineError::NoCommonVariant {
            id: self.id.clone(),
            baseline: self.variants().iter().map(|v| v.as_str()).collect(),
            eval: eval.iter().map(|v| v.as_str()).collect(),
        })
    }

    /// Compares the eval's variants with the baseline's.
    pub fn compare(&self, now: &[VariantScore]) -> BaselineComparison {
        let variants = now
            .iter()
            .filter_map(|v| {
                let (_, b) = self.scores.iter().find(|(bv, _)| bv.as_str() == v.name)?;
                Some(VariantChange {
                    name: v.name,
                    baseline_runs: b.runs,
                    baseline_checks_total: b.checks_total,
                    first_attempt: RateChange::new(
                        (b.first_attempt_checks_passed, b.checks_total),
                        (v.first_attempt_checks_passed, v.checks_total),
                    ),
                    last: RateChange::new(
                        (b.checks_passed, b.checks_total),
                        (v.checks_passed, v.checks_total),
                    ),
                })
            })
            .collect();
        let names = |vs: Vec<&'static str>, other: &dyn Fn(&str) -> bool| -> Vec<&'static str> {
            vs.into_iter().filter(|n| !other(n)).collect()
        };
        let here: Vec<&'static str> = now.iter().map(|v| v.name).collect();
        let there: Vec<&'static str> = self.scores.iter().map(|(v, _)| v.as_str()).collect();
        BaselineComparison {
            baseline: self.id.clone(),
            run_ids: self.run_ids.clone(),
            variants,
            not_in_baseline: names(here.clone(), &|n| there.contains(&n)),
            only_in_baseline: names(there.clone(), &|n| here.contains(&n)),
        }
    }
}

/// One stored run's results added to its variant's score.
fn tally(
    score: &mut VariantScore,
    per_task: &mut Vec<Tally>,
    plan: &Plan,
    results: &[TaskExecutionResult],
) {
    let checks: Vec<usize> = plan
        .sub_tasks
        .iter()
        .map(|t| ctx_model::task_checks(plan, t).len())
        .collect();
    per_task.resize(plan.sub_tasks.len().max(per_task.len()), Tally::default());
    score.runs += 1;
    score.tally_results(plan, &checks, results, per_task);
}

/// `ctx eval --baseline`'s part of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineComparison {
    /// The id given.
    pub baseline: String,
    /// The baseline's runs.
    pub run_ids: Vec<String>,
    /// Each variant both have, in report order.
    pub variants: Vec<VariantChange>,
    /// The eval's variants the baseline lacks (not compared).
    pub not_in_baseline: Vec<&'static str>,
    /// The baseline's variants this eval did not run.
    pub only_in_baseline: Vec<&'static str>,
}

/// One variant's rates, baseline and now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantChange {
    /// The variant.
    pub name: &'static str,
    /// The baseline's runs of it.
    pub baseline_runs: u32,
    /// The checks the baseline counted.
    pub baseline_checks_total: u64,
    /// The first attempt's rate: the ablation's number.
    pub first_attempt: RateChange,
    /// The final attempt's rate.
    #[serde(rename = "final")]
    pub last: RateChange,
}

/// A pass rate in the baseline and now, with both 95 % intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RateChange {
    /// The baseline's rate.
    pub baseline: f64,
    /// Its interval (`None` without checks).
    pub baseline_interval: Option<Interval>,
    /// This eval's rate.
    pub now: f64,
    /// Its interval.
    pub interval: Option<Interval>,
    /// `now - baseline`, rounded to 4 places.
    pub delta: f64,
    /// Whether the intervals do not overlap: a change that is not chance
    /// at this many checks. `false` is marked `~`.
    pub separated: bool,
}

impl RateChange {
    fn new((bp, bt): (u64, u64), (np, nt): (u64, u64)) -> RateChange {
        let (bi, ni) = (Interval::wilson(bp, bt), Interval::wilson(np, nt));
        let (b, n) = (rate(bp, bt), rate(np, nt));
        RateChange {
            baseline: b,
            baseline_interval: bi,
            now: n,
            interval: ni,
            delta: ((n - b) * 10_000.0).round() / 10_000.0,
            separated: matches!((bi, ni), (Some(x), Some(y)) if !x.overlaps(y)),
        }
    }

    fn cell(&self) -> String {
        let mark = if self.separated { "" } else { " ~" };
        format!(
            "{} -> {} ({:+.0} pt){mark}",
            percent(self.baseline),
            percent(self.now),
            self.delta * 100.0
        )
    }
}

impl BaselineComparison {
    /// The table `ctx eval --baseline` adds to the report.
    pub fn text(&self) -> String {
        let mut out = format!(
            "\nagainst baseline {} ({})\n",
            self.baseline,
            ctx_model::display::count(self.run_ids.len() as u64, "run", "runs")
        );
        let header = [
            "VARIANT",
            "BASE RUNS",
            "FIRST-TRY (base -> now)",
            "FINAL (base -> now)",
        ];
        let rows: Vec<Vec<String>> = self
            .variants
            .iter()
            .map(|v| {
                vec![
                    v.name.to_string(),
                    v.baseline_runs.to_string(),
                    v.first_attempt.cell(),
                    v.last.cell(),
                ]
            })
            .collect();
        out.push_str(&ctx_table::render(
            &header,
            &[false, true, true, true],
            &rows,
        ));
        out.push_str("\n~: not separated from the baseline (the 95 % intervals overlap)\n");
        if !self.not_in_baseline.is_empty() {
            out.push_str(&format!(
                "not in the baseline (not compared): {}\n",
                self.not_in_baseline.join(", ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eval_tag_is_read_back() {
        assert_eq!(
            eval_tag("plan.yaml [eval no-entities 2/3]"),
            Some(("plan.yaml", ContextVariant::NoEntities, 2, 3))
        );
        assert_eq!(eval_tag("plan.yaml"), None);
        assert_eq!(eval_tag("plan.yaml [eval other 1/1]"), None);
    }

    #[test]
    fn a_change_the_intervals_do_not_separate_is_marked() {
        let close = RateChange::new((5, 10), (6, 10));
        assert!(!close.separated);
        assert_eq!(close.cell(), "50 % -> 60 % (+10 pt) ~");
        let far = RateChange::new((0, 20), (20, 20));
        assert!(far.separated);
        assert_eq!(far.delta, 1.0);
    }
}
