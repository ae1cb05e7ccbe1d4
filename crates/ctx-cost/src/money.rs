//! Exact money: amounts in pico-dollars ([`Usd`]), prices in micro-dollars
//! per million tokens ([`Rate`]).
//!
//! A re-export of the plan model's vocabulary (`ctx_model::money`, where the
//! units and why they are exact are explained): a plan's `config.prices`
//! and a result's `cost_usd` are written in them, and the engine and store
//! seams must read both without compiling this crate. ctx-cost keeps the
//! pricing: tables, ranges and the budget ledger.

pub use ctx_model::money::{DecimalError, Rate, Round, Saving, Usd};
