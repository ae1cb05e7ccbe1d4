//! The engines that ship with ctx-deps: [`DryRunEngine`] and
//! [`CommandEngine`]. HTTP engines live in their own crates.

mod command;
mod dry_run;

pub use command::*;
pub use dry_run::*;
