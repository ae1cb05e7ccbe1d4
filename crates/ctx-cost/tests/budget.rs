//! The budget property: with reservations at each task's high end and
//! settlements at the actual cost of usages inside the task's caps, the
//! ledger never lets `spent` pass the budget — for random prices, plans,
//! usages and interleavings of starts and finishes.

use std::collections::VecDeque;

use proptest::prelude::*;

use ctx_cost::{
    BudgetLedger, LongContext, Price, Rate, Rates, Reservation, TaskEstimate, TokenRange, Usage,
    Usd, estimate_costs,
};

fn any_rates() -> impl Strategy<Value = Rates> {
    (0u64..40_000_000, 0u64..40_000_000, 0u64..80_000_000).prop_map(|(i, c, o)| Rates {
        input: Rate::from_micros_per_million(i),
        cached_input: Rate::from_micros_per_million(c),
        cache_write: Rate::from_micros_per_million(i),
        output: Rate::from_micros_per_million(o),
    })
}

fn any_price() -> impl Strategy<Value = Price> {
    (
        any_rates(),
        proptest::option::of((0u64..20_000, any_rates())),
    )
        .prop_map(|(base, lc)| Price {
            base,
            long_context: lc.map(|(above_prompt_tokens, rates)| LongContext {
                above_prompt_tokens,
                rates,
            }),
            tiers: ctx_cost::Tiers::default(),
        })
}

/// One task: its price, caps, attempts, and what each attempt really used
/// (as fractions of the caps, so every usage stays within them).
#[derive(Debug, Clone)]
struct SimTask {
    price: Price,
    max_prompt: u64,
    max_completion: u64,
    attempts: u32,
    calls: Vec<(f64, f64, f64)>,
}

fn any_task() -> impl Strategy<Value = SimTask> {
    (
        any_price(),
        1u64..30_000,
        1u64..8_000,
        1u32..4,
        proptest::collection::vec((0.0f64..=1.0, 0.0f64..=1.0, 0.0f64..=1.0), 0..4),
    )
        .prop_map(|(price, max_prompt, max_completion, attempts, mut calls)| {
            calls.truncate(attempts as usize);
            SimTask {
                price,
                max_prompt,
                max_completion,
                attempts,
                calls,
            }
        })
}

impl SimTask {
    fn high(&self) -> Usd {
        self.price
            .highest_cost(self.max_prompt, self.max_completion)
            .saturating_mul(u64::from(self.attempts))
    }

    fn actual(&self) -> Usd {
        self.calls
            .iter()
            .map(|&(p, cached, c)| {
                let prompt = (self.max_prompt as f64 * p) as u64;
                self.price.cost(&Usage {
                    prompt_tokens: prompt,
                    cached_prompt_tokens: (prompt as f64 * cached) as u64,
                    cache_write_prompt_tokens: 0,
                    completion_tokens: (self.max_completion as f64 * c) as u64,
                    tier: None,
                })
            })
            .sum()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// An executor-shaped loop: start ready tasks in order while they fit,
    /// finish a random in-flight task when the head must wait, skip it when
    /// it never fits.
    #[test]
    fn spent_never_exceeds_the_budget(
        tasks in proptest::collection::vec(any_task(), 0..40),
        budget_picos in 0u128..2_000_000_000_000,
        choices in proptest::collection::vec(any::<prop::sample::Index>(), 200),
        eager in proptest::collection::vec(any::<bool>(), 200),
    ) {
        let budget = Usd::from_picos(budget_picos);
        let ledger = BudgetLedger::new(budget);
        let mut ready: VecDeque<usize> = (0..tasks.len()).collect();
        let mut in_flight: Vec<usize> = Vec::new();
        let mut skipped = Vec::new();
        let mut completed = 0usize;
        let mut step = 0usize;
        let mut pick = |n: usize| {
            step += 1;
            (choices[step % choices.len()].index(n), eager[step % eager.len()])
        };
        while !ready.is_empty() || !in_flight.is_empty() {
            let (finish_at, finish_first) = pick(in_flight.len().max(1));
            // Sometimes a task finishes before the next start is tried.
            if !in_flight.is_empty() && (ready.is_empty() || finish_first) {
                let i = in_flight.swap_remove(finish_at);
                let actual = tasks[i].actual();
                let s = ledger.settle(&i.to_string(), actual).unwrap();
                prop_assert!(actual <= s.reserved, "usage within caps costs at most the reservation");
                prop_assert_eq!(s.overrun, Usd::ZERO);
                completed += 1;
            } else if let Some(&i) = ready.front() {
                let high = tasks[i].high();
                match ledger.reserve(&i.to_string(), high).unwrap() {
                    Reservation::Reserved => {
                        ready.pop_front();
                        in_flight.push(i);
                    }
                    Reservation::MustWait { in_flight: n, .. } => {
                        prop_assert!(n > 0 && n == in_flight.len(), "waits only on work in flight");
                        // Wait: let one in-flight task finish.
                        let i = in_flight.swap_remove(finish_at.min(in_flight.len() - 1));
                        ledger.settle(&i.to_string(), tasks[i].actual()).unwrap();
                        completed += 1;
                    }
                    Reservation::NeverFits { needed, available_at_best } => {
                        prop_assert!(ledger.spent().saturating_add(needed) > budget);
                        prop_assert_eq!(available_at_best, budget.saturating_sub(ledger.spent()));
                        ready.pop_front();
                        skipped.push(i);
                    }
                }
            }
            let snap = ledger.snapshot();
            prop_assert!(snap.spent.saturating_add(snap.reserved) <= budget, "{:?}", snap);
            prop_assert!(snap.spent <= budget);
            prop_assert_eq!(snap.in_flight, in_flight.len());
        }
        prop_assert_eq!(completed + skipped.len(), tasks.len(), "every task ends");
        let expected: Usd = (0..tasks.len())
            .filter(|i| !skipped.contains(i))
            .map(|i| tasks[i].actual())
            .sum();
        prop_assert_eq!(ledger.spent(), expected, "spent is the exact sum of settled costs");
    }

    /// The estimate's per-task range contains every actual cost, and its
    /// high end is exactly what the ledger reserves.
    #[test]
    fn estimates_contain_actual_costs(task in any_task()) {
        let mut table = ctx_cost::PriceTable::new(ctx_cost::PriceSource::Plan);
        table.insert("m", task.price);
        let mut book = ctx_cost::PriceBook::new();
        book.push(table);
        let report = estimate_costs(&book, &[TaskEstimate {
            task_id: "t".into(),
            model: "m".into(),
            prompt_tokens: TokenRange::bounded(0, task.max_prompt),
            completion_tokens: TokenRange::bounded(0, task.max_completion),
            attempts: task.attempts,
        }]);
        let range = report.tasks[0].cost_usd;
        prop_assert_eq!(range.high, Some(task.high()));
        prop_assert_eq!(range.low, Some(Usd::ZERO));
        prop_assert!(task.actual() <= task.high());
        prop_assert_eq!(report.total.cost_usd, range);
    }
}
