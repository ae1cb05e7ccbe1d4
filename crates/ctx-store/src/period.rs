//! A period budget's figures, as every store's ledger gives them
//! (docs/cost.md, "Period budgets"): run directories keep the ledger in
//! the store root's `budgets.sqlite`, a shared store in PostgreSQL, and
//! both answer with these types, so the run that holds from either
//! decides the same way.

use ctx_model::money::Usd;

/// One budget's period: its name and the period's first day (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeriodKey {
    /// The budget's name.
    pub name: String,
    /// The period's first day, `YYYY-MM-DD`.
    pub start: String,
}

/// A budget's state when a hold was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodState {
    /// What settled runs spent in the period.
    pub spent: Usd,
    /// What runs still running hold.
    pub held: Usd,
    /// `budget - spent - held` (zero when over).
    pub left: Usd,
}

/// The answer of a ledger asked to hold a run's high end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeriodGrant {
    /// Held: the state before the hold was added.
    Held(PeriodState),
    /// Refused: what is left is below the high end asked for.
    Refused(PeriodState),
}
