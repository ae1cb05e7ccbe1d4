//! Cost ranges before a run: per task and in total, `[low, high]`.
//!
//! The caller (`ctx plan cost`) supplies each task's token ranges; this
//! module prices them.
//!
//! * **High is a bound.** A prompt never exceeds the task's
//!   `max_prompt_tokens` (ctx-prompt enforces the cap exactly) and a
//!   completion never exceeds its `max_tokens`, so a call costs at most
//!   [`Price::highest_cost`] of those two figures. A task may make several
//!   calls — check retries times the engine's attempts — so the bound is
//!   multiplied by [`TaskEstimate::attempts`]. A task without `max_tokens`
//!   (or without a prompt cap) has no high end: `high` is `None` and the
//!   task is listed in `unbounded`.
//! * **Low is what one call costs at the least**: the task's own prompt
//!   and entities with empty dependency outputs, the given minimum
//!   completion, one attempt, and the cheaper of the cached and uncached
//!   input rates (providers cache prompts on their own).
//! * **Never pretend.** A model no price source knows has no cost at all
//!   (`low` and `high` are `None`) and is listed in `unpriced`; the total's
//!   high end is then `None` too, while its low end still bounds the
//!   priced part (an unknown cost is never negative).
//!
//! Sums are exact ([`Usd`]), so the same plan gives byte-identical
//! reports.

use ctx_model::ServiceTier;
use serde::Serialize;

use crate::money::{Round, Usd};
use crate::table::PriceBook;

/// A number of tokens between `low` and `high`; `high` is `None` when
/// nothing bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenRange {
    /// The fewest tokens.
    pub low: u64,
    /// The most tokens, or `None` for unbounded.
    pub high: Option<u64>,
}

impl TokenRange {
    /// `[low, high]`.
    pub const fn bounded(low: u64, high: u64) -> TokenRange {
        TokenRange {
            low,
            high: Some(high),
        }
    }

    /// `[low, ∞)`.
    pub const fn unbounded(low: u64) -> TokenRange {
        TokenRange { low, high: None }
    }
}

/// What the caller knows about one task before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEstimate {
    /// The task's id.
    pub task_id: String,
    /// The model it will call, as the plan names it.
    pub model: String,
    /// Prompt tokens: low with empty dependency outputs, high the prompt
    /// cap.
    pub prompt_tokens: TokenRange,
    /// Completion tokens: high is `max_tokens`, `None` without one.
    pub completion_tokens: TokenRange,
    /// The most calls the task can make ([`attempt_bound`]); 0 counts as 1.
    pub attempts: u32,
}

/// The most calls one task can make: each of `check_retries + 1` runs may
/// use up to `max_attempts` engine attempts (retries after errors can be
/// billed too). Saturates instead of overflowing.
pub fn attempt_bound(check_retries: u32, max_attempts: u32) -> u32 {
    check_retries
        .saturating_add(1)
        .saturating_mul(max_attempts.max(1))
}

/// A cost range in US dollars; `None` where unknown (unpriced model) or
/// unbounded (`high` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CostRange {
    /// The least it can cost.
    pub low: Option<Usd>,
    /// The most it can cost.
    pub high: Option<Usd>,
}

/// One task's line of the report. JSON keys in this order: `task_id`,
/// `model`, `prompt_tokens`, `completion_tokens`, `cost_usd`, `attempts`,
/// `price_source`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskCost {
    /// The task's id.
    pub task_id: String,
    /// The model, as the plan names it.
    pub model: String,
    /// Prompt tokens of one call.
    pub prompt_tokens: TokenRange,
    /// Completion tokens of one call.
    pub completion_tokens: TokenRange,
    /// The task's cost over all its attempts.
    pub cost_usd: CostRange,
    /// The attempts multiplier applied to the high end.
    pub attempts: u32,
    /// Where the price came from (`default table of 2026-10-07`), or
    /// `None` when the price is unknown.
    pub price_source: Option<String>,
}

/// The report's totals. JSON keys in this order: `cost_usd`, `unbounded`,
/// `unpriced`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CostTotal {
    /// The sum of the tasks' ranges; `high` is `None` when any task is
    /// unbounded or unpriced.
    pub cost_usd: CostRange,
    /// Ids of tasks without a high end, in task order.
    pub unbounded: Vec<String>,
    /// Models without a price, sorted, each once.
    pub unpriced: Vec<String>,
}

impl CostTotal {
    /// The low end as the text report prints it (rounded down).
    pub fn low_text(&self) -> String {
        low(self.cost_usd.low)
    }

    /// The high end as the text report prints it (rounded up), or why
    /// there is none: `unbounded` wins over `price unknown`, since no
    /// price makes an unbounded task bounded.
    pub fn high_text(&self) -> String {
        match self.cost_usd.high {
            None if self.unbounded.is_empty() => "price unknown".into(),
            _ => high(self.cost_usd),
        }
    }
}

/// What `ctx plan cost` prints: `{"tasks": [...], "total": {...}}`, and
/// `"service_tiers": [...]` when a service tier is priced beside
/// ([`tier_total`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CostReport {
    /// One line per task, in the order given.
    pub tasks: Vec<TaskCost>,
    /// The totals.
    pub total: CostTotal,
    /// The run's range at another service tier's prices.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_tiers: Vec<TierTotal>,
}

/// The run's range at one service tier's prices (`ctx plan cost --batch`).
/// JSON keys in this order: `tier`, `cost_usd`, `standard_priced`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TierTotal {
    /// The tier.
    pub tier: ServiceTier,
    /// The sum of the tasks' ranges at its prices.
    pub cost_usd: CostRange,
    /// Models with a price but none for the tier, sorted: their tasks are
    /// in the range at the standard price.
    pub standard_priced: Vec<String>,
}

/// The range of `tasks` at `tier`'s prices in `book`: what a run whose
/// every call is billed at that tier costs.
pub fn tier_total(book: &PriceBook, tasks: &[TaskEstimate], tier: ServiceTier) -> TierTotal {
    let report = estimate_costs(&book.at_tier(tier), tasks);
    let standard_priced: std::collections::BTreeSet<String> = tasks
        .iter()
        .filter(|t| book.lacks_tier(&t.model, tier))
        .map(|t| t.model.clone())
        .collect();
    TierTotal {
        tier,
        cost_usd: report.total.cost_usd,
        standard_priced: standard_priced.into_iter().collect(),
    }
}

/// Prices every task and sums the ranges.
pub fn estimate_costs(book: &PriceBook, tasks: &[TaskEstimate]) -> CostReport {
    let mut lines = Vec::with_capacity(tasks.len());
    let mut low_sum = Usd::ZERO;
    let mut high_sum = Some(Usd::ZERO);
    let mut unbounded = Vec::new();
    let mut unpriced = std::collections::BTreeSet::new();
    for task in tasks {
        let attempts = task.attempts.max(1);
        let bounds = task.prompt_tokens.high.zip(task.completion_tokens.high);
        if bounds.is_none() {
            unbounded.push(task.task_id.clone());
        }
        let found = book.lookup(&task.model);
        let cost_usd = match found {
            Some(m) => {
                let low = m
                    .price
                    .lowest_cost(task.prompt_tokens.low, task.completion_tokens.low);
                let high = bounds.map(|(p, c)| {
                    m.price
                        .highest_cost(p, c)
                        .saturating_mul(u64::from(attempts))
                });
                CostRange {
                    low: Some(low),
                    high,
                }
            }
            None => {
                unpriced.insert(task.model.clone());
                CostRange {
                    low: None,
                    high: None,
                }
            }
        };
        low_sum = low_sum.saturating_add(cost_usd.low.unwrap_or(Usd::ZERO));
        high_sum = high_sum
            .zip(cost_usd.high)
            .map(|(a, b)| a.saturating_add(b));
        lines.push(TaskCost {
            task_id: task.task_id.clone(),
            model: task.model.clone(),
            prompt_tokens: task.prompt_tokens,
            completion_tokens: task.completion_tokens,
            cost_usd,
            attempts,
            price_source: found.map(|m| m.source.to_string()),
        });
    }
    CostReport {
        tasks: lines,
        total: CostTotal {
            cost_usd: CostRange {
                low: Some(low_sum),
                high: high_sum,
            },
            unbounded,
            unpriced: unpriced.into_iter().collect(),
        },
        service_tiers: Vec::new(),
    }
}

/// Decimal places of dollar amounts in the text table.
const TEXT_DECIMALS: u32 = 6;

impl CostReport {
    /// The report as an aligned text table. Dollar figures have six
    /// decimals, low ends rounded down and high ends up, so the printed
    /// range contains the exact one.
    pub fn render_text(&self) -> String {
        let header = [
            "task",
            "model",
            "prompt tokens",
            "completion tokens",
            "attempts",
            "cost low",
            "cost high",
        ];
        let mut rows: Vec<[String; 7]> = Vec::with_capacity(self.tasks.len() + 1);
        for t in &self.tasks {
            rows.push([
                t.task_id.clone(),
                t.model.clone(),
                tokens(t.prompt_tokens),
                tokens(t.completion_tokens),
                t.attempts.to_string(),
                low(t.cost_usd.low),
                high(t.cost_usd),
            ]);
        }
        let total = &self.total;
        rows.push([
            "total".into(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            total.low_text(),
            total.high_text(),
        ]);
        // Text columns left-aligned, figures right-aligned.
        let right = [false, false, true, true, true, true, true];
        let mut out = ctx_table::render(&header, &right, &rows);
        if !total.unbounded.is_empty() {
            out.push_str(&format!(
                "unbounded: {} (no max_tokens: set params.max_tokens or pass --max-tokens)\n",
                total.unbounded.join(", ")
            ));
        }
        if !total.unpriced.is_empty() {
            out.push_str(&format!(
                "price unknown: {} (give prices with --price MODEL=IN,OUT[,CACHED], config.prices or --prices FILE)\n",
                total.unpriced.join(", ")
            ));
        }
        for t in &self.service_tiers {
            out.push_str(&format!(
                "at {} prices: {} to {}",
                t.tier,
                low(t.cost_usd.low),
                high(t.cost_usd)
            ));
            if !t.standard_priced.is_empty() {
                out.push_str(&format!(
                    " ({} at the standard price: no {} price known)",
                    t.standard_priced.join(", "),
                    t.tier
                ));
            }
            out.push('\n');
        }
        out
    }
}

fn tokens(range: TokenRange) -> String {
    match range.high {
        Some(high) => format!("{}-{high}", range.low),
        None => format!("{}-unbounded", range.low),
    }
}

fn low(amount: Option<Usd>) -> String {
    match amount {
        Some(a) => a.to_dollars(TEXT_DECIMALS, Round::Down),
        None => "price unknown".into(),
    }
}

fn high(range: CostRange) -> String {
    match (range.low, range.high) {
        (_, Some(a)) => a.to_dollars(TEXT_DECIMALS, Round::Up),
        (Some(_), None) => "unbounded".into(),
        (None, None) => "price unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flag::flag_table;

    fn book() -> PriceBook {
        let mut book = PriceBook::new();
        book.push(flag_table(["gpt-4o=2.5,10,1.25", "local=0,0"]).unwrap());
        book
    }

    fn task(id: &str, model: &str, p: TokenRange, c: TokenRange, attempts: u32) -> TaskEstimate {
        TaskEstimate {
            task_id: id.into(),
            model: model.into(),
            prompt_tokens: p,
            completion_tokens: c,
            attempts,
        }
    }

    fn sample() -> Vec<TaskEstimate> {
        vec![
            task(
                "outline",
                "openai/gpt-4o",
                TokenRange::bounded(120, 4000),
                TokenRange::bounded(0, 512),
                3,
            ),
            task(
                "draft",
                "gpt-4o",
                TokenRange::bounded(800, 4000),
                TokenRange::unbounded(0),
                1,
            ),
            task(
                "review",
                "mystery-model",
                TokenRange::bounded(50, 4000),
                TokenRange::bounded(0, 256),
                2,
            ),
            task(
                "lint",
                "local",
                TokenRange::bounded(10, 4000),
                TokenRange::bounded(1, 64),
                1,
            ),
            task(
                "polish",
                "mystery-model",
                TokenRange::bounded(50, 4000),
                TokenRange::bounded(0, 256),
                0,
            ),
        ]
    }

    #[test]
    fn ranges_multiply_attempts_and_name_what_is_missing() {
        let r = estimate_costs(&book(), &sample());
        let outline = &r.tasks[0];
        // low: 120 × 1.25 (cached is cheaper) = 150 µ$; high: 3 × (4000 ×
        // 2.5 + 512 × 10) = 3 × 15,120 µ$.
        assert_eq!(outline.cost_usd.low.unwrap().to_string(), "0.00015");
        assert_eq!(outline.cost_usd.high.unwrap().to_string(), "0.04536");
        assert_eq!(outline.price_source.as_deref(), Some("--price"));
        assert_eq!(r.tasks[1].cost_usd.high, None);
        assert_eq!(
            r.tasks[2].cost_usd,
            CostRange {
                low: None,
                high: None
            }
        );
        assert_eq!(r.tasks[4].attempts, 1, "0 attempts counts as one");
        assert_eq!(r.total.unbounded, ["draft"]);
        assert_eq!(r.total.unpriced, ["mystery-model"]);
        assert_eq!(r.total.cost_usd.high, None);
        // 150 + 800 × 1.25 = 1,150 µ$; the free model adds nothing.
        assert_eq!(r.total.cost_usd.low.unwrap().to_string(), "0.00115");
    }

    #[test]
    fn a_fully_bounded_priced_plan_has_a_total_high_end() {
        let tasks = vec![
            task(
                "a",
                "gpt-4o",
                TokenRange::bounded(0, 1_000_000),
                TokenRange::bounded(0, 1_000_000),
                1,
            ),
            task(
                "b",
                "gpt-4o",
                TokenRange::bounded(0, 1_000_000),
                TokenRange::bounded(0, 0),
                2,
            ),
        ];
        let r = estimate_costs(&book(), &tasks);
        assert_eq!(r.total.cost_usd.high.unwrap().to_string(), "17.5");
        assert!(r.total.unbounded.is_empty() && r.total.unpriced.is_empty());
    }

    #[test]
    fn attempts_are_check_runs_times_engine_attempts() {
        assert_eq!(attempt_bound(0, 1), 1);
        assert_eq!(attempt_bound(2, 3), 9);
        assert_eq!(attempt_bound(0, 0), 1);
        assert_eq!(attempt_bound(u32::MAX, 5), u32::MAX);
    }

    #[test]
    fn json_has_the_documented_shape() {
        insta::assert_snapshot!(ctx_model::json_text(&estimate_costs(&book(), &sample())).unwrap());
    }

    #[test]
    fn text_table() {
        insta::assert_snapshot!(estimate_costs(&book(), &sample()).render_text());
    }

    #[test]
    fn an_unpriced_but_bounded_total_is_unknown_not_unbounded() {
        let tasks = vec![task(
            "a",
            "mystery",
            TokenRange::bounded(1, 2),
            TokenRange::bounded(1, 2),
            1,
        )];
        let text = estimate_costs(&book(), &tasks).render_text();
        let total = text.lines().find(|l| l.starts_with("total")).unwrap();
        assert!(total.ends_with("$0.000000  price unknown"), "{total}");
    }

    #[test]
    fn empty_plan() {
        let r = estimate_costs(&book(), &[]);
        assert_eq!(r.total.cost_usd.high, Some(Usd::ZERO));
        insta::assert_snapshot!(r.render_text());
    }
}
