//! The most prompt tokens a `judge` or `llm` summary call of a task may
//! send, and the guard that holds the executor to it under a budget.
//!
//! ## Why a guard, not only a bound
//!
//! Those calls quote the task's output, fenced and neutralized
//! ([`ctx_prompt::fence::neutralize`]). Neutralizing replaces each fence
//! tag or control token with a fixed marker, which can be longer than what
//! it replaces: an output of repeated short control tokens grows about 9×.
//! Nothing about the output is known when the task's reservation is made,
//! so no factor proven from the output's token count alone exists (token
//! counts of a BPE tokenizer are not additive over replacements). The
//! reservation therefore bounds the prompt by its template (every
//! placeholder filled, the output empty) plus the output's completion high
//! once per copy of the output ([`judge_prompt_bound`],
//! [`summary_prompt_bound`]), and under a budget the executor counts the
//! prompt it is about to send and does not send one over that bound
//! (`over_bound`): the judge check fails, the summary falls back to the
//! cut output, with a reason starting `budget:`. What is sent is then
//! always within what was reserved.

use ctx_model::{Plan, SubTask};
use ctx_tokens::TokenCounter;

use crate::cost::CostOptions;

/// The most prompt tokens (the user message; system prompt and framing
/// are the caller's) a judge call with `rubric` sends for an output of at
/// most `output_high` tokens: the judge prompt with an empty output,
/// counted exactly, plus `output_high`.
pub fn judge_prompt_bound(rubric: &str, output_high: u64, counter: &dyn TokenCounter) -> u64 {
    let template = ctx_checks::judge::judge_prompt(rubric, "");
    (counter.count(&template) as u64).saturating_add(output_high)
}

/// The most prompt tokens (the user message) one summary call of
/// `producer`'s output sends, with the dependent's prompt as `focus`, for
/// an output of at most `output_high` tokens: the summary prompt with an
/// empty output, counted exactly, plus `output_high` for every copy of the
/// output it quotes (`{{OUTPUT}}` may appear several times in
/// `summary_prompt`).
pub fn summary_prompt_bound(
    plan: &Plan,
    producer: &SubTask,
    focus: Option<&str>,
    output_high: u64,
    counter: &dyn TokenCounter,
) -> u64 {
    let template = crate::summarize::summary_prompt(plan, producer, "", focus);
    let copies = crate::summarize::summary_output_copies(plan);
    (counter.count(&template) as u64).saturating_add(output_high.saturating_mul(copies))
}

/// The completion high of `task`'s output when the run has a budget (the
/// bound its judge and summary reservations were made with); `None`
/// without a budget, when nothing is held to it.
pub(crate) fn budgeted_output_high(cost: Option<&CostOptions>, task: &SubTask) -> Option<u64> {
    let cost = cost?;
    if cost.max_cost.is_none() && cost.shared_budget.is_none() {
        return None;
    }
    cost.model.max_tokens(task)
}

/// Under a budget, why a prompt of `prompt_tokens` must not be sent: it is
/// over `bound`, the most its reservation allowed.
pub(crate) fn over_bound(what: &str, prompt_tokens: usize, bound: u64) -> Option<String> {
    ((prompt_tokens as u64) > bound).then(|| {
        format!(
            "budget: the {what} prompt is {prompt_tokens} tokens after neutralizing the output, \
             over the {bound} its reservation allows; it was not sent"
        )
    })
}

#[cfg(test)]
mod boundary_tests {
    /// The bound is the most a reservation allows, inclusive: a prompt of
    /// exactly `bound` tokens is sent, one token more is refused (found by
    /// cargo-mutants: `>` as `>=` survived).
    #[test]
    fn a_prompt_at_its_bound_is_sent_one_token_over_is_not() {
        assert_eq!(super::over_bound("judge", 120, 120), None);
        assert_eq!(super::over_bound("judge", 0, 0), None);
        assert_eq!(
            super::over_bound("summary", 121, 120).as_deref(),
            Some(
                "budget: the summary prompt is 121 tokens after neutralizing the output, \
                 over the 120 its reservation allows; it was not sent"
            )
        );
    }
}
