//! Arbitrary text through the LiteLLM prices-file parser and the `--price`
//! flag parser: nothing may panic; an error from the file parser names a
//! line and column inside the text; every price read prints and parses
//! back to the same exact rate.

#![no_main]

use std::path::Path;

use ctx_cost::{PricesFileError, Rate, parse_litellm, parse_price_flag};
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
});
