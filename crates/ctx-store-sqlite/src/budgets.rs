//! The period-budget ledger of a store root (`budgets.sqlite`): what the
//! runs of a named budget spent in a calendar period and what the runs
//! still running hold of it (docs/cost.md, "Period budgets").
//!
//! A run asks for its high end ([`PeriodLedger::reserve`]) before any call;
//! the answer reads the spent and held sums and inserts the hold in one
//! `BEGIN IMMEDIATE` transaction, so two processes starting at once are
//! served one after the other and cannot both take the last dollars. When
//! the run ends, [`PeriodLedger::settle`] replaces its hold by what it
//! spent, again in one transaction. The hold names its period: a clock
//! that moves backwards (or forwards) across a period boundary between
//! reserving and settling settles in the period the run reserved from.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ctx_model::money::Usd;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::schema::{self, BUDGET_APPLICATION_ID, BUDGET_MIGRATIONS};

/// The ledger's file name in a store root.
pub const BUDGET_FILE: &str = "budgets.sqlite";

pub use ctx_store::period::{PeriodGrant, PeriodKey, PeriodState};

/// The ledger: one connection, each call one transaction.
#[derive(Debug)]
pub struct PeriodLedger {
    conn: Mutex<Connection>,
    path: PathBuf,
}

fn picos(path: &Path, usd: Usd) -> Result<i64> {
    i64::try_from(usd.picos()).map_err(|_| Error::Foreign {
        path: path.to_path_buf(),
        detail: format!("the amount ${usd} is over what the ledger stores"),
    })
}

fn usd(picos: i64) -> Usd {
    Usd::from_picos(u128::try_from(picos).unwrap_or(0))
}

impl PeriodLedger {
    /// Opens (creating if needed) the ledger at `path`.
    pub fn open(path: &Path) -> Result<PeriodLedger> {
        let conn = schema::open_shared(path, BUDGET_APPLICATION_ID, BUDGET_MIGRATIONS)?;
        Ok(PeriodLedger {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    /// Holds `high` of `key`'s period for `holder` when what is left of
    /// `budget` covers it; otherwise holds nothing. The budget is the
    /// caller's figure: a budget changed between runs applies to the
    /// runs that ask after the change, and holds already granted stand.
    pub fn reserve(
        &self,
        key: &PeriodKey,
        budget: Usd,
        holder: &str,
        high: Usd,
    ) -> Result<PeriodGrant> {
        let path = &self.path;
        let high_picos = picos(path, high)?;
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::sql(path))?;
        let (spent, held) = sums(&tx, key).map_err(Error::sql(path))?;
        let left = budget.saturating_sub(spent.saturating_add(held));
        let state = PeriodState { spent, held, left };
        if high > left {
            return Ok(PeriodGrant::Refused(state));
        }
        tx.execute(
            "INSERT INTO holds (name, period_start, holder, picos, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![key.name, key.start, holder, high_picos, now()],
        )
        .and_then(|_| tx.commit())
        .map_err(Error::sql(path))?;
        Ok(PeriodGrant::Held(state))
    }

    /// Replaces `holder`'s hold in `key`'s period by what it `spent`, once:
    /// a holder with no hold left settles nothing.
    pub fn settle(&self, key: &PeriodKey, holder: &str, spent: Usd) -> Result<()> {
        let path = &self.path;
        let spent_picos = picos(path, spent)?;
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Error::sql(path))?;
        let removed = tx
            .execute(
                "DELETE FROM holds WHERE name = ?1 AND period_start = ?2 AND holder = ?3",
                params![key.name, key.start, holder],
            )
            .map_err(Error::sql(path))?;
        if removed == 0 {
            return Ok(());
        }
        tx.execute(
            "INSERT INTO spent (name, period_start, picos) VALUES (?1, ?2, ?3)
             ON CONFLICT (name, period_start) DO UPDATE SET picos = picos + excluded.picos",
            params![key.name, key.start, spent_picos],
        )
        .and_then(|_| tx.commit())
        .map_err(Error::sql(path))
    }

    /// `key`'s period as it stands: spent, held, and left of `budget`.
    pub fn state(&self, key: &PeriodKey, budget: Usd) -> Result<PeriodState> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let (spent, held) = sums(&conn, key).map_err(Error::sql(&self.path))?;
        let left = budget.saturating_sub(spent.saturating_add(held));
        Ok(PeriodState { spent, held, left })
    }
}

/// The spent and held sums of `key`'s period (zero for a period with no
/// run yet).
fn sums(conn: &Connection, key: &PeriodKey) -> rusqlite::Result<(Usd, Usd)> {
    let spent: Option<i64> = conn
        .query_row(
            "SELECT picos FROM spent WHERE name = ?1 AND period_start = ?2",
            params![key.name, key.start],
            |r| r.get(0),
        )
        .optional()?;
    let held: i64 = conn.query_row(
        "SELECT COALESCE(SUM(picos), 0) FROM holds WHERE name = ?1 AND period_start = ?2",
        params![key.name, key.start],
        |r| r.get(0),
    )?;
    Ok((usd(spent.unwrap_or(0)), usd(held)))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(start: &str) -> PeriodKey {
        PeriodKey {
            name: "nightly".into(),
            start: start.into(),
        }
    }

    fn d(s: &str) -> Usd {
        Usd::parse(s).unwrap()
    }

    #[test]
    fn a_hold_is_refused_past_what_is_left_and_settles_once() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = PeriodLedger::open(&dir.path().join(BUDGET_FILE)).unwrap();
        let k = key("2026-12-01");
        let empty = PeriodState {
            spent: Usd::ZERO,
            held: Usd::ZERO,
            left: d("1"),
        };
        assert_eq!(ledger.state(&k, d("1")).unwrap(), empty);
        assert_eq!(
            ledger.reserve(&k, d("1"), "a", d("0.75")).unwrap(),
            PeriodGrant::Held(empty)
        );
        let after_a = PeriodState {
            spent: Usd::ZERO,
            held: d("0.75"),
            left: d("0.25"),
        };
        assert_eq!(
            ledger.reserve(&k, d("1"), "b", d("0.5")).unwrap(),
            PeriodGrant::Refused(after_a)
        );
        ledger.settle(&k, "a", d("0.125")).unwrap();
        ledger.settle(&k, "a", d("0.125")).unwrap();
        let settled = ledger.state(&k, d("1")).unwrap();
        assert_eq!((settled.spent, settled.held), (d("0.125"), Usd::ZERO));
        assert!(matches!(
            ledger.reserve(&k, d("1"), "b", d("0.5")).unwrap(),
            PeriodGrant::Held(_)
        ));
        // Another period starts empty; a lowered budget refuses new holds.
        assert_eq!(ledger.state(&key("2027-01-01"), d("1")).unwrap(), empty);
        assert!(matches!(
            ledger.reserve(&k, d("0.5"), "c", d("0.01")).unwrap(),
            PeriodGrant::Refused(_)
        ));
    }
}
