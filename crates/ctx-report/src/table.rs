//! The task table (`templates/tasks.html`): one row per task, a map
//! task's items right after it, indented; and the cells' texts, which the
//! task details share.

use crate::analysis::Span;
use crate::escape::truncate;
use crate::format::{count, duration, usd_opt};
use crate::groups::{grouped_order, parents};
use crate::html::Page;
use crate::input::{AttemptOutcome, TaskReport, TaskState};

/// One row of the task table, its cells as the page shows them.
pub(crate) struct TableRow {
    pub(crate) at: usize,
    /// An item of a map task, indented under it.
    pub(crate) item: bool,
    pub(crate) id: String,
    pub(crate) status: TaskState,
    pub(crate) level: usize,
    pub(crate) start: String,
    pub(crate) time: String,
    pub(crate) calls: String,
    pub(crate) prompt_tokens: String,
    pub(crate) cut: String,
    pub(crate) completion_tokens: String,
    pub(crate) cost: String,
    pub(crate) cached: bool,
}

impl Page<'_> {
    /// The table's rows: a map task's items follow it, in input order.
    pub(crate) fn table_rows(&self) -> Vec<TableRow> {
        let parents = parents(self.input);
        let order = grouped_order(&parents, |i| i);
        (order.into_iter())
            .map(|i| {
                let task = &self.input.tasks[i];
                let (start, time) = time_cell(self.a.span[i]);
                let priced = task.started_at.is_some() || task.cost_usd.is_some();
                TableRow {
                    at: i,
                    item: parents[i].is_some(),
                    id: truncate(&task.id, 48),
                    status: task.status,
                    level: self.a.level[i],
                    start,
                    time,
                    calls: attempts_summary(task),
                    prompt_tokens: task.prompt_tokens.map(count).unwrap_or_default(),
                    cut: cut_summary(task),
                    completion_tokens: task.completion_tokens.map(count).unwrap_or_default(),
                    cost: if priced { cost(task) } else { String::new() },
                    cached: task.cached,
                }
            })
            .collect()
    }
}

/// `3 (1 retried, 1 check failed)`: a task's engine calls; empty when it
/// made none.
pub(crate) fn attempts_summary(task: &TaskReport) -> String {
    if task.attempts.is_empty() {
        return String::new();
    }
    let of = |outcome| {
        task.attempts
            .iter()
            .filter(|a| a.outcome == outcome)
            .count()
    };
    let (retries, checks) = (of(AttemptOutcome::Retry), of(AttemptOutcome::CheckFailure));
    let mut notes = Vec::new();
    if retries > 0 {
        notes.push(format!("{retries} retried"));
    }
    if checks > 0 {
        notes.push(format!("{checks} check failed"));
    }
    match notes.is_empty() {
        true => task.attempts.len().to_string(),
        false => format!("{} ({})", task.attempts.len(), notes.join(", ")),
    }
}

/// The tokens of dependency outputs cut from a task's prompt.
fn cut_summary(task: &TaskReport) -> String {
    if task.dependency_cuts.is_empty() {
        let unknown = !task.dependencies.is_empty() && task.started_at.is_some();
        return if unknown { "not recorded" } else { "" }.into();
    }
    let kept: u64 = task.dependency_cuts.iter().map(|c| c.kept_tokens).sum();
    let original: u64 = task.dependency_cuts.iter().map(|c| c.original_tokens).sum();
    let cut = original.saturating_sub(kept);
    if cut == 0 {
        "none".into()
    } else {
        format!("{} of {}", count(cut), count(original))
    }
}

/// Whether the engine reported a usage for `task` (its completion tokens,
/// or a prompt-cache figure): only then can it have said something about
/// its prompt cache, so only then is "prompt cache not reported" news.
pub(crate) fn reports_usage(task: &TaskReport) -> bool {
    task.completion_tokens.is_some()
        || task.cached_tokens.is_some()
        || task.cache_write_tokens.is_some()
        || task.cache_saving_usd.is_some()
}

/// A task's cost; a cache hit without a recorded cost made no call.
pub(crate) fn cost(task: &TaskReport) -> String {
    match task.cost_usd {
        None if task.cached => "none (cached)".into(),
        c => usd_opt(c),
    }
}

/// A task's start after the run's and its duration, empty when it never
/// started.
fn time_cell(s: Option<Span>) -> (String, String) {
    match s {
        Some(s) => (
            format!("+{}", duration(s.start)),
            format!(
                "{}{}",
                duration(s.duration()),
                if s.open { " so far" } else { "" }
            ),
        ),
        None => (String::new(), String::new()),
    }
}
