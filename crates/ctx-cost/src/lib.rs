//! # ctx-cost: exact prices, provable cost ranges, a budget that holds
//!
//! Two questions come before and during every LLM pipeline run: *what will
//! this cost?* and *can it stop before it costs more than X?* ctx already
//! counts every prompt exactly and caps it, so it can answer both with a
//! guarantee instead of a guess. This crate is the arithmetic; the CLI,
//! the executor and the store call it.
//!
//! ## Exact arithmetic
//!
//! Prices are [`Rate`]s held as integer micro-dollars per million tokens —
//! the same number as pico-dollars per token — and amounts are [`Usd`]
//! held as integer pico-dollars. `tokens × rate` is therefore an exact
//! amount with no division, and totals over thousands of tasks are exact
//! and independent of summation order. A budget check is an integer
//! comparison that cannot flip on a rounding bit. (See [`money`] for the
//! units and why every published price fits them.)
//!
//! ## Never pretend
//!
//! A model no source prices is "price unknown": [`PriceBook::lookup`]
//! returns `None`, its task has no cost in a [`CostReport`], the model is
//! listed under `unpriced`, and the total has no high end. The shipped
//! [`default_table`] is labelled with the date and release it was copied
//! from, and any price the user gives wins over it.
//!
//! ## Why the high end is a bound
//!
//! A call's cost grows with its prompt and completion tokens. ctx cuts
//! every assembled prompt to the task's `max_prompt_tokens` (exactly, with
//! the model's own tokenizer) and a completion never exceeds `max_tokens`,
//! so [`Price::highest_cost`] of those two caps — taking the dearer of the
//! cached and uncached input rates and any long-context tier the prompt
//! could reach — is at least what any one call costs, and multiplying by
//! the attempts a task can make bounds the task. That is what lets
//! [`BudgetLedger`] promise `spent <= budget`: reserve the bound before a
//! task starts, settle the actual cost after.
//!
//! ## Sources of prices
//!
//! Later sources win ([`PriceBook`]):
//!
//! 1. the shipped [`default_table`];
//! 2. a file in LiteLLM's format ([`load_litellm`]);
//! 3. the plan's `config.prices` ([`PlanPrices`], [`plan_table`]);
//! 4. `--price MODEL=IN,OUT[,CACHED]` flags ([`parse_price_flag`],
//!    [`flag_table`]).
//!
//! ```
//! use ctx_cost::{
//!     BudgetLedger, PriceBook, Reservation, TaskEstimate, TokenRange, Usage, Usd,
//!     estimate_costs, flag_table,
//! };
//!
//! let mut book = PriceBook::with_defaults();
//! book.push(flag_table(["my-finetune=3,12"]).unwrap());
//!
//! // Before the run: a range per task and in total.
//! let tasks = [TaskEstimate {
//!     task_id: "summarize".into(),
//!     model: "openai/gpt-4o-mini".into(),
//!     prompt_tokens: TokenRange::bounded(300, 4000),
//!     completion_tokens: TokenRange::bounded(0, 500),
//!     attempts: 2,
//! }];
//! let report = estimate_costs(&book, &tasks);
//! let high = report.total.cost_usd.high.unwrap();
//! assert_eq!(high.to_string(), "0.0018"); // 2 × (4000 × $0.15 + 500 × $0.60) / 1M
//!
//! // During the run: reserve the high end, settle the actual cost.
//! let ledger = BudgetLedger::new(Usd::parse("0.01").unwrap());
//! assert_eq!(ledger.reserve("summarize", high).unwrap(), Reservation::Reserved);
//! let price = book.lookup("openai/gpt-4o-mini").unwrap().price;
//! let actual = price.cost(&Usage {
//!     prompt_tokens: 1_200,
//!     completion_tokens: 310,
//!     ..Usage::default()
//! });
//! ledger.settle("summarize", actual).unwrap();
//! assert_eq!(ledger.spent().to_string(), "0.000366");
//! ```

pub mod money;

mod defaults;
mod estimate;
mod flag;
mod ledger;
mod listing;
mod litellm;
mod plan;
mod price;
mod table;

pub use defaults::default_table;
pub use estimate::{
    CostRange, CostReport, CostTotal, TaskCost, TaskEstimate, TierTotal, TokenRange, attempt_bound,
    estimate_costs, tier_total,
};
pub use flag::{PriceFlagError, flag_table, parse_price_flag};
pub use ledger::{
    BudgetLedger, LedgerError, LedgerSnapshot, MaxCostError, Reservation, Settlement,
    parse_max_cost,
};
pub use listing::{DefaultTableLabel, ListedPrice, PriceListing};
pub use litellm::{PriceProblem, PricesFileError, load_litellm, parse_litellm};
pub use money::{DecimalError, Rate, Round, Saving, Usd};
pub use plan::{PlanPrice, PlanPrices, plan_table};
pub use price::{LongContext, Price, Rates, Tiers, Usage, cache_saving};
pub use table::{PriceBook, PriceMatch, PriceSource, PriceTable};
