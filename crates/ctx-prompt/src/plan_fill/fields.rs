//! A plan's template fields: which texts are templates, where each sits
//! (its field path), and writing a filled text back to its field.

use ctx_model::{Class, Plan};

use crate::template::{Classes, Template};

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

/// The classes of one template field: the plan's, and for the prompt and
/// system of a map task its item placeholder (`map.as`) in `item_class`.
/// The item is untrusted wherever it is judged (`ctx plan check`); the
/// fill gives it as trusted only to leave `{{AS}}` in place for the
/// expansion, which fills each item neutralized.
pub(crate) fn field_classes(plan: &Plan, f: &TemplateField, item_class: Class) -> Classes {
    let mut pairs: Vec<(String, Class)> = plan
        .variables
        .iter()
        .map(|v| (v.name.clone(), v.class))
        .collect();
    if let Some(item) = map_item_of_field(plan, f) {
        pairs.push((item.to_string(), item_class));
    }
    Classes::from_pairs(pairs)
}

/// The item placeholder name a field may hold: the `map.as` of its task,
/// for a map task's prompt and system only.
pub(crate) fn map_item_of_field<'p>(plan: &'p Plan, f: &TemplateField) -> Option<&'p str> {
    let task = plan.sub_tasks.get(f.task?)?;
    let m = task.map.as_ref()?;
    let own_text = f.field.ends_with(".params.prompt") || f.field.ends_with(".params.system");
    own_text.then_some(m.item.as_str())
}

/// The entity name of an `entities[j]…` field.
pub(super) fn entity_of_field(plan: &Plan, field: &str) -> String {
    field
        .strip_prefix("entities[")
        .and_then(|r| r.split(']').next())
        .and_then(|j| j.parse::<usize>().ok())
        .and_then(|j| plan.entities.get(j))
        .map(|e| e.name.clone())
        .unwrap_or_default()
}

/// Writes `text` into the field [`template_fields`] named `field`.
pub(super) fn set_field(plan: &mut Plan, field: &str, text: String) {
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
