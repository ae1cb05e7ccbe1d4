//! What `ctx prices` shows: every known price, where it came from, and the
//! date of the shipped table, so nobody mistakes a snapshot for today's
//! figures.

use serde::Serialize;

use crate::money::Rate;
use crate::price::{LongContext, Price, Tiers};
use crate::table::{PriceBook, PriceSource};

/// One model's winning price. JSON keys in this order: `model`, `input`,
/// `cached_input`, `cache_write`, `output`, `long_context` (only when the
/// model has one), `tiers` (`flex`, `batch`, `priority`: only those the
/// price names), `source`; rates in US dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedPrice {
    /// The table key.
    pub model: String,
    /// Uncached prompt tokens.
    pub input: Rate,
    /// Cached prompt tokens.
    pub cached_input: Rate,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: Rate,
    /// Completion tokens.
    pub output: Rate,
    /// The long-context tier, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long_context: Option<LongContext>,
    /// The rates of the provider's other service tiers.
    #[serde(skip_serializing_if = "tiers_empty")]
    pub tiers: Tiers,
    /// Where the price came from (`default table of 2026-10-07`).
    pub source: String,
}

/// The date and origin of the shipped table, when the book holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefaultTableLabel {
    /// The day its figures were published.
    pub date: String,
    /// Where they were copied from.
    pub origin: String,
}

/// Every price a book knows. JSON keys: `prices`, `default_table`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PriceListing {
    /// Sorted by model.
    pub prices: Vec<ListedPrice>,
    /// The shipped table's label, `null` when the book does not hold it.
    pub default_table: Option<DefaultTableLabel>,
}

impl PriceListing {
    /// The listing of `book`: each key once, with the price that wins.
    pub fn of(book: &PriceBook) -> PriceListing {
        let prices = book
            .entries()
            .into_iter()
            .map(|m| {
                let Price {
                    base,
                    long_context,
                    tiers,
                } = *m.price;
                ListedPrice {
                    model: m.key.to_string(),
                    input: base.input,
                    cached_input: base.cached_input,
                    cache_write: base.cache_write,
                    output: base.output,
                    long_context,
                    tiers,
                    source: m.source.to_string(),
                }
            })
            .collect();
        let default_table = book.layers().iter().find_map(|t| match t.source() {
            PriceSource::Default { date, origin } => Some(DefaultTableLabel {
                date: date.clone(),
                origin: origin.clone(),
            }),
            _ => None,
        });
        PriceListing {
            prices,
            default_table,
        }
    }

    /// An aligned text table, with a footer giving the unit and the
    /// shipped table's date and origin.
    pub fn render_text(&self) -> String {
        let header = [
            "model",
            "input",
            "cached",
            "output",
            "long context",
            "other tiers",
            "source",
        ];
        let rows: Vec<[String; 7]> = self
            .prices
            .iter()
            .map(|p| {
                [
                    p.model.clone(),
                    p.input.to_string(),
                    p.cached_input.to_string(),
                    p.output.to_string(),
                    p.long_context
                        .map(|lc| {
                            let r = lc.rates;
                            format!(
                                ">{}: {} / {} / {}",
                                lc.above_prompt_tokens, r.input, r.cached_input, r.output
                            )
                        })
                        .unwrap_or_default(),
                    tiers_text(&p.tiers),
                    p.source.clone(),
                ]
            })
            .collect();
        let right = [false, true, true, true, false, false, false];
        let mut out = ctx_table::render(&header, &right, &rows);
        out.push_str(
            "US dollars per million tokens; long context: above N prompt tokens the whole call \
             costs input / cached / output.\n",
        );
        if let Some(label) = &self.default_table {
            out.push_str(&format!(
                "default table of {}: {}. Prices change: give current ones with --prices FILE, config.prices or --price.\n",
                label.date, label.origin
            ));
        }
        if self.prices.is_empty() {
            out.push_str("no prices known: every model is \"price unknown\".\n");
        }
        out
    }
}

fn tiers_empty(t: &Tiers) -> bool {
    *t == Tiers::default()
}

/// `batch 1.25 / 5; flex 1 / 4`: input and output of each tier named.
fn tiers_text(t: &Tiers) -> String {
    [
        ("batch", t.batch),
        ("flex", t.flex),
        ("priority", t.priority),
    ]
    .into_iter()
    .filter_map(|(name, r)| r.map(|r| format!("{name} {} / {}", r.input, r.output)))
    .collect::<Vec<_>>()
    .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flag::flag_table;

    #[test]
    fn lists_defaults_with_their_date_and_overrides_with_theirs() {
        let mut book = PriceBook::with_defaults();
        book.push(flag_table(["gpt-4o=2,8", "my-model=1,1"]).unwrap());
        let listing = PriceListing::of(&book);
        let gpt = listing.prices.iter().find(|p| p.model == "gpt-4o").unwrap();
        assert_eq!(
            (gpt.input.to_string(), gpt.source.as_str()),
            ("2".into(), "--price")
        );
        assert_eq!(listing.default_table.as_ref().unwrap().date, "2026-10-07");
        insta::assert_snapshot!(listing.render_text());
    }

    #[test]
    fn json_listing() {
        let mut book = PriceBook::new();
        book.push(crate::default_table().clone());
        let listing = PriceListing::of(&book);
        let mut small = listing.clone();
        small
            .prices
            .retain(|p| ["gpt-4o-mini", "gemini/gemini-2.5-pro"].contains(&p.model.as_str()));
        insta::assert_snapshot!(ctx_model::json_text(&small).unwrap());
    }

    #[test]
    fn an_empty_book_says_everything_is_unknown() {
        let listing = PriceListing::of(&PriceBook::new());
        assert!(listing.default_table.is_none());
        assert!(
            listing
                .render_text()
                .contains("every model is \"price unknown\"")
        );
    }
}
