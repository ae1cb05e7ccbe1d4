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

use ctx_model::{HISTORICAL_CONTEXT, Plan, VariableType, publish_path_problem};

use crate::template::{Classes, render};

mod cache_hints;
mod digest;
mod error;
mod fields;
mod limits;
mod lint;
mod map_fill;

pub use cache_hints::{CacheHint, cache_layout_hints};
pub use digest::{DigestSettings, plan_digest, plan_history};
pub use error::FillError;
pub(crate) use fields::{TemplateField, plan_classes, template_fields};
pub use lint::template_problems;

#[cfg(test)]
mod tests;

/// A plan with its values in place, as it runs.
#[derive(Debug, Clone)]
pub struct FilledPlan {
    /// The plan with every template field filled and `publish` paths
    /// resolved.
    pub plan: Plan,
    /// Every declared variable's value as used (given, else its default,
    /// else, for an optional one, empty: `null` for `json`), by name.
    pub values: BTreeMap<String, String>,
}

/// The values a run uses: each given value, else the declared default,
/// else, for an optional variable, the empty stand-in (`null` for `json`).
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
        // Every required one has a value by now; an optional one with
        // neither a value nor a default stands in empty.
        let value = given
            .get(&v.name)
            .or(v.default.as_ref())
            .cloned()
            .unwrap_or_else(|| stand_in(v.value_type).to_string());
        if v.value_type == VariableType::Json
            && let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&value)
        {
            return Err(FillError::NotJson {
                name: v.name.clone(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            });
        }
        values.insert(v.name.clone(), value);
    }
    Ok(values)
}

/// The empty value of a variable of type `value_type`, which stands in
/// for one that has no value: an optional variable without a default in
/// every command, and any variable in a cost estimate. `required: false`
/// would mean nothing without it (a run refused the variable anyway), and
/// a secret cannot have a default to fall back on. A `json` variable
/// stands in as `null`, the empty text not being JSON.
fn stand_in(value_type: VariableType) -> &'static str {
    match value_type {
        VariableType::Json => "null",
        VariableType::Text => "",
    }
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

/// The placeholder names task `task_id` of `plan` (a plan before
/// filling) reads: those in its own prompt, system and entity-context
/// values, and in the values of the plan's entities it is given. A
/// `publish` path is left out (it never reaches a prompt). Empty for a
/// task the plan does not have.
///
/// `ctx runs diff` names a changed variable (or digest) as the cause of
/// a task's change only when the task reads it, so the rule of which
/// text is a template stays here, with the filling.
pub fn task_placeholders(plan: &Plan, task_id: &str) -> BTreeSet<String> {
    let Some((index, task)) = plan
        .sub_tasks
        .iter()
        .enumerate()
        .find(|(_, t)| t.id == task_id)
    else {
        return BTreeSet::new();
    };
    let given: BTreeSet<String> = plan
        .resolve_entity_context(task)
        .into_iter()
        .map(|e| e.name)
        .collect();
    template_fields(plan)
        .iter()
        .filter(|f| !f.publish)
        .filter(|f| match f.task {
            Some(i) => i == index,
            None => given.contains(&fields::entity_of_field(plan, &f.field)),
        })
        .flat_map(|f| f.template.names().into_iter().map(str::to_string))
        .collect()
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
    let mut filled = fill_templates(plan, given, digest)?;
    map_fill::resolve_variable_sources(&mut filled.plan, &filled.values)?;
    Ok(filled)
}

/// [`fill_plan`] but for the lists of maps over variables, which are left
/// unresolved (a cost estimate bounds a map by its `max_items`).
fn fill_templates(
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
        let text = render_field(plan, &f, &names, &all, &classes)?;
        match f.task {
            Some(i) => names_by_task[i].extend(names.iter().cloned()),
            None => {
                let entity = fields::entity_of_field(plan, &f.field);
                entity_names
                    .entry(entity)
                    .or_default()
                    .extend(names.iter().cloned());
            }
        }
        if f.publish {
            check_publish_path(plan, &f, &text, &mut publish_paths)?;
        }
        fields::set_field(&mut filled, &f.field, text);
    }
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        for e in plan.resolve_entity_context(task) {
            if let Some(names) = entity_names.get(&e.name) {
                names_by_task[i].extend(names.iter().cloned());
            }
        }
    }
    limits::check_limits(plan, &filled, &values, &all, &names_by_task)?;
    Ok(FilledPlan {
        plan: filled,
        values,
    })
}

/// The text of one template field filled with the values it uses
/// (`names`, taken from `all`). A map task's item placeholder stays as
/// written, for the expansion to fill per item; it must then survive the
/// render as it was written.
fn render_field(
    plan: &Plan,
    f: &TemplateField,
    names: &BTreeSet<String>,
    all: &BTreeMap<String, String>,
    classes: &Classes,
) -> Result<String, FillError> {
    let mut used: BTreeMap<String, String> = all
        .iter()
        .filter(|(k, _)| names.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let item = fields::map_item_of_field(plan, f).filter(|i| names.contains(*i));
    let item_classes;
    let field_classes = match item {
        Some(item) => {
            used.insert(item.to_string(), format!("{{{{{item}}}}}"));
            item_classes = fields::field_classes(plan, f, ctx_model::Class::Trusted);
            &item_classes
        }
        None => classes,
    };
    let text = render(&f.template, field_classes, &used)
        .map_err(|source| FillError::Render {
            field: f.field.clone(),
            source,
        })?
        .text;
    if let Some(item) = item {
        map_fill::check_item_placeholders(f, item, &text)?;
    }
    Ok(text)
}

/// Refuses a filled `publish` path that is not a safe relative path, or
/// that another task already publishes to (`publish_paths`: each path,
/// without a leading `./`, and the task that claimed it first).
fn check_publish_path(
    plan: &Plan,
    f: &TemplateField,
    text: &str,
    publish_paths: &mut BTreeMap<String, String>,
) -> Result<(), FillError> {
    let task = &plan.sub_tasks[f.task.unwrap_or_default()];
    if let Some(reason) = publish_path_problem(text) {
        return Err(FillError::PublishPath {
            task_id: task.id.clone(),
            path: text.to_string(),
            reason,
        });
    }
    let key = text.strip_prefix("./").unwrap_or(text).to_string();
    if let Some(first) = publish_paths.insert(key, task.id.clone()) {
        return Err(FillError::PublishCollision {
            first,
            second: task.id.clone(),
            path: text.to_string(),
        });
    }
    Ok(())
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
            values.insert(v.name.clone(), stand_in(v.value_type).to_string());
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
    Ok((fill_templates(plan, &values, digest)?, without))
}
