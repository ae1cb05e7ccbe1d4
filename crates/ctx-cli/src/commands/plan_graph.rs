//! `ctx plan graph PLAN --format mermaid|dot|json`: the DAG with its
//! topological order, levels and critical path.
//!
//! The data comes from `ctx_deps::PlanGraph`; this module only renders it.
//! Edges point from a dependency to the task that needs it (the direction
//! outputs flow). Critical-path tasks are drawn bold (dot) or with the
//! `critical` class (mermaid). The critical path is weighed by task count,
//! or by `params.estimated_ms` when any task gives one; every format says
//! which.
//!
//! An invalid plan exits 2 with its validation problems.

use std::fmt::Write as _;
use std::path::PathBuf;

use ctx_deps::PlanGraph;
use ctx_model::Plan;

use crate::exit::{CliError, CliResult, Exit};

// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON or YAML by extension; `-` reads JSON from stdin).
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value = "mermaid")]
    pub format: Format,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A Mermaid flowchart (renders on GitHub and in most markdown viewers).
    Mermaid,
    /// Graphviz dot (`ctx plan graph p.yaml --format dot | dot -Tsvg`).
    Dot,
    /// Order, levels, critical path and per-task priority as JSON; a map
    /// task carries its `map` block.
    Json,
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let plan = super::plan_check::load_valid_plan(&args.plan)?;
    let graph = PlanGraph::new(&plan)
        .map_err(|e| CliError::usage(format!("{}: {e}", args.plan.display())))?;
    let text = match args.format {
        Format::Mermaid => mermaid(&plan, &graph),
        Format::Dot => dot(&plan, &graph),
        Format::Json => crate::io::json_text(&graph.summary(&plan))?,
    };
    crate::io::print_stdout(&text)?;
    Ok(Exit::Ok)
}

/// ` ×N` after a map task's id: it runs once per item, up to
/// `map.max_items`; its items are not drawn (they exist only once the
/// list is known).
fn map_mark(t: &ctx_model::SubTask) -> String {
    t.map
        .as_ref()
        .and_then(|m| m.max_items)
        .map_or_else(String::new, |n| format!(" ×{n}"))
}

/// One line of a description, at most `max` characters.
fn short(description: &str, max: usize) -> String {
    let line = description.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= max {
        return line.to_string();
    }
    let mut s: String = line.chars().take(max.saturating_sub(3)).collect();
    s.push_str("...");
    s
}

/// Task `i`'s priority with its unit: the length of the longest path from
/// it to the end, in tasks or in estimated milliseconds (whichever the
/// critical path is weighed by), so `priority 3` is never left to guess.
fn priority(graph: &PlanGraph, i: usize) -> String {
    let n = graph.remaining_path(i);
    match graph.weighting() {
        ctx_deps::Weighting::TaskCount => ctx_model::display::count(n, "task", "tasks"),
        ctx_deps::Weighting::EstimatedMs => format!("{n} ms"),
    }
}

fn path_comment(plan: &Plan, graph: &PlanGraph) -> String {
    let ids: Vec<&str> = graph
        .critical_path()
        .iter()
        .map(|&i| plan.sub_tasks[i].id.as_str())
        .collect();
    format!(
        "critical path ({}, length {}): {}",
        graph.weighting().as_str(),
        graph.critical_path_length(),
        ids.join(" -> ")
    )
}

/// The critical path as constant-time membership tests. Asking the path
/// itself (`contains`, or a scan of its edges) per node and per edge made
/// drawing 3 million edges take 24–39 s against 3 s for `--format json`.
struct CriticalPath {
    /// For each task on the path, the task after it (`NONE` at the end);
    /// `NOT_ON_PATH` for every other task. A path visits a task once.
    next: Vec<usize>,
}

const NOT_ON_PATH: usize = usize::MAX;
const NONE: usize = usize::MAX - 1;

impl CriticalPath {
    fn new(path: &[usize], tasks: usize) -> CriticalPath {
        let mut next = vec![NOT_ON_PATH; tasks];
        for (k, &i) in path.iter().enumerate() {
            if let Some(slot) = next.get_mut(i) {
                *slot = path.get(k + 1).copied().unwrap_or(NONE);
            }
        }
        CriticalPath { next }
    }

    fn has_node(&self, i: usize) -> bool {
        self.next.get(i).is_some_and(|&n| n != NOT_ON_PATH)
    }

    /// Whether `to` follows `from` on the path.
    fn has_edge(&self, from: usize, to: usize) -> bool {
        self.next.get(from) == Some(&to)
    }
}

fn mermaid(plan: &Plan, graph: &PlanGraph) -> String {
    // Mermaid labels are quoted strings; `"` is written as an entity and
    // line breaks are dropped. Node names are generated (t0, t1, ...) so
    // that no id can break the syntax.
    let label = |s: &str| {
        s.replace('&', "#amp;")
            .replace('"', "#quot;")
            .replace(['\n', '\r'], " ")
    };
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(out, "  %% {}", label(&path_comment(plan, graph)));
    for (i, t) in plan.sub_tasks.iter().enumerate() {
        let _ = writeln!(
            out,
            "  t{i}[\"{}{}: {}<br/>level {}, priority {}\"]",
            label(&t.id),
            map_mark(t),
            label(&short(&t.description, 60)),
            graph.level(i),
            priority(graph, i)
        );
    }
    let critical = graph.critical_path();
    let on_path = CriticalPath::new(critical, plan.sub_tasks.len());
    let mut critical_links = Vec::new();
    let mut link = 0usize;
    for &i in graph.topological_order() {
        for d in graph.dependencies(i) {
            let _ = writeln!(out, "  t{d} --> t{i}");
            if on_path.has_edge(d, i) {
                critical_links.push(link.to_string());
            }
            link += 1;
        }
    }
    if !critical.is_empty() {
        out.push_str("  classDef critical stroke-width:3px\n");
        let names: Vec<String> = critical.iter().map(|i| format!("t{i}")).collect();
        let _ = writeln!(out, "  class {} critical", names.join(","));
    }
    if !critical_links.is_empty() {
        let _ = writeln!(
            out,
            "  linkStyle {} stroke-width:3px",
            critical_links.join(",")
        );
    }
    out
}

fn dot(plan: &Plan, graph: &PlanGraph) -> String {
    let quote = |s: &str| {
        let mut q = String::with_capacity(s.len() + 2);
        q.push('"');
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' | '\r' => q.push(' '),
                c => q.push(c),
            }
        }
        q.push('"');
        q
    };
    let on_path = CriticalPath::new(graph.critical_path(), plan.sub_tasks.len());
    let mut out = String::from("digraph plan {\n");
    let _ = writeln!(out, "  // {}", path_comment(plan, graph).replace('\n', " "));
    out.push_str("  rankdir=TB;\n  node [shape=box];\n");
    for (i, t) in plan.sub_tasks.iter().enumerate() {
        let text = format!(
            "{}{}: {}\nlevel {}, priority {}",
            t.id,
            map_mark(t),
            short(&t.description, 60),
            graph.level(i),
            priority(graph, i)
        );
        // Keep the line break between description and figures as dot's `\n`.
        let label = quote(&text.replace('\n', "\u{0}")).replace('\u{0}', "\\n");
        let style = if on_path.has_node(i) {
            ", style=bold, penwidth=2"
        } else {
            ""
        };
        let _ = writeln!(out, "  {} [label={label}{style}];", quote(&t.id));
    }
    for &i in graph.topological_order() {
        for d in graph.dependencies(i) {
            let _ = writeln!(
                out,
                "  {} -> {}{};",
                quote(&plan.sub_tasks[d].id),
                quote(&plan.sub_tasks[i].id),
                if on_path.has_edge(d, i) {
                    " [penwidth=2]"
                } else {
                    ""
                }
            );
        }
    }
    out.push_str("}\n");
    out
}
