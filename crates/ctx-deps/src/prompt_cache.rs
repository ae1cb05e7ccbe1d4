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

use ctx_engine::{CacheBreakpoints, InferenceRequest};
use ctx_model::prompt_cache::{Breakpoint, CacheKey};
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
