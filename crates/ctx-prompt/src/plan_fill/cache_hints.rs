//! `ctx plan check`'s hints for `config.layout: cache`: a task prompt that
//! puts its own placeholder before text other calls share.
//!
//! ctx never rewrites an author's prompt, and under the cache layout the
//! task's own prompt comes last, after the blocks tasks share. Inside that
//! prompt, though, a shared placeholder (`{{HISTORICAL_CONTEXT}}`, or a
//! variable several tasks' prompts use) can only extend the cached prefix
//! if nothing that differs per task comes before it. A placeholder used by
//! this task's prompt alone before the first shared one ends the prefix
//! the calls could share there; the hint says so, and the author decides.

use std::collections::BTreeMap;
use std::fmt;

use ctx_model::{HISTORICAL_CONTEXT, Plan, PromptLayout};

use super::template_fields;

/// A task prompt whose own placeholder comes before shared text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheHint {
    /// The task.
    pub task_id: String,
    /// The prompt's field path.
    pub field: String,
    /// The placeholder only this task's prompt uses.
    pub own: String,
    /// The shared placeholder after it.
    pub shared: String,
    /// How many task prompts use the shared placeholder.
    pub sharers: usize,
}

impl fmt::Display for CacheHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task \"{}\": {}: {{{{{}}}}}, used by this prompt alone, comes before {{{{{}}}}}, \
             which {} task prompts share: under layout: cache the calls cannot share a cached \
             prefix past it (ctx does not reorder your prompt; put the shared text first)",
            self.task_id, self.field, self.own, self.shared, self.sharers
        )
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
        .collect();
    let mut users: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &prompts {
        for name in f.template.names() {
            *users.entry(name).or_default() += 1;
        }
    }
    let sharers = |name: &str| -> usize {
        match users.get(name).copied().unwrap_or(0) {
            n if name == HISTORICAL_CONTEXT || n >= 2 => n.max(1),
            _ => 0,
        }
    };
    let mut out = Vec::new();
    for f in &prompts {
        let mut own: Option<&str> = None;
        for p in &f.template.placeholders {
            let n = sharers(&p.name);
            if n > 0 {
                if let Some(own) = own {
                    out.push(CacheHint {
                        task_id: plan.sub_tasks[f.task.unwrap_or_default()].id.clone(),
                        field: f.field.clone(),
                        own: own.to_string(),
                        shared: p.name.clone(),
                        sharers: n,
                    });
                }
                break;
            }
            own = own.or(Some(p.name.as_str()));
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
                hints[0].sharers
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
}
