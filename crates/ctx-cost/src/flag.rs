//! `--price MODEL=IN,OUT[,CACHED]`: a price given on the command line.
//!
//! Prices are US dollars per million tokens as decimals (an exponent such
//! as `2.5e-1` is read exactly) with at most six decimal places: `--price gpt-4o=2.5,10,1.25`. The model name is
//! everything before the last `=` (names may hold `/` and `:`, as in
//! `ollama/llama3:8b`, but no price holds `=`).

use thiserror::Error;

use crate::money::{DecimalError, Rate};
use crate::price::Price;
use crate::table::{PriceSource, PriceTable};

/// A `--price` value that cannot be read. The message starts with the
/// value as given (`"m=1": expected 2 or 3 prices ...`) and names no flag:
/// a front end puts its own name for the setting in front (ctx's CLI
/// writes `--price "m=1": ...`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PriceFlagError {
    /// No `=` between model and prices.
    #[error(
        "{arg:?}: expected MODEL=IN,OUT[,CACHED] (US dollars per million tokens, e.g. gpt-4o=2.5,10,1.25)"
    )]
    Shape {
        /// The flag's value.
        arg: String,
    },
    /// Nothing before the `=`.
    #[error("{arg:?}: the model name is empty")]
    EmptyModel {
        /// The flag's value.
        arg: String,
    },
    /// Not two or three prices.
    #[error("{arg:?}: expected 2 or 3 prices (IN,OUT[,CACHED]), found {found}")]
    Count {
        /// The flag's value.
        arg: String,
        /// How many comma-separated values there were.
        found: usize,
    },
    /// One price is not a usable number.
    #[error("{arg:?}: the {which} price {value:?} {problem}")]
    Rate {
        /// The flag's value.
        arg: String,
        /// `input`, `output` or `cached input`.
        which: &'static str,
        /// The text given for it.
        value: String,
        /// What is wrong with it.
        problem: DecimalError,
    },
}

/// Parses one `--price` value into the model name and its price.
pub fn parse_price_flag(arg: &str) -> Result<(String, Price), PriceFlagError> {
    let Some((model, prices)) = arg.rsplit_once('=') else {
        return Err(PriceFlagError::Shape { arg: arg.into() });
    };
    let model = model.trim();
    if model.is_empty() {
        return Err(PriceFlagError::EmptyModel { arg: arg.into() });
    }
    let values: Vec<&str> = prices.split(',').collect();
    if !(2..=3).contains(&values.len()) {
        return Err(PriceFlagError::Count {
            arg: arg.into(),
            found: values.len(),
        });
    }
    let rate = |i: usize, which: &'static str| {
        Rate::parse(values[i]).map_err(|problem| PriceFlagError::Rate {
            arg: arg.into(),
            which,
            value: values[i].into(),
            problem,
        })
    };
    let input = rate(0, "input")?;
    let output = rate(1, "output")?;
    let cached = if values.len() == 3 {
        Some(rate(2, "cached input")?)
    } else {
        None
    };
    Ok((model.to_string(), Price::flat(input, output, cached)))
}

/// The table of every `--price` flag, labelled [`PriceSource::Flag`]; a
/// later flag for the same model wins.
pub fn flag_table<'a>(
    args: impl IntoIterator<Item = &'a str>,
) -> Result<PriceTable, PriceFlagError> {
    let mut table = PriceTable::new(PriceSource::Flag);
    for arg in args {
        let (model, price) = parse_price_flag(arg)?;
        table.insert(model, price);
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_two_or_three_prices() {
        let (m, p) = parse_price_flag("gpt-4o=2.5,10,1.25").unwrap();
        assert_eq!(
            (m.as_str(), p.to_string().as_str()),
            ("gpt-4o", "in 2.5 / cached 1.25 / out 10")
        );
        let (m, p) = parse_price_flag("ollama/llama3:8b=0,0").unwrap();
        assert_eq!(
            (m.as_str(), p.to_string().as_str()),
            ("ollama/llama3:8b", "in 0 / cached 0 / out 0")
        );
        let (m, _) = parse_price_flag("a=b=1,2").unwrap();
        assert_eq!(m, "a=b");
        let t = flag_table(["x=1,2", "x=3,4"]).unwrap();
        assert_eq!(t.get("x").unwrap().to_string(), "in 3 / cached 3 / out 4");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = |s: &str| parse_price_flag(s).unwrap_err().to_string();
        assert_eq!(
            e("gpt-4o"),
            "\"gpt-4o\": expected MODEL=IN,OUT[,CACHED] (US dollars per million tokens, e.g. gpt-4o=2.5,10,1.25)"
        );
        assert_eq!(e("=1,2"), "\"=1,2\": the model name is empty");
        assert_eq!(
            e("m=1"),
            "\"m=1\": expected 2 or 3 prices (IN,OUT[,CACHED]), found 1"
        );
        assert_eq!(
            e("m=1,2,3,4"),
            "\"m=1,2,3,4\": expected 2 or 3 prices (IN,OUT[,CACHED]), found 4"
        );
        assert_eq!(
            e("m=-1,2"),
            "\"m=-1,2\": the input price \"-1\" is negative"
        );
        assert_eq!(
            e("m=1,ten"),
            "\"m=1,ten\": the output price \"ten\" is not a number (write a decimal such as 2.5 or 1.5e-5)"
        );
        assert_eq!(
            e("m=1,2,"),
            "\"m=1,2,\": the cached input price \"\" is empty"
        );
        assert_eq!(
            e("m=1,2,0.0000001"),
            "\"m=1,2,0.0000001\": the cached input price \"0.0000001\" has more than 6 decimal places"
        );
    }
}
