//! Under `config.layout: cache` the blocks sibling tasks share are byte
//! for byte the same, whatever order their dependencies completed in and
//! whatever order each task lists them in (issue 24): a provider's prefix
//! cache needs a byte-identical prefix.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ctx_deps::{Executor, ExecutorOptions, MemoryStore};
use ctx_model::{Plan, PromptLayout};
use ctx_test_support::recorder::Recorder;

/// Producers `p0`, `p1`, `p2`; siblings `a` and `b` use all three and
/// the same entities, each listing them in its own order.
fn plan(layout: PromptLayout) -> Plan {
    let mut plan: Plan = serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "entities": [
            {"name": "Region", "grounded_value": "north"},
            {"name": "Week", "grounded_value": "2026-W48"},
            {"name": "Currency", "grounded_value": "EUR"}
        ],
        "sub_tasks": [
            {"id": "p0", "description": "Sales", "tool_or_prompt": {"name": "inference", "params": {"prompt": "sales"}}},
            {"id": "p1", "description": "Costs", "tool_or_prompt": {"name": "inference", "params": {"prompt": "costs"}}},
            {"id": "p2", "description": "Staff", "tool_or_prompt": {"name": "inference", "params": {"prompt": "staff"}}},
            {"id": "a", "description": "Summary", "dependencies": ["p2", "p0", "p1"],
             "entity_context": [{"entity_name": "Currency"}, {"entity_name": "Region"}, {"entity_name": "Week"}],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write the summary."}}},
            {"id": "b", "description": "Risks", "dependencies": ["p1", "p2", "p0"],
             "entity_context": [{"entity_name": "Week"}, {"entity_name": "Currency"}, {"entity_name": "Region"}],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "List the risks."}}}
        ]
    }))
    .unwrap();
    plan.config.layout = layout;
    plan
}

/// Runs the plan with the producers' latencies and returns the order they
/// finished in and each sibling's prompt without its own prompt.
async fn shared_parts(layout: PromptLayout, latencies: [u64; 3]) -> (Vec<String>, [String; 2]) {
    let latency_ms: BTreeMap<String, u64> =
        (0..3).map(|i| (format!("p{i}"), latencies[i])).collect();
    let engine = Arc::new(
        Recorder::new(|r| format!("the findings of {}\nwith a second line", r.task_id))
            .with_latency(move |r| {
                Duration::from_millis(latency_ms.get(&r.task_id).copied().unwrap_or(1))
            }),
    );
    let report = Executor::new(
        plan(layout),
        engine.clone(),
        Arc::new(MemoryStore::new()),
        ExecutorOptions::default(),
    )
    .unwrap()
    .run()
    .await
    .unwrap();
    assert!(report.all_completed());
    let shared = |id: &str, own: &str| {
        let prompt = engine.request(id).prompt;
        prompt.strip_suffix(own).unwrap().to_string()
    };
    let finished = engine.finished();
    (
        finished
            .iter()
            .filter(|id| id.starts_with('p'))
            .cloned()
            .collect(),
        [
            shared("a", "Write the summary."),
            shared("b", "List the risks."),
        ],
    )
}

#[tokio::test(start_paused = true)]
async fn siblings_share_their_blocks_byte_for_byte_whatever_the_completion_order() {
    let (order1, [a1, b1]) = shared_parts(PromptLayout::Cache, [30, 20, 10]).await;
    let (order2, [a2, b2]) = shared_parts(PromptLayout::Cache, [10, 20, 30]).await;
    assert_eq!(order1, ["p2", "p1", "p0"]);
    assert_eq!(order2, ["p0", "p1", "p2"]);
    assert!(a1.contains("## Entity Constraints") && a1.contains("### Task p2"));
    for other in [&b1, &a2, &b2] {
        assert_eq!(&a1, other);
    }
    // Plan order: the entities as the plan declares them, then p0, p1, p2.
    let at = |s: &str| a1.find(s).unwrap();
    assert!(at("- Region") < at("- Week") && at("- Week") < at("- Currency"));
    assert!(at("### Task p0") < at("### Task p1") && at("### Task p1") < at("### Task p2"));

    // The design layout follows each task's own listing: the siblings differ.
    let (_, [a, b]) = shared_parts(PromptLayout::Design, [30, 20, 10]).await;
    assert_ne!(a, b);
}
