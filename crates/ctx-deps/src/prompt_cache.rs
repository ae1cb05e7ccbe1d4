//! What a task's call tells the provider's prefix cache: the
//! `prompt_cache_key` of `config.cache_key: auto` and the breakpoints of
//! `config.cache_breakpoints` (ctx-model's `prompt_cache` says what the
//! settings mean).
//!
//! Both rest on one notion, the call's **shared prefix**: the system
//! prompt the task sets, then its prompt up to the end of the last block
//! other calls can send byte for byte too. That is the end of the blocks
//! ctx assembles (entities, dependency outputs; ctx-prompt's
//! `BlockEnds`), and for an item of a map, further: up to the item
//! placeholder in the map's prompt, which every item of the map shares.
//! Only text the plan decides is in it, never a run id or a time, so the
//! same plan and inputs give the same key in every run.
//!
//! Judge and summary calls get breakpoints too, after the parts they
//! share with other calls of their kind ([`side_call_breakpoints`]).

use ctx_engine::{CacheBreakpoints, InferenceRequest};
use ctx_model::prompt_cache::{Breakpoint, CacheKey, MAX_BREAKPOINTS};
use ctx_model::{Plan, SubTask};
use ctx_prompt::AssembledPrompt;

/// The request parameter OpenAI routes its prompt cache by.
pub const CACHE_KEY_PARAM: &str = "prompt_cache_key";

/// Sets `request`'s cache key and breakpoints as `plan`'s config asks, for
/// `task`'s call with prompt `assembled` (whose text is the request's
/// prompt).
pub(crate) fn apply(
    plan: &Plan,
    task: &SubTask,
    assembled: &AssembledPrompt,
    request: &mut InferenceRequest,
) {
    let shared = shared_end(plan, task, assembled);
    if plan.config.cache_key == CacheKey::Auto
        && !request.params.extra.contains_key(CACHE_KEY_PARAM)
        && let Some(key) = cache_key(request.params.system.as_deref(), &assembled.text[..shared])
    {
        request
            .params
            .extra
            .insert(CACHE_KEY_PARAM.into(), serde_json::Value::String(key));
    }
    if let Some(cfg) = &plan.config.cache_breakpoints {
        let own_prompt_end = (assembled.block_ends.dependencies
            + task.tool_or_prompt.params.prompt.len())
        .min(assembled.text.len());
        let mut offsets: Vec<usize> = cfg
            .after
            .iter()
            .filter_map(|b| match b {
                Breakpoint::System => None,
                Breakpoint::Entities => Some(assembled.block_ends.entities),
                Breakpoint::Dependencies => (assembled.block_ends.dependencies
                    > assembled.block_ends.entities)
                    .then_some(assembled.block_ends.dependencies),
                Breakpoint::Shared => Some(shared),
                Breakpoint::Prompt => Some(own_prompt_end),
            })
            .filter(|&o| o > 0 && assembled.text.is_char_boundary(o))
            .collect();
        offsets.sort_unstable();
        offsets.dedup();
        request.cache_breakpoints = Some(CacheBreakpoints {
            models: cfg.models,
            system: cfg.after.contains(&Breakpoint::System),
            prompt_offsets: offsets,
        });
    }
}

/// The breakpoints of a call that is not a task's own, a judge's or a
/// summary's, whose `prompt` shares its text up to each of `shared_ends`
/// (bytes) with other calls of its kind: `None` unless the plan sets
/// `config.cache_breakpoints`.
///
/// Such a call has none of a task's blocks (entities, dependency
/// outputs), so `after`'s block names do not place its breakpoints: it
/// gets one at the end of each part it shares (a judge's rubric, up to
/// the answer it judges; a summary's instructions, and under
/// `summary_focus: dependent` the output all its dependents' calls
/// summarise), and one after the system message when `after` names
/// `system`. Ends out of range, off a character boundary or at 0 are
/// dropped, and at most [`MAX_BREAKPOINTS`] go out in all, the earliest
/// kept (a later one is worth nothing without the prefix before it being
/// the same).
pub(crate) fn side_call_breakpoints(
    plan: &Plan,
    prompt: &str,
    shared_ends: &[usize],
) -> Option<CacheBreakpoints> {
    let cfg = plan.config.cache_breakpoints.as_ref()?;
    let system = cfg.after.contains(&Breakpoint::System);
    let mut offsets: Vec<usize> = shared_ends
        .iter()
        .copied()
        .filter(|&o| o > 0 && o <= prompt.len() && prompt.is_char_boundary(o))
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    offsets.truncate(MAX_BREAKPOINTS - usize::from(system));
    Some(CacheBreakpoints {
        models: cfg.models,
        system,
        prompt_offsets: offsets,
    })
}

/// Where `task`'s shared prefix ends in `assembled.text`, in bytes (see
/// the module documentation): the end of the blocks, and for an item of a
/// map, the end of the map prompt's text before the item placeholder.
pub(crate) fn shared_end(plan: &Plan, task: &SubTask, assembled: &AssembledPrompt) -> usize {
    let blocks = assembled.block_ends.dependencies;
    let own = &task.tool_or_prompt.params.prompt;
    let before_item = ctx_model::map::parse_item_id(&task.id)
        .and_then(|(map_id, _)| plan.task(map_id))
        .and_then(|map_task| {
            let m = map_task.map.as_ref()?;
            let template = &map_task.tool_or_prompt.params.prompt;
            let at = template.find(&format!("{{{{{}}}}}", m.item))?;
            // The item's prompt is the template filled: the same bytes up
            // to the placeholder.
            (own.as_bytes().get(..at) == Some(&template.as_bytes()[..at])).then_some(at)
        })
        .unwrap_or(0);
    (blocks + before_item).min(assembled.text.len())
}

/// The `prompt_cache_key` of a call whose task sets `system` and whose
/// prompt's shared prefix is `shared`: `ctx-` and the first 16 hex digits
/// of their SHA-256; `None` when nothing is shared.
pub fn cache_key(system: Option<&str>, shared: &str) -> Option<String> {
    if shared.is_empty() && system.is_none_or(str::is_empty) {
        return None;
    }
    let hash = ctx_store::fingerprint::sha256_fields(&[
        system.unwrap_or("").as_bytes(),
        shared.as_bytes(),
    ]);
    Some(format!("ctx-{}", &hash[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(after: &str) -> Plan {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "config": {"cache_breakpoints": {"after": serde_json::from_str::<serde_json::Value>(after).unwrap()}},
            "sub_tasks": [{"id": "a", "description": "a",
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "x"}}}]
        }))
        .unwrap()
    }

    /// However many shared ends a call names, a request holds at most
    /// four breakpoints, the system message's counted, the earliest kept;
    /// ends at 0, past the prompt or inside a character are dropped.
    #[test]
    fn a_side_call_never_gets_more_than_four_breakpoints() {
        let prompt = "abcdéfghij";
        let ends = [9, 1, 0, 3, 5, 2, 99, 9, 7, 11];
        let with_system = side_call_breakpoints(&plan(r#"["system"]"#), prompt, &ends).unwrap();
        assert!(with_system.system);
        assert_eq!(with_system.prompt_offsets, [1, 2, 3]);
        let without = side_call_breakpoints(&plan(r#"["shared"]"#), prompt, &ends).unwrap();
        assert!(!without.system);
        // 5 is inside "é" (bytes 4..6): dropped.
        assert_eq!(without.prompt_offsets, [1, 2, 3, 7]);
        let mut none = plan("[]");
        none.config.cache_breakpoints = None;
        assert_eq!(side_call_breakpoints(&none, prompt, &ends), None);
    }
}
