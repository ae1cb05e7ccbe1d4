//! # ctx-prompt (in progress)

pub mod assembly;

pub use assembly::*;
