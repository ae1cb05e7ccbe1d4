//! # ctx-checks: is this output right?
//!
//! A task in a ctx plan may carry `checks:`; this crate is everything about
//! them that does not need a plan, an engine or a store:
//!
//! * [`spec`]: the check types exactly as a plan spells them (serde and a
//!   hand-written JSON Schema): a list of maps, each with one kind key, an
//!   optional `message` and the kind's options. They are the plan model's
//!   (`ctx_model::checks`, with [`CheckResult`]), re-exported here.
//! * [`compile`]: [`CheckSet::compile`] builds every pattern and schema and
//!   reads every schema file up front, so a malformed regex is a plan error
//!   naming `checks[2].regex`, not a failure an hour into a run.
//! * [`evaluate`]: [`CheckSet::evaluate`] runs the checks on an output
//!   (bytes; lossily decoded; any size, any nesting, never a panic) and
//!   gives one [`CheckResult`] `{kind, passed, message}` per check.
//! * [`plan`]: a plan's checks compiled, located at their fields, and the
//!   second pass of loading a plan ([`load_valid_plan`]: the model's
//!   validation, then the checks compiled).
//! * [`judge`]: the `judge` check's request (the output fenced as untrusted)
//!   and the reading of the judge's `{"pass", "reason"}` answer, as pure
//!   functions; the caller sends the request with its own engine.
//! * [`feedback`]: the `## Your previous answer failed these checks`
//!   section a retried prompt gains, with its token cost.
//!
//! ```
//! use ctx_checks::{Check, CheckSet, EvalContext, ExpectedEntity, Feedback};
//! use std::path::Path;
//!
//! let checks: Vec<Check> = serde_json::from_str(r#"[
//!     {"contains": "10 x 20", "message": "Keep the 10 x 20 board."},
//!     {"regex": "<canvas[^>]*>"},
//!     {"max_words": 600},
//!     {"entities": true}
//! ]"#).unwrap();
//! let set = CheckSet::compile(&checks, Path::new(".")).unwrap();
//!
//! let board = ExpectedEntity::new("Board", &["10 x 20".to_string()], None).unwrap();
//! let context = EvalContext { entities: &[board], canary: None };
//! let results = set.evaluate(b"<canvas id=\"b\"></canvas> a 10 X 20 grid", &context).finish();
//! assert!(!results[0].passed); // case-sensitive by default
//! assert_eq!(results[0].message, "Keep the 10 x 20 board.");
//! assert!(results[1].passed && results[2].passed && results[3].passed);
//!
//! use ctx_tokens::TokenizerExt;
//! let counter = ctx_tokens::Tokenizer::Estimate.counter();
//! let feedback = Feedback::build(&results, &*counter).unwrap();
//! assert_eq!(feedback.text, "## Your previous answer failed these checks\n\n\
//!     - Keep the 10 x 20 board. (does not contain \"10 x 20\")\n\n\
//!     Answer the task again, in full, so that every check passes.\n");
//! ```
//!
//! # Choices, and why
//!
//! * **No engine, no async.** Checks are judged far from where they are
//!   declared: loading a plan compiles them, the executor runs them, the
//!   store keeps their results, `ctx eval` counts them. A small
//!   synchronous library that all of these call keeps one definition of
//!   each check. Of the ctx crates it depends on the plan model (whose
//!   vocabulary the check types are, so that the engine and store seams
//!   read plans without a regex or JSON Schema engine) and `ctx-tokens`
//!   (for the feedback's token cost), and on `ctx-fence`, the one
//!   definition of the fence (not on `ctx-prompt`, whose markdown parsing
//!   and prompt assembly a verdict does not need). The
//!   judge, which needs a model, is split into a request and an answer
//!   ([`Evaluation::take_judge_requests`], [`Evaluation::record_judge_answer`]).
//! * **Case-sensitive `contains` by default.** A check is an assertion; a
//!   literal that matches only itself is the least surprising one, and it
//!   is the convention of test tools. `case_sensitive: false` ignores case
//!   by Unicode simple case folding. `contains` and `not_contains` with the
//!   same options are exact complements (property-tested).
//! * **Rust `regex` syntax.** Linear-time matching: no pattern in a plan
//!   can make a check run for hours on a long output (no look-around or
//!   backreferences, in exchange). Patterns are unanchored searches; use
//!   `^`/`$` (with `(?m)` per line) to anchor.
//! * **Words and characters.** A word is a whitespace-separated run (the
//!   definition ctx's digest caps use); a character is a Unicode scalar
//!   value.
//! * **One code fence.** `json` and `json_schema` strip one markdown fence
//!   that surrounds the whole output, because models add one however they
//!   are asked; prose around JSON still fails, because a dependent task
//!   receiving the output could not parse it either.
//! * **`jsonschema`, offline.** A maintained validator of every draft
//!   (2020-12 by default), built without its HTTP client; `$ref`s outside
//!   the schema are refused at compile time, and `pattern` keywords run on
//!   the linear-time `regex` engine. Failure messages name each failing
//!   JSON pointer, with values masked so a 1 MB string is not quoted back.
//! * **Entities** are passed in ([`ExpectedEntity`]) rather than read from
//!   a plan; see [`entities`] for when one is reflected.
//! * **Untrusted text stays fenced.** The output in a judge prompt, and any
//!   message that quotes an output, is passed through the fence's
//!   neutralizer (`ctx_fence::neutralize`), because messages become retry
//!   feedback in the next prompt.
//!
//! The check kinds and their options are documented for plan authors in
//! `docs/checks.md`.

pub mod clean;
pub mod compile;
pub mod entities;
pub mod evaluate;
pub mod feedback;
pub mod judge;
pub mod plan;
pub mod spec;
pub mod text;

pub use clean::{CleaningError, OutputCleaner};
pub use compile::{CheckSet, CompileError};
pub use entities::{EntityPatternError, ExpectedEntity};
pub use evaluate::{
    CheckResult, EvalContext, Evaluation, JUDGE_MAX_OUTPUT_BYTES, NotAwaitingJudge, all_passed,
};
pub use feedback::{FEEDBACK_HEADING, Feedback};
pub use judge::{JudgeRequest, Verdict, WrongShape};
pub use plan::{
    check_problems, compile_task_checks, expected_entities, inline_check_schemas, load_valid_plan,
    load_valid_plan_with, plan_problems,
};
pub use spec::{Check, CheckKind, JudgeSpec, Rule, SchemaSource, SpecError};
