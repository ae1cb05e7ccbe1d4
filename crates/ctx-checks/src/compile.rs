//! Compilation: every pattern and schema is built, and every schema file
//! read, before anything runs.
//!
//! A malformed regex or schema is the plan author's mistake, so it must be
//! reported by `ctx plan check` with the check's position, not discovered
//! after an hour of model calls. A [`CheckSet`] is immutable and `Sync`:
//! compile a task's checks once and evaluate every attempt's output (and
//! every eval variant's) against it.

use std::path::{Path, PathBuf};

use regex::{Regex, RegexBuilder};

use crate::spec::{Check, CheckKind, DEFAULT_JUDGE_MAX_TOKENS, Rule, SchemaSource};

/// The most memory one compiled pattern may take (the `regex` crate's own
/// default, stated here so that entity patterns and checks share it). A
/// pattern like `\w{1000}{1000}` is refused at compile time instead of
/// taking gigabytes.
pub(crate) const REGEX_SIZE_LIMIT: usize = 10 * (1 << 20);

/// The largest schema file read. Real schemas are kilobytes; the cap keeps
/// a path such as `/dev/zero` from reading forever.
pub const MAX_SCHEMA_BYTES: u64 = 16 << 20;

/// A list of checks, compiled and ready to evaluate outputs.
#[derive(Debug)]
pub struct CheckSet {
    pub(crate) checks: Vec<CompiledCheck>,
}

#[derive(Debug)]
pub(crate) struct CompiledCheck {
    pub(crate) kind: CheckKind,
    pub(crate) message: Option<String>,
    pub(crate) test: Test,
}

/// What evaluation runs for one check; the compiled form of a [`Rule`].
#[derive(Debug)]
pub(crate) enum Test {
    Contains {
        text: String,
        /// Present when case is ignored: the text as a case-insensitive
        /// literal pattern.
        caseless: Option<Regex>,
        negated: bool,
    },
    Regex {
        pattern: String,
        regex: Regex,
    },
    MaxWords(u64),
    MaxChars(u64),
    Json,
    JsonSchema {
        schema: serde_json::Value,
        validator: Box<jsonschema::Validator>,
    },
    Entities,
    Judge {
        rubric: String,
        model: Option<String>,
        max_tokens: u32,
    },
    Canary,
}

/// A check that cannot be compiled. Each variant names the check's
/// position (`index`, from 0) and the field at fault; [`field_path`]
/// spells them as `checks[2].regex`, and a plan parser prefixes the task.
///
/// [`field_path`]: CompileError::field_path
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The `regex` pattern does not compile.
    #[error("checks[{index}].regex: invalid pattern")]
    Regex {
        /// The check's position in its list.
        index: usize,
        /// The regex crate's error, with the position in the pattern.
        #[source]
        source: regex::Error,
    },
    /// A case-insensitive `contains` text too large to compile.
    #[error("checks[{index}].{field}: the text is too long to search without case")]
    Text {
        /// The check's position in its list.
        index: usize,
        /// `contains` or `not_contains`.
        field: &'static str,
        /// The regex crate's error.
        #[source]
        source: regex::Error,
    },
    /// The schema file cannot be read.
    #[error("checks[{index}].json_schema: cannot read {}", path.display())]
    SchemaRead {
        /// The check's position in its list.
        index: usize,
        /// The file, as resolved against the base directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The schema file is not JSON.
    #[error("checks[{index}].json_schema: {} is not JSON", path.display())]
    SchemaParse {
        /// The check's position in its list.
        index: usize,
        /// The file, as resolved against the base directory.
        path: PathBuf,
        /// The JSON error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The schema is not a valid JSON Schema (or references something that
    /// is not inside it).
    #[error("checks[{index}].json_schema: invalid JSON Schema{}", from_file(.path))]
    Schema {
        /// The check's position in its list.
        index: usize,
        /// The file it came from, when it came from one.
        path: Option<PathBuf>,
        /// The validator's error, naming the place in the schema.
        #[source]
        source: Box<jsonschema::ValidationError<'static>>,
    },
}

fn from_file(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!(" in {}", p.display()))
        .unwrap_or_default()
}

impl CompileError {
    /// The check's position in its list, from 0.
    pub fn index(&self) -> usize {
        match self {
            CompileError::Regex { index, .. }
            | CompileError::Text { index, .. }
            | CompileError::SchemaRead { index, .. }
            | CompileError::SchemaParse { index, .. }
            | CompileError::Schema { index, .. } => *index,
        }
    }

    /// The key at fault (`regex`, `json_schema`, `contains`).
    pub fn field(&self) -> &'static str {
        match self {
            CompileError::Regex { .. } => "regex",
            CompileError::Text { field, .. } => field,
            CompileError::SchemaRead { .. }
            | CompileError::SchemaParse { .. }
            | CompileError::Schema { .. } => "json_schema",
        }
    }

    /// `checks[INDEX].FIELD`, the path a plan error names (after the task).
    pub fn field_path(&self) -> String {
        format!("checks[{}].{}", self.index(), self.field())
    }
}

impl CheckSet {
    /// Compiles `checks`, reading schema files relative to `base_dir` (the
    /// plan's directory). Stops at the first check that does not compile.
    pub fn compile(checks: &[Check], base_dir: &Path) -> Result<CheckSet, CompileError> {
        let checks = checks
            .iter()
            .enumerate()
            .map(|(index, check)| compile_one(index, check, base_dir))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CheckSet { checks })
    }

    /// The number of checks.
    pub fn len(&self) -> usize {
        self.checks.len()
    }

    /// Whether there are no checks.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// The kinds of the checks, in order.
    pub fn kinds(&self) -> impl Iterator<Item = CheckKind> + '_ {
        self.checks.iter().map(|c| c.kind)
    }

    /// Whether a check needs a model to judge it: the caller must then
    /// have an engine able to run it, or refuse the plan before it runs.
    pub fn has_judge(&self) -> bool {
        self.checks.iter().any(|c| c.kind == CheckKind::Judge)
    }

    /// The judge models named by `judge_model`, in check order, so the
    /// caller can verify each can be reached before the run starts.
    pub fn judge_models(&self) -> impl Iterator<Item = &str> + '_ {
        self.checks.iter().filter_map(|c| match &c.test {
            Test::Judge {
                model: Some(model), ..
            } => Some(model.as_str()),
            _ => None,
        })
    }

    /// The schema of the first `json_schema` check (resolved from its file
    /// when it came from one): what an engine that supports structured
    /// output is asked to follow.
    pub fn response_schema(&self) -> Option<&serde_json::Value> {
        self.checks.iter().find_map(|c| match &c.test {
            Test::JsonSchema { schema, .. } => Some(schema),
            _ => None,
        })
    }
}

fn compile_one(
    index: usize,
    check: &Check,
    base_dir: &Path,
) -> Result<CompiledCheck, CompileError> {
    let test = match &check.rule {
        Rule::Contains {
            text,
            case_sensitive,
        }
        | Rule::NotContains {
            text,
            case_sensitive,
        } => {
            let negated = matches!(check.rule, Rule::NotContains { .. });
            let caseless = if *case_sensitive {
                None
            } else {
                Some(caseless_literal(text).map_err(|source| CompileError::Text {
                    index,
                    field: check.kind().as_str(),
                    source,
                })?)
            };
            Test::Contains {
                text: text.clone(),
                caseless,
                negated,
            }
        }
        Rule::Regex { pattern } => Test::Regex {
            pattern: pattern.clone(),
            regex: RegexBuilder::new(pattern)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|source| CompileError::Regex { index, source })?,
        },
        Rule::MaxWords { limit } => Test::MaxWords(*limit),
        Rule::MaxChars { limit } => Test::MaxChars(*limit),
        Rule::Json => Test::Json,
        Rule::JsonSchema { schema } => compile_schema(index, schema, base_dir)?,
        Rule::Entities => Test::Entities,
        Rule::Judge(judge) => Test::Judge {
            rubric: judge.rubric.clone(),
            model: judge.judge_model.clone(),
            max_tokens: judge.max_tokens.unwrap_or(DEFAULT_JUDGE_MAX_TOKENS),
        },
        Rule::Canary => Test::Canary,
    };
    Ok(CompiledCheck {
        kind: check.kind(),
        message: check.message.clone(),
        test,
    })
}

/// The test of check number `index`, a `json_schema` check: its schema
/// inline, or read from its file relative to `base_dir` (capped in size),
/// and compiled once.
fn compile_schema(
    index: usize,
    schema: &SchemaSource,
    base_dir: &Path,
) -> Result<Test, CompileError> {
    let (schema, path) = match schema {
        SchemaSource::Inline(value) => (value.clone(), None),
        SchemaSource::Path(relative) => {
            let path = base_dir.join(relative);
            let text = read_capped(&path).map_err(|source| CompileError::SchemaRead {
                index,
                path: path.clone(),
                source,
            })?;
            let value =
                serde_json::from_str(&text).map_err(|source| CompileError::SchemaParse {
                    index,
                    path: path.clone(),
                    source,
                })?;
            (value, Some(path))
        }
    };
    let validator = build_validator(&schema).map_err(|source| CompileError::Schema {
        index,
        path,
        source: Box::new(source),
    })?;
    Ok(Test::JsonSchema {
        schema,
        validator: Box::new(validator),
    })
}

/// The file's text, refusing more than [`MAX_SCHEMA_BYTES`] (as an
/// `InvalidData` error, like text that is not UTF-8).
fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_SCHEMA_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SCHEMA_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} MiB", MAX_SCHEMA_BYTES >> 20),
        ));
    }
    Ok(text)
}

/// `text` as a case-insensitive literal pattern: the regex engine's Unicode
/// simple case folding, searched in linear time over the output as it is,
/// instead of lower-casing a copy of both (which also gets `ß`/`ẞ` and
/// length-changing folds wrong at the edges).
fn caseless_literal(text: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(&regex::escape(text))
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
}

/// A validator for `schema`: the draft it names in `$schema` (2020-12 when
/// it names none), the metaschema checked, `pattern` keywords run by the
/// linear-time `regex` engine (an output cannot make a pattern backtrack
/// for hours), and no reference fetched from outside the schema: a check
/// never touches the network or files at evaluation time.
fn build_validator(
    schema: &serde_json::Value,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    jsonschema::options()
        .offline()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(json: &str) -> Result<CheckSet, CompileError> {
        let checks: Vec<Check> = serde_json::from_str(json).unwrap();
        CheckSet::compile(&checks, Path::new("/nonexistent-base"))
    }

    #[test]
    fn a_bad_regex_names_the_check_and_keeps_the_cause() {
        let err = compile(r#"[{"json": true}, {"regex": "<canvas[^>*"}]"#).unwrap_err();
        assert_eq!(err.field_path(), "checks[1].regex");
        assert_eq!(err.to_string(), "checks[1].regex: invalid pattern");
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("unclosed character class"), "{cause}");
    }

    #[test]
    fn a_pattern_too_big_to_compile_is_refused() {
        let err = compile(r#"[{"regex": "\\w{1000}{1000}"}]"#).unwrap_err();
        assert_eq!(err.field_path(), "checks[0].regex");
    }

    #[test]
    fn a_bad_schema_names_the_check() {
        let err = compile(r#"[{"json_schema": {"type": "objekt"}}]"#).unwrap_err();
        assert_eq!(err.field_path(), "checks[0].json_schema");
        assert!(std::error::Error::source(&err).is_some());
        // A reference out of the schema is not fetched.
        let err = compile(r#"[{"json_schema": {"$ref": "https://example.invalid/s.json"}}]"#)
            .unwrap_err();
        assert_eq!(err.field_path(), "checks[0].json_schema");
    }

    #[test]
    fn schema_paths_resolve_against_the_base_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("schemas")).unwrap();
        std::fs::write(
            dir.path().join("schemas/score.json"),
            r#"{"type": "object", "required": ["score"]}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("bad.json"), "{type: object}").unwrap();
        std::fs::write(dir.path().join("invalid.json"), r#"{"minimum": "x"}"#).unwrap();
        let checks: Vec<Check> =
            serde_json::from_str(r#"[{"json_schema": "schemas/score.json"}]"#).unwrap();
        let set = CheckSet::compile(&checks, dir.path()).unwrap();
        assert_eq!(
            set.response_schema(),
            Some(&serde_json::json!({"type": "object", "required": ["score"]}))
        );

        let read = |name: &str| {
            let checks: Vec<Check> =
                serde_json::from_str(&format!(r#"[{{"json_schema": "{name}"}}]"#)).unwrap();
            CheckSet::compile(&checks, dir.path()).unwrap_err()
        };
        let missing = read("missing.json");
        assert!(matches!(missing, CompileError::SchemaRead { .. }));
        assert_eq!(
            missing.to_string(),
            format!(
                "checks[0].json_schema: cannot read {}",
                dir.path().join("missing.json").display()
            )
        );
        assert!(matches!(read("bad.json"), CompileError::SchemaParse { .. }));
        // A directory, or a device that never ends, is a read error.
        assert!(matches!(read("schemas"), CompileError::SchemaRead { .. }));
        if Path::new("/dev/zero").exists() {
            let zero = read("/dev/zero");
            assert!(matches!(zero, CompileError::SchemaRead { .. }), "{zero}");
        }
        let invalid = read("invalid.json");
        assert!(matches!(invalid, CompileError::Schema { .. }));
        assert!(invalid.to_string().ends_with("invalid.json"), "{invalid}");
    }

    #[test]
    fn the_set_answers_what_the_runner_must_prepare() {
        let set = compile(
            r#"[{"contains": "a"}, {"judge": "ok?", "judge_model": "big"}, {"judge": "fine?"}]"#,
        )
        .unwrap();
        assert_eq!(set.len(), 3);
        assert!(set.has_judge());
        assert_eq!(set.judge_models().collect::<Vec<_>>(), ["big"]);
        assert_eq!(set.response_schema(), None);
        assert_eq!(
            set.kinds().collect::<Vec<_>>(),
            [CheckKind::Contains, CheckKind::Judge, CheckKind::Judge]
        );
        assert!(!compile(r#"[{"json": true}]"#).unwrap().has_judge());
    }

    #[test]
    fn compiled_sets_are_shareable_across_threads() {
        fn assert_sync<T: Send + Sync>() {}
        assert_sync::<CheckSet>();
    }
}
