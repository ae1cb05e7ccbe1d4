//! What a run spends: each task's `cost_usd`, and a budget (`ctx run
//! --max-cost USD`).
//!
//! This is the caller's side of ctx-deps' [`CostModel`]: it knows which
//! model a task resolves to, the price sources, the engine's defaults and
//! attempts. The high end a task reserves under a budget is exactly
//! `ctx plan cost`'s (the same [`crate::estimate::estimate_tasks`] and
//! [`ctx_cost::estimate_costs`]), so `ctx plan cost` tells before a run
//! what `--max-cost` will reserve.
//!
//! * **Model**: the task's `params.model`, else `--model` (the openai
//!   engine only; the command engine passes `params.model` as
//!   `CTX_MODEL`). The dry-run engine calls no model: its tasks cost $0.
//! * **max_tokens**: `params.max_tokens`, else `--max-tokens`.
//! * **Attempts**: the openai engine's `--max-attempts` (default 4); one
//!   for the others; times `max_check_attempts` for a task with checks.
//! * **Extra calls**: a task's judge calls and its `llm` summary calls
//!   (the `ID (judge N)` and `ID (summary…)` rows of `ctx plan cost`) are
//!   part of its reservation and of its `cost_usd`.
//!
//! With `--max-cost`, the run refuses to start (exit 2) when a task has no
//! `max_tokens` (its completion has no bound), names no model, or names a
//! model without a known price (its cost has no bound). Under a budget the
//! command engine, which cannot stop a program at `max_tokens`, has its
//! output cut there by the executor.

use std::collections::HashMap;
use std::sync::Arc;

use ctx_cost::{PriceBook, PriceTable, Usage, Usd, estimate_costs, plan_table};
use ctx_deps::{CostModel, CostOptions, GraphError};
use ctx_model::billing::UnboundedParam;
use ctx_model::{Plan, SubTask};
use ctx_tokens::TokenCounter;

use crate::estimate::{EngineDefaults, estimate_tasks, list};

/// What an engine means for costs: each engine states its own (the
/// engine seam's [`EngineCosts`], re-exported here, where its users price
/// runs).
pub use ctx_engine::EngineCosts;

impl<'a> EngineDefaults<'a> {
    /// The defaults `engine` resolves tasks with: `ctx plan cost` and
    /// `ctx run --max-cost` read the same engine flags through this, so
    /// they give the same high end.
    pub fn of(engine: &'a EngineCosts) -> EngineDefaults<'a> {
        EngineDefaults {
            model: engine.model.as_deref(),
            max_tokens: engine.max_tokens,
            system: engine.system.as_deref(),
            attempts: engine.attempts.max(1),
            sends_params: engine.sends_params,
            canary: false,
        }
    }
}

/// Why a budget cannot be kept: some task's cost has no bound. Every
/// offending task is named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// Tasks without `max_tokens`: their completion has no bound.
    #[error("{} without max_tokens ({}): their cost has no bound", crate::summary_text::tasks(.0.len()), list(.0))]
    NoMaxTokens(Vec<String>),
    /// Tasks with a request parameter that leaves their cost without a
    /// bound, each with the parameter (docs/cost.md lists them).
    #[error("{}", unbounded_params(.0))]
    UnboundedParams(Vec<(String, UnboundedParam)>),
    /// Tasks that name no model, so no price bounds them.
    #[error("{} name{} no model ({}), so no price bounds {}", crate::summary_text::tasks(.0.len()), if .0.len() == 1 { "s" } else { "" }, list(.0), if .0.len() == 1 { "it" } else { "them" })]
    NoModel(Vec<String>),
    /// Models no price source knows, and the tasks that use them.
    #[error("price unknown for {} (tasks {})", .models.join(", "), list(.tasks))]
    Unpriced {
        /// The models.
        models: Vec<String>,
        /// The tasks.
        tasks: Vec<String>,
    },
    /// The plan's graph could not be built.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// The prices of one run.
pub struct RunCosts {
    /// The dry-run engine: nothing is spent.
    free: bool,
    default_model: Option<String>,
    default_max_tokens: Option<u32>,
    system: Option<String>,
    sends_params: bool,
    /// The engine frames prompts as chat messages
    /// ([`EngineCosts::chat_framing`]).
    chat_framing: bool,
    /// The plan plants a canary in every call's system message.
    canary: bool,
    book: PriceBook,
    /// Each task's high end, by id (with `--max-cost` only).
    bounds: HashMap<String, Option<Usd>>,
}

impl RunCosts {
    /// The engine defaults the estimate resolves tasks with.
    fn defaults(&self, attempts: u32) -> EngineDefaults<'_> {
        EngineDefaults {
            model: self.default_model.as_deref(),
            max_tokens: self.default_max_tokens,
            system: self.system.as_deref(),
            attempts,
            sends_params: self.sends_params,
            canary: self.canary,
        }
    }

    fn model<'a>(&'a self, task: &'a SubTask) -> Option<&'a str> {
        task.tool_or_prompt
            .params
            .model
            .as_deref()
            .or(self.default_model.as_deref())
    }
}

impl CostModel for RunCosts {
    fn bound(&self, task: &SubTask) -> Option<Usd> {
        if self.free {
            return Some(Usd::ZERO);
        }
        // An item (`TASK[i]`) is not in the plan the bounds were made
        // from: it reserves its map task's bound, which is one item's (the
        // map task itself calls no engine and reserves nothing). A plan
        // task whose id only looks like an item is found by its own id.
        let id = match self.bounds.get(&task.id) {
            Some(bound) => return *bound,
            None => ctx_model::map::parse_item_id(&task.id).map_or(task.id.as_str(), |(m, _)| m),
        };
        self.bounds.get(id).copied().flatten()
    }

    /// The completion bound of one call as the engine sends it: the cap
    /// the request carries times its completions (`n`), for the openai
    /// engine; `max_tokens` (where the output is cut) for a command.
    fn max_tokens(&self, task: &SubTask) -> Option<u64> {
        self.defaults(1)
            .completion_bound(&task.tool_or_prompt.params)
            .ok()
    }

    fn call_cost(&self, task: &SubTask, usage: &Usage) -> Option<Usd> {
        if self.free {
            return Some(Usd::ZERO);
        }
        Some(self.book.lookup(self.model(task)?)?.price.cost(usage))
    }

    fn call_cost_on(&self, task: &SubTask, model: Option<&str>, usage: &Usage) -> Option<Usd> {
        if self.free {
            return Some(Usd::ZERO);
        }
        let model = model.or_else(|| self.model(task))?;
        Some(self.book.lookup(model)?.price.cost(usage))
    }

    /// The system message and chat framing `ctx plan cost`'s prompt high
    /// adds to the prompt's bound ([`crate::estimate::request_overhead`]),
    /// for an engine that sends chat messages; nothing for one that sends
    /// the prompt as it is, or calls no model.
    fn request_overhead(&self, task: &SubTask, own_call: bool, counter: &dyn TokenCounter) -> u64 {
        if self.free || !self.chat_framing {
            return 0;
        }
        let own = own_call
            .then_some(task.tool_or_prompt.params.system.as_deref())
            .flatten();
        crate::estimate::request_overhead(own.or(self.system.as_deref()), self.canary, counter)
    }
}

/// Everything a run is priced by besides its plan: the engine's cost
/// facts, the price tables the caller gives (a LiteLLM prices file,
/// `--price` flags), and a budget. One value serves a local run (one
/// plan) and a shared-store worker, which prices each run it works on by
/// that run's own plan: [`RunPricing::cost_options`] is the one place a
/// plan's `config.prices` joins the stack.
#[derive(Debug, Clone, Default)]
pub struct RunPricing {
    /// What the engine means for costs.
    pub engine: EngineCosts,
    /// A LiteLLM-format prices file's table (`--prices FILE`), read once.
    pub file: Option<PriceTable>,
    /// The `--price MODEL=IN,OUT` table.
    pub flags: Option<PriceTable>,
    /// The most the run may spend (`--max-cost`).
    pub max_cost: Option<Usd>,
}

impl RunPricing {
    /// The price book, later layers winning (docs/cost.md): the shipped
    /// defaults, then the prices file, then `plan` (a plan's
    /// `config.prices`, when there is one), then the flags.
    pub fn layers(&self, plan: Option<&ctx_cost::PlanPrices>) -> PriceBook {
        let mut book = PriceBook::with_defaults();
        if let Some(file) = &self.file {
            book.push(file.clone());
        }
        if let Some(prices) = plan.filter(|p| !p.is_empty()) {
            book.push(plan_table(prices));
        }
        if let Some(flags) = self.flags.as_ref().filter(|f| !f.is_empty()) {
            book.push(flags.clone());
        }
        book
    }

    /// The book `plan` is charged with: [`RunPricing::layers`], except
    /// for an engine [`priced_on_request`](EngineCosts::priced_on_request)
    /// when no price was asked for, whose book is empty (its `cost_usd`
    /// is unknown, not a guess).
    pub fn book(&self, plan: &Plan) -> PriceBook {
        let asked = self.max_cost.is_some()
            || self.file.is_some()
            || self.flags.as_ref().is_some_and(|f| !f.is_empty())
            || !plan.config.prices.is_empty();
        if self.engine.priced_on_request && !asked {
            return PriceBook::new();
        }
        self.layers(Some(&plan.config.prices))
    }

    /// The executor's cost options for `plan` ([`cost_options`] with
    /// [`RunPricing::book`]).
    pub fn cost_options(&self, plan: &Plan) -> Result<CostOptions, BudgetError> {
        cost_options(plan, &self.engine, self.book(plan), self.max_cost)
    }
}

/// The executor's cost options for `plan` run on `engine`: prices always,
/// and a budget with `max_cost`, which is refused ([`BudgetError`]) when a
/// task's cost cannot be bounded. A resumed run's earlier spending is
/// added by the run session ([`crate::RunSession::start`]).
pub fn cost_options(
    plan: &Plan,
    engine: &EngineCosts,
    book: PriceBook,
    max_cost: Option<Usd>,
) -> Result<CostOptions, BudgetError> {
    let mut costs = RunCosts {
        free: engine.free,
        default_model: engine.model.clone(),
        default_max_tokens: engine.max_tokens,
        system: engine.system.clone(),
        sends_params: engine.sends_params,
        chat_framing: engine.chat_framing,
        canary: ctx_model::plan_has_canary(plan),
        book,
        bounds: HashMap::new(),
    };
    // The dry run calls no model and costs nothing: any budget holds,
    // whatever max_tokens or parameters the tasks have (asking for them
    // would send the user to `--max-tokens`, which the dry-run engine
    // refuses).
    if max_cost.is_some() && !costs.free {
        let defaults = costs.defaults(engine.attempts.max(1));
        let mut no_cap = Vec::new();
        let mut params = Vec::new();
        for t in &plan.sub_tasks {
            match defaults.completion_bound(&t.tool_or_prompt.params) {
                Ok(_) => {}
                Err(UnboundedParam::NoCap) => no_cap.push(t.id.clone()),
                Err(why) => params.push((t.id.clone(), why)),
            }
        }
        if !params.is_empty() {
            return Err(BudgetError::UnboundedParams(params));
        }
        if !no_cap.is_empty() {
            return Err(BudgetError::NoMaxTokens(no_cap));
        }
        costs.bounds = bounds_with(plan, &costs, &defaults)?;
    }
    Ok(CostOptions {
        model: Arc::new(costs),
        max_cost,
        already_spent: Usd::ZERO,
        cut_output_at_max_tokens: max_cost.is_some() && engine.cuts_at_max_tokens,
        shared_budget: None,
    })
}

/// Each task's high end, as `ctx plan cost` computes it with the same
/// engine defaults; refuses tasks with no model or no price.
fn bounds_with(
    plan: &Plan,
    costs: &RunCosts,
    defaults: &EngineDefaults<'_>,
) -> Result<HashMap<String, Option<Usd>>, BudgetError> {
    // Judge rows are on the check's `judge_model` (else the task's), as
    // `ctx plan cost` shows them and as the executor charges each judge
    // call.
    // A map task's bound is one item's: each item reserves it when it is
    // dispatched (`CostModel::bound` above), so it is estimated as a map
    // of one item, its judges and `llm` summaries included once.
    let one_item;
    let plan = if plan.sub_tasks.iter().any(|t| t.map.is_some()) {
        let mut p = plan.clone();
        for m in p.sub_tasks.iter_mut().filter_map(|t| t.map.as_mut()) {
            m.max_items = Some(1);
        }
        one_item = p;
        &one_item
    } else {
        plan
    };
    let e = estimate_tasks(plan, defaults)?;
    if !e.no_model.is_empty() {
        return Err(BudgetError::NoModel(e.no_model));
    }
    let report = estimate_costs(&costs.book, &e.tasks);
    if !report.total.unpriced.is_empty() {
        return Err(BudgetError::Unpriced {
            models: report.total.unpriced.clone(),
            tasks: report
                .tasks
                .iter()
                .filter(|t| t.cost_usd.high.is_none())
                .map(|t| t.task_id.clone())
                .collect(),
        });
    }
    let mut map: HashMap<String, Option<Usd>> = HashMap::new();
    let mut judges: Vec<(String, Option<Usd>)> = Vec::new();
    for t in report.tasks {
        match e.extra_rows.get(&t.task_id) {
            None => {
                map.insert(t.task_id, t.cost_usd.high);
            }
            // A task with checks makes its judge calls within its own
            // reservation (every check attempt's judges), and a task's
            // `llm` summaries are written before its reservation is
            // settled, so both are part of it.
            Some((owner, _)) => judges.push((owner.clone(), t.cost_usd.high)),
        }
    }
    for (owner, high) in judges {
        if let Some(bound) = map.get_mut(&owner) {
            *bound = match (*bound, high) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                _ => None,
            };
        }
    }
    // A task whose own prompt cannot fit its cap fails before any call.
    for (id, _) in e.over_cap {
        map.insert(id, Some(Usd::ZERO));
    }
    Ok(map)
}

/// `task `a`: `n` is "three", not a number ...; task `b`: ...`, at most
/// ten tasks, then how many more.
fn unbounded_params(tasks: &[(String, UnboundedParam)]) -> String {
    let mut text: Vec<String> = tasks
        .iter()
        .take(10)
        .map(|(id, why)| format!("task `{id}`: {why}"))
        .collect();
    if tasks.len() > 10 {
        text.push(format!("and {} more", tasks.len() - 10));
    }
    text.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::FRAMING_PER_MESSAGE;
    use ctx_tokens::TokenizerExt;

    fn plan() -> Plan {
        serde_json::from_str(
            r#"{"schema_version": 1, "config": {"max_prompt_tokens": 1000}, "sub_tasks": [
              {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference",
                "params": {"prompt": "Say a.", "model": "gpt-4o", "max_tokens": 100}}},
              {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference",
                "params": {"prompt": "Say b."}}}
            ]}"#,
        )
        .unwrap()
    }

    #[derive(Clone, Copy, PartialEq)]
    enum EngineKind {
        DryRun,
        Command,
        Openai,
    }

    /// What the CLI's engines mean for costs: the dry run is free, the
    /// openai engine has `--model gpt-4o-mini` here and retries, a command
    /// cannot stop at max_tokens.
    fn engine(kind: EngineKind) -> EngineCosts {
        EngineCosts {
            free: kind == EngineKind::DryRun,
            model: (kind == EngineKind::Openai).then(|| "gpt-4o-mini".to_string()),
            attempts: if kind == EngineKind::Openai { 4 } else { 1 },
            cuts_at_max_tokens: kind == EngineKind::Command,
            sends_params: kind == EngineKind::Openai,
            ..EngineCosts::default()
        }
    }

    fn usd(s: &str) -> Usd {
        Usd::parse(s).unwrap()
    }

    /// ctx's own count of a request the server reported no usage for
    /// adds what `ctx plan cost`'s prompt high adds to the prompt: the
    /// system message (the task's own `params.system` on its own calls,
    /// the engine's on a judge's or summary's) and the chat framing; for
    /// a chat engine only.
    #[test]
    fn request_overhead_is_the_system_message_and_framing_of_a_chat_engine() {
        let counter = ctx_tokens::Tokenizer::O200kBase.counter();
        let count = |s: &str| counter.count(s) as u64;
        let framing = FRAMING_PER_MESSAGE + crate::estimate::FRAMING_REPLY;
        let mut p = plan();
        p.sub_tasks[1].tool_or_prompt.params.system = Some("Answer tersely.".into());
        let mut e = engine(EngineKind::Openai);
        e.chat_framing = true;
        e.system = Some("You are careful.".into());
        let o = cost_options(&p, &e, PriceBook::with_defaults(), None).unwrap();
        let with = |s: &str| count(s) + FRAMING_PER_MESSAGE + framing;
        let overhead = |t: usize, own| o.model.request_overhead(&p.sub_tasks[t], own, &*counter);
        assert_eq!(overhead(0, true), with("You are careful."));
        assert_eq!(overhead(1, true), with("Answer tersely."));
        assert_eq!(overhead(1, false), with("You are careful."));
        e.system = None;
        let o = cost_options(&p, &e, PriceBook::with_defaults(), None).unwrap();
        assert_eq!(
            o.model.request_overhead(&p.sub_tasks[0], true, &*counter),
            framing
        );
        for kind in [EngineKind::Command, EngineKind::DryRun] {
            let mut e = engine(kind);
            e.system = Some("You are careful.".into());
            let o = cost_options(&p, &e, PriceBook::with_defaults(), None).unwrap();
            assert_eq!(
                o.model.request_overhead(&p.sub_tasks[1], true, &*counter),
                0
            );
        }
    }

    /// The reservation is `ctx plan cost`'s high end: (cap + framing) at
    /// the input rate plus max_tokens at the output rate, times the
    /// openai engine's attempts.
    #[test]
    fn reserves_the_plan_cost_high_end() {
        let mut e = engine(EngineKind::Openai);
        e.max_tokens = Some(10);
        e.attempts = 2;
        let o = cost_options(&plan(), &e, PriceBook::with_defaults(), Some(usd("1"))).unwrap();
        let p = plan();
        // gpt-4o (default table): $2.5 / $10 per million. a: (1000 + 16)
        // × 2.5 + 100 × 10 = 3,540 µ$ per call, two attempts.
        assert_eq!(o.model.bound(&p.sub_tasks[0]), Some(usd("0.00708")));
        // b: --model gpt-4o-mini ($0.15 / $0.60) and --max-tokens 10.
        assert_eq!(o.model.bound(&p.sub_tasks[1]), Some(usd("0.0003168")));
        assert_eq!(o.model.max_tokens(&p.sub_tasks[1]), Some(10));
        assert!(!o.cut_output_at_max_tokens);
    }

    /// `p` with `llm` summaries of at most 40 tokens for outputs over 10
    /// characters, its cost options on the openai engine (`--max-tokens
    /// 10`, one attempt) with a budget, and a's tokenizer.
    fn with_llm_summaries(p: &mut Plan) -> (CostOptions, Arc<dyn ctx_tokens::TokenCounter>) {
        let d = &mut p.config.dependency;
        d.summarize_strategy = ctx_model::SummarizeStrategy::Llm;
        d.max_output_length = Some(10);
        d.summary_max_tokens = 40;
        let mut e = engine(EngineKind::Openai);
        e.max_tokens = Some(10);
        e.attempts = 1;
        let o = cost_options(p, &e, PriceBook::with_defaults(), Some(usd("1"))).unwrap();
        let counter = ctx_prompt::tokenizer_for_task(p, &p.sub_tasks[0])
            .unwrap()
            .counter();
        (o, counter)
    }

    /// A task whose output may be summarised (`summarize_strategy: llm`)
    /// reserves its summary calls too, at the summary model's price.
    #[test]
    fn reserves_summary_calls_with_their_task() {
        let mut p = plan();
        p.config.dependency.summary_model = Some("gpt-4o-mini".into());
        let (o, counter) = with_llm_summaries(&mut p);
        let graph = ctx_deps::PlanGraph::new(&p).unwrap();
        let calls = ctx_deps::summarize::possible_summary_calls(&p, &graph, 0);
        assert_eq!(calls.len(), 1);
        let template = ctx_deps::summarize::summary_prompt(&p, &p.sub_tasks[0], "", None);
        // gpt-4o-mini: 0.15 µ$ per input token, 0.6 per output token; the
        // prompt is the template + a's 100 output tokens + framing.
        let prompt = counter.count(&template) as u64 + 16 + 100;
        let summary_picos = u128::from(prompt) * 150_000 + 40 * 600_000;
        let expected = usd("0.00354").saturating_add(Usd::from_picos(summary_picos));
        assert_eq!(o.model.bound(&p.sub_tasks[0]), Some(expected));
        // b has no dependent: nothing to summarise.
        assert_eq!(o.model.bound(&p.sub_tasks[1]), Some(usd("0.0001584")));
    }

    /// A task with checks reserves every check attempt (each with the
    /// engine's attempts) and every attempt's judge calls, the judge
    /// priced at its `judge_model`, as `ctx plan cost` shows it and the
    /// executor charges it.
    #[test]
    fn reserves_check_retries_and_judge_calls() {
        let mut p = plan();
        p.config.max_check_attempts = 3;
        p.sub_tasks[0].checks = serde_json::from_value(serde_json::json!([
            {"contains": "a"},
            {"judge": "Does it say a?", "judge_model": "gpt-4o-mini", "max_tokens": 50}
        ]))
        .unwrap();
        let mut e = engine(EngineKind::Openai);
        e.max_tokens = Some(10);
        e.attempts = 2;
        let o = cost_options(&p, &e, PriceBook::with_defaults(), Some(usd("1"))).unwrap();
        let counter = ctx_prompt::tokenizer_for_task(&p, &p.sub_tasks[0])
            .unwrap()
            .counter();
        let template = ctx_checks::judge::judge_prompt("Does it say a?", "");
        let judge_prompt = counter.count(&template) as u64 + 16 + 100;
        // The task on gpt-4o: its call 3,540 µ$. The judge on gpt-4o-mini,
        // 0.15 µ$ per input token and 0.6 per output token: (prompt + its
        // task's 100 output tokens + framing) × 0.15 + 50 × 0.6. Six calls
        // of each (3 × 2).
        let judge_picos = u128::from(judge_prompt) * 150_000 + 50 * 600_000;
        let expected = Usd::from_picos((3540 * 1_000_000 + judge_picos) * 6);
        assert_eq!(o.model.bound(&p.sub_tasks[0]), Some(expected));
        // b has no checks: one check attempt.
        assert_eq!(o.model.bound(&p.sub_tasks[1]), Some(usd("0.0003168")));
    }

    /// The reservation prices the request the openai engine sends:
    /// `max_completion_tokens` next to `max_tokens` is the cap it carries,
    /// and each of `n` completions may use all of it. Before, a's
    /// reservation used `max_tokens` (100) and one completion.
    #[test]
    fn reserves_the_cap_sent_times_the_completions() {
        let mut p = plan();
        let extra = &mut p.sub_tasks[0].tool_or_prompt.params.extra;
        extra.insert("max_completion_tokens".into(), serde_json::json!(400));
        extra.insert("n".into(), serde_json::json!(3));
        let mut e = engine(EngineKind::Openai);
        e.max_tokens = Some(10);
        e.attempts = 1;
        let o = cost_options(&p, &e, PriceBook::with_defaults(), Some(usd("1"))).unwrap();
        // gpt-4o: (1000 + 16) × 2.5 + 1200 × 10 µ$.
        assert_eq!(o.model.bound(&p.sub_tasks[0]), Some(usd("0.01454")));
        assert_eq!(o.model.max_tokens(&p.sub_tasks[0]), Some(1200));
        // A command is sent no params: its output is cut at max_tokens.
        let mut c = engine(EngineKind::Command);
        c.max_tokens = Some(10);
        p.sub_tasks[1].tool_or_prompt.params.model = Some("gpt-4o".into());
        let o = cost_options(&p, &c, PriceBook::with_defaults(), Some(usd("1"))).unwrap();
        assert_eq!(o.model.max_tokens(&p.sub_tasks[0]), Some(100));
    }

    /// A pass-through key no bound covers is refused under a budget, with
    /// the task and the key named; before, it was sent unpriced.
    #[test]
    fn refuses_parameters_no_bound_covers() {
        let mut p = plan();
        p.sub_tasks[0]
            .tool_or_prompt
            .params
            .extra
            .insert("tools".into(), serde_json::json!([{"type": "function"}]));
        p.sub_tasks[1]
            .tool_or_prompt
            .params
            .extra
            .insert("n".into(), serde_json::json!("many"));
        let mut e = engine(EngineKind::Openai);
        e.max_tokens = Some(10);
        let err = cost_options(&p, &e, PriceBook::with_defaults(), Some(usd("1")))
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "task `a`: `tools` changes what a call can be billed and no bound covers it; \
             task `b`: `n` is \"many\", not a number of tokens or completions ctx can bound by"
        );
        // Without a budget nothing is refused.
        assert!(cost_options(&p, &e, PriceBook::with_defaults(), None).is_ok());
    }

    /// A judge call goes out with the engine's system prompt (it sets none
    /// of its own), so its row counts it; before, it was left out.
    #[test]
    fn judge_rows_count_the_system_prompt_sent() {
        let mut p = plan();
        p.sub_tasks[0].checks =
            serde_json::from_value(serde_json::json!([{"judge": "Says a?", "max_tokens": 50}]))
                .unwrap();
        let mut e = engine(EngineKind::Openai);
        e.max_tokens = Some(10);
        e.attempts = 1;
        let bound = |e: &EngineCosts| {
            cost_options(&p, e, PriceBook::with_defaults(), Some(usd("1")))
                .unwrap()
                .model
                .bound(&p.sub_tasks[0])
                .unwrap()
        };
        let plain = bound(&e);
        let system = "You answer in French, at length, with every caveat you can think of.";
        e.system = Some(system.into());
        let with_system = bound(&e);
        let counter = ctx_prompt::tokenizer_for_task(&p, &p.sub_tasks[0])
            .unwrap()
            .counter();
        // The system prompt and its framing in the task's call and in the
        // judge's, each made once per check attempt (two by default), at
        // gpt-4o's 2.5 µ$ per input token.
        let tokens = u128::from(counter.count(system) as u64 + FRAMING_PER_MESSAGE);
        assert_eq!(
            with_system,
            plain.saturating_add(Usd::from_picos(2 * 2 * tokens * 2_500_000))
        );
    }

    /// A `summary_prompt` that quotes the output twice sends it twice: the
    /// summary row counts each copy. Before, it counted one.
    #[test]
    fn summary_rows_count_every_copy_of_the_output() {
        let mut p = plan();
        p.config.dependency.summary_prompt = Some("Sum up {{OUTPUT}} and again {{OUTPUT}}".into());
        let (o, counter) = with_llm_summaries(&mut p);
        let template = ctx_deps::summarize::summary_prompt(&p, &p.sub_tasks[0], "", None);
        // The summary on a's model, gpt-4o: the template, a's 100 output
        // tokens twice, framing.
        let prompt = counter.count(&template) as u64 + 16 + 200;
        let summary_picos = u128::from(prompt) * 2_500_000 + 40 * 10_000_000;
        let expected = usd("0.00354").saturating_add(Usd::from_picos(summary_picos));
        assert_eq!(o.model.bound(&p.sub_tasks[0]), Some(expected));
    }

    /// The dry run costs nothing: a budget holds whatever max_tokens the
    /// tasks have, so it is never refused for want of them (the hint would
    /// name `--max-tokens`, which the dry-run engine refuses).
    #[test]
    fn a_free_engine_takes_any_budget_without_max_tokens() {
        let e = engine(EngineKind::DryRun);
        let o = cost_options(&plan(), &e, PriceBook::with_defaults(), Some(usd("0.5")))
            .expect("the dry run is free");
        let p = plan();
        assert_eq!(o.model.bound(&p.sub_tasks[1]), Some(Usd::ZERO));
    }

    #[test]
    fn refuses_what_it_cannot_bound() {
        let e = engine(EngineKind::Openai);
        let err = cost_options(&plan(), &e, PriceBook::with_defaults(), Some(usd("1")))
            .err()
            .unwrap();
        assert_eq!(err, BudgetError::NoMaxTokens(vec!["b".into()]));
        assert_eq!(
            err.to_string(),
            "1 task without max_tokens (b): their cost has no bound"
        );
        // The command engine has no --model: b names no model.
        let mut c = engine(EngineKind::Command);
        c.max_tokens = Some(5);
        let err = cost_options(&plan(), &c, PriceBook::with_defaults(), Some(usd("1")))
            .err()
            .unwrap();
        assert_eq!(err, BudgetError::NoModel(vec!["b".into()]));
        assert!(
            err.to_string().starts_with("1 task names no model (b)"),
            "{err}"
        );
        // Without a budget nothing is refused: b's cost is just unknown.
        let o = cost_options(&plan(), &c, PriceBook::with_defaults(), None).unwrap();
        let usage = Usage {
            prompt_tokens: 1_000_000,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
            completion_tokens: 0,
            tier: None,
        };
        assert_eq!(o.model.call_cost(&plan().sub_tasks[1], &usage), None);
        assert_eq!(
            o.model.call_cost(&plan().sub_tasks[0], &usage),
            Some(usd("2.5"))
        );
    }

    #[test]
    fn the_dry_run_spends_nothing_and_commands_are_cut_under_a_budget() {
        let mut d = engine(EngineKind::DryRun);
        d.max_tokens = Some(5);
        let o = cost_options(&plan(), &d, PriceBook::new(), Some(usd("1"))).unwrap();
        assert_eq!(o.model.bound(&plan().sub_tasks[0]), Some(Usd::ZERO));
        let mut c = engine(EngineKind::Command);
        c.max_tokens = Some(5);
        let p: Plan = serde_json::from_str(
            r#"{"schema_version": 1, "sub_tasks": [{"id": "a", "description": "A",
              "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "model": "gpt-4o"}}}]}"#,
        )
        .unwrap();
        let o = cost_options(&p, &c, PriceBook::with_defaults(), Some(usd("1"))).unwrap();
        assert!(o.cut_output_at_max_tokens);
    }
}
