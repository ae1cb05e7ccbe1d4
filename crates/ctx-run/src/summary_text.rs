//! `ctx run`'s text summary, an output emitter like [`crate::ResultsJson`]:
//! the report in, the text out, pinned by snapshot tests.

use ctx_cost::Usd;
use ctx_deps::{RunReport, SummaryTotals};
use ctx_model::{TaskExecutionResult, TaskStatus};
use ctx_table::printable;

/// `ctx run`'s text summary of `report`: a table of every task (id,
/// status with what made it special: reused, cached, cut at max_tokens,
/// summary fell back; prompt tokens; time; the checks that passed, when
/// any task has checks; cost, when a budget was set or something cost
/// money), then each failure's error, the cut and fallback warnings, the
/// summary calls, the counts and what was spent.
pub fn summary_text(report: &RunReport) -> String {
    let reused: std::collections::HashSet<&str> =
        report.reused.iter().map(String::as_str).collect();
    let cached = report
        .results
        .iter()
        .filter(|r| {
            r.metadata.cached
                && r.status == TaskStatus::Completed
                && !reused.contains(r.task_id.as_str())
        })
        .count();
    let show_cost = shows_cost(report);
    let show_checks = report.results.iter().any(|r| !r.metadata.checks.is_empty());
    let rows: Vec<Vec<String>> = report
        .results
        .iter()
        .map(|r| {
            let mut row = vec![
                printable(&r.task_id),
                if reused.contains(r.task_id.as_str()) {
                    format!("{} (reused)", r.status)
                } else if r.metadata.cached && r.status == TaskStatus::Completed {
                    format!("{} (cached)", r.status)
                } else if cut_by_max_tokens(r) {
                    format!("{} (cut at max_tokens)", r.status)
                } else if summary_fell_back(r) {
                    format!("{} (summary fell back)", r.status)
                } else {
                    r.status.to_string()
                },
                r.metadata
                    .prompt_tokens
                    .map_or_else(|| "-".to_string(), |t| t.to_string()),
                r.metadata
                    .execution_time_ms
                    .map_or_else(|| "-".to_string(), |ms| format!("{ms} ms")),
            ];
            if show_checks {
                row.push(checks_cell(r));
            }
            if show_cost {
                row.push(
                    r.metadata
                        .cost_usd
                        .map_or_else(|| "-".to_string(), ctx_deps::dollars),
                );
            }
            row
        })
        .collect();
    let mut header = vec!["TASK", "STATUS", "PROMPT TOKENS", "TIME"];
    let mut right = vec![false, false, true, true];
    if show_checks {
        header.push("CHECKS");
        right.push(true);
    }
    if show_cost {
        header.push("COST");
        right.push(true);
    }
    let mut out = ctx_table::render(&header, &right, &rows);
    let problems: Vec<&TaskExecutionResult> = report
        .results
        .iter()
        .filter(|r| r.error.is_some())
        .collect();
    if !problems.is_empty() {
        out.push('\n');
        for r in problems {
            let err = r.error.as_deref().unwrap_or_default();
            let mut lines = err.lines();
            // A server's error or a command's stderr: someone else's
            // text, escaped line by line before it reaches a terminal.
            out.push_str(&format!(
                "{} {}: {}\n",
                r.status,
                printable(&r.task_id),
                printable(lines.next().unwrap_or_default())
            ));
            for l in lines {
                out.push_str(&format!("    {}\n", printable(l)));
            }
        }
    }
    let cut: Vec<String> = report
        .results
        .iter()
        .filter(|r| cut_by_max_tokens(r))
        .map(|r| printable(&r.task_id))
        .collect();
    if !cut.is_empty() {
        out.push_str(&format!(
            "\nwarning: output cut short by max_tokens (finish_reason \"length\"): {}\n",
            cut.join(", ")
        ));
    }
    let fell_back: Vec<&TaskExecutionResult> = report
        .results
        .iter()
        .filter(|r| summary_fell_back(r))
        .collect();
    if !fell_back.is_empty() {
        out.push('\n');
        for r in fell_back {
            let why = r
                .metadata
                .summary
                .iter()
                .flat_map(|s| &s.calls)
                .find_map(|c| c.error.as_deref())
                .unwrap_or("the call failed");
            let mut lines = why.lines();
            out.push_str(&format!(
                "summary of {} fell back to truncate: {}\n",
                printable(&r.task_id),
                printable(lines.next().unwrap_or_default())
            ));
            for l in lines {
                out.push_str(&format!("    {}\n", printable(l)));
            }
        }
    }
    let totals = SummaryTotals::of(&report.results);
    if totals.calls > 0 {
        let mut notes = Vec::new();
        if totals.cached > 0 {
            notes.push(format!("{} cached", totals.cached));
        }
        if totals.fallbacks > 0 {
            notes.push(format!("{} fell back to truncate", totals.fallbacks));
        }
        // A command engine reports no usage: say nothing rather than 0.
        let tokens = if totals.prompt_tokens + totals.completion_tokens > 0 {
            format!(
                ", {} prompt + {} completion tokens",
                totals.prompt_tokens, totals.completion_tokens
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "\nsummaries: {}{}{tokens}, {} ms\n",
            ctx_model::display::count(totals.calls, "call", "calls"),
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            },
            totals.time_ms
        ));
    }
    out.push_str(&format!(
        "\n{}: {} completed, {} failed, {} skipped{}\n",
        tasks(report.results.len()),
        report.count(TaskStatus::Completed),
        report.count(TaskStatus::Failed),
        report.count(TaskStatus::Skipped),
        match (report.reused.len(), cached) {
            (0, 0) => String::new(),
            (r, 0) => format!(" ({r} reused)"),
            (0, c) => format!(" ({c} cached)"),
            (r, c) => format!(" ({r} reused, {c} cached)"),
        }
    ));
    if show_cost && let Some(c) = report.cost {
        out.push_str(&cost_line(&c));
    }
    let metadata = || report.results.iter().map(|r| &r.metadata);
    if crate::cache_figures::any_usage(metadata()) {
        out.push_str(&format!(
            "prompt cache: {}\n",
            crate::cache_figures::CacheFigures::total(metadata()).text()
        ));
    }
    out
}

/// Whether an `llm` summary of this task's output failed, so its
/// dependents got the `truncate` form.
fn summary_fell_back(r: &TaskExecutionResult) -> bool {
    r.metadata.summary.as_ref().is_some_and(|s| s.fallback())
}

/// Whether the summary shows costs: a budget was set or something cost
/// money (a dry run's zeros are left out).
fn shows_cost(report: &RunReport) -> bool {
    report
        .cost
        .is_some_and(|c| c.budget.is_some() || c.total() > Usd::ZERO)
}

/// `spent $0.0012 of the $0.01 budget; 3 tasks skipped by the budget need
/// up to $0.004 more`.
fn cost_line(c: &ctx_deps::CostSummary) -> String {
    use ctx_deps::dollars;
    let mut line = format!("spent {}", dollars(c.total()));
    if c.earlier > Usd::ZERO {
        line.push_str(&format!(
            " ({} in this session, {} before)",
            dollars(c.spent),
            dollars(c.earlier)
        ));
    }
    if let Some(budget) = c.budget {
        line.push_str(&format!(" of the {} budget", dollars(budget)));
        if c.needed > Usd::ZERO {
            line.push_str(&format!(
                "; the tasks skipped by the budget need up to {} more",
                dollars(c.needed)
            ));
        }
    }
    if c.unknown > 0 {
        line.push_str(&format!(
            "; {} of unknown cost (no price, or interrupted)",
            tasks(c.unknown)
        ));
    }
    line.push('\n');
    line
}

/// Whether the engine stopped because it hit `max_tokens`: the output is
/// complete as far as ctx knows, but probably not as far as the user wants.
fn cut_by_max_tokens(r: &TaskExecutionResult) -> bool {
    r.status == TaskStatus::Completed
        && r.metadata.finish_reason == Some(ctx_model::FinishReason::Length)
}

/// A task's checks in the table: how many of the final attempt's checks
/// passed, and which attempt that was when the checks were retried; `-`
/// for a task without checks.
fn checks_cell(r: &TaskExecutionResult) -> String {
    let checks = &r.metadata.checks;
    if checks.is_empty() {
        return "-".to_string();
    }
    let passed = checks.iter().filter(|c| c.passed).count();
    match r.metadata.check_attempts.len() {
        n if n > 1 => format!("{passed}/{} (attempt {n})", checks.len()),
        _ => format!("{passed}/{}", checks.len()),
    }
}

/// `1 task`, `4 tasks`.
pub fn tasks(n: usize) -> String {
    ctx_model::display::count(n, "task", "tasks")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(json: serde_json::Value) -> TaskExecutionResult {
        serde_json::from_value(json).unwrap()
    }

    fn report(results: Vec<TaskExecutionResult>, reused: &[&str]) -> RunReport {
        RunReport {
            order: results.iter().map(|r| r.task_id.clone()).collect(),
            results,
            reused: reused.iter().map(|s| s.to_string()).collect(),
            interrupted: false,
            makespan: std::time::Duration::ZERO,
            cost: None,
            awaiting: Vec::new(),
        }
    }

    fn attempt(n: u32) -> serde_json::Value {
        serde_json::json!({"number": n, "prompt": "p", "prompt_tokens": 3, "output": "o"})
    }

    #[test]
    fn a_plain_run() {
        let r = report(
            vec![
                result(serde_json::json!({"task_id": "a", "status": "completed",
                    "metadata": {"prompt_tokens": 120, "execution_time_ms": 5}})),
                result(
                    serde_json::json!({"task_id": "long-task-id", "status": "completed",
                    "metadata": {"prompt_tokens": 7, "execution_time_ms": 1500, "cached": true}}),
                ),
                result(serde_json::json!({"task_id": "b", "status": "completed",
                    "metadata": {"prompt_tokens": 9, "execution_time_ms": 2}})),
            ],
            &["b"],
        );
        insta::assert_snapshot!(summary_text(&r));
    }

    /// The CHECKS column appears when a task has checks: passed of the
    /// final attempt, and which attempt when they were retried.
    #[test]
    fn a_checked_run_shows_what_passed() {
        let pass =
            serde_json::json!({"kind": "contains", "passed": true, "message": "has 10 x 20"});
        let fail = serde_json::json!({"kind": "regex", "passed": false, "message": "no <canvas"});
        let r = report(
            vec![
                result(serde_json::json!({"task_id": "css", "status": "completed",
                    "metadata": {"prompt_tokens": 300, "execution_time_ms": 40,
                        "checks": [pass, pass], "check_attempts": [attempt(1), attempt(2)]}})),
                result(serde_json::json!({"task_id": "game", "status": "failed",
                    "error": "checks failed after 2 attempts: regex: no <canvas",
                    "metadata": {"prompt_tokens": 410, "execution_time_ms": 52,
                        "checks": [pass, fail], "check_attempts": [attempt(1), attempt(2)]}})),
                result(
                    serde_json::json!({"task_id": "notes", "status": "completed",
                    "metadata": {"prompt_tokens": 12, "execution_time_ms": 3}}),
                ),
                result(serde_json::json!({"task_id": "final", "status": "skipped",
                    "error": "dependency `game` failed", "metadata": {}})),
            ],
            &[],
        );
        insta::assert_snapshot!(summary_text(&r));
    }
}
