//! The results.json wire format: what `ctx run --format json` prints and
//! `--out DIR/results.json` holds (docs/runs.md, "results.json").
//!
//! Structs rather than a `serde_json::Map`, so that keys keep the
//! documented order, and borrowed, so that a report of thousands of tasks
//! is not copied to be printed. `ctx runs export` prints the same tasks
//! from a store, byte-identical but for the `started_at` and `ended_at` it
//! adds after each task's keys; it builds on [`TaskJson`] for that reason.

use std::borrow::Borrow;

use ctx_cost::Usd;
use ctx_deps::{RunReport, SummaryTotals};
use ctx_model::{ResultMetadata, TaskExecutionResult};
use serde::Serialize;

use crate::cache_figures::CacheFigures;
use crate::map_counts::MapCounts;

/// The whole object: every task, the start order, and what the run spent.
#[derive(Debug, Serialize)]
pub struct ResultsJson<'a> {
    /// Ids of the tasks started, in start order.
    pub order: Vec<&'a str>,
    /// Every task of the plan, in plan order.
    pub tasks: Vec<TaskJson<'a>>,
    /// What the run has spent in US dollars, earlier sessions of a resumed
    /// run included (the sum of the known `cost_usd`).
    pub spent_usd: Option<Usd>,
    /// The tasks' prompt-cache figures summed: `cached_tokens`,
    /// `cache_write_tokens`, `cache_saving_usd`, each null when no task
    /// reported it.
    #[serde(flatten)]
    pub cache: CacheFigures,
    /// The budget, when the run had one (absent otherwise, so that `ctx
    /// runs export` of the run, which does not know the budget, matches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<Usd>,
    /// With a budget: the high ends of the tasks it skipped, what the rest
    /// of the run may need.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needed_usd: Option<Usd>,
    /// The `summarize_strategy: llm` calls, when any were made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summaries: Option<SummariesJson>,
    /// The files `--publish-root` wrote, in plan order (absent when
    /// nothing was published, so results.json of a run without it is
    /// unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<crate::publish::Published>,
    /// The approval gates left waiting (`ctx run --format json`), each
    /// with the command that approves it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<crate::gates::Waiting>,
    /// The `--alert-at` thresholds the run crossed ([`crate::alerts`]);
    /// left out when none was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<crate::alerts::Alert>,
    /// The cheaper tier of its period budget the run ran on
    /// ([`crate::period_budget::choose_tier`]); left out on the standard
    /// tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<crate::period_budget::FallbackJson>,
}

impl<'a> ResultsJson<'a> {
    /// The object for a run's report.
    pub fn of(report: &'a RunReport) -> Self {
        ResultsJson {
            order: report.order.iter().map(String::as_str).collect(),
            tasks: TaskJson::all(&report.results),
            spent_usd: report.cost.map(|c| c.total()),
            cache: CacheFigures::total(report.results.iter().map(|r| &r.metadata)),
            budget_usd: report.cost.and_then(|c| c.budget),
            needed_usd: report.cost.and_then(|c| c.budget.map(|_| c.needed)),
            summaries: SummariesJson::of(SummaryTotals::of(&report.results)),
            published: Vec::new(),
            waiting: Vec::new(),
            alerts: Vec::new(),
            fallback: None,
        }
    }
}

/// The totals of a run's summary calls in [`ResultsJson`].
#[derive(Debug, Serialize)]
pub struct SummariesJson {
    calls: u64,
    cached: u64,
    fallbacks: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    time_ms: u64,
}

impl SummariesJson {
    /// The totals, or `None` when no summary call was made.
    pub fn of(t: SummaryTotals) -> Option<Self> {
        (t.calls > 0).then_some(SummariesJson {
            calls: t.calls,
            cached: t.cached,
            fallbacks: t.fallbacks,
            prompt_tokens: t.prompt_tokens,
            completion_tokens: t.completion_tokens,
            time_ms: t.time_ms,
        })
    }
}

/// One task of [`ResultsJson`].
#[derive(Debug, Serialize)]
pub struct TaskJson<'a> {
    task_id: &'a str,
    status: &'static str,
    /// A map task's items counted ([`MapCounts`]); left out for any other
    /// task.
    #[serde(skip_serializing_if = "Option::is_none")]
    map: Option<MapCounts>,
    output: &'a str,
    /// The output as the engine wrote it, when the task's `output` block
    /// removed something from it (docs/plan-format.md, "Cleaned
    /// outputs"); left out otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_output: Option<&'a str>,
    /// The lines the `output` block removed, in order; left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    removed_lines: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    prompt: Option<&'a str>,
    /// The final attempt's check results (`kind`, `passed`, `message`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    checks: &'a [ctx_checks::CheckResult],
    /// How many attempts the checks took (0, left out, without checks).
    #[serde(skip_serializing_if = "is_zero")]
    check_attempts: usize,
    metadata: &'a ResultMetadata,
    /// `metadata.cost_usd`, repeated at the top for tools that read only
    /// the top level; null when unknown.
    cost_usd: Option<Usd>,
    /// `cached_tokens` and `cache_write_tokens` of `metadata.tokens_used`
    /// and `metadata.cache_saving_usd`, always written: null when the
    /// engine reported none (the stored metadata leaves the key out), so
    /// "not reported" never reads as a missing key or a 0.
    #[serde(flatten)]
    cache: CacheFigures,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl<'a> TaskJson<'a> {
    /// A result as JSON.
    pub fn of(r: &'a TaskExecutionResult) -> Self {
        TaskJson {
            task_id: &r.task_id,
            status: r.status.as_str(),
            map: None,
            output: &r.output,
            raw_output: r.raw_output.as_deref(),
            removed_lines: r.raw_output.as_deref().map_or_else(Vec::new, |raw| {
                ctx_model::output_cleaning::removed_lines(raw, &r.output)
            }),
            summary: r.summary.as_deref(),
            error: r.error.as_deref(),
            prompt: r.prompt.as_deref(),
            checks: &r.metadata.checks,
            check_attempts: r.metadata.check_attempts.len(),
            metadata: &r.metadata,
            cost_usd: r.metadata.cost_usd,
            cache: CacheFigures::of(&r.metadata),
        }
    }

    /// Every result as JSON, each map task with its items counted among
    /// `results` ([`MapCounts::of_run`]).
    pub fn all<R: Borrow<TaskExecutionResult>>(results: &'a [R]) -> Vec<Self> {
        let maps = MapCounts::of_run(results.iter().map(Borrow::borrow));
        results
            .iter()
            .map(|r| {
                let r = r.borrow();
                TaskJson {
                    map: maps.get(&r.task_id).copied(),
                    ..TaskJson::of(r)
                }
            })
            .collect()
    }
}

/// The one JSON layout of ctx (defined in the plan model).
pub use ctx_model::json_text;
