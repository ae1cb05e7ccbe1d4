//! The period-budget ledger on the shared store (schema 9,
//! `ctx_period_spent` and `ctx_period_holds`): the ledger a store root's
//! `budgets.sqlite` keeps for run directories, with the same figures and
//! the same answers (`ctx_store::period`), so a budget binds every run
//! of every machine that shares the database (docs/scaling.md, "Period
//! budgets across machines").
//!
//! **A hold** is one transaction: the period's spent row is created if
//! absent and locked (`SELECT … FOR UPDATE`), then the holds are summed
//! and the new hold inserted only if it fits. Every hold of a period
//! takes that one row lock first, so two runs starting at once are
//! served one after the other, and the second sees the first's hold: they
//! cannot both take the last dollars. A transaction retried after a lost
//! connection finds its own hold (the holder is the primary key) and
//! takes nothing twice.
//!
//! **A settlement** deletes the hold and adds what the run spent to the
//! spent row in one transaction; a retried one finds no hold and adds
//! nothing: it is counted once.

use std::sync::Arc;

use ctx_model::money::Usd;
use ctx_store::period::{PeriodGrant, PeriodKey, PeriodState};
use tokio_postgres::GenericClient;

use crate::PgStore;
use crate::error::Result;

/// The spent and held sums of `key`'s period, in pico-dollars.
const SUMS: &str = "SELECT coalesce((SELECT picos FROM ctx_period_spent
                                      WHERE name = $1 AND period_start = $2), 0)::text,
                           coalesce((SELECT sum(picos) FROM ctx_period_holds
                                      WHERE name = $1 AND period_start = $2), 0)::text";

fn usd(text: Option<String>) -> Usd {
    Usd::from_picos(text.and_then(|t| t.parse::<u128>().ok()).unwrap_or(0))
}

async fn sums<C: GenericClient>(
    c: &C,
    key: &PeriodKey,
) -> std::result::Result<(Usd, Usd), tokio_postgres::Error> {
    let row = c.query_one(SUMS, &[&key.name, &key.start]).await?;
    Ok((usd(row.get(0)), usd(row.get(1))))
}

fn state(spent: Usd, held: Usd, budget: Usd) -> PeriodState {
    PeriodState {
        spent,
        held,
        left: budget.saturating_sub(spent.saturating_add(held)),
    }
}

impl PgStore {
    /// Holds `high` of `key`'s period for `holder` when what is left of
    /// `budget` covers it; otherwise holds nothing. A hold `holder`
    /// already has (a retried transaction's) is granted as it stands.
    pub async fn period_reserve(
        &self,
        key: &PeriodKey,
        budget: Usd,
        holder: &str,
        high: Usd,
    ) -> Result<PeriodGrant> {
        let (key, holder) = (key.clone(), holder.to_string());
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let context = || format!("holding ${high} of budget `{}`", key.name);
            let (key, holder) = (&key, &holder);
            let high_text = high.picos().to_string();
            let high_text = &high_text;
            shared
                .with(&context, 4, move |mut c, _| async move {
                    let r = async {
                        let tx = c.transaction().await?;
                        tx.execute(
                            "INSERT INTO ctx_period_spent (name, period_start) VALUES ($1, $2)
                             ON CONFLICT DO NOTHING",
                            &[&key.name, &key.start],
                        )
                        .await?;
                        tx.execute(
                            "SELECT 1 FROM ctx_period_spent WHERE name = $1 AND period_start = $2 FOR UPDATE",
                            &[&key.name, &key.start],
                        )
                        .await?;
                        let mine = tx
                            .query_opt(
                                "SELECT picos::text FROM ctx_period_holds
                                  WHERE name = $1 AND period_start = $2 AND holder = $3",
                                &[&key.name, &key.start, holder],
                            )
                            .await?;
                        let (spent, held) = sums(&tx, key).await?;
                        if let Some(row) = mine {
                            // Granted by this transaction's first try.
                            let held = held.saturating_sub(usd(row.get(0)));
                            tx.commit().await?;
                            return Ok(PeriodGrant::Held(state(spent, held, budget)));
                        }
                        let before = state(spent, held, budget);
                        if high > before.left {
                            return Ok(PeriodGrant::Refused(before));
                        }
                        tx.execute(
                            "INSERT INTO ctx_period_holds (name, period_start, holder, picos)
                             VALUES ($1, $2, $3, $4::text::numeric)",
                            &[&key.name, &key.start, holder, high_text],
                        )
                        .await?;
                        tx.commit().await?;
                        Ok(PeriodGrant::Held(before))
                    }
                    .await;
                    (c, r)
                })
                .await
        })
        .await
    }

    /// Replaces `holder`'s hold in `key`'s period by what it `spent`,
    /// once: a holder with no hold left settles nothing.
    pub async fn period_settle(&self, key: &PeriodKey, holder: &str, spent: Usd) -> Result<()> {
        let (key, holder) = (key.clone(), holder.to_string());
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let context = || format!("settling a hold of budget `{}`", key.name);
            let (key, holder) = (&key, &holder);
            let spent_text = spent.picos().to_string();
            let spent_text = &spent_text;
            shared
                .with(&context, 3, move |mut c, _| async move {
                    let r = async {
                        let tx = c.transaction().await?;
                        let removed = tx
                            .execute(
                                "DELETE FROM ctx_period_holds
                                  WHERE name = $1 AND period_start = $2 AND holder = $3",
                                &[&key.name, &key.start, holder],
                            )
                            .await?;
                        if removed > 0 {
                            tx.execute(
                                "INSERT INTO ctx_period_spent (name, period_start, picos)
                                 VALUES ($1, $2, $3::text::numeric)
                                 ON CONFLICT (name, period_start)
                                 DO UPDATE SET picos = ctx_period_spent.picos + excluded.picos",
                                &[&key.name, &key.start, spent_text],
                            )
                            .await?;
                        }
                        tx.commit().await
                    }
                    .await;
                    (c, r)
                })
                .await
        })
        .await
    }

    /// `key`'s period as it stands: spent, held, and left of `budget`
    /// (nothing spent or held for a period with no run).
    pub async fn period_state(&self, key: &PeriodKey, budget: Usd) -> Result<PeriodState> {
        let key = key.clone();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let context = || format!("reading budget `{}`", key.name);
            let key = &key;
            shared
                .with(&context, 1, move |c, _| async move {
                    let r = sums(&c, key).await;
                    (c, r.map(|(spent, held)| state(spent, held, budget)))
                })
                .await
        })
        .await
    }
}
