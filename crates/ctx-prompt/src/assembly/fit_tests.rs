//! Tests of the cap: the seed prompt, water filling, entity drops, and the
//! properties that the cap holds and nothing fits that need not be cut.

use super::*;
use crate::assembly::{DEPENDENCY_HEADING, ENTITY_HEADING};
use ctx_tokens::{Tokenizer, TokenizerExt};
use proptest::prelude::*;

const SEED_OUTPUT: &str = "<!DOCTYPE html>\n<html>\n<head>\n  <title>Tetris Game</title>\n</head>\n<body>\n  <canvas id=\"gameCanvas\" width=\"300\" height=\"600\"></canvas>\n  <!-- ... rest of HTML ... -->\n</body>\n</html>";
const SEED_PROMPT: &str = "Generate CSS styles to be embedded in the <style> tag. Style the game board with a subtle grid background...";

fn seed_plan() -> Plan {
    serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "entities": [
            {"name": "Game Area Dimensions", "grounded_value": "10 wide x 20 high"},
            {"name": "Output Format", "grounded_value": "Single standalone HTML file, vanilla JS/Canvas only"}
        ],
        "sub_tasks": [
            {"id": "1", "description": "Generate the complete HTML structure...",
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Generate the HTML."}}},
            {"id": "2", "description": "Develop CSS styles...",
             "entity_context": [
                {"entity_name": "Game Area Dimensions", "grounded_value": "10 wide x 20 high", "intent_relevance": "constraint"},
                {"entity_name": "Output Format", "grounded_value": "Single standalone HTML file, vanilla JS/Canvas only", "intent_relevance": "constraint"}
             ],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": SEED_PROMPT}},
             "dependencies": ["1"]}
        ]
    }))
    .unwrap()
}

/// Section 8 of IMPLEMENTATION_PLAN.md, "Final Prompt Sent to Inference".
const SEED_FINAL: &str = "## Entity Constraints and Values
- Game Area Dimensions: 10 wide x 20 high (constraint)
- Output Format: Single standalone HTML file, vanilla JS/Canvas only (constraint)

## Outputs from Dependent Tasks

### Task 1: Generate the complete HTML structure...
**Output:**
<!DOCTYPE html>
<html>
<head>
  <title>Tetris Game</title>
</head>
<body>
  <canvas id=\"gameCanvas\" width=\"300\" height=\"600\"></canvas>
  <!-- ... rest of HTML ... -->
</body>
</html>

---

Generate CSS styles to be embedded in the <style> tag. Style the game board with a subtle grid background...";

fn seed_dep() -> DependencyOutput<'static> {
    DependencyOutput {
        task_id: "1",
        description: "Generate the complete HTML structure...",
        output: SEED_OUTPUT,
        summary: None,
    }
}

#[test]
fn seed_section_8_byte_for_byte() {
    let plan = seed_plan();
    for t in [Tokenizer::Cl100kBase, Tokenizer::Estimate] {
        let c = t.counter();
        let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[seed_dep()], &*c, 4000).unwrap();
        assert_eq!(p.text, SEED_FINAL);
        assert_eq!(p.tokens, c.count(SEED_FINAL));
        assert_eq!(p.tokenizer, t.as_str());
        assert!(p.shortened_dependencies.is_empty() && p.dropped_entities.is_empty());
    }
    // A trailing newline on the output does not change the shape.
    let with_nl = format!("{SEED_OUTPUT}\n");
    let dep = DependencyOutput {
        output: &with_nl,
        ..seed_dep()
    };
    let c = Tokenizer::Estimate.counter();
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[dep], &*c, 4000).unwrap();
    assert_eq!(p.text, SEED_FINAL);
}

#[test]
fn empty_blocks_are_left_out() {
    let plan = seed_plan();
    let c = Tokenizer::Estimate.counter();
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[0], &[], &*c, 4000).unwrap();
    assert_eq!(p.text, "Generate the HTML.");
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[], &*c, 4000).unwrap();
    assert!(
        p.text
            .starts_with("## Entity Constraints and Values\n- Game")
    );
    assert!(p.text.ends_with("(constraint)\n\nGenerate CSS styles to be embedded in the <style> tag. Style the game board with a subtle grid background..."));
    assert!(!p.text.contains(DEPENDENCY_HEADING));
}

#[test]
fn llm_strategy_uses_the_summary_of_a_long_output_only() {
    let mut plan = seed_plan();
    plan.config.dependency.summarize_strategy = SummarizeStrategy::Llm;
    plan.config.dependency.max_output_length = Some(20);
    let c = Tokenizer::Estimate.counter();
    let mut task = plan.sub_tasks[0].clone();
    task.tool_or_prompt.params.prompt = "P".into();
    let long = "long output that ends with the conclusion: ship it";
    let dep = |output, summary| DependencyOutput {
        task_id: "a",
        description: "A",
        output,
        summary,
    };
    let p = assemble_task_prompt(&plan, &task, &[dep(long, Some("ship it"))], &*c, 4000).unwrap();
    assert!(p.text.contains("**Output:**\nship it\n"), "{}", p.text);
    // A short output without a summary is given whole.
    let p = assemble_task_prompt(&plan, &task, &[dep("short", None)], &*c, 4000).unwrap();
    assert!(p.text.contains("**Output:**\nshort\n"));
    // No summary (the call failed): the truncate form.
    let p = assemble_task_prompt(&plan, &task, &[dep(long, None)], &*c, 4000).unwrap();
    assert!(
        p.text.contains("**Output:**\nlong outpu...\n"),
        "{}",
        p.text
    );
    // A task's own strategy wins over the plan's.
    task.dependency.summarize_strategy = Some(SummarizeStrategy::Truncate);
    let p = assemble_task_prompt(&plan, &task, &[dep(long, Some("ship it"))], &*c, 4000).unwrap();
    assert!(
        p.text.contains("**Output:**\nlong outpu...\n"),
        "{}",
        p.text
    );
    // A summary is not cut by max_output_length (it is bounded in
    // tokens), but the cap still applies to it.
    task.dependency.summarize_strategy = None;
    let wordy = "word ".repeat(40);
    let p = assemble_task_prompt(&plan, &task, &[dep(long, Some(&wordy))], &*c, 4000).unwrap();
    assert!(p.text.contains(wordy.trim_end()));
    let p = assemble_task_prompt(&plan, &task, &[dep(long, Some(&wordy))], &*c, 30).unwrap();
    assert!(p.tokens <= 30 && p.shortened_dependencies == ["a"]);
}

#[test]
fn two_dependencies_each_end_with_a_rule() {
    let plan = seed_plan();
    let c = Tokenizer::Estimate.counter();
    let deps = [
        DependencyOutput {
            task_id: "a",
            description: "A",
            output: "out a",
            summary: None,
        },
        DependencyOutput {
            task_id: "b",
            description: "B",
            output: "out b\n\n",
            summary: Some("sum b"),
        },
    ];
    let mut task = plan.sub_tasks[0].clone();
    task.tool_or_prompt.params.prompt = "P".into();
    let p = assemble_task_prompt(&plan, &task, &deps, &*c, 4000).unwrap();
    assert_eq!(
        p.text,
        "## Outputs from Dependent Tasks\n\n### Task a: A\n**Output:**\nout a\n\n---\n\n### Task b: B\n**Output:**\nout b\n\n---\n\nP"
    );
    let mut plan2 = plan.clone();
    plan2.config.dependency.include_full_output = false;
    let p = assemble_task_prompt(&plan2, &task, &deps, &*c, 4000).unwrap();
    assert!(p.text.contains("**Output:**\nsum b\n"));
    assert!(
        p.text.contains("**Output:**\nout a\n"),
        "no summary: the output is used"
    );
}

#[test]
fn entity_type_shown_when_known_and_enabled() {
    let mut plan = seed_plan();
    plan.entities[0].entity_type = Some("dimension".into());
    let c = Tokenizer::Estimate.counter();
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[seed_dep()], &*c, 4000).unwrap();
    assert!(
        p.text
            .contains("- Game Area Dimensions [dimension]: 10 wide x 20 high (constraint)\n")
    );
    plan.config.entities.include_entity_type = false;
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[seed_dep()], &*c, 4000).unwrap();
    assert_eq!(p.text, SEED_FINAL);
}

#[test]
fn cap_shrinks_largest_output_first_then_drops_entities() {
    let mut plan = seed_plan();
    plan.config.dependency.max_output_length = None;
    plan.sub_tasks[1].entity_context[1].intent_relevance = Some("partial".into());
    let big = "lorem ipsum dolor sit amet ".repeat(200);
    let small = "tiny output";
    let deps = [
        DependencyOutput {
            task_id: "big",
            description: "Big",
            output: &big,
            summary: None,
        },
        DependencyOutput {
            task_id: "small",
            description: "Small",
            output: small,
            summary: None,
        },
    ];
    let c = Tokenizer::Cl100kBase.counter();
    let full = assemble_task_prompt(&plan, &plan.sub_tasks[1], &deps, &*c, 100_000).unwrap();
    let cap = full.tokens / 2;
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &deps, &*c, cap).unwrap();
    assert!(p.tokens <= cap);
    assert_eq!(p.tokens, c.count(&p.text));
    assert_eq!(p.shortened_dependencies, vec!["big".to_string()]);
    assert!(p.text.contains("**Output:**\ntiny output\n"));
    assert!(p.dropped_entities.is_empty());
    assert!(
        p.tokens + 20 >= cap,
        "the cap is used nearly whole: {} of {cap}",
        p.tokens
    );
    // Tight: outputs cut to `...`, then the partial entity goes first.
    let min_first_entity = {
        let mut q = plan.clone();
        q.sub_tasks[1].entity_context.truncate(1);
        let dd: Vec<_> = deps
            .iter()
            .map(|d| DependencyOutput {
                output: "...",
                ..*d
            })
            .collect();
        assemble_task_prompt(&q, &q.sub_tasks[1], &dd, &*c, 100_000)
            .unwrap()
            .tokens
    };
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &deps, &*c, min_first_entity).unwrap();
    assert_eq!(
        p.dropped_entities,
        vec!["Output Format".to_string()],
        "{}",
        p.text
    );
    assert!(p.text.contains("**Output:**\n...\n"));
    assert!(p.text.ends_with(SEED_PROMPT));
}

#[test]
fn entities_drop_lowest_relevance_first_ties_later_first() {
    let mut plan = seed_plan();
    let mk = |name: &str, rel: &str| ctx_model::EntityContext {
        entity_name: name.into(),
        intent_relevance: Some(rel.into()),
        grounded_value: Some("value value value".into()),
        usage_note: None,
    };
    plan.sub_tasks[1].entity_context = vec![
        mk("High", "constraint"),
        mk("LowA", "other"),
        mk("Mid", "partial"),
        mk("LowB", "other"),
    ];
    let c = Tokenizer::Cl100kBase.counter();
    let all = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[], &*c, 100_000).unwrap();
    let drop_order = |cap: usize| {
        assemble_task_prompt(&plan, &plan.sub_tasks[1], &[], &*c, cap)
            .unwrap()
            .dropped_entities
    };
    assert_eq!(drop_order(all.tokens - 1), vec!["LowB".to_string()]);
    let line = c.count("- LowB: value value value (other)\n");
    assert_eq!(
        drop_order(all.tokens - line - 1),
        vec!["LowA".to_string(), "LowB".to_string()]
    );
    let prompt_only = c.count(SEED_PROMPT);
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[], &*c, prompt_only).unwrap();
    assert_eq!(p.text, SEED_PROMPT);
    assert_eq!(p.dropped_entities.len(), 4);
}

#[test]
fn prompt_over_cap_and_context_over_cap() {
    let plan = seed_plan();
    let c = Tokenizer::Estimate.counter();
    let n = c.count(SEED_PROMPT);
    let err =
        assemble_task_prompt(&plan, &plan.sub_tasks[1], &[seed_dep()], &*c, n - 1).unwrap_err();
    assert_eq!(
        err,
        AssemblyError::PromptOverCap {
            task_id: "2".into(),
            prompt_tokens: n,
            cap: n - 1
        }
    );
    assert!(
        err.to_string()
            .contains(&format!("{n} tokens, over max_prompt_tokens {}", n - 1))
    );
    let err = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[seed_dep()], &*c, n).unwrap_err();
    assert!(
        matches!(err, AssemblyError::ContextOverCap { prompt_tokens, cap, minimum_tokens, .. }
        if prompt_tokens == n && cap == n && minimum_tokens > n)
    );
}

#[test]
fn generous_cap_counts_once() {
    let plan = seed_plan();
    let m = ctx_tokens::MeteredCounter::new(ctx_tokens::EstimateCounter);
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &[seed_dep()], &m, 4000).unwrap();
    assert_eq!(m.calls(), 1);
    assert_eq!(m.bytes_counted(), p.text.len() as u64);
}

#[test]
fn cutting_a_huge_output_does_not_retokenize_it_per_step() {
    let mut plan = seed_plan();
    plan.config.dependency.max_output_length = None;
    let huge = "The planner kept the flag off for another week. ".repeat(20_000); // ~1 MB
    let deps = [DependencyOutput {
        task_id: "1",
        description: "Huge",
        output: &huge,
        summary: None,
    }];
    let m = ctx_tokens::MeteredCounter::new(ctx_tokens::BpeCounter::new(Tokenizer::Cl100kBase));
    let p = assemble_task_prompt(&plan, &plan.sub_tasks[1], &deps, &m, 1000).unwrap();
    assert!(p.tokens <= 1000 && p.tokens >= 950, "{}", p.tokens);
    // The whole prompt once, the output once, then only prefixes near
    // the answer's size.
    let ratio = m.bytes_counted() as f64 / huge.len() as f64;
    assert!(
        ratio < 2.2,
        "bytes tokenized / output bytes = {ratio:.2} over {} calls",
        m.calls()
    );
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{0,400}",
        "(word |# Head\n\npara text\n\n|é|日本|\n){0,120}",
        proptest::collection::vec(any::<char>(), 0..200).prop_map(|v| v.into_iter().collect()),
    ]
}

proptest! {
    // 64 cases locally, 256 in CI.
    #![proptest_config(ProptestConfig::with_cases(ctx_test_support::proptest_cases(64)))]
    #[test]
    fn cap_holds_prompt_intact_shape_kept(
        outputs in proptest::collection::vec(arb_text(), 0..4),
        values in proptest::collection::vec(("[A-Za-z ]{1,20}", "[a-z0-9 ,]{0,60}", prop_oneof![Just("constraint"), Just("partial"), Just("other")]), 0..5),
        prompt in "[A-Za-z .\n]{1,200}",
        cap in 0usize..600,
        bpe in any::<bool>(),
        strategy in prop_oneof![Just(SummarizeStrategy::Truncate), Just(SummarizeStrategy::ExtractKeySections), Just(SummarizeStrategy::None), Just(SummarizeStrategy::Llm)],
        max_len in proptest::option::of(0usize..300),
        // `llm` summaries (of any length: a model may ignore
        // max_tokens) and include_full_output: the cap holds with them.
        summaries in proptest::collection::vec(proptest::option::of(arb_text()), 4),
        full in any::<bool>(),
    ) {
        let mut plan = seed_plan();
        plan.config.dependency.summarize_strategy = strategy;
        plan.config.dependency.max_output_length = max_len;
        plan.config.dependency.include_full_output = full;
        let mut task = plan.sub_tasks[1].clone();
        task.tool_or_prompt.params.prompt = prompt.clone();
        task.entity_context = values.iter().map(|(n, v, r)| ctx_model::EntityContext {
            entity_name: n.clone(), intent_relevance: Some((*r).to_string()), grounded_value: Some(v.clone()), usage_note: None,
        }).collect();
        let ids: Vec<String> = (0..outputs.len()).map(|i| format!("t{i}")).collect();
        let deps: Vec<DependencyOutput<'_>> = outputs.iter().zip(&ids).zip(&summaries).map(|((o, id), s)| DependencyOutput {
            task_id: id, description: "desc", output: o, summary: s.as_deref() }).collect();
        let c = if bpe { Tokenizer::Cl100kBase.counter() } else { Tokenizer::Estimate.counter() };
        match assemble_task_prompt(&plan, &task, &deps, &*c, cap) {
            Ok(p) => {
                prop_assert!(p.tokens <= cap);
                prop_assert_eq!(p.tokens, c.count(&p.text));
                prop_assert!(p.text.ends_with(&prompt));
                let head = &p.text[..p.text.len() - prompt.len()];
                if !head.is_empty() {
                    prop_assert!(head.ends_with("\n\n"));
                }
                prop_assert_eq!(head.starts_with(ENTITY_HEADING), values.len() > p.dropped_entities.len());
                prop_assert_eq!(head.contains(DEPENDENCY_HEADING), !deps.is_empty());
                for id in &ids {
                    let needle = format!("### Task {id}: desc\n**Output:**\n");
                    prop_assert!(head.contains(&needle));
                }
                if !p.dropped_entities.is_empty() {
                    // Entities go only after every output is down to `...`.
                    for ((id, o), s) in ids.iter().zip(&outputs).zip(&summaries) {
                        let needle = format!("### Task {id}: desc\n**Output:**\n...\n\n---");
                        let empty = o.trim_end_matches(['\n', '\r']).is_empty()
                            || s.as_deref().is_some_and(|s| s.trim_end_matches(['\n', '\r']).is_empty());
                        prop_assert!(head.contains(&needle) || empty, "{}", head);
                    }
                }
            }
            Err(AssemblyError::PromptOverCap { prompt_tokens, cap: c2, .. }) => {
                prop_assert_eq!(c2, cap);
                prop_assert!(prompt_tokens > cap);
                prop_assert_eq!(prompt_tokens, c.count(&prompt));
            }
            Err(AssemblyError::ContextOverCap { prompt_tokens, minimum_tokens, cap: c2, .. }) => {
                prop_assert_eq!(c2, cap);
                prop_assert!(prompt_tokens <= cap && minimum_tokens > cap);
            }
        }
    }
}

/// A counter whose cost is the sum of its characters' weights (an
/// upper-case letter 4, whitespace 2, anything else 1), so tests can
/// compute the exact answer. Additive, so a longer prefix never costs
/// less once trailing whitespace is trimmed: the search's premise.
struct Weighted;

fn weight(c: char) -> usize {
    if c.is_uppercase() {
        4
    } else if c.is_whitespace() {
        2
    } else {
        1
    }
}

impl TokenCounter for Weighted {
    fn name(&self) -> &str {
        "weighted"
    }
    fn count(&self, text: &str) -> usize {
        text.chars().map(weight).sum()
    }
    fn upper_bound(&self, text: &str) -> usize {
        self.count(text)
    }
}

/// What `cut_to_tokens` must give, found by trying every prefix: the
/// longest one that fits with `...`, moved back to whitespace as
/// `prefer_whitespace` does.
fn longest_fitting_prefix(text: &str, limit: usize) -> Option<String> {
    let c = Weighted;
    if c.count(text) <= limit {
        return None;
    }
    let candidate = |end: usize| format!("{}{ELLIPSIS}", text[..end].trim_end());
    let best = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .filter(|&end| c.count(&candidate(end)) <= limit)
        .max();
    Some(match best {
        None => ELLIPSIS.to_string(),
        Some(end) => candidate(prefer_whitespace(text, end)),
    })
}

#[test]
fn a_cut_keeps_the_longest_prefix_that_fits() {
    let c = Weighted;
    // No whitespace: every limit from `...` up keeps exactly as much.
    let text = "abcdefghijklmnopqrstuvwxyz";
    for limit in 3..text.len() {
        let cut = cut_to_tokens(text, limit, &c).unwrap();
        assert_eq!(cut, format!("{}...", &text[..limit - 3]), "limit {limit}");
    }
    assert_eq!(cut_to_tokens(text, 2, &c).as_deref(), Some("..."));
    assert_eq!(cut_to_tokens(text, 26, &c), None);
    // Cheap text then dear text: the first guess fits, the search
    // gallops up (and, the other way round, down).
    let cheap_first = format!("{}{}", "a".repeat(20), "A".repeat(20));
    let dear_first = format!("{}{}", "A".repeat(20), "a".repeat(20));
    for text in [&cheap_first, &dear_first] {
        for limit in [3, 4, 7, 10, 23, 26, 29, 30, 50, 80, 99] {
            assert_eq!(
                cut_to_tokens(text, limit, &c),
                longest_fitting_prefix(text, limit),
                "{text} at {limit}"
            );
        }
    }
    assert_eq!(
        cut_to_tokens(&cheap_first, 30, &c).unwrap(),
        format!("{}A...", "a".repeat(20))
    );
}

#[test]
fn fit_prefix_edges() {
    let c = Weighted;
    // One character over its limit: only `...` fits.
    assert_eq!(cut_to_tokens("X", 3, &c).as_deref(), Some("..."));
    assert_eq!(fit_prefix("X", 3, 4, &c), "...");
    // The whole text fits once its trailing whitespace is trimmed:
    // the cut reaches the end of the text.
    let text = "abc        ";
    assert_eq!(cut_to_tokens(text, 8, &c).as_deref(), Some("abc..."));
    assert_eq!(fit_prefix("ab ", 5, 6, &c), "ab...");
    // Ends at whitespace when that keeps at least half.
    let text = "abcdef ghijklmnop";
    assert_eq!(cut_to_tokens(text, 14, &c).as_deref(), Some("abcdef..."));
    // Multi-byte characters are cut on their boundaries.
    let text = "éééééééééé";
    assert_eq!(cut_to_tokens(text, 6, &c).as_deref(), Some("ééé..."));
}

/// [`Weighted`], recording the length (in chars) of every text it is
/// asked whether it fits: the search's probes.
#[derive(Default)]
struct Probing(std::sync::Mutex<Vec<usize>>);

impl TokenCounter for Probing {
    fn name(&self) -> &str {
        "probing"
    }
    fn count(&self, text: &str) -> usize {
        Weighted.count(text)
    }
    fn upper_bound(&self, text: &str) -> usize {
        self.0.lock().unwrap().push(text.chars().count());
        Weighted.count(text)
    }
}

/// The search's cost, as its documentation promises: it starts from
/// the proportional guess, gallops from there by an eighth of it, then
/// bisects, so a cut takes a handful of probes, each about the size
/// of the answer. (The answers are pinned by the tests above; these
/// budgets are what a slower search, one that starts from the wrong
/// place, gallops in the wrong steps or bisects more than it must,
/// would break without changing the cut.)
#[test]
fn the_search_takes_few_probes_near_the_answer() {
    let probe = |text: &str, limit: usize| {
        let c = Probing::default();
        let cut = fit_prefix(text, limit, c.count(text), &c);
        (cut, c.0.into_inner().unwrap())
    };
    // Evenly priced: the guess is right, and only its last eighth is
    // searched.
    let even = "a".repeat(100_000);
    let (cut, probes) = probe(&even, 1000);
    assert_eq!(cut, format!("{}...", "a".repeat(997)));
    assert!(probes.len() <= 10, "{} probes: {probes:?}", probes.len());
    assert!(probes.iter().all(|&p| p <= 1003 + 1003 / 8), "{probes:?}");
    // Cheap first, dear after: the guess is 40 % of the answer, the
    // search gallops up to it and no probe is twice its size.
    let cheap_first = format!("{}{}", "a".repeat(50_000), "A".repeat(50_000));
    let (cut, probes) = probe(&cheap_first, 1000);
    assert_eq!(cut, format!("{}...", "a".repeat(997)));
    assert!(probes.len() <= 14, "{} probes: {probes:?}", probes.len());
    assert!(probes.iter().all(|&p| p <= 2 * 1000), "{probes:?}");
    // Dear first: the guess is too long, and the search gallops down
    // from it by doubling steps.
    let dear_first = format!("{}{}", "A".repeat(10_000), "a".repeat(90_000));
    let (cut, probes) = probe(&dear_first, 1000);
    assert_eq!(cut, format!("{}...", "A".repeat(249)));
    assert!(probes.len() <= 13, "{} probes: {probes:?}", probes.len());
    // Evenly mixed, the guess a little long: one step down finds it.
    let mixed = "aA".repeat(50_000);
    let (cut, probes) = probe(&mixed, 1000);
    assert_eq!(cut, format!("{}a...", "aA".repeat(199)));
    assert!(probes.len() <= 8, "{} probes: {probes:?}", probes.len());
    // Nothing but `...` fits: galloping down stops at the start of the
    // text instead of stepping past it.
    let text = format!("{}{}", "A".repeat(100), "a".repeat(10_000));
    assert_eq!(probe(&text, 5).0, "...");
}

/// A plan whose second task has the prompt `p`, no entities and no
/// output length limit, with that task: only its dependency outputs
/// are left to cut.
fn task_with_only_outputs_to_cut() -> (Plan, SubTask) {
    let mut plan = seed_plan();
    plan.config.dependency.max_output_length = None;
    plan.sub_tasks[1].entity_context.clear();
    let mut task = plan.sub_tasks[1].clone();
    task.tool_or_prompt.params.prompt = "p".into();
    (plan, task)
}

/// Dependency outputs from `(task id, output)` pairs.
fn outputs<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<DependencyOutput<'a>> {
    pairs
        .iter()
        .map(|&(task_id, output)| DependencyOutput {
            task_id,
            description: "d",
            output,
            summary: None,
        })
        .collect()
}

#[test]
fn a_dependency_is_cut_only_as_far_as_needed() {
    let (plan, task) = task_with_only_outputs_to_cut();
    let big = "b".repeat(400);
    let mid = "m".repeat(100);
    let small = "s".repeat(30);
    let deps = outputs(&[("big", &big), ("mid", &mid), ("small", &small)]);
    let c = Weighted;
    let full = assemble_task_prompt(&plan, &task, &deps, &c, 10_000).unwrap();
    // Needing 50 tokens: only the largest output is cut, by exactly 50.
    let p = assemble_task_prompt(&plan, &task, &deps, &c, full.tokens - 50).unwrap();
    assert_eq!(p.tokens, full.tokens - 50);
    assert_eq!(p.shortened_dependencies, vec!["big".to_string()]);
    assert!(p.text.contains(&format!("{}...\n", "b".repeat(347))));
    assert!(p.text.contains(&mid) && p.text.contains(&small));
    // Needing 350: the two largest come down to one level (75), the
    // smallest is kept whole.
    let p = assemble_task_prompt(&plan, &task, &deps, &c, full.tokens - 350).unwrap();
    assert_eq!(p.tokens, full.tokens - 350);
    assert_eq!(
        p.shortened_dependencies,
        vec!["big".to_string(), "mid".to_string()]
    );
    assert!(p.text.contains(&format!("\n{}...\n", "b".repeat(72))));
    assert!(p.text.contains(&format!("\n{}...\n", "m".repeat(72))));
    assert!(p.text.contains(&small));
    // Needing 300: the level is 100, the middle output's own size, so
    // it stays whole; only the largest comes down to it.
    let p = assemble_task_prompt(&plan, &task, &deps, &c, full.tokens - 300).unwrap();
    assert_eq!(p.tokens, full.tokens - 300);
    assert_eq!(p.shortened_dependencies, vec!["big".to_string()]);
    assert!(p.text.contains(&format!("\n{}...\n", "b".repeat(97))));
    assert!(p.text.contains(&format!("\n{mid}\n")) && p.text.contains(&small));
}

/// [`Weighted`], but a whole prompt (a text of several lines) pays
/// `surcharge` more for each `...` in it: cutting a dependency output
/// saves what its own count says, less the surcharge, so the first
/// round of cuts falls short of the cap. Counts the whole prompts it
/// is asked about: one per round of cutting.
struct Surcharged {
    surcharge: usize,
    whole_prompts: std::sync::atomic::AtomicUsize,
}

impl TokenCounter for Surcharged {
    fn name(&self) -> &str {
        "surcharged"
    }
    fn count(&self, text: &str) -> usize {
        if !text.contains('\n') {
            return Weighted.count(text);
        }
        self.whole_prompts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Weighted.count(text) + self.surcharge * text.matches(ELLIPSIS).count()
    }
    fn upper_bound(&self, text: &str) -> usize {
        self.count(text)
    }
}

/// When a round of cuts saves less than it was asked to, the next
/// round asks for the shortfall on top, so two rounds reach the cap,
/// exactly at it: not a round per token (asking for less, or for a
/// token more each time), and not everything cut away (asking for far
/// more than the shortfall).
#[test]
fn a_cut_that_falls_short_is_made_up_in_one_more_round() {
    let (plan, task) = task_with_only_outputs_to_cut();
    let big = "b".repeat(400);
    let mid = "m".repeat(100);
    let deps = outputs(&[("big", &big), ("mid", &mid)]);
    let c = Surcharged {
        surcharge: 20,
        whole_prompts: 0.into(),
    };
    let full = assemble_task_prompt(&plan, &task, &deps, &c, 10_000).unwrap();
    c.whole_prompts
        .store(0, std::sync::atomic::Ordering::Relaxed);
    // Needing 50: the first round cuts the largest output by 50 and
    // pays 20 for its `...`; the second cuts 20 more.
    let p = assemble_task_prompt(&plan, &task, &deps, &c, full.tokens - 50).unwrap();
    assert_eq!(p.tokens, full.tokens - 50);
    assert_eq!(p.shortened_dependencies, vec!["big".to_string()]);
    assert!(
        p.text.contains(&format!("\n{}...\n", "b".repeat(327))),
        "{}",
        p.text
    );
    assert!(p.text.contains(&format!("\n{mid}\n")));
    let rounds = c.whole_prompts.load(std::sync::atomic::Ordering::Relaxed);
    // The prompt as assembled, then one count per round.
    assert_eq!(rounds, 3, "{rounds} whole-prompt counts");
}

#[test]
fn the_fewest_entities_are_dropped() {
    let mut plan = seed_plan();
    let mk = |name: &str, rel: &str, value: &str| ctx_model::EntityContext {
        entity_name: name.into(),
        intent_relevance: Some(rel.into()),
        grounded_value: Some(value.into()),
        usage_note: None,
    };
    plan.sub_tasks[1].entity_context = vec![
        mk("High", "constraint", "h"),
        mk("Big", "other", &"v".repeat(60)),
        mk("Small", "other", "v"),
        mk("Mid", "partial", "v"),
    ];
    let task = &plan.sub_tasks[1];
    let c = Weighted;
    let all = assemble_task_prompt(&plan, task, &[], &c, 100_000).unwrap();
    let dropped = |cap: usize| {
        assemble_task_prompt(&plan, task, &[], &c, cap)
            .unwrap()
            .dropped_entities
    };
    let small_line = c.count("- Small: v (other)") + 1;
    // The lowest (ties: later first) goes first, and alone while that
    // is enough, even when it barely is.
    assert_eq!(dropped(all.tokens - 1), vec!["Small".to_string()]);
    assert_eq!(dropped(all.tokens - small_line), vec!["Small".to_string()]);
    // One token more than the small line: the next lowest goes too,
    // and no more.
    assert_eq!(
        dropped(all.tokens - small_line - 1),
        vec!["Big".to_string(), "Small".to_string()]
    );
    let p = assemble_task_prompt(&plan, task, &[], &c, all.tokens - small_line - 1).unwrap();
    assert!(p.text.contains("- Mid: v (partial)") && p.text.contains("- High: h"));
}

/// Entities of one size: the fewest that cover the excess go, and in
/// one round (one render and count of the prompt) however many that
/// is. Two cargo-mutants survivors: `need -= line` as `+=` dropped
/// every entity after the first (asking for more with each one), and
/// as `/=` asked for too little, so a second round dropped the rest.
#[test]
fn equal_entities_are_dropped_as_few_as_needed_in_one_round() {
    let mut plan = seed_plan();
    let mk = |name: &str, rel: &str| ctx_model::EntityContext {
        entity_name: name.into(),
        intent_relevance: Some(rel.into()),
        grounded_value: Some("v".into()),
        usage_note: None,
    };
    plan.sub_tasks[1].entity_context = vec![
        mk("H", "constraint"),
        mk("A", "other"),
        mk("B", "other"),
        mk("C", "other"),
    ];
    let task = &plan.sub_tasks[1];
    let c = Surcharged {
        surcharge: 0,
        whole_prompts: std::sync::atomic::AtomicUsize::new(0),
    };
    let all = assemble_task_prompt(&plan, task, &[], &c, 100_000).unwrap();
    // What a line saves, its line break included.
    let line = Weighted.count("- C: v (other)\n");
    let dropped = |cap: usize| {
        c.whole_prompts
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let p = assemble_task_prompt(&plan, task, &[], &c, cap).unwrap();
        let counts = c.whole_prompts.load(std::sync::atomic::Ordering::Relaxed);
        (p.dropped_entities, counts)
    };
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (one, counts_for_one) = dropped(all.tokens - 1);
    assert_eq!(one, names(&["C"]));
    // One token more than a line: two lines, not three.
    let (two, counts_for_two) = dropped(all.tokens - line - 1);
    assert_eq!(two, names(&["B", "C"]));
    // One token more than two lines: three, in the same one round.
    let (three, counts_for_three) = dropped(all.tokens - 2 * line - 1);
    assert_eq!(three, names(&["A", "B", "C"]));
    assert_eq!(counts_for_two, counts_for_one);
    assert_eq!(counts_for_three, counts_for_one);
}
