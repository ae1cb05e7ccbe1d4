//! Which sources a digest is made of, where they are, what is taken from
//! each, and how much room each gets.
//!
//! [`HistoryConfig::default()`] is exactly the design of the weekly
//! analysis pipeline ctx grew out of, so its users need no configuration:
//!
//! | priority | key | label | path | select | target | floor | sections |
//! |---|---|---|---|---|---|---|---|
//! | 1 | `rolling` | Rolling Last 4 Weeks | `rolling/last-month.md` | fixed | 500 | 250 | whole body |
//! | 2 | `previous_week` | Previous Week Takeaways | `weekly` | before | 200 | 100 | `summary` line + Signal & Noise, Blind Spots, The Week Ahead |
//! | 3 | `monthly` | Month In Progress | `monthly/{YYYY}/{MM}.md` | period | 200 | 100 | Month Overview, Trends Observed, Key Takeaways |
//! | 4 | `yearly` | Yearly Narrative | `yearly/{YYYY}.md` | period | 500 | 150 | Narrative + Arc, else Year in Review, Biggest Trends, Predictions Review |
//!
//! A configuration file (TOML, or YAML when its name ends in `.yaml`/`.yml`)
//! may set any top-level field; a file that sets `sources` replaces the
//! whole list. Unknown fields are errors, so a typo never silently falls
//! back to a default.

use std::path::Path;

use ctx_tokens::Tokenizer;
use serde::{Deserialize, Serialize};

use crate::error::HistoryError;

/// How a source's file is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    /// `period` when the path has a `{YYYY}`/`{MM}`/`{DD}` placeholder,
    /// else `fixed`.
    #[default]
    Auto,
    /// The path names one file.
    Fixed,
    /// The path is a template; the file of the period containing the date
    /// is taken, else the latest earlier one that exists.
    Period,
    /// The path is a directory searched (recursively) for the latest
    /// report dated strictly before the date; `--previous-summary`
    /// overrides the search.
    Before,
}

/// One source of the digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Stable identifier, used in reports (`rolling`, `previous_week`).
    pub key: String,
    /// The heading the source gets in the digest (`### {label}`).
    pub label: String,
    /// Relative to the content root (a leading `{root}/` is allowed).
    pub path: String,
    /// How [`path`](Self::path) is resolved.
    #[serde(default)]
    pub select: Select,
    /// Word target the source is first compressed to.
    pub target_words: usize,
    /// Below this many words the source is dropped rather than cut (except
    /// for the highest-priority source still present).
    #[serde(default)]
    pub floor_words: usize,
    /// Lower numbers are kept longest; ties keep the list order.
    #[serde(default)]
    pub priority: Option<u32>,
    /// Alternative section lists: the first list of which at least one
    /// section exists is used; when none exists the whole body is used.
    /// Empty: the whole body.
    #[serde(default)]
    pub sections: Vec<Vec<String>>,
    /// A front-matter field put first, through [`summary_line`](Self::summary_line).
    #[serde(default)]
    pub summary_field: Option<String>,
    /// The line the summary field becomes; `{summary}` is replaced by the
    /// field's value.
    #[serde(default = "default_summary_line")]
    pub summary_line: String,
    /// Optional sources are reported as missing like any other; the flag
    /// only documents intent (the yearly file often does not exist).
    #[serde(default)]
    pub optional: bool,
}

fn default_summary_line() -> String {
    "{summary}".to_string()
}

/// The whole configuration of `ctx history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// Word cap of the whole digest (`--max-words`).
    pub max_words: usize,
    /// Total prompt budget in tokens (`--prompt-budget`).
    pub prompt_budget: usize,
    /// Share of the prompt budget the digest may use (`--share`).
    pub share: f64,
    /// The tokenizer that counts the digest (`--tokenizer`), by name in a
    /// config file (`cl100k_base`, any case); an unknown name is an error
    /// where the file is read, located like any other.
    #[serde(deserialize_with = "tokenizer_by_name")]
    pub tokenizer: Tokenizer,
    /// Heading level of named sections (2 = `##`).
    pub heading_level: u8,
    /// The sources, in priority order unless `priority` says otherwise.
    pub sources: Vec<SourceConfig>,
}

/// A setting [`HistoryConfig::validate`] refuses: the field's path
/// (`share`, `sources[2] (\`weekly\`).path`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct InvalidConfig {
    /// The field, as a path into the config.
    pub field: String,
    /// What is wrong with its value.
    pub reason: String,
}

/// The tokenizer a digest is counted with unless the config or the caller
/// names another: the one every `ctx` command that counts defaults to.
pub const DEFAULT_TOKENIZER: Tokenizer = Tokenizer::Cl100kBase;

/// Reads a tokenizer name as [`Tokenizer`]'s `FromStr` does (any case),
/// so a config file and a `--tokenizer` flag accept the same names.
fn tokenizer_by_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Tokenizer, D::Error> {
    let name = String::deserialize(d)?;
    name.parse().map_err(serde::de::Error::custom)
}

impl Default for HistoryConfig {
    fn default() -> Self {
        let s = |list: &[&str]| list.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        HistoryConfig {
            max_words: 1500,
            prompt_budget: 90_000,
            share: 0.15,
            tokenizer: DEFAULT_TOKENIZER,
            heading_level: 2,
            sources: vec![
                SourceConfig {
                    key: "rolling".into(),
                    label: "Rolling Last 4 Weeks".into(),
                    path: "rolling/last-month.md".into(),
                    select: Select::Fixed,
                    target_words: 500,
                    floor_words: 250,
                    priority: Some(1),
                    sections: vec![],
                    summary_field: None,
                    summary_line: default_summary_line(),
                    optional: false,
                },
                SourceConfig {
                    key: "previous_week".into(),
                    label: "Previous Week Takeaways".into(),
                    path: "weekly".into(),
                    select: Select::Before,
                    target_words: 200,
                    floor_words: 100,
                    priority: Some(2),
                    sections: vec![s(&["Signal & Noise", "Blind Spots", "The Week Ahead"])],
                    summary_field: Some("summary".into()),
                    summary_line: "- Prior weekly thesis: {summary}".into(),
                    optional: false,
                },
                SourceConfig {
                    key: "monthly".into(),
                    label: "Month In Progress".into(),
                    path: "monthly/{YYYY}/{MM}.md".into(),
                    select: Select::Period,
                    target_words: 200,
                    floor_words: 100,
                    priority: Some(3),
                    sections: vec![s(&["Month Overview", "Trends Observed", "Key Takeaways"])],
                    summary_field: None,
                    summary_line: default_summary_line(),
                    optional: false,
                },
                SourceConfig {
                    key: "yearly".into(),
                    label: "Yearly Narrative".into(),
                    path: "yearly/{YYYY}.md".into(),
                    select: Select::Period,
                    target_words: 500,
                    floor_words: 150,
                    priority: Some(4),
                    sections: vec![
                        s(&["Narrative", "Arc"]),
                        s(&["Year in Review", "Biggest Trends", "Predictions Review"]),
                    ],
                    summary_field: None,
                    summary_line: default_summary_line(),
                    optional: true,
                },
            ],
        }
    }
}

impl HistoryConfig {
    /// Parses a configuration; `path` decides the syntax (`.yaml`/`.yml`:
    /// YAML, anything else: TOML) and names the file in errors.
    ///
    /// ```
    /// use ctx_history::HistoryConfig;
    /// let c = HistoryConfig::parse("max_words = 800\n", "h.toml".as_ref()).unwrap();
    /// assert_eq!(c.max_words, 800);
    /// assert_eq!(c.sources.len(), 4); // defaults kept
    /// let e = HistoryConfig::parse("max_word = 800\n", "h.toml".as_ref()).unwrap_err();
    /// assert!(e.to_string().starts_with("h.toml:1:"));
    /// ```
    pub fn parse(text: &str, path: &Path) -> Result<HistoryConfig, HistoryError> {
        let yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
        let fail = |line: Option<usize>, message: String| HistoryError::Config {
            path: path.to_path_buf(),
            line,
            message,
        };
        let config: HistoryConfig = if yaml {
            if text.trim().is_empty() {
                HistoryConfig::default()
            } else {
                serde_saphyr::from_str(text).map_err(|e| {
                    let line = e.location().map(|l| l.line() as usize);
                    let msg = e.to_string();
                    fail(line, msg.lines().next().unwrap_or("").trim().to_string())
                })?
            }
        } else {
            toml::from_str(text).map_err(|e| {
                let line = e
                    .span()
                    .map(|s| crate::error::line_of(text.as_bytes(), s.start));
                fail(line, e.message().trim().to_string())
            })?
        };
        config.validate().map_err(|e| fail(None, e.to_string()))?;
        Ok(config)
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<HistoryConfig, HistoryError> {
        crate::error::require_file(path, "configuration")?;
        let bytes = std::fs::read(path).map_err(|e| HistoryError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        let text = crate::markdown::decode_utf8(&bytes, path)?;
        HistoryConfig::parse(text, path)
    }

    /// Checks what serde cannot: ranges and uniqueness. The error names
    /// the field.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let bad = |field: String, reason: String| Err(InvalidConfig { field, reason });
        if !(self.share.is_finite() && (0.0..=1.0).contains(&self.share)) {
            return bad(
                "share".into(),
                format!("must be between 0 and 1, got {}", self.share),
            );
        }
        if !(1..=6).contains(&self.heading_level) {
            return bad(
                "heading_level".into(),
                format!("must be 1 to 6, got {}", self.heading_level),
            );
        }
        for (i, s) in self.sources.iter().enumerate() {
            let at = format!("sources[{i}] (`{}`)", s.key);
            if s.key.trim().is_empty() {
                return bad(format!("sources[{i}].key"), "must not be empty".into());
            }
            if self.sources[..i].iter().any(|o| o.key == s.key) {
                return bad(format!("{at}.key"), "duplicate key".into());
            }
            if s.path.trim().is_empty() {
                return bad(format!("{at}.path"), "must not be empty".into());
            }
            if let Err(m) = crate::locate::check_template(&s.path) {
                return bad(format!("{at}.path"), m.to_string());
            }
            if s.select == Select::Before && crate::locate::has_placeholders(&s.path) {
                return bad(
                    format!("{at}.path"),
                    "a `before` source names a directory, without placeholders".into(),
                );
            }
            if s.select == Select::Period && !crate::locate::has_placeholders(&s.path) {
                return bad(
                    format!("{at}.path"),
                    "a `period` source needs {YYYY}, {MM} or {DD}".into(),
                );
            }
            if s.sections.iter().any(|alt| alt.is_empty()) {
                return bad(
                    format!("{at}.sections"),
                    "an alternative lists no section".into(),
                );
            }
        }
        Ok(())
    }

    /// The sources in priority order (explicit `priority` first by number,
    /// then list order).
    pub fn sources_by_priority(&self) -> Vec<&SourceConfig> {
        let mut v: Vec<(usize, &SourceConfig)> = self.sources.iter().enumerate().collect();
        v.sort_by_key(|(i, s)| (s.priority.unwrap_or(u32::MAX), *i));
        v.into_iter().map(|(_, s)| s).collect()
    }

    /// `floor(prompt_budget × share)`, the digest's token cap.
    pub fn token_cap(&self) -> usize {
        token_cap(self.prompt_budget, self.share)
    }
}

/// `floor(prompt_budget × share)`: the token cap a digest gets inside a
/// prompt budget. `share` is clamped to 0–1, and the product is rounded to
/// 9 decimal places before the floor so that 90,000 × 0.15 is 13,500 and
/// not 13,499 through binary floating point.
///
/// ```
/// assert_eq!(ctx_history::token_cap(90_000, 0.15), 13_500);
/// assert_eq!(ctx_history::token_cap(500, 0.15), 75);
/// assert_eq!(ctx_history::token_cap(1000, 0.07), 70);
/// ```
pub fn token_cap(prompt_budget: usize, share: f64) -> usize {
    let share = if share.is_finite() {
        share.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let product = prompt_budget as f64 * share;
    let rounded = (product * 1e9).round() / 1e9;
    (rounded.floor() as usize).min(prompt_budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_through_toml_and_yaml() {
        let d = HistoryConfig::default();
        let t = toml::to_string(&d).unwrap();
        assert_eq!(HistoryConfig::parse(&t, Path::new("c.toml")).unwrap(), d);
        let y = "max_words: 900\nsources:\n  - key: r\n    label: R\n    path: rolling.md\n    target_words: 10\n";
        let c = HistoryConfig::parse(y, Path::new("c.yaml")).unwrap();
        assert_eq!(c.max_words, 900);
        assert_eq!(c.sources.len(), 1);
        assert_eq!(c.token_cap(), 13_500);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = HistoryConfig::parse("share = 2.0\n", Path::new("c.toml")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.toml: share: must be between 0 and 1, got 2"
        );
        let e = HistoryConfig::parse("a: 1\nmax_wordz: 2\n", Path::new("c.yml")).unwrap_err();
        assert!(e.to_string().starts_with("c.yml:"), "{e}");
        let e = HistoryConfig::parse("tokenizer = \"gpt9\"\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("unknown tokenizer"));
    }

    #[test]
    fn priority_orders_sources() {
        let mut c = HistoryConfig::default();
        c.sources[0].priority = Some(9);
        let keys: Vec<_> = c
            .sources_by_priority()
            .iter()
            .map(|s| s.key.clone())
            .collect();
        assert_eq!(keys, ["previous_week", "monthly", "yearly", "rolling"]);
    }
}
