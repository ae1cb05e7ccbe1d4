//! What a run of a plan can cost, per task and in total, as token ranges
//! for `ctx_cost::estimate_costs` to price: `ctx plan cost` before a run,
//! and the reservation `ctx run --max-cost` makes for each task.
//!
//! ## Where each end comes from
//!
//! Everything that decides a task's prompt is resolved exactly as `ctx run`
//! resolves it, by the same code: the plan is loaded and validated by
//! [`ctx_checks::load_valid_plan`], the tokenizer is
//! [`ctx_prompt::tokenizer_for_task`], the cap is the plan's
//! `config.max_prompt_tokens`, and the prompt is built by
//! [`ctx_prompt::assemble_task_prompt`], which the executor calls too. The
//! model and `max_tokens` follow the OpenAI engine's rule: the task's
//! `params` win over the engine defaults ([`EngineDefaults`]: `--model`, `--max-tokens`,
//! `--system` in the CLI).
//!
//! * **Prompt, high**: the cap — assembly never returns a prompt over it —
//!   plus the system message's exact token count and a fixed allowance for
//!   the chat framing the server wraps around messages
//!   ([`FRAMING_PER_MESSAGE`] per message, [`FRAMING_REPLY`] for the
//!   reply's header). The framing is not ctx's to count: it is the
//!   server's chat template. The allowance covers the templates of
//!   OpenAI's chat models (3 per message and 3 for the reply, by OpenAI's
//!   own counting) and of Llama 3 (5 and 5); a server with a larger
//!   template can exceed it, which is why `--max-cost` settles with the
//!   usage the server reports.
//! * **Prompt, low**: the task's own prompt and entities with every
//!   dependency output empty, assembled under the same cap and counted
//!   exactly, plus the system message. No framing allowance: a server may
//!   add none.
//! * **Completion**: low 0 (a model may answer with nothing, or stop at
//!   once), high the task's `max_tokens`. Without one the high end is
//!   unbounded, and the report names the task and suggests `--max-tokens`.
//! * **Attempts**: the high end is multiplied by
//!   [`ctx_cost::attempt_bound`]: `--max-attempts` of the OpenAI engine
//!   (default 4, as `ctx run`'s), since a retried request may be billed,
//!   and, for a task with checks, by `config.max_check_attempts` (each
//!   check attempt is a new request): `attempt_bound(max_check_attempts -
//!   1, max_attempts)`.
//! * **Judges**: each `judge` check of a task is a row of its own,
//!   `ID (judge N)` (N counts the task's checks from 1, `config.checks`
//!   first), made once per check attempt: model the check's `judge_model`,
//!   else the task's; prompt high the judge prompt with an empty output,
//!   plus the task's completion high (the most output there is to judge),
//!   plus the framing of one message; completion high the check's
//!   `max_tokens` (default 256). `ctx run --max-cost` adds these rows to
//!   the task's own reservation.
//!

use std::collections::HashMap;
use std::sync::Arc;

use ctx_checks::Check;
use ctx_cost::{TaskEstimate, TokenRange, attempt_bound};
use ctx_deps::{GraphError, PlanGraph};
use ctx_model::Plan;
use ctx_prompt::DependencyOutput;
use ctx_tokens::{TokenCounter, Tokenizer, TokenizerExt};

/// Framing allowance per chat message, in tokens (role markers and
/// separators of the server's chat template).
pub const FRAMING_PER_MESSAGE: u64 = 8;
/// Framing allowance for the header that primes the reply, in tokens.
pub const FRAMING_REPLY: u64 = 8;

/// The engine-level defaults a task's params win over (also `ctx run
/// --max-cost`'s, which reserves these estimates' high ends).
pub struct EngineDefaults<'a> {
    /// The model of a task without `params.model`.
    pub model: Option<&'a str>,
    /// The `max_tokens` of a task without `params.max_tokens`.
    pub max_tokens: Option<u32>,
    /// The system prompt of a task without `params.system`.
    pub system: Option<&'a str>,
    /// The engine's attempts per request (`--max-attempts`), the first
    /// included; check retries multiply them per task.
    pub attempts: u32,
    /// The engine sends the task's params, `params.extra` passed through
    /// (the openai engine): a task's completion high is the cap the
    /// request carries times the completions it asks for
    /// ([`ctx_model::Params::completion_bound`]), and a pass-through key no
    /// bound covers leaves it unbounded. Otherwise (a command) it is
    /// `max_tokens`, where the output is cut.
    pub sends_params: bool,
    /// Every call carries the run's canary sentence in its system message
    /// (the plan asks for a canary: `ctx_model::plan_has_canary`), which
    /// [`request_overhead`] bounds. An engine's own defaults say `false`;
    /// the estimate of a plan sets it from the plan.
    pub canary: bool,
}

impl EngineDefaults<'_> {
    /// The most completion tokens one call of a task with `params` can be
    /// billed (see [`EngineDefaults::sends_params`]); the error names the
    /// parameter that leaves it without a bound.
    pub fn completion_bound(
        &self,
        params: &ctx_model::Params,
    ) -> Result<u64, ctx_model::billing::UnboundedParam> {
        if self.sends_params {
            params.completion_bound(self.max_tokens)
        } else {
            params
                .max_tokens
                .or(self.max_tokens)
                .map(u64::from)
                .ok_or(ctx_model::billing::UnboundedParam::NoCap)
        }
    }
}

/// What a row that is not a task's own call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraRow {
    /// A `judge` check's call.
    Judge,
    /// A `summarize_strategy: llm` summary call.
    Summary,
}

/// Every task's estimate, and the tasks that have none.
pub struct Estimates {
    /// Tasks with a model whose own prompt fits the cap, in plan order,
    /// each followed by its judge rows and its summary rows.
    pub tasks: Vec<TaskEstimate>,
    /// For each row of `tasks` that is not a task's own call, the task it
    /// belongs to and whether it is a judge call (`ctx run --max-cost`
    /// reserves judge rows with their task).
    pub extra_rows: HashMap<String, (String, ExtraRow)>,
    /// Tasks with neither `params.model` nor a default model.
    pub no_model: Vec<String>,
    /// Task ids whose own prompt does not fit the cap, and why.
    pub over_cap: Vec<(String, String)>,
    /// Tasks with a request parameter that leaves their cost without a
    /// bound (a pass-through key no bound covers, a cap or `n` that is not
    /// a number), each with why; their completion high is unbounded.
    pub unbounded_params: Vec<(String, ctx_model::billing::UnboundedParam)>,
}

/// Why a plan's tasks cannot be estimated; every offending task is named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EstimateError {
    /// Tasks with neither `params.model` nor a default model.
    #[error("{} name{} no model ({})", tasks(.0.len()), if .0.len() == 1 { "s" } else { "" }, list(.0))]
    NoModel(Vec<String>),
    /// Tasks whose own prompt does not fit the cap, each with why.
    #[error("{} cannot be assembled under the prompt cap", tasks(.0.len()))]
    OverCap(Vec<String>),
    /// The plan's graph could not be built.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

use crate::summary_text::tasks;

/// At most ten ids, then how many more.
pub fn list(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(10).map(String::as_str).collect();
    match ids.len().saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// One [`TaskEstimate`] per task, in plan order.
pub fn estimate_plan(
    plan: &Plan,
    defaults: &EngineDefaults<'_>,
) -> Result<Vec<TaskEstimate>, EstimateError> {
    let e = estimate_tasks(plan, defaults)?;
    if !e.no_model.is_empty() {
        return Err(EstimateError::NoModel(e.no_model));
    }
    if !e.over_cap.is_empty() {
        return Err(EstimateError::OverCap(
            e.over_cap.into_iter().map(|(_, why)| why).collect(),
        ));
    }
    Ok(e.tasks)
}

/// The estimates of every task that has one, and the tasks that do not.
pub fn estimate_tasks(plan: &Plan, defaults: &EngineDefaults<'_>) -> Result<Estimates, GraphError> {
    let defaults = &EngineDefaults {
        canary: defaults.canary || ctx_model::plan_has_canary(plan),
        ..*defaults
    };
    let graph = PlanGraph::new(plan)?;
    let cap = plan.config.max_prompt_tokens;
    // One counter per tokenizer, as the executor keeps them.
    let mut counters: HashMap<Tokenizer, Arc<dyn TokenCounter>> = HashMap::new();
    let mut estimates = Vec::with_capacity(plan.sub_tasks.len());
    let mut no_model = Vec::new();
    let mut over_cap = Vec::new();
    let mut unbounded_params = Vec::new();
    let mut extra_rows = HashMap::new();
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        let params = &task.tool_or_prompt.params;
        let Some(model) = params.model.as_deref().or(defaults.model) else {
            no_model.push(task.id.clone());
            continue;
        };
        let tokenizer = ctx_prompt::tokenizer_for_task(plan, task)?;
        let counter = counters
            .entry(tokenizer)
            .or_insert_with(|| tokenizer.counter());
        let empty = empty_outputs(plan, &graph, i);
        let low = match ctx_prompt::assemble_task_prompt(plan, task, &empty, counter.as_ref(), cap)
        {
            Ok(assembled) => assembled.tokens as u64,
            Err(e) => {
                over_cap.push((task.id.clone(), e.to_string()));
                continue;
            }
        };
        let system = params.system.as_deref().or(defaults.system);
        let system_tokens = system.map_or(0, |s| counter.count(s) as u64);
        let completion = match defaults.completion_bound(params) {
            Ok(n) => TokenRange::bounded(0, n),
            Err(ctx_model::billing::UnboundedParam::NoCap) => TokenRange::unbounded(0),
            Err(why) => {
                unbounded_params.push((task.id.clone(), why));
                TokenRange::unbounded(0)
            }
        };
        let checks = ctx_model::task_checks(plan, task);
        let attempts = if checks.is_empty() {
            attempt_bound(0, defaults.attempts)
        } else {
            attempt_bound(
                plan.config.max_check_attempts.saturating_sub(1),
                defaults.attempts,
            )
        };
        // A map task runs once per item: its one row is bounded by
        // `max_items` × the item's high end (judge rows likewise).
        let attempts = attempts.saturating_mul(map_items(task));
        estimates.push(TaskEstimate {
            task_id: task.id.clone(),
            model: model.to_string(),
            prompt_tokens: TokenRange::bounded(
                low + system_tokens,
                cap as u64 + request_overhead(system, defaults.canary, counter.as_ref()),
            ),
            completion_tokens: completion,
            attempts,
        });
        for (n, check) in checks.iter().enumerate() {
            let Some(row) = judge_estimate(
                task, n, check, model, completion, attempts, defaults, &*counter,
            ) else {
                continue;
            };
            extra_rows.insert(row.task_id.clone(), (task.id.clone(), ExtraRow::Judge));
            estimates.push(row);
        }
        let before = estimates.len();
        summary_estimates(
            plan,
            &graph,
            i,
            model,
            completion,
            defaults,
            counter.as_ref(),
            &mut estimates,
        );
        for row in &estimates[before..] {
            extra_rows.insert(row.task_id.clone(), (task.id.clone(), ExtraRow::Summary));
        }
    }
    Ok(Estimates {
        tasks: estimates,
        extra_rows,
        no_model,
        over_cap,
        unbounded_params,
    })
}

/// How many times a task runs at most: `map.max_items` for a map task,
/// else once.
fn map_items(task: &ctx_model::SubTask) -> u32 {
    task.map
        .as_ref()
        .and_then(|m| m.max_items)
        .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// Task `i`'s dependencies with every output empty, as the low end
/// assembles them: in the order the executor hands them over (the
/// layout's order of the graph's). The graph's indices are the plan's
/// task indices, so the description is an index away (`Plan::task` scans,
/// which made 8,000 tasks quadratic).
pub(crate) fn empty_outputs<'p>(
    plan: &'p Plan,
    graph: &'p PlanGraph,
    i: usize,
) -> Vec<DependencyOutput<'p>> {
    plan.config
        .layout
        .dependency_order(graph.dependencies(i))
        .into_iter()
        .map(|d| DependencyOutput {
            task_id: graph.id(d),
            description: plan.sub_tasks.get(d).map_or("", |t| t.description.as_str()),
            output: "",
            summary: None,
        })
        .collect()
}

/// The row of check `n` of `task` when it is a `judge` check (module
/// documentation, "Judges"): one call per check attempt. Its prompt high
/// is what the call sends: the engine's system prompt (a judge call sets
/// none of its own, so the engine's default goes with it) and the judge
/// prompt with every copy of the output at the task's completion high
/// ([`ctx_deps::call_bounds::judge_prompt_bound`], which the executor holds
/// the neutralized prompt to under a budget), framed.
#[allow(clippy::too_many_arguments)]
fn judge_estimate(
    task: &ctx_model::SubTask,
    n: usize,
    check: &Check,
    model: &str,
    output: TokenRange,
    attempts: u32,
    defaults: &EngineDefaults<'_>,
    counter: &dyn TokenCounter,
) -> Option<TaskEstimate> {
    let ctx_checks::Rule::Judge(judge) = &check.rule else {
        return None;
    };
    let max_tokens = judge
        .max_tokens
        .unwrap_or(ctx_checks::spec::DEFAULT_JUDGE_MAX_TOKENS);
    Some(TaskEstimate {
        task_id: format!("{} (judge {})", task.id, n + 1),
        model: judge.judge_model.as_deref().unwrap_or(model).to_string(),
        prompt_tokens: match output.high {
            Some(high) => TokenRange::bounded(
                0,
                ctx_deps::call_bounds::judge_prompt_bound(&judge.rubric, high, counter)
                    + system_framed(defaults, counter),
            ),
            None => TokenRange::unbounded(0),
        },
        completion_tokens: TokenRange::bounded(0, u64::from(max_tokens)),
        attempts,
    })
}

/// The tokens a chat request adds around its prompt: the system prompt
/// it is sent with (`system`), counted exactly, with its message's
/// framing, and the framing of the prompt's message and of the reply.
/// The high end of every prompt is its bound plus these; a run settles a
/// call the server reported no usage for at ctx's count plus these
/// (`RunCosts`'s `CostModel::request_overhead`), so the settlement is
/// priced as the reservation was.
///
/// With `canary`, the system message also carries the run's canary
/// sentence (joined after the system prompt, or alone): bounded by its
/// fixed text counted exactly, and the token at one token per byte
/// ([`ctx_deps::canary::CANARY_TOKEN_BYTES`]), since the token's digits
/// are random and unknown here. Two tokens more cover the seams where the
/// parts meet, which a tokenizer may split differently when joined.
pub fn request_overhead(system: Option<&str>, canary: bool, counter: &dyn TokenCounter) -> u64 {
    let count = |s: &str| counter.count(s) as u64;
    let sentence = canary.then(|| {
        count(ctx_deps::canary::CANARY_SENTENCE) + ctx_deps::canary::CANARY_TOKEN_BYTES as u64 + 2
    });
    let system = match (system, sentence) {
        (Some(s), Some(c)) => count(s) + count(ctx_engine::CANARY_JOIN) + c + FRAMING_PER_MESSAGE,
        (Some(s), None) => count(s) + FRAMING_PER_MESSAGE,
        (None, Some(c)) => c + FRAMING_PER_MESSAGE,
        (None, None) => 0,
    };
    system + FRAMING_PER_MESSAGE + FRAMING_REPLY
}

/// The tokens a call made by ctx itself (a judge, a summary) adds around
/// its prompt: [`request_overhead`] with the engine's default system
/// prompt.
fn system_framed(defaults: &EngineDefaults<'_>, counter: &dyn TokenCounter) -> u64 {
    request_overhead(defaults.system, defaults.canary, counter)
}

/// The `summarize_strategy: llm` calls task `i`'s output may need, one
/// row each (`ID (summary)`, or `ID (summary for DEP)` under
/// `summary_focus: dependent`), after the task's own row.
///
/// Low is 0 for both prompt and completion: a short output needs no
/// summary. High: the summary prompt with an empty output, plus the
/// producing task's completion high (the most output there is to
/// summarise, counted in the producing task's tokens; unbounded when that
/// is), plus the framing of one message; completion high is
/// `summary_max_tokens`.
#[allow(clippy::too_many_arguments)]
fn summary_estimates(
    plan: &Plan,
    graph: &PlanGraph,
    i: usize,
    model: &str,
    output: TokenRange,
    defaults: &EngineDefaults<'_>,
    counter: &dyn TokenCounter,
    estimates: &mut Vec<TaskEstimate>,
) {
    let Some(task) = plan.sub_tasks.get(i) else {
        return;
    };
    let dep_cfg = &plan.config.dependency;
    let summary_model = dep_cfg.summary_model.as_deref().unwrap_or(model);
    for call in ctx_deps::summarize::possible_summary_calls(plan, graph, i) {
        let dependent = call.and_then(|d| plan.sub_tasks.get(d));
        let focus = dependent.map(|t| t.tool_or_prompt.params.prompt.as_str());
        let prompt = match output.high {
            Some(high) => TokenRange::bounded(
                0,
                ctx_deps::call_bounds::summary_prompt_bound(plan, task, focus, high, counter)
                    + system_framed(defaults, counter),
            ),
            None => TokenRange::unbounded(0),
        };
        estimates.push(TaskEstimate {
            task_id: match dependent {
                Some(d) => format!("{} (summary for {})", task.id, d.id),
                None => format!("{} (summary)", task.id),
            },
            model: summary_model.to_string(),
            prompt_tokens: prompt,
            completion_tokens: TokenRange::bounded(0, u64::from(dep_cfg.summary_max_tokens)),
            // Each item of a map writes its own summaries.
            attempts: defaults.attempts.saturating_mul(map_items(task)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(json: &str) -> Plan {
        serde_json::from_str(json).unwrap()
    }

    fn defaults() -> EngineDefaults<'static> {
        EngineDefaults {
            model: None,
            max_tokens: None,
            system: None,
            attempts: 1,
            sends_params: true,
            canary: false,
        }
    }

    /// A canary adds its sentence to every call's system message: the
    /// bound holds the sentence as sent, whatever the token's digits and
    /// whether a system prompt comes before it, for the tokenizers ctx
    /// counts with.
    #[test]
    fn the_canary_sentence_is_within_the_request_overhead() {
        use ctx_deps::canary::Canary;
        for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
            let counter = tokenizer.counter();
            let count = |s: &str| counter.count(s) as u64;
            for bytes in [[0u8; 16], [0xff; 16], [0x19; 16], [0xa7; 16]] {
                let sentence = Canary::from_bytes(bytes).sentence();
                for system in [None, Some("You are careful."), Some("ends with a space ")] {
                    let sent = match system {
                        Some(s) => format!("{s}{}{sentence}", ctx_engine::CANARY_JOIN),
                        None => sentence.clone(),
                    };
                    let bounded = request_overhead(system, true, counter.as_ref())
                        - FRAMING_PER_MESSAGE * 2
                        - FRAMING_REPLY;
                    assert!(
                        count(&sent) <= bounded,
                        "{sent:?}: {} > {bounded}",
                        count(&sent)
                    );
                }
            }
            // The bound, term by term: the sentence's words, the token at a
            // token per byte, two for the seams, the join after a system
            // prompt, and the framing of the system message it makes.
            let words = count(ctx_deps::canary::CANARY_SENTENCE);
            let token = ctx_deps::canary::CANARY_TOKEN_BYTES as u64;
            let framing = FRAMING_PER_MESSAGE + FRAMING_REPLY;
            assert_eq!(
                request_overhead(None, true, counter.as_ref()),
                words + token + 2 + FRAMING_PER_MESSAGE + framing
            );
            assert_eq!(
                request_overhead(Some("Be brief."), true, counter.as_ref()),
                count("Be brief.")
                    + count(ctx_engine::CANARY_JOIN)
                    + words
                    + token
                    + 2
                    + FRAMING_PER_MESSAGE
                    + framing
            );
            // Without a canary nothing is added.
            assert_eq!(
                request_overhead(None, false, counter.as_ref()),
                FRAMING_PER_MESSAGE + FRAMING_REPLY
            );
        }
    }

    /// A plan with a canary prices every prompt's high end with it.
    #[test]
    fn a_plan_with_a_canary_has_a_higher_prompt_high_end() {
        let high = |p: &Plan| {
            estimate_tasks(p, &defaults()).unwrap().tasks[0]
                .prompt_tokens
                .high
                .unwrap()
        };
        let without = plan(TWO);
        let mut with = plan(TWO);
        with.config.canary = true;
        let counter = Tokenizer::O200kBase.counter();
        let sentence = request_overhead(None, true, counter.as_ref())
            - request_overhead(None, false, counter.as_ref());
        assert_eq!(high(&with), high(&without) + sentence);
    }

    const TWO: &str = r#"{
      "schema_version": 1,
      "config": {"max_prompt_tokens": 500},
      "entities": [{"name": "Board", "grounded_value": "10 x 20"}],
      "sub_tasks": [
        {"id": "a", "description": "First",
         "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write A.", "model": "gpt-4o", "max_tokens": 100}}},
        {"id": "b", "description": "Second", "dependencies": ["a"],
         "entity_context": [{"entity_name": "Board", "intent_relevance": "constraint"}],
         "tool_or_prompt": {"name": "inference", "params": {"prompt": "Write B.", "system": "Be brief."}}}
      ]
    }"#;

    #[test]
    fn low_is_the_assembled_prompt_with_empty_outputs_and_high_the_cap_plus_framing() {
        let p = plan(TWO);
        let d = EngineDefaults {
            model: Some("gpt-4o-mini"),
            ..defaults()
        };
        let e = estimate_plan(&p, &d).unwrap_or_else(|_| panic!("estimates"));
        let counter = Tokenizer::for_model("gpt-4o").counter();
        assert_eq!(e[0].model, "gpt-4o");
        assert_eq!(
            e[0].prompt_tokens,
            TokenRange::bounded(
                counter.count("Write A.") as u64,
                500 + FRAMING_PER_MESSAGE + FRAMING_REPLY
            )
        );
        assert_eq!(e[0].completion_tokens, TokenRange::bounded(0, 100));
        // b: the default model, the dependency heading with an empty
        // output, the entity, the system message.
        let counter = ctx_prompt::tokenizer_for_task(&p, &p.sub_tasks[1])
            .unwrap()
            .counter();
        let assembled = concat!(
            "## Entity Constraints and Values\n- Board: 10 x 20 (constraint)\n\n",
            "## Outputs from Dependent Tasks\n\n### Task a: First\n**Output:**\n\n\n---\n\n",
            "Write B."
        );
        let system = counter.count("Be brief.") as u64;
        assert_eq!(e[1].model, "gpt-4o-mini");
        assert_eq!(
            e[1].prompt_tokens,
            TokenRange::bounded(
                counter.count(assembled) as u64 + system,
                500 + system + 2 * FRAMING_PER_MESSAGE + FRAMING_REPLY
            )
        );
        assert_eq!(e[1].completion_tokens, TokenRange::unbounded(0));
    }

    #[test]
    fn params_win_over_defaults_and_max_tokens_default_bounds_the_rest() {
        let p = plan(TWO);
        let d = EngineDefaults {
            model: Some("other"),
            max_tokens: Some(7),
            system: Some("ignored for b, used for a"),
            attempts: 4,
            sends_params: true,
            canary: false,
        };
        let e = estimate_plan(&p, &d).unwrap_or_else(|_| panic!("estimates"));
        assert_eq!(e[0].model, "gpt-4o");
        assert_eq!(e[0].completion_tokens, TokenRange::bounded(0, 100));
        assert_eq!(e[1].model, "other");
        assert_eq!(e[1].completion_tokens, TokenRange::bounded(0, 7));
        assert!(e.iter().all(|t| t.attempts == 4));
    }

    #[test]
    fn llm_summaries_are_estimated_after_their_task() {
        let mut p = plan(TWO);
        p.config.dependency.summarize_strategy = ctx_model::SummarizeStrategy::Llm;
        p.config.dependency.summary_model = Some("gpt-4o-mini".into());
        p.config.dependency.summary_max_tokens = 50;
        let d = EngineDefaults {
            model: Some("m"),
            ..defaults()
        };
        let e = estimate_plan(&p, &d).unwrap_or_else(|_| panic!("estimates"));
        let ids: Vec<&str> = e.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(ids, ["a", "a (summary)", "b"]);
        assert_eq!(e[1].model, "gpt-4o-mini");
        assert_eq!(e[1].completion_tokens, TokenRange::bounded(0, 50));
        // The empty-output prompt plus a's 100 completion tokens, framed.
        let template = ctx_deps::summarize::summary_prompt(&p, &p.sub_tasks[0], "", None);
        let counter = Tokenizer::O200kBase.counter();
        let fixed = counter.count(&template) as u64 + FRAMING_PER_MESSAGE + FRAMING_REPLY;
        assert_eq!(e[1].prompt_tokens, TokenRange::bounded(0, fixed + 100));
        // One per dependent under summary_focus: dependent; none for b,
        // which nothing depends on.
        p.config.dependency.summary_focus = ctx_model::SummaryFocus::Dependent;
        let e = estimate_plan(&p, &d).unwrap_or_else(|_| panic!("estimates"));
        let ids: Vec<&str> = e.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(ids, ["a", "a (summary for b)", "b"]);
        // b has no max_tokens: nothing bounds what a summary of b reads,
        // but nothing depends on b either. Unlimited output length: no
        // summaries at all.
        p.config.dependency.max_output_length = None;
        assert_eq!(estimate_plan(&p, &d).map(|e| e.len()).ok(), Some(2));
    }

    #[test]
    fn tasks_without_a_model_are_all_named() {
        let p = plan(TWO);
        match estimate_plan(&p, &defaults()) {
            Err(EstimateError::NoModel(ids)) => assert_eq!(ids, ["b"]),
            _ => panic!("expected NoModel"),
        }
    }

    #[test]
    fn a_prompt_over_its_cap_is_reported() {
        let mut p = plan(TWO);
        p.config.max_prompt_tokens = 2;
        let d = EngineDefaults {
            model: Some("m"),
            ..defaults()
        };
        match estimate_plan(&p, &d) {
            Err(EstimateError::OverCap(lines)) => {
                assert_eq!(lines.len(), 2);
                assert!(lines[0].contains("task `a`"), "{lines:?}");
            }
            _ => panic!("expected OverCap"),
        }
    }
}
