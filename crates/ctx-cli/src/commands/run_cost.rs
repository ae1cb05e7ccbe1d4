//! `ctx run`'s costs from its flags: what the engine flags mean for
//! [`ctx_run::run_costs`] (which holds the rules, documented there), and
//! the `--max-cost` refusals with the flags that fix them.
//!
//! * **Model**: the task's `params.model`, else `--model` (the openai
//!   engine only; the command engine passes `params.model` as
//!   `CTX_MODEL`). The dry-run engine calls no model: its tasks cost $0.
//! * **Attempts**: the openai engine's `--max-attempts` (default 4); one
//!   for the others.
//! * A command cannot stop at `max_tokens`: under a budget its output is
//!   cut there.

use ctx_cost::Usd;
use ctx_deps::CostOptions;
use ctx_model::Plan;
use ctx_run::run_costs::{BudgetError, RunPricing};

use crate::engines::EngineArgs;
use crate::exit::CliError;

/// `--max-cost USD` read, and the engine flags it gives meaning to
/// checked (the command engine uses `--max-tokens` only under a budget,
/// and 0 is no bound at all).
pub fn max_cost(text: Option<&str>, engine: &EngineArgs) -> Result<Option<Usd>, CliError> {
    let max_cost = text.map(ctx_cost::parse_max_cost).transpose()?;
    engine.check_budget(max_cost.is_some())?;
    Ok(max_cost)
}

/// The executor's cost options for `plan` priced by `pricing`: prices
/// always, and a budget with its `max_cost`. Refuses (exit 2) a budget it
/// cannot bound, saying which flag or field would bound it.
pub fn options(plan: &Plan, pricing: &RunPricing) -> Result<CostOptions, CliError> {
    pricing
        .cost_options(plan)
        .map_err(|e| refusal(&e, pricing.engine.model.is_some()))
}

/// A budget the plan leaves without a bound, said with the flag or field
/// that would bound it (exit 2). `default_model`: the engine has a
/// `--model` for tasks that name none.
pub fn refusal(e: &BudgetError, default_model: bool) -> CliError {
    let hint = match e {
        BudgetError::NoMaxTokens(_) => "; set params.max_tokens or pass --max-tokens N".to_string(),
        BudgetError::UnboundedParams(_) => {
            "; remove the parameter, or run without --max-cost (docs/cost.md lists what a bound covers)"
                .to_string()
        }
        BudgetError::NoModel(_) => {
            format!("; give params.model{}", if default_model { " or --model" } else { "" })
        }
        BudgetError::Unpriced { .. } => {
            "; give prices with --price MODEL=IN,OUT[,CACHED], config.prices or --prices FILE"
                .to_string()
        }
        BudgetError::Graph(_) => String::new(),
    };
    CliError::usage(format!("--max-cost: {e}{hint}"))
}
