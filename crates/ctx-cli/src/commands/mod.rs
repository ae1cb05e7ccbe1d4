//! One module per subcommand; each exposes `Args` and `run`.

pub mod completions;
pub mod engines;
pub mod eval;
pub mod history;
pub mod lint;
pub mod man;
pub mod plan_check;
pub mod plan_cost;
pub mod plan_cost_cache;
pub mod plan_graph;
pub mod plan_inputs;
pub mod prices;
pub mod render;
pub mod run;
pub mod run_cost;
pub mod run_request;
pub mod runs;
pub mod schema;
pub mod shared_run;
pub mod spend;
pub mod worker;
