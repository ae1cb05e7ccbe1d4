//! # ctx-history: bounded digests of markdown report archives
//!
//! (crate documentation grows with the crate)

pub mod error;
pub mod markdown;

pub use error::HistoryError;
