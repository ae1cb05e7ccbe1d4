//! Scaling of plan checking on inputs a generator can produce (`cargo
//! bench -p ctx-model --bench scaling`): each shape is timed at N and 4N
//! tasks and the ratio printed; near-linear work gives about 4 (a
//! quadratic step gives 16). Figures are recorded in docs/performance.md.
//!
//! Every step is what `ctx plan check` does with the text: parse (reading
//! past unknown fields), validate, and locate every problem in the text.

use std::time::{Duration, Instant};

use ctx_model::{FieldLocator, PlanFormat, parse_plan_with_unknown_fields};

fn task(id: &str, deps: &[String], extra: &str) -> String {
    let deps: Vec<String> = deps.iter().map(|d| format!("\"{d}\"")).collect();
    format!(
        "{{\"id\": \"{id}\", \"description\": \"Step {id}\", \"dependencies\": [{}],{extra} \"tool_or_prompt\": {{\"name\": \"inference\", \"params\": {{\"prompt\": \"Do {id}.\"}}}}}}",
        deps.join(", ")
    )
}

fn plan(tasks: Vec<String>) -> String {
    format!(
        "{{\"schema_version\": 1, \"sub_tasks\": [\n{}\n]}}\n",
        tasks.join(",\n")
    )
}

/// Each task after the first depends on its predecessor, misspelt
/// (`taks-00041` for `task-00041`): N unknown ids, each one transposition
/// from a real one, all of the same length and prefix.
fn near_miss_dependencies(n: usize) -> String {
    plan(
        (0..n)
            .map(|i| {
                let deps = if i == 0 {
                    vec![]
                } else {
                    vec![format!("taks-{:05}", i - 1)]
                };
                task(&format!("task-{i:05}"), &deps, "")
            })
            .collect(),
    )
}

/// The same with the right ids but a misspelt key in every task.
fn unknown_fields(n: usize) -> String {
    plan(
        (0..n)
            .map(|i| {
                let deps = if i == 0 {
                    vec![]
                } else {
                    vec![format!("task-{:05}", i - 1)]
                };
                task(&format!("task-{i:05}"), &deps, " \"dependancies\": [],")
            })
            .collect(),
    )
}

/// A valid plan of the same shape, for comparison.
fn valid(n: usize) -> String {
    plan(
        (0..n)
            .map(|i| {
                let deps = if i == 0 {
                    vec![]
                } else {
                    vec![format!("task-{:05}", i - 1)]
                };
                task(&format!("task-{i:05}"), &deps, "")
            })
            .collect(),
    )
}

/// Parse, validate and locate every problem, as `ctx plan check` does;
/// returns the number of problems.
fn check(text: &str) -> usize {
    let parsed = parse_plan_with_unknown_fields(text, "b.json", PlanFormat::Json).unwrap();
    let problems = parsed.problems();
    if !problems.is_empty() {
        let at = FieldLocator::new(text);
        for p in &problems {
            std::hint::black_box(at.locate_problem(p));
        }
    }
    problems.len()
}

fn median(text: &str, runs: usize) -> (Duration, usize) {
    let mut found = 0;
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            found = check(std::hint::black_box(text));
            t.elapsed()
        })
        .collect();
    times.sort();
    (times[times.len() / 2], found)
}

fn main() {
    let n = 10_000;
    println!(
        "| shape | problems at N | N = {n} | 4N = {} | ratio |",
        4 * n
    );
    println!("|---|---|---|---|---|");
    for (shape, make) in [
        (
            "near-miss unknown dependencies",
            near_miss_dependencies as fn(usize) -> String,
        ),
        ("an unknown field in every task", unknown_fields),
        ("valid plan", valid),
    ] {
        let (small, problems) = median(&make(n), 5);
        let (large, _) = median(&make(4 * n), 5);
        println!(
            "| {shape} | {problems} | {:.1} ms | {:.1} ms | {:.1} |",
            small.as_secs_f64() * 1e3,
            large.as_secs_f64() * 1e3,
            large.as_secs_f64() / small.as_secs_f64()
        );
    }
}
