//! What the totals say (`templates/totals.html`): wall time against the
//! critical-path lower bound, both paths, tokens, cost, the prompt cache,
//! cache hits and engine calls, each as the text the page shows.

use crate::escape::truncate;
use crate::format::{CacheRead, count, duration, prompt_cache, ratio, usd};
use crate::html::Page;
use crate::table::reports_usage;

/// A task of a path the totals list: a link to it, after an arrow unless
/// it comes first, and after `… N more …` where the middle of a long path
/// is left out.
pub(crate) struct PathStep {
    pub(crate) gap: Option<usize>,
    pub(crate) arrow: bool,
    pub(crate) at: usize,
    pub(crate) id: String,
}

/// The tasks of `path` the totals show: all of a path of up to
/// [`PATH_SHOWN`] tasks, else its first and last halves of that.
fn path_steps(page: &Page<'_>, path: &[usize]) -> Vec<PathStep> {
    let long = path.len() > PATH_SHOWN;
    let (head, tail) = (PATH_SHOWN / 2, path.len().saturating_sub(PATH_SHOWN / 2));
    let mut steps = Vec::with_capacity(path.len().min(PATH_SHOWN));
    for (k, &i) in path.iter().enumerate() {
        if long && k >= head && k < tail {
            continue;
        }
        steps.push(PathStep {
            gap: (long && k == tail).then(|| path.len() - PATH_SHOWN),
            arrow: k > 0,
            at: i,
            id: truncate(&page.input.tasks[i].id, 40),
        });
    }
    steps
}

/// How many tasks of a path the totals show.
const PATH_SHOWN: usize = 12;

impl Page<'_> {
    pub(crate) fn wall_time(&self) -> String {
        let so_far = if self.running() { " so far" } else { "" };
        format!("{}{so_far}", duration(self.a.wall_ms()))
    }

    pub(crate) fn lower_bound(&self) -> String {
        duration(self.a.lower_bound_ms)
    }

    pub(crate) fn wall_ratio(&self) -> Option<String> {
        ratio(self.a.wall_ms(), self.a.lower_bound_ms)
    }

    pub(crate) fn lower_bound_steps(&self) -> Vec<PathStep> {
        path_steps(self, &self.a.lower_bound_path)
    }

    pub(crate) fn actual_path_steps(&self) -> Vec<PathStep> {
        path_steps(self, &self.a.actual_path)
    }

    pub(crate) fn work(&self) -> String {
        duration(self.a.totals.work_ms)
    }

    pub(crate) fn parallelism(&self) -> Option<String> {
        ratio(self.a.totals.work_ms, self.a.wall_ms())
    }

    /// `3 completed, 1 failed`: the states that have tasks.
    pub(crate) fn by_state(&self) -> String {
        let parts: Vec<String> = (self.a.totals.by_state.iter())
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| format!("{n} {}", s.label()))
            .collect();
        parts.join(", ")
    }

    pub(crate) fn prompt_tokens(&self) -> String {
        count(self.a.totals.prompt_tokens)
    }

    /// A sum over tasks that reported nothing is not 0: an engine that
    /// reports no usage (a command, a dry run) is "not reported".
    pub(crate) fn completion(&self) -> String {
        let t = &self.a.totals;
        if t.completion_unreported == 0 {
            format!("{} completion", count(t.completion_tokens))
        } else if t.completion_unreported == t.started {
            "completion not reported".to_string()
        } else {
            format!(
                "{} completion ({} not reported)",
                count(t.completion_tokens),
                plural(t.completion_unreported, "task")
            )
        }
    }

    /// Cuts are shown only when the input records them: the store does not
    /// keep them yet, and a line that always says 0 would claim that
    /// nothing was cut.
    pub(crate) fn cut_tokens(&self) -> Option<String> {
        let recorded = self
            .input
            .tasks
            .iter()
            .any(|t| !t.dependency_cuts.is_empty());
        recorded.then(|| count(self.a.totals.cut_tokens))
    }

    pub(crate) fn cost(&self) -> String {
        let t = &self.a.totals;
        if t.unpriced == 0 {
            usd(t.cost_usd)
        } else if t.unpriced == t.started && t.cost_usd == 0.0 {
            "unknown".to_string()
        } else {
            format!(
                "{} + unknown ({} without a price)",
                usd(t.cost_usd),
                plural(t.unpriced, "task")
            )
        }
    }

    /// The prompt cache's figures, when any task's engine reported a usage.
    pub(crate) fn prompt_cache(&self) -> Option<String> {
        let t = &self.a.totals;
        self.input.tasks.iter().any(reports_usage).then(|| {
            let read = CacheRead {
                tokens: t.cached_tokens,
                // The share over the tasks that report its base.
                of_prompt: (t.cached_share)
                    .filter(|&(read, _)| Some(read) == t.cached_tokens)
                    .map(|(_, of)| of),
            };
            prompt_cache(read, t.cache_write_tokens, t.cache_saving_usd)
        })
    }
}

/// `1 task`, `2 tasks`: `n` and the noun, plural by an `s`.
fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plural_adds_an_s_but_to_one() {
        assert_eq!(plural(1, "task"), "1 task");
        assert_eq!(plural(0, "task"), "0 tasks");
        assert_eq!(plural(2, "task"), "2 tasks");
    }
}
