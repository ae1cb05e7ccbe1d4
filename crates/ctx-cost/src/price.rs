//! A model's price and the cost of one call.
//!
//! A price has four rates — prompt tokens, prompt tokens served from the
//! provider's cache (a cache read), prompt tokens written to the cache (a
//! cache write: Anthropic bills it above the input price), completion
//! tokens — and, for models that charge more
//! for long prompts (Gemini 2.5 Pro, Claude Sonnet 4 and 4.5 above 200k
//! tokens), a second set of rates that applies to the *whole* call once its
//! prompt exceeds a threshold. That is how the providers bill and how
//! LiteLLM's `*_above_200k_tokens` keys describe it.
//!
//! Two bounds are computed without knowing the exact usage:
//! [`Price::lowest_cost`] for a call with *at least* the given tokens and
//! [`Price::highest_cost`] for one with *at most* them. Both hold for every
//! split of the prompt into cached and uncached tokens and for every rate
//! set that could apply, so a cost range built from them always contains
//! the real cost.
//!
//! ## Service tiers
//!
//! A price may carry the rates of the provider's other tiers ([`Tiers`]:
//! flex, batch, priority; LiteLLM's `…_flex`, `…_batches`, `…_priority`
//! keys). A call is priced at the tier its usage says the server billed
//! ([`Usage::tier`], from the answer's `service_tier`), falling back to
//! the standard rates when the price names none for that tier: for flex
//! and batch, whose rates are lower, that overstates the cost, never
//! understates it. [`Price::highest_cost`] bounds a call at the dearest of
//! the standard, flex and batch rates, so a reservation holds whichever
//! of them the server answers at (a flex request may be answered at the
//! standard tier, or fall back to it). Priority is dearer and is never
//! in that bound: ctx refuses a `service_tier: priority` request under a
//! budget ([`ctx_model::billing`]).

use std::fmt;

use ctx_model::ServiceTier;

use serde::Serialize;

use crate::money::{Rate, Saving, Usd};

/// Token counts of one call, in OpenAI's convention: `cached_prompt_tokens`
/// is the part of `prompt_tokens` the provider served from its cache
/// (`usage.prompt_tokens_details.cached_tokens`), `cache_write_prompt_tokens`
/// the part it wrote to its cache (Anthropic's `cache_creation_input_tokens`,
/// which LiteLLM counts into `prompt_tokens`); reasoning tokens are part of
/// `completion_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Usage {
    /// All prompt tokens, cached ones included.
    pub prompt_tokens: u64,
    /// The cached part of `prompt_tokens` (cache reads).
    pub cached_prompt_tokens: u64,
    /// The part of `prompt_tokens` written to the provider's cache.
    pub cache_write_prompt_tokens: u64,
    /// Generated tokens, reasoning included.
    pub completion_tokens: u64,
    /// The tier the server billed the call at, when it said: the call is
    /// priced at that tier's rates ([`Price::cost`]).
    pub tier: Option<ServiceTier>,
}

impl Usage {
    /// The same call with nothing read from or written to the provider's
    /// cache: every prompt token at the input price.
    pub fn without_cache(self) -> Usage {
        Usage {
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
            ..self
        }
    }
}

/// What the provider's prompt cache saved on one call: its cost at
/// `price` with every cache read and write billed at the input price, less
/// its cost as billed. Negative when cache writes, dearer than input, cost
/// more than the reads saved. `None` when `price` knows no price for it.
///
/// The one place the saving is computed: every figure ctx shows (the run
/// summary, `--format json`, `ctx runs show`, `ctx runs export`, the HTML
/// report) is a sum of what this returned for each call, stored on the
/// task's result as `cache_saving_usd`.
pub fn cache_saving(price: impl Fn(&Usage) -> Option<Usd>, usage: &Usage) -> Option<Saving> {
    let billed = price(usage)?;
    let without = price(&usage.without_cache())?;
    Some(Saving::between(without, billed))
}

/// The four rates of one pricing tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rates {
    /// Uncached prompt tokens.
    pub input: Rate,
    /// Prompt tokens served from the provider's cache.
    pub cached_input: Rate,
    /// Prompt tokens written to the provider's cache (LiteLLM's
    /// `cache_creation_input_token_cost`); the input rate when the price
    /// names none.
    pub cache_write: Rate,
    /// Completion tokens.
    pub output: Rate,
}

impl Rates {
    /// Rates whose cached prices equal the input price: what a provider
    /// without a cache discount charges.
    pub const fn uncached(input: Rate, output: Rate) -> Rates {
        Rates {
            input,
            cached_input: input,
            cache_write: input,
            output,
        }
    }

    /// The cheapest and the dearest rate a prompt token can be billed at.
    fn prompt_extremes(self) -> (Rate, Rate) {
        let rates = [self.input, self.cached_input, self.cache_write];
        (
            rates.into_iter().min().unwrap_or(self.input),
            rates.into_iter().max().unwrap_or(self.input),
        )
    }

    fn componentwise(self, other: Rates, pick: fn(Rate, Rate) -> Rate) -> Rates {
        Rates {
            input: pick(self.input, other.input),
            cached_input: pick(self.cached_input, other.cached_input),
            cache_write: pick(self.cache_write, other.cache_write),
            output: pick(self.output, other.output),
        }
    }
}

/// Rates that replace the base rates for a whole call whose prompt has more
/// than `above_prompt_tokens` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LongContext {
    /// The threshold: a prompt of more tokens than this is billed at
    /// `rates`.
    pub above_prompt_tokens: u64,
    /// The long-context rates.
    pub rates: Rates,
}

/// The rates of a model's other service tiers, where the provider sells
/// them (see the module's "Service tiers").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tiers {
    /// OpenAI's flex processing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flex: Option<Rates>,
    /// A batch API's rates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<Rates>,
    /// OpenAI's priority processing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Rates>,
}

impl Tiers {
    /// The rates of `tier`, when the price names them.
    pub fn rates(&self, tier: ServiceTier) -> Option<Rates> {
        match tier {
            ServiceTier::Flex => self.flex,
            ServiceTier::Batch => self.batch,
            ServiceTier::Priority => self.priority,
            ServiceTier::Default
            | ServiceTier::Auto
            | ServiceTier::Scale
            | ServiceTier::Unrecognized => None,
        }
    }

    fn is_empty(&self) -> bool {
        self.flex.is_none() && self.batch.is_none() && self.priority.is_none()
    }
}

/// A model's price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Price {
    /// The rates of an ordinary call.
    pub base: Rates,
    /// Higher rates for long prompts, where the provider has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long_context: Option<LongContext>,
    /// The rates of the provider's other service tiers.
    #[serde(skip_serializing_if = "Tiers::is_empty")]
    pub tiers: Tiers,
}

impl Price {
    /// A single-tier price. Without a cached rate, cached tokens cost the
    /// input rate (no discount is assumed).
    pub fn flat(input: Rate, output: Rate, cached_input: Option<Rate>) -> Price {
        Price {
            base: Rates {
                input,
                cached_input: cached_input.unwrap_or(input),
                cache_write: input,
                output,
            },
            long_context: None,
            tiers: Tiers::default(),
        }
    }

    /// The price a call billed at `tier` pays: the tier's own rates, for
    /// every prompt length, when the price names them; else this price
    /// (the standard tier's, which for flex and batch is the higher).
    pub fn at_tier(&self, tier: Option<ServiceTier>) -> Price {
        match tier.and_then(|t| self.tiers.rates(t)) {
            Some(rates) => Price {
                base: rates,
                long_context: None,
                tiers: Tiers::default(),
            },
            None => *self,
        }
    }

    /// This price with its cache-write rate set (the base tier's; a
    /// long-context tier keeps its own). `None` leaves it at the input
    /// rate.
    pub fn with_cache_write(mut self, cache_write: Option<Rate>) -> Price {
        if let Some(rate) = cache_write {
            self.base.cache_write = rate;
        }
        self
    }

    /// The rates a call with `prompt_tokens` prompt tokens is billed at.
    pub fn rates_for(&self, prompt_tokens: u64) -> Rates {
        match self.long_context {
            Some(lc) if prompt_tokens > lc.above_prompt_tokens => lc.rates,
            _ => self.base,
        }
    }

    /// The exact cost of one call, in four buckets: uncached prompt
    /// tokens, cache reads, cache writes and completion tokens. A usage
    /// reporting more cached tokens than prompt tokens (inconsistent
    /// server data) is billed as if the whole prompt were cache reads, then
    /// cache writes, which keeps the cost within [`Price::highest_cost`] of
    /// its prompt size.
    pub fn cost(&self, usage: &Usage) -> Usd {
        let rates = self.at_tier(usage.tier).rates_for(usage.prompt_tokens);
        let cached = usage.cached_prompt_tokens.min(usage.prompt_tokens);
        let written = usage
            .cache_write_prompt_tokens
            .min(usage.prompt_tokens - cached);
        let uncached = usage.prompt_tokens - cached - written;
        rates
            .input
            .cost(uncached)
            .saturating_add(rates.cached_input.cost(cached))
            .saturating_add(rates.cache_write.cost(written))
            .saturating_add(rates.output.cost(usage.completion_tokens))
    }

    /// A lower bound on the cost of any call with at least `prompt_tokens`
    /// prompt and at least `completion_tokens` completion tokens, however
    /// much of the prompt is cached.
    pub fn lowest_cost(&self, prompt_tokens: u64, completion_tokens: u64) -> Usd {
        // A longer prompt may move the call to the long-context tier, so
        // every tier reachable from here is a candidate; a prompt already
        // past the threshold can only be in that tier.
        let rates = match self.long_context {
            Some(lc) if prompt_tokens > lc.above_prompt_tokens => lc.rates,
            Some(lc) => self.base.componentwise(lc.rates, Ord::min),
            None => self.base,
        };
        rates
            .prompt_extremes()
            .0
            .cost(prompt_tokens)
            .saturating_add(rates.output.cost(completion_tokens))
    }

    /// An upper bound on the cost of any call with at most `prompt_tokens`
    /// prompt and at most `completion_tokens` completion tokens, however
    /// much of the prompt is cached.
    ///
    /// The call may be answered at the standard, flex or batch tier
    /// (module doc, "Service tiers"): the bound takes the dearest of their
    /// rates.
    pub fn highest_cost(&self, prompt_tokens: u64, completion_tokens: u64) -> Usd {
        let standard = match self.long_context {
            Some(lc) if prompt_tokens > lc.above_prompt_tokens => {
                self.base.componentwise(lc.rates, Ord::max)
            }
            _ => self.base,
        };
        let rates = [self.tiers.flex, self.tiers.batch]
            .into_iter()
            .flatten()
            .fold(standard, |r, t| r.componentwise(t, Ord::max));
        rates
            .prompt_extremes()
            .1
            .cost(prompt_tokens)
            .saturating_add(rates.output.cost(completion_tokens))
    }
}

/// `in 2.5 / cached 1.25 / out 10` (dollars per million tokens), with the
/// long-context tier after a semicolon.
impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.base;
        write!(
            f,
            "in {} / cached {}{} / out {}",
            r.input,
            r.cached_input,
            CacheWrite(r),
            r.output
        )?;
        if let Some(lc) = self.long_context {
            let r = lc.rates;
            write!(
                f,
                "; above {} prompt tokens: in {} / cached {}{} / out {}",
                lc.above_prompt_tokens,
                r.input,
                r.cached_input,
                CacheWrite(r),
                r.output
            )?;
        }
        Ok(())
    }
}

/// ` / cache write X` when the cache-write rate is not the input rate;
/// nothing otherwise, so a price without one prints as it always did.
struct CacheWrite(Rates);

impl fmt::Display for CacheWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.cache_write != self.0.input {
            write!(f, " / cache write {}", self.0.cache_write)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rate(s: &str) -> Rate {
        Rate::parse(s).unwrap()
    }

    fn gpt_4o() -> Price {
        Price::flat(rate("2.5"), rate("10"), Some(rate("1.25")))
    }

    fn tiered() -> Price {
        Price {
            base: Rates {
                input: rate("1.25"),
                cached_input: rate("0.125"),
                cache_write: rate("1.25"),
                output: rate("10"),
            },
            long_context: Some(LongContext {
                above_prompt_tokens: 200_000,
                rates: Rates {
                    input: rate("2.5"),
                    cached_input: rate("0.25"),
                    cache_write: rate("2.5"),
                    output: rate("15"),
                },
            }),
            tiers: Tiers::default(),
        }
    }

    #[test]
    fn a_call_costs_its_tokens_times_its_rates() {
        let usage = Usage {
            prompt_tokens: 1_000,
            cached_prompt_tokens: 400,
            cache_write_prompt_tokens: 0,
            completion_tokens: 200,
            tier: None,
        };
        // 600 × 2.5 + 400 × 1.25 + 200 × 10 micro-dollars... per million.
        // = (1500 + 500 + 2000) × 10⁻⁶ dollars = $0.004
        assert_eq!(gpt_4o().cost(&usage).to_string(), "0.004");
    }

    #[test]
    fn a_call_is_billed_in_four_buckets() {
        // Claude Sonnet 4.5: in 3, cache read 0.3, cache write 3.75, out 15.
        let price = Price::flat(rate("3"), rate("15"), Some(rate("0.3")))
            .with_cache_write(Some(rate("3.75")));
        let usage = Usage {
            prompt_tokens: 10_000,
            cached_prompt_tokens: 6_000,
            cache_write_prompt_tokens: 3_000,
            completion_tokens: 100,
            tier: None,
        };
        // 1,000 × 3 + 6,000 × 0.3 + 3,000 × 3.75 + 100 × 15
        // = 3,000 + 1,800 + 11,250 + 1,500 µ$ = $0.01755
        assert_eq!(price.cost(&usage).to_string(), "0.01755");
        // The high end of such a prompt is priced at the cache-write rate,
        // the dearest, so a reservation stays a bound.
        assert_eq!(price.highest_cost(10_000, 0), rate("3.75").cost(10_000));
        // Without a cache-write rate, a write costs the input rate.
        let plain = Price::flat(rate("3"), rate("15"), Some(rate("0.3")));
        assert_eq!(plain.highest_cost(10_000, 0), rate("3").cost(10_000));
    }

    #[test]
    fn the_cache_saving_is_the_uncached_cost_less_the_billed_one() {
        // Claude Sonnet 4.5: in 3, cache read 0.3, cache write 3.75, out 15.
        let price = Price::flat(rate("3"), rate("15"), Some(rate("0.3")))
            .with_cache_write(Some(rate("3.75")));
        let priced = |u: &Usage| Some(price.cost(u));
        let reads = Usage {
            prompt_tokens: 10_000,
            cached_prompt_tokens: 6_000,
            cache_write_prompt_tokens: 0,
            completion_tokens: 100,
            tier: None,
        };
        // 6,000 reads × (3 − 0.3) µ$ = $0.0162 saved.
        assert_eq!(cache_saving(priced, &reads).unwrap().to_string(), "0.0162");
        let writes = Usage {
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 4_000,
            ..reads
        };
        // 4,000 writes × (3.75 − 3) µ$ = $0.003 more.
        assert_eq!(cache_saving(priced, &writes).unwrap().to_string(), "-0.003");
        // No cache count: nothing saved; no price: no saving.
        assert_eq!(
            cache_saving(priced, &reads.without_cache()),
            Some(Saving::ZERO)
        );
        assert_eq!(cache_saving(|_: &Usage| None, &reads), None);
    }

    #[test]
    fn long_prompts_switch_the_whole_call_to_the_long_context_rates() {
        let p = tiered();
        let at = |prompt| Usage {
            prompt_tokens: prompt,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
            completion_tokens: 1_000,
            tier: None,
        };
        // 200,000 × 1.25 + 1,000 × 10 = 250,000 + 10,000 µ$ = $0.26
        assert_eq!(p.cost(&at(200_000)).to_string(), "0.26");
        // 200,001 × 2.5 + 1,000 × 15 = 500,002.5 + 15,000 µ$
        assert_eq!(p.cost(&at(200_001)).to_string(), "0.5150025");
    }

    #[test]
    fn cached_beyond_prompt_is_billed_as_all_cached() {
        let usage = Usage {
            prompt_tokens: 100,
            cached_prompt_tokens: 500,
            cache_write_prompt_tokens: 0,
            completion_tokens: 0,
            tier: None,
        };
        assert_eq!(gpt_4o().cost(&usage), rate("1.25").cost(100));
    }

    #[test]
    fn display_names_every_rate() {
        assert_eq!(gpt_4o().to_string(), "in 2.5 / cached 1.25 / out 10");
        assert_eq!(
            tiered().to_string(),
            "in 1.25 / cached 0.125 / out 10; above 200000 prompt tokens: in 2.5 / cached 0.25 / out 15"
        );
    }

    fn any_rates() -> impl Strategy<Value = Rates> {
        (
            0u64..50_000_000,
            0u64..50_000_000,
            0u64..70_000_000,
            0u64..100_000_000,
        )
            .prop_map(|(i, c, w, o)| Rates {
                input: Rate::from_micros_per_million(i),
                cached_input: Rate::from_micros_per_million(c),
                cache_write: Rate::from_micros_per_million(w),
                output: Rate::from_micros_per_million(o),
            })
    }

    fn any_price() -> impl Strategy<Value = Price> {
        (
            any_rates(),
            proptest::option::of((0u64..300_000, any_rates())),
            proptest::option::of(any_rates()),
            proptest::option::of(any_rates()),
            proptest::option::of(any_rates()),
        )
            .prop_map(|(base, lc, flex, batch, priority)| Price {
                base,
                long_context: lc.map(|(above_prompt_tokens, rates)| LongContext {
                    above_prompt_tokens,
                    rates,
                }),
                tiers: Tiers {
                    flex,
                    batch,
                    priority,
                },
            })
    }

    /// The tiers a reservation covers: a call asked for at the standard
    /// or flex tier is answered at one of these.
    fn covered_tier() -> impl Strategy<Value = Option<ServiceTier>> {
        proptest::sample::select(vec![
            None,
            Some(ServiceTier::Default),
            Some(ServiceTier::Flex),
            Some(ServiceTier::Batch),
            Some(ServiceTier::Unrecognized),
        ])
    }

    /// A flex call is priced at the flex rates, and falls back to the
    /// standard ones where the price names none; the bound covers both.
    #[test]
    fn a_call_is_priced_at_the_tier_it_was_billed_at() {
        let mut price = gpt_4o();
        let usage = |tier| Usage {
            prompt_tokens: 1_000_000,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
            completion_tokens: 1_000_000,
            tier,
        };
        let standard = price.cost(&usage(None));
        assert_eq!(standard, Usd::parse("12.5").unwrap());
        assert_eq!(price.cost(&usage(Some(ServiceTier::Flex))), standard);
        price.tiers.flex = Some(Rates::uncached(rate("1"), rate("4")));
        assert_eq!(
            price.cost(&usage(Some(ServiceTier::Flex))),
            Usd::parse("5").unwrap()
        );
        assert_eq!(price.cost(&usage(Some(ServiceTier::Default))), standard);
        // A flex rate above the standard one (no provider sells that, but
        // a prices file may say it) still fits under the bound.
        price.tiers.flex = Some(Rates::uncached(rate("3"), rate("12")));
        assert_eq!(
            price.highest_cost(1_000_000, 1_000_000),
            Usd::parse("15").unwrap()
        );
    }

    proptest! {
        /// Every call inside a token range costs between the range's
        /// bounds, whatever the tiers and whichever parts are cache reads
        /// and cache writes (a cache write dearer than the input rate
        /// included: the high end takes the dearest prompt rate).
        #[test]
        fn bounds_contain_every_call_in_range(
            price in any_price(),
            p_lo in 0u64..400_000, p_extra in 0u64..400_000, p_at in 0.0f64..=1.0,
            c_lo in 0u64..100_000, c_extra in 0u64..100_000, c_at in 0.0f64..=1.0,
            cached_at in 0.0f64..=1.2,
            written_at in 0.0f64..=1.2,
            tier in covered_tier(),
        ) {
            let p_hi = p_lo + p_extra;
            let c_hi = c_lo + c_extra;
            let prompt = p_lo + (p_extra as f64 * p_at) as u64;
            let completion = c_lo + (c_extra as f64 * c_at) as u64;
            let usage = Usage {
                prompt_tokens: prompt,
                cached_prompt_tokens: (prompt as f64 * cached_at) as u64,
                cache_write_prompt_tokens: (prompt as f64 * written_at) as u64,
                completion_tokens: completion,
                tier,
            };
            let cost = price.cost(&usage);
            // The low end is the standard tier's: a call the server billed
            // at a cheaper tier may cost less.
            if price.at_tier(tier) == price {
                prop_assert!(price.lowest_cost(p_lo, c_lo) <= cost);
            }
            prop_assert!(cost <= price.highest_cost(p_hi, c_hi));
        }
    }
}
