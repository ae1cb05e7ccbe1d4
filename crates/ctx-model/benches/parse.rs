//! Plan reading and checking speed (`cargo bench -p ctx-model --bench
//! parse`): a seeded random plan of 2,000 and of 20,000 tasks (fan-in 0–20
//! drawn from the previous 300 tasks, prompts of 200–2,000 characters, ten
//! entities referenced at random) is written as JSON and as YAML, then
//! parsed and validated repeatedly. Prints the median time of each step and
//! the input size; figures are recorded in docs/performance.md.

use std::time::{Duration, Instant};

use ctx_model::{
    Entity, EntityContext, Params, Plan, PlanConfig, PlanFormat, SubTask, ToolOrPrompt, parse_plan,
    validate,
};

/// splitmix64: a seeded generator without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn random_plan(tasks: usize, seed: u64) -> Plan {
    let mut rng = Rng(seed);
    let entities: Vec<Entity> = (0..10)
        .map(|i| Entity {
            name: format!("Entity {i}"),
            entity_type: Some("constraint".into()),
            intent: Some("Why it matters.".into()),
            grounded_value: Some(format!("value number {i}")),
            grounded_values: None,
            check: None,
        })
        .collect();
    let words = [
        "write", "the", "board", "score", "level", "piece", "rotate", "render",
    ];
    let sub_tasks = (0..tasks)
        .map(|i| {
            let fan_in = if i % 10 == 0 || i == 0 {
                0
            } else {
                rng.below(21) as usize
            };
            let mut deps: Vec<String> = (0..fan_in)
                .map(|_| {
                    let back = 1 + rng.below(300.min(i as u64)) as usize;
                    format!("task-{}", i - back.min(i))
                })
                .collect();
            deps.sort();
            deps.dedup();
            let prompt_len = 200 + rng.below(1800) as usize;
            let mut prompt = String::with_capacity(prompt_len + 10);
            while prompt.len() < prompt_len {
                prompt.push_str(words[rng.below(words.len() as u64) as usize]);
                prompt.push(' ');
            }
            SubTask {
                id: format!("task-{i}"),
                description: format!("Step {i} of the plan."),
                dependencies: deps,
                entity_context: (0..rng.below(4))
                    .map(|k| EntityContext {
                        entity_name: format!("Entity {}", (i as u64 + k) % 10),
                        intent_relevance: Some(
                            ["constraint", "partial", "context"][k as usize % 3].into(),
                        ),
                        grounded_value: None,
                        usage_note: None,
                    })
                    .collect(),
                tool_or_prompt: ToolOrPrompt {
                    name: "inference".into(),
                    params: Params {
                        prompt,
                        model: Some("gpt-4o-mini".into()),
                        estimated_ms: Some(200 + rng.below(4800)),
                        ..Params::default()
                    },
                },
                dependency: Default::default(),
                checks: Vec::new(),
                publish: None,
                map: None,
                output: None,
                approval: None,
            }
        })
        .collect();
    Plan {
        schema_version: 1,
        goal: Some("Benchmark.".into()),
        entities,
        sub_tasks,
        config: PlanConfig::default(),
        variables: Vec::new(),
        history: None,
    }
}

fn median(mut f: impl FnMut(), runs: usize) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    println!("| tasks | step | input | median | throughput |");
    println!("|---|---|---|---|---|");
    for (tasks, runs) in [(2_000usize, 21usize), (20_000, 3)] {
        let plan = random_plan(tasks, 42);
        let json = serde_json::to_string_pretty(&plan).unwrap();
        let yaml = serde_saphyr::to_string(&plan).unwrap();
        assert_eq!(parse_plan(&yaml, "b.yaml", PlanFormat::Yaml).unwrap(), plan);
        assert!(validate(&plan).is_empty());
        for (step, text, format) in [
            ("parse JSON", &json, PlanFormat::Json),
            ("parse YAML", &yaml, PlanFormat::Yaml),
        ] {
            let t = median(
                || {
                    std::hint::black_box(parse_plan(text, "b", format).unwrap());
                },
                runs,
            );
            let mb = text.len() as f64 / 1e6;
            println!(
                "| {tasks} | {step} | {mb:.2} MB | {:.1} ms | {:.1} MB/s |",
                t.as_secs_f64() * 1e3,
                mb / t.as_secs_f64()
            );
        }
        let t = median(
            || {
                std::hint::black_box(validate(&plan));
            },
            runs,
        );
        println!(
            "| {tasks} | validate | {} edges | {:.2} ms | |",
            plan.sub_tasks
                .iter()
                .map(|t| t.dependencies.len())
                .sum::<usize>(),
            t.as_secs_f64() * 1e3
        );
    }
}
