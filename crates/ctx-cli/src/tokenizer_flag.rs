//! `--tokenizer NAME`: one parser for every command that counts tokens.
//!
//! The names are `ctx_tokens::ALL_TOKENIZERS`, offered to clap as its
//! possible values (so `--help`, completions and the "invalid value" error
//! list them from the one list, never a copy), matched in any case as
//! `Tokenizer`'s `FromStr` matches them in plans and history configs.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use ctx_tokens::{ALL_TOKENIZERS, Tokenizer};

/// The value parser of `--tokenizer`.
pub fn parser() -> impl TypedValueParser<Value = Tokenizer> {
    PossibleValuesParser::new(ALL_TOKENIZERS.map(|t| clap::builder::PossibleValue::new(t.as_str())))
        .try_map(|name| name.parse::<Tokenizer>())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[arg(long, value_parser = parser(), ignore_case = true)]
        tokenizer: Option<Tokenizer>,
    }

    #[test]
    fn every_known_name_in_any_case_and_nothing_else() {
        for t in ALL_TOKENIZERS {
            let upper = t.as_str().to_uppercase();
            let cli = Cli::try_parse_from(["x", "--tokenizer", &upper]).unwrap();
            assert_eq!(cli.tokenizer, Some(t));
        }
        let e = Cli::try_parse_from(["x", "--tokenizer", "gpt2"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("invalid value 'gpt2'"), "{e}");
        assert!(e.contains("cl100k_base"), "{e}");
    }
}
