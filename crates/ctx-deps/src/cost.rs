//! Money in the executor: each task's cost, and the `--max-cost` budget.
//!
//! ## Why a trait, and why ctx-cost anyway
//!
//! What a task may cost depends on things only the edge knows: which model
//! a task resolves to (its `params.model`, else an engine flag), the price
//! sources (`--prices`, `config.prices`, `--price`), the `max_tokens` an
//! engine default supplies, how many attempts the engine makes, and the
//! chat framing a server adds. The executor knows none of those, and
//! should not: so pricing is behind [`CostModel`], which the CLI
//! implements with `ctx plan cost`'s estimate code.
//!
//! The *arithmetic* of the budget, though, is ctx-cost's
//! [`BudgetLedger`]: exact integer amounts ([`Usd`]) and a reserve/settle
//! protocol whose invariant (`spent + reserved <= budget`) is tested there.
//! ctx-deps depends on ctx-cost directly rather than re-implementing it
//! behind a closure: ctx-cost is a leaf crate of serde, serde_json,
//! thiserror and schemars, all already in ctx-deps' graph (ctx-model embeds
//! ctx-cost's price type), so the edge costs nothing to build.
//!
//! ## What the executor does with it
//!
//! * **Cost of a task** ([`task_cost`]): a cached output made no call and
//!   costs zero; a task that failed before any engine call costs zero; the
//!   successful call is priced from the server's usage, else from ctx's
//!   exact prompt count and a count of the output with the task's
//!   tokenizer; every call that failed (no usage comes back) is charged as
//!   the exact prompt plus `max_tokens`, the most it could have been
//!   billed. Unknown price, or a failed call without `max_tokens`: no cost
//!   (`None`). A task's `llm` summary calls are added to its cost when
//!   they are made (`summarize::after_completion`), by the same rules with
//!   `summary_max_tokens` as the bound and the summary model's price; a
//!   checked task's `judge` calls likewise, each recorded on its check
//!   attempt ([`JudgeCall`]) and priced at its `judge_model` with the
//!   judge's `max_tokens` as the bound of a call that got no answer.
//! * **Budget** ([`CostOptions::max_cost`]): see the executor's module
//!   documentation, "Budget".
//! * **Output cut** ([`CostOptions::cut_output_at_max_tokens`]): an engine
//!   that cannot stop at `max_tokens` itself (a shell command) has its
//!   output cut to the longest prefix of at most `max_tokens` tokens,
//!   counted with the task's tokenizer, and its finish reason set to
//!   `length`, so the completion the budget priced is the completion that
//!   was kept.

use std::fmt;
use std::sync::Arc;

use ctx_cost::{Saving, Usage, Usd};
use ctx_model::{JudgeCall, SubTask, TaskExecutionResult, TaskStatus};
use ctx_tokens::TokenCounter;

pub use ctx_cost::BudgetLedger;

/// Prices a plan's tasks for the executor. Implemented at the edge (the
/// CLI), which knows models, price sources and engine defaults.
pub trait CostModel: Send + Sync {
    /// The most `task` can cost over all its engine calls: the high end of
    /// `ctx plan cost` (its prompt cap and `max_tokens` at the dearest
    /// rates, times the attempts the engine may make). `None` when it
    /// cannot be bounded: no price for its model, or no `max_tokens`.
    fn bound(&self, task: &SubTask) -> Option<Usd>;

    /// The `max_tokens` the task's calls are limited to (its params, else
    /// the engine's default), if any.
    fn max_tokens(&self, task: &SubTask) -> Option<u64>;

    /// The exact cost of one call of `task` with `usage`; `None` when its
    /// model has no known price.
    fn call_cost(&self, task: &SubTask, usage: &Usage) -> Option<Usd>;

    /// The exact cost of one call made for `task` on another model with
    /// `usage`: a `summarize_strategy: llm` summary of its output on
    /// `config.dependency.summary_model`, or a `judge` check of it on the
    /// check's `judge_model` (`None`: the model `task` resolves to). The
    /// default prices it as one of `task`'s own calls, which is right
    /// whenever neither names a model; an implementation that knows prices
    /// by model name should look `model` up.
    fn call_cost_on(&self, task: &SubTask, model: Option<&str>, usage: &Usage) -> Option<Usd> {
        let _ = model;
        self.call_cost(task, usage)
    }

    /// The prompt tokens a request made for `task` carries beyond the
    /// prompt ctx assembled and counted: the system message the engine
    /// sends with it and the framing of the server's chat template.
    ///
    /// Why: wherever a server reports no usage, ctx prices the call from
    /// its own counts, and a budgeted run settles the task at that price.
    /// The reservation bounded the prompt *with* the system message and
    /// the framing; a settlement without them came in below what the
    /// server billed, and the next task was let spend the difference past
    /// `--max-cost`. So every call priced from ctx's count ([`task_cost`],
    /// judge and summary calls), and every call that got no answer, adds
    /// these tokens to its prompt.
    ///
    /// `own_call`: the task's own request, whose `params.system` wins
    /// over the engine's default; else a call ctx makes for the task (a
    /// judge, a summary), sent with the engine's default system prompt.
    /// `counter` is the task's tokenizer. The default is 0, for an engine
    /// that sends the prompt as it is (a command).
    fn request_overhead(&self, task: &SubTask, own_call: bool, counter: &dyn TokenCounter) -> u64 {
        let _ = (task, own_call, counter);
        0
    }
}

/// How a run prices its tasks and, optionally, holds to a budget.
#[derive(Clone)]
pub struct CostOptions {
    /// The prices.
    pub model: Arc<dyn CostModel>,
    /// `ctx run --max-cost`: the most the run may spend. Every task that
    /// will be executed must have a [`CostModel::bound`]; a task without
    /// one is never started under a budget (it is skipped with reason
    /// `budget`), so callers refuse such plans up front.
    pub max_cost: Option<Usd>,
    /// Spent by earlier sessions of a resumed run, counted against
    /// `max_cost` (docs/cost.md: a resumed run's budget covers the whole
    /// run).
    pub already_spent: Usd,
    /// Cut each output at the task's `max_tokens` (see the module
    /// documentation): for engines that cannot enforce it themselves.
    pub cut_output_at_max_tokens: bool,
    /// A budget shared with other executors running at the same time
    /// (`ctx eval --max-cost`: every variant and repeat draws on one
    /// budget). When set, the run reserves and settles in it instead of
    /// a ledger of its own made from `max_cost` and `already_spent`,
    /// which are then not used.
    pub shared_budget: Option<SharedBudget>,
}

/// One [`BudgetLedger`] shared by several executors that run at once, and
/// the signal that lets a run waiting for budget see another run settle.
///
/// Why more than an `Arc<BudgetLedger>`: a run's ready task whose
/// reservation must wait is retried after a settlement. With a ledger of
/// its own that settlement is always one of the run's own tasks, so the
/// run is never idle while it waits; with a shared one the reservations in
/// the way may all be another run's, and the waiting run would end at
/// once, skipping what it could still have afforded. So every settlement
/// bumps a counter the other runs watch. Each executor also takes a scope
/// of its own, so two runs of one plan never collide on a task id in the
/// ledger.
#[derive(Clone)]
pub struct SharedBudget {
    inner: Arc<SharedBooks>,
}

struct SharedBooks {
    ledger: BudgetLedger,
    settled: tokio::sync::watch::Sender<u64>,
    scopes: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for SharedBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBudget")
            .field("books", &self.inner.ledger.snapshot())
            .finish_non_exhaustive()
    }
}

impl SharedBudget {
    /// A budget of `budget` with nothing spent.
    pub fn new(budget: Usd) -> SharedBudget {
        SharedBudget::resumed(budget, Usd::ZERO)
    }

    /// A budget that starts with `already_spent` counted against it.
    pub fn resumed(budget: Usd, already_spent: Usd) -> SharedBudget {
        SharedBudget {
            inner: Arc::new(SharedBooks {
                ledger: BudgetLedger::resumed(budget, already_spent),
                settled: tokio::sync::watch::Sender::new(0),
                scopes: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &BudgetLedger {
        &self.inner.ledger
    }

    /// A scope no other user of this budget has: the prefix of a run's
    /// ledger keys.
    pub(crate) fn new_scope(&self) -> u64 {
        self.inner
            .scopes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Tells every watcher that a reservation was settled.
    pub(crate) fn announce_settlement(&self) {
        self.inner.settled.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A watch on settlements, for a run that may wait on other runs.
    pub(crate) fn settlements(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.settled.subscribe()
    }
}

impl fmt::Debug for CostOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CostOptions")
            .field("max_cost", &self.max_cost)
            .field("already_spent", &self.already_spent)
            .field("cut_output_at_max_tokens", &self.cut_output_at_max_tokens)
            .field("shared_budget", &self.shared_budget)
            .finish_non_exhaustive()
    }
}

/// What a run spent, in its [`RunReport`](crate::RunReport) when the
/// executor was given [`CostOptions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostSummary {
    /// The costs of the tasks executed in this session (known ones).
    pub spent: Usd,
    /// Spent by earlier sessions ([`CostOptions::already_spent`]).
    pub earlier: Usd,
    /// The budget, when one was set.
    pub budget: Option<Usd>,
    /// The sum of the high ends of the tasks skipped by the budget (their
    /// dependents included): what the rest of the run may need.
    pub needed: Usd,
    /// Tasks executed whose cost is unknown (no price, or interrupted).
    pub unknown: usize,
}

impl CostSummary {
    /// Counts a task executed in this session: its `cost_usd` into
    /// [`spent`](Self::spent), or one more [`unknown`](Self::unknown).
    pub fn add_executed(&mut self, result: &TaskExecutionResult) {
        match result.metadata.cost_usd {
            Some(cost) => self.spent = self.spent.saturating_add(cost),
            None => self.unknown += 1,
        }
    }

    /// `earlier + spent`: what the run has cost so far.
    pub fn total(&self) -> Usd {
        self.earlier.saturating_add(self.spent)
    }
}

/// The error of a task skipped because its high end does not fit what is
/// left of the budget. Starts with `budget`, which is how
/// [`is_budget_skip`] and the reports recognise it.
pub fn budget_skip_reason(needed: Usd, left: Usd, budget: Usd) -> String {
    format!(
        "budget: needs up to {} (its high end), {} more than the {} left of the {} budget",
        dollars(needed),
        dollars(needed.saturating_sub(left)),
        dollars(left),
        dollars(budget)
    )
}

/// The error of a dependent of a task skipped by the budget.
pub(crate) fn budget_dependent_reason(skipped: &str, direct: bool) -> String {
    ctx_store::over_budget_reason(skipped, direct)
}

/// Whether `result` was skipped by the budget (itself or upstream).
pub fn is_budget_skip(result: &TaskExecutionResult) -> bool {
    result.status == TaskStatus::Skipped
        && result
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("budget"))
}

/// `$0.001234`: how every output prints a cost (ctx-model's
/// [`ctx_model::money::dollars`], here where the executor's users reach it).
pub use ctx_model::money::dollars;

/// What one finished execution of `task` cost (module documentation).
/// `counter` is the task's tokenizer, for outputs the engine reported no
/// usage for.
pub fn task_cost(
    model: &dyn CostModel,
    task: &SubTask,
    result: &TaskExecutionResult,
    counter: &dyn TokenCounter,
) -> Option<Usd> {
    let m = &result.metadata;
    if m.cached {
        return Some(Usd::ZERO);
    }
    let calls = m.attempts.len();
    let prompt = m.prompt_tokens.unwrap_or(0) as u64;
    let called = match result.status {
        TaskStatus::Completed => true,
        // A failure before the engine (assembly, a lost dependency) has
        // no attempts and no prompt: nothing was sent.
        TaskStatus::Failed => calls > 0 || result.prompt.is_some(),
        _ => false,
    };
    if !called {
        return Some(Usd::ZERO);
    }
    if !m.check_attempts.is_empty() {
        return checked_task_cost(model, task, result, counter);
    }
    let overhead = model.request_overhead(task, true, counter);
    let prompt = prompt.saturating_add(overhead);
    let (failed_calls, last) = if result.status == TaskStatus::Completed {
        let usage = match &m.tokens_used {
            Some(u) => billed(u, overhead),
            None => Usage {
                prompt_tokens: prompt,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
                completion_tokens: counter.count(&result.output) as u64,
                tier: None,
            },
        };
        (calls.saturating_sub(1), model.call_cost(task, &usage)?)
    } else {
        (calls.max(1), Usd::ZERO)
    };
    with_failed_calls(model, task, last, prompt, failed_calls)
}

/// What the provider's prompt cache saved on `task`'s calls in this
/// execution ([`ctx_cost::cache_saving`] of each answered call whose usage
/// reports a cache read or write, summed): the answering call, or every
/// answered check attempt and its judge calls. `None` when no call
/// reported a cache count (the server said nothing about its cache, which
/// is not a saving of 0), when the output came from `--cache` (no call),
/// or when a reporting call has no known price. `llm` summary calls are
/// not counted: their usage is recorded on the producer's summary record.
pub fn task_cache_saving(
    model: &dyn CostModel,
    task: &SubTask,
    result: &TaskExecutionResult,
) -> Option<Saving> {
    let m = &result.metadata;
    if m.cached {
        return None;
    }
    // (the model a call was made on, `None` for the task's own; its usage)
    let mut calls: Vec<(Option<&str>, ctx_model::TokenUsage)> = Vec::new();
    if m.check_attempts.is_empty() {
        if result.status == TaskStatus::Completed {
            calls.extend(m.tokens_used.map(|u| (None, u)));
        }
    } else {
        for a in m.check_attempts.iter().filter(|a| a.error.is_none()) {
            calls.extend(a.tokens_used.map(|u| (None, u)));
            let judges = a.judge_calls.iter().filter(|j| !j.cached);
            calls.extend(judges.filter_map(|j| Some((j.model.as_deref(), j.tokens_used?))));
        }
    }
    let mut saving: Option<Saving> = None;
    for (on_model, usage) in calls {
        if usage.cached_tokens.is_none() && usage.cache_write_tokens.is_none() {
            continue;
        }
        let price = |u: &Usage| model.call_cost_on(task, on_model, u);
        let one = ctx_cost::cache_saving(price, &reported(&usage))?;
        saving = Some(saving.unwrap_or(Saving::ZERO).saturating_add(one));
    }
    saving
}

/// Usage as the engine reported it, in the cost model's terms.
pub(crate) fn reported(u: &ctx_model::TokenUsage) -> Usage {
    Usage {
        prompt_tokens: u.prompt_tokens,
        cached_prompt_tokens: u.cached_tokens.unwrap_or(0),
        cache_write_prompt_tokens: u.cache_write_tokens.unwrap_or(0),
        completion_tokens: u.completion_tokens,
        tier: u.service_tier,
    }
}

/// The usage an answered call is priced at: the server's report, except
/// that a usage flagged `prompt_counted` (the engine's worst-case reading
/// of a report that gave no prompt count, or of no report for a request
/// that asked for several completions) carries ctx's count of the
/// assembled prompt as its prompt part, so `overhead`
/// ([`CostModel::request_overhead`]) is added to it, as to ctx's own
/// counts. A prompt part the server's counts gave (its `prompt_tokens`,
/// or its `total_tokens` less the completion) has the overhead in it
/// already: adding it again settled a call above the reservation it was
/// let run under (issue 35, item 10).
pub(crate) fn billed(u: &ctx_model::TokenUsage, overhead: u64) -> Usage {
    let mut usage = reported(u);
    if u.prompt_counted {
        usage.prompt_tokens = usage.prompt_tokens.saturating_add(overhead);
    }
    usage
}

/// The rule for every engine request that got no answer (a task's call,
/// a judge's, a summary's): `calls` of them, each charged at `price` as
/// `prompt_tokens` plus `max_tokens`, the most it could have been billed:
/// the provider may have billed it, and reported no usage. `None` when no
/// `max_tokens` bounds them, or no price is known.
pub(crate) fn unanswered_calls(
    price: &dyn Fn(&Usage) -> Option<Usd>,
    prompt_tokens: u64,
    max_tokens: Option<u64>,
    calls: u64,
) -> Option<Usd> {
    if calls == 0 {
        return Some(Usd::ZERO);
    }
    let worst = Usage {
        prompt_tokens,
        cached_prompt_tokens: 0,
        cache_write_prompt_tokens: 0,
        completion_tokens: max_tokens?,
        tier: None,
    };
    Some(price(&worst)?.saturating_mul(calls))
}

/// What one engine call made of `requests` requests cost: its answer at
/// `answered` (when it got one) and every other request by
/// [`unanswered_calls`]; without an answer, every request (at least one:
/// a call that timed out in ctx recorded none, but was sent).
pub(crate) fn call_with_retries(
    price: &dyn Fn(&Usage) -> Option<Usd>,
    prompt_tokens: u64,
    max_tokens: Option<u64>,
    answered: Option<&Usage>,
    requests: usize,
) -> Option<Usd> {
    let (spent, unanswered) = match answered {
        Some(usage) => (price(usage)?, requests.saturating_sub(1)),
        None => (Usd::ZERO, requests.max(1)),
    };
    let rest = unanswered_calls(price, prompt_tokens, max_tokens, unanswered as u64)?;
    Some(spent.saturating_add(rest))
}

/// `spent` plus `failed_calls` of `task`'s own calls that got no answer
/// ([`unanswered_calls`] at the task's price and `max_tokens`).
fn with_failed_calls(
    model: &dyn CostModel,
    task: &SubTask,
    spent: Usd,
    prompt_tokens: u64,
    failed_calls: usize,
) -> Option<Usd> {
    let price = |u: &Usage| model.call_cost(task, u);
    let failed = unanswered_calls(
        &price,
        prompt_tokens,
        model.max_tokens(task),
        failed_calls as u64,
    )?;
    Some(spent.saturating_add(failed))
}

/// What one judge call of `task` cost, at the judge's own model: a cache
/// hit nothing; its answer at its usage; every request that got no answer
/// as the judge prompt plus the judge's `max_tokens`.
fn judge_call_cost(
    model: &dyn CostModel,
    task: &SubTask,
    call: &JudgeCall,
    counter: &dyn TokenCounter,
) -> Option<Usd> {
    if call.cached {
        return Some(Usd::ZERO);
    }
    let price = |u: &Usage| model.call_cost_on(task, call.model.as_deref(), u);
    let overhead = model.request_overhead(task, false, counter);
    call_with_retries(
        &price,
        (call.prompt_tokens as u64).saturating_add(overhead),
        Some(u64::from(call.max_tokens)),
        call.tokens_used.map(|u| billed(&u, overhead)).as_ref(),
        call.requests as usize,
    )
}

/// [`task_cost`] of a task with checks: every check attempt that got an
/// answer is priced from its own usage (else ctx's counts), plus each of
/// its judge calls ([`judge_call_cost`], at the judge's model); every
/// engine call of the task that got no answer is charged as the largest
/// prompt sent plus `max_tokens`. The summed `tokens_used` is not
/// used with the failed-call rule, which would charge an answered call
/// twice when an earlier check attempt's answer was rejected.
fn checked_task_cost(
    model: &dyn CostModel,
    task: &SubTask,
    result: &TaskExecutionResult,
    counter: &dyn TokenCounter,
) -> Option<Usd> {
    let m = &result.metadata;
    let overhead = model.request_overhead(task, true, counter);
    let mut total = Usd::ZERO;
    let mut answered = 0usize;
    let mut largest_prompt = m.prompt_tokens.unwrap_or(0) as u64;
    for a in &m.check_attempts {
        largest_prompt = largest_prompt.max(a.prompt_tokens as u64);
        if a.error.is_some() {
            continue;
        }
        answered += 1;
        let usage = match &a.tokens_used {
            Some(u) => billed(u, overhead),
            None => Usage {
                prompt_tokens: (a.prompt_tokens as u64).saturating_add(overhead),
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
                completion_tokens: counter.count(&a.output) as u64,
                tier: None,
            },
        };
        total = total.saturating_add(model.call_cost(task, &usage)?);
        for judge in &a.judge_calls {
            total = total.saturating_add(judge_call_cost(model, task, judge, counter)?);
        }
    }
    let failed_calls = m.attempts.len().saturating_sub(answered);
    let largest_prompt = largest_prompt.saturating_add(overhead);
    with_failed_calls(model, task, total, largest_prompt, failed_calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_cost::Rate;
    use ctx_model::{Attempt, TokenUsage};
    use ctx_tokens::{Tokenizer, TokenizerExt};

    /// $1 per million prompt tokens, $2 per million output tokens,
    /// max_tokens 100 unless the task is named `open`, unpriced when
    /// named `free-for-all`.
    struct Fixed;

    impl CostModel for Fixed {
        fn bound(&self, _: &SubTask) -> Option<Usd> {
            None
        }
        fn max_tokens(&self, task: &SubTask) -> Option<u64> {
            (task.id != "open").then_some(100)
        }
        fn call_cost(&self, task: &SubTask, usage: &Usage) -> Option<Usd> {
            (task.id != "free-for-all").then(|| {
                ctx_cost::Price::flat(Rate::parse("1").unwrap(), Rate::parse("2").unwrap(), None)
                    .cost(usage)
            })
        }
    }

    fn task(id: &str) -> SubTask {
        serde_json::from_value(serde_json::json!({
            "id": id, "description": "d",
            "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}
        }))
        .unwrap()
    }

    fn attempt(n: u32, outcome: &str) -> Attempt {
        Attempt {
            number: n,
            outcome: outcome.into(),
            ..Attempt::default()
        }
    }

    fn usd(s: &str) -> Usd {
        Usd::parse(s).unwrap()
    }

    /// [`Fixed`] for an engine whose requests carry 7 tokens ctx's count
    /// of the prompt leaves out, 3 of them only on the task's own calls
    /// (a system prompt of its own).
    struct Framed;

    impl CostModel for Framed {
        fn bound(&self, task: &SubTask) -> Option<Usd> {
            Fixed.bound(task)
        }
        fn max_tokens(&self, task: &SubTask) -> Option<u64> {
            Fixed.max_tokens(task)
        }
        fn call_cost(&self, task: &SubTask, usage: &Usage) -> Option<Usd> {
            Fixed.call_cost(task, usage)
        }
        fn request_overhead(&self, _: &SubTask, own_call: bool, _: &dyn TokenCounter) -> u64 {
            if own_call { 7 } else { 4 }
        }
    }

    /// Where the server reported no usage, ctx's count of a request is
    /// the prompt as sent: the system message and framing the engine adds
    /// are priced, on the answered call and on every call that got no
    /// answer; a usage the server reported is taken as it is.
    #[test]
    fn own_counts_add_the_request_overhead() {
        let counter = Tokenizer::Cl100kBase.counter();
        let mut r = TaskExecutionResult::new("t", TaskStatus::Completed);
        r.metadata.prompt_tokens = Some(1000);
        r.output = "hello world".into(); // 2 tokens in cl100k
        r.metadata.attempts = vec![attempt(1, "ok")];
        // (1000 + 7) × $1 + 2 × $2 per million.
        assert_eq!(
            task_cost(&Framed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.001011"))
        );
        // A failed call before it: (1000 + 7) + 100 × 2 more.
        r.metadata.attempts = vec![attempt(1, "http_500"), attempt(2, "ok")];
        assert_eq!(
            task_cost(&Framed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.002218"))
        );
        r.metadata.tokens_used = Some(TokenUsage {
            prompt_tokens: 1010,
            completion_tokens: 50,
            total_tokens: 1060,
            cached_tokens: None,
            cache_write_tokens: None,
            partial: false,
            prompt_counted: false,
            service_tier: None,
        });
        // The server's usage (1010 + 100) plus the failed call (1207).
        assert_eq!(
            task_cost(&Framed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.002317"))
        );
        // A partial usage whose prompt part the server gave (its total
        // less the completion) has the overhead in it already.
        r.metadata.tokens_used.as_mut().unwrap().partial = true;
        assert_eq!(
            task_cost(&Framed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.002317"))
        );
        // One whose prompt part is ctx's count adds it.
        r.metadata.tokens_used.as_mut().unwrap().prompt_counted = true;
        assert_eq!(
            task_cost(&Framed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.002324"))
        );
    }

    #[test]
    fn prices_usage_counts_and_failed_calls() {
        let counter = Tokenizer::Cl100kBase.counter();
        let mut r = TaskExecutionResult::new("t", TaskStatus::Completed);
        r.metadata.prompt_tokens = Some(1000);
        r.output = "hello world".into(); // 2 tokens in cl100k
        r.metadata.attempts = vec![attempt(1, "ok")];
        // No usage: the prompt count and the output's count.
        assert_eq!(
            task_cost(&Fixed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.001004"))
        );
        // Usage wins, cached tokens at the (here equal) cached rate.
        r.metadata.tokens_used = Some(TokenUsage {
            prompt_tokens: 1010,
            completion_tokens: 50,
            total_tokens: 1060,
            cached_tokens: Some(10),
            cache_write_tokens: None,
            partial: false,
            prompt_counted: false,
            service_tier: None,
        });
        assert_eq!(
            task_cost(&Fixed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.00111"))
        );
        // A retried call before the successful one: prompt + max_tokens.
        r.metadata.attempts = vec![attempt(1, "http_500"), attempt(2, "ok")];
        assert_eq!(
            task_cost(&Fixed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.00231"))
        );
        // ... unknown when nothing bounds the failed call.
        assert_eq!(task_cost(&Fixed, &task("open"), &r, counter.as_ref()), None);
        assert_eq!(
            task_cost(&Fixed, &task("free-for-all"), &r, counter.as_ref()),
            None
        );
        r.metadata.cached = true;
        assert_eq!(
            task_cost(&Fixed, &task("free-for-all"), &r, counter.as_ref()),
            Some(Usd::ZERO)
        );
    }

    /// $1 per million prompt tokens, $0.25 per million cache reads, $1.25
    /// per million cache writes, $2 per million output tokens.
    struct Cached;

    impl CostModel for Cached {
        fn bound(&self, _: &SubTask) -> Option<Usd> {
            None
        }
        fn max_tokens(&self, _: &SubTask) -> Option<u64> {
            Some(100)
        }
        fn call_cost(&self, _: &SubTask, usage: &Usage) -> Option<Usd> {
            let r = |s| Rate::parse(s).unwrap();
            let price = ctx_cost::Price::flat(r("1"), r("2"), Some(r("0.25")))
                .with_cache_write(Some(r("1.25")));
            Some(price.cost(usage))
        }
    }

    #[test]
    fn the_cache_saving_sums_the_calls_that_reported_a_cache_count() {
        let usage = |cached, written| TokenUsage {
            prompt_tokens: 2000,
            completion_tokens: 10,
            total_tokens: 2010,
            cached_tokens: cached,
            cache_write_tokens: written,
            partial: false,
            prompt_counted: false,
            service_tier: None,
        };
        let mut r = TaskExecutionResult::new("t", TaskStatus::Completed);
        r.metadata.attempts = vec![attempt(1, "ok")];
        // No usage, or a usage without cache counts: not reported.
        assert_eq!(task_cache_saving(&Cached, &task("t"), &r), None);
        r.metadata.tokens_used = Some(usage(None, None));
        assert_eq!(task_cache_saving(&Cached, &task("t"), &r), None);
        // A reported 0 is a saving of 0, not "not reported".
        r.metadata.tokens_used = Some(usage(Some(0), None));
        assert_eq!(
            task_cache_saving(&Cached, &task("t"), &r),
            Some(Saving::ZERO)
        );
        // 1,600 reads × $0.75 per million saved, 400 writes × $0.25 more.
        r.metadata.tokens_used = Some(usage(Some(1600), Some(400)));
        let saving = task_cache_saving(&Cached, &task("t"), &r).unwrap();
        assert_eq!(saving.to_string(), "0.0011");
        // Writes alone cost more than the input price: a negative saving.
        r.metadata.tokens_used = Some(usage(None, Some(2000)));
        let saving = task_cache_saving(&Cached, &task("t"), &r).unwrap();
        assert_eq!(saving.to_string(), "-0.0005");
        // A checked task sums its answered attempts.
        r.metadata.check_attempts = vec![
            ctx_model::CheckAttempt {
                number: 1,
                tokens_used: Some(usage(Some(1000), None)),
                ..Default::default()
            },
            ctx_model::CheckAttempt {
                number: 2,
                tokens_used: Some(usage(Some(1000), None)),
                ..Default::default()
            },
        ];
        let saving = task_cache_saving(&Cached, &task("t"), &r).unwrap();
        assert_eq!(saving.to_string(), "0.0015");
        // Its judge calls count too, but a judge answer reused by --cache
        // made no call.
        let judge = |cached, read| ctx_model::JudgeCall {
            tokens_used: Some(usage(Some(read), None)),
            cached,
            ..Default::default()
        };
        r.metadata.check_attempts[1].judge_calls = vec![judge(false, 1000), judge(true, 2000)];
        let saving = task_cache_saving(&Cached, &task("t"), &r).unwrap();
        assert_eq!(saving.to_string(), "0.00225");
        // An output reused by --cache made no call.
        r.metadata.cached = true;
        assert_eq!(task_cache_saving(&Cached, &task("t"), &r), None);
    }

    #[test]
    fn failures_before_and_after_the_call() {
        let counter = Tokenizer::Cl100kBase.counter();
        let mut r = TaskExecutionResult::new("t", TaskStatus::Failed);
        assert_eq!(
            task_cost(&Fixed, &task("t"), &r, counter.as_ref()),
            Some(Usd::ZERO)
        );
        r.metadata.prompt_tokens = Some(1000);
        r.metadata.attempts = vec![attempt(1, "timeout"), attempt(2, "exit_1")];
        // Two calls of 1000 prompt + 100 output tokens.
        assert_eq!(
            task_cost(&Fixed, &task("t"), &r, counter.as_ref()),
            Some(usd("0.0024"))
        );
        let skipped = TaskExecutionResult::new("t", TaskStatus::Skipped);
        assert_eq!(
            task_cost(&Fixed, &task("t"), &skipped, counter.as_ref()),
            Some(Usd::ZERO)
        );
    }

    #[test]
    fn skip_reasons_start_with_budget() {
        let r = budget_skip_reason(usd("0.5"), usd("0.2"), usd("1"));
        assert_eq!(
            r,
            "budget: needs up to $0.500000 (its high end), $0.300000 more than the $0.200000 left of the $1.000000 budget"
        );
        let mut t = TaskExecutionResult::new("x", TaskStatus::Skipped);
        t.error = Some(budget_dependent_reason("a", true));
        assert!(is_budget_skip(&t));
        assert_eq!(dollars(Usd::from_picos(5)), "$0.000000000005");
    }
}
