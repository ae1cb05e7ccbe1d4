//! The `config.prices` map a plan embeds, as a price table. The types
//! ([`PlanPrices`], [`PlanPrice`]) are the plan model's vocabulary
//! (`ctx_model::money`), re-exported here at their old paths.
//!
//! ```yaml
//! config:
//!   prices:
//!     my-finetune:            # model name as the tasks write it
//!       input: 3              # US dollars per million prompt tokens
//!       output: 12            # ... per million completion tokens
//!       cached_input: 1.5     # ... per million cached prompt tokens (optional)
//! ```
//!
//! Values are numbers of dollars per million tokens with at most six
//! decimal places (the unit ctx holds exactly); a negative value, a string
//! or a seventh decimal place is a parse error that names the field.
//! Without `cached_input`, cached tokens cost the input price.

pub use ctx_model::money::{PlanPrice, PlanPrices};

use crate::price::Price;
use crate::table::{PriceSource, PriceTable};

impl From<PlanPrice> for Price {
    fn from(p: PlanPrice) -> Price {
        Price::flat(p.input, p.output, p.cached_input).with_cache_write(p.cache_write)
    }
}

/// The table of a plan's `config.prices`, labelled [`PriceSource::Plan`].
pub fn plan_table(prices: &PlanPrices) -> PriceTable {
    let mut table = PriceTable::new(PriceSource::Plan);
    for (model, price) in prices {
        table.insert(model.clone(), Price::from(*price));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_prices_in_dollars_per_million() {
        let prices: PlanPrices = serde_json::from_str(
            r#"{"my-model": {"input": 3, "output": 12.5, "cached_input": 0.3}, "b": {"input": 0, "output": 0}}"#,
        )
        .unwrap();
        let t = plan_table(&prices);
        assert_eq!(
            t.get("my-model").unwrap().to_string(),
            "in 3 / cached 0.3 / out 12.5"
        );
        assert_eq!(t.get("b").unwrap().to_string(), "in 0 / cached 0 / out 0");
        assert_eq!(t.source(), &PriceSource::Plan);
        let back = serde_json::to_string(&prices).unwrap();
        assert_eq!(
            back,
            r#"{"b":{"input":0.0,"output":0.0},"my-model":{"input":3.0,"output":12.5,"cached_input":0.3}}"#
        );
    }

    #[test]
    fn refuses_bad_prices_naming_the_field() {
        let bad = |text: &str| {
            serde_json::from_str::<PlanPrices>(text)
                .unwrap_err()
                .to_string()
        };
        assert!(bad(r#"{"m": {"input": -1, "output": 1}}"#).contains("is negative"));
        assert!(bad(r#"{"m": {"input": "1", "output": 1}}"#).contains("dollars per million"));
        assert!(bad(r#"{"m": {"input": 1}}"#).contains("missing field `output`"));
        assert!(
            bad(r#"{"m": {"input": 1, "output": 1, "currency": "EUR"}}"#).contains("unknown field")
        );
        assert!(
            bad(r#"{"m": {"input": 0.0000001, "output": 1}}"#)
                .contains("more than 6 decimal places")
        );
    }

    /// Plans are mostly YAML: the same type reads there, integers and
    /// floats alike, and a bad value is refused.
    #[test]
    fn reads_from_yaml_too() {
        let prices: PlanPrices = serde_saphyr::from_str(
            "my-model:\n  input: 3\n  output: 12.5\n  cached_input: 0.075\n",
        )
        .unwrap();
        assert_eq!(
            plan_table(&prices).get("my-model").unwrap().to_string(),
            "in 3 / cached 0.075 / out 12.5"
        );
        let err = serde_saphyr::from_str::<PlanPrices>("m:\n  input: -2\n  output: 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is negative"), "{err}");
        assert!(serde_saphyr::from_str::<PlanPrices>("m:\n  input: two\n  output: 1\n").is_err());
    }

    #[test]
    fn has_a_json_schema_with_non_negative_numbers() {
        let schema = schemars::schema_for!(PlanPrices);
        let text = serde_json::to_string(&schema).unwrap();
        assert!(text.contains(r#""minimum":0"#), "{text}");
        assert!(text.contains("UsdPerMillionTokens"), "{text}");
        assert!(text.contains(r#""required":["input","output"]"#), "{text}");
    }
}
