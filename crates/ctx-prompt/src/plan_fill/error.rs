//! Why a plan could not be filled.

use ctx_model::HISTORICAL_CONTEXT;
use ctx_model::tokenizer::UnknownTokenizer;

use crate::template::RenderError;

/// Why a plan could not be filled; nothing has run.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    /// A value for a name the plan does not declare.
    #[error("{name}: the plan declares no such variable{}", known_names(known))]
    Undeclared {
        /// The name given.
        name: String,
        /// The declared names.
        known: Vec<String>,
    },
    /// A value for `HISTORICAL_CONTEXT`, which the digest fills.
    #[error("{HISTORICAL_CONTEXT}: reserved; the plan's history digest fills it")]
    Reserved,
    /// Required variables without a value.
    #[error("{}", missing_message(names))]
    Missing {
        /// Their names, in declaration order.
        names: Vec<String>,
    },
    /// A `json` variable's value does not parse.
    #[error("{name}: not JSON (type: json) at line {line}, column {column}: {message}")]
    NotJson {
        /// The variable.
        name: String,
        /// 1-based line of the value.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's reason.
        message: String,
    },
    /// A value over its `max_tokens`.
    #[error(
        "{name}: the value is {tokens} tokens ({tokenizer}, task \"{task_id}\"), over its max_tokens {max}"
    )]
    TooManyTokens {
        /// The variable.
        name: String,
        /// Its count under `tokenizer`.
        tokens: usize,
        /// The limit.
        max: usize,
        /// The tokenizer that counted the most.
        tokenizer: String,
        /// A task that counts it with that tokenizer.
        task_id: String,
    },
    /// A task's tokenizer is unknown (validation reports it first).
    #[error(transparent)]
    Tokenizer(#[from] UnknownTokenizer),
    /// `{{HISTORICAL_CONTEXT}}` is used and no digest was given.
    #[error("{field}: {{{{{HISTORICAL_CONTEXT}}}}} is used, but no history digest was given")]
    NoDigest {
        /// The first field that uses it.
        field: String,
    },
    /// A template did not render (a trusted value with a fence tag, a
    /// broken fence, a lint finding). The source names the field as its
    /// template's path, with the line inside it.
    #[error("{source}")]
    Render {
        /// The field.
        field: String,
        /// Why.
        #[source]
        source: RenderError,
    },
    /// A value filled into a map task's prompt holds the text of its item
    /// placeholder, which the expansion would take for an item's place.
    #[error(
        "{field}: a value holds the text {{{{{item}}}}}, the item placeholder of this map task"
    )]
    ItemInValue {
        /// The field.
        field: String,
        /// The placeholder name (`map.as`).
        item: String,
    },
    /// A map over a variable whose value gives no list of items.
    #[error("task \"{task_id}\": map over {over}: {source}")]
    MapSource {
        /// The map task.
        task_id: String,
        /// The variable.
        over: String,
        /// What the value gives instead.
        #[source]
        source: ctx_model::map::MapSourceError,
    },
    /// A task's filled own prompt is over `max_prompt_tokens`.
    #[error(
        "task \"{task_id}\": the filled params.prompt is {tokens} tokens, over max_prompt_tokens {cap}{}",
        largest_part(largest)
    )]
    OverCap {
        /// The task.
        task_id: String,
        /// Tokens of its filled prompt.
        tokens: usize,
        /// The cap.
        cap: usize,
        /// The largest variable in it and its tokens.
        largest: Option<(String, usize)>,
    },
    /// A filled `publish` path that leaves the root.
    #[error("task \"{task_id}\": publish path \"{path}\" {reason}")]
    PublishPath {
        /// The task.
        task_id: String,
        /// The filled path.
        path: String,
        /// Why.
        reason: String,
    },
    /// Two tasks publish to one filled path.
    #[error("tasks \"{first}\" and \"{second}\" both publish to \"{path}\"")]
    PublishCollision {
        /// The first task.
        first: String,
        /// The second.
        second: String,
        /// The path.
        path: String,
    },
}

impl FillError {
    /// Whether the error is the cap (`ctx render`'s over-budget class):
    /// every other one is bad input.
    pub fn is_over_cap(&self) -> bool {
        matches!(self, FillError::OverCap { .. })
    }
}

fn known_names(known: &[String]) -> String {
    if known.is_empty() {
        " (it declares no variables)".into()
    } else {
        format!(" (declared: {})", known.join(", "))
    }
}

fn missing_message(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n}: required, and no value was given"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn largest_part(largest: &Option<(String, usize)>) -> String {
    match largest {
        Some((name, tokens)) => {
            format!("; its largest variable is {{{{{name}}}}} at {tokens} tokens")
        }
        None => String::new(),
    }
}
