//! Invariants of parsing and validation over random plans and graphs.

use std::collections::{BTreeMap, HashMap, HashSet};

use ctx_model::{
    DependencyConfig, Entity, EntityContext, EntityContextConfig, Params, Plan, PlanConfig,
    PlanFormat, ProblemCode, RelevanceFilter, SubTask, SummarizeStrategy, SummaryFocus,
    TaskDependencyConfig, ToolOrPrompt, parse_plan, validate,
};
use proptest::prelude::*;

/// Text that stresses both serializers: YAML indicators, quotes, words
/// YAML would read as other types, line breaks, non-ASCII.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 _.-]{0,12}",
        "[a-z :#'\"\\\\{}\\[\\],&*!|>%@`?\n\t-]{0,12}",
        Just("null".to_string()),
        Just("~".to_string()),
        Just("true".to_string()),
        Just("no".to_string()),
        Just("1.50".to_string()),
        Just("0x1F".to_string()),
        Just("- item".to_string()),
        Just("  leading and trailing  ".to_string()),
        Just("ünï 日本 🎮".to_string()),
        Just("line one\nline two\n".to_string()),
    ]
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop_oneof![Just(None), s.prop_map(Some)]
}

fn params() -> impl Strategy<Value = Params> {
    (
        text(),
        opt(text()),
        opt((0u32..=20).prop_map(|t| f64::from(t) / 10.0)),
        opt(1u32..100_000),
        opt(prop::collection::vec(text(), 0..3)),
        opt(0u64..1_000_000),
        prop::collection::btree_map(
            "x_[a-z]{1,6}",
            prop_oneof![
                any::<i64>().prop_map(serde_json::Value::from),
                any::<bool>().prop_map(serde_json::Value::from),
                "[a-z ]{0,8}".prop_map(serde_json::Value::from),
            ],
            0..3,
        ),
    )
        .prop_map(
            |(prompt, model, temperature, max_tokens, stop, estimated_ms, extra)| Params {
                prompt,
                model,
                temperature,
                max_tokens,
                top_p: None,
                stop,
                seed: None,
                system: None,
                estimated_ms,
                extra: extra.into_iter().collect::<BTreeMap<_, _>>(),
            },
        )
}

fn entity_context() -> impl Strategy<Value = EntityContext> {
    (text(), opt(text()), opt(text()), opt(text())).prop_map(
        |(entity_name, intent_relevance, grounded_value, usage_note)| EntityContext {
            entity_name,
            intent_relevance,
            grounded_value,
            usage_note,
        },
    )
}

fn sub_task() -> impl Strategy<Value = SubTask> {
    (
        text(),
        text(),
        prop::collection::vec(text(), 0..4),
        prop::collection::vec(entity_context(), 0..3),
        prop_oneof![Just("inference".to_string()), text()],
        params(),
        opt(strategy()),
    )
        .prop_map(
            |(id, description, dependencies, entity_context, name, params, own)| SubTask {
                id,
                description,
                dependencies,
                entity_context,
                tool_or_prompt: ToolOrPrompt { name, params },
                dependency: TaskDependencyConfig {
                    summarize_strategy: own,
                },
                checks: Vec::new(),
                publish: None,
                map: None,
                output: None,
                approval: None,
            },
        )
}

fn entity() -> impl Strategy<Value = Entity> {
    (
        text(),
        opt(text()),
        opt(text()),
        opt(text()),
        opt(prop::collection::vec(text(), 0..3)),
    )
        .prop_map(
            |(name, entity_type, intent, grounded_value, grounded_values)| Entity {
                name,
                entity_type,
                intent,
                grounded_value,
                grounded_values,
                check: None,
            },
        )
}

fn strategy() -> impl Strategy<Value = SummarizeStrategy> {
    prop_oneof![
        Just(SummarizeStrategy::Truncate),
        Just(SummarizeStrategy::ExtractKeySections),
        Just(SummarizeStrategy::None),
        Just(SummarizeStrategy::Llm)
    ]
}

fn summary_settings() -> impl Strategy<Value = (u32, Option<String>, Option<String>, SummaryFocus)>
{
    (
        0u32..2_000,
        opt(text()),
        opt(text()),
        prop_oneof![Just(SummaryFocus::Output), Just(SummaryFocus::Dependent)],
    )
}

fn config() -> impl Strategy<Value = PlanConfig> {
    (
        any::<bool>(),
        opt(0usize..10_000),
        strategy(),
        any::<bool>(),
        prop_oneof![
            Just(RelevanceFilter::High),
            Just(RelevanceFilter::Medium),
            Just(RelevanceFilter::Low),
            Just(RelevanceFilter::All)
        ],
        any::<bool>(),
        0usize..100_000,
        opt(prop_oneof![Just("o200k_base".to_string()), text()]),
        summary_settings(),
        prop_oneof![
            Just(ctx_model::PromptLayout::Design),
            Just(ctx_model::PromptLayout::Cache)
        ],
        prompt_cache(),
    )
        .prop_map(
            |(
                full,
                max_len,
                strategy,
                all,
                filter,
                with_type,
                cap,
                tokenizer,
                summary,
                layout,
                (cache_key, cache_breakpoints, cache_warm_up),
            )| {
                PlanConfig {
                    dependency: DependencyConfig {
                        include_full_output: full,
                        max_output_length: max_len,
                        summarize_strategy: strategy,
                        summary_max_tokens: summary.0,
                        summary_model: summary.1,
                        summary_prompt: summary.2,
                        summary_focus: summary.3,
                    },
                    entities: EntityContextConfig {
                        include_all: all,
                        filter_by_relevance: filter,
                        include_entity_type: with_type,
                    },
                    max_prompt_tokens: cap,
                    tokenizer,
                    prices: Default::default(),
                    checks: Vec::new(),
                    max_check_attempts: ctx_model::DEFAULT_MAX_CHECK_ATTEMPTS,
                    layout,
                    cache_key,
                    cache_breakpoints,
                    cache_warm_up,
                    budget: None,
                    canary: false,
                    output: None,
                }
            },
        )
}

/// `config.cache_key`, `config.cache_breakpoints` and
/// `config.cache_warm_up`, each set or left out.
fn prompt_cache() -> impl Strategy<
    Value = (
        ctx_model::prompt_cache::CacheKey,
        Option<ctx_model::prompt_cache::CacheBreakpoints>,
        Option<usize>,
    ),
> {
    use ctx_model::prompt_cache::{Breakpoint, BreakpointModels, CacheBreakpoints, CacheKey};
    (
        prop_oneof![Just(CacheKey::None), Just(CacheKey::Auto)],
        opt((
            prop_oneof![
                Just(BreakpointModels::Anthropic),
                Just(BreakpointModels::All)
            ],
            prop::sample::subsequence(
                vec![
                    Breakpoint::System,
                    Breakpoint::Entities,
                    Breakpoint::Dependencies,
                    Breakpoint::Shared,
                    Breakpoint::Prompt,
                ],
                0..=4,
            ),
        )
            .prop_map(|(models, after)| CacheBreakpoints { models, after })),
        opt(2usize..64),
    )
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        opt(text()),
        prop::collection::vec(entity(), 0..4),
        prop::collection::vec(sub_task(), 0..6),
        config(),
    )
        .prop_map(|(goal, entities, sub_tasks, config)| Plan {
            schema_version: 1,
            goal,
            entities,
            sub_tasks,
            config,
            variables: Vec::new(),
            history: None,
        })
}

/// A plan of `n` tasks `t0..t{n-1}` with exactly these edges
/// (`(from, to)`: `from` depends on `to`).
fn graph_plan(n: usize, edges: &[(usize, usize)]) -> Plan {
    let sub_tasks = (0..n)
        .map(|i| SubTask {
            id: format!("t{i}"),
            description: format!("Task {i}"),
            dependencies: edges
                .iter()
                .filter(|(from, _)| *from == i)
                .map(|(_, to)| format!("t{to}"))
                .collect(),
            entity_context: Vec::new(),
            tool_or_prompt: ToolOrPrompt {
                name: "inference".into(),
                params: Params {
                    prompt: "go".into(),
                    ..Params::default()
                },
            },
            dependency: Default::default(),
            checks: Vec::new(),
            publish: None,
            map: None,
            output: None,
            approval: None,
        })
        .collect();
    Plan {
        schema_version: 1,
        goal: None,
        entities: Vec::new(),
        sub_tasks,
        config: PlanConfig::default(),
        variables: Vec::new(),
        history: None,
    }
}

/// Whether the edges have a cycle, by Kahn's algorithm.
fn has_cycle(n: usize, edges: &[(usize, usize)]) -> bool {
    let edges: HashSet<(usize, usize)> = edges.iter().copied().collect();
    let mut indegree = vec![0usize; n];
    for &(from, _) in &edges {
        indegree[from] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut done = 0;
    while let Some(t) = ready.pop() {
        done += 1;
        for &(from, to) in &edges {
            if to == t {
                indegree[from] -= 1;
                if indegree[from] == 0 {
                    ready.push(from);
                }
            }
        }
    }
    done < n
}

/// The task ids of a cycle problem's path, without the repeated first id.
fn cycle_ids(message: &str) -> Vec<String> {
    let path = message.strip_prefix("dependency cycle: ").unwrap();
    let mut ids: Vec<String> = path
        .split(" -> ")
        .map(|s| s.trim_matches('"').to_string())
        .collect();
    assert_eq!(ids.first(), ids.last(), "{message}");
    ids.pop();
    ids
}

/// Every elementary cycle by brute force: simple paths from each start
/// through larger indices only, closed by an edge back to the start. Each
/// cycle once, starting at its smallest index; sorted.
fn brute_force_cycles(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        if !adj[a].contains(&b) {
            adj[a].push(b);
        }
    }
    fn walk(adj: &[Vec<usize>], start: usize, path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        let last = *path.last().unwrap();
        for &w in &adj[last] {
            if w == start {
                out.push(path.clone());
            } else if w > start && !path.contains(&w) {
                path.push(w);
                walk(adj, start, path, out);
                path.pop();
            }
        }
    }
    let mut out = Vec::new();
    for s in 0..n {
        walk(&adj, s, &mut vec![s], &mut out);
    }
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_elementary_cycle_is_listed_once(
        n in 1usize..8,
        raw in prop::collection::vec((0usize..8, 0usize..8), 0..24),
    ) {
        let mut edges: Vec<(usize, usize)> = raw
            .into_iter()
            .map(|(a, b)| (a % n, b % n))
            .filter(|(a, b)| a != b)
            .collect();
        edges.sort();
        edges.dedup();
        let expected = brute_force_cycles(n, &edges);
        let problems = validate(&graph_plan(n, &edges));
        let listed: Vec<Vec<usize>> = problems
            .iter()
            .filter(|p| p.task_id.is_some())
            .map(|p| {
                cycle_ids(&p.message)
                    .iter()
                    .map(|id| id[1..].parse::<usize>().unwrap())
                    .collect()
            })
            .collect();
        if expected.len() <= ctx_model::MAX_REPORTED_CYCLES {
            prop_assert_eq!(listed, expected);
            prop_assert_eq!(problems.len(), problems.iter().filter(|p| p.task_id.is_some()).count());
        } else {
            prop_assert_eq!(listed.len(), ctx_model::MAX_REPORTED_CYCLES);
            for c in &listed {
                prop_assert!(expected.contains(c));
            }
            prop_assert!(problems.last().unwrap().message.starts_with("more dependency cycles exist"));
        }
    }

    #[test]
    fn plans_round_trip_through_json(plan in plan()) {
        let text = serde_json::to_string_pretty(&plan).unwrap();
        let back = parse_plan(&text, "p.json", PlanFormat::Json).unwrap();
        prop_assert_eq!(back, plan);
    }

    #[test]
    fn plans_round_trip_through_yaml(plan in plan()) {
        let text = serde_saphyr::to_string(&plan).unwrap();
        let back = parse_plan(&text, "p.yaml", PlanFormat::Yaml);
        prop_assert!(back.is_ok(), "{}\n---\n{}", back.unwrap_err(), text);
        prop_assert_eq!(back.unwrap(), plan);
    }

    #[test]
    fn validation_never_panics_and_names_real_fields(plan in plan()) {
        let problems = validate(&plan);
        // Twice gives the same answer.
        prop_assert_eq!(&problems, &validate(&plan));
        for p in &problems {
            prop_assert!(!p.field.is_empty());
            prop_assert!(!p.message.is_empty());
            if let Some(id) = &p.task_id {
                prop_assert!(plan.sub_tasks.iter().any(|t| &t.id == id));
            }
        }
    }

    #[test]
    fn random_graphs_report_a_cycle_exactly_when_there_is_one(
        n in 1usize..12,
        raw in prop::collection::vec((0usize..12, 0usize..12), 0..30),
    ) {
        let edges: Vec<(usize, usize)> = raw
            .into_iter()
            .map(|(a, b)| (a % n, b % n))
            .filter(|(a, b)| a != b)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect::<Vec<_>>();
        let mut edges = edges;
        edges.sort();
        let plan = graph_plan(n, &edges);
        let problems = validate(&plan);
        prop_assert!(problems.iter().all(|p| p.code == ProblemCode::Cycle), "{problems:?}");
        prop_assert_eq!(!problems.is_empty(), has_cycle(n, &edges));
        // Every reported cycle is a real one, and none is reported twice.
        let edge_set: HashSet<(String, String)> = edges
            .iter()
            .map(|(a, b)| (format!("t{a}"), format!("t{b}")))
            .collect();
        let mut seen = HashSet::new();
        for p in problems.iter().filter(|p| p.task_id.is_some()) {
            let ids = cycle_ids(&p.message);
            prop_assert!(ids.len() >= 2);
            prop_assert_eq!(p.task_id.as_deref(), Some(ids[0].as_str()));
            let distinct: HashSet<&String> = ids.iter().collect();
            prop_assert_eq!(distinct.len(), ids.len(), "not elementary: {}", p.message);
            for k in 0..ids.len() {
                let next = &ids[(k + 1) % ids.len()];
                prop_assert!(edge_set.contains(&(ids[k].clone(), next.clone())), "{} is not a cycle", p.message);
            }
            prop_assert!(seen.insert(ids), "reported twice: {}", p.message);
        }
    }

    #[test]
    fn any_dag_is_clean_and_a_back_edge_makes_a_cycle(
        n in 2usize..30,
        raw in prop::collection::vec((0usize..30, 0usize..30), 1..60),
        pick in any::<prop::sample::Index>(),
    ) {
        // Edges only from a later task to an earlier one: a DAG.
        let mut edges: Vec<(usize, usize)> = raw
            .into_iter()
            .map(|(a, b)| (a % n, b % n))
            .filter(|(a, b)| a > b)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        edges.sort();
        prop_assert_eq!(validate(&graph_plan(n, &edges)), vec![]);
        if edges.is_empty() {
            return Ok(());
        }
        // Reverse one path: pick an edge a -> b and add b -> a.
        let (a, b) = edges[pick.index(edges.len())];
        edges.push((b, a));
        let problems = validate(&graph_plan(n, &edges));
        prop_assert!(!problems.is_empty());
        // Some reported cycle uses the added edge.
        let back = (format!("t{b}"), format!("t{a}"));
        let uses_back_edge = problems.iter().filter(|p| p.task_id.is_some()).any(|p| {
            let ids = cycle_ids(&p.message);
            (0..ids.len()).any(|k| (ids[k].clone(), ids[(k + 1) % ids.len()].clone()) == back)
        });
        prop_assert!(uses_back_edge, "{problems:?}");
    }

    #[test]
    fn validation_of_id_soup_never_panics(
        ids in prop::collection::vec(prop_oneof![Just(""), Just("a"), Just("b"), Just("a/b"), Just(" "), Just("..")], 0..8),
        deps in prop::collection::vec(prop::collection::vec(prop_oneof![Just(""), Just("a"), Just("b"), Just("c")], 0..4), 0..8),
    ) {
        let mut plan = graph_plan(ids.len(), &[]);
        for (i, t) in plan.sub_tasks.iter_mut().enumerate() {
            t.id = ids[i].to_string();
            t.dependencies = deps.get(i).map(|d| d.iter().map(|s| s.to_string()).collect()).unwrap_or_default();
        }
        let problems = validate(&plan);
        let dup_ids: HashMap<&str, usize> = ids.iter().fold(HashMap::new(), |mut m, id| {
            *m.entry(*id).or_default() += 1;
            m
        });
        let expected_dups: usize = dup_ids
            .iter()
            .filter(|(id, _)| !id.trim().is_empty())
            .map(|(_, n)| n - 1)
            .sum();
        prop_assert_eq!(
            problems.iter().filter(|p| p.code == ProblemCode::DuplicateId).count(),
            expected_dups
        );
    }
}

/// The fuzz target's body, run on stable over random text and mutations
/// of the real fixtures (cargo-fuzz itself needs nightly).
fn parse_anything(text: &str) {
    for format in [PlanFormat::Json, PlanFormat::Yaml, PlanFormat::sniff(text)] {
        match parse_plan(text, "t", format) {
            Ok(plan) => {
                let problems = validate(&plan);
                assert_eq!(problems, validate(&plan));
                let locator = ctx_model::FieldLocator::new(text);
                for p in &problems {
                    let _ = locator.locate(&p.field);
                }
                for task in &plan.sub_tasks {
                    let _ = plan.resolve_entity_context(task);
                }
            }
            Err(e) => assert!(e.to_string().starts_with("t")),
        }
    }
    let _ = ctx_model::FieldLocator::new(text).locate("sub_tasks[0].id");
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

proptest! {
    // Each case parses a whole plan three times in a debug build; the fuzz
    // target covers the long tail.
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_text_never_panics(text in "(?s).{0,200}") {
        parse_anything(&text);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in any::<bool>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, "[ -~\n]{0,3}"), 1..6),
    ) {
        let mut text = if which {
            fixture("fixtures/tetris/plan.yaml")
        } else {
            fixture("fixtures/plans/diamond.json")
        };
        for (at, op, insert) in edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            match op {
                0 => text.insert_str(i, &insert),
                1 => {
                    let mut end = (i + insert.len().max(1)).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    text.replace_range(i..end, "");
                }
                _ => {
                    let mut end = (i + 1).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    text.replace_range(i..end, &insert);
                }
            }
        }
        parse_anything(&text);
    }
}
