//! Arbitrary text through the LiteLLM prices-file parser, the `--price`
//! flag parser, the `--max-cost` parser and the reader of stored amounts
//! (`metadata.cost_usd`): nothing may panic; an error from the file parser
//! names a line and column inside the text; every price read prints and
//! parses back to the same exact rate, every budget and amount to the same
//! exact amount.

#![no_main]

use std::path::Path;

use ctx_cost::{PricesFileError, Rate, Usd, parse_litellm, parse_max_cost, parse_price_flag};
use libfuzzer_sys::fuzz_target;

fn round_trips(rate: Rate) {
    assert_eq!(Rate::parse(&rate.to_string()), Ok(rate));
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_litellm(text, Path::new("fuzz.json")) {
        Ok(table) => {
            for (_, price) in table.iter() {
                let mut all = vec![price.base];
                all.extend(price.long_context.map(|lc| lc.rates));
                for r in all {
                    round_trips(r.input);
                    round_trips(r.cached_input);
                    round_trips(r.output);
                }
            }
        }
        Err(PricesFileError::Read { .. }) => unreachable!("nothing is read from disk"),
        Err(e) => {
            let lines = text.split('\n').count();
            let (line, column) = match &e {
                PricesFileError::Syntax { line, column, .. }
                | PricesFileError::InvalidPrice { line, column, .. }
                | PricesFileError::NotAnEntry { line, column, .. }
                | PricesFileError::Duplicate { line, column, .. }
                | PricesFileError::CacheWriteWithoutInput { line, column, .. }
                | PricesFileError::MixedThresholds { line, column, .. } => (*line, *column),
                PricesFileError::Read { .. } => unreachable!(),
            };
            assert!(line <= lines, "{e}: line {line} of {lines}");
            let _ = column;
            assert!(e.to_string().starts_with("fuzz.json:"));
        }
    }
    if let Ok((model, price)) = parse_price_flag(text) {
        assert!(!model.is_empty());
        round_trips(price.base.input);
        round_trips(price.base.output);
        round_trips(price.base.cached_input);
    }
    if let Ok(budget) = parse_max_cost(text) {
        assert!(budget > Usd::ZERO);
        assert_eq!(Usd::parse(&budget.to_string()), Ok(budget));
    }
    if let Ok(amount) = serde_json::from_str::<Usd>(text) {
        // What is written reads back as itself (up to 15 significant
        // digits, the f64 a JSON number holds exactly).
        if amount.to_string().trim_start_matches(['0', '.']).len() <= 15 {
            let json = serde_json::to_string(&amount).unwrap_or_default();
            assert_eq!(
                serde_json::from_str::<Usd>(&json).ok(),
                Some(amount),
                "{json}"
            );
        }
    }
});
