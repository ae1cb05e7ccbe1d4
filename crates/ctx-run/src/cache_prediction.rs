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
//!   high end (the cap at the dearest rate, every attempt);
//! * `expected_saving_usd` = what the cacheable tokens save: the call's
//!   prompt with every token at the input rate, less the same prompt with
//!   its cacheable tokens at the cached rate (`ctx_cost::cache_saving`,
//!   the rule a run's measured `cache_saving_usd` follows).
//!
//! ## Maps
//!
//! A map task is `max_items` calls, one per item, each with the map's
//! prompt and its item placeholder filled (by ctx-deps'
//! [`item_task`](ctx_deps::map::item_task), as the executor fills it).
//! The items are not known before a run, so each is predicted as the
//! placeholder preceded by a character no sibling has
//! (`item_placeholder`): an item shares with its siblings everything
//! before its placeholder and nothing from it on, and the first item
//! shares only what an earlier call sent. The map's row sums its calls
//! (`calls` says how many). A list shorter than `max_items` makes fewer
//! calls than predicted, each predicted as shown.
//!
//! What it does not see: the chat framing between the system and user
//! messages (a few tokens), dependency outputs (siblings that share a
//! dependency share its output too, so the prediction is low for them),
//! judge and summary calls, and a provider's eviction.

use std::collections::{BTreeSet, HashMap};

use ctx_cost::{PriceBook, Saving, Usage, Usd};
use ctx_deps::PlanGraph;
use ctx_model::{Plan, PromptLayout, SubTask};
use ctx_prompt::DependencyOutput;
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
    /// The calls it makes: 1, or a map task's `max_items` (one per item).
    pub calls: u64,
    /// The low end's prompt tokens (system prompt included), over its
    /// calls.
    pub prompt_tokens: u64,
    /// The tokens of it a provider can serve from cache.
    pub cacheable_tokens: u64,
    /// Its calls priced with them; `null` without a price or a completion
    /// bound.
    pub expected_usd: Option<Usd>,
    /// What the cacheable tokens save: the same calls with every prompt
    /// token at the input price, less `expected_usd`'s prompt part (the
    /// completion does not change, so no completion bound is needed);
    /// `null` without a price.
    pub expected_saving_usd: Option<Saving>,
}

/// A layout's prediction, per task (schedule order) and in total.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutPrediction {
    /// `design` or `cache`.
    pub layout: &'static str,
    /// Every task with a model, in schedule order.
    pub tasks: Vec<TaskPrediction>,
    /// The sum of the tasks' calls.
    pub calls: u64,
    /// The sum of the tasks' prompt tokens.
    pub prompt_tokens: u64,
    /// The sum of their cacheable tokens.
    pub cacheable_tokens: u64,
    /// `cacheable_tokens / prompt_tokens` (0 for no prompt tokens).
    pub cacheable_fraction: f64,
    /// The sum of the tasks' `expected_usd`; `null` when one is unknown.
    pub expected_usd: Option<Usd>,
    /// The sum of the tasks' `expected_saving_usd`; `null` when one is
    /// unknown.
    pub expected_saving_usd: Option<Saving>,
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
        let dependencies = empty_outputs(plan, &graph, i);
        let earlier = sent.entry(model).or_default();
        let mut row = TaskPrediction {
            task_id: task.id.clone(),
            model: model.to_string(),
            calls: 0,
            prompt_tokens: 0,
            cacheable_tokens: 0,
            expected_usd: Some(Usd::ZERO),
            expected_saving_usd: Some(Saving::ZERO),
        };
        for call in calls(task, &dependencies) {
            let Ok(low) = ctx_prompt::assemble_task_prompt(
                plan,
                &call.task,
                &call.dependencies,
                counter.as_ref(),
                cap,
            ) else {
                continue;
            };
            let call_params = &call.task.tool_or_prompt.params;
            let text = match call_params.system.as_deref().or(defaults.system) {
                Some(s) => format!("{s}\n{}", low.text),
                None => low.text,
            };
            let prompt_tokens = counter.count(&text) as u64;
            let shared_tokens = match longest_shared_prefix(earlier, &text) {
                n if n == text.len() => prompt_tokens,
                n => (counter.count(&text[..n]) as u64).saturating_sub(1),
            };
            let figures = CallFigures {
                prompt_tokens,
                cacheable_tokens: minimum.cacheable(shared_tokens).min(prompt_tokens),
                completion: defaults.completion_bound(call_params).ok(),
            };
            earlier.insert(text);
            row.add(&figures, book.lookup(model).map(|m| m.price));
        }
        if row.calls > 0 {
            tasks.push(row);
        }
    }
    Ok(LayoutPrediction::of(layout, tasks))
}

/// One predicted call: its prompt, the part of it a provider's cache
/// would serve, and the completion bound it is priced at (`None`: the
/// task has no bound, so its cost is unknown).
struct CallFigures {
    prompt_tokens: u64,
    cacheable_tokens: u64,
    completion: Option<u64>,
}

impl TaskPrediction {
    /// Adds one call, priced by `price` (`None`: the model has no price,
    /// and the task's cost and saving become unknown).
    fn add(&mut self, call: &CallFigures, price: Option<&ctx_cost::Price>) {
        let usage = |completion_tokens| Usage {
            prompt_tokens: call.prompt_tokens,
            cached_prompt_tokens: call.cacheable_tokens,
            cache_write_prompt_tokens: 0,
            completion_tokens,
            tier: None,
        };
        let expected_usd = price
            .zip(call.completion)
            .map(|(p, completion)| p.cost(&usage(completion)));
        // The saving is the prompt's: priced without a completion, it is
        // known whenever the price is.
        let expected_saving =
            price.and_then(|p| ctx_cost::cache_saving(|u| Some(p.cost(u)), &usage(0)));
        self.expected_saving_usd = self
            .expected_saving_usd
            .zip(expected_saving)
            .map(|(sum, s)| sum.saturating_add(s));
        self.calls += 1;
        self.prompt_tokens += call.prompt_tokens;
        self.cacheable_tokens += call.cacheable_tokens;
        self.expected_usd = self
            .expected_usd
            .zip(expected_usd)
            .map(|(sum, usd)| sum.saturating_add(usd));
    }
}

impl LayoutPrediction {
    /// The totals of `tasks` under `layout`.
    fn of(layout: PromptLayout, tasks: Vec<TaskPrediction>) -> LayoutPrediction {
        let calls = tasks.iter().map(|t| t.calls).sum::<u64>();
        let prompt_tokens = tasks.iter().map(|t| t.prompt_tokens).sum::<u64>();
        let cacheable_tokens = tasks.iter().map(|t| t.cacheable_tokens).sum::<u64>();
        let expected_usd = tasks.iter().try_fold(Usd::ZERO, |sum, t| {
            Some(sum.saturating_add(t.expected_usd?))
        });
        let expected_saving_usd = tasks.iter().try_fold(Saving::ZERO, |sum, t| {
            Some(sum.saturating_add(t.expected_saving_usd?))
        });
        LayoutPrediction {
            layout: layout.as_str(),
            tasks,
            calls,
            prompt_tokens,
            cacheable_tokens,
            cacheable_fraction: if prompt_tokens == 0 {
                0.0
            } else {
                cacheable_tokens as f64 / prompt_tokens as f64
            },
            expected_usd,
            expected_saving_usd,
        }
    }
}

/// One call of a task as the prediction sees it: the task (an item's, its
/// placeholder filled) and its dependencies with empty outputs.
struct Call<'p> {
    task: std::borrow::Cow<'p, SubTask>,
    dependencies: Vec<DependencyOutput<'p>>,
}

/// The calls `task` makes: itself once, or, for a map task, one per item
/// up to `max_items` (see the module documentation, "Maps").
fn calls<'p>(task: &'p SubTask, dependencies: &[DependencyOutput<'p>]) -> Vec<Call<'p>> {
    let Some(m) = &task.map else {
        return vec![Call {
            task: std::borrow::Cow::Borrowed(task),
            dependencies: dependencies.to_vec(),
        }];
    };
    // An item does not receive the map's source (the whole list never
    // enters an item's prompt), as ctx_deps::map::item_task drops it.
    let item_dependencies: Vec<DependencyOutput<'p>> = dependencies
        .iter()
        .filter(|d| d.task_id != m.over)
        .cloned()
        .collect();
    (0..m.max_items.unwrap_or(1).max(1))
        .map(|index| Call {
            task: std::borrow::Cow::Owned(ctx_deps::map::item_task(
                task,
                m,
                index,
                &item_placeholder(&m.item, index),
            )),
            dependencies: item_dependencies.clone(),
        })
        .collect()
}

/// What fills item `index`'s placeholder in the prediction: the
/// placeholder itself (`{{NOTE}}`), after a character of Unicode's private
/// use area that differs between neighbouring items. The items are not
/// known before a run (a dependency's output) or may be any length, so
/// the prediction lets every item vary from the placeholder's first
/// character on: siblings share everything before it and nothing after.
/// [`longest_shared_prefix`] ends a shared prefix on a character boundary,
/// so two of these characters sharing their first UTF-8 bytes share
/// nothing; 6,400 items get distinct ones, and further items differ
/// from their namesake in the index that follows.
fn item_placeholder(name: &str, index: usize) -> String {
    const PRIVATE_USE: u32 = 0xE000;
    const PRIVATE_USE_LEN: usize = 6400;
    let varying = char::from_u32(PRIVATE_USE + (index % PRIVATE_USE_LEN) as u32)
        .unwrap_or(char::REPLACEMENT_CHARACTER);
    format!("{varying}{{{{{name}}}}} {index}")
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
            canary: false,
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
        // The saving is what the cacheable tokens save at gpt-4o-mini's
        // rates ($0.15 input, $0.075 cached per million): none under design
        // (nothing cacheable), exactly the discount under cache.
        assert_eq!(y(&design).expected_saving_usd, Some(Saving::ZERO));
        let saved = y_cache.expected_saving_usd.unwrap();
        assert!(!saved.is_negative());
        assert_eq!(
            saved.magnitude(),
            // $0.075 per million tokens: 75,000 pico-dollars a token.
            Usd::from_picos(u128::from(y_cache.cacheable_tokens) * 75_000)
        );
        assert_eq!(cache.expected_saving_usd, Some(saved));
    }

    fn openai_defaults() -> EngineDefaults<'static> {
        EngineDefaults {
            model: Some("gpt-4o-mini"),
            max_tokens: Some(100),
            system: None,
            attempts: 1,
            sends_params: true,
            canary: false,
        }
    }

    fn default_book() -> PriceBook {
        let mut book = PriceBook::new();
        book.push(ctx_cost::default_table().clone());
        book
    }

    /// A plan with one map task of `max_items` items over a JSON variable,
    /// whose prompt is `prompt`.
    fn map_plan(prompt: &str, max_items: usize) -> Plan {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "config": {"max_prompt_tokens": 20000, "tokenizer": "o200k_base"},
            "variables": [{"name": "LIST", "type": "json"}],
            "sub_tasks": [
                {"id": "m", "description": "each item",
                 "map": {"over": "LIST", "as": "NOTE", "max_items": max_items},
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": prompt}}}
            ]
        }))
        .unwrap()
    }

    /// A map of 20 items is 20 calls: every item after the first serves
    /// the long text before its placeholder from cache, the first item
    /// nothing (no earlier call sent it). On the old code the map was one
    /// call, with nothing cacheable.
    #[test]
    fn a_maps_items_are_calls_sharing_the_text_before_their_placeholder() {
        let shared = "The project's guide, read before each note. ".repeat(200);
        let plan = map_plan(
            &format!(
                "{shared}\n<untrusted-content>{{{{NOTE}}}}</untrusted-content>\nWhy does it matter?"
            ),
            20,
        );
        let run = || {
            predict(
                &plan,
                &openai_defaults(),
                &default_book(),
                PromptLayout::Cache,
                CacheMinimum::OPENAI,
            )
            .unwrap()
        };
        let p = run();
        assert_eq!(p, run(), "the prediction is deterministic");
        let [m] = p.tasks.as_slice() else {
            panic!("{:?}", p.tasks)
        };
        assert_eq!(m.calls, 20);
        let one = ctx_tokens::Tokenizer::O200kBase.counter().count(&shared) as u64;
        assert!(m.prompt_tokens >= 20 * one, "{m:?}");
        // 19 items of at least the shared text's whole 128-token steps.
        assert!(
            m.cacheable_tokens >= 19 * (CacheMinimum::OPENAI.cacheable(one) - 128),
            "{m:?}"
        );
        assert!(m.cacheable_tokens < m.prompt_tokens);
        assert!(p.cacheable_fraction > 0.8, "{p:?}");
        // Twenty calls are priced, each with its completion bound.
        let single = map_plan("x {{NOTE}}", 1);
        let single = predict(
            &single,
            &openai_defaults(),
            &default_book(),
            PromptLayout::Cache,
            CacheMinimum::OPENAI,
        )
        .unwrap();
        assert_eq!(single.tasks[0].calls, 1);
        assert!(
            m.expected_usd.unwrap()
                > single
                    .expected_usd
                    .unwrap()
                    .saturating_add(single.expected_usd.unwrap())
        );
    }

    /// An item placeholder before the long text leaves the siblings
    /// nothing to share: the prediction varies the item from its
    /// placeholder on, whatever the layout.
    #[test]
    fn an_item_placeholder_first_leaves_nothing_cacheable() {
        let shared = "The project's guide, read after each note. ".repeat(200);
        let plan = map_plan(&format!("Note: {{{{NOTE}}}}\n{shared}"), 20);
        for layout in [PromptLayout::Design, PromptLayout::Cache] {
            let p = predict(
                &plan,
                &openai_defaults(),
                &default_book(),
                layout,
                CacheMinimum::OPENAI,
            )
            .unwrap();
            assert_eq!((p.tasks[0].calls, p.cacheable_tokens), (20, 0), "{p:?}");
        }
    }

    #[test]
    fn item_placeholders_share_no_character_with_a_sibling() {
        let all: Vec<String> = (0..13_000).map(|i| item_placeholder("NOTE", i)).collect();
        // The first 6,400 begin with distinct characters, all unique.
        let first: BTreeSet<char> = all[..6400]
            .iter()
            .filter_map(|p| p.chars().next())
            .collect();
        assert_eq!(first.len(), 6400);
        assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), all.len());
        // Neighbours share UTF-8 bytes, never a character.
        for (a, b) in [(0, 1), (62, 63), (6399, 6398), (6400, 6401)] {
            let earlier: BTreeSet<String> = [all[a].clone()].into();
            assert_eq!(longest_shared_prefix(&earlier, &all[b]), 0, "{a} {b}");
        }
    }
}
