//! The cap: [`assemble_task_prompt`] shrinks dependency outputs (largest
//! first, by water filling) and then drops entities until the prompt fits
//! `max_prompt_tokens` (see the parent module's documentation).

use ctx_model::{Plan, ResolvedEntity, SubTask, SummarizeStrategy};
use ctx_tokens::TokenCounter;

use super::format::{DepPart, render};
use super::shorten::prefer_whitespace;
use super::{
    AssembledPrompt, AssemblyError, BlockEnds, DependencyOutput, ELLIPSIS, entity_line,
    shorten_output,
};

/// The longest prefix of `text` (on a char boundary, preferring to end at
/// whitespace) that, with `...` appended, costs at most `limit` tokens.
/// `total` is the token count of the whole `text` (which is over `limit`);
/// the search ([`ctx_tokens::longest_prefix`]) starts from it.
fn fit_prefix(text: &str, limit: usize, total: usize, counter: &dyn TokenCounter) -> String {
    let candidate = |prefix: &str| {
        let mut s = String::with_capacity(prefix.len() + ELLIPSIS.len());
        s.push_str(prefix.trim_end());
        s.push_str(ELLIPSIS);
        s
    };
    let end = ctx_tokens::longest_prefix(text, Some((limit, total)), |prefix| {
        counter.fits(&candidate(prefix), limit)
    });
    candidate(&text[..prefer_whitespace(text, end)])
}

/// `text` cut to at most `limit` tokens under `counter`, the way the cap
/// cuts a dependency output (longest prefix, preferring to end at
/// whitespace, then `...`); `None` when it already fits. A `limit` too
/// small for even `...` gives `...`. The cut marks itself, so a model
/// reading the prompt can tell; an answer cut to its `max_tokens` is not
/// marked ([`ctx_tokens::truncate_to_tokens`]), and both find their
/// prefix with the same search.
///
/// ```
/// use ctx_tokens::TokenizerExt;
/// let counter = ctx_tokens::Tokenizer::Estimate.counter();
/// assert_eq!(ctx_prompt::cut_to_tokens("short", 10, &*counter), None);
/// let cut = ctx_prompt::cut_to_tokens(&"word ".repeat(200), 10, &*counter).unwrap();
/// assert!(counter.count(&cut) <= 10 && cut.ends_with("..."));
/// ```
pub fn cut_to_tokens(text: &str, limit: usize, counter: &dyn TokenCounter) -> Option<String> {
    let total = counter.count(text);
    if total <= limit {
        return None;
    }
    if !counter.fits(ELLIPSIS, limit) {
        return Some(ELLIPSIS.to_string());
    }
    Some(fit_prefix(text, limit, total, counter))
}

/// The water level: the largest `L` such that cutting every count above
/// `L` down to `L` removes at least `need` tokens (0 when even that fails).
fn water_level(counts: &[usize], need: usize) -> usize {
    let max = counts.iter().copied().max().unwrap_or(0);
    let removed = |level: usize| -> usize { counts.iter().map(|&c| c.saturating_sub(level)).sum() };
    if removed(0) < need {
        return 0;
    }
    // removed() is non-increasing in level: find the largest level with removed >= need.
    let (mut lo, mut hi) = (0usize, max);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if removed(mid) >= need {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Assembles `task`'s final prompt from the plan's entities and the
/// dependency outputs, within `max_prompt_tokens` as counted by `counter`.
///
/// Entities come from [`Plan::resolve_entity_context`]. Each dependency's
/// text, under the task's strategy ([`Plan::summarize_strategy_for`]):
///
/// * `llm` and a summary is given: the summary as it is (the executor
///   writes one only for an output over `max_output_length`, or for every
///   output in a dry run, and bounds it by `summary_max_tokens`; the cap
///   below still applies);
/// * otherwise `include_full_output` false and a summary given: the
///   summary, shortened by [`shorten_output`];
/// * otherwise the output, shortened by [`shorten_output`] (`llm` without
///   a summary shortens by `truncate`: the recorded fallback).
///
/// See the module documentation for the shape and the cap algorithm.
///
/// ```
/// use ctx_prompt::{assemble_task_prompt, DependencyOutput};
/// let plan: ctx_model::Plan = serde_json::from_str(r#"{
///   "schema_version": 1,
///   "entities": [{"name": "Board", "grounded_value": "10 x 20"}],
///   "sub_tasks": [{"id": "2", "description": "Style", "dependencies": ["1"],
///     "entity_context": [{"entity_name": "Board", "intent_relevance": "constraint"}],
///     "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write CSS."}}}]
/// }"#).unwrap();
/// let deps = [DependencyOutput { task_id: "1", description: "HTML", output: "<html></html>", summary: None }];
/// use ctx_tokens::TokenizerExt;
/// let counter = ctx_tokens::Tokenizer::Estimate.counter();
/// let p = assemble_task_prompt(&plan, &plan.sub_tasks[0], &deps, &*counter, 4000).unwrap();
/// assert_eq!(p.text, concat!(
///     "## Entity Constraints and Values\n- Board: 10 x 20 (constraint)\n\n",
///     "## Outputs from Dependent Tasks\n\n### Task 1: HTML\n**Output:**\n<html></html>\n\n---\n\n",
///     "Write CSS."));
/// ```
pub fn assemble_task_prompt(
    plan: &Plan,
    task: &SubTask,
    dependencies: &[DependencyOutput<'_>],
    counter: &dyn TokenCounter,
    max_prompt_tokens: usize,
) -> Result<AssembledPrompt, AssemblyError> {
    let cap = max_prompt_tokens;
    let prompt = task.tool_or_prompt.params.prompt.as_str();
    let include_type = plan.config.entities.include_entity_type;

    let resolved = plan.resolve_entity_context(task);
    let entities: Vec<(String, bool)> = resolved
        .iter()
        .map(|e| (entity_line(e, include_type), true))
        .collect();
    let mut fitting = Fitting {
        entities,
        entity_order: super::layout::entity_order(plan, &resolved),
        deps: dependency_parts(plan, task, dependencies),
        prompt,
        counter,
        cap,
        text: String::new(),
        tokens: 0,
    };
    fitting.render();
    if fitting.tokens <= cap {
        return Ok(fitting.done(&resolved));
    }
    let prompt_tokens = counter.count(prompt);
    if prompt_tokens > cap {
        return Err(AssemblyError::PromptOverCap {
            task_id: task.id.clone(),
            prompt_tokens,
            cap,
        });
    }
    if fitting.shrink_dependencies() {
        return Ok(fitting.done(&resolved));
    }
    if fitting.drop_entities(&resolved) {
        return Ok(fitting.done(&resolved));
    }
    Err(AssemblyError::ContextOverCap {
        task_id: task.id.clone(),
        prompt_tokens,
        minimum_tokens: fitting.tokens,
        cap,
    })
}

/// Each dependency's text as the cap starts from it, under the task's
/// summarize strategy (see [`assemble_task_prompt`]): the summary as it
/// is, the summary shortened, or the output shortened.
fn dependency_parts<'a>(
    plan: &Plan,
    task: &SubTask,
    dependencies: &[DependencyOutput<'a>],
) -> Vec<DepPart<'a>> {
    let dep_cfg = &plan.config.dependency;
    let strategy = plan.summarize_strategy_for(task);
    dependencies
        .iter()
        .map(|d| {
            let (chosen, shorten) = match d.summary {
                Some(s) if strategy == SummarizeStrategy::Llm => (s, false),
                Some(s) if !dep_cfg.include_full_output => (s, true),
                _ => (d.output, true),
            };
            let chosen = chosen.trim_end_matches(['\n', '\r']);
            let base = if shorten {
                shorten_output(chosen, dep_cfg.max_output_length, strategy)
            } else {
                chosen.to_string()
            };
            DepPart {
                task_id: d.task_id,
                description: d.description,
                current: base.clone(),
                base,
                base_tokens: 0,
                cut: false,
            }
        })
        .collect()
}

/// A prompt being fitted under its cap: its blocks as they stand, and
/// the text and token count they last rendered to.
struct Fitting<'a> {
    /// Each resolved entity's line, and whether it is kept.
    entities: Vec<(String, bool)>,
    /// The order the entity lines are written in (the layout's).
    entity_order: Vec<usize>,
    deps: Vec<DepPart<'a>>,
    /// The task's own prompt, never cut.
    prompt: &'a str,
    counter: &'a dyn TokenCounter,
    cap: usize,
    text: String,
    tokens: usize,
}

impl Fitting<'_> {
    /// Renders the blocks as they stand, and counts the text.
    fn render(&mut self) {
        self.text = render(&self.entities, &self.entity_order, &self.deps, self.prompt);
        self.tokens = self.counter.count(&self.text);
    }

    /// Phase 1: cuts the dependency outputs, largest first, by water
    /// filling, until the prompt fits or every output is down to `...`.
    /// The level falls at every round, so the loop ends. Whether it fits.
    fn shrink_dependencies(&mut self) -> bool {
        if self.deps.is_empty() {
            return false;
        }
        for d in self.deps.iter_mut() {
            d.base_tokens = self.counter.count(&d.base);
        }
        let counts: Vec<usize> = self.deps.iter().map(|d| d.base_tokens).collect();
        let mut need = self.tokens - self.cap;
        let mut previous_level = usize::MAX;
        loop {
            let mut level = water_level(&counts, need);
            if level >= previous_level {
                level = previous_level.saturating_sub(1);
            }
            previous_level = level;
            for d in self.deps.iter_mut() {
                if d.base_tokens > level {
                    let next = if level == 0 {
                        ELLIPSIS.to_string()
                    } else {
                        fit_prefix(&d.base, level, d.base_tokens, self.counter)
                    };
                    d.current = next;
                    d.cut = true;
                }
            }
            self.render();
            if self.tokens <= self.cap {
                return true;
            }
            if level == 0 {
                return false;
            }
            need += self.tokens - self.cap;
        }
    }

    /// Phase 2: drops entities, lowest relevance first, ties later first,
    /// as many at a time as the tokens over the cap call for, until the
    /// prompt fits or none is left. Whether it fits.
    fn drop_entities(&mut self, resolved: &[ResolvedEntity]) -> bool {
        let mut order: Vec<usize> = (0..resolved.len()).collect();
        order.sort_by(|&a, &b| {
            resolved[a]
                .relevance
                .cmp(&resolved[b].relevance)
                .then(b.cmp(&a))
        });
        let line_tokens: Vec<usize> = self
            .entities
            .iter()
            .map(|(l, _)| self.counter.count(l) + 1)
            .collect();
        let mut next = 0usize;
        while next < order.len() {
            let mut need = self.tokens - self.cap;
            while next < order.len() {
                let i = order[next];
                next += 1;
                self.entities[i].1 = false;
                if line_tokens[i] >= need {
                    break;
                }
                need -= line_tokens[i];
            }
            self.render();
            if self.tokens <= self.cap {
                return true;
            }
        }
        false
    }

    /// The prompt as it last rendered, with what was cut and dropped.
    fn done(self, resolved: &[ResolvedEntity]) -> AssembledPrompt {
        AssembledPrompt {
            tokens: self.tokens,
            tokenizer: self.counter.name().to_string(),
            shortened_dependencies: self
                .deps
                .iter()
                .filter(|d| d.cut)
                .map(|d| d.task_id.to_string())
                .collect(),
            dropped_entities: resolved
                .iter()
                .zip(&self.entities)
                .filter(|(_, (_, keep))| !keep)
                .map(|(e, _)| e.name.clone())
                .collect(),
            block_ends: BlockEnds {
                entities: super::format::entity_block(&self.entities, &self.entity_order).len(),
                dependencies: self.text.len() - self.prompt.len(),
            },
            text: self.text,
        }
    }
}

#[cfg(test)]
#[path = "fit_tests.rs"]
mod tests;
