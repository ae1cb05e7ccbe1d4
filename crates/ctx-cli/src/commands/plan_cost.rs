//! `ctx plan cost PLAN`: what a run of the plan can cost, per task and in
//! total, as a range `[low, high]`, before anything is sent.
//!
//! ## Where each end comes from
//!
//! Everything that decides a task's prompt is resolved exactly as `ctx run`
//! resolves it, by the same code: the plan is loaded and validated by
//! [`super::plan_check::load_valid_plan`], the tokenizer is
//! [`ctx_prompt::tokenizer_for_task`], the cap is the plan's
//! `config.max_prompt_tokens`, and the prompt is built by
//! [`ctx_prompt::assemble_task_prompt`], which the executor calls too. The
//! model and `max_tokens` follow the OpenAI engine's rule: the task's
//! `params` win over `--model` / `--max-tokens` (and `params.system` over
//! `--system`).
//!
//! * **Prompt, high**: the cap — assembly never returns a prompt over it —
//!   plus the system message's exact token count and a fixed allowance for
//!   the chat framing the server wraps around messages
//!   ([`FRAMING_PER_MESSAGE`] per message, [`FRAMING_REPLY`] for the
//!   reply's header). The framing is not ctx's to count: it is the
//!   server's chat template. The allowance covers the templates of
//!   OpenAI's chat models (3 per message and 3 for the reply, by OpenAI's
//!   own counting) and of Llama 3 (5 and 5); a server with a larger
//!   template can exceed it, which is why `--max-cost` settles with the
//!   usage the server reports.
//! * **Prompt, low**: the task's own prompt and entities with every
//!   dependency output empty, assembled under the same cap and counted
//!   exactly, plus the system message. No framing allowance: a server may
//!   add none.
//! * **Completion**: low 0 (a model may answer with nothing, or stop at
//!   once), high the task's `max_tokens`. Without one the high end is
//!   unbounded, and the report names the task and suggests `--max-tokens`.
//! * **Attempts**: the high end is multiplied by
//!   [`ctx_cost::attempt_bound`]: `--max-attempts` of the OpenAI engine
//!   (default 4, as `ctx run`'s), since a retried request may be billed,
//!   and, for a task with checks, by `config.max_check_attempts` (each
//!   check attempt is a new request): `attempt_bound(max_check_attempts -
//!   1, max_attempts)`.
//! * **Judges**: each `judge` check of a task is a row of its own,
//!   `ID (judge N)` (N counts the task's checks from 1, `config.checks`
//!   first), made once per check attempt: model the check's `judge_model`,
//!   else the task's; prompt high the judge prompt with an empty output,
//!   plus the task's completion high (the most output there is to judge),
//!   plus the framing of one message; completion high the check's
//!   `max_tokens` (default 256). `ctx run --max-cost` adds these rows to
//!   the task's own reservation.
//!
//! Prices come from [`super::prices::PriceArgs::book`], with the plan's
//! `config.prices` in its place; a model no source prices is "price
//! unknown" and is listed under `unpriced`.
//!
//! Exit codes: 0 the report was printed; 2 an invalid plan, a bad prices
//! file or `--price`, a task with no model and no `--model`, an option out
//! of range; 3 a task whose own prompt cannot fit its cap (`ctx run` would
//! fail it before calling any model), each such task named.

use std::path::PathBuf;

use ctx_cost::{estimate_costs, tier_total};
use ctx_run::estimate::{EngineDefaults, EstimateError, estimate_plan};

use super::prices::PriceArgs;
use crate::engines::{EngineArgs, EngineKind};
use crate::exit::{CliError, CliResult, Exit};

// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON or YAML by extension; `-` reads JSON from stdin).
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,

    /// The engine flags of `ctx run`, read the same way, so the high end
    /// printed is the one `ctx run --max-cost` reserves with the same
    /// flags. Without `--engine` and `--command` the engine is `openai`
    /// (a dry run costs nothing, which is no preview).
    #[command(flatten)]
    pub engine: EngineArgs,

    #[command(flatten)]
    pub prices: PriceArgs,

    /// The plan's inputs (`--var`, the digest flags): the filled prompts
    /// are priced.
    #[command(flatten)]
    pub inputs: super::plan_inputs::PlanInputArgs,

    /// The prefix-cache prediction (`--layout`, `--cache-min-tokens`).
    #[command(flatten)]
    pub cache: super::plan_cost_cache::CacheArgs,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

impl Args {
    /// The tiers priced beside the real-time range: batch with `--batch`
    /// (the engine flag `ctx run` sends batches with: here it also gives
    /// the run's range at batch prices, where the price names batch
    /// rates), flex with `--service-tier flex`.
    fn tiers(&self) -> Vec<ctx_model::ServiceTier> {
        let flex =
            self.engine.openai.service_tier == Some(crate::engines::openai::ServiceTierArg::Flex);
        [
            (self.engine.openai.batch, ctx_model::ServiceTier::Batch),
            (flex, ctx_model::ServiceTier::Flex),
        ]
        .into_iter()
        .filter_map(|(on, tier)| on.then_some(tier))
        .collect()
    }
}

pub use crate::format::Format;

/// Runs the command.
pub fn run(mut args: Args) -> CliResult {
    if args.engine.engine.is_none() && args.engine.command.is_none() {
        args.engine.engine = Some(EngineKind::Openai);
    }
    args.engine.check()?;
    let o = &args.engine.openai;
    if o.max_attempts == Some(0) {
        return Err(CliError::usage("--max-attempts must be at least 1"));
    }
    if o.max_tokens == Some(0) {
        return Err(CliError::usage("--max-tokens must be at least 1"));
    }
    if o.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(CliError::usage("--model: empty model name"));
    }
    let plan = super::plan_check::load_valid_plan_given(&args.plan, true)?;
    let plan = args.inputs.fill_for_estimate(plan, &args.plan)?;
    let book = args.prices.book(Some(&plan.config.prices))?;
    // What `ctx run --max-cost` reserves with: the same reading of the
    // engine flags (model, max_tokens, system prompt, attempts, whether
    // params.extra is sent).
    let costs = args.engine.costs();
    if costs.free {
        return Err(CliError::usage(
            "--engine dry-run calls no model and costs nothing: give --engine openai or --engine command",
        ));
    }
    let defaults = EngineDefaults::of(&costs);
    // A task whose high end is open because of a request parameter (not a
    // missing max_tokens, which the report's hint covers) is named with
    // the parameter, as `ctx run --max-cost` refuses it.
    for task in &plan.sub_tasks {
        match defaults.completion_bound(&task.tool_or_prompt.params) {
            Ok(_) | Err(ctx_model::billing::UnboundedParam::NoCap) => {}
            Err(why) => eprintln!(
                "warning: task `{}`: {why}: its high end is open, and ctx run --max-cost refuses it",
                task.id
            ),
        }
    }
    let estimates = estimate_plan(&plan, &defaults)
        .map_err(|e| located(e, &args.plan.display().to_string()))?;
    let mut report = estimate_costs(&book, &estimates);
    report.service_tiers = args
        .tiers()
        .into_iter()
        .map(|tier| tier_total(&book, &estimates, tier))
        .collect();
    // The range under each tier of the period budget (none without
    // `config.budget.fallback`).
    let tiers = ctx_run::period_budget::tier_ranges(&plan, &report.total, &defaults, &book)
        .map_err(|e| located(e, &args.plan.display().to_string()))?;
    let tier_text = match args.format {
        Format::Text => ctx_run::period_budget::tier_ranges_text(&tiers),
        Format::Json => String::new(),
    };
    let text = if args.cache.layout.is_empty() {
        match args.format {
            Format::Text => {
                report.render_text() + &ctx_run::period_budget::tier_ranges_text(&tiers)
            }
            Format::Json => crate::io::json_text(&ctx_run::period_budget::WithTiers {
                report: &report,
                tiers: &tiers,
            })?,
        }
    } else {
        super::plan_cost_cache::render(
            &report,
            args.format == Format::Json,
            &args.cache,
            &plan,
            &defaults,
            &book,
        )? + &tier_text
    };
    crate::io::print_stdout(&text)?;
    Ok(Exit::Ok)
}

/// An estimate's error for the CLI, prefixed with the plan's path: a task
/// with no model or a broken graph is a usage error (2), a task whose own
/// prompt cannot fit its cap is 3.
fn located(e: EstimateError, origin: &str) -> CliError {
    match e {
        EstimateError::NoModel(_) => {
            CliError::usage(format!("{origin}: {e}; give params.model or pass --model"))
        }
        EstimateError::OverCap(lines) => {
            let mut message = format!(
                "{origin}: {} cannot be assembled under the prompt cap; `ctx run` would fail {} before calling a model",
                ctx_model::display::count(lines.len(), "task", "tasks"),
                if lines.len() == 1 { "it" } else { "them" }
            );
            for line in lines {
                message.push('\n');
                message.push_str(&line);
            }
            CliError::with(Exit::OverBudget, message)
        }
        EstimateError::Graph(e) => CliError::usage(format!("{origin}: {e}")),
    }
}
