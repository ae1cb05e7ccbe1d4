//! Tests that pin what the cost module promises at its edges, each written
//! for a mutant cargo-mutants found surviving in `cost.rs`
//! (docs/testing.md, "Mutation testing"). Apart from `cost.rs`'s own test
//! module so that work on the cost module and on these pins merge apart.

use std::sync::Arc;

use ctx_cost::{Price, Rate, Usage, Usd};
use ctx_model::{
    Attempt, CheckAttempt, JudgeCall, SubTask, TaskExecutionResult, TaskStatus, TokenUsage,
};
use ctx_tokens::{Tokenizer, TokenizerExt};

use crate::cost::{
    CostModel, CostOptions, CostSummary, SharedBudget, budget_dependent_reason, dollars,
    is_budget_skip, task_cost,
};

/// $1 per million prompt tokens, $2 per million output tokens; calls
/// limited to 100 tokens unless the task is `open`. `call_cost_on` is the
/// trait's default: a call on another model is priced as the task's own.
struct OnePerMillion;

impl CostModel for OnePerMillion {
    fn bound(&self, _: &SubTask) -> Option<Usd> {
        None
    }
    fn max_tokens(&self, task: &SubTask) -> Option<u64> {
        (task.id != "open").then_some(100)
    }
    fn call_cost(&self, _: &SubTask, usage: &Usage) -> Option<Usd> {
        Some(Price::flat(Rate::parse("1").unwrap(), Rate::parse("2").unwrap(), None).cost(usage))
    }
}

fn task(id: &str) -> SubTask {
    serde_json::from_value(serde_json::json!({
        "id": id, "description": "d",
        "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}
    }))
    .unwrap()
}

fn usd(s: &str) -> Usd {
    Usd::parse(s).unwrap()
}

fn usage(prompt: u64, completion: u64) -> TokenUsage {
    TokenUsage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        cached_tokens: None,
        cache_write_tokens: None,
        partial: false,
        prompt_counted: false,
        service_tier: None,
    }
}

fn cost(task_id: &str, r: &TaskExecutionResult) -> Option<Usd> {
    let counter = Tokenizer::Cl100kBase.counter();
    task_cost(&OnePerMillion, &task(task_id), r, counter.as_ref())
}

#[test]
fn a_summary_adds_known_costs_and_counts_unknown_ones() {
    let mut summary = CostSummary {
        spent: Usd::ZERO,
        earlier: usd("0.5"),
        budget: None,
        needed: Usd::ZERO,
        unknown: 0,
    };
    let mut priced = TaskExecutionResult::new("a", TaskStatus::Completed);
    priced.metadata.cost_usd = Some(usd("0.25"));
    let unpriced = TaskExecutionResult::new("b", TaskStatus::Completed);
    summary.add_executed(&priced);
    summary.add_executed(&unpriced);
    summary.add_executed(&priced);
    summary.add_executed(&unpriced);
    summary.add_executed(&unpriced);
    assert_eq!(summary.spent, usd("0.5"));
    assert_eq!(summary.unknown, 3);
    assert_eq!(summary.total(), usd("1"));
}

#[test]
fn debug_shows_the_books_and_the_options() {
    let books = SharedBudget::resumed(usd("2"), usd("0.5"));
    let shown = format!("{books:?}");
    assert!(shown.starts_with("SharedBudget"), "{shown}");
    assert!(shown.contains("books"), "{shown}");
    let options = CostOptions {
        model: Arc::new(OnePerMillion),
        max_cost: Some(usd("3")),
        already_spent: usd("0.25"),
        cut_output_at_max_tokens: true,
        shared_budget: Some(books),
    };
    let shown = format!("{options:?}");
    for field in [
        "CostOptions",
        "max_cost: Some(",
        "already_spent",
        "cut_output_at_max_tokens: true",
        "shared_budget: Some(SharedBudget",
    ] {
        assert!(shown.contains(field), "{field} in {shown}");
    }
}

/// Six decimals from a micro-dollar up, rounded up; an amount under a
/// micro-dollar exactly (six decimals would print a need as $0.000001 or
/// as nothing); zero as six zeros.
#[test]
fn dollars_prints_six_decimals_except_under_a_micro_dollar() {
    assert_eq!(dollars(Usd::ZERO), "$0.000000");
    assert_eq!(dollars(Usd::from_picos(1)), "$0.000000000001");
    assert_eq!(dollars(Usd::from_picos(999_999)), "$0.000000999999");
    assert_eq!(dollars(Usd::from_picos(1_000_000)), "$0.000001");
    assert_eq!(dollars(Usd::from_picos(1_000_001)), "$0.000002");
    assert_eq!(dollars(usd("1")), "$1.000000");
    assert_eq!(dollars(usd("12.5")), "$12.500000");
}

#[test]
fn only_a_skip_for_the_budget_is_a_budget_skip() {
    let mut r = TaskExecutionResult::new("x", TaskStatus::Skipped);
    assert!(!is_budget_skip(&r), "a skip without a reason");
    r.error = Some("dependency `a` failed".into());
    assert!(!is_budget_skip(&r), "a skip for another reason");
    r.error = Some(budget_dependent_reason("a", false));
    assert!(is_budget_skip(&r));
    assert_eq!(
        r.error.as_deref(),
        Some("budget: upstream task `a` was not run (over budget)")
    );
    r.status = TaskStatus::Failed;
    assert!(!is_budget_skip(&r), "a failure is not a skip");
}

/// A failure with a prompt but no recorded attempt (a call that timed out
/// in ctx) was sent: one call at prompt + max_tokens. Attempts without a
/// prompt count (0 prompt tokens + max_tokens each).
#[test]
fn a_failure_is_charged_for_each_call_that_may_have_been_sent() {
    let mut r = TaskExecutionResult::new("t", TaskStatus::Failed);
    r.prompt = Some("p".into());
    r.metadata.prompt_tokens = Some(1000);
    // 1000 prompt + 100 output tokens: $0.001 + $0.0002.
    assert_eq!(cost("t", &r), Some(usd("0.0012")));
    let mut r = TaskExecutionResult::new("t", TaskStatus::Failed);
    r.metadata.attempts = vec![Attempt::default(); 3];
    assert_eq!(cost("t", &r), Some(usd("0.0006")));
    // Only completed and failed tasks are charged: a skipped one is not,
    // whatever its metadata holds.
    let mut r = TaskExecutionResult::new("t", TaskStatus::Skipped);
    r.metadata.attempts = vec![Attempt::default()];
    r.metadata.prompt_tokens = Some(1000);
    assert_eq!(cost("t", &r), Some(Usd::ZERO));
}

/// One answered call needs no `max_tokens` to be priced: only calls that
/// got no answer are charged at it.
#[test]
fn an_answered_call_is_priced_without_max_tokens() {
    let mut r = TaskExecutionResult::new("open", TaskStatus::Completed);
    r.metadata.attempts = vec![Attempt::default()];
    r.metadata.tokens_used = Some(usage(1000, 50));
    assert_eq!(cost("open", &r), Some(usd("0.0011")));
}

/// A checked task: each answered check attempt at its usage plus its
/// judges (at the judge's model, here priced as the task's own calls by
/// the trait's default), and each engine call that got no answer at the
/// largest prompt plus max_tokens.
#[test]
fn a_checked_task_pays_its_answers_its_judges_and_its_unanswered_calls() {
    let judge = JudgeCall {
        model: Some("judge-model".into()),
        prompt_tokens: 300,
        max_tokens: 20,
        tokens_used: Some(usage(300, 10)),
        requests: 1,
        cached: false,
    };
    let answered = |n: u32| CheckAttempt {
        number: n,
        prompt_tokens: 1000,
        tokens_used: Some(usage(1000, 50)),
        judge_calls: vec![judge.clone()],
        ..CheckAttempt::default()
    };
    let mut r = TaskExecutionResult::new("t", TaskStatus::Completed);
    r.metadata.prompt_tokens = Some(1000);
    // Three engine calls: the first got no answer, two were answered.
    r.metadata.attempts = vec![Attempt::default(); 3];
    r.metadata.check_attempts = vec![
        CheckAttempt {
            number: 1,
            prompt_tokens: 1200,
            error: Some("http 500".into()),
            ..CheckAttempt::default()
        },
        answered(2),
        answered(3),
    ];
    // Answers: 2 × (1000 × $1 + 50 × $2)/M = $0.0022; judges: 2 × (300 +
    // 20)/M = $0.00064; the unanswered call: (1200 + 200)/M = $0.0014.
    assert_eq!(cost("t", &r), Some(usd("0.00424")));
    // The judge's default price is the task's: an unpriced task's judge
    // is unpriced too.
    assert_eq!(
        OnePerMillion.call_cost_on(
            &task("t"),
            Some("judge-model"),
            &Usage {
                prompt_tokens: 300,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
                completion_tokens: 10,
                tier: None,
            }
        ),
        Some(usd("0.00032"))
    );
}
