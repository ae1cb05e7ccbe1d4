//! Reading plans from JSON or YAML, with errors that point at the spot.
//!
//! Both formats deserialize straight into the typed [`Plan`] (never into an
//! untyped tree first), so every rule the types carry — required fields,
//! types, enum spellings — is enforced by the parser itself and reported
//! with a line, a column and, where serde knows it, the field path
//! (`sub_tasks[2].dependancies`). Field paths come from
//! `serde_path_to_error`, which wraps either deserializer.
//!
//! ## Unknown fields
//!
//! A key the format does not have (`dependancies`) does not stop the
//! reading: `serde_ignored` collects every such key with its path while the
//! rest of the plan is read, so `ctx plan check` can report all of them
//! beside the validation problems ([`parse_plan_with_unknown_fields`],
//! [`ParsedPlan::problems`](crate::ParsedPlan::problems)). [`parse_plan`]
//! stays strict: the first unknown key is a located [`PlanError::Syntax`].
//! Either way a plan with an unknown key is never run, since a typo such as
//! `dependancies` would otherwise silently drop edges of the DAG. `params`
//! is free-form and has no unknown keys.
//!
//! ## Why the version wins over every other error
//!
//! A plan written for a later format may carry fields this build has never
//! heard of. Reporting the first of them as an unknown field would hide the
//! real problem. So when a plan fails to parse, [`parse_plan`] reads
//! `schema_version` alone (ignoring every other key) and reports
//! [`PlanError::UnsupportedVersion`] when it is not [`SCHEMA_VERSION`];
//! a plan that parses is checked the same way. A valid plan is parsed once.
//!
//! ## Text in YAML
//!
//! serde-saphyr stores an unquoted YAML scalar in a text field exactly as
//! written, so `grounded_value: 10`, `id: 1`, `dependencies: [1, 2]` and
//! `grounded_value: 1.50` read as the strings `"10"`, `"1"`, `"2"` and
//! `"1.50"`. JSON has real types, and a number where text is expected is an
//! error there (`"id": 1` must be `"id": "1"`).
//!
//! ## Limits
//!
//! Input over [`MAX_PLAN_BYTES`] is refused before parsing. YAML nesting is
//! capped at [`MAX_YAML_DEPTH`] and alias expansion at
//! [`MAX_ALIAS_REPLAYED_EVENTS`] (YAML bombs); JSON nesting by serde_json's
//! recursion limit (128).

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::plan::{Plan, SCHEMA_VERSION};

/// The largest plan file read, in bytes. Real plans are kilobytes (a
/// 2,000-task plan with 1 KB prompts is 3.5 MB); the cap only stops a wrong
/// path (a log, a disk image) from being slurped whole.
pub const MAX_PLAN_BYTES: usize = 64 * 1024 * 1024;

/// The deepest YAML nesting accepted. A plan needs 6 levels; `params`
/// values passed through to engines may nest further, but not this far.
pub const MAX_YAML_DEPTH: usize = 64;

/// The most YAML events a plan may replay through aliases (`*name`). A
/// shared `entity_context` list costs a few dozen; "billion laughs" costs
/// billions.
pub const MAX_ALIAS_REPLAYED_EVENTS: usize = 100_000;

/// The two formats a plan is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanFormat {
    /// JSON (`.json`, and standard input).
    Json,
    /// YAML (`.yaml`, `.yml`).
    Yaml,
}

impl PlanFormat {
    /// The format a path's extension names: `.json` is JSON, `.yaml` and
    /// `.yml` are YAML (case-insensitive), `-` (standard input) is JSON.
    /// `None` for any other extension or none at all; see
    /// [`PlanFormat::sniff`].
    pub fn from_path(path: &Path) -> Option<PlanFormat> {
        if path == Path::new("-") {
            return Some(PlanFormat::Json);
        }
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(PlanFormat::Json),
            "yaml" | "yml" => Some(PlanFormat::Yaml),
            _ => None,
        }
    }

    /// Guesses the format of text whose path says nothing: JSON when the
    /// first non-blank character (after a byte-order mark) is `{`, YAML
    /// otherwise. A JSON object is also valid YAML, so the guess only
    /// decides whose error messages a broken file gets.
    pub fn sniff(text: &str) -> PlanFormat {
        let body = text.strip_prefix('\u{feff}').unwrap_or(text);
        if body.trim_start().starts_with('{') {
            PlanFormat::Json
        } else {
            PlanFormat::Yaml
        }
    }

    /// `json` or `yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanFormat::Json => "json",
            PlanFormat::Yaml => "yaml",
        }
    }
}

impl fmt::Display for PlanFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a plan could not be read. Every variant names its origin (the path,
/// or `<stdin>`); syntax errors also carry the line, column and field path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The file could not be read.
    #[error("{origin}: {source}")]
    Io {
        /// The path as given.
        origin: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not UTF-8.
    #[error("{origin}: not valid UTF-8 (first bad byte at offset {offset})")]
    NotUtf8 {
        /// The path as given.
        origin: String,
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// The input is larger than [`MAX_PLAN_BYTES`].
    #[error("{origin}: {size} bytes is over the {limit}-byte limit for a plan")]
    TooLarge {
        /// The path as given.
        origin: String,
        /// The input's size.
        size: usize,
        /// [`MAX_PLAN_BYTES`].
        limit: usize,
    },
    /// The text is not a well-formed plan: bad syntax, a wrong type, a
    /// missing or unknown field.
    #[error("{}", syntax_display(.origin, *.line, *.column, .task_id.as_deref(), .field.as_deref(), .message))]
    Syntax {
        /// The path as given.
        origin: String,
        /// The format the text was read as.
        format: PlanFormat,
        /// 1-based line, when known (a plan is at most [`MAX_PLAN_BYTES`],
        /// so 32 bits always suffice).
        line: Option<u32>,
        /// 1-based column, when known.
        column: Option<u32>,
        /// Where in the plan, e.g. `sub_tasks[2].dependancies`, when known.
        field: Option<String>,
        /// The id of the task `field` is in (`sub_tasks[N]`), when the
        /// text gives it: shown as `task "id": ` as validation problems
        /// show theirs.
        task_id: Option<String>,
        /// What is wrong, without the location.
        message: String,
    },
    /// `schema_version` is not [`SCHEMA_VERSION`].
    #[error(
        "{origin}: schema_version {found} is not supported (this build reads {SCHEMA_VERSION})"
    )]
    UnsupportedVersion {
        /// The path as given.
        origin: String,
        /// The version as written.
        found: String,
    },
}

fn syntax_display(
    origin: &str,
    line: Option<u32>,
    column: Option<u32>,
    task_id: Option<&str>,
    field: Option<&str>,
    message: &str,
) -> String {
    let mut s = String::from(origin);
    if let Some(line) = line {
        s.push_str(&format!(":{line}"));
        if let Some(column) = column {
            s.push_str(&format!(":{column}"));
        }
    }
    s.push_str(": ");
    if let Some(id) = task_id {
        s.push_str(&format!("task {}: ", crate::validate::quoted(id)));
    }
    if let Some(field) = field {
        s.push_str(field);
        s.push_str(": ");
    }
    s.push_str(message);
    s
}

impl PlanError {
    /// The path or `<stdin>` the error is about.
    pub fn origin(&self) -> &str {
        match self {
            PlanError::Io { origin, .. }
            | PlanError::NotUtf8 { origin, .. }
            | PlanError::TooLarge { origin, .. }
            | PlanError::Syntax { origin, .. }
            | PlanError::UnsupportedVersion { origin, .. } => origin,
        }
    }
}

/// A plan's text as read, before parsing: what [`load_plan`] parses, kept
/// for callers that also want to point into the text (see
/// [`FieldLocator`](crate::FieldLocator)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanSource {
    /// The path as given, or `<stdin>`.
    pub origin: String,
    /// The whole text.
    pub text: String,
    /// The format it will be parsed as: by extension, else sniffed.
    pub format: PlanFormat,
}

impl PlanSource {
    /// Parses the text ([`parse_plan`]).
    pub fn parse(&self) -> Result<Plan, PlanError> {
        parse_plan(&self.text, &self.origin, self.format)
    }

    /// Parses the text, reading past unknown keys
    /// ([`parse_plan_with_unknown_fields`]).
    pub fn parse_with_unknown_fields(&self) -> Result<ParsedPlan, PlanError> {
        parse_plan_with_unknown_fields(&self.text, &self.origin, self.format)
    }
}

/// Reads the plan text at `path` (`-` reads standard input, as JSON), at
/// most [`MAX_PLAN_BYTES`], and decides its format: by extension (see
/// [`PlanFormat::from_path`]), else by sniffing ([`PlanFormat::sniff`]).
pub fn read_plan_source(path: &Path) -> Result<PlanSource, PlanError> {
    let (origin, bytes) = if path == Path::new("-") {
        let mut buf = Vec::new();
        read_capped(std::io::stdin().lock(), &mut buf).map_err(|source| PlanError::Io {
            origin: STDIN.to_string(),
            source,
        })?;
        (STDIN.to_string(), buf)
    } else {
        let origin = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| PlanError::Io {
            origin: origin.clone(),
            source,
        })?;
        let mut buf = Vec::new();
        read_capped(file, &mut buf).map_err(|source| PlanError::Io {
            origin: origin.clone(),
            source,
        })?;
        (origin, buf)
    };
    if bytes.len() > MAX_PLAN_BYTES {
        return Err(PlanError::TooLarge {
            origin,
            size: bytes.len(),
            limit: MAX_PLAN_BYTES,
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| PlanError::NotUtf8 {
        origin: origin.clone(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    let format = PlanFormat::from_path(path).unwrap_or_else(|| PlanFormat::sniff(&text));
    Ok(PlanSource {
        origin,
        text,
        format,
    })
}

/// Reads and parses the plan at `path`; `-` reads standard input as JSON.
///
/// The format follows the extension (see [`PlanFormat::from_path`]); a file
/// with another extension is sniffed ([`PlanFormat::sniff`]).
pub fn load_plan(path: &Path) -> Result<Plan, PlanError> {
    read_plan_source(path)?.parse()
}

/// How standard input is named in errors.
pub const STDIN: &str = "<stdin>";

/// Reads at most one byte more than [`MAX_PLAN_BYTES`], so an oversized
/// input is detected without reading all of it.
fn read_capped(reader: impl std::io::Read, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    let limit = u64::try_from(MAX_PLAN_BYTES)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader.take(limit).read_to_end(buf).map(|_| ())
}

/// A key the plan format does not have, met while reading a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Where, as a path into the plan: `sub_tasks[2].dependancies`.
    pub field: String,
    /// The key as written: `dependancies`.
    pub key: String,
    /// The index of the task it belongs to, when it is inside `sub_tasks`.
    pub task: Option<usize>,
    /// The keys the enclosing object accepts; empty when not known.
    pub expected: &'static [&'static str],
}

/// A plan as read, with the unknown keys it was read past.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedPlan {
    /// The plan, every unknown key left out.
    pub plan: Plan,
    /// The unknown keys, in the order they are written.
    pub unknown_fields: Vec<UnknownField>,
}

/// Parses `text` as a plan in `format` like [`parse_plan`], but reads past
/// unknown keys and returns them beside the plan, for a caller that reports
/// every problem at once. Text that cannot be read as a plan at all (bad
/// syntax, a wrong type, a missing field, an unsupported `schema_version`)
/// is still an error; when an unknown key was read before such a failure
/// (`descripton` leaves `description` missing), the error names that key.
///
/// ```
/// use ctx_model::{parse_plan_with_unknown_fields, PlanFormat};
///
/// let text = "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    dependancies: [b]\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n";
/// let parsed = parse_plan_with_unknown_fields(text, "plan.yaml", PlanFormat::Yaml).unwrap();
/// assert_eq!(parsed.unknown_fields[0].field, "sub_tasks[0].dependancies");
/// let problems = parsed.problems();
/// assert_eq!(problems[0].to_string(),
///     r#"task "a": sub_tasks[0].dependancies: unknown field "dependancies" (did you mean "dependencies"?)"#);
/// ```
pub fn parse_plan_with_unknown_fields(
    text: &str,
    origin: &str,
    format: PlanFormat,
) -> Result<ParsedPlan, PlanError> {
    if text.len() > MAX_PLAN_BYTES {
        return Err(PlanError::TooLarge {
            origin: origin.to_string(),
            size: text.len(),
            limit: MAX_PLAN_BYTES,
        });
    }
    let mut unknown_fields = Vec::new();
    let parsed = match format {
        PlanFormat::Json => parse_json(text, origin, &mut unknown_fields),
        PlanFormat::Yaml => parse_yaml(text, origin, &mut unknown_fields),
    };
    let unsupported = |found: String| PlanError::UnsupportedVersion {
        origin: origin.to_string(),
        found,
    };
    match parsed {
        Ok(plan) if plan.schema_version != SCHEMA_VERSION => {
            Err(unsupported(plan.schema_version.to_string()))
        }
        Ok(plan) => Ok(ParsedPlan {
            plan,
            unknown_fields,
        }),
        // A plan for another format version fails on whatever this build
        // does not know; when its version says so, report that instead.
        // (Probing only on failure keeps a valid plan to one parse.)
        // A misspelt required field (`descripton`) fails as a missing one;
        // the unknown key read before the failure is the better message,
        // and the one a strict parse gives.
        Err(err) => match (probe_version(text, format), unknown_fields.first()) {
            (Some(v), _) if !v.is_supported() => Err(unsupported(v.0)),
            (_, Some(unknown)) => Err(with_task_id(
                unknown_field_error(text, origin, format, unknown),
                text,
                format,
            )),
            _ => Err(with_task_id(err, text, format)),
        },
    }
}

/// The located parse error for `unknown`.
fn unknown_field_error(
    text: &str,
    origin: &str,
    format: PlanFormat,
    unknown: &UnknownField,
) -> PlanError {
    let at = crate::FieldLocator::new(text).locate_key(&unknown.field);
    PlanError::Syntax {
        origin: origin.to_string(),
        format,
        line: at.and_then(|(l, _)| position(l)),
        column: at.and_then(|(_, c)| position(c)),
        field: Some(unknown.field.clone()),
        task_id: None,
        message: unknown_field_message(unknown),
    }
}

/// Parses `text` as a plan in `format`; `origin` names the source in
/// errors (a path, or `<stdin>`).
///
/// An unsupported `schema_version` is reported as such, whatever else is
/// wrong (see the module docs). Does not [`validate`](crate::validate())
/// the plan.
///
/// ```
/// use ctx_model::{parse_plan, PlanError, PlanFormat};
///
/// let err = parse_plan("schema_version: 1\nsub_tasks:\n  - id: a\n    dependancies: [b]\n",
///                      "plan.yaml", PlanFormat::Yaml).unwrap_err();
/// let PlanError::Syntax { line, field, .. } = &err else { panic!() };
/// assert_eq!(*line, Some(4));
/// assert_eq!(field.as_deref(), Some("sub_tasks[0].dependancies"));
/// assert!(err.to_string().starts_with("plan.yaml:4:5: task \"a\": sub_tasks[0].dependancies: unknown field"));
/// ```
pub fn parse_plan(text: &str, origin: &str, format: PlanFormat) -> Result<Plan, PlanError> {
    let parsed = parse_plan_with_unknown_fields(text, origin, format)?;
    match parsed.unknown_fields.first() {
        None => Ok(parsed.plan),
        Some(unknown) => Err(with_task_id(
            unknown_field_error(text, origin, format, unknown),
            text,
            format,
        )),
    }
}

/// `err` naming the task its field is in, when it is a syntax error under
/// `sub_tasks[N]` and task N has an id: every other plan error names its
/// task, and `sub_tasks[3]` alone makes the reader count. The plan did not
/// parse, so only the tasks' ids are read again.
fn with_task_id(err: PlanError, text: &str, format: PlanFormat) -> PlanError {
    let PlanError::Syntax {
        origin,
        format: read_as,
        line,
        column,
        field,
        task_id: None,
        message,
    } = err
    else {
        return err;
    };
    let task_id = field
        .as_deref()
        .and_then(task_index)
        .and_then(|i| {
            probe::<IdsProbe>(text, format)?
                .sub_tasks
                .into_iter()
                .nth(i)
        })
        .and_then(|t| t.id)
        .map(|ScalarText(id)| id)
        .filter(|id| !id.trim().is_empty());
    PlanError::Syntax {
        origin,
        format: read_as,
        line,
        column,
        field,
        task_id,
        message,
    }
}

/// N of a field path `sub_tasks[N]...`.
fn task_index(field: &str) -> Option<usize> {
    let rest = field.strip_prefix("sub_tasks[")?;
    rest[..rest.find(']')?].parse().ok()
}

/// serde's wording: ``unknown field `x`, expected one of `a`, `b` ``.
fn unknown_field_message(unknown: &UnknownField) -> String {
    let names: Vec<String> = unknown.expected.iter().map(|f| format!("`{f}`")).collect();
    match names.as_slice() {
        [] => format!("unknown field `{}`", unknown.key),
        [one] => format!("unknown field `{}`, expected {one}", unknown.key),
        _ => format!(
            "unknown field `{}`, expected one of {}",
            unknown.key,
            names.join(", ")
        ),
    }
}

/// Turns `serde_ignored`'s path into an [`UnknownField`].
fn unknown_field(path: &serde_ignored::Path<'_>) -> UnknownField {
    enum Seg {
        Key(String),
        Index(usize),
    }
    fn collect(path: &serde_ignored::Path<'_>, out: &mut Vec<Seg>) {
        use serde_ignored::Path;
        match path {
            Path::Root => {}
            Path::Seq { parent, index } => {
                collect(parent, out);
                out.push(Seg::Index(*index));
            }
            Path::Map { parent, key } => {
                collect(parent, out);
                out.push(Seg::Key(key.clone()));
            }
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => collect(parent, out),
        }
    }
    let mut segs = Vec::new();
    collect(path, &mut segs);
    let mut field = String::new();
    for seg in &segs {
        match seg {
            Seg::Key(k) => {
                if !field.is_empty() {
                    field.push('.');
                }
                field.push_str(k);
            }
            Seg::Index(i) => field.push_str(&format!("[{i}]")),
        }
    }
    let key = match segs.last() {
        Some(Seg::Key(k)) => k.clone(),
        _ => String::new(),
    };
    let task = match segs.as_slice() {
        [Seg::Key(k), Seg::Index(i), ..] if k == "sub_tasks" => Some(*i),
        _ => None,
    };
    // The object the key sits in, by its place in the plan.
    let parent: Vec<Option<&str>> = segs[..segs.len().saturating_sub(1)]
        .iter()
        .map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        })
        .collect();
    let expected = match parent.as_slice() {
        [] => fields_of::<Plan>(),
        [Some("entities"), None] => fields_of::<crate::Entity>(),
        [Some("sub_tasks"), None] => fields_of::<crate::SubTask>(),
        [Some("sub_tasks"), None, Some("entity_context"), None] => {
            fields_of::<crate::EntityContext>()
        }
        [Some("sub_tasks"), None, Some("tool_or_prompt")] => fields_of::<crate::ToolOrPrompt>(),
        [Some("sub_tasks"), None, Some("dependency")] => fields_of::<crate::TaskDependencyConfig>(),
        [Some("config")] => fields_of::<crate::PlanConfig>(),
        [Some("config"), Some("dependency")] => fields_of::<crate::DependencyConfig>(),
        [Some("config"), Some("entities")] => fields_of::<crate::EntityContextConfig>(),
        _ => &[],
    };
    UnknownField {
        field,
        key,
        task,
        expected,
    }
}

/// The field names `T`'s derived `Deserialize` accepts, read from the types
/// themselves (so they cannot drift from what the parser takes): a
/// deserializer that records what `deserialize_struct` is asked for.
fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{Error as _, Visitor, value::Error};
    struct Names<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Names<'_> {
        type Error = Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Error> {
            *self.0 = fields;
            Err(Error::custom("names read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut names));
    names
}

/// `schema_version` as written, read with every other key ignored; `None`
/// when the text is not even a mapping or has no version.
fn probe_version(text: &str, format: PlanFormat) -> Option<ScalarText> {
    probe::<VersionProbe>(text, format).and_then(|p| p.schema_version)
}

/// Reads `text` as `T`, a struct of the few keys a probe wants (every
/// other key is ignored); `None` when even that fails.
fn probe<T: serde::de::DeserializeOwned>(text: &str, format: PlanFormat) -> Option<T> {
    match format {
        PlanFormat::Json => {
            serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text)).ok()
        }
        PlanFormat::Yaml => serde_saphyr::from_str_with_options(text, yaml_options()).ok(),
    }
}

fn parse_json(
    text: &str,
    origin: &str,
    unknown: &mut Vec<UnknownField>,
) -> Result<Plan, PlanError> {
    // Editors on Windows like to start files with a byte-order mark, which
    // serde_json refuses; YAML allows it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let mut found = |path: serde_ignored::Path<'_>| unknown.push(unknown_field(&path));
    let collecting = serde_ignored::Deserializer::new(&mut de, &mut found);
    let plan: Plan = serde_path_to_error::deserialize(collecting).map_err(|e| {
        let field = field_path(e.path());
        let inner = e.into_inner();
        json_error(origin, field, &inner)
    })?;
    de.end().map_err(|e| json_error(origin, None, &e))?;
    Ok(plan)
}

fn json_error(origin: &str, field: Option<String>, e: &serde_json::Error) -> PlanError {
    let (line, column) = if e.line() == 0 {
        (None, None)
    } else {
        // serde_json says column 0 before the first character of a line.
        (
            position(e.line() as u64),
            position(e.column().max(1) as u64),
        )
    };
    // serde_json's Display appends " at line L column C"; the location is
    // carried separately, so drop it from the message.
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    PlanError::Syntax {
        origin: origin.to_string(),
        format: PlanFormat::Json,
        line,
        column,
        field,
        task_id: None,
        message,
    }
}

fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_YAML_DEPTH;
    budget.max_reader_input_bytes = Some(MAX_PLAN_BYTES);
    budget.max_total_scalar_bytes = MAX_PLAN_BYTES;
    // The default node and event caps (250,000 and 1,000,000) stop at about
    // 8,000 tasks; a plan within MAX_PLAN_BYTES may need more. Alias
    // expansion keeps its own, separate cap (YAML bombs).
    budget.max_nodes = 20_000_000;
    budget.max_events = 40_000_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    // Anchors and aliases are fine for sharing a list between tasks; a
    // plan that replays more than this through aliases is an attack.
    options.alias_limits.max_total_replayed_events = MAX_ALIAS_REPLAYED_EVENTS;
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    // Messages are one line; the CLI prints file:line:column itself.
    options.with_snippet = false;
    options
}

fn parse_yaml(
    text: &str,
    origin: &str,
    unknown: &mut Vec<UnknownField>,
) -> Result<Plan, PlanError> {
    let mut path: Option<String> = None;
    let mut found = |p: serde_ignored::Path<'_>| unknown.push(unknown_field(&p));
    let result =
        serde_saphyr::with_deserializer_from_str_with_options(text, yaml_options(), |de| {
            let collecting = serde_ignored::Deserializer::new(de, &mut found);
            serde_path_to_error::deserialize::<_, Plan>(collecting).map_err(|e| {
                path = field_path(e.path());
                e.into_inner()
            })
        });
    result.map_err(|e| yaml_error(origin, path, &e))
}

fn yaml_error(origin: &str, field: Option<String>, e: &serde_saphyr::Error) -> PlanError {
    use serde_saphyr::MessageFormatter;
    let plain = e.without_snippet();
    let (line, column) = match plain.location() {
        Some(loc) if loc.line() > 0 => (position(loc.line()), position(loc.column())),
        _ => (None, None),
    };
    let message = serde_saphyr::UserMessageFormatter
        .format_message(plain)
        .into_owned();
    PlanError::Syntax {
        origin: origin.to_string(),
        format: PlanFormat::Yaml,
        line,
        column,
        field,
        task_id: None,
        message,
    }
}

/// A 1-based line or column as [`PlanError::Syntax`] holds it.
fn position(n: u64) -> Option<u32> {
    u32::try_from(n).ok()
}

/// `serde_path_to_error`'s path as we print it: `sub_tasks[2].id`, or
/// `None` at the top level (where the path is just `.`). Trailing segments
/// serde could not name (a duplicate key, say) are dropped: the line and
/// column already point at them.
fn field_path(path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let named = segments
        .iter()
        .rposition(|s| !matches!(s, Segment::Unknown))
        .map_or(0, |i| i + 1);
    let mut out = String::new();
    for seg in &segments[..named] {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Only `schema_version`, every other key ignored.
#[derive(Deserialize)]
struct VersionProbe {
    #[serde(default)]
    schema_version: Option<ScalarText>,
}

/// Only each task's `id`, every other key ignored.
#[derive(Deserialize)]
struct IdsProbe {
    #[serde(default)]
    sub_tasks: Vec<IdProbe>,
}

#[derive(Deserialize)]
struct IdProbe {
    #[serde(default)]
    id: Option<ScalarText>,
}

/// A scalar as written, whatever its type: a `schema_version`, a task id.
struct ScalarText(String);

impl ScalarText {
    fn is_supported(&self) -> bool {
        // Anything that is not an integer is left to the full parse, whose
        // type error has a line and column.
        match self.0.trim().parse::<i128>() {
            Ok(n) => n == i128::from(SCHEMA_VERSION),
            Err(_) => true,
        }
    }
}

impl<'de> Deserialize<'de> for ScalarText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ScalarText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a scalar")
            }
            fn visit_u64<E>(self, v: u64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK_YAML: &str =
        "    description: A\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n";

    fn syntax(err: PlanError) -> (Option<u32>, Option<u32>, Option<String>, String) {
        match err {
            PlanError::Syntax {
                line,
                column,
                field,
                message,
                ..
            } => (line, column, field, message),
            other => panic!("not a syntax error: {other}"),
        }
    }

    #[test]
    fn format_by_extension() {
        assert_eq!(
            PlanFormat::from_path(Path::new("a.json")),
            Some(PlanFormat::Json)
        );
        assert_eq!(
            PlanFormat::from_path(Path::new("a.YAML")),
            Some(PlanFormat::Yaml)
        );
        assert_eq!(
            PlanFormat::from_path(Path::new("dir/a.yml")),
            Some(PlanFormat::Yaml)
        );
        assert_eq!(
            PlanFormat::from_path(Path::new("-")),
            Some(PlanFormat::Json)
        );
        assert_eq!(PlanFormat::from_path(Path::new("plan.txt")), None);
        assert_eq!(PlanFormat::from_path(Path::new("plan")), None);
        assert_eq!(PlanFormat::sniff("\u{feff}  {\"a\": 1}"), PlanFormat::Json);
        assert_eq!(
            PlanFormat::sniff("# c\nschema_version: 1"),
            PlanFormat::Yaml
        );
    }

    #[test]
    fn yaml_unknown_field_is_located_with_its_path() {
        let text = format!(
            "schema_version: 1\nsub_tasks:\n  - id: a\n{TASK_YAML}  - id: b\n{TASK_YAML}  - id: c\n    dependancies: [a]\n{TASK_YAML}"
        );
        let err = parse_plan(&text, "p.yaml", PlanFormat::Yaml).unwrap_err();
        let msg = err.to_string();
        let (line, column, field, message) = syntax(err);
        assert_eq!((line, column), (Some(10), Some(5)));
        assert_eq!(field.as_deref(), Some("sub_tasks[2].dependancies"));
        assert!(
            message.starts_with("unknown field `dependancies`"),
            "{message}"
        );
        assert!(
            msg.starts_with("p.yaml:10:5: task \"c\": sub_tasks[2].dependancies: unknown field"),
            "{msg}"
        );
    }

    /// A type error or an unknown check kind under `sub_tasks[N]` names
    /// task N by its id, as validation problems do; without an id (or when
    /// the text cannot be read at all) the error is as it was.
    #[test]
    fn errors_inside_a_task_name_the_task() {
        let yaml = |checks: &str| {
            format!(
                "schema_version: 1\nsub_tasks:\n  - id: a\n{TASK_YAML}  - id: css\n{TASK_YAML}    checks:\n{checks}"
            )
        };
        let cases = [
            (
                yaml("      - matches: x\n"),
                "p.yaml:10:9: task \"css\": sub_tasks[1].checks[0].matches: unknown field `matches`, expected one of contains,",
            ),
            (
                yaml("      - max_words: many\n"),
                "p.yaml:10:20: task \"css\": sub_tasks[1].checks[0].max_words: ",
            ),
            (
                yaml("      - contains: x\n        case_sensitive: maybe\n"),
                "p.yaml:11:25: task \"css\": sub_tasks[1].checks[0].case_sensitive: invalid boolean",
            ),
        ];
        for (text, want) in cases {
            let err = parse_plan(&text, "p.yaml", PlanFormat::Yaml).unwrap_err();
            assert!(err.to_string().starts_with(want), "{err}");
            let err = parse_plan_with_unknown_fields(&text, "p.yaml", PlanFormat::Yaml)
                .err()
                .unwrap();
            assert!(err.to_string().starts_with(want), "{err}");
        }
        let json = r#"{"schema_version": 1, "sub_tasks": [{"id": "js", "description": "J",
          "checks": [{"matches": "x"}],
          "tool_or_prompt": {"name": "inference", "params": {"prompt": "x"}}}]}"#;
        let err = parse_plan(json, "p.json", PlanFormat::Json).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "p.json:2:31: task \"js\": sub_tasks[0].checks[0].matches: unknown field"
            ),
            "{err}"
        );
        let PlanError::Syntax { task_id, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(task_id.as_deref(), Some("js"));
        // No id to give: the path alone.
        let no_id = yaml("      - matches: x\n").replace("  - id: css\n", "  - id: \"\"\n");
        let err = parse_plan(&no_id, "p.yaml", PlanFormat::Yaml).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p.yaml:10:9: sub_tasks[1].checks[0].matches:"),
            "{err}"
        );
        // Outside the tasks: no task.
        let err = parse_plan(
            "schema_version: 1\nsub_tasks: []\nconfig: {max_check_attempts: x}\n",
            "p.yaml",
            PlanFormat::Yaml,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p.yaml:3:30: config.max_check_attempts:"),
            "{err}"
        );
    }

    #[test]
    fn json_unknown_field_is_located_with_its_path() {
        let text = "{\"schema_version\": 1,\n \"sub_tasks\": [\n  {\"id\": \"a\", \"description\": \"A\",\n   \"dependancies\": [],\n   \"tool_or_prompt\": {\"name\": \"inference\", \"params\": {\"prompt\": \"x\"}}}]}";
        let err = parse_plan(text, "p.json", PlanFormat::Json).unwrap_err();
        let msg = err.to_string();
        let (line, column, field, message) = syntax(err);
        assert_eq!(line, Some(4));
        assert!(column.is_some_and(|c| c > 0));
        assert_eq!(field.as_deref(), Some("sub_tasks[0].dependancies"));
        assert!(
            message.starts_with("unknown field `dependancies`"),
            "{message}"
        );
        assert!(!message.contains("at line"), "{message}");
        assert!(msg.starts_with("p.json:4:"), "{msg}");
    }

    #[test]
    fn unknown_fields_fail_everywhere_but_params() {
        for (text, field) in [
            ("schema_version: 1\nsub_tasks: []\ngaol: x\n", "gaol"),
            (
                "schema_version: 1\nsub_tasks: []\nentities:\n  - name: E\n    grounded_valu: x\n",
                "entities[0].grounded_valu",
            ),
            (
                "schema_version: 1\nsub_tasks: []\nconfig: {dependency: {max_output_len: 3}}\n",
                "config.dependency.max_output_len",
            ),
            (
                "schema_version: 1\nsub_tasks: []\nconfig: {entities: {include: true}}\n",
                "config.entities.include",
            ),
            (
                "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, prams: {}, params: {prompt: go}}\n",
                "sub_tasks[0].tool_or_prompt.prams",
            ),
            (
                "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    entity_context: [{entity_name: E, relevance: high}]\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n",
                "sub_tasks[0].entity_context[0].relevance",
            ),
        ] {
            let (_, _, f, m) = syntax(parse_plan(text, "p", PlanFormat::Yaml).unwrap_err());
            assert_eq!(f.as_deref(), Some(field), "{text}");
            assert!(m.contains("unknown field"), "{m}");
        }
        // params passes extra keys through.
        let plan = parse_plan(
            "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: go, frequency_penalty: 0.5, response_format: {type: json_object}}}\n",
            "p",
            PlanFormat::Yaml,
        )
        .unwrap();
        let extra = &plan.sub_tasks[0].tool_or_prompt.params.extra;
        assert_eq!(extra["frequency_penalty"], serde_json::json!(0.5));
        assert_eq!(
            extra["response_format"],
            serde_json::json!({"type": "json_object"})
        );
    }

    #[test]
    fn every_unknown_field_is_collected_in_file_order() {
        let text = "schema_version: 1\ngaol: x\nentities:\n  - name: E\n    grounded_valu: x\nsub_tasks:\n  - id: a\n    dependancies: [b]\n    description: A\n    entity_context: [{entity_name: E, relevance: high}]\n    tool_or_prompt: {name: inference, prams: 1, params: {prompt: go, anything: 1}}\nconfig: {dependency: {max_output_len: 3}, entities: {include: true}, tokeniser: x}\n";
        let parsed = parse_plan_with_unknown_fields(text, "p", PlanFormat::Yaml).unwrap();
        let fields: Vec<(&str, &str, Option<usize>)> = parsed
            .unknown_fields
            .iter()
            .map(|u| (u.field.as_str(), u.key.as_str(), u.task))
            .collect();
        assert_eq!(
            fields,
            [
                ("gaol", "gaol", None),
                ("entities[0].grounded_valu", "grounded_valu", None),
                ("sub_tasks[0].dependancies", "dependancies", Some(0)),
                (
                    "sub_tasks[0].entity_context[0].relevance",
                    "relevance",
                    Some(0)
                ),
                ("sub_tasks[0].tool_or_prompt.prams", "prams", Some(0)),
                ("config.dependency.max_output_len", "max_output_len", None),
                ("config.entities.include", "include", None),
                ("config.tokeniser", "tokeniser", None),
            ]
        );
        // The known fields come from the types themselves.
        assert!(parsed.unknown_fields[2].expected.contains(&"dependencies"));
        assert!(parsed.unknown_fields[1].expected.contains(&"type"));
        let messages: Vec<String> = parsed.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            messages[..3],
            [
                // Two edits in four letters is too far for a suggestion.
                r#"gaol: unknown field "gaol" (known fields: schema_version, goal, entities, sub_tasks, config, variables, history)"#,
                r#"entities[0].grounded_valu: unknown field "grounded_valu" (did you mean "grounded_value"?)"#,
                r#"task "a": sub_tasks[0].dependancies: unknown field "dependancies" (did you mean "dependencies"?)"#,
            ]
        );
        assert_eq!(
            messages[6],
            r#"config.entities.include: unknown field "include" (known fields: include_all, filter_by_relevance, include_entity_type)"#
        );
        // The same plan in JSON collects the same paths.
        let json = r#"{"schema_version": 1, "gaol": "x", "sub_tasks": [{"id": "a", "description": "A", "dependancies": [],
            "tool_or_prompt": {"name": "inference", "params": {"prompt": "go", "anything": 1}}}]}"#;
        let parsed = parse_plan_with_unknown_fields(json, "p", PlanFormat::Json).unwrap();
        let fields: Vec<&str> = parsed
            .unknown_fields
            .iter()
            .map(|u| u.field.as_str())
            .collect();
        assert_eq!(fields, ["gaol", "sub_tasks[0].dependancies"]);
        // A strict parse refuses the first, located at its key.
        let (line, column, field, message) =
            syntax(parse_plan(json, "p", PlanFormat::Json).unwrap_err());
        assert_eq!(
            (line, column, field.as_deref()),
            (Some(1), Some(23), Some("gaol"))
        );
        assert!(
            message.starts_with("unknown field `gaol`, expected one of `schema_version`"),
            "{message}"
        );
    }

    #[test]
    fn a_misspelt_required_field_is_named() {
        let text = "schema_version: 1\nsub_tasks:\n  - id: a\n    descripton: A\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n";
        let err = parse_plan_with_unknown_fields(text, "p", PlanFormat::Yaml).unwrap_err();
        let (line, column, field, message) = syntax(err);
        assert_eq!(
            (line, column, field.as_deref()),
            (Some(4), Some(5), Some("sub_tasks[0].descripton"))
        );
        assert!(
            message.starts_with("unknown field `descripton`"),
            "{message}"
        );
    }

    #[test]
    fn schema_version_is_checked_before_the_fields() {
        for (text, format) in [
            (
                "schema_version: 2\nbrand_new_field: x\nsub_tasks: 7\n",
                PlanFormat::Yaml,
            ),
            (
                "{\"schema_version\": 2, \"brand_new_field\": [1]}",
                PlanFormat::Json,
            ),
        ] {
            let err = parse_plan(text, "next.plan", format).unwrap_err();
            assert_eq!(
                err.to_string(),
                "next.plan: schema_version 2 is not supported (this build reads 1)"
            );
        }
        let err =
            parse_plan("schema_version: 0\nsub_tasks: []\n", "p", PlanFormat::Yaml).unwrap_err();
        assert!(matches!(err, PlanError::UnsupportedVersion { ref found, .. } if found == "0"));
        // A missing version is a located missing-field error.
        let (line, _, _, m) =
            syntax(parse_plan("sub_tasks: []\n", "p", PlanFormat::Yaml).unwrap_err());
        assert!(line.is_some());
        assert!(m.contains("missing field `schema_version`"), "{m}");
        // A version of the wrong type gets the full parse's type error.
        let (_, _, f, _) = syntax(
            parse_plan(
                "schema_version: one\nsub_tasks: []\n",
                "p",
                PlanFormat::Yaml,
            )
            .unwrap_err(),
        );
        assert_eq!(f.as_deref(), Some("schema_version"));
        // Text is refused even when it reads as the right number: YAML
        // quotes make a string, as JSON's do.
        for (text, format, line) in [
            (
                "sub_tasks: []\nschema_version: \"1\"\n",
                PlanFormat::Yaml,
                2,
            ),
            ("schema_version: '1'\nsub_tasks: []\n", PlanFormat::Yaml, 1),
            (
                "{\"sub_tasks\": [],\n \"schema_version\": \"1\"}",
                PlanFormat::Json,
                2,
            ),
        ] {
            let (l, c, f, m) = syntax(parse_plan(text, "p", format).unwrap_err());
            assert_eq!(
                (l, f.as_deref()),
                (Some(line), Some("schema_version")),
                "{text}"
            );
            assert!(c.is_some(), "{text}");
            assert!(m.contains("invalid type: string"), "{m}");
        }
        for text in [
            "schema_version: 1\nsub_tasks: []\n",
            "schema_version: 0x1\nsub_tasks: []\n",
        ] {
            assert!(parse_plan(text, "p", PlanFormat::Yaml).is_ok(), "{text}");
        }
    }

    #[test]
    fn yaml_scalars_read_verbatim_as_text() {
        let text = "schema_version: 1\nentities:\n  - name: Speed\n    grounded_value: 1.50\n  - name: On\n    grounded_value: true\n  - name: List\n    grounded_values: [10, 0x1F, no]\nsub_tasks:\n  - id: 1\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n  - id: 2\n    description: B\n    dependencies: [1]\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n";
        let plan = parse_plan(text, "p", PlanFormat::Yaml).unwrap();
        assert_eq!(plan.entities[0].grounded_value.as_deref(), Some("1.50"));
        assert_eq!(plan.entities[1].grounded_value.as_deref(), Some("true"));
        assert_eq!(
            plan.entities[2].grounded_values.as_deref(),
            Some(&["10".to_string(), "0x1F".to_string(), "no".to_string()][..])
        );
        assert_eq!(plan.sub_tasks[0].id, "1");
        assert_eq!(plan.sub_tasks[1].dependencies, ["1"]);
    }

    #[test]
    fn json_numbers_are_not_text() {
        let (_, _, f, m) = syntax(
            parse_plan(
                r#"{"schema_version": 1, "sub_tasks": [{"id": 1}]}"#,
                "p",
                PlanFormat::Json,
            )
            .unwrap_err(),
        );
        assert_eq!(f.as_deref(), Some("sub_tasks[0].id"));
        assert!(m.contains("expected a string"), "{m}");
    }

    #[test]
    fn duplicate_keys_are_errors_in_both_formats() {
        let (line, _, f, m) = syntax(
            parse_plan(
                "schema_version: 1\nsub_tasks:\n  - id: a\n    id: b\n",
                "p",
                PlanFormat::Yaml,
            )
            .unwrap_err(),
        );
        assert_eq!(line, Some(4));
        assert_eq!(f.as_deref(), Some("sub_tasks[0]"));
        assert!(m.contains("duplicate"), "{m}");
        let (_, _, _, m) = syntax(
            parse_plan(
                r#"{"schema_version": 1, "sub_tasks": [], "sub_tasks": []}"#,
                "p",
                PlanFormat::Json,
            )
            .unwrap_err(),
        );
        assert!(m.contains("duplicate field"), "{m}");
    }

    #[test]
    fn syntax_errors_are_located() {
        let (line, column, _, _) = syntax(
            parse_plan("schema_version: 1\nsub_tasks: [\n", "p", PlanFormat::Yaml).unwrap_err(),
        );
        assert!(line.is_some() && column.is_some());
        let (line, _, _, m) = syntax(
            parse_plan(
                "{\"schema_version\": 1,\n \"sub_tasks\": []} x",
                "p",
                PlanFormat::Json,
            )
            .unwrap_err(),
        );
        assert_eq!(line, Some(2));
        assert_eq!(m, "trailing characters");
        assert!(parse_plan("", "p", PlanFormat::Yaml).is_err());
        assert!(parse_plan("", "p", PlanFormat::Json).is_err());
        assert!(parse_plan("- a\n", "p", PlanFormat::Yaml).is_err());
    }

    #[test]
    fn yaml_bombs_and_deep_nesting_are_refused() {
        // `params` accepts any value, so only the limits can stop these.
        let task = |value: &str| {
            format!(
                "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt:\n      name: inference\n      params:\n        prompt: go\n        x: {value}\n"
            )
        };
        let shallow = task(&format!("{}{}", "[".repeat(20), "]".repeat(20)));
        assert!(parse_plan(&shallow, "p", PlanFormat::Yaml).is_ok());
        let deep = task(&format!("{}{}", "[".repeat(500), "]".repeat(500)));
        assert!(parse_plan(&deep, "p", PlanFormat::Yaml).is_err());

        let mut bomb = String::from(
            "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt:\n      name: inference\n      params:\n        prompt: go\n        l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n",
        );
        for i in 1..9 {
            let prev = format!("*l{}", i - 1);
            bomb.push_str(&format!(
                "        l{i}: &l{i} [{}]\n",
                vec![prev; 10].join(", ")
            ));
        }
        let err = parse_plan(&bomb, "p", PlanFormat::Yaml).unwrap_err();
        assert!(matches!(err, PlanError::Syntax { .. }), "{err}");

        let deep_json = format!(
            "{{\"schema_version\": 1, \"sub_tasks\": [{{\"id\": \"a\", \"description\": \"A\", \"tool_or_prompt\": {{\"name\": \"inference\", \"params\": {{\"prompt\": \"go\", \"x\": {}{}}}}}}}]}}",
            "[".repeat(1000),
            "]".repeat(1000)
        );
        let (_, _, _, m) = syntax(parse_plan(&deep_json, "p", PlanFormat::Json).unwrap_err());
        assert!(m.contains("recursion limit"), "{m}");
    }

    #[test]
    fn byte_order_marks_and_crlf_are_fine() {
        let json = "\u{feff}{\"schema_version\": 1, \"sub_tasks\": []}";
        assert!(parse_plan(json, "p", PlanFormat::Json).is_ok());
        let yaml = "\u{feff}schema_version: 1\r\nsub_tasks: []\r\n";
        assert!(parse_plan(yaml, "p", PlanFormat::Yaml).is_ok());
        let (line, column, field, _) = syntax(
            parse_plan(
                "schema_version: 1\r\nsub_tasks: []\r\ngaol: x\r\n",
                "p",
                PlanFormat::Yaml,
            )
            .unwrap_err(),
        );
        assert_eq!(
            (line, column, field.as_deref()),
            (Some(3), Some(1), Some("gaol"))
        );
    }

    #[test]
    fn anchors_share_lists_between_tasks() {
        let text = "schema_version: 1\nentities: [{name: Board, grounded_value: 10 x 20}]\nsub_tasks:\n  - id: a\n    description: A\n    entity_context: &board\n      - {entity_name: Board, intent_relevance: constraint}\n    tool_or_prompt: &tool {name: inference, params: {prompt: go}}\n  - id: b\n    description: B\n    entity_context: *board\n    tool_or_prompt: *tool\n";
        let plan = parse_plan(text, "p", PlanFormat::Yaml).unwrap();
        assert_eq!(
            plan.sub_tasks[0].entity_context,
            plan.sub_tasks[1].entity_context
        );
        assert_eq!(
            plan.sub_tasks[0].tool_or_prompt,
            plan.sub_tasks[1].tool_or_prompt
        );
    }

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let big = " ".repeat(MAX_PLAN_BYTES + 1);
        let err = parse_plan(&big, "big.yaml", PlanFormat::Yaml).unwrap_err();
        assert!(matches!(err, PlanError::TooLarge { .. }));
        assert!(err.to_string().starts_with("big.yaml: "));
    }

    #[test]
    fn load_plan_names_the_path() {
        let err = load_plan(Path::new("/nonexistent/dir/plan.yaml")).unwrap_err();
        assert!(matches!(err, PlanError::Io { .. }));
        assert!(
            err.to_string().starts_with("/nonexistent/dir/plan.yaml: "),
            "{err}"
        );
        assert_eq!(err.origin(), "/nonexistent/dir/plan.yaml");
    }

    #[test]
    fn load_plan_sniffs_unknown_extensions() {
        let dir = std::env::temp_dir().join(format!("ctx-model-sniff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("plan.txt");
        std::fs::write(&json, r#"{"schema_version": 1, "sub_tasks": [], "bad": 1}"#).unwrap();
        let err = load_plan(&json).unwrap_err();
        assert!(
            matches!(
                err,
                PlanError::Syntax {
                    format: PlanFormat::Json,
                    ..
                }
            ),
            "{err}"
        );
        let yaml = dir.join("plan");
        std::fs::write(&yaml, "schema_version: 1\nsub_tasks: []\n").unwrap();
        assert!(load_plan(&yaml).unwrap().sub_tasks.is_empty());
        let bad = dir.join("bad.yaml");
        std::fs::write(&bad, b"schema_version: 1\n\xff\n").unwrap();
        assert!(matches!(
            load_plan(&bad).unwrap_err(),
            PlanError::NotUtf8 { offset: 18, .. }
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
