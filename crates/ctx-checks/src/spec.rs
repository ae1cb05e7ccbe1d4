//! The check specification: what a plan author writes under `checks:`.
//!
//! A re-export of the plan model's vocabulary (`ctx_model::checks`, where
//! the types, their serde form and their JSON Schema are defined and
//! explained): a plan holds checks, and the crates that only read plans
//! (the engine and store seams) must not compile the regex and JSON Schema
//! engines this crate needs to compile and evaluate them.

pub use ctx_model::checks::{
    Check, CheckKind, DEFAULT_JUDGE_MAX_TOKENS, JudgeSpec, Rule, SchemaSource, SpecError,
};
