//! Reading prices files in LiteLLM's `model_prices_and_context_window.json`
//! format.
//!
//! The file is one JSON object keyed by model name. Of each entry ctx reads
//! the per-token prices in dollars — `input_cost_per_token`,
//! `output_cost_per_token`, `cache_read_input_token_cost`,
//! `cache_creation_input_token_cost` (a cache write) — and their
//! long-context variants `…_above_<N>k_tokens` (a whole call whose prompt
//! exceeds N×1000 tokens is billed at those rates); every other key is
//! ignored, and so is the `sample_spec` entry that documents the format.
//!
//! * An entry without both an input and an output price (image, audio and
//!   most embedding models) is not a token price: it is skipped and the
//!   model stays "price unknown".
//! * Without `cache_read_input_token_cost`, cached tokens cost the input
//!   price; without `cache_creation_input_token_cost`, so do cache writes.
//!   A cache-write price in an entry without an input price is an error
//!   (a write is billed relative to the input it caches, and a model
//!   without an input price has no token price to attach it to). A long-context variant that is missing falls back to the base
//!   price of the same kind.
//! * `null` is treated as an absent key; a negative price, or a price that
//!   is not a number, is an error naming the model and the field.
//! * A model or price key that appears twice is an error (JSON parsers
//!   disagree on which copy wins).
//! * Prices are rounded to the nearest micro-dollar per million tokens
//!   ([`crate::Rate::from_dollars_per_token`]).
//!
//! Service-tier variants are read into the price's [`crate::Tiers`]:
//! `…_flex`, `…_batches` and `…_priority` of the input, output and
//! cache-read prices (a tier needs both an input and an output price, or
//! it is left out; without its own cache-read price a tier's cached
//! tokens cost its input price). A tier's long-context variant
//! (`…_above_200k_tokens_priority`) and the one-hour cache-write price
//! (`…_above_1hr`) are ignored: a breakpoint ctx sets uses the default
//! lifetime.
//!
//! Every error names the file, line and column (serde_json reports where
//! it stopped reading).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use thiserror::Error;

use crate::money::{DecimalError, Rate};
use crate::price::{LongContext, Price, Rates, Tiers};
use crate::table::{PriceSource, PriceTable};

/// A prices file that cannot be used.
#[derive(Debug, Error)]
pub enum PricesFileError {
    /// The file could not be read.
    #[error("cannot read prices file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not JSON, or JSON of the wrong shape.
    #[error("{}:{line}:{column}: not a prices file in LiteLLM's format: {source}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_json's description.
        source: serde_json::Error,
    },
    /// A price field holds an unusable value.
    #[error("{}:{line}:{column}: model {model:?}: {field} {problem}", path.display())]
    InvalidPrice {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The entry's key.
        model: String,
        /// The price key (`input_cost_per_token`).
        field: String,
        /// What is wrong with it.
        problem: PriceProblem,
    },
    /// An entry that is not a JSON object.
    #[error("{}:{line}:{column}: model {model:?}: an entry must be an object of prices", path.display())]
    NotAnEntry {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The entry's key.
        model: String,
    },
    /// A model, or a price key inside one entry, appears twice.
    #[error("{}:{line}:{column}: {} appears twice", path.display(), duplicate_what(model, field))]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The entry's key.
        model: String,
        /// The repeated price key, when the repetition is inside an entry.
        field: Option<String>,
    },
    /// A cache-write price in an entry without an input price.
    #[error("{}:{line}:{column}: model {model:?}: cache_creation_input_token_cost is given without input_cost_per_token", path.display())]
    CacheWriteWithoutInput {
        /// The file.
        path: PathBuf,
        /// 1-based line (the end of the entry).
        line: usize,
        /// 1-based column.
        column: usize,
        /// The entry's key.
        model: String,
    },
    /// Long-context prices of one model with different thresholds.
    #[error("{}:{line}:{column}: model {model:?}: long-context prices with different thresholds ({first}k and {second}k tokens)", path.display())]
    MixedThresholds {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The entry's key.
        model: String,
        /// One threshold, in thousands of tokens.
        first: u64,
        /// Another, in thousands of tokens.
        second: u64,
    },
}

fn duplicate_what(model: &str, field: &Option<String>) -> String {
    match field {
        Some(field) => format!("model {model:?}: {field}"),
        None => format!("model {model:?}"),
    }
}

/// What is wrong with one price value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PriceProblem {
    /// A number that is not a usable price.
    #[error("{0}")]
    Decimal(#[from] DecimalError),
    /// Not a number at all.
    #[error("must be a number of dollars per token, found {0}")]
    NotANumber(&'static str),
}

/// Reads a LiteLLM-format prices file.
pub fn load_litellm(path: &Path) -> Result<PriceTable, PricesFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| PricesFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_litellm(&text, path)
}

/// Parses the text of a LiteLLM-format prices file; `path` names it in
/// errors and in the table's [`PriceSource::File`].
pub fn parse_litellm(text: &str, path: &Path) -> Result<PriceTable, PricesFileError> {
    parse_with_source(text, path, PriceSource::File(path.to_path_buf()))
}

/// Parses LiteLLM-format entries into a table labelled `source`.
pub(crate) fn parse_with_source(
    text: &str,
    path: &Path,
    source: PriceSource,
) -> Result<PriceTable, PricesFileError> {
    let problem = RefCell::new(None);
    let mut table = PriceTable::new(source);
    let mut de = serde_json::Deserializer::from_str(text);
    let result = de
        .deserialize_map(ModelsVisitor {
            problem: &problem,
            table: &mut table,
        })
        .and_then(|()| de.end());
    match result {
        Ok(()) => Ok(table),
        Err(err) => Err(locate(err, problem.into_inner(), path)),
    }
}

/// A problem found while visiting, kept aside so the error can carry it
/// as data while serde_json supplies the position.
#[derive(Debug)]
enum Problem {
    Price {
        model: String,
        field: String,
        problem: PriceProblem,
    },
    NotAnEntry {
        model: String,
    },
    Duplicate {
        model: String,
        field: Option<String>,
    },
    MixedThresholds {
        model: String,
        first: u64,
        second: u64,
    },
    CacheWriteWithoutInput {
        model: String,
    },
}

/// serde_json's own message for the problem; callers see the typed error
/// that [`locate`] builds from the same data instead.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Price {
                model,
                field,
                problem,
            } => write!(f, "model {model:?}: {field} {problem}"),
            Problem::NotAnEntry { model } => write!(f, "model {model:?}: not an object"),
            Problem::Duplicate { model, field } => {
                write!(f, "{} appears twice", duplicate_what(model, field))
            }
            Problem::MixedThresholds { model, .. } => {
                write!(f, "model {model:?}: mixed long-context thresholds")
            }
            Problem::CacheWriteWithoutInput { model } => {
                write!(
                    f,
                    "model {model:?}: a cache-write price without an input price"
                )
            }
        }
    }
}

fn locate(err: serde_json::Error, problem: Option<Problem>, path: &Path) -> PricesFileError {
    let (path, line, column) = (path.to_path_buf(), err.line(), err.column());
    match problem {
        None => PricesFileError::Syntax {
            path,
            line,
            column,
            source: err,
        },
        Some(Problem::Price {
            model,
            field,
            problem,
        }) => PricesFileError::InvalidPrice {
            path,
            line,
            column,
            model,
            field,
            problem,
        },
        Some(Problem::NotAnEntry { model }) => PricesFileError::NotAnEntry {
            path,
            line,
            column,
            model,
        },
        Some(Problem::Duplicate { model, field }) => PricesFileError::Duplicate {
            path,
            line,
            column,
            model,
            field,
        },
        Some(Problem::MixedThresholds {
            model,
            first,
            second,
        }) => PricesFileError::MixedThresholds {
            path,
            line,
            column,
            model,
            first,
            second,
        },
        Some(Problem::CacheWriteWithoutInput { model }) => {
            PricesFileError::CacheWriteWithoutInput {
                path,
                line,
                column,
                model,
            }
        }
    }
}

fn fail<E: de::Error>(slot: &RefCell<Option<Problem>>, problem: Problem) -> E {
    let err = E::custom(&problem);
    *slot.borrow_mut() = Some(problem);
    err
}

struct ModelsVisitor<'a> {
    problem: &'a RefCell<Option<Problem>>,
    table: &'a mut PriceTable,
}

impl<'de> Visitor<'de> for ModelsVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object keyed by model name")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = BTreeSet::new();
        while let Some(model) = map.next_key::<String>()? {
            if !seen.insert(model.clone()) {
                return Err(fail(
                    self.problem,
                    Problem::Duplicate { model, field: None },
                ));
            }
            if model == "sample_spec" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let entry = map.next_value_seed(EntrySeed {
                model: &model,
                problem: self.problem,
            })?;
            match entry {
                Some(price) => self.table.insert(model, price),
                None => self.table.note_skipped(model),
            }
        }
        Ok(())
    }
}

/// The four kinds of token price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Input,
    CachedInput,
    CacheWrite,
    Output,
}

impl Kind {
    const ALL: [(Kind, &'static str); 4] = [
        (Kind::Input, "input_cost_per_token"),
        (Kind::CachedInput, "cache_read_input_token_cost"),
        (Kind::CacheWrite, "cache_creation_input_token_cost"),
        (Kind::Output, "output_cost_per_token"),
    ];
}

/// What a price key names beside its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// The standard price.
    Base,
    /// The long-context price above this many thousand prompt tokens.
    Above(u64),
    /// A service tier's price (its index in [`TIER_SUFFIXES`]).
    Tier(usize),
}

/// The suffixes of the service tiers' keys, in the order of a
/// [`Variant::Tier`] index.
const TIER_SUFFIXES: [&str; 3] = ["_flex", "_batches", "_priority"];

/// Classifies a key of an entry: a base price, a long-context price with
/// its threshold in thousands of tokens, a service tier's price, or
/// something ctx ignores.
fn classify(key: &str) -> Option<(Kind, Variant)> {
    for (kind, name) in Kind::ALL {
        let Some(rest) = key.strip_prefix(name) else {
            continue;
        };
        if rest.is_empty() {
            return Some((kind, Variant::Base));
        }
        if let Some(tier) = TIER_SUFFIXES.iter().position(|s| rest == *s) {
            // A cache write has no tier price in LiteLLM's format.
            return (kind != Kind::CacheWrite).then_some((kind, Variant::Tier(tier)));
        }
        let thousands = rest
            .strip_prefix("_above_")
            .and_then(|r| r.strip_suffix("k_tokens"))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok())?;
        return Some((kind, Variant::Above(thousands)));
    }
    None
}

/// A service tier's rates from its keys: `None` without both an input
/// and an output price.
fn tier_rates(prices: [Option<Rate>; 4]) -> Option<Rates> {
    let [Some(input), cached, _, Some(output)] = prices else {
        return None;
    };
    Some(Rates {
        input,
        cached_input: cached.unwrap_or(input),
        cache_write: input,
        output,
    })
}

struct EntrySeed<'a> {
    model: &'a str,
    problem: &'a RefCell<Option<Problem>>,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = Option<Price>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Price>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = Option<Price>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of prices")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Price>, A::Error> {
        let mut base: [Option<Rate>; 4] = [None; 4];
        let mut long: [Option<Rate>; 4] = [None; 4];
        let mut tiers: [[Option<Rate>; 4]; 3] = [[None; 4]; 3];
        let mut threshold: Option<u64> = None;
        let mut seen = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let Some((kind, above)) = classify(&key) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            if !seen.insert(key.clone()) {
                return Err(fail(
                    self.problem,
                    Problem::Duplicate {
                        model: self.model.to_string(),
                        field: Some(key),
                    },
                ));
            }
            let Some(rate) = map.next_value_seed(PriceSeed {
                model: self.model,
                field: &key,
                problem: self.problem,
            })?
            else {
                continue;
            };
            let slot = kind as usize;
            match above {
                Variant::Base => base[slot] = Some(rate),
                Variant::Tier(tier) => tiers[tier][slot] = Some(rate),
                Variant::Above(thousands) => {
                    if let Some(first) = threshold.filter(|&t| t != thousands) {
                        return Err(fail(
                            self.problem,
                            Problem::MixedThresholds {
                                model: self.model.to_string(),
                                first,
                                second: thousands,
                            },
                        ));
                    }
                    threshold = Some(thousands);
                    long[slot] = Some(rate);
                }
            }
        }
        if base[Kind::Input as usize].is_none() && base[Kind::CacheWrite as usize].is_some() {
            return Err(fail(
                self.problem,
                Problem::CacheWriteWithoutInput {
                    model: self.model.to_string(),
                },
            ));
        }
        Ok(entry_price(base, threshold.map(|t| (long, t)), tiers))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<Price>, E> {
        Err(self.not_an_entry())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<Price>, E> {
        Err(self.not_an_entry())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<Price>, E> {
        Err(self.not_an_entry())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<Price>, E> {
        Err(self.not_an_entry())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Option<Price>, E> {
        Err(self.not_an_entry())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<Price>, E> {
        Err(self.not_an_entry())
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Option<Price>, A::Error> {
        Err(self.not_an_entry())
    }
}

/// An entry's price from the rates its keys gave, each array indexed by
/// [`Kind`]: `None` without both a base input and output price (not a
/// token price). `long`: the long-context rates and their threshold in
/// thousands of tokens, when the entry has any.
fn entry_price(
    base: [Option<Rate>; 4],
    long: Option<([Option<Rate>; 4], u64)>,
    tiers: [[Option<Rate>; 4]; 3],
) -> Option<Price> {
    let [Some(input), cached, write, Some(output)] = base else {
        return None;
    };
    let mut price = Price::flat(input, output, cached).with_cache_write(write);
    let [flex, batch, priority] = tiers.map(tier_rates);
    price.tiers = Tiers {
        flex,
        batch,
        priority,
    };
    if let Some((long, thousands)) = long {
        let b = price.base;
        let long_input = long[Kind::Input as usize].unwrap_or(b.input);
        price.long_context = Some(LongContext {
            above_prompt_tokens: thousands.saturating_mul(1000),
            rates: Rates {
                input: long_input,
                cached_input: long[Kind::CachedInput as usize].unwrap_or(b.cached_input),
                // Without a cache-write price, a write costs the input
                // price, of the long-context tier here.
                cache_write: long[Kind::CacheWrite as usize]
                    .or(write)
                    .unwrap_or(long_input),
                output: long[Kind::Output as usize].unwrap_or(b.output),
            },
        });
    }
    Some(price)
}

impl EntrySeed<'_> {
    fn not_an_entry<E: de::Error>(&self) -> E {
        fail(
            self.problem,
            Problem::NotAnEntry {
                model: self.model.to_string(),
            },
        )
    }
}

/// Reads one price value and judges it on the spot, so that serde_json
/// reports the position of the value itself. `null` reads as absent.
struct PriceSeed<'a> {
    model: &'a str,
    field: &'a str,
    problem: &'a RefCell<Option<Problem>>,
}

impl PriceSeed<'_> {
    fn judge<E: de::Error>(&self, rate: Result<Rate, PriceProblem>) -> Result<Option<Rate>, E> {
        rate.map(Some).map_err(|problem| {
            fail(
                self.problem,
                Problem::Price {
                    model: self.model.to_string(),
                    field: self.field.to_string(),
                    problem,
                },
            )
        })
    }
}

impl<'de> DeserializeSeed<'de> for PriceSeed<'_> {
    type Value = Option<Rate>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Rate>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PriceSeed<'_> {
    type Value = Option<Rate>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number of dollars per token")
    }
    fn visit_unit<E>(self) -> Result<Option<Rate>, E> {
        Ok(None)
    }
    fn visit_none<E>(self) -> Result<Option<Rate>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<Rate>, E> {
        self.judge(Rate::from_dollars_per_token(v as f64).map_err(PriceProblem::from))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<Rate>, E> {
        self.judge(Rate::from_dollars_per_token(v as f64).map_err(PriceProblem::from))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<Rate>, E> {
        self.judge(Rate::from_dollars_per_token(v).map_err(PriceProblem::from))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<Rate>, E> {
        self.judge(Err(PriceProblem::NotANumber("a boolean")))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Option<Rate>, E> {
        self.judge(Err(PriceProblem::NotANumber("a string")))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Option<Rate>, A::Error> {
        self.judge(Err(PriceProblem::NotANumber("an array")))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Option<Rate>, A::Error> {
        self.judge(Err(PriceProblem::NotANumber("an object")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PriceTable, PricesFileError> {
        parse_litellm(text, Path::new("prices.json"))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_the_three_prices_and_ignores_the_rest() {
        let t = parse(
            r#"{
  "sample_spec": {"input_cost_per_token": "documentation", "max_tokens": "text"},
  "gpt-4o": {
    "input_cost_per_token": 2.5e-06,
    "output_cost_per_token": 1e-05,
    "cache_read_input_token_cost": 1.25e-06,
    "input_cost_per_token_priority": 4.25e-06,
    "litellm_provider": "openai",
    "supported_regions": ["global"],
    "search_context_cost_per_query": {"low": 0.0}
  },
  "no-cache": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
  "dall-e-3": {"input_cost_per_pixel": 1e-08, "output_cost_per_token": 0.0},
  "embed": {"input_cost_per_token": 1e-07},
  "odd": {"input_cost_per_token": null, "output_cost_per_token": 1e-06}
}"#,
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.get("gpt-4o").unwrap().to_string(),
            "in 2.5 / cached 1.25 / out 10"
        );
        assert_eq!(
            t.get("no-cache").unwrap().to_string(),
            "in 1 / cached 1 / out 2",
            "no cache discount is assumed"
        );
        assert_eq!(t.skipped(), ["dall-e-3", "embed", "odd"]);
        assert!(t.get("sample_spec").is_none());
    }

    #[test]
    fn reads_long_context_tiers_with_fallbacks() {
        let t = parse(
            r#"{"gemini-2.5-pro": {
    "input_cost_per_token": 1.25e-06,
    "input_cost_per_token_above_200k_tokens": 2.5e-06,
    "output_cost_per_token": 1e-05,
    "output_cost_per_token_above_200k_tokens": 1.5e-05,
    "cache_read_input_token_cost": 1.25e-07,
    "cache_creation_input_token_cost_above_200k_tokens": 3.125e-06,
    "cache_creation_input_token_cost_above_1hr": 9.9,
    "input_cost_per_token_above_200k_tokens_priority": 9.9
}}"#,
        )
        .unwrap();
        assert_eq!(
            t.get("gemini-2.5-pro").unwrap().to_string(),
            "in 1.25 / cached 0.125 / out 10; above 200000 prompt tokens: in 2.5 / cached 0.125 / cache write 3.125 / out 15"
        );
    }

    #[test]
    fn reads_cache_write_prices_and_refuses_one_without_an_input_price() {
        let t = parse(
            r#"{"claude-sonnet-4-5": {
    "input_cost_per_token": 3e-06,
    "output_cost_per_token": 1.5e-05,
    "cache_read_input_token_cost": 3e-07,
    "cache_creation_input_token_cost": 3.75e-06
}}"#,
        )
        .unwrap();
        assert_eq!(
            t.get("claude-sonnet-4-5").unwrap().to_string(),
            "in 3 / cached 0.3 / cache write 3.75 / out 15"
        );
        let e = parse("{\"m\": {\n\"output_cost_per_token\": 1e-06,\n\"cache_creation_input_token_cost\": 2e-06\n}}")
            .unwrap_err();
        assert!(
            matches!(&e, PricesFileError::CacheWriteWithoutInput { model, line: 4, .. } if model == "m"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "prices.json:4:1: model \"m\": cache_creation_input_token_cost is given without input_cost_per_token"
        );
    }

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        let e = err("{\n  \"gpt-4o\": {\"input_cost_per_token\": 1e-06,}\n}");
        assert!(e.starts_with("prices.json:2:"), "{e}");
        assert!(e.contains("LiteLLM"), "{e}");
        for (text, line) in [("", 1), ("[1]", 1), ("{}\n{}", 2), ("{\"a\": {}} x", 1)] {
            match parse(text) {
                Err(PricesFileError::Syntax { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn negative_or_non_numeric_prices_name_model_and_field() {
        let e = parse("{\n\"m\": {\n\"output_cost_per_token\": -1e-06\n}}").unwrap_err();
        match &e {
            PricesFileError::InvalidPrice {
                line, model, field, ..
            } => {
                assert_eq!(
                    (*line, model.as_str(), field.as_str()),
                    (3, "m", "output_cost_per_token")
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "prices.json:3:31: model \"m\": output_cost_per_token is negative"
        );
        assert_eq!(
            err(r#"{"m": {"input_cost_per_token": "0.000001"}}"#),
            "prices.json:1:41: model \"m\": input_cost_per_token must be a number of dollars per token, found a string"
        );
        assert!(err(r#"{"m": {"cache_read_input_token_cost": [1]}}"#).contains("found an array"));
        assert!(err(r#"{"m": {"input_cost_per_token": -3}}"#).contains("is negative"));
        assert!(err(r#"{"m": {"input_cost_per_token": 1e300}}"#).contains("is too large"));
        assert!(
            err(r#"{"m": {"input_cost_per_token_above_128k_tokens": true}}"#)
                .contains("input_cost_per_token_above_128k_tokens must be a number")
        );
    }

    #[test]
    fn shape_errors_and_duplicates_are_located() {
        assert_eq!(
            err("{\"m\": 3}"),
            "prices.json:1:7: model \"m\": an entry must be an object of prices"
        );
        assert!(err("{\"m\": {}, \n\"m\": {}}").starts_with("prices.json:2:"));
        assert!(err("{\"m\": {}, \n\"m\": {}}").ends_with("model \"m\" appears twice"));
        assert!(
            err(r#"{"m": {"input_cost_per_token": 1e-06, "input_cost_per_token": 2e-06}}"#)
                .ends_with("model \"m\": input_cost_per_token appears twice")
        );
        assert!(
            err(r#"{"m": {"input_cost_per_token_above_128k_tokens": 1e-06, "output_cost_per_token_above_200k_tokens": 2e-06}}"#)
                .contains("different thresholds (128k and 200k tokens)")
        );
    }

    #[test]
    fn unknown_suffixes_are_ignored_not_misread() {
        assert_eq!(
            classify("input_cost_per_token"),
            Some((Kind::Input, Variant::Base))
        );
        assert_eq!(
            classify("output_cost_per_token_above_272k_tokens"),
            Some((Kind::Output, Variant::Above(272)))
        );
        assert_eq!(
            classify("input_cost_per_token_above_200k_tokens_priority"),
            None
        );
        assert_eq!(classify("input_cost_per_token_above_k_tokens"), None);
        assert_eq!(
            classify("input_cost_per_token_batches"),
            Some((Kind::Input, Variant::Tier(1)))
        );
        assert_eq!(
            classify("cache_read_input_token_cost_flex"),
            Some((Kind::CachedInput, Variant::Tier(0)))
        );
        assert_eq!(
            classify("output_cost_per_token_priority"),
            Some((Kind::Output, Variant::Tier(2)))
        );
        assert_eq!(classify("input_cost_per_token_flexible"), None);
        assert_eq!(classify("cache_creation_input_token_cost_flex"), None);
        assert_eq!(
            classify("cache_creation_input_token_cost"),
            Some((Kind::CacheWrite, Variant::Base))
        );
        assert_eq!(classify("cache_creation_input_token_cost_above_1hr"), None);
    }

    /// Each tier's input, output and cache-read keys make its rates; a
    /// tier without an output price is left out, and a call billed at a
    /// tier is priced at it.
    #[test]
    fn service_tier_prices_are_read_and_used() {
        let t = parse_litellm(
            r#"{"m": {"input_cost_per_token": 2e-06, "output_cost_per_token": 8e-06,
                "input_cost_per_token_flex": 1e-06, "output_cost_per_token_flex": 4e-06,
                "cache_read_input_token_cost_flex": 2.5e-07,
                "input_cost_per_token_batches": 1e-06,
                "input_cost_per_token_priority": 3.5e-06, "output_cost_per_token_priority": 1.4e-05}}"#,
            Path::new("p.json"),
        )
        .unwrap();
        let p = t.get("m").unwrap();
        let flex = p.tiers.flex.unwrap();
        assert_eq!(flex.input, Rate::parse("1").unwrap());
        assert_eq!(flex.cached_input, Rate::parse("0.25").unwrap());
        assert_eq!(flex.cache_write, flex.input);
        assert_eq!(flex.output, Rate::parse("4").unwrap());
        assert_eq!(p.tiers.batch, None, "no output price: no tier");
        let priority = p.tiers.priority.unwrap();
        assert_eq!(priority.cached_input, priority.input);
        let usage = |tier| crate::Usage {
            prompt_tokens: 1_000_000,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
            completion_tokens: 1_000_000,
            tier,
        };
        let usd = |s: &str| crate::Usd::parse(s).unwrap();
        assert_eq!(p.cost(&usage(None)), usd("10"));
        assert_eq!(p.cost(&usage(Some(ctx_model::ServiceTier::Flex))), usd("5"));
        assert_eq!(
            p.cost(&usage(Some(ctx_model::ServiceTier::Priority))),
            usd("17.5")
        );
        // No batch rates: a batch call is priced at the standard rates.
        assert_eq!(
            p.cost(&usage(Some(ctx_model::ServiceTier::Batch))),
            usd("10")
        );
    }

    #[test]
    fn a_missing_file_names_the_path() {
        let e = load_litellm(Path::new("/nonexistent/prices.json")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read prices file /nonexistent/prices.json")
        );
        assert!(
            std::error::Error::source(&e).is_some(),
            "the io error is kept"
        );
    }

    /// Seven entries of LiteLLM's real file, copied unchanged
    /// (fixtures/prices/README.md says from where): read on every run.
    #[test]
    fn reads_a_real_litellm_file() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/prices/litellm-model-prices.json");
        let t = load_litellm(&path).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.skipped(), ["1024-x-1024/dall-e-2", "aiml/dall-e-3"]);
        assert!(t.get("sample_spec").is_none());
        assert_eq!(
            t.get("ai21.j2-mid-v1").unwrap().to_string(),
            "in 12.5 / cached 12.5 / out 12.5"
        );
        assert_eq!(
            t.get("ai21.jamba-1-5-large-v1:0").unwrap().to_string(),
            "in 2 / cached 2 / out 8"
        );
        assert_eq!(
            t.get("amazon.nova-lite-v1:0").unwrap().to_string(),
            "in 0.06 / cached 0.06 / out 0.24"
        );
        assert_eq!(
            t.get("amazon.nova-2-lite-v1:0").unwrap().to_string(),
            "in 0.3 / cached 0.075 / out 2.5"
        );
    }

    /// LiteLLM's whole table, when a copy is at hand
    /// (`CTX_LITELLM_PRICES=path/to/model_prices_and_context_window.json`);
    /// `reads_a_real_litellm_file` covers the format on every run.
    #[test]
    fn reads_litellms_whole_table_when_present() {
        let Some(path) = std::env::var_os("CTX_LITELLM_PRICES") else {
            eprintln!(
                "skipped: set CTX_LITELLM_PRICES to LiteLLM's whole prices file to run this test"
            );
            return;
        };
        let t = load_litellm(Path::new(&path)).unwrap();
        assert!(t.len() > 1000, "{} priced", t.len());
        assert!(t.get("gpt-4o").is_some());
    }
}
