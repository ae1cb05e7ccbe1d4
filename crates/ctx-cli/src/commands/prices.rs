//! `ctx prices [--prices FILE] [--price MODEL=IN,OUT[,CACHED]]… [--format json]`:
//! every price ctx knows, where each came from, and the date of the
//! shipped default table — and the price flags every cost command shares.
//!
//! Prices come in layers, later ones winning (docs/cost.md): the shipped
//! default table < a LiteLLM-format `--prices FILE` < the plan's
//! `config.prices` < `--price` flags. [`PriceArgs::book`] builds that
//! stack in one place so `ctx prices` and `ctx plan cost` cannot disagree
//! on the order. A ctx configuration file does not exist yet, so there is
//! no `prices:` key in one; `--prices FILE` is the way to name a file.
//!
//! Exit codes: 0 listed; 2 a prices file that cannot be read or parsed
//! (the message names file, line and column) or a malformed `--price`
//! (the message quotes the value).

use std::path::PathBuf;

use ctx_cost::{PlanPrices, PriceBook, PriceListing, flag_table, load_litellm};
use ctx_run::run_costs::RunPricing;

use crate::exit::{CliError, CliResult, Exit};

// The price flags of every command that prices models.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PriceArgs {
    /// Prices in LiteLLM's model_prices_and_context_window.json format;
    /// they win over the shipped default table.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,

    /// One model's price in US dollars per million tokens:
    /// MODEL=INPUT,OUTPUT[,CACHED_INPUT] (repeatable; wins over every other
    /// source). Example: --price gpt-4o=2.5,10,1.25
    #[arg(long = "price", value_name = "MODEL=IN,OUT[,CACHED]")]
    pub price: Vec<String>,
}

impl PriceArgs {
    /// What a run (`ctx run`, `ctx eval`, `ctx worker`) is priced by:
    /// `engine`'s cost facts, these flags' tables and `max_cost`. Each
    /// run's plan joins the stack when it is priced
    /// ([`ctx_run::run_costs::RunPricing::cost_options`]).
    ///
    /// The flags are parsed before the file is read, so a typo in a flag
    /// is reported without touching the disk.
    pub fn pricing(
        &self,
        engine: ctx_run::run_costs::EngineCosts,
        max_cost: Option<ctx_cost::Usd>,
    ) -> Result<RunPricing, CliError> {
        let flags = flag_table(self.price.iter().map(String::as_str))?;
        let file = self.prices.as_deref().map(load_litellm).transpose()?;
        Ok(RunPricing {
            engine,
            file,
            flags: Some(flags),
            max_cost,
        })
    }

    /// The price book: defaults, then `--prices FILE`, then `plan` (a
    /// plan's `config.prices`, when there is one), then `--price`.
    pub fn book(&self, plan: Option<&PlanPrices>) -> Result<PriceBook, CliError> {
        Ok(self.pricing(Default::default(), None)?.layers(plan))
    }
}

// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub prices: PriceArgs,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

pub use crate::format::Format;

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let book = args.prices.book(None)?;
    let listing = PriceListing::of(&book);
    let text = match args.format {
        Format::Text => listing.render_text(),
        Format::Json => crate::io::json_text(&listing)?,
    };
    crate::io::print_stdout(&text)?;
    Ok(Exit::Ok)
}
