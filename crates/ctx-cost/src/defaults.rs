//! The small dated price table shipped with ctx.
//!
//! `data/default_prices.json` holds a handful of common hosted models
//! (OpenAI, Anthropic, Google Gemini) with their price keys copied
//! verbatim from one LiteLLM release, plus the release and the date. It
//! is read with the same parser as any LiteLLM file, so the copy can be
//! checked against its source by eye or by `diff`.
//!
//! Prices change; this table is a dated snapshot, never a claim about
//! today. Listings show its date, and any source the user gives (a
//! current LiteLLM file, the plan, `--price`) wins over it.

use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::table::{PriceSource, PriceTable};

/// The shipped table's text.
const DEFAULT_PRICES: &str = include_str!("../data/default_prices.json");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultFile {
    date: String,
    source: String,
    models: serde_json::Value,
}

fn parse(text: &str) -> Result<PriceTable, String> {
    let file: DefaultFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let models = serde_json::to_string(&file.models).map_err(|e| e.to_string())?;
    crate::litellm::parse_with_source(
        &models,
        Path::new("crates/ctx-cost/data/default_prices.json"),
        PriceSource::Default {
            date: file.date,
            origin: file.source,
        },
    )
    .map_err(|e| e.to_string())
}

/// The shipped default table, parsed once per process. Its
/// [`PriceSource::Default`] carries the date and origin of the figures.
pub fn default_table() -> &'static PriceTable {
    static TABLE: OnceLock<PriceTable> = OnceLock::new();
    TABLE.get_or_init(|| match parse(DEFAULT_PRICES) {
        Ok(table) => table,
        // The embedded file is checked by this module's tests, so this
        // arm is unreachable in a tested build; an empty table labelled
        // with the problem keeps every model "price unknown" rather than
        // crashing.
        Err(problem) => PriceTable::new(PriceSource::Default {
            date: "unknown".into(),
            origin: format!("the shipped table could not be read: {problem}"),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_with_its_date_and_source() {
        parse(DEFAULT_PRICES).expect("data/default_prices.json must parse");
        let t = default_table();
        let PriceSource::Default { date, origin } = t.source() else {
            panic!("{:?}", t.source());
        };
        assert_eq!(date, "2026-10-07");
        assert!(origin.starts_with("LiteLLM 1.100.5"), "{origin}");
        assert!(
            t.skipped().is_empty(),
            "every shipped entry is a token price"
        );
        assert_eq!(t.len(), 24);
    }

    #[test]
    fn the_shipped_figures_are_the_published_ones() {
        let t = default_table();
        let shown = |m: &str| t.get(m).map(|p| p.to_string()).unwrap_or_default();
        assert_eq!(shown("gpt-4o"), "in 2.5 / cached 1.25 / out 10");
        assert_eq!(shown("gpt-4o-mini"), "in 0.15 / cached 0.075 / out 0.6");
        assert_eq!(shown("gpt-4.1"), "in 2 / cached 0.5 / out 8");
        assert_eq!(shown("o4-mini"), "in 1.1 / cached 0.275 / out 4.4");
        assert_eq!(shown("gpt-5-nano"), "in 0.05 / cached 0.005 / out 0.4");
        assert_eq!(shown("claude-haiku-4-5"), "in 1 / cached 0.1 / out 5");
        assert_eq!(
            shown("claude-sonnet-4-5"),
            "in 3 / cached 0.3 / out 15; above 200000 prompt tokens: in 6 / cached 0.6 / out 22.5"
        );
        assert_eq!(
            shown("gemini/gemini-2.5-flash"),
            "in 0.3 / cached 0.03 / out 2.5"
        );
    }

    #[test]
    fn a_broken_table_is_reported_not_panicked() {
        assert!(parse("{}").is_err());
        assert!(parse(r#"{"date": "d", "source": "s", "models": {"m": 1}}"#).is_err());
    }
}
