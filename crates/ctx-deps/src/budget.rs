//! A run's reservations under `--max-cost` (the executor's module
//! documentation, "Budget"): each task's high end reserved before it is
//! dispatched, its actual cost settled when its result comes back.
//!
//! What a task may cost and what it did cost are the cost module's
//! ([`CostModel`](crate::CostModel), [`crate::task_cost`]); the ledger's
//! arithmetic is `ctx_cost::BudgetLedger`'s. This module only keys the
//! run's reservations (a scope of its own in a shared ledger) and tells
//! other runs of a shared budget when it settles.

use ctx_cost::{Reservation, Usd};
use ctx_model::Plan;

use crate::cost::{BudgetLedger, CostOptions, SharedBudget};

/// The run's budget: the ledger and each task's high end.
pub(crate) struct Budget {
    books: SharedBudget,
    /// The books are [`CostOptions::shared_budget`]: other runs reserve
    /// and settle in them too.
    shared: bool,
    /// This run's prefix of its ledger keys (unique among the runs of a
    /// shared budget).
    scope: u64,
    /// Each task's high end, by index; a map's items are appended as the
    /// map expands ([`Budget::extend`]).
    bounds: std::sync::Mutex<Vec<Option<Usd>>>,
    model: std::sync::Arc<dyn crate::cost::CostModel>,
}

impl Budget {
    /// The budget of a run of `plan` whose options set `max_cost` or a
    /// shared budget; `None` otherwise.
    pub(crate) fn new(plan: &Plan, cost: Option<&CostOptions>) -> Option<Budget> {
        let c = cost?;
        let (books, shared) = match &c.shared_budget {
            Some(books) => (books.clone(), true),
            None => (SharedBudget::resumed(c.max_cost?, c.already_spent), false),
        };
        Some(Budget {
            scope: books.new_scope(),
            books,
            shared,
            bounds: std::sync::Mutex::new(
                plan.sub_tasks.iter().map(|t| c.model.bound(t)).collect(),
            ),
            model: c.model.clone(),
        })
    }

    /// Appends the high ends of `tasks` (a map's items, appended to the
    /// run's plan in this order): each item reserves its own.
    pub(crate) fn extend(&self, tasks: &[ctx_model::SubTask]) {
        let mut bounds = self.bounds.lock().unwrap_or_else(|e| e.into_inner());
        bounds.extend(tasks.iter().map(|t| self.model.bound(t)));
    }

    fn bound(&self, i: usize) -> Option<Usd> {
        let bounds = self.bounds.lock().unwrap_or_else(|e| e.into_inner());
        bounds.get(i).copied().flatten()
    }

    pub(crate) fn ledger(&self) -> &BudgetLedger {
        self.books.ledger()
    }

    fn key(&self, id: &str) -> String {
        format!("{}/{id}", self.scope)
    }

    /// Reserves task `i`'s high end. A task without one cannot be bounded,
    /// so it never fits (callers refuse such plans before the run).
    pub(crate) fn reserve(&self, id: &str, i: usize) -> Reservation {
        let high = self.bound(i).unwrap_or(Usd::from_picos(u128::MAX));
        // A task is popped once per try; one that must wait holds no
        // reservation until a later try is granted, so no task is ever
        // reserved twice (the ledger would refuse it).
        self.ledger()
            .reserve(&self.key(id), high)
            .unwrap_or(Reservation::NeverFits {
                needed: high,
                available_at_best: Usd::ZERO,
            })
    }

    /// Settles task `i` (id `id`) at `cost`, or at its whole reservation
    /// when that cost is unknown (a panicked engine, an aborted job).
    pub(crate) fn settle(&self, id: &str, i: usize, cost: Option<Usd>) {
        let reserved = self.bound(i).unwrap_or(Usd::ZERO);
        // A task that was never reserved has nothing to settle.
        if self
            .ledger()
            .settle(&self.key(id), cost.unwrap_or(reserved))
            .is_ok()
        {
            self.books.announce_settlement();
        }
    }

    /// With a shared budget, a watch on every run's settlements: a run
    /// whose ready tasks wait for budget held by other runs waits on it.
    pub(crate) fn settlements(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.shared.then(|| self.books.settlements())
    }
}

/// Resolves when another run settles in the shared budget `watch`
/// watches; never without one (or if its books were dropped).
pub(crate) async fn settled_elsewhere(watch: Option<&mut tokio::sync::watch::Receiver<u64>>) {
    if let Some(w) = watch
        && w.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ctx_cost::Usage;
    use ctx_model::SubTask;

    use super::*;
    use crate::cost::CostModel;

    /// Every task may cost 3 (picodollars, to keep the sums readable),
    /// except `open`, which cannot be bounded.
    struct Three;

    impl CostModel for Three {
        fn bound(&self, task: &SubTask) -> Option<Usd> {
            (task.id != "open").then(|| Usd::from_picos(3))
        }
        fn max_tokens(&self, _: &SubTask) -> Option<u64> {
            None
        }
        fn call_cost(&self, _: &SubTask, _: &Usage) -> Option<Usd> {
            None
        }
    }

    fn plan(ids: &[&str]) -> Plan {
        let pairs: Vec<(&str, &[&str])> = ids.iter().map(|id| (*id, &[][..])).collect();
        ctx_test_support::plan(&pairs)
    }

    fn options(max: u128, shared: Option<SharedBudget>) -> CostOptions {
        CostOptions {
            model: Arc::new(Three),
            max_cost: Some(Usd::from_picos(max)),
            already_spent: Usd::ZERO,
            cut_output_at_max_tokens: false,
            shared_budget: shared,
        }
    }

    #[test]
    fn no_budget_without_max_cost_or_a_shared_one() {
        let mut c = options(10, None);
        c.max_cost = None;
        assert!(Budget::new(&plan(&["a"]), Some(&c)).is_none());
        assert!(Budget::new(&plan(&["a"]), None).is_none());
    }

    #[test]
    fn reservations_wait_until_a_settlement_returns_the_unused_part() {
        let p = plan(&["a", "b", "c"]);
        let b = Budget::new(&p, Some(&options(7, None))).unwrap();
        assert!(matches!(b.reserve("a", 0), Reservation::Reserved));
        assert!(matches!(b.reserve("b", 1), Reservation::Reserved));
        assert!(matches!(b.reserve("c", 2), Reservation::MustWait { .. }));
        // `a` cost 1 of its 3: 7 - 1 - 3 = 3 left, enough for `c`.
        b.settle("a", 0, Some(Usd::from_picos(1)));
        assert!(matches!(b.reserve("c", 2), Reservation::Reserved));
        // An unknown cost keeps the whole reservation.
        b.settle("b", 1, None);
        b.settle("c", 2, Some(Usd::ZERO));
        assert_eq!(b.ledger().spent(), Usd::from_picos(4));
        assert_eq!(b.ledger().reserved(), Usd::ZERO);
        assert!(matches!(b.reserve("d", 3), Reservation::NeverFits { .. }));
    }

    #[test]
    fn a_task_without_a_bound_never_fits() {
        let p = plan(&["open"]);
        let b = Budget::new(&p, Some(&options(u128::MAX / 2, None))).unwrap();
        assert!(matches!(
            b.reserve("open", 0),
            Reservation::NeverFits { .. }
        ));
    }

    #[test]
    fn runs_of_one_shared_budget_key_apart_and_announce_settlements() {
        let shared = SharedBudget::new(Usd::from_picos(6));
        let p = plan(&["a"]);
        let one = Budget::new(&p, Some(&options(0, Some(shared.clone())))).unwrap();
        let two = Budget::new(&p, Some(&options(0, Some(shared)))).unwrap();
        let mut watch = two.settlements().expect("a shared budget is watched");
        // The same task id in two runs: two reservations, no collision.
        assert!(matches!(one.reserve("a", 0), Reservation::Reserved));
        assert!(matches!(two.reserve("a", 0), Reservation::Reserved));
        assert!(!watch.has_changed().unwrap());
        one.settle("a", 0, Some(Usd::ZERO));
        assert!(watch.has_changed().unwrap());
        // Settling what was never reserved announces nothing.
        watch.borrow_and_update();
        one.settle("zz", 0, None);
        assert!(!watch.has_changed().unwrap());
        let own = Budget::new(&p, Some(&options(6, None))).unwrap();
        assert!(own.settlements().is_none());
    }

    /// The executor waits on `settled_elsewhere` beside its own tasks'
    /// results: resolving early would busy-loop a run whose tasks wait for
    /// budget (a cargo-mutants survivor made it resolve at once, and the
    /// executor tests only timed out). In virtual time an hour passes at
    /// once, so "never resolves" is checked without waiting.
    #[tokio::test(start_paused = true)]
    async fn a_wait_for_other_runs_ends_only_when_another_run_settles() {
        async fn ends_within_an_hour(w: Option<&mut tokio::sync::watch::Receiver<u64>>) -> bool {
            let hour = std::time::Duration::from_secs(3600);
            tokio::time::timeout(hour, settled_elsewhere(w))
                .await
                .is_ok()
        }
        // Without a shared budget there is no one else to wait for.
        assert!(!ends_within_an_hour(None).await);
        let shared = SharedBudget::new(Usd::from_picos(6));
        let mut watch = shared.settlements();
        assert!(
            !ends_within_an_hour(Some(&mut watch)).await,
            "nothing settled"
        );
        shared.announce_settlement();
        assert!(
            ends_within_an_hour(Some(&mut watch)).await,
            "a settlement ends it"
        );
        assert!(
            !ends_within_an_hour(Some(&mut watch)).await,
            "and is seen once"
        );
        // Books dropped: no settlement can come, so the wait never ends
        // (rather than spinning on the closed channel).
        drop(shared);
        assert!(!ends_within_an_hour(Some(&mut watch)).await);
    }
}
