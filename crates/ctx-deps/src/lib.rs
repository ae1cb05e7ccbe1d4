//! # ctx-deps: graph, schedule, execute
//!
//! (Crate docs are being written with the executor.)

pub mod engine;
pub mod store;

pub use engine::*;
pub use store::*;
