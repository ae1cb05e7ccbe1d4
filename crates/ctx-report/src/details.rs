//! Each task's details (`templates/details.html`): a line of facts, its
//! dependencies with what their outputs kept in its prompt, its engine
//! calls when one was retried or failed, its checks, its error, prompt
//! and output. The texts here are plain; the template escapes them.

use std::collections::HashMap;

use crate::escape::truncate;
use crate::format::{CacheRead, count, duration, prompt_cache};
use crate::html::Page;
use crate::input::{AttemptOutcome, CheckReport, TaskReport};
use crate::table::{attempts_summary, cost, reports_usage};

/// What the details of one task show.
pub(crate) struct Detail<'a> {
    pub(crate) at: usize,
    pub(crate) task: &'a TaskReport,
    /// The description cut for the summary line.
    pub(crate) description_cut: String,
    /// How long it ran, when it started.
    pub(crate) duration: Option<String>,
    pub(crate) facts: Vec<Fact>,
    /// Whether it ran with dependencies whose cuts were not recorded.
    pub(crate) cuts_unrecorded: bool,
    pub(crate) dependencies: Vec<Dependency<'a>>,
    /// Its engine calls, when one was retried or failed; else empty.
    pub(crate) calls: Vec<Call>,
    pub(crate) checks: Vec<CheckRow<'a>>,
    pub(crate) prompt_chars: String,
    pub(crate) output_chars: String,
}

/// One fact of the facts line; `strong` is shown in bold.
pub(crate) struct Fact {
    pub(crate) text: String,
    pub(crate) strong: bool,
}

impl From<String> for Fact {
    fn from(text: String) -> Self {
        Fact {
            text,
            strong: false,
        }
    }
}

/// A dependency: its id, its position when it is in the run, and what its
/// output kept in the prompt (` all 40 tokens kept`) when recorded.
pub(crate) struct Dependency<'a> {
    pub(crate) id: &'a str,
    pub(crate) at: Option<usize>,
    pub(crate) cut: Option<String>,
}

/// One engine call of an eventful task.
pub(crate) struct Call {
    pub(crate) number: u32,
    pub(crate) start: String,
    pub(crate) time: String,
    pub(crate) outcome: &'static str,
    pub(crate) class: String,
    pub(crate) error: String,
}

/// One row of the checks table: a check of an attempt (the attempt's
/// number on its first check only), or an attempt not checked, with the
/// engine's error as its message. Messages are cut to 500 characters; a
/// failed check's `detail` shows under its message.
pub(crate) struct CheckRow<'a> {
    pub(crate) number: String,
    pub(crate) check: Option<&'a CheckReport>,
    pub(crate) message: String,
    pub(crate) detail: Option<String>,
}

impl<'a> Page<'a> {
    /// Every task's details, in input order.
    pub(crate) fn details(&self) -> impl Iterator<Item = Detail<'a>> + use<'a, '_> {
        let mut positions: HashMap<&str, usize> = HashMap::new();
        for (i, t) in self.input.tasks.iter().enumerate() {
            positions.entry(t.id.as_str()).or_insert(i);
        }
        let mut on_path = vec![false; self.input.tasks.len()];
        for &i in &self.a.actual_path {
            on_path[i] = true;
        }
        let input = self.input;
        (input.tasks.iter().enumerate()).map(move |(i, task)| Detail {
            at: i,
            task,
            description_cut: truncate(&task.description, 120),
            duration: self.a.span[i].map(|s| duration(s.duration())),
            facts: self.facts(i, on_path[i]),
            cuts_unrecorded: task.dependency_cuts.is_empty() && task.started_at.is_some(),
            dependencies: dependencies(task, &positions),
            calls: self.calls(task),
            checks: check_rows(task),
            prompt_chars: (task.prompt.as_deref()).map_or_else(String::new, characters),
            output_chars: characters(&task.output),
        })
    }

    /// The facts line of task `i`: model, level, times, whether it is on
    /// the actual critical path, tokens, cost, the prompt cache, calls and
    /// checks.
    fn facts(&self, i: usize, on_path: bool) -> Vec<Fact> {
        let task = &self.input.tasks[i];
        let mut facts: Vec<Fact> = Vec::new();
        if let Some(m) = &task.model {
            facts.push(format!("model {m}").into());
        }
        facts.push(format!("level {}", self.a.level[i]).into());
        match (self.a.span[i], task.started_at) {
            (Some(s), Some(start)) => {
                facts.push(format!("started {start} (+{})", duration(s.start)).into());
                facts.push(match task.ended_at {
                    Some(end) => format!("ended {end}").into(),
                    None => String::from("not ended").into(),
                });
                let so_far = if s.open { " so far" } else { "" };
                facts.push(format!("{}{so_far}", duration(s.duration())).into());
            }
            _ => facts.push(String::from("never started").into()),
        }
        if on_path {
            facts.push(Fact {
                text: "on the actual critical path".into(),
                strong: true,
            });
        }
        facts.extend(usage_facts(task).into_iter().map(Fact::from));
        facts
    }

    /// A task's engine calls, when there was more than one or one did not
    /// simply succeed; else none.
    fn calls(&self, task: &TaskReport) -> Vec<Call> {
        let eventful = task.attempts.len() > 1
            || (task.attempts.iter())
                .any(|at| at.outcome != AttemptOutcome::Success || at.error.is_some());
        if !eventful {
            return Vec::new();
        }
        let origin = self.a.origin_ms;
        (task.attempts.iter())
            .map(|at| Call {
                number: at.number,
                start: (at.started_at)
                    .map(|s| format!("+{}", duration(s.unix_ms().saturating_sub(origin))))
                    .unwrap_or_default(),
                time: match (at.started_at, at.ended_at) {
                    (Some(s), Some(e)) => duration(e.unix_ms().saturating_sub(s.unix_ms())),
                    _ => String::new(),
                },
                outcome: at.outcome.label(),
                class: at.class.clone().unwrap_or_default(),
                error: at
                    .error
                    .as_deref()
                    .map(|e| truncate(e, 500))
                    .unwrap_or_default(),
            })
            .collect()
    }
}

/// The facts of what a task used: tokens, cost, the prompt cache, whether
/// it was served from the cache, its engine calls and checks.
fn usage_facts(task: &TaskReport) -> Vec<String> {
    let mut facts = vec![format!(
        "{} prompt tokens",
        task.prompt_tokens.map_or_else(|| "unknown".into(), count)
    )];
    facts.push(match task.completion_tokens {
        Some(n) => format!("{} completion tokens", count(n)),
        // It ran and its engine reported none (a command, a dry run).
        None if task.started_at.is_some() => "completion tokens not reported".into(),
        None => "unknown completion tokens".into(),
    });
    facts.push(format!("cost {}", cost(task)));
    if let Some(tier) = &task.service_tier {
        facts.push(format!("billed at the {tier} tier"));
    }
    if reports_usage(task) {
        let read = CacheRead {
            tokens: task.cached_tokens,
            of_prompt: task.usage_prompt_tokens,
        };
        let cache = prompt_cache(read, task.cache_write_tokens, task.cache_saving_usd);
        facts.push(format!("prompt cache {cache}"));
    }
    if task.cached {
        facts.push("served from the cache".into());
    }
    if !task.attempts.is_empty() {
        facts.push(format!("engine calls: {}", attempts_summary(task)));
    }
    if let Some(last) = task.check_attempts.last().filter(|c| !c.checks.is_empty()) {
        let passed = last.checks.iter().filter(|c| c.passed).count();
        facts.push(format!("checks {passed} of {} passed", last.checks.len()));
    }
    facts
}

/// A task's dependencies, declared ones first, then those only its cuts
/// name, each with what its output kept in the prompt.
fn dependencies<'a>(task: &'a TaskReport, positions: &HashMap<&str, usize>) -> Vec<Dependency<'a>> {
    let mut ids: Vec<&str> = task.dependencies.iter().map(String::as_str).collect();
    for c in &task.dependency_cuts {
        if !ids.contains(&c.task_id.as_str()) {
            ids.push(&c.task_id);
        }
    }
    (ids.into_iter())
        .map(|id| Dependency {
            id,
            at: positions.get(id).copied(),
            cut: task
                .dependency_cuts
                .iter()
                .find(|c| c.task_id == id)
                .map(|c| {
                    let cut = c.original_tokens.saturating_sub(c.kept_tokens);
                    if cut == 0 {
                        format!(" all {} tokens kept", count(c.original_tokens))
                    } else {
                        format!(
                            " {} of {} tokens kept ({}% cut)",
                            count(c.kept_tokens),
                            count(c.original_tokens),
                            u128::from(cut) * 100 / u128::from(c.original_tokens)
                        )
                    }
                }),
        })
        .collect()
}

/// The rows of a task's checks table, for every attempt.
fn check_rows(task: &TaskReport) -> Vec<CheckRow<'_>> {
    let mut rows = Vec::new();
    for attempt in &task.check_attempts {
        if attempt.checks.is_empty() {
            let error = attempt.error.as_deref().unwrap_or("no output");
            rows.push(CheckRow {
                number: attempt.number.to_string(),
                check: None,
                message: truncate(error, 500),
                detail: None,
            });
            continue;
        }
        for (k, check) in attempt.checks.iter().enumerate() {
            rows.push(CheckRow {
                number: if k == 0 {
                    attempt.number.to_string()
                } else {
                    String::new()
                },
                check: Some(check),
                message: truncate(&check.message, 500),
                detail: (check.detail.as_deref())
                    .filter(|_| !check.passed)
                    .map(|d| truncate(d, 500)),
            });
        }
    }
    rows
}

/// `1,234`: the characters of a text, counted.
fn characters(text: &str) -> String {
    count(text.chars().count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskState;

    /// A call the server billed at another tier says so beside its cost;
    /// one at the standard tier says nothing of tiers.
    #[test]
    fn a_tier_other_than_the_standard_is_named_beside_the_cost() {
        let mut task = TaskReport::new("a", TaskState::Completed);
        assert!(!usage_facts(&task).iter().any(|f| f.contains("tier")));
        task.service_tier = Some("flex".into());
        let facts = usage_facts(&task);
        let cost = facts.iter().position(|f| f.starts_with("cost ")).unwrap();
        assert_eq!(facts[cost + 1], "billed at the flex tier");
    }
}
