//! How much of a plan's prompts a provider's prefix cache can serve,
//! predicted before a run (`ctx plan cost --layout`, issue 24).
//!
//! A provider serves a prompt's prefix from cache when an earlier call
//! sent the same bytes, and only from a minimum length on: OpenAI caches
//! from 1,024 tokens in steps of 128 ([`CacheMinimum::OPENAI`], the
//! default of `--cache-min-tokens`). For each task, in the schedule's
//! topological order (plan order on ties), the prediction takes the
//! prompt the low end assembles (the system prompt, then the task's
//! prompt with every dependency output empty: outputs are not known before
//! a run), finds the longest prefix it shares with an earlier call **of
//! the same model**, and counts the tokens of that prefix a provider could
//! serve from cache:
//!
//! * `cacheable_tokens` = 0 under the minimum, else the minimum plus whole
//!   steps, never more than the shared prefix;
//! * the shared prefix is counted with the task's tokenizer, one token
//!   less than the prefix's own count unless the whole prompt is shared
//!   (the token at the cut may be spelled differently in the full prompt);
//! * `expected_usd` = one call with that prompt, its cacheable tokens at
//!   the cached rate and the rest at the input rate, and its completion at
//!   the task's bound (`max_tokens`; unknown without one). It lies between
//!   the estimate's low end (the cheapest rate, no completion) and its
//!   high end (the cap at the dearest rate, every attempt).
//!
//! What it does not see: the chat framing between the system and user
//! messages (a few tokens), dependency outputs (siblings that share a
//! dependency share its output too, so the prediction is low for them),
//! judge and summary calls, and a provider's eviction.

use std::collections::{BTreeSet, HashMap};

use ctx_cost::{PriceBook, Usage, Usd};
use ctx_deps::PlanGraph;
use ctx_model::{Plan, PromptLayout};
use ctx_tokens::TokenizerExt;
use serde::Serialize;

use crate::estimate::{EngineDefaults, EstimateError, empty_outputs};

/// The shortest prefix a provider serves from cache and the steps it
/// grows in, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheMinimum {
    /// No prefix shorter than this is served from cache.
    pub min_tokens: u64,
    /// Above the minimum, the cached part grows in steps of this many.
    pub step_tokens: u64,
}

impl CacheMinimum {
    /// OpenAI's: from 1,024 tokens, in steps of 128.
    pub const OPENAI: CacheMinimum = CacheMinimum {
        min_tokens: 1024,
        step_tokens: 128,
    };

    /// The part of a `shared`-token prefix a provider can serve from cache.
    ///
    /// ```
    /// use ctx_run::cache_prediction::CacheMinimum;
    /// let m = CacheMinimum::OPENAI;
    /// assert_eq!((m.cacheable(1023), m.cacheable(1024), m.cacheable(1151), m.cacheable(1152)), (0, 1024, 1024, 1152));
    /// ```
    pub fn cacheable(self, shared: u64) -> u64 {
        if shared < self.min_tokens.max(1) {
            return 0;
        }
        let step = self.step_tokens.max(1);
        self.min_tokens + (shared - self.min_tokens) / step * step
    }
}

/// One task's prediction. JSON keys in this order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskPrediction {
    /// The task.
    pub task_id: String,
    /// Its model, as the plan names it.
    pub model: String,
    /// The low end's prompt tokens (system prompt included).
    pub prompt_tokens: u64,
    /// The tokens of it a provider can serve from cache.
    pub cacheable_tokens: u64,
    /// One call priced with them; `null` without a price or a completion
    /// bound.
    pub expected_usd: Option<Usd>,
}

/// A layout's prediction, per task (schedule order) and in total.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutPrediction {
    /// `design` or `cache`.
    pub layout: &'static str,
    /// Every task with a model, in schedule order.
    pub tasks: Vec<TaskPrediction>,
    /// The sum of the tasks' prompt tokens.
    pub prompt_tokens: u64,
    /// The sum of their cacheable tokens.
    pub cacheable_tokens: u64,
    /// `cacheable_tokens / prompt_tokens` (0 for no prompt tokens).
    pub cacheable_fraction: f64,
    /// The sum of the tasks' `expected_usd`; `null` when one is unknown.
    pub expected_usd: Option<Usd>,
}

/// The prediction for `plan` laid out as `layout`.
pub fn predict(
    plan: &Plan,
    defaults: &EngineDefaults<'_>,
    book: &PriceBook,
    layout: PromptLayout,
    minimum: CacheMinimum,
) -> Result<LayoutPrediction, EstimateError> {
    let mut plan = plan.clone();
    plan.config.layout = layout;
    let plan = &plan;
    let graph = PlanGraph::new(plan)?;
    let cap = plan.config.max_prompt_tokens;
    let mut counters = HashMap::new();
    // The prompts sent so far, per model, sorted: the longest prefix a new
    // prompt shares with any of them is shared with a sorted neighbour.
    let mut sent: HashMap<&str, BTreeSet<String>> = HashMap::new();
    let mut tasks = Vec::with_capacity(plan.sub_tasks.len());
    for &i in graph.topological_order() {
        let task = &plan.sub_tasks[i];
        let params = &task.tool_or_prompt.params;
        let Some(model) = params.model.as_deref().or(defaults.model) else {
            continue;
        };
        let tokenizer =
            ctx_prompt::tokenizer_for_task(plan, task).map_err(ctx_deps::GraphError::from)?;
        let counter = counters
            .entry(tokenizer)
            .or_insert_with(|| tokenizer.counter());
        let Ok(low) = ctx_prompt::assemble_task_prompt(
            plan,
            task,
            &empty_outputs(plan, &graph, i),
            counter.as_ref(),
            cap,
        ) else {
            continue;
        };
        let system = params.system.as_deref().or(defaults.system);
        let text = match system {
            Some(s) => format!("{s}\n{}", low.text),
            None => low.text,
        };
        let prompt_tokens = counter.count(&text) as u64;
        let earlier = sent.entry(model).or_default();
        let shared = longest_shared_prefix(earlier, &text);
        let shared_tokens = match shared {
            n if n == text.len() => prompt_tokens,
            n => (counter.count(&text[..n]) as u64).saturating_sub(1),
        };
        let cacheable_tokens = minimum.cacheable(shared_tokens).min(prompt_tokens);
        let expected_usd = book
            .lookup(model)
            .zip(defaults.completion_bound(params).ok())
            .map(|(m, completion)| {
                m.price.cost(&Usage {
                    prompt_tokens,
                    cached_prompt_tokens: cacheable_tokens,
                    cache_write_prompt_tokens: 0,
                    completion_tokens: completion,
                })
            });
        earlier.insert(text);
        tasks.push(TaskPrediction {
            task_id: task.id.clone(),
            model: model.to_string(),
            prompt_tokens,
            cacheable_tokens,
            expected_usd,
        });
    }
    let prompt_tokens = tasks.iter().map(|t| t.prompt_tokens).sum::<u64>();
    let cacheable_tokens = tasks.iter().map(|t| t.cacheable_tokens).sum::<u64>();
    let expected_usd = tasks.iter().try_fold(Usd::ZERO, |sum, t| {
        Some(sum.saturating_add(t.expected_usd?))
    });
    Ok(LayoutPrediction {
        layout: layout.as_str(),
        tasks,
        prompt_tokens,
        cacheable_tokens,
        cacheable_fraction: if prompt_tokens == 0 {
            0.0
        } else {
            cacheable_tokens as f64 / prompt_tokens as f64
        },
        expected_usd,
    })
}

/// The length in bytes (on a char boundary) of the longest prefix `text`
/// shares with a string of `earlier`.
fn longest_shared_prefix(earlier: &BTreeSet<String>, text: &str) -> usize {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let before = earlier
        .range::<str, _>((Unbounded, Excluded(text)))
        .next_back();
    let after = earlier.range::<str, _>((Included(text), Unbounded)).next();
    let common = |other: &String| {
        let n = text
            .bytes()
            .zip(other.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        (0..=n)
            .rev()
            .find(|&k| text.is_char_boundary(k))
            .unwrap_or(0)
    };
    before
        .into_iter()
        .chain(after)
        .map(common)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_shared_prefix_is_found_among_sorted_neighbours() {
        let earlier: BTreeSet<String> = ["abcdef", "abx", "zzz", "héllo"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(longest_shared_prefix(&earlier, "abcxyz"), 3);
        assert_eq!(longest_shared_prefix(&earlier, "abcdef"), 6);
        assert_eq!(longest_shared_prefix(&earlier, "q"), 0);
        // "hé" vs "hè": the shared bytes end inside a character.
        assert_eq!(longest_shared_prefix(&earlier, "hèllo"), 1);
        // Brute force agrees on every prefix of the strings.
        for probe in ["", "a", "ab", "abd", "abcdeg", "zz", "zzzz", "h"] {
            let brute = earlier
                .iter()
                .map(|e| {
                    probe
                        .bytes()
                        .zip(e.bytes())
                        .take_while(|(a, b)| a == b)
                        .count()
                })
                .max()
                .unwrap_or(0);
            assert_eq!(longest_shared_prefix(&earlier, probe), brute, "{probe}");
        }
    }

    /// Two siblings with one long shared entity block and dependency,
    /// listed in opposite orders: only the cache layout shares them.
    #[test]
    fn the_cache_layout_makes_the_siblings_prefix_cacheable() {
        let long = "lorem ipsum dolor sit amet ".repeat(300);
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "config": {"max_prompt_tokens": 20000, "tokenizer": "o200k_base"},
            "entities": [{"name": "A", "grounded_value": long}, {"name": "B", "grounded_value": long}],
            "sub_tasks": [
                {"id": "s", "description": "source", "tool_or_prompt": {"name": "inference", "params": {"prompt": "go"}}},
                {"id": "x", "description": "x", "dependencies": ["s"],
                 "entity_context": [{"entity_name": "A"}, {"entity_name": "B"}],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "first"}}},
                {"id": "y", "description": "y", "dependencies": ["s"],
                 "entity_context": [{"entity_name": "B"}, {"entity_name": "A"}],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "second"}}}
            ]
        }))
        .unwrap();
        let defaults = EngineDefaults {
            model: Some("gpt-4o-mini"),
            max_tokens: Some(100),
            system: None,
            attempts: 1,
            sends_params: true,
        };
        let mut book = PriceBook::new();
        book.push(ctx_cost::default_table().clone());
        let run = |layout| predict(&plan, &defaults, &book, layout, CacheMinimum::OPENAI).unwrap();
        let (design, cache) = (run(PromptLayout::Design), run(PromptLayout::Cache));
        let y = |p: &LayoutPrediction| p.tasks.iter().find(|t| t.task_id == "y").unwrap().clone();
        assert_eq!(y(&design).cacheable_tokens, 0);
        let y_cache = y(&cache);
        assert!(y_cache.cacheable_tokens >= 2048, "{y_cache:?}");
        assert_eq!((y_cache.cacheable_tokens - 1024) % 128, 0);
        assert!(y_cache.cacheable_tokens < y_cache.prompt_tokens);
        assert!(cache.cacheable_fraction > design.cacheable_fraction);
        assert!(cache.expected_usd.unwrap() < design.expected_usd.unwrap());
        assert_eq!(design.prompt_tokens, cache.prompt_tokens);
    }
}
