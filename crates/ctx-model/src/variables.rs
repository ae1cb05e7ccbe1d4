//! Run-time inputs of a plan: the `variables:` it declares, the
//! `history:` block that fills `{{HISTORICAL_CONTEXT}}`, and the names and
//! classes they share with `ctx render`'s templates.
//!
//! A plan's task prompts are templates in `ctx render`'s language
//! (docs/prompts.md): `{{NAME}}` placeholders, each variable *trusted*
//! (inserted as is) or *untrusted* (neutralized, and only ever inside an
//! `<untrusted-content>` fence). The name rule, the class and the reserved
//! digest name live here, in the vocabulary crate, so that a plan's
//! declarations and a template's front matter are read with the same
//! words; ctx-prompt re-exports them where its templates always had them
//! (`ctx_prompt::template::{Class, is_valid_name, HISTORICAL_CONTEXT}`).
//! Filling the templates is ctx-prompt's (`ctx_prompt::plan_fill`): this
//! crate counts no tokens and parses no template.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The placeholder filled with the historical digest (`ctx render
/// --content-root`, a plan's `history:` block); untrusted unless
/// classified otherwise, and reserved in a plan's `variables:`.
pub const HISTORICAL_CONTEXT: &str = "HISTORICAL_CONTEXT";

/// Whether `name` is a valid placeholder name: `[A-Z][A-Z0-9_]*`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Who could have written a placeholder's value.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Written by whoever runs the pipeline; inserted as is.
    Trusted,
    /// Possibly influenced by a third party; fenced and neutralized. The
    /// default of a plan variable: a value nobody classified is treated
    /// as the riskier kind.
    #[default]
    Untrusted,
}

impl Class {
    /// `trusted` or `untrusted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Trusted => "trusted",
            Class::Untrusted => "untrusted",
        }
    }
}

/// How a variable's value is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VariableType {
    /// Any text.
    #[default]
    Text,
    /// Text that must parse as JSON; it is inserted as given, not
    /// re-serialized.
    Json,
}

impl VariableType {
    /// `text` or `json`.
    pub fn as_str(self) -> &'static str {
        match self {
            VariableType::Text => "text",
            VariableType::Json => "json",
        }
    }
}

/// One entry of a plan's `variables:`: a value given at run time with
/// `ctx run PLAN --var NAME=VALUE` (or `@FILE`, `@-`, `@@text`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Variable {
    /// The placeholder name, `[A-Z][A-Z0-9_]*`; `HISTORICAL_CONTEXT` is
    /// reserved.
    pub name: String,
    /// `text` (the default) or `json` (the value must parse as JSON).
    #[serde(default, rename = "type", skip_serializing_if = "is_default")]
    pub value_type: VariableType,
    /// `untrusted` (the default: neutralized, and only inside an
    /// `<untrusted-content>` fence) or `trusted` (inserted as is; a fence
    /// tag in it is refused).
    #[serde(default, skip_serializing_if = "is_default")]
    pub class: Class,
    /// Whether a run needs a value (true by default); a variable with a
    /// `default` never does.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub required: bool,
    /// The value when none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// For people; not sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The most tokens the value may have, counted with the tokenizer of
    /// each task that uses it (the largest count decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<usize>,
    /// Stored only as a hash, and shown as `[secret NAME]` in stored
    /// prompts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

fn default_true() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl Variable {
    /// Whether a run must be given a value: required and without default.
    pub fn needs_value(&self) -> bool {
        self.required && self.default.is_none()
    }
}

/// A plan's `history:` block: the settings of the digest that fills
/// `{{HISTORICAL_CONTEXT}}`, named as `ctx history`'s flags are
/// (`--content-root`, `--date`, `--prompt-budget`, `--share`,
/// `--max-words`, `--config`), which override them. Left out, each is
/// `ctx history`'s default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HistorySettings {
    /// The markdown archive, relative to the plan file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_root: Option<String>,
    /// The day the digest is for, `YYYY-MM-DD` (default: today).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// The prompt budget the digest takes its share of, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub prompt_budget: Option<usize>,
    /// The digest's share of `prompt_budget`, above 0 and at most 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// The most words the digest may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_words: Option<usize>,
    /// A history config file (TOML or YAML), relative to the plan file's
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_template_rule() {
        for ok in ["A", "RAW_JSON", "W2", "HISTORICAL_CONTEXT"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "a", "_A", "2X", "A-B", "A B", "Ä"] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_variable_written_with_its_defaults_reads_back_as_written() {
        let v: Variable = serde_json::from_str(r#"{"name": "RAW"}"#).unwrap();
        assert_eq!(v.class, Class::Untrusted);
        assert_eq!(v.value_type, VariableType::Text);
        assert!(v.required && v.needs_value());
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"name":"RAW"}"#);
        let v: Variable =
            serde_json::from_str(r#"{"name": "W", "class": "trusted", "default": "x"}"#).unwrap();
        assert!(!v.needs_value());
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"name":"W","class":"trusted","default":"x"}"#
        );
    }
}
