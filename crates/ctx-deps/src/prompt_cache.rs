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
//! The key is an unsalted hash, and it is sent where the prompt is not:
//! in the request's parameters, which a proxy's or a provider's logs may
//! keep when they drop message content. Anyone who reads it and knows the
//! rest of the prefix (the plan is often in a repository; a stored prompt
//! shows a secret as `[secret NAME]`) can test guesses of what is
//! missing, offline. So the key is never computed from a `secret: true`
//! variable's text: [`cache_key`] hashes the prefix with each secret
//! shown as `[secret NAME]`, as a store shows it, and without the end of
//! a secret the prefix's end cuts through. Runs that differ only in a
//! secret share a key, which costs nothing: the key only routes, and the
//! provider's cache still matches the prefix byte for byte.
//!
//! Judge and summary calls get breakpoints too, after the parts they
//! share with other calls of their kind (`side_call_breakpoints`).

use ctx_engine::{CacheBreakpoints, InferenceRequest};
use ctx_model::prompt_cache::{Breakpoint, CacheKey, MAX_BREAKPOINTS};
use ctx_model::{Plan, SubTask};
use ctx_prompt::AssembledPrompt;
use ctx_store::SecretMask;

/// The request parameter OpenAI routes its prompt cache by.
pub const CACHE_KEY_PARAM: &str = "prompt_cache_key";

/// Sets `request`'s cache key and breakpoints as `plan`'s config asks, for
/// `task`'s call with prompt `assembled` (whose text is the request's
/// prompt); the key is computed without the texts `secrets` hides.
pub(crate) fn apply(
    plan: &Plan,
    task: &SubTask,
    assembled: &AssembledPrompt,
    secrets: &SecretMask,
    request: &mut InferenceRequest,
) {
    let shared = shared_end(plan, task, assembled);
    if plan.config.cache_key == CacheKey::Auto
        && !request.params.extra.contains_key(CACHE_KEY_PARAM)
        && let Some(key) = cache_key(
            request.params.system.as_deref(),
            &assembled.text[..shared],
            secrets,
        )
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
/// of the SHA-256 of both, each with the texts `secrets` hides shown as
/// `[secret NAME]` and `shared` without a secret's beginning at its end
/// (`without_secret_start`): nothing of a secret goes into the key (see
/// the module documentation). `None` when nothing is shared.
pub fn cache_key(system: Option<&str>, shared: &str, secrets: &SecretMask) -> Option<String> {
    if shared.is_empty() && system.is_none_or(str::is_empty) {
        return None;
    }
    let system = secrets.apply(system.unwrap_or(""));
    let shared = secrets.apply(shared);
    let shared = without_secret_start(&shared, secrets);
    let hash = ctx_store::fingerprint::sha256_fields(&[system.as_bytes(), shared.as_bytes()]);
    Some(format!("ctx-{}", &hash[..16]))
}

/// `text` without the longest end of it that begins a text `secrets`
/// hides (a proper beginning: a whole one was already replaced). A
/// shared prefix ends where ctx cuts the prompt, not where a value ends,
/// so a secret could straddle the cut: its first part is left out of the
/// key. Text that merely ends like a secret begins loses those characters
/// too, in every run alike, so the key stays the same from run to run.
fn without_secret_start<'a>(text: &'a str, secrets: &SecretMask) -> &'a str {
    let cut = secrets
        .texts()
        .filter_map(|hidden| {
            hidden
                .char_indices()
                .skip(1)
                .map(|(i, _)| i)
                .filter(|&i| text.ends_with(&hidden[..i]))
                .max()
        })
        .max()
        .unwrap_or(0);
    &text[..text.len() - cut]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(pairs: &[(&str, &str)]) -> SecretMask {
        SecretMask::new(pairs.iter().map(|(n, t)| (n.to_string(), t.to_string())))
    }

    #[test]
    fn a_key_is_computed_without_the_secrets() {
        let none = SecretMask::default();
        let key = |secret: &str| {
            let m = mask(&[("PIN", secret)]);
            cache_key(
                Some(&format!("You hold PIN {secret}.")),
                &format!("## Entities\nPIN: {secret}\n\n"),
                &m,
            )
        };
        // Two runs that differ only in the secret share a key ...
        assert_eq!(key("4812"), key("9907"));
        // ... which is the key of the prefix as a store shows it, so the
        // key holds nothing to test a guess of the PIN against.
        assert_eq!(
            key("4812"),
            cache_key(
                Some("You hold PIN [secret PIN]."),
                "## Entities\nPIN: [secret PIN]\n\n",
                &none
            )
        );
        assert_ne!(
            key("4812"),
            cache_key(
                Some("You hold PIN 4812."),
                "## Entities\nPIN: 4812\n\n",
                &none
            )
        );
        // Without secrets the key is the hash of the text, as before.
        assert_eq!(
            cache_key(None, "abc", &none).as_deref(),
            Some(
                format!(
                    "ctx-{}",
                    &ctx_store::fingerprint::sha256_fields(&[b"", b"abc"])[..16]
                )
                .as_str()
            )
        );
        assert_eq!(cache_key(Some(""), "", &none), None);
    }

    #[test]
    fn a_secret_the_prefix_cuts_through_is_left_out() {
        let m = mask(&[("TOKEN", "sk-abcdef")]);
        // The prefix ends inside the secret: its beginning is dropped.
        assert_eq!(without_secret_start("key: sk-ab", &m), "key: ");
        assert_eq!(
            cache_key(None, "key: sk-ab", &m),
            cache_key(None, "key: ", &m)
        );
        assert_eq!(
            cache_key(None, "key: sk-abcde", &m),
            cache_key(None, "key: ", &m)
        );
        // A whole secret is replaced; text that does not end like one is
        // left alone.
        assert_eq!(
            without_secret_start("key: [secret TOKEN]", &m),
            "key: [secret TOKEN]"
        );
        assert_eq!(without_secret_start("plain", &m), "plain");
        // Multi-byte secrets are cut on character boundaries.
        let m = mask(&[("WORD", "été")]);
        assert_eq!(without_secret_start("un é", &m), "un ");
        assert_eq!(without_secret_start("un ét", &m), "un ");
    }

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
