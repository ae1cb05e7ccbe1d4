//! A map task's part of filling a plan: its item placeholder left in
//! place, and a map over a variable checked before anything runs.
//!
//! The item placeholder `{{AS}}` of a map task's prompt and system is
//! rendered as itself, so the filled plan keeps it for the expansion
//! (ctx-deps' `map` module), which fills it per item, neutralized. A
//! value that holds the text `{{AS}}` would then be taken for an item's
//! place, so such a value is refused here ([`FillError::ItemInValue`]).
//!
//! A map over a variable has its list before the run: it is resolved
//! here with [`ctx_model::map::resolve_items`] (the one resolution the
//! expansion uses too), so a pointer that does not reach an array, a
//! list over `max_items` or a bad item is exit 2 with nothing run, and
//! the value travels with the filled plan
//! ([`MapSpec::variable_value`](ctx_model::MapSpec::variable_value)).

use std::collections::BTreeMap;

use ctx_model::Plan;
use ctx_model::map::resolve_items;

use super::{FillError, TemplateField};

/// Refuses a filled field that holds more `{{item}}` texts than its
/// template has item placeholders: a value brought one in.
pub(super) fn check_item_placeholders(
    f: &TemplateField,
    item: &str,
    filled: &str,
) -> Result<(), FillError> {
    let mark = format!("{{{{{item}}}}}");
    let written = f
        .template
        .placeholders
        .iter()
        .filter(|p| p.name == item)
        .count();
    if filled.matches(&mark).count() != written {
        return Err(FillError::ItemInValue {
            field: f.field.clone(),
            item: item.to_string(),
        });
    }
    Ok(())
}

/// Each map over a variable: its list resolved and checked, its value
/// kept with the filled plan.
pub(super) fn resolve_variable_sources(
    filled: &mut Plan,
    values: &BTreeMap<String, String>,
) -> Result<(), FillError> {
    for task in &mut filled.sub_tasks {
        let Some(m) = task.map.as_mut() else { continue };
        if task.dependencies.contains(&m.over) {
            continue;
        }
        let Some(value) = values.get(&m.over) else {
            continue;
        };
        resolve_items(value, m.pointer.as_deref(), m.max_items.unwrap_or(0)).map_err(|source| {
            FillError::MapSource {
                task_id: task.id.clone(),
                over: m.over.clone(),
                source,
            }
        })?;
        m.variable_value = Some(value.as_str().into());
    }
    Ok(())
}
