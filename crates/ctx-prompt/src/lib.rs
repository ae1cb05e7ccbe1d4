//! # ctx-prompt: prompts that fit and fences that hold
//!
//! Two jobs, one crate:
//!
//! * [`assembly`]: the final prompt of a plan task — the entity block, the
//!   dependency block and the task's own prompt, in the exact shape of the
//!   originating design — kept under `max_prompt_tokens` by shrinking
//!   dependency outputs (largest first) and then dropping the least relevant
//!   entities, never cutting the task's own prompt.
//!
//! ```
//! use ctx_prompt::{assemble_task_prompt, DependencyOutput};
//! let plan: ctx_model::Plan = serde_json::from_str(r#"{"schema_version": 1,
//!   "sub_tasks": [{"id": "b", "description": "Use it", "dependencies": ["a"],
//!     "tool_or_prompt": {"name": "inference", "params": {"prompt": "Go."}}}]}"#).unwrap();
//! let dep = DependencyOutput { task_id: "a", description: "Make it", output: "made", summary: None };
//! let counter = ctx_tokens::Tokenizer::Estimate.counter();
//! let p = assemble_task_prompt(&plan, &plan.sub_tasks[0], &[dep], &*counter, 4000).unwrap();
//! assert!(p.text.ends_with("**Output:**\nmade\n\n---\n\nGo."));
//! ```

pub mod assembly;
pub mod fence;
pub mod template;

pub use assembly::*;
