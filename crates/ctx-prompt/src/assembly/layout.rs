//! The order blocks are rendered in under `config.layout`
//! ([`ctx_model::PromptLayout`]).
//!
//! Assembly decides *what* a prompt holds (which dependency outputs are
//! cut, which entities are dropped) in the design's order, and only then
//! renders it in the layout's order. The cap's decisions therefore never
//! depend on the layout: the drop order of entities ties on their position
//! in the task's `entity_context`, whatever order they are shown in. Under
//! `cache` the entity block lists the task's entities in the order of the
//! plan's `entities` (an entity the plan does not declare keeps its place
//! after them), so two tasks naming the same entities in a different order
//! send the same block. The dependency block's order is the caller's
//! ([`ctx_model::PromptLayout::dependency_order`]: the executor and the
//! estimate hand the outputs over in plan order under `cache`).

use std::collections::HashMap;

use ctx_model::{Plan, PromptLayout, ResolvedEntity};

/// The order in which `resolved` (a task's entities in design order) are
/// rendered: indexes into `resolved`.
pub(super) fn entity_order(plan: &Plan, resolved: &[ResolvedEntity]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..resolved.len()).collect();
    if plan.config.layout == PromptLayout::Cache && resolved.len() > 1 {
        let position: HashMap<&str, usize> = plan
            .entities
            .iter()
            .enumerate()
            .rev() // the first of duplicate names wins, as in `Plan::entity`
            .map(|(i, e)| (e.name.as_str(), i))
            .collect();
        order.sort_by_key(|&i| {
            position
                .get(resolved[i].name.as_str())
                .copied()
                .unwrap_or(usize::MAX)
        });
    }
    order
}

#[cfg(test)]
mod tests {
    use ctx_model::{Plan, PromptLayout};
    use ctx_tokens::{Tokenizer, TokenizerExt};
    use proptest::prelude::*;

    use crate::assembly::{AssembledPrompt, DEPENDENCY_HEADING, ENTITY_HEADING};
    use crate::{DependencyOutput, assemble_task_prompt};

    /// A consuming task: id, dependencies as listed (producer numbers),
    /// entities as listed (entity number, relevance), prompt.
    type Consumer<'a> = (&'a str, Vec<usize>, Vec<(usize, &'a str)>, &'a str);

    /// A plan of `producers` tasks `p0..` (no dependencies) and the tasks
    /// in `consumers`, each (id, dependencies as listed, entity names as
    /// listed with their relevance, prompt); the plan's entities are
    /// `e0..e{entities}` in that order.
    fn plan_of(
        entities: usize,
        producers: usize,
        consumers: &[Consumer<'_>],
        layout: PromptLayout,
    ) -> Plan {
        let mut tasks: Vec<serde_json::Value> = (0..producers)
            .map(|i| {
                serde_json::json!({"id": format!("p{i}"), "description": format!("produce {i}"),
                    "tool_or_prompt": {"name": "inference", "params": {"prompt": "make"}}})
            })
            .collect();
        for (id, deps, ents, prompt) in consumers {
            tasks.push(serde_json::json!({
                "id": id, "description": format!("use {id}"),
                "dependencies": deps.iter().map(|d| format!("p{d}")).collect::<Vec<_>>(),
                "entity_context": ents.iter().map(|(e, r)| serde_json::json!(
                    {"entity_name": format!("e{e}"), "intent_relevance": r})).collect::<Vec<_>>(),
                "tool_or_prompt": {"name": "inference", "params": {"prompt": prompt}}}));
        }
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "entities": (0..entities).map(|i| serde_json::json!(
                {"name": format!("e{i}"), "grounded_value": format!("value of e{i}")})).collect::<Vec<_>>(),
            "sub_tasks": tasks,
        }))
        .unwrap();
        plan.config.layout = layout;
        plan
    }

    /// The outputs of `plan`'s task `task` as the executor hands them
    /// over: in the layout's order of its listed dependencies.
    fn handed_over<'a>(
        plan: &'a Plan,
        task: usize,
        outputs: &'a [String],
    ) -> Vec<DependencyOutput<'a>> {
        let listed: Vec<usize> = plan.sub_tasks[task]
            .dependencies
            .iter()
            .map(|d| d[1..].parse().unwrap())
            .collect();
        plan.config
            .layout
            .dependency_order(listed)
            .into_iter()
            .map(|d| DependencyOutput {
                task_id: &plan.sub_tasks[d].id,
                description: &plan.sub_tasks[d].description,
                output: &outputs[d],
                summary: None,
            })
            .collect()
    }

    /// A prompt's blocks: each entity line, each dependency section and
    /// the task's own prompt, sorted (a multiset).
    fn blocks(p: &AssembledPrompt, own_prompt: &str) -> Vec<String> {
        let body = p
            .text
            .strip_suffix(own_prompt)
            .expect("the task's prompt comes last");
        let mut out = vec![own_prompt.to_string()];
        let (entity_block, dep_block) = match body.find(DEPENDENCY_HEADING) {
            Some(at) => body.split_at(at),
            None => (body, ""),
        };
        if let Some(lines) = entity_block.strip_prefix(ENTITY_HEADING) {
            out.extend(lines.lines().filter(|l| !l.is_empty()).map(String::from));
        }
        out.extend(
            dep_block
                .split("\n\n### Task ")
                .skip(1)
                .map(|section| section.trim_end_matches('\n').to_string()),
        );
        out.sort();
        out
    }

    /// The text before the task's own prompt: what sibling tasks can share.
    fn shared_part<'a>(p: &'a AssembledPrompt, own_prompt: &str) -> &'a str {
        p.text.strip_suffix(own_prompt).unwrap()
    }

    #[test]
    fn siblings_listing_shared_inputs_in_any_order_share_the_blocks_byte_for_byte() {
        let consumers = [
            (
                "a",
                vec![2, 0, 1],
                vec![(3, "constraint"), (0, "constraint"), (1, "constraint")],
                "Task a.",
            ),
            (
                "b",
                vec![1, 2, 0],
                vec![(1, "constraint"), (3, "constraint"), (0, "constraint")],
                "Task b, longer.",
            ),
        ];
        let outputs: Vec<String> = (0..3).map(|i| format!("output {i}\nline two")).collect();
        let c = Tokenizer::O200kBase.counter();
        let assemble = |plan: &Plan, t: usize| {
            assemble_task_prompt(
                plan,
                &plan.sub_tasks[t],
                &handed_over(plan, t, &outputs),
                &*c,
                4000,
            )
            .unwrap()
        };
        let cache = plan_of(4, 3, &consumers, PromptLayout::Cache);
        let (a, b) = (assemble(&cache, 3), assemble(&cache, 4));
        assert_eq!(
            shared_part(&a, "Task a."),
            shared_part(&b, "Task b, longer.")
        );
        let shared = shared_part(&a, "Task a.");
        // Plan order: e0, e1, e3; p0, p1, p2.
        let at = |s: &str| shared.find(s).unwrap();
        assert!(at("- e0") < at("- e1") && at("- e1") < at("- e3"));
        assert!(at("### Task p0") < at("### Task p1") && at("### Task p1") < at("### Task p2"));
        // The design layout keeps each task's own order, so the blocks differ.
        let design = plan_of(4, 3, &consumers, PromptLayout::Design);
        let (a, b) = (assemble(&design, 3), assemble(&design, 4));
        assert_ne!(
            shared_part(&a, "Task a."),
            shared_part(&b, "Task b, longer.")
        );
        assert!(
            a.text
                .starts_with(&format!("{ENTITY_HEADING}\n- e3: value of e3"))
        );
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("alpha"),
            Just("beta"),
            Just("gamma"),
            Just("delta"),
            Just("x"),
            Just("42")
        ]
        .prop_map(String::from)
    }

    fn text(max_words: usize) -> impl Strategy<Value = String> {
        prop::collection::vec(
            (word(), prop_oneof![Just(" "), Just("\n"), Just(", ")]),
            0..max_words,
        )
        .prop_map(|ws| {
            ws.into_iter()
                .map(|(w, s)| w + s)
                .collect::<String>()
                .trim()
                .to_string()
        })
    }

    fn relevance() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("constraint"),
            Just("partial"),
            Just("context"),
            Just("")
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The cache layout only reorders: whatever the cap, it holds, and
        /// the prompt has the same blocks (entity lines, dependency
        /// sections, the task's prompt) as the design layout's, cut and
        /// dropped alike; in both, `block_ends` marks where the entity
        /// block and the dependency block end.
        #[test]
        fn cache_layout_reorders_blocks_and_changes_nothing_else(
            entity_picks in prop::sample::subsequence((0..6usize).collect::<Vec<_>>(), 0..=6)
                .prop_shuffle(),
            relevances in prop::collection::vec(relevance(), 6),
            dep_picks in prop::sample::subsequence((0..5usize).collect::<Vec<_>>(), 0..=5)
                .prop_shuffle(),
            outputs in prop::collection::vec(text(120), 5),
            prompt in text(20).prop_map(|p| format!("Do it. {p}")),
            cap in 20usize..700,
            bpe in any::<bool>(),
        ) {
            let ents: Vec<(usize, &str)> =
                entity_picks.iter().map(|&e| (e, relevances[e])).collect();
            let consumers = [("t", dep_picks.clone(), ents, prompt.as_str())];
            let tokenizer = if bpe { Tokenizer::O200kBase } else { Tokenizer::Estimate };
            let c = tokenizer.counter();
            let run = |layout| {
                let plan = plan_of(6, 5, &consumers, layout);
                let deps = handed_over(&plan, 5, &outputs);
                assemble_task_prompt(&plan, &plan.sub_tasks[5], &deps, &*c, cap)
            };
            match (run(PromptLayout::Design), run(PromptLayout::Cache)) {
                (Ok(design), Ok(cache)) => {
                    for p in [&design, &cache] {
                        let ends = p.block_ends;
                        prop_assert_eq!(&p.text[ends.dependencies..], prompt.as_str());
                        prop_assert!(ends.entities <= ends.dependencies);
                        prop_assert_eq!(ends.entities == 0, !p.text.starts_with(ENTITY_HEADING));
                        let after = &p.text[ends.entities..];
                        prop_assert!(
                            after.starts_with(DEPENDENCY_HEADING) || ends.entities == ends.dependencies,
                            "{after:?}"
                        );
                    }
                    prop_assert!(cache.tokens <= cap);
                    prop_assert_eq!(cache.tokens, c.count(&cache.text));
                    prop_assert_eq!(blocks(&cache, &prompt), blocks(&design, &prompt));
                    let mut shortened = design.shortened_dependencies.clone();
                    shortened.sort();
                    let mut cache_shortened = cache.shortened_dependencies.clone();
                    cache_shortened.sort();
                    prop_assert_eq!(cache_shortened, shortened);
                    prop_assert_eq!(cache.dropped_entities, design.dropped_entities);
                }
                (Err(design), Err(cache)) => prop_assert_eq!(
                    std::mem::discriminant(&design),
                    std::mem::discriminant(&cache)
                ),
                (design, cache) => prop_assert!(false, "design {design:?}, cache {cache:?}"),
            }
        }
    }
}
