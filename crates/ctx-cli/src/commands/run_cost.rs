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
use ctx_run::run_costs::{BudgetError, EngineCosts, RunPricing};

use crate::engines::{EngineArgs, EngineKind, openai::DEFAULT_MAX_ATTEMPTS};
use crate::exit::CliError;

/// `--max-cost USD` read, and the `--max-tokens` it gives meaning to
/// checked: the command engine uses `--max-tokens` only under a budget
/// (ctx cuts each output there), and 0 is no bound at all.
pub fn max_cost(text: Option<&str>, engine: &EngineArgs) -> Result<Option<Usd>, CliError> {
    let max_cost = text.map(ctx_cost::parse_max_cost).transpose()?;
    if engine.kind() == EngineKind::Command
        && engine.openai.max_tokens.is_some()
        && max_cost.is_none()
    {
        return Err(CliError::usage(
            "--max-tokens is used by the command engine only with --max-cost (ctx cuts each output there)",
        ));
    }
    if engine.openai.max_tokens == Some(0) {
        return Err(CliError::usage("--max-tokens must be at least 1"));
    }
    Ok(max_cost)
}

/// What `engine`'s flags mean for costs.
pub fn engine_costs(engine: &EngineArgs) -> EngineCosts {
    let kind = engine.kind();
    let o = &engine.openai;
    let openai = kind == EngineKind::Openai;
    EngineCosts {
        free: kind == EngineKind::DryRun,
        model: if openai { o.model.clone() } else { None },
        max_tokens: o.max_tokens,
        system: if openai { o.system.clone() } else { None },
        attempts: if openai {
            o.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS)
        } else {
            1
        },
        cuts_at_max_tokens: kind == EngineKind::Command,
        sends_params: openai,
        priced_on_request: kind == EngineKind::Command,
    }
}

/// The executor's cost options for `plan` priced by `pricing`: prices
/// always, and a budget with its `max_cost`. Refuses (exit 2) a budget it
/// cannot bound, saying which flag or field would bound it.
pub fn options(plan: &Plan, pricing: &RunPricing) -> Result<CostOptions, CliError> {
    pricing.cost_options(plan).map_err(|e| {
        let hint = match &e {
            BudgetError::NoMaxTokens(_) => {
                "; set params.max_tokens or pass --max-tokens N".to_string()
            }
            BudgetError::UnboundedParams(_) => {
                "; remove the parameter, or run without --max-cost (docs/cost.md lists what a bound covers)"
                    .to_string()
            }
            BudgetError::NoModel(_) => format!(
                "; give params.model{}",
                if pricing.engine.model.is_none() {
                    ""
                } else {
                    " or --model"
                }
            ),
            BudgetError::Unpriced { .. } => {
                "; give prices with --price MODEL=IN,OUT[,CACHED], config.prices or --prices FILE"
                    .to_string()
            }
            BudgetError::Graph(_) => String::new(),
        };
        CliError::usage(format!("--max-cost: {e}{hint}"))
    })
}
