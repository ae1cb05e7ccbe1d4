//! What the executor tells the provider's prefix cache on each call
//! (issue 24): `config.cache_key: auto` sets one `prompt_cache_key` per
//! shared prefix, the same in every run, and `config.cache_breakpoints`
//! marks where the shared blocks end, for a map's items up to the item.

use std::collections::BTreeMap;
use std::sync::Arc;

use ctx_deps::{Executor, ExecutorOptions, InferenceRequest, MemoryStore};
use ctx_model::Plan;
use ctx_model::prompt_cache::{Breakpoint, BreakpointModels, CacheBreakpoints, CacheKey};
use ctx_store::SecretMask;
use ctx_test_support::recorder::Recorder;

const GUIDE: &str = "Read each note against the project's guide.";

/// Siblings `a` and `b` share the entity block; map `m` of three items
/// over a JSON variable shares the entity block and its guide before the
/// item; `own` sets its own key.
fn plan(key: CacheKey, breakpoints: Option<CacheBreakpoints>) -> Plan {
    let mut plan: Plan = serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "config": {"layout": "cache"},
        "variables": [{"name": "NOTES", "type": "json"}],
        "entities": [
            {"name": "Region", "grounded_value": "north"},
            {"name": "Week", "grounded_value": "2026-W48"}
        ],
        "sub_tasks": [
            {"id": "a", "description": "Summary",
             "entity_context": [{"entity_name": "Region"}, {"entity_name": "Week"}],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write the summary."}}},
            {"id": "b", "description": "Risks",
             "entity_context": [{"entity_name": "Week"}, {"entity_name": "Region"}],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "List the risks."}}},
            {"id": "m", "description": "Each note",
             "entity_context": [{"entity_name": "Region"}, {"entity_name": "Week"}],
             "map": {"over": "NOTES", "as": "NOTE", "max_items": 5},
             "tool_or_prompt": {"name": "inference", "params": {
                 "prompt": format!("{GUIDE}\n<untrusted-content>\n{{{{NOTE}}}}\n</untrusted-content>\nWhy?")}}},
            {"id": "own", "description": "Own key",
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Mine.", "prompt_cache_key": "mine"}}}
        ]
    }))
    .unwrap();
    plan.sub_tasks[2].map.as_mut().unwrap().variable_value =
        Some(r#"["first note", "second, longer note", "third"]"#.into());
    plan.config.cache_key = key;
    plan.config.cache_breakpoints = breakpoints;
    plan
}

async fn requests(plan: &Plan) -> BTreeMap<String, InferenceRequest> {
    requests_with(plan, ExecutorOptions::default()).await
}

async fn requests_with(
    plan: &Plan,
    options: ExecutorOptions,
) -> BTreeMap<String, InferenceRequest> {
    let engine = Arc::new(Recorder::new(|r| format!("answer of {}", r.task_id)));
    let report = Executor::new(
        plan.clone(),
        engine.clone(),
        Arc::new(MemoryStore::new()),
        options,
    )
    .unwrap()
    .run()
    .await
    .unwrap();
    assert!(report.all_completed());
    engine
        .requests()
        .into_iter()
        .map(|r| (r.task_id.clone(), r))
        .collect()
}

fn key(r: &InferenceRequest) -> Option<&str> {
    r.params
        .extra
        .get("prompt_cache_key")
        .and_then(|v| v.as_str())
}

#[tokio::test]
async fn auto_keys_name_each_shared_prefix_the_same_in_every_run() {
    let auto = plan(CacheKey::Auto, None);
    let first = requests(&auto).await;
    let again = requests(&auto).await;
    let keys = |r: &BTreeMap<String, InferenceRequest>| -> BTreeMap<String, Option<String>> {
        r.iter()
            .map(|(id, r)| (id.clone(), key(r).map(String::from)))
            .collect()
    };
    assert_eq!(keys(&first), keys(&again), "no run id or time in a key");
    let k = |id: &str| key(&first[id]).unwrap_or_else(|| panic!("{id} has no key"));
    // Siblings sending the same entity block share a key.
    assert_eq!(k("a"), k("b"));
    assert!(
        k("a").starts_with("ctx-") && k("a").len() == 20,
        "{}",
        k("a")
    );
    // The items share theirs (the block and the guide before the item),
    // which differs from the siblings' (a longer prefix).
    assert_eq!(k("m[0]"), k("m[1]"));
    assert_eq!(k("m[1]"), k("m[2]"));
    assert_ne!(k("m[0]"), k("a"));
    // A task's own key wins; without the setting no key is set.
    assert_eq!(k("own"), "mine");
    let none = requests(&plan(CacheKey::None, None)).await;
    assert_eq!(key(&none["a"]), None);
    assert_eq!(key(&none["m[0]"]), None);
    assert!(none.values().all(|r| r.cache_breakpoints.is_none()));
}

/// `plan` filled with a secret PIN: in the system prompt of `a`, in an
/// entity every task shares, and in the map's guide before the item.
fn plan_with_pin(pin: &str) -> Plan {
    let mut p = plan(CacheKey::Auto, None);
    p.entities[0].grounded_value = Some(format!("north, door PIN {pin}"));
    p.sub_tasks[0].tool_or_prompt.params.system = Some(format!("Never say {pin}."));
    let m = &mut p.sub_tasks[2].tool_or_prompt.params.prompt;
    *m = format!("PIN {pin}. {m}");
    p
}

fn pin_options(pin: &str) -> ExecutorOptions {
    ExecutorOptions {
        secret_mask: SecretMask::new([("PIN".to_string(), pin.to_string())]),
        ..ExecutorOptions::default()
    }
}

/// A key travels where the prompt does not (request parameters, kept by
/// logs that drop messages): it must not be a hash of a secret that
/// anyone knowing the plan can test guesses against. Runs that differ
/// only in the secret send the same keys, those of the prompt as a store
/// shows it.
#[tokio::test]
async fn auto_keys_hold_nothing_of_a_secret() {
    let first = requests_with(&plan_with_pin("4812"), pin_options("4812")).await;
    let other = requests_with(&plan_with_pin("9907"), pin_options("9907")).await;
    for id in ["a", "b", "m[0]", "m[1]"] {
        assert!(first[id].prompt.contains("4812"), "{id}");
        assert_eq!(key(&first[id]), key(&other[id]), "{id}");
    }
    // What a guesser would compute from the plan and a guess of the PIN
    // is not the key sent.
    let shown = requests_with(&plan_with_pin("[secret PIN]"), ExecutorOptions::default()).await;
    let guessed = requests(&plan_with_pin("4812")).await;
    for id in ["a", "b", "m[0]"] {
        assert_eq!(key(&first[id]), key(&shown[id]), "{id}");
        assert_ne!(key(&first[id]), key(&guessed[id]), "{id}");
    }
}

#[tokio::test]
async fn breakpoints_mark_the_shared_blocks_and_an_items_shared_prompt() {
    let cfg = CacheBreakpoints {
        models: BreakpointModels::Anthropic,
        after: vec![
            Breakpoint::Prompt,
            Breakpoint::System,
            Breakpoint::Entities,
            Breakpoint::Shared,
        ],
    };
    let sent = requests(&plan(CacheKey::None, Some(cfg))).await;
    let item_texts = ["first note", "second, longer note", "third"];
    let mut shared_parts = Vec::new();
    for (i, text) in item_texts.iter().enumerate() {
        let r = &sent[&format!("m[{i}]")];
        let b = r.cache_breakpoints.as_ref().unwrap();
        assert!(b.system);
        assert_eq!(b.models, BreakpointModels::Anthropic);
        // After the entity block, before the item, at the prompt's end.
        let [entities, shared, end] = b.prompt_offsets[..] else {
            panic!("{:?}", b.prompt_offsets)
        };
        assert!(r.prompt[..entities].starts_with("## Entity Constraints"));
        assert!(r.prompt[..entities].ends_with("\n\n"));
        assert!(
            r.prompt[..shared].ends_with("<untrusted-content>\n"),
            "{:?}",
            &r.prompt[..shared]
        );
        assert!(r.prompt[shared..].starts_with(text));
        assert_eq!(end, r.prompt.len());
        shared_parts.push(r.prompt[..shared].to_string());
    }
    assert!(shared_parts.iter().all(|s| s == &shared_parts[0]));
    // A plain task's shared prefix ends with its blocks; `own` has none.
    let a = &sent["a"];
    let b = a.cache_breakpoints.as_ref().unwrap();
    let blocks_end = a.prompt.len() - "Write the summary.".len();
    assert_eq!(b.prompt_offsets, [blocks_end, a.prompt.len()]);
    assert_eq!(
        sent["own"]
            .cache_breakpoints
            .as_ref()
            .unwrap()
            .prompt_offsets,
        ["Mine.".len()]
    );
}
