//! `ctx plan check`'s hints for `config.layout: cache`: a task prompt that
//! puts text that differs per call before text other calls share.
//!
//! ctx never rewrites an author's prompt, and under the cache layout the
//! task's own prompt comes last, after the blocks tasks share. Inside that
//! prompt, though, a shared placeholder (`{{HISTORICAL_CONTEXT}}`, or a
//! variable two or more calls' prompts hold) can only extend the cached
//! prefix if nothing that differs per call comes before it. What differs
//! per call is a placeholder only one call fills (a variable one plain
//! task's prompt alone uses) and a map's item placeholder (`map.as`),
//! different in every item's call. The hint says so, and the author
//! decides.
//!
//! Calls are counted, not prompts: a map task's one prompt is sent once per
//! item, so it counts as its `max_items` calls (the item count is known
//! only once its source is read; `max_items` is its bound, and the number
//! a hint gives is "up to" it). A variable only a map's prompt uses is then
//! shared by all its items, and the item placeholder before it, the case
//! where the layout matters most, is hinted.

use std::collections::BTreeMap;
use std::fmt;

use ctx_model::{HISTORICAL_CONTEXT, Plan, PromptLayout, SubTask};

use super::template_fields;

/// A task prompt whose per-call placeholder comes before shared text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheHint {
    /// The task.
    pub task_id: String,
    /// The prompt's field path.
    pub field: String,
    /// The placeholder that differs per call: one only this call fills, or
    /// the map's item placeholder.
    pub own: String,
    /// Whether `own` is the map's item placeholder.
    pub own_is_item: bool,
    /// The shared placeholder after it.
    pub shared: String,
    /// How many calls hold the shared placeholder, a map's prompt counted
    /// as its `max_items`.
    pub calls: usize,
    /// Whether `calls` is a bound (a map's `max_items` is in it), not a
    /// count.
    pub at_most: bool,
}

impl fmt::Display for CacheHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let own = if self.own_is_item {
            "the map's item, different in each call"
        } else {
            "used by this prompt alone"
        };
        let up_to = if self.at_most { "up to " } else { "" };
        write!(
            f,
            "task \"{}\": {}: {{{{{}}}}}, {own}, comes before {{{{{}}}}}, which {up_to}{} calls \
             share: under layout: cache the calls cannot share a cached prefix past it (ctx does \
             not reorder your prompt; put the shared text first)",
            self.task_id, self.field, self.own, self.shared, self.calls
        )
    }
}

/// How many calls `task`'s prompt makes: one, or a map's `max_items` (its
/// bound; left out, which validation refuses, it counts as two: several)
/// with whether the number is a bound.
fn calls(task: &SubTask) -> (usize, bool) {
    match &task.map {
        Some(m) => (m.max_items.unwrap_or(2).max(1), true),
        None => (1, false),
    }
}

/// Every [`CacheHint`] of `plan`, in task order; none unless
/// `config.layout` is `cache`.
pub fn cache_layout_hints(plan: &Plan) -> Vec<CacheHint> {
    if plan.config.layout != PromptLayout::Cache {
        return Vec::new();
    }
    let prompts: Vec<_> = template_fields(plan)
        .into_iter()
        .filter(|f| !f.publish && f.task.is_some() && f.field.ends_with(".params.prompt"))
        .map(|f| {
            let task = &plan.sub_tasks[f.task.unwrap_or_default()];
            (f, task)
        })
        .collect();
    // Per placeholder: the calls that hold it, and whether a map's bound
    // is in the number.
    let mut users: BTreeMap<&str, (usize, bool)> = BTreeMap::new();
    for (f, task) in &prompts {
        let (n, bound) = calls(task);
        for name in f.template.names() {
            let u = users.entry(name).or_default();
            *u = (u.0 + n, u.1 || bound);
        }
    }
    let shared = |name: &str| -> Option<(usize, bool)> {
        let (n, bound) = users.get(name).copied().unwrap_or((0, false));
        (name == HISTORICAL_CONTEXT || n >= 2).then_some((n.max(1), bound))
    };
    let mut out = Vec::new();
    for (f, task) in &prompts {
        let item = task.map.as_ref().map(|m| m.item.as_str());
        let mut own: Option<&str> = None;
        for p in &f.template.placeholders {
            let is_item = item == Some(p.name.as_str());
            match shared(&p.name).filter(|_| !is_item) {
                Some((calls, at_most)) => {
                    if let Some(own) = own {
                        out.push(CacheHint {
                            task_id: task.id.clone(),
                            field: f.field.clone(),
                            own: own.to_string(),
                            own_is_item: item == Some(own),
                            shared: p.name.clone(),
                            calls,
                            at_most,
                        });
                    }
                    break;
                }
                None => own = own.or(Some(p.name.as_str())),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(layout: &str, prompts: &[&str]) -> Plan {
        let tasks: Vec<serde_json::Value> = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                serde_json::json!({"id": format!("t{i}"), "description": "d",
                "tool_or_prompt": {"name": "inference", "params": {"prompt": p}}})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "config": {"layout": layout},
            "variables": [{"name": "REGION"}, {"name": "SHARED"}],
            "sub_tasks": tasks,
        }))
        .unwrap()
    }

    #[test]
    fn an_own_placeholder_before_shared_text_is_hinted_under_the_cache_layout_only() {
        let prompts = [
            "For {{REGION}}: <untrusted-content>{{SHARED}}</untrusted-content>",
            "<untrusted-content>{{SHARED}}</untrusted-content> then more",
        ];
        let hints = cache_layout_hints(&plan("cache", &prompts));
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert_eq!(hints[0].task_id, "t0");
        assert_eq!(
            (
                hints[0].own.as_str(),
                hints[0].shared.as_str(),
                hints[0].calls
            ),
            ("REGION", "SHARED", 2)
        );
        assert!(hints[0].to_string().starts_with(
            "task \"t0\": sub_tasks[0].tool_or_prompt.params.prompt: {{REGION}}, used by this prompt alone, comes before {{SHARED}}"
        ));
        assert!(cache_layout_hints(&plan("design", &prompts)).is_empty());
    }

    #[test]
    fn the_digest_is_shared_even_when_one_prompt_uses_it() {
        let hints = cache_layout_hints(&plan(
            "cache",
            &["{{REGION}} <untrusted-content>{{HISTORICAL_CONTEXT}}</untrusted-content>"],
        ));
        assert_eq!(hints.len(), 1);
        assert_eq!(hints[0].shared, HISTORICAL_CONTEXT);
        // Shared text first: no hint.
        let hints = cache_layout_hints(&plan(
            "cache",
            &["<untrusted-content>{{HISTORICAL_CONTEXT}}</untrusted-content> {{REGION}}"],
        ));
        assert!(hints.is_empty());
    }

    /// A map task over `max_items` items whose prompt is `prompt`, beside
    /// a plain task that uses none of its variables.
    fn map_plan(max_items: usize, prompt: &str) -> Plan {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "config": {"layout": "cache"},
            "variables": [{"name": "LIST", "type": "json"}, {"name": "BRIEF", "class": "trusted"}],
            "sub_tasks": [
                {"id": "m", "description": "d",
                 "map": {"over": "LIST", "as": "ITEM", "max_items": max_items},
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": prompt}}},
                {"id": "other", "description": "d",
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "Go."}}},
            ],
        }))
        .unwrap()
    }

    /// A map's one prompt is sent once per item: a variable only it uses
    /// is shared by all its calls, and the item placeholder before it is
    /// hinted (it was not: the variable counted as one prompt's).
    #[test]
    fn a_map_s_item_before_what_its_items_share_is_hinted() {
        let item_first = "<untrusted-content>{{ITEM}}</untrusted-content> Follow {{BRIEF}}.";
        let hints = cache_layout_hints(&map_plan(20, item_first));
        assert_eq!(hints.len(), 1, "{hints:?}");
        let h = &hints[0];
        assert_eq!(
            (
                h.own.as_str(),
                h.own_is_item,
                h.shared.as_str(),
                h.calls,
                h.at_most
            ),
            ("ITEM", true, "BRIEF", 20, true)
        );
        assert!(h.to_string().contains(
            "{{ITEM}}, the map's item, different in each call, comes before {{BRIEF}}, which up to 20 calls share"
        ), "{h}");
        // The shared text first, or a map of one item: nothing to hint.
        let brief_first = "Follow {{BRIEF}}. <untrusted-content>{{ITEM}}</untrusted-content>";
        assert!(cache_layout_hints(&map_plan(20, brief_first)).is_empty());
        assert!(cache_layout_hints(&map_plan(1, item_first)).is_empty());
    }
}
