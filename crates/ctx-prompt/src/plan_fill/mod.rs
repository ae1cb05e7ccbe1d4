//! A plan's templates filled with its run-time values: the *filled plan*
//! a run executes.
//!
//! A plan's `params.prompt`, `params.system`, each entity's
//! `grounded_value(s)` and each `entity_context[].grounded_value` are
//! templates in `ctx render`'s language ([`crate::template`]): `{{NAME}}`
//! placeholders, classed by the plan's `variables:` (untrusted by default)
//! and `{{HISTORICAL_CONTEXT}}` (untrusted, filled by the digest). They
//! are filled here, once, before anything runs, by the same strict
//! one-pass [`render`] `ctx render` uses:
//! untrusted values neutralized, a trusted value holding a fence tag
//! refused, the fence tags of the result counted. The executor then runs
//! the filled plan as it runs any plan, so prompts, fingerprints and
//! cache keys follow from the filled text with no change to it, and a
//! text with no placeholder is byte for byte what it was.
//!
//! [`fill_plan`] refuses, before anything runs:
//! * a value for a name the plan does not declare, a missing required
//!   value, a `json` value that does not parse (with its line and column);
//! * a value over its variable's `max_tokens`, counted with the tokenizer
//!   of each task that uses it (the largest count decides);
//! * a task whose filled own prompt is over `max_prompt_tokens` (a filled
//!   value is part of the task's own prompt, which assembly never cuts),
//!   naming the largest variable in it ([`FillError::OverCap`]);
//! * a `publish` path that, filled, leaves the publish root or meets
//!   another task's.
//!
//! [`template_problems`] is what `ctx plan check` adds to the model's
//! problems: the template rules, located at their fields.

use std::collections::{BTreeMap, BTreeSet};

use ctx_model::tokenizer::UnknownTokenizer;
use ctx_model::{Class, HISTORICAL_CONTEXT, Plan, SubTask, VariableType, publish_path_problem};
use ctx_tokens::{TokenCounter, TokenizerExt};

use crate::template::{Classes, RenderError, Template, render};

mod digest;
mod lint;

pub use digest::{DigestSettings, plan_digest, plan_history};
pub use lint::template_problems;

#[cfg(test)]
mod tests;

/// One template field of a plan.
pub(crate) struct TemplateField {
    /// Its path (`sub_tasks[2].tool_or_prompt.params.prompt`).
    pub(crate) field: String,
    /// The task it belongs to, by position.
    pub(crate) task: Option<usize>,
    /// The text as a template (no front matter: a prompt may start with
    /// `---`).
    pub(crate) template: Template,
    /// Whether it is a `publish` path (trusted variables only).
    pub(crate) publish: bool,
}

/// Every template field of `plan`, in file order: the entities' values,
/// then each task's prompt, system, entity-context values and publish
/// path.
pub(crate) fn template_fields(plan: &Plan) -> Vec<TemplateField> {
    let mut out = Vec::new();
    let mut add = |field: String, task: Option<usize>, text: &str, publish: bool| {
        out.push(TemplateField {
            template: Template::parse_body(text, &field),
            field,
            task,
            publish,
        })
    };
    for (j, e) in plan.entities.iter().enumerate() {
        if let Some(v) = &e.grounded_value {
            add(format!("entities[{j}].grounded_value"), None, v, false);
        }
        for (k, v) in e.grounded_values.iter().flatten().enumerate() {
            add(
                format!("entities[{j}].grounded_values[{k}]"),
                None,
                v,
                false,
            );
        }
    }
    for (i, t) in plan.sub_tasks.iter().enumerate() {
        let params = &t.tool_or_prompt.params;
        add(
            format!("sub_tasks[{i}].tool_or_prompt.params.prompt"),
            Some(i),
            &params.prompt,
            false,
        );
        if let Some(s) = &params.system {
            add(
                format!("sub_tasks[{i}].tool_or_prompt.params.system"),
                Some(i),
                s,
                false,
            );
        }
        for (k, ec) in t.entity_context.iter().enumerate() {
            if let Some(v) = &ec.grounded_value {
                add(
                    format!("sub_tasks[{i}].entity_context[{k}].grounded_value"),
                    Some(i),
                    v,
                    false,
                );
            }
        }
        if let Some(p) = &t.publish {
            add(format!("sub_tasks[{i}].publish"), Some(i), p, true);
        }
    }
    out
}

/// The classes the plan's `variables:` declare (`HISTORICAL_CONTEXT` is
/// untrusted by the template rule, undeclared).
pub(crate) fn plan_classes(plan: &Plan) -> Classes {
    Classes::from_pairs(plan.variables.iter().map(|v| (v.name.clone(), v.class)))
}

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

/// A plan with its values in place, as it runs.
#[derive(Debug, Clone)]
pub struct FilledPlan {
    /// The plan with every template field filled and `publish` paths
    /// resolved.
    pub plan: Plan,
    /// Every declared variable's value as used (given, else its default),
    /// by name; a variable with neither is left out.
    pub values: BTreeMap<String, String>,
}

/// The values a run uses: each given value, else the declared default.
/// Refuses undeclared names, `HISTORICAL_CONTEXT`, missing required
/// values and `json` values that do not parse.
pub fn resolve_values(
    plan: &Plan,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, FillError> {
    for name in given.keys() {
        if name == HISTORICAL_CONTEXT {
            return Err(FillError::Reserved);
        }
        if !plan.variables.iter().any(|v| &v.name == name) {
            return Err(FillError::Undeclared {
                name: name.clone(),
                known: plan.variables.iter().map(|v| v.name.clone()).collect(),
            });
        }
    }
    let missing: Vec<String> = plan
        .variables
        .iter()
        .filter(|v| v.needs_value() && !given.contains_key(&v.name))
        .map(|v| v.name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(FillError::Missing { names: missing });
    }
    let mut values = BTreeMap::new();
    for v in &plan.variables {
        let Some(value) = given.get(&v.name).or(v.default.as_ref()) else {
            continue;
        };
        if v.value_type == VariableType::Json
            && let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(value)
        {
            return Err(FillError::NotJson {
                name: v.name.clone(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            });
        }
        values.insert(v.name.clone(), value.clone());
    }
    Ok(values)
}

/// Whether `plan` has anything to fill: a declared variable, or a
/// `{{HISTORICAL_CONTEXT}}` somewhere. A plan without either runs as
/// written.
pub fn has_templates(plan: &Plan) -> bool {
    !plan.variables.is_empty() || uses_digest(plan)
}

/// Whether a template field of `plan` uses `{{HISTORICAL_CONTEXT}}`.
pub fn uses_digest(plan: &Plan) -> bool {
    template_fields(plan)
        .iter()
        .any(|f| !f.publish && f.template.names().contains(HISTORICAL_CONTEXT))
}

/// Fills `plan` with `given` values and the history `digest` (the text
/// for `{{HISTORICAL_CONTEXT}}`, already fenced-neutral; see
/// [`plan_digest`]), checking every limit before anything runs.
///
/// `plan` is the plan as it will run, overrides applied: its
/// `max_prompt_tokens` and tokenizer are the ones checked.
pub fn fill_plan(
    plan: &Plan,
    given: &BTreeMap<String, String>,
    digest: Option<&str>,
) -> Result<FilledPlan, FillError> {
    let values = resolve_values(plan, given)?;
    let classes = plan_classes(plan);
    let mut all = values.clone();
    if let Some(d) = digest {
        all.insert(HISTORICAL_CONTEXT.to_string(), d.to_string());
    }
    let mut filled = plan.clone();
    // Which names each task's fields use, for the max_tokens counts (an
    // entity's value counts for every task it reaches).
    let mut names_by_task: Vec<BTreeSet<String>> = vec![BTreeSet::new(); plan.sub_tasks.len()];
    let mut entity_names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut publish_paths: BTreeMap<String, String> = BTreeMap::new();
    for f in template_fields(plan) {
        let names: BTreeSet<String> = f.template.names().into_iter().map(String::from).collect();
        if names.is_empty() {
            continue;
        }
        if names.contains(HISTORICAL_CONTEXT) && digest.is_none() {
            return Err(FillError::NoDigest { field: f.field });
        }
        let used: BTreeMap<String, String> = all
            .iter()
            .filter(|(k, _)| names.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let text = render(&f.template, &classes, &used)
            .map_err(|source| FillError::Render {
                field: f.field.clone(),
                source,
            })?
            .text;
        match f.task {
            Some(i) => names_by_task[i].extend(names.iter().cloned()),
            None => {
                let entity = entity_of_field(plan, &f.field);
                entity_names
                    .entry(entity)
                    .or_default()
                    .extend(names.iter().cloned());
            }
        }
        if f.publish {
            let task = &plan.sub_tasks[f.task.unwrap_or_default()];
            if let Some(reason) = publish_path_problem(&text) {
                return Err(FillError::PublishPath {
                    task_id: task.id.clone(),
                    path: text,
                    reason,
                });
            }
            let key = text.strip_prefix("./").unwrap_or(&text).to_string();
            if let Some(first) = publish_paths.insert(key, task.id.clone()) {
                return Err(FillError::PublishCollision {
                    first,
                    second: task.id.clone(),
                    path: text,
                });
            }
        }
        set_field(&mut filled, &f.field, text);
    }
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        for e in plan.resolve_entity_context(task) {
            if let Some(names) = entity_names.get(&e.name) {
                names_by_task[i].extend(names.iter().cloned());
            }
        }
    }
    check_limits(plan, &filled, &values, &all, &names_by_task)?;
    Ok(FilledPlan {
        plan: filled,
        values,
    })
}

/// The entity name of an `entities[j]…` field.
fn entity_of_field(plan: &Plan, field: &str) -> String {
    field
        .strip_prefix("entities[")
        .and_then(|r| r.split(']').next())
        .and_then(|j| j.parse::<usize>().ok())
        .and_then(|j| plan.entities.get(j))
        .map(|e| e.name.clone())
        .unwrap_or_default()
}

/// Writes `text` into the field [`template_fields`] named `field`.
fn set_field(plan: &mut Plan, field: &str, text: String) {
    let index = |s: &str| -> Vec<usize> {
        s.split('[')
            .skip(1)
            .filter_map(|p| p.split(']').next()?.parse().ok())
            .collect()
    };
    let ix = index(field);
    if field.starts_with("entities[") {
        let Some(e) = plan.entities.get_mut(ix[0]) else {
            return;
        };
        if field.ends_with(".grounded_value") {
            e.grounded_value = Some(text);
        } else if let Some(v) = e.grounded_values.as_mut().and_then(|vs| vs.get_mut(ix[1])) {
            *v = text;
        }
        return;
    }
    let Some(t) = plan.sub_tasks.get_mut(ix[0]) else {
        return;
    };
    if field.ends_with(".params.prompt") {
        t.tool_or_prompt.params.prompt = text;
    } else if field.ends_with(".params.system") {
        t.tool_or_prompt.params.system = Some(text);
    } else if field.ends_with(".publish") {
        t.publish = Some(text);
    } else if let Some(ec) = t.entity_context.get_mut(ix[1]) {
        ec.grounded_value = Some(text);
    }
}

/// The token limits, counted with each task's tokenizer: first each
/// variable's `max_tokens`, over every task that uses it (the largest
/// count decides, and the error names it), then each task's filled own
/// prompt against its cap.
fn check_limits(
    plan: &Plan,
    filled: &Plan,
    values: &BTreeMap<String, String>,
    all: &BTreeMap<String, String>,
    names_by_task: &[BTreeSet<String>],
) -> Result<(), FillError> {
    let mut counters = Vec::with_capacity(filled.sub_tasks.len());
    for task in &filled.sub_tasks {
        counters.push(crate::tokenizer_for_task(plan, task)?.counter());
    }
    for v in &plan.variables {
        let (Some(max), Some(value)) = (v.max_tokens, values.get(&v.name)) else {
            continue;
        };
        let mut largest: Option<(usize, usize)> = None; // (tokens, task)
        let mut counted: Vec<&str> = Vec::new();
        for (i, counter) in counters.iter().enumerate() {
            if !names_by_task[i].contains(&v.name) || counted.contains(&counter.name()) {
                continue;
            }
            counted.push(counter.name());
            if counter.fits(value, max) {
                continue;
            }
            let tokens = counter.count(value);
            if largest.is_none_or(|(t, _)| tokens > t) {
                largest = Some((tokens, i));
            }
        }
        if let Some((tokens, i)) = largest {
            return Err(FillError::TooManyTokens {
                name: v.name.clone(),
                tokens,
                max,
                tokenizer: counters[i].name().to_string(),
                task_id: filled.sub_tasks[i].id.clone(),
            });
        }
    }
    let cap = plan.config.max_prompt_tokens;
    for (i, task) in filled.sub_tasks.iter().enumerate() {
        if !names_by_task[i].is_empty() {
            check_cap(&plan.sub_tasks[i], task, all, &*counters[i], cap)?;
        }
    }
    Ok(())
}

/// `task` (as filled) against `cap`, naming the largest variable of its
/// original prompt when over.
fn check_cap(
    original: &SubTask,
    task: &SubTask,
    values: &BTreeMap<String, String>,
    counter: &dyn TokenCounter,
    cap: usize,
) -> Result<(), FillError> {
    let prompt = &task.tool_or_prompt.params.prompt;
    if counter.fits(prompt, cap) {
        return Ok(());
    }
    let template = Template::parse_body(&original.tool_or_prompt.params.prompt, "");
    let largest = template
        .names()
        .into_iter()
        .filter_map(|n| Some((n.to_string(), counter.count(values.get(n)?))))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
    Err(FillError::OverCap {
        task_id: task.id.clone(),
        tokens: counter.count(prompt),
        cap,
        largest,
    })
}

/// The class a plan gives `name` (`HISTORICAL_CONTEXT` untrusted), or
/// `None` when it declares no such variable.
pub fn class_of(plan: &Plan, name: &str) -> Option<Class> {
    if name == HISTORICAL_CONTEXT {
        return Some(Class::Untrusted);
    }
    plan.variables
        .iter()
        .find(|v| v.name == name)
        .map(|v| v.class)
}

/// A declared variable a cost estimate has no value for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithoutValue {
    /// The variable.
    pub name: String,
    /// Its `max_tokens`, the bound of its size when there is one.
    pub max_tokens: Option<usize>,
}

/// [`fill_plan`] for a cost estimate, which may be made before the week's
/// data exists: a required variable without a value stands in empty
/// (`null` for `json`), and so does the digest when `digest` is `None`;
/// each is returned, so the report can say what bounds it (its
/// `max_tokens`) or that nothing does. A task's prompt is priced up to
/// `max_prompt_tokens` whatever fills it, since a filled prompt over the
/// cap never runs.
pub fn fill_for_estimate(
    plan: &Plan,
    given: &BTreeMap<String, String>,
    digest: Option<&str>,
) -> Result<(FilledPlan, Vec<WithoutValue>), FillError> {
    let mut values = given.clone();
    let mut without = Vec::new();
    for v in &plan.variables {
        if v.needs_value() && !given.contains_key(&v.name) {
            let stand_in = match v.value_type {
                VariableType::Json => "null",
                VariableType::Text => "",
            };
            values.insert(v.name.clone(), stand_in.to_string());
            without.push(WithoutValue {
                name: v.name.clone(),
                max_tokens: v.max_tokens,
            });
        }
    }
    let digest = match digest {
        Some(d) => Some(d),
        None if uses_digest(plan) => {
            without.push(WithoutValue {
                name: HISTORICAL_CONTEXT.to_string(),
                max_tokens: None,
            });
            Some("")
        }
        None => None,
    };
    Ok((fill_plan(plan, &values, digest)?, without))
}
