//! # ctx-model: plans, entities and results
//!
//! The data every other ctx crate speaks: a [`Plan`] of [`SubTask`]s that
//! depend on each other and are grounded in [`Entity`] values, and the
//! [`TaskExecutionResult`] each task produces. No I/O beyond reading a plan
//! file, no async: a crate any program can take to read, check or write
//! plans.
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
//!
//! ## The vocabulary
//!
//! Beside plans and results this crate holds the plain data the other ctx
//! crates compute with, so that it depends on none of them: the check
//! types as plans spell them and their results ([`checks`]; compiled and
//! evaluated by `ctx-checks`), exact money and a plan's prices
//! ([`money`]; priced by `ctx-cost`), and the tokenizer names
//! ([`tokenizer`]; counted by `ctx-tokens`). Reading plans from text
//! and files is the default `parse` feature, which the engine and store
//! seams leave off.
//!
//! ## Reading and checking plans
//!
//! [`load_plan`] reads a file (`.json`, `.yaml`/`.yml`, `-` for standard
//! input) and [`parse_plan`] reads text; both check `schema_version` first
//! and report a malformed plan as a [`PlanError`] carrying the file, line,
//! column and field path. A plan that parses can still be wrong in ways
//! types cannot express — an unknown dependency, a cycle, an empty prompt:
//! [`validate`] returns every such [`Problem`] at once, each with a stable
//! [`ProblemCode`], the task id and the field; a [`FieldLocator`] turns the
//! field into a line and column of the text. [`parse_plan`] refuses an
//! unknown field (`dependancies`) as a parse error;
//! [`parse_plan_with_unknown_fields`] reads past them so that
//! [`ParsedPlan::problems`] reports them beside the others (`ctx plan
//! check` adds the checks compiled, with `ctx_checks::plan_problems`). [`plan_json_schema`] is the
//! format's JSON Schema for editors. The format is documented in
//! `docs/plan-format.md`.
//!
//! ```
//! use ctx_model::{parse_plan, validate, PlanFormat};
//!
//! let yaml = "\
//! schema_version: 1
//! sub_tasks:
//!   - id: a
//!     description: First
//!     dependencies: [b]
//!     tool_or_prompt: {name: inference, params: {prompt: Go.}}
//!   - id: b
//!     description: Second
//!     dependencies: [a]
//!     tool_or_prompt: {name: inference, params: {prompt: Go.}}
//! ";
//! let plan = parse_plan(yaml, "plan.yaml", PlanFormat::Yaml)?;
//! let problems = validate(&plan);
//! assert_eq!(problems[0].to_string(),
//!            r#"task "a": sub_tasks[0].dependencies: dependency cycle: "a" -> "b" -> "a""#);
//!
//! let typo = yaml.replace("dependencies: [a]", "dependancies: [a]");
//! let err = parse_plan(&typo, "plan.yaml", PlanFormat::Yaml).unwrap_err();
//! assert!(err.to_string().starts_with("plan.yaml:9:5: task \"b\": sub_tasks[1].dependancies: unknown field"));
//! # Ok::<(), ctx_model::PlanError>(())
//! ```

pub mod approval;
pub mod batch_status;
pub mod billing;
mod budget;
#[cfg(feature = "parse")]
pub mod check_report;
pub mod checks;
pub mod digest;
pub mod display;
pub mod graph;
mod json_text;
mod layout;
#[cfg(feature = "parse")]
mod load;
#[cfg(feature = "parse")]
mod locate;
pub mod map;
pub mod money;
pub mod output_cleaning;
#[cfg(feature = "parse")]
mod parse;
mod plan;
pub mod prompt_cache;
mod published;
mod result;
mod schema;
mod service_tier;
pub mod tokenizer;
mod validate;
pub mod variables;

pub use budget::{
    BudgetFallback, BudgetFlagError, BudgetPeriod, FallbackChoice, FallbackTask, PeriodBudget,
    used_fraction,
};
pub use checks::{judge_checks, plan_base_dir, plan_has_canary, plan_has_checks, task_checks};
pub use json_text::json_text;
pub use layout::PromptLayout;
#[cfg(feature = "parse")]
pub use load::*;
#[cfg(feature = "parse")]
pub use locate::*;
pub use map::MapSpec;
#[cfg(feature = "parse")]
pub use parse::*;
pub use plan::*;
pub use published::Published;
pub use result::*;
pub use schema::*;
pub use service_tier::{ServiceTier, TierFallback};
pub use validate::*;
pub use variables::{Class, HISTORICAL_CONTEXT, HistorySettings, Variable, VariableType};
