//! The headings `--help` groups the options of `ctx run`, `ctx eval` and
//! `ctx worker` under (clap's `help_heading`). One list, so a flag that
//! two commands share (the flattened argument structs) sits under the same
//! heading in both, and a reader scanning `ctx run --help` (over forty
//! options) finds a flag by what it is about. The OpenAI engine's flags
//! have their own heading (`engines::openai`).

/// Which engine runs the tasks: `--engine`, `--command`.
pub const ENGINE: &str = "Engine";
/// A plan's run-time inputs and where its outputs are published: `--var`,
/// the digest flags of `ctx history`, `--publish-root`.
pub const INPUTS: &str = "Inputs and publishing";
/// What is written and printed: `-o/--out`, `--format`.
pub const OUTPUT: &str = "Output";
/// How each prompt is assembled: `--tokenizer`, `--summarize-strategy`.
pub const PROMPTS: &str = "Prompts";
/// Limits on the work: concurrency, time, output bytes, prompt tokens.
pub const BOUNDS: &str = "Bounds";
/// Output checks and their retries.
pub const CHECKS: &str = "Checks";
/// Where runs are recorded and how one is resumed.
pub const STORE: &str = "Store and resume";
/// The output cache.
pub const CACHE: &str = "Cache";
/// The budget and the prices it is counted with.
pub const COST: &str = "Cost";
/// The shared PostgreSQL store and its workers.
pub const SHARED: &str = "Shared store";
