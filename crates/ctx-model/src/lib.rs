//! # ctx-model: plans, entities and results
//!
//! The data every other ctx crate speaks: a [`Plan`] of [`SubTask`]s that
//! depend on each other and are grounded in [`Entity`] values, and the
//! [`TaskExecutionResult`] each task produces. No I/O beyond parsing, no
//! async, no tokenizer: a crate any program can take to read or write plans.
//!
//! ```
//! use ctx_model::{Plan, Relevance};
//!
//! let plan: Plan = serde_json::from_str(r#"{
//!   "schema_version": 1,
//!   "entities": [{"name": "Board", "grounded_value": "10 x 20"}],
//!   "sub_tasks": [{
//!     "id": "1", "description": "Draw the board",
//!     "entity_context": [{"entity_name": "Board", "intent_relevance": "constraint"}],
//!     "tool_or_prompt": {"name": "inference", "params": {"prompt": "Draw it."}}
//!   }]
//! }"#).unwrap();
//! let resolved = plan.resolve_entity_context(&plan.sub_tasks[0]);
//! assert_eq!(resolved[0].grounded_value.as_deref(), Some("10 x 20"));
//! assert_eq!(resolved[0].relevance, Relevance::High);
//! ```

mod parse;
mod plan;
mod result;
mod schema;
mod validate;

pub use parse::*;
pub use plan::*;
pub use result::*;
pub use schema::*;
pub use validate::*;
