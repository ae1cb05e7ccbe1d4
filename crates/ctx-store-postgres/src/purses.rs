//! A run's budget in purses (schema 13): how many a run gets, and the
//! statements that open them and split what the run has left among them.
//!
//! Why purses: under `--max-cost` every claim reserves its task's high end
//! and every commit settles it. With the budget in one row, the claimers
//! of a run took turns on that row's lock, and a budget cost a quarter to
//! a third of the claim rate with several claimers. A purse is a share of
//! the budget in a row of its own; a claim reserves in whichever purse is
//! free and has room (`SKIP LOCKED`, so it never waits on another
//! claim), and the commit settles in the same purse.
//!
//! The bound is kept by one rule: the shares of a run's purses sum to its
//! budget (when they were last split, and every later change moves money
//! only inside a purse), and a reservation is taken in a purse only while
//! what the purse holds stays within its share. So what all the purses
//! hold together stays within the budget. Only a reservation that fits no
//! free purse ([`PgStore::reserve`](crate::PgStore::reserve)) looks at the
//! run as a whole: it locks every purse of the run, in purse order, checks
//! what they hold together against the budget, and splits what is left
//! over evenly again (the schema's `ctx_purse_share`).

use ctx_model::money::Usd;

/// The most purses a run gets: enough for the claimers of a large worker
/// pool to find a free one, few enough that the slow path (a reservation
/// that locks all of them) stays cheap.
pub const MAX_PURSES: i32 = 16;

/// How many of the largest tasks' high ends each purse can hold at least,
/// when the run gets more than one purse: a purse that could hold fewer
/// would send most claims to the slow path.
const HIGHS_PER_PURSE: u128 = 4;

/// How many purses a run under `budget` gets: one for each
/// [`HIGHS_PER_PURSE`] of its largest task's high end the budget holds,
/// at least one (so one without a budget, with no high end known, or
/// under a budget that holds fewer than twice that many), at most
/// [`MAX_PURSES`]. A tight budget thus keeps one purse, where the slow
/// path would otherwise split its little slack at every claim.
pub fn purse_count(budget: Option<Usd>, highs: &[Option<Usd>]) -> i32 {
    let Some(budget) = budget else { return 1 };
    let largest = highs.iter().flatten().map(|h| h.picos()).max();
    let Some(largest) = largest.filter(|&h| h > 0) else {
        return 1;
    };
    let n = budget.picos() / (largest * HIGHS_PER_PURSE);
    i32::try_from(n).unwrap_or(MAX_PURSES).clamp(1, MAX_PURSES)
}

/// Opens the purses `0..$2` of run `$1` that it does not have yet, empty
/// (a resume may give a run more purses; it never takes one away, as a
/// live claim's reservation may be held in it). Their shares are set by
/// [`SPLIT`], in the same transaction.
pub(crate) const OPEN: &str = "INSERT INTO ctx_budget_purses (run_id, purse)
     SELECT $1, k FROM generate_series(0, $2::int4 - 1) AS k
     ON CONFLICT (run_id, purse) DO NOTHING";

/// Sets run `$1`'s budget to `$2` (pico-dollars as text, NULL: none) in
/// every purse and splits what is left over what they hold evenly
/// among them, with the purses locked in order. `$3` (pico-dollars as
/// text) is the least the run holds: what its attempts recorded as
/// spent, when a resume gives it a budget; the difference, when the
/// purses hold less, is added to the first purse.
pub(crate) const SPLIT: &str = "WITH p AS (
       SELECT purse, held_picos FROM ctx_budget_purses WHERE run_id = $1
        ORDER BY purse FOR UPDATE),
     tot AS (
       SELECT sum(held_picos) AS held, count(*) AS n, min(purse) AS first FROM p),
     s AS (
       SELECT tot.n, tot.first,
              greatest(coalesce($3::text::numeric, 0) - tot.held, 0) AS more,
              $2::text::numeric - greatest(tot.held, coalesce($3::text::numeric, 0)) AS slack
         FROM tot)
     UPDATE ctx_budget_purses q
        SET budget_picos = $2::text::numeric,
            held_picos = q.held_picos + CASE WHEN q.purse = s.first THEN s.more ELSE 0 END,
            share_picos = ctx_purse_share(
                q.held_picos + CASE WHEN q.purse = s.first THEN s.more ELSE 0 END,
                s.slack, s.n, q.purse = s.first)
       FROM p, s
      WHERE q.run_id = $1 AND q.purse = p.purse";

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(picos: u128) -> Usd {
        Usd::from_picos(picos)
    }

    #[test]
    fn no_budget_or_no_known_high_end_is_one_purse() {
        assert_eq!(purse_count(None, &[Some(usd(10))]), 1);
        assert_eq!(purse_count(Some(usd(1_000)), &[]), 1);
        assert_eq!(purse_count(Some(usd(1_000)), &[None, Some(usd(0))]), 1);
    }

    #[test]
    fn each_purse_holds_four_of_the_largest_high_ends() {
        let highs = [Some(usd(10)), None, Some(usd(25))];
        // 25 × 4 = 100 a purse.
        assert_eq!(purse_count(Some(usd(99)), &highs), 1);
        assert_eq!(purse_count(Some(usd(199)), &highs), 1);
        assert_eq!(purse_count(Some(usd(200)), &highs), 2);
        assert_eq!(purse_count(Some(usd(1_599)), &highs), 15);
        assert_eq!(purse_count(Some(usd(1_600)), &highs), MAX_PURSES);
        assert_eq!(purse_count(Some(usd(u128::MAX / 2)), &highs), MAX_PURSES);
    }
}
