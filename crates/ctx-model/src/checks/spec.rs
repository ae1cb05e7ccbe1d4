//! The check specification: what a plan author writes under `checks:`.
//!
//! Each check is a map with exactly one *kind key* (`contains`, `regex`,
//! `json_schema`, ...), an optional `message` and the options of that kind:
//!
//! ```yaml
//! checks:
//!   - contains: "10 x 20"
//!     case_sensitive: false
//!     message: The board must stay 10 cells wide and 20 high.
//!   - regex: "<canvas[^>]*>"
//!   - max_words: 600
//!   - json_schema: {type: object, required: [score]}
//!   - entities: true
//!   - judge: Does the CSS keep the board 10 cells wide?
//!     max_tokens: 200
//! ```
//!
//! # Why a flat map and not a tagged enum
//!
//! serde's externally tagged enums (`{contains: {text: ...}}`) would nest
//! the options one level down and make the common case verbose. The flat
//! map reads as a sentence (`contains: "10 x 20"`), so [`Check`] is read
//! through a private struct with every possible key (`deny_unknown_fields`,
//! so a typo is an error) and converted with `TryFrom`. Type errors are
//! therefore reported at the key (`checks[2].max_words: invalid type:
//! string "six hundred", expected u64`, with the path supplied by the
//! plan parser's `serde_path_to_error`), and the structural rules (exactly
//! one kind key, options only on the kinds they belong to) at the check
//! itself, with a message naming the keys.
//!
//! The JSON Schema is written by hand (a `oneOf` with one closed object per
//! kind) rather than derived, because a derived schema of the flat struct
//! would accept zero or two kind keys; the hand-written one rejects exactly
//! what deserialization rejects, and a test holds the two together (in
//! ctx-checks' `tests/spec_schema.rs`, which has a JSON Schema validator).

use std::borrow::Cow;
use std::fmt;
use std::path::PathBuf;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// One check as written in a plan: what to test and the message to show
/// when it fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawCheck", into = "RawCheck")]
pub struct Check {
    /// What the output is tested for.
    pub rule: Rule,
    /// Shown instead of the generated explanation when the check fails, in
    /// reports and in the retry feedback.
    pub message: Option<String>,
}

impl Check {
    /// A check with no message of its own.
    pub fn new(rule: Rule) -> Check {
        Check {
            rule,
            message: None,
        }
    }

    /// This check with `message` shown on failure.
    pub fn with_message(mut self, message: impl Into<String>) -> Check {
        self.message = Some(message.into());
        self
    }

    /// The kind of check.
    pub fn kind(&self) -> CheckKind {
        self.rule.kind()
    }
}

/// What a check tests, with the options of its kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// The output contains `text`.
    Contains {
        /// The literal text to find.
        text: String,
        /// Whether case must match; `true` unless the plan says otherwise.
        case_sensitive: bool,
    },
    /// The output does not contain `text`.
    NotContains {
        /// The literal text that must be absent.
        text: String,
        /// Whether case must match; `true` unless the plan says otherwise.
        case_sensitive: bool,
    },
    /// The output matches a Rust `regex` pattern somewhere.
    Regex {
        /// The pattern, in the `regex` crate's syntax.
        pattern: String,
    },
    /// The output has at most `limit` whitespace-separated words.
    MaxWords {
        /// The most words allowed.
        limit: u64,
    },
    /// The output has at most `limit` characters (Unicode scalar values).
    MaxChars {
        /// The most characters allowed.
        limit: u64,
    },
    /// The output, less one surrounding code fence, parses as JSON.
    Json,
    /// The output, less one surrounding code fence, is JSON valid against
    /// a JSON Schema.
    JsonSchema {
        /// The schema, inline or in a file.
        schema: SchemaSource,
    },
    /// Every entity the task names with high relevance is reflected in the
    /// output.
    Entities,
    /// A model judges the output against a rubric.
    Judge(JudgeSpec),
    /// The output does not repeat the run's canary token, the secret
    /// planted in every system prompt of the run (docs/security.md,
    /// "A canary for injected instructions").
    Canary,
}

impl Rule {
    /// The kind of this rule.
    pub fn kind(&self) -> CheckKind {
        match self {
            Rule::Contains { .. } => CheckKind::Contains,
            Rule::NotContains { .. } => CheckKind::NotContains,
            Rule::Regex { .. } => CheckKind::Regex,
            Rule::MaxWords { .. } => CheckKind::MaxWords,
            Rule::MaxChars { .. } => CheckKind::MaxChars,
            Rule::Json => CheckKind::Json,
            Rule::JsonSchema { .. } => CheckKind::JsonSchema,
            Rule::Entities => CheckKind::Entities,
            Rule::Judge(_) => CheckKind::Judge,
            Rule::Canary => CheckKind::Canary,
        }
    }
}

/// The options of a `judge` check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeSpec {
    /// The question or rubric the judge answers about the output.
    pub rubric: String,
    /// The model to ask instead of the run's own.
    pub judge_model: Option<String>,
    /// The most tokens the judge may answer with; [`DEFAULT_JUDGE_MAX_TOKENS`]
    /// when absent.
    pub max_tokens: Option<u32>,
}

/// The judge's answer cap when a check gives none: room for the fixed JSON
/// shape and a sentence or two of reason, not for an essay.
pub const DEFAULT_JUDGE_MAX_TOKENS: u32 = 256;

/// Where a `json_schema` check's schema comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaSource {
    /// Written in the plan (a map).
    Inline(serde_json::Value),
    /// A JSON file, relative to the plan's directory unless absolute.
    Path(PathBuf),
}

impl Serialize for SchemaSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SchemaSource::Inline(value) => value.serialize(serializer),
            SchemaSource::Path(path) => path.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for SchemaSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SourceVisitor;
        impl<'de> Visitor<'de> for SourceVisitor {
            type Value = SchemaSource;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an inline JSON Schema (a map) or the path of a JSON file holding one")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SchemaSource, E> {
                Ok(SchemaSource::Path(PathBuf::from(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SchemaSource, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(SchemaSource::Inline(value))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<SchemaSource, E> {
                Err(E::custom(format_args!(
                    "`json_schema: {v}` is not a schema; to require only valid JSON write `json: true`"
                )))
            }
        }
        deserializer.deserialize_any(SourceVisitor)
    }
}

/// The kinds of check, by the key that names them in a plan.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// `contains`
    Contains,
    /// `not_contains`
    NotContains,
    /// `regex`
    Regex,
    /// `max_words`
    MaxWords,
    /// `max_chars`
    MaxChars,
    /// `json`
    Json,
    /// `json_schema`
    JsonSchema,
    /// `entities`
    Entities,
    /// `judge`
    Judge,
    /// `canary`
    Canary,
}

impl CheckKind {
    /// Every kind, in the order the documentation lists them.
    pub const ALL: [CheckKind; 10] = [
        CheckKind::Contains,
        CheckKind::NotContains,
        CheckKind::Regex,
        CheckKind::MaxWords,
        CheckKind::MaxChars,
        CheckKind::Json,
        CheckKind::JsonSchema,
        CheckKind::Entities,
        CheckKind::Judge,
        CheckKind::Canary,
    ];

    /// The key that names this kind in a plan (`not_contains`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::Contains => "contains",
            CheckKind::NotContains => "not_contains",
            CheckKind::Regex => "regex",
            CheckKind::MaxWords => "max_words",
            CheckKind::MaxChars => "max_chars",
            CheckKind::Json => "json",
            CheckKind::JsonSchema => "json_schema",
            CheckKind::Entities => "entities",
            CheckKind::Judge => "judge",
            CheckKind::Canary => "canary",
        }
    }

    /// The option keys this kind accepts besides its own key and `message`.
    pub fn options(self) -> &'static [&'static str] {
        match self {
            CheckKind::Contains | CheckKind::NotContains => &["case_sensitive"],
            CheckKind::Judge => &["judge_model", "max_tokens"],
            _ => &[],
        }
    }
}

impl fmt::Display for CheckKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every key a check may have, as the plan spells it. Private: it only
/// carries the flat map between serde and [`Check`].
#[derive(Default, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a check: a map with one kind key such as `contains: TEXT`"
)]
struct RawCheck {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    not_contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_words: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_chars: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    json: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    json_schema: Option<SchemaSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entities: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    judge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    canary: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    case_sensitive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    judge_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// Why a check map is not a check. Serde turns it into the format's own
/// error, located at the check by the plan parser.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// No kind key at all.
    #[error("a check needs one kind key: one of {}", kind_list())]
    NoKind,
    /// More than one kind key.
    #[error("a check has exactly one kind key, this one has {}: split it into one check per kind", .0.join(", "))]
    SeveralKinds(Vec<&'static str>),
    /// An option given to a kind it does not belong to.
    #[error("`{option}` is not an option of `{kind}` checks{}", option_owner(.option))]
    ForeignOption {
        /// The option key.
        option: &'static str,
        /// The check's kind.
        kind: CheckKind,
    },
    /// `json: false`, `entities: false` or `canary: false`, which would
    /// check nothing.
    #[error("`{0}: false` checks nothing: leave the check out, or write `{0}: true`")]
    False(CheckKind),
    /// An empty text, pattern, rubric, path or model name.
    #[error("`{0}` is empty")]
    Empty(&'static str),
    /// `max_tokens: 0`, which leaves the judge no room to answer.
    #[error("`max_tokens` must be at least 1")]
    ZeroMaxTokens,
}

fn kind_list() -> String {
    CheckKind::ALL.map(CheckKind::as_str).join(", ")
}

fn option_owner(option: &str) -> String {
    let owners: Vec<&str> = CheckKind::ALL
        .into_iter()
        .filter(|k| k.options().contains(&option))
        .map(CheckKind::as_str)
        .collect();
    if owners.is_empty() {
        String::new()
    } else {
        format!(" (only of {})", owners.join(" and "))
    }
}

impl TryFrom<RawCheck> for Check {
    type Error = SpecError;

    fn try_from(raw: RawCheck) -> Result<Check, SpecError> {
        let kind = raw.kind()?;
        raw.check_options(kind)?;
        let message = raw.message.clone();
        let rule = raw.into_rule(kind)?;
        Ok(Check { rule, message })
    }
}

impl RawCheck {
    /// The one kind key given.
    fn kind(&self) -> Result<CheckKind, SpecError> {
        let mut present = Vec::new();
        let flags = [
            (CheckKind::Contains, self.contains.is_some()),
            (CheckKind::NotContains, self.not_contains.is_some()),
            (CheckKind::Regex, self.regex.is_some()),
            (CheckKind::MaxWords, self.max_words.is_some()),
            (CheckKind::MaxChars, self.max_chars.is_some()),
            (CheckKind::Json, self.json.is_some()),
            (CheckKind::JsonSchema, self.json_schema.is_some()),
            (CheckKind::Entities, self.entities.is_some()),
            (CheckKind::Judge, self.judge.is_some()),
            (CheckKind::Canary, self.canary.is_some()),
        ];
        for (kind, is_present) in flags {
            if is_present {
                present.push(kind);
            }
        }
        match present.as_slice() {
            [] => Err(SpecError::NoKind),
            [one] => Ok(*one),
            many => Err(SpecError::SeveralKinds(
                many.iter().map(|k| k.as_str()).collect(),
            )),
        }
    }

    /// Refuses an option of another kind than `kind`, an empty text,
    /// pattern, rubric, path or model name, and `max_tokens: 0`.
    fn check_options(&self, kind: CheckKind) -> Result<(), SpecError> {
        let options = [
            ("case_sensitive", self.case_sensitive.is_some()),
            ("judge_model", self.judge_model.is_some()),
            ("max_tokens", self.max_tokens.is_some()),
        ];
        for (option, given) in options {
            if given && !kind.options().contains(&option) {
                return Err(SpecError::ForeignOption { option, kind });
            }
        }
        let texts = [
            ("contains", self.contains.as_deref()),
            ("not_contains", self.not_contains.as_deref()),
            ("regex", self.regex.as_deref()),
            ("judge", self.judge.as_deref()),
            ("judge_model", self.judge_model.as_deref()),
        ];
        for (key, text) in texts {
            if text == Some("") {
                return Err(SpecError::Empty(key));
            }
        }
        if matches!(&self.json_schema, Some(SchemaSource::Path(p)) if p.as_os_str().is_empty()) {
            return Err(SpecError::Empty("json_schema"));
        }
        if self.max_tokens == Some(0) {
            return Err(SpecError::ZeroMaxTokens);
        }
        Ok(())
    }

    /// The rule of a check of `kind`, its options checked. `json: false`,
    /// `entities: false` and `canary: false` are refused: they would check
    /// nothing.
    fn into_rule(self, kind: CheckKind) -> Result<Rule, SpecError> {
        let case_sensitive = self.case_sensitive.unwrap_or(true);
        Ok(match kind {
            CheckKind::Contains => Rule::Contains {
                text: self.contains.unwrap_or_default(),
                case_sensitive,
            },
            CheckKind::NotContains => Rule::NotContains {
                text: self.not_contains.unwrap_or_default(),
                case_sensitive,
            },
            CheckKind::Regex => Rule::Regex {
                pattern: self.regex.unwrap_or_default(),
            },
            CheckKind::MaxWords => Rule::MaxWords {
                limit: self.max_words.unwrap_or_default(),
            },
            CheckKind::MaxChars => Rule::MaxChars {
                limit: self.max_chars.unwrap_or_default(),
            },
            CheckKind::Json => {
                if self.json == Some(false) {
                    return Err(SpecError::False(kind));
                }
                Rule::Json
            }
            CheckKind::JsonSchema => match self.json_schema {
                Some(schema) => Rule::JsonSchema { schema },
                None => return Err(SpecError::NoKind),
            },
            CheckKind::Entities => {
                if self.entities == Some(false) {
                    return Err(SpecError::False(kind));
                }
                Rule::Entities
            }
            CheckKind::Judge => Rule::Judge(JudgeSpec {
                rubric: self.judge.unwrap_or_default(),
                judge_model: self.judge_model,
                max_tokens: self.max_tokens,
            }),
            CheckKind::Canary => {
                if self.canary == Some(false) {
                    return Err(SpecError::False(kind));
                }
                Rule::Canary
            }
        })
    }
}

impl From<Check> for RawCheck {
    fn from(check: Check) -> RawCheck {
        let mut raw = RawCheck {
            message: check.message,
            ..RawCheck::default()
        };
        match check.rule {
            Rule::Contains {
                text,
                case_sensitive,
            } => {
                raw.contains = Some(text);
                raw.case_sensitive = (!case_sensitive).then_some(false);
            }
            Rule::NotContains {
                text,
                case_sensitive,
            } => {
                raw.not_contains = Some(text);
                raw.case_sensitive = (!case_sensitive).then_some(false);
            }
            Rule::Regex { pattern } => raw.regex = Some(pattern),
            Rule::MaxWords { limit } => raw.max_words = Some(limit),
            Rule::MaxChars { limit } => raw.max_chars = Some(limit),
            Rule::Json => raw.json = Some(true),
            Rule::JsonSchema { schema } => raw.json_schema = Some(schema),
            Rule::Entities => raw.entities = Some(true),
            Rule::Judge(judge) => {
                raw.judge = Some(judge.rubric);
                raw.judge_model = judge.judge_model;
                raw.max_tokens = judge.max_tokens;
            }
            Rule::Canary => raw.canary = Some(true),
        }
        raw
    }
}

impl schemars::JsonSchema for Check {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Check")
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Borrowed("ctx_checks::Check")
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut variants = text_variants();
        variants.extend(reading_variants());
        schemars::json_schema!({
            "description": "One check of a task's output: a map with exactly one kind key, an optional `message` and that kind's options.",
            "oneOf": variants
        })
    }
}

/// The schema of one kind of check: a closed object with the kind `key`
/// (its value as `value` says), `message`, and the kind's `extra` options.
fn kind_variant(
    key: &str,
    value: serde_json::Value,
    extra: &[(&str, serde_json::Value)],
    description: &str,
) -> serde_json::Value {
    let message = serde_json::json!({
        "type": "string",
        "description": "Shown instead of the generated explanation when the check fails, and in the retry feedback."
    });
    let mut properties = serde_json::Map::new();
    properties.insert(key.to_string(), value);
    properties.insert("message".to_string(), message);
    for (name, schema) in extra {
        properties.insert((*name).to_string(), schema.clone());
    }
    serde_json::json!({
        "type": "object",
        "description": description,
        "properties": properties,
        "required": [key],
        "additionalProperties": false
    })
}

/// The schemas of the kinds that read the output as text: a text it
/// holds or not, a pattern, a size.
fn text_variants() -> Vec<serde_json::Value> {
    let case_sensitive = serde_json::json!({
        "type": "boolean",
        "default": true,
        "description": "Whether case must match (default true)."
    });
    let text = serde_json::json!({"type": "string", "minLength": 1});
    let limit = serde_json::json!({"type": "integer", "minimum": 0});
    vec![
        kind_variant(
            "contains",
            text.clone(),
            &[("case_sensitive", case_sensitive.clone())],
            "The output contains this text.",
        ),
        kind_variant(
            "not_contains",
            text.clone(),
            &[("case_sensitive", case_sensitive)],
            "The output does not contain this text.",
        ),
        kind_variant(
            "regex",
            text,
            &[],
            "The output matches this pattern (Rust regex syntax) somewhere.",
        ),
        kind_variant(
            "max_words",
            limit.clone(),
            &[],
            "The output has at most this many whitespace-separated words.",
        ),
        kind_variant(
            "max_chars",
            limit,
            &[],
            "The output has at most this many characters.",
        ),
    ]
}

/// The schemas of the kinds that read what the output says: JSON, JSON
/// valid against a schema, the entities, a judge's verdict.
fn reading_variants() -> Vec<serde_json::Value> {
    let text = serde_json::json!({"type": "string", "minLength": 1});
    let yes = serde_json::json!({"const": true});
    vec![
        kind_variant(
            "json",
            yes.clone(),
            &[],
            "The output, less one surrounding code fence, parses as JSON.",
        ),
        kind_variant(
            "json_schema",
            serde_json::json!({
                "oneOf": [
                    {"type": "object", "description": "An inline JSON Schema."},
                    {"type": "string", "minLength": 1, "description": "The path of a JSON file holding the schema, relative to the plan's directory."}
                ]
            }),
            &[],
            "The output, less one surrounding code fence, is JSON valid against this schema.",
        ),
        kind_variant(
            "entities",
            yes.clone(),
            &[],
            "Every entity the task names with high relevance is reflected in the output.",
        ),
        kind_variant(
            "judge",
            text,
            &[
                (
                    "judge_model",
                    serde_json::json!({"type": "string", "minLength": 1, "description": "The model that judges, instead of the run's own."}),
                ),
                (
                    "max_tokens",
                    serde_json::json!({"type": "integer", "minimum": 1, "default": DEFAULT_JUDGE_MAX_TOKENS, "description": "The most tokens the judge may answer with."}),
                ),
            ],
            "A model judges the output against this rubric and answers pass or fail with a reason.",
        ),
        kind_variant(
            "canary",
            yes,
            &[],
            "The output does not repeat the run's canary token, planted in every system prompt of the run: a model that repeats it was taken over by injected instructions.",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Vec<Check>, String> {
        let de = &mut serde_json::Deserializer::from_str(json);
        serde_path_to_error::deserialize::<_, Vec<Check>>(de)
            .map_err(|e| format!("checks{}: {}", bracket(&e.path().to_string()), e.inner()))
    }

    /// serde_path_to_error prints `[2].regex`; a plan parser prefixes the
    /// field name, so `checks[2].regex`.
    fn bracket(path: &str) -> String {
        if path == "." {
            String::new()
        } else {
            path.to_string()
        }
    }

    #[test]
    fn every_kind_reads_as_written() {
        let checks = parse(
            r#"[{"contains": "10 x 20"},
                {"not_contains": "TODO", "case_sensitive": false, "message": "no TODOs"},
                {"regex": "<canvas[^>]*>"},
                {"max_words": 600}, {"max_chars": 4000},
                {"json": true},
                {"json_schema": {"type": "object", "required": ["score"]}},
                {"json_schema": "schemas/score.json"},
                {"entities": true},
                {"judge": "Is it 10 wide?", "judge_model": "small", "max_tokens": 100},
                {"canary": true}]"#,
        )
        .unwrap();
        let kinds: Vec<&str> = checks.iter().map(|c| c.kind().as_str()).collect();
        assert_eq!(
            kinds,
            [
                "contains",
                "not_contains",
                "regex",
                "max_words",
                "max_chars",
                "json",
                "json_schema",
                "json_schema",
                "entities",
                "judge",
                "canary"
            ]
        );
        assert_eq!(
            checks[0].rule,
            Rule::Contains {
                text: "10 x 20".into(),
                case_sensitive: true
            }
        );
        assert_eq!(
            checks[1],
            Check::new(Rule::NotContains {
                text: "TODO".into(),
                case_sensitive: false
            })
            .with_message("no TODOs")
        );
        assert_eq!(
            checks[7].rule,
            Rule::JsonSchema {
                schema: SchemaSource::Path("schemas/score.json".into())
            }
        );
        assert_eq!(
            checks[9].rule,
            Rule::Judge(JudgeSpec {
                rubric: "Is it 10 wide?".into(),
                judge_model: Some("small".into()),
                max_tokens: Some(100)
            })
        );
    }

    #[test]
    fn serializing_gives_back_what_the_plan_says() {
        let text = r#"[{"contains":"a","case_sensitive":false,"message":"m"},{"json":true},{"json_schema":{"type":"object"}},{"judge":"ok?","max_tokens":9}]"#;
        let checks = parse(text).unwrap();
        assert_eq!(serde_json::to_string(&checks).unwrap(), text);
        // The default option is not written out.
        let checks = parse(r#"[{"contains":"a","case_sensitive":true}]"#).unwrap();
        assert_eq!(
            serde_json::to_string(&checks).unwrap(),
            r#"[{"contains":"a"}]"#
        );
    }

    #[test]
    fn structural_mistakes_are_errors_at_the_check() {
        let cases = [
            (
                r#"[{"message": "x"}]"#,
                "checks[0]: a check needs one kind key",
            ),
            (
                r#"[{"json": true}, {"contains": "a", "regex": "b"}]"#,
                "checks[1]: a check has exactly one kind key, this one has contains, regex",
            ),
            (
                r#"[{"max_words": 3, "case_sensitive": true}]"#,
                "checks[0]: `case_sensitive` is not an option of `max_words` checks (only of contains and not_contains)",
            ),
            (
                r#"[{"regex": "a", "max_tokens": 3}]"#,
                "checks[0]: `max_tokens` is not an option of `regex` checks (only of judge)",
            ),
            (
                r#"[{"json": false}]"#,
                "checks[0]: `json: false` checks nothing",
            ),
            (
                r#"[{"not_contains": ""}]"#,
                "checks[0]: `not_contains` is empty",
            ),
            (
                r#"[{"canary": false}]"#,
                "checks[0]: `canary: false` checks nothing",
            ),
            (
                r#"[{"canary": true, "case_sensitive": false}]"#,
                "checks[0]: `case_sensitive` is not an option of `canary` checks (only of contains and not_contains)",
            ),
            (
                r#"[{"judge": "ok?", "max_tokens": 0}]"#,
                "checks[0]: `max_tokens` must be at least 1",
            ),
            (
                r#"[{"entities": false}]"#,
                "checks[0]: `entities: false` checks nothing",
            ),
        ];
        for (json, want) in cases {
            let err = parse(json).unwrap_err();
            assert!(err.starts_with(want), "{json}: {err}");
        }
    }

    #[test]
    fn type_errors_and_unknown_keys_name_the_field() {
        let cases = [
            (
                r#"[{"json": true}, {"json": true}, {"regex": 5}]"#,
                "checks[2].regex: invalid type: integer `5`, expected a string",
            ),
            (
                r#"[{"max_words": "many"}]"#,
                "checks[0].max_words: invalid type",
            ),
            (
                r#"[{"max_words": -1}]"#,
                "checks[0].max_words: invalid value",
            ),
            (
                r#"[{"contains": "a", "case_sensitiv": false}]"#,
                "checks[0].case_sensitiv: unknown field `case_sensitiv`",
            ),
            (
                r#"[{"json_schema": 3}]"#,
                "checks[0].json_schema: invalid type: integer `3`, expected an inline JSON Schema",
            ),
            (
                r#"[{"json_schema": true}]"#,
                "checks[0].json_schema: `json_schema: true` is not a schema",
            ),
            (
                r#"[{"matches": "x"}]"#,
                "checks[0].matches: unknown field `matches`, expected one of `contains`, `not_contains`",
            ),
            (
                r#"["contains"]"#,
                "checks[0]: invalid type: string \"contains\", expected a check: a map with one kind key such as `contains: TEXT`",
            ),
        ];
        for (json, want) in cases {
            let err = parse(json).unwrap_err();
            assert!(err.starts_with(want), "{json}: {err}");
        }
    }

    #[test]
    fn yaml_reads_the_same_as_json() {
        let yaml = "- contains: \"10 x 20\"\n  case_sensitive: false\n- json_schema: {type: object, required: [score]}\n- judge: Does the CSS keep the board 10 cells wide?\n  max_tokens: 200\n";
        let checks: Vec<Check> = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(checks.len(), 3);
        assert_eq!(
            checks[1].rule,
            Rule::JsonSchema {
                schema: SchemaSource::Inline(
                    serde_json::json!({"type": "object", "required": ["score"]})
                )
            }
        );
        let bad = "- json: true\n- regex: [1]\n";
        let de = serde_saphyr::from_str::<Vec<Check>>(bad);
        assert!(de.is_err());
    }
}
