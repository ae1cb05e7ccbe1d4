//! The dependency graph's operations on one seeded plan (`cargo bench -p
//! ctx-model --bench graph [-- TASKS]`, 50,000 tasks by default, each with
//! up to four dependencies among the 300 tasks before it, as `cargo xtask
//! bench-run` generates them): building it, the topological order, the
//! cyclic components, every task's neighbours both ways, the tasks
//! downstream of twenty early ones, and a whole validation. Prints the
//! median of 21 runs of each; figures are recorded in docs/performance.md
//! ("The dependency graph on petgraph").
//!
//! Only calls whose results compare across implementations are timed, and
//! a checksum of what they returned is printed, so that two builds run side
//! by side can be seen to compute the same thing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ctx_model::graph::DependencyGraph;
use ctx_model::{Plan, validate};

/// A plan of `n` tasks: task `i` depends on up to four of the 300 before
/// it, drawn by a seeded linear congruential generator.
fn plan(n: usize) -> Plan {
    let mut state: u64 = 42;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let k = if i == 0 { 0 } else { next() % 5 };
            let deps: Vec<String> = (0..k)
                .map(|_| format!("t{}", i - 1 - next() % i.min(300)))
                .collect();
            serde_json::json!({"id": format!("t{i}"), "description": "d", "dependencies": deps,
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}})
        })
        .collect();
    serde_json::from_value(serde_json::json!({"schema_version": 1, "sub_tasks": tasks}))
        .expect("a generated plan reads")
}

/// A named step and the call it times, returning a figure for the
/// checksum.
type Step<'a> = (&'static str, Box<dyn FnMut() -> usize + 'a>);

fn median(mut f: impl FnMut() -> usize, runs: usize, checksum: &mut usize) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            *checksum = checksum.wrapping_add(black_box(f()));
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50_000);
    let p = plan(n);
    let g = DependencyGraph::new(&p);
    let all = vec![true; n];
    let mut sum = 0usize;
    let steps: [Step<'_>; 6] = [
        ("build", Box::new(|| DependencyGraph::new(&p).len())),
        (
            "topological order",
            Box::new(|| g.topological_order().order.len()),
        ),
        (
            "cyclic components",
            Box::new(|| g.cyclic_components(&all).len()),
        ),
        (
            "neighbours, every task",
            Box::new(|| {
                (0..n).fold(0, |acc, i| {
                    let acc = g.dependencies(i).fold(acc, |a, d| a ^ d);
                    g.dependents(i).fold(acc, usize::wrapping_add)
                })
            }),
        ),
        (
            "transitive dependents of 20 tasks",
            Box::new(|| (0..20).map(|i| g.transitive_dependents(i * 7).len()).sum()),
        ),
        ("validate", Box::new(|| validate(&p).len())),
    ];
    println!("| {n} tasks | median of 21 |");
    println!("|---|---|");
    for (step, mut f) in steps {
        let t = median(&mut f, 21, &mut sum);
        println!("| {step} | {:.2} ms |", t.as_secs_f64() * 1e3);
    }
    println!("\nchecksum {sum}");
}
