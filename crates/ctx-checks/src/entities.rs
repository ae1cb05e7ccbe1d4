//! Entities an `entities` check looks for, compiled once per plan.
//!
//! The caller (the executor) passes the entities a task names with high
//! relevance; this crate does not read plans, so the plan model can later
//! depend on this crate for the check types without a cycle.
//!
//! # When an entity is reflected
//!
//! * With a `check:` pattern: when the pattern (Rust `regex` syntax)
//!   matches somewhere in the output. For entities whose value is prose
//!   ("a classic Nintendo scoring table") no literal search can work, so
//!   the author says what to look for.
//! * Otherwise, when **each** of its values (its `grounded_value`, or every
//!   one of its `grounded_values`) appears in the output, ignoring case and
//!   treating every run of whitespace as one space: `10 x 20` is reflected
//!   by `10  X\n20`. Each value is turned into a pattern (its words,
//!   escaped, joined by `\s+`, case-insensitive), so the search is the
//!   regex engine's linear-time scan over the output as it is, with no
//!   lower-cased or re-spaced copy of a 100 MB output.
//! * An entity with neither (a bare name) is reflected when its name
//!   appears, by the same rule: the name is then all the plan says.
//!
//! Matching is by substring, as for `contains`: `10` is found in `100`.
//! Where that is too loose, give the entity a `check:` pattern with `\b`.

use regex::{Regex, RegexBuilder};

use crate::compile::REGEX_SIZE_LIMIT;

/// One entity to find in an output, with its search compiled.
#[derive(Debug, Clone)]
pub struct ExpectedEntity {
    name: String,
    searches: Vec<Search>,
}

#[derive(Debug, Clone)]
struct Search {
    /// What the message says was looked for: the value, or `/pattern/`.
    shown: String,
    regex: Regex,
}

/// An entity's `check:` pattern does not compile.
#[derive(Debug, thiserror::Error)]
#[error("entity {name:?}: invalid `check` pattern")]
pub struct EntityPatternError {
    /// The entity's name.
    pub name: String,
    /// The regex crate's error, with the position in the pattern.
    #[source]
    pub source: regex::Error,
}

impl ExpectedEntity {
    /// An entity reflected when each of `values` appears (ignoring case and
    /// spacing), or, when `pattern` is given, when it matches. With neither,
    /// the name itself is looked for. Values that are empty or only
    /// whitespace are ignored.
    pub fn new(
        name: impl Into<String>,
        values: &[String],
        pattern: Option<&str>,
    ) -> Result<ExpectedEntity, EntityPatternError> {
        let name = name.into();
        let searches = if let Some(pattern) = pattern {
            let regex = RegexBuilder::new(pattern)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|source| EntityPatternError {
                    name: name.clone(),
                    source,
                })?;
            vec![Search {
                shown: format!("/{pattern}/"),
                regex,
            }]
        } else {
            let mut searches: Vec<Search> = values.iter().filter_map(|v| literal(v)).collect();
            if searches.is_empty() {
                searches.extend(literal(&name));
            }
            searches
        };
        Ok(ExpectedEntity { name, searches })
    }

    /// The entity's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the output lacks for this entity to be reflected: the values or
    /// pattern not found, in the order given. Empty when it is reflected.
    pub fn missing(&self, output: &str) -> Vec<&str> {
        self.searches
            .iter()
            .filter(|s| !s.regex.is_match(output))
            .map(|s| s.shown.as_str())
            .collect()
    }
}

/// The case-insensitive, whitespace-normalised search for one value, or
/// `None` for a value with no words. A pattern of escaped literals joined
/// by `\s+` always compiles; should a huge value exceed the size limit, the
/// value is not searched rather than the run failing.
fn literal(value: &str) -> Option<Search> {
    let words: Vec<String> = value.split_whitespace().map(regex::escape).collect();
    if words.is_empty() {
        return None;
    }
    let regex = RegexBuilder::new(&words.join(r"\s+"))
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .ok()?;
    Some(Search {
        shown: crate::text::quote(value),
        regex,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(name: &str, values: &[&str], pattern: Option<&str>) -> ExpectedEntity {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        ExpectedEntity::new(name, &values, pattern).unwrap()
    }

    #[test]
    fn a_value_is_found_ignoring_case_and_spacing() {
        let board = entity("Board", &["10 x 20"], None);
        assert!(board.missing("a 10 X\n  20 grid").is_empty());
        assert!(board.missing("A 10\u{a0}x 20 grid").is_empty());
        assert_eq!(board.missing("a 10x20 grid"), ["\"10 x 20\""]);
    }

    #[test]
    fn every_grounded_value_must_appear() {
        let scoring = entity("Scoring", &["40", "100", " ", "1200"], None);
        assert!(scoring.missing("40, 100, 300 and 1200 points").is_empty());
        assert_eq!(scoring.missing("40 and 100 points"), ["\"1200\""]);
    }

    #[test]
    fn a_pattern_replaces_the_values() {
        let e = entity("Style", &["retro arcade look"], Some(r"(?i)\bretro\b"));
        assert!(e.missing("A RETRO theme").is_empty());
        assert_eq!(e.missing("a retroactive theme"), [r"/(?i)\bretro\b/"]);
    }

    #[test]
    fn a_bare_name_is_looked_for_itself() {
        let e = entity("Hold Piece", &[], None);
        assert!(e.missing("supports the hold   piece").is_empty());
        assert_eq!(e.missing("no such thing"), ["\"Hold Piece\""]);
    }

    #[test]
    fn regex_metacharacters_in_values_are_literal() {
        let e = entity("Price", &["$1.50 (net)"], None);
        assert!(e.missing("costs $1.50 (NET)").is_empty());
        assert!(!e.missing("costs $1x50 (net)").is_empty());
    }

    #[test]
    fn an_invalid_pattern_names_the_entity() {
        let err = ExpectedEntity::new("Board", &[], Some("(unclosed")).unwrap_err();
        assert_eq!(err.to_string(), "entity \"Board\": invalid `check` pattern");
        assert!(std::error::Error::source(&err).is_some());
    }
}
