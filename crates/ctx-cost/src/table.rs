//! Price tables, where each came from, and the book that layers them.
//!
//! ctx reads prices from up to four sources — the shipped default table, a
//! LiteLLM-format file, the plan's `config.prices`, and `--price` flags —
//! and a later source wins. A [`PriceBook`] keeps them as separate layers
//! instead of merging them into one map, so a listing can say where each
//! price came from and a lookup can apply the provider-prefix rule inside
//! each layer before falling back to an earlier one.
//!
//! ## Model names
//!
//! A model matches a table key exactly (case and all). When it does not
//! and the name has a provider prefix (`openai/gpt-4o`,
//! `anthropic/claude-sonnet-4-5`), the part after the first `/` is tried
//! next (`gpt-4o`): LiteLLM keys OpenAI and Anthropic models without a
//! prefix, while proxies such as LiteLLM's are addressed with one. The
//! rule never goes the other way (`gpt-4o` does not find
//! `azure/gpt-4o`): one bare name can stand for several providers with
//! different prices, and guessing one would be pretending.
//!
//! Within a layer an exact key beats a stripped one; across layers the
//! later layer wins, so `--price gpt-4o=…` prices a plan's
//! `openai/gpt-4o` even when a prices file lists `openai/gpt-4o` too.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use ctx_model::ServiceTier;

use crate::price::Price;

/// Where a price table came from, for listings and reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceSource {
    /// The table shipped with ctx-cost ([`crate::default_table`]).
    Default {
        /// The day the figures were published by their source
        /// (`2026-10-07`).
        date: String,
        /// Where the figures were taken from.
        origin: String,
    },
    /// A file in LiteLLM's `model_prices_and_context_window.json` format.
    File(PathBuf),
    /// A plan's `config.prices`.
    Plan,
    /// `--price MODEL=IN,OUT[,CACHED]` flags.
    Flag,
}

/// `default table of 2026-10-07`, `file prices.json`, `plan
/// config.prices`, `--price`.
impl fmt::Display for PriceSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PriceSource::Default { date, .. } => write!(f, "default table of {date}"),
            PriceSource::File(path) => write!(f, "file {}", path.display()),
            PriceSource::Plan => f.write_str("plan config.prices"),
            PriceSource::Flag => f.write_str("--price"),
        }
    }
}

/// The prices of one source, keyed by model name.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    source: PriceSource,
    prices: BTreeMap<String, Price>,
    skipped: Vec<String>,
}

impl PriceTable {
    /// An empty table from `source`.
    pub fn new(source: PriceSource) -> PriceTable {
        PriceTable {
            source,
            prices: BTreeMap::new(),
            skipped: Vec::new(),
        }
    }

    /// Sets `model`'s price, replacing an earlier one from this source.
    pub fn insert(&mut self, model: impl Into<String>, price: Price) {
        self.prices.insert(model.into(), price);
    }

    /// Records an entry of the source that has no per-token price (an
    /// image or audio model, an embedding model without an output price):
    /// it stays "price unknown".
    pub fn note_skipped(&mut self, model: impl Into<String>) {
        self.skipped.push(model.into());
    }

    /// Where this table came from.
    pub fn source(&self) -> &PriceSource {
        &self.source
    }

    /// The exact entry for `model`, without the prefix rule.
    pub fn get(&self, model: &str) -> Option<&Price> {
        self.prices.get(model)
    }

    /// Every priced model, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Price)> {
        self.prices.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many models are priced.
    pub fn len(&self) -> usize {
        self.prices.len()
    }

    /// Whether no model is priced.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// Entries of the source that carried no per-token price, in source
    /// order.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// The entry for `model`: its exact key, else (for a prefixed name)
    /// the name after the first `/`.
    fn find(&self, model: &str) -> Option<(&str, &Price)> {
        if let Some((key, price)) = self.prices.get_key_value(model) {
            return Some((key, price));
        }
        let (_, bare) = model.split_once('/')?;
        self.prices
            .get_key_value(bare)
            .map(|(key, price)| (key.as_str(), price))
    }
}

/// A price found for a model, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriceMatch<'a> {
    /// The table key that matched (`gpt-4o` for a model `openai/gpt-4o`).
    pub key: &'a str,
    /// The price.
    pub price: &'a Price,
    /// The source of the table it came from.
    pub source: &'a PriceSource,
}

/// Price tables in order of precedence: a later layer wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceBook {
    layers: Vec<PriceTable>,
}

impl PriceBook {
    /// A book with no prices: every model is "price unknown".
    pub fn new() -> PriceBook {
        PriceBook::default()
    }

    /// A book holding the shipped default table.
    pub fn with_defaults() -> PriceBook {
        let mut book = PriceBook::new();
        book.push(crate::default_table().clone());
        book
    }

    /// Adds a layer that wins over every layer pushed before it.
    pub fn push(&mut self, table: PriceTable) {
        self.layers.push(table);
    }

    /// The layers, earliest (weakest) first.
    pub fn layers(&self) -> &[PriceTable] {
        &self.layers
    }

    /// The price of `model`, or `None` when no layer knows it ("price
    /// unknown"). See the module docs for the matching rule.
    pub fn lookup(&self, model: &str) -> Option<PriceMatch<'_>> {
        self.layers.iter().rev().find_map(|table| {
            table.find(model).map(|(key, price)| PriceMatch {
                key,
                price,
                source: &table.source,
            })
        })
    }

    /// The book as a call billed at `tier` pays it: every price that names
    /// the tier's rates becomes those rates ([`Price::at_tier`]); a price
    /// that names none stays the standard one (which
    /// [`PriceBook::lacks_tier`] tells).
    pub fn at_tier(&self, tier: ServiceTier) -> PriceBook {
        let layers = self
            .layers
            .iter()
            .map(|table| PriceTable {
                source: table.source.clone(),
                prices: table
                    .prices
                    .iter()
                    .map(|(model, price)| (model.clone(), price.at_tier(Some(tier))))
                    .collect(),
                skipped: table.skipped.clone(),
            })
            .collect();
        PriceBook { layers }
    }

    /// Whether `model` has a price but none for `tier`: at that tier it is
    /// priced at the standard rates.
    pub fn lacks_tier(&self, model: &str, tier: ServiceTier) -> bool {
        self.lookup(model)
            .is_some_and(|m| m.price.tiers.rates(tier).is_none())
    }

    /// Every key with the price that wins for it, sorted by key: what
    /// `ctx prices` lists.
    pub fn entries(&self) -> Vec<PriceMatch<'_>> {
        let mut winners: BTreeMap<&str, PriceMatch<'_>> = BTreeMap::new();
        for table in &self.layers {
            for (key, price) in table.iter() {
                winners.insert(
                    key,
                    PriceMatch {
                        key,
                        price,
                        source: &table.source,
                    },
                );
            }
        }
        winners.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::Rate;

    fn price(input: u64) -> Price {
        Price::flat(
            Rate::from_micros_per_million(input),
            Rate::from_micros_per_million(input * 4),
            None,
        )
    }

    fn table(source: PriceSource, entries: &[(&str, u64)]) -> PriceTable {
        let mut t = PriceTable::new(source);
        for (k, v) in entries {
            t.insert(*k, price(*v));
        }
        t
    }

    #[test]
    fn exact_then_prefix_stripped_never_prefix_added() {
        let mut book = PriceBook::new();
        book.push(table(
            PriceSource::Plan,
            &[("gpt-4o", 1), ("gemini/gemini-2.5-flash", 2)],
        ));
        assert_eq!(book.lookup("gpt-4o").unwrap().key, "gpt-4o");
        assert_eq!(book.lookup("openai/gpt-4o").unwrap().key, "gpt-4o");
        assert_eq!(
            book.lookup("gemini/gemini-2.5-flash").unwrap().key,
            "gemini/gemini-2.5-flash"
        );
        assert!(
            book.lookup("gemini-2.5-flash").is_none(),
            "no prefix is added"
        );
        assert!(book.lookup("GPT-4o").is_none(), "case matters");
        assert!(book.lookup("a/b/gpt-4o").is_none(), "one prefix only");
        assert!(book.lookup("").is_none());
    }

    #[test]
    fn later_layers_win_and_say_so() {
        let mut book = PriceBook::new();
        book.push(table(
            PriceSource::File("p.json".into()),
            &[("openai/gpt-4o", 1), ("o3", 5)],
        ));
        book.push(table(PriceSource::Flag, &[("gpt-4o", 9)]));
        let m = book.lookup("openai/gpt-4o").unwrap();
        assert_eq!((m.key, m.source), ("gpt-4o", &PriceSource::Flag));
        assert_eq!(m.price, &price(9));
        let m = book.lookup("o3").unwrap();
        assert_eq!(m.source.to_string(), "file p.json");
        let listed: Vec<_> = book
            .entries()
            .iter()
            .map(|m| format!("{} {}", m.key, m.source))
            .collect();
        assert_eq!(
            listed,
            [
                "gpt-4o --price",
                "o3 file p.json",
                "openai/gpt-4o file p.json"
            ]
        );
    }
}
