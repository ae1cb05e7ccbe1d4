//! The budget ledger behind `ctx run --max-cost USD`.
//!
//! Before a task starts, the executor reserves the task's high-end cost
//! (the [`Price::highest_cost`](crate::Price::highest_cost) of its prompt
//! cap and `max_tokens`, times its attempts). When the task ends it
//! settles the actual cost (the server's reported usage, or ctx's exact
//! count where the server reports none) and the unused part of the
//! reservation returns to the pool.
//!
//! **The invariant.** `spent + reserved <= budget` after every call, and so
//! `spent <= budget`, provided every settlement is at most its
//! reservation. That proviso is what the bound argument gives: a call can
//! never cost more than its high end, because ctx cuts prompts at
//! `max_prompt_tokens` and completions stop at `max_tokens`. A settlement
//! above its reservation is still recorded truthfully (the money is
//! gone) and reported as an overrun in the [`Settlement`]; from then on
//! nothing new fits until the books are back under the budget.
//!
//! **How the executor uses it.** For each ready task, in priority order:
//!
//! 1. [`BudgetLedger::reserve`] its high end.
//! 2. [`Reservation::Reserved`]: start the task.
//! 3. [`Reservation::MustWait`]: the task would fit if in-flight tasks
//!    returned their unused reservations; leave it ready and try again
//!    after the next settlement (other, cheaper ready tasks may go first).
//! 4. [`Reservation::NeverFits`]: even if every task in flight spent
//!    nothing more, `spent + high > budget`; since `spent` only grows it
//!    can never fit. End it `skipped` with reason `budget` (its dependents
//!    too) and report [`BudgetLedger::spent`] and how much more the
//!    skipped tasks' high ends need.
//! 5. When a task ends — completed, failed, or cancelled before reaching
//!    the server (settle zero) — [`BudgetLedger::settle`] it, then retry
//!    the waiting tasks.
//!
//! `MustWait` is only ever returned while something is in flight, so the
//! loop cannot wait forever: each settlement either lets a waiting task
//! in or, once nothing is in flight, turns its answer into `NeverFits`.
//!
//! The ledger is a plain mutex-guarded structure with no clock and no
//! runtime: the executor owns the waiting.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::Serialize;
use thiserror::Error;

use crate::money::{DecimalError, Usd};

/// The answer to a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Reserved: start the task.
    Reserved,
    /// Does not fit now, but would if tasks in flight returned their
    /// unused reservations: wait for a settlement.
    MustWait {
        /// The reservation asked for.
        needed: Usd,
        /// What is free right now (`budget - spent - reserved`).
        available: Usd,
        /// How many tasks hold reservations.
        in_flight: usize,
    },
    /// Cannot fit even if every task in flight spent nothing more: skip
    /// the task with reason `budget`.
    NeverFits {
        /// The reservation asked for.
        needed: Usd,
        /// The most that could ever be free (`budget - spent`).
        available_at_best: Usd,
    },
}

/// The outcome of a settlement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    /// What the task had reserved.
    pub reserved: Usd,
    /// What it actually cost (now part of `spent`).
    pub actual: Usd,
    /// The unused part returned to the pool.
    pub released: Usd,
    /// How much the actual cost exceeded the reservation (zero when the
    /// bound held).
    pub overrun: Usd,
}

/// A misuse of the ledger by its caller.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LedgerError {
    /// The task already holds a reservation.
    #[error("task {task:?} already holds a budget reservation")]
    AlreadyReserved {
        /// The task id.
        task: String,
    },
    /// The task holds no reservation to settle.
    #[error("task {task:?} holds no budget reservation to settle")]
    NotReserved {
        /// The task id.
        task: String,
    },
}

/// A consistent view of the books at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LedgerSnapshot {
    /// The budget.
    pub budget: Usd,
    /// Settled costs.
    pub spent: Usd,
    /// Reservations of tasks in flight.
    pub reserved: Usd,
    /// `budget - spent - reserved`, or zero.
    pub remaining: Usd,
    /// How many tasks hold reservations.
    pub in_flight: usize,
}

#[derive(Debug, Default)]
struct Books {
    spent: Usd,
    reserved: Usd,
    in_flight: BTreeMap<String, Usd>,
}

/// A dollar budget shared by the tasks of one run. Thread-safe: every
/// method takes `&self`.
#[derive(Debug)]
pub struct BudgetLedger {
    budget: Usd,
    books: Mutex<Books>,
}

impl BudgetLedger {
    /// A ledger with nothing spent.
    pub fn new(budget: Usd) -> BudgetLedger {
        BudgetLedger::resumed(budget, Usd::ZERO)
    }

    /// A ledger that starts with `already_spent` counted against the
    /// budget: for a resumed run whose budget covers the whole run rather
    /// than only the new session.
    pub fn resumed(budget: Usd, already_spent: Usd) -> BudgetLedger {
        BudgetLedger {
            budget,
            books: Mutex::new(Books {
                spent: already_spent,
                ..Books::default()
            }),
        }
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        // The books are updated by plain assignments after every check,
        // so a panic elsewhere cannot leave them half-written.
        self.books.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks to reserve `high` for `task`.
    pub fn reserve(&self, task: &str, high: Usd) -> Result<Reservation, LedgerError> {
        let mut books = self.books();
        if books.in_flight.contains_key(task) {
            return Err(LedgerError::AlreadyReserved { task: task.into() });
        }
        let committed = books.spent.saturating_add(books.reserved);
        let after = committed.saturating_add(high);
        if after <= self.budget && after.picos() < u128::MAX {
            books.reserved = books.reserved.saturating_add(high);
            books.in_flight.insert(task.to_string(), high);
            return Ok(Reservation::Reserved);
        }
        let at_best = books.spent.saturating_add(high);
        if at_best <= self.budget && !books.in_flight.is_empty() {
            Ok(Reservation::MustWait {
                needed: high,
                available: self.budget.saturating_sub(committed),
                in_flight: books.in_flight.len(),
            })
        } else {
            Ok(Reservation::NeverFits {
                needed: high,
                available_at_best: self.budget.saturating_sub(books.spent),
            })
        }
    }

    /// Ends `task`'s reservation: `actual` becomes spent and the rest of
    /// the reservation is released.
    pub fn settle(&self, task: &str, actual: Usd) -> Result<Settlement, LedgerError> {
        let mut books = self.books();
        let Some(reserved) = books.in_flight.remove(task) else {
            return Err(LedgerError::NotReserved { task: task.into() });
        };
        books.reserved = books.reserved.saturating_sub(reserved);
        books.spent = books.spent.saturating_add(actual);
        Ok(Settlement {
            reserved,
            actual,
            released: reserved.saturating_sub(actual),
            overrun: actual.saturating_sub(reserved),
        })
    }

    /// The budget.
    pub fn budget(&self) -> Usd {
        self.budget
    }

    /// Settled costs so far.
    pub fn spent(&self) -> Usd {
        self.books().spent
    }

    /// Reservations of tasks in flight.
    pub fn reserved(&self) -> Usd {
        self.books().reserved
    }

    /// `budget - spent - reserved`, or zero: the largest reservation that
    /// would be granted right now.
    pub fn remaining(&self) -> Usd {
        self.snapshot().remaining
    }

    /// The books at this moment, all figures from one lock.
    pub fn snapshot(&self) -> LedgerSnapshot {
        let books = self.books();
        LedgerSnapshot {
            budget: self.budget,
            spent: books.spent,
            reserved: books.reserved,
            remaining: self
                .budget
                .saturating_sub(books.spent.saturating_add(books.reserved)),
            in_flight: books.in_flight.len(),
        }
    }
}

/// A `--max-cost` value that cannot be a budget. The message starts with
/// the value as given and names no flag (ctx's CLI writes `--max-cost "0":
/// ...`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MaxCostError {
    /// Not a plain positive decimal.
    #[error("{value:?}: the amount {problem}")]
    Amount {
        /// The text given.
        value: String,
        /// What is wrong with it.
        problem: DecimalError,
    },
    /// Zero.
    #[error("{value:?}: the budget must be more than zero dollars")]
    Zero {
        /// The text given.
        value: String,
    },
}

/// Reads `--max-cost USD`: a positive decimal of dollars with at most 12
/// decimal places (`5`, `0.25`), or the exponent form ctx's JSON prints
/// (`1.62e-5`), read exactly. Zero and negative amounts are
/// refused.
pub fn parse_max_cost(value: &str) -> Result<Usd, MaxCostError> {
    match Usd::parse(value) {
        Ok(amount) if amount == Usd::ZERO => Err(MaxCostError::Zero {
            value: value.into(),
        }),
        Ok(amount) => Ok(amount),
        Err(problem) => Err(MaxCostError::Amount {
            value: value.into(),
            problem,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(s: &str) -> Usd {
        Usd::parse(s).unwrap()
    }

    #[test]
    fn reserve_wait_never_fits_and_release() {
        let ledger = BudgetLedger::new(usd("1"));
        assert_eq!(ledger.reserve("a", usd("0.6")), Ok(Reservation::Reserved));
        assert_eq!(
            ledger.reserve("b", usd("0.5")),
            Ok(Reservation::MustWait {
                needed: usd("0.5"),
                available: usd("0.4"),
                in_flight: 1
            })
        );
        assert_eq!(
            ledger.reserve("c", usd("1.5")),
            Ok(Reservation::NeverFits {
                needed: usd("1.5"),
                available_at_best: usd("1")
            })
        );
        let s = ledger.settle("a", usd("0.2")).unwrap();
        assert_eq!((s.released, s.overrun), (usd("0.4"), Usd::ZERO));
        assert_eq!(ledger.reserve("b", usd("0.5")), Ok(Reservation::Reserved));
        assert_eq!(
            ledger.snapshot(),
            LedgerSnapshot {
                budget: usd("1"),
                spent: usd("0.2"),
                reserved: usd("0.5"),
                remaining: usd("0.3"),
                in_flight: 1
            }
        );
        ledger.settle("b", usd("0.5")).unwrap();
        // 0.3 left and nothing in flight: a 0.4 task can never fit.
        assert!(matches!(
            ledger.reserve("d", usd("0.4")),
            Ok(Reservation::NeverFits { .. })
        ));
        assert_eq!(ledger.reserve("e", usd("0.3")), Ok(Reservation::Reserved));
        assert_eq!(ledger.spent(), usd("0.7"));
    }

    #[test]
    fn reserved_and_remaining_follow_every_reservation() {
        let ledger = BudgetLedger::new(usd("1"));
        let books = |l: &BudgetLedger| (l.spent(), l.reserved(), l.remaining());
        assert_eq!(books(&ledger), (Usd::ZERO, Usd::ZERO, usd("1")));
        assert_eq!(ledger.budget(), usd("1"));
        assert_eq!(ledger.reserve("a", usd("0.25")), Ok(Reservation::Reserved));
        assert_eq!(books(&ledger), (Usd::ZERO, usd("0.25"), usd("0.75")));
        // Exactly what remains is granted.
        assert_eq!(ledger.reserve("b", usd("0.75")), Ok(Reservation::Reserved));
        assert_eq!(books(&ledger), (Usd::ZERO, usd("1"), Usd::ZERO));
        // The whole budget fits once the tasks in flight settle: it waits.
        assert_eq!(
            ledger.reserve("c", usd("1")),
            Ok(Reservation::MustWait {
                needed: usd("1"),
                available: Usd::ZERO,
                in_flight: 2
            })
        );
        ledger.settle("a", usd("0.25")).unwrap();
        assert_eq!(books(&ledger), (usd("0.25"), usd("0.75"), Usd::ZERO));
        ledger.settle("b", usd("0.5")).unwrap();
        assert_eq!(books(&ledger), (usd("0.75"), Usd::ZERO, usd("0.25")));
        // Past the budget (an overrun): nothing remains, not a wrap-around.
        assert_eq!(ledger.reserve("d", usd("0.25")), Ok(Reservation::Reserved));
        ledger.settle("d", usd("2")).unwrap();
        assert_eq!(books(&ledger), (usd("2.75"), Usd::ZERO, Usd::ZERO));
    }

    #[test]
    fn a_reservation_that_saturates_is_never_granted() {
        // At the top of the range a sum saturates; the saturated sum must
        // not pass for "fits the budget".
        let max = Usd::from_picos(u128::MAX);
        let ledger = BudgetLedger::new(max);
        assert_eq!(
            ledger.reserve("a", max),
            Ok(Reservation::NeverFits {
                needed: max,
                available_at_best: max
            })
        );
        assert_eq!(ledger.reserved(), Usd::ZERO);
    }

    #[test]
    fn misuse_is_an_error_not_a_silent_change() {
        let ledger = BudgetLedger::new(usd("1"));
        ledger.reserve("a", usd("0.1")).unwrap();
        assert_eq!(
            ledger.reserve("a", usd("0.1")),
            Err(LedgerError::AlreadyReserved { task: "a".into() })
        );
        assert_eq!(
            ledger.settle("b", Usd::ZERO),
            Err(LedgerError::NotReserved { task: "b".into() })
        );
        assert_eq!(ledger.snapshot().reserved, usd("0.1"));
    }

    #[test]
    fn an_overrun_is_recorded_and_blocks_new_work() {
        let ledger = BudgetLedger::new(usd("1"));
        ledger.reserve("a", usd("0.5")).unwrap();
        let s = ledger.settle("a", usd("1.2")).unwrap();
        assert_eq!(s.overrun, usd("0.7"));
        assert_eq!(ledger.spent(), usd("1.2"));
        assert!(matches!(
            ledger.reserve("b", Usd::ZERO),
            Ok(Reservation::NeverFits { .. })
        ));
    }

    #[test]
    fn a_resumed_run_counts_what_was_spent() {
        let ledger = BudgetLedger::resumed(usd("1"), usd("0.9"));
        assert!(matches!(
            ledger.reserve("a", usd("0.2")),
            Ok(Reservation::NeverFits { .. })
        ));
        assert_eq!(ledger.reserve("a", usd("0.1")), Ok(Reservation::Reserved));
    }

    #[test]
    fn max_cost_must_be_a_positive_amount() {
        assert_eq!(parse_max_cost("5"), Ok(usd("5")));
        assert_eq!(parse_max_cost("0.25"), Ok(usd("0.25")));
        assert_eq!(
            parse_max_cost("0").unwrap_err().to_string(),
            "\"0\": the budget must be more than zero dollars"
        );
        assert!(parse_max_cost("0.000").is_err());
        assert_eq!(
            parse_max_cost("-1").unwrap_err().to_string(),
            "\"-1\": the amount is negative"
        );
        assert!(parse_max_cost("five").is_err());
        assert!(parse_max_cost("").is_err());
        // The exponent form ctx's JSON prints reads exactly.
        assert_eq!(parse_max_cost("1.62e-05"), Ok(usd("0.0000162")));
        assert_eq!(parse_max_cost("1e3"), Ok(usd("1000")));
        assert_eq!(
            parse_max_cost("-1.62e-5").unwrap_err().to_string(),
            "\"-1.62e-5\": the amount is negative"
        );
        assert_eq!(
            parse_max_cost("1e-13").unwrap_err().to_string(),
            "\"1e-13\": the amount has more than 12 decimal places"
        );
        assert!(matches!(
            parse_max_cost("0e5"),
            Err(MaxCostError::Zero { .. })
        ));
        assert!(matches!(
            parse_max_cost("1e"),
            Err(MaxCostError::Amount {
                problem: DecimalError::NotANumber,
                ..
            })
        ));
    }

    #[test]
    fn concurrent_tasks_never_overspend() {
        use std::sync::Arc;
        let ledger = Arc::new(BudgetLedger::new(usd("1")));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let ledger = Arc::clone(&ledger);
                std::thread::spawn(move || {
                    for i in 0..200u32 {
                        let id = format!("{t}-{i}");
                        let high =
                            Usd::from_picos(u128::from(1 + (i * 7 + t) % 50) * 1_000_000_000);
                        if ledger.reserve(&id, high) == Ok(Reservation::Reserved) {
                            let snap = ledger.snapshot();
                            assert!(snap.spent.saturating_add(snap.reserved) <= snap.budget);
                            let actual = Usd::from_picos(high.picos() * u128::from(i % 3) / 2);
                            ledger.settle(&id, actual).unwrap();
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let snap = ledger.snapshot();
        assert!(snap.spent <= snap.budget, "{snap:?}");
        assert_eq!((snap.reserved, snap.in_flight), (Usd::ZERO, 0));
    }
}
