//! What a task's request parameters mean for what its call can be billed:
//! the completion cap the request carries, how many completions it asks
//! for, and which pass-through keys no bound can cover.
//!
//! ## Why here
//!
//! The OpenAI engine sends a task's `params` (with every key of
//! `params.extra` passed through), and `ctx run --max-cost` reserves what
//! that request can cost. Both must read the parameters by one rule, or
//! the reservation prices a request that is not the one sent (a plan with
//! `max_tokens: 100` and `max_completion_tokens: 4000` was reserved at
//! 100 and sent with 4000). The engine crate and the cost crates do not
//! depend on each other; both depend on this one.
//!
//! ## The pass-through keys
//!
//! Every key of `params.extra` is in exactly one class ([`ExtraKey`]):
//!
//! * **Bounded**: `max_completion_tokens` and `max_tokens` (the cap, see
//!   [`Params::completion_cap`]), `n` and `best_of` (completions per
//!   request: usage covers each one, so the completion bound is the cap
//!   times the larger of them).
//! * **Neutral**: sampling and formatting keys that change neither the
//!   prompt billed nor the most completion tokens ([`NEUTRAL_KEYS`]).
//! * **Unbounded**: everything else. `tools` and `functions` add prompt
//!   tokens ctx does not count, `prediction` bills rejected prediction
//!   tokens, `audio` and `modalities` bill other units, `service_tier`
//!   changes the price (but see below), `reasoning` and `thinking` carry budgets of their
//!   own, and a key ctx does not know may do any of these. Under
//!   `--max-cost` such a task is refused, naming the task and the key.
//!
//! One key is judged by its value ([`extra_param`]): `service_tier:
//! default` and `service_tier: flex` are neutral, since a call's bound is
//! taken at the dearest of the standard, flex and batch rates
//! (`ctx_cost::Price::highest_cost`) and a flex request is answered at
//! one of those. `auto` (the project's setting, which may be priority),
//! `priority` (dearer) and any other value stay unbounded.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::Params;

/// The keys that cap a completion's length. OpenAI's reasoning models
/// take `max_completion_tokens` and reject `max_tokens`; other servers
/// take `max_tokens`.
pub const CAP_KEYS: [&str; 2] = ["max_completion_tokens", "max_tokens"];

/// Keys that ask for several completions in one request, each billed.
pub const CHOICE_KEYS: [&str; 2] = ["n", "best_of"];

/// Pass-through keys that change neither the prompt tokens billed nor the
/// most completion tokens a request may generate (the cap still bounds
/// every completion, reasoning included: OpenAI counts reasoning tokens
/// against `max_completion_tokens`).
///
/// `prompt_cache_key` (OpenAI's routing hint for its prompt cache) is one:
/// a cache hit can only lower what the prompt is billed, and a bound
/// prices every prompt token at the dearest prompt rate.
pub const NEUTRAL_KEYS: [&str; 23] = [
    "frequency_penalty",
    "ignore_eos",
    "logit_bias",
    "logprobs",
    "metadata",
    "min_p",
    "min_tokens",
    "parallel_tool_calls",
    "presence_penalty",
    "prompt_cache_key",
    "reasoning_effort",
    "repetition_penalty",
    "response_format",
    "seed",
    "stop",
    "store",
    "temperature",
    "tool_choice",
    "top_k",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
];

/// How a pass-through key of `params.extra` bears on a call's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraKey {
    /// A completion cap or a number of completions: in the bound.
    Bounded,
    /// Changes nothing a bound counts.
    Neutral,
    /// No bound covers it: refused under a budget.
    Unbounded,
}

/// The class of pass-through key `key` (module documentation).
pub fn extra_key(key: &str) -> ExtraKey {
    if CAP_KEYS.contains(&key) || CHOICE_KEYS.contains(&key) {
        ExtraKey::Bounded
    } else if NEUTRAL_KEYS.contains(&key) {
        ExtraKey::Neutral
    } else {
        ExtraKey::Unbounded
    }
}

/// The class of pass-through key `key` sent with `value`: as
/// [`extra_key`], except that `service_tier` is neutral for the tiers a
/// bound covers (`default`, `flex`; module documentation).
pub fn extra_param(key: &str, value: &Value) -> ExtraKey {
    if key == "service_tier" && matches!(value.as_str(), Some("default" | "flex")) {
        return ExtraKey::Neutral;
    }
    extra_key(key)
}

/// The cap on generated tokens a request carries: the body key and the
/// value sent under it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionCap {
    /// `max_completion_tokens` or `max_tokens`.
    pub key: &'static str,
    /// Sent as it is (a plan may pass anything through `extra`).
    pub value: Value,
}

impl CompletionCap {
    /// The cap as a token count; `None` when the value is not a
    /// non-negative number (`null` asks for no cap, which bounds nothing).
    pub fn tokens(&self) -> Option<u64> {
        whole_number(&self.value)
    }
}

/// A non-negative number as a whole count, rounded up (a cap of 10.5 lets
/// a server generate 11); saturates at `u64::MAX`.
fn whole_number(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            // Saturating cast: beyond u64 reads as u64::MAX.
            .map(|f| f.ceil() as u64)
    })
}

/// Why a request's parameters leave its cost without a bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnboundedParam {
    /// A pass-through key no bound covers (module documentation).
    #[error("`{key}` changes what a call can be billed and no bound covers it")]
    Unbounded {
        /// The key.
        key: String,
    },
    /// A cap or number of completions that is not a whole number ctx can
    /// bound by.
    #[error("`{key}` is {value}, not a number of tokens or completions ctx can bound by")]
    NotANumber {
        /// The key.
        key: String,
        /// The value, as JSON.
        value: String,
    },
    /// No cap at all: the completion has no bound.
    #[error("no max_tokens")]
    NoCap,
}

impl UnboundedParam {
    /// The parameter to name in a refusal (`max_tokens` when none is set).
    pub fn key(&self) -> &str {
        match self {
            UnboundedParam::Unbounded { key } | UnboundedParam::NotANumber { key, .. } => key,
            UnboundedParam::NoCap => "max_tokens",
        }
    }
}

impl Params {
    /// Decides the one completion cap a request of these params carries,
    /// with `default_max_tokens` (`--max-tokens`) for params that set
    /// none. The OpenAI engine sends it and paces by it, and `--max-cost`
    /// reserves it, so the three never disagree.
    ///
    /// First match wins:
    /// 1. `max_completion_tokens` in `extra`: a plan that names it targets
    ///    a reasoning model, which rejects `max_tokens`, so it is sent
    ///    alone, whatever `max_tokens` or `--max-tokens` say;
    /// 2. `max_tokens`, else `default_max_tokens`, as `max_tokens`;
    /// 3. `max_tokens` in `extra` (only a caller building [`Params`] by
    ///    hand can put it there; a plan's `max_tokens` is the field).
    pub fn completion_cap(&self, default_max_tokens: Option<u32>) -> Option<CompletionCap> {
        if let Some(value) = self.extra.get("max_completion_tokens") {
            return Some(CompletionCap {
                key: "max_completion_tokens",
                value: value.clone(),
            });
        }
        if let Some(max) = self.max_tokens.or(default_max_tokens) {
            return Some(CompletionCap {
                key: "max_tokens",
                value: json!(max),
            });
        }
        self.extra.get("max_tokens").map(|value| CompletionCap {
            key: "max_tokens",
            value: value.clone(),
        })
    }

    /// Completions one request asks for: the larger of `n` and `best_of`
    /// in `extra` (1 when neither is set).
    pub fn choices(&self) -> Result<u64, UnboundedParam> {
        choices_of(&self.extra)
    }

    /// The most completion tokens one request of these params can be
    /// billed: its cap ([`Params::completion_cap`]) times its completions
    /// ([`Params::choices`]); an error names the parameter that leaves it
    /// without a bound, a pass-through key no bound covers
    /// ([`extra_key`]) included.
    pub fn completion_bound(&self, default_max_tokens: Option<u32>) -> Result<u64, UnboundedParam> {
        if let Some(key) = self
            .extra
            .iter()
            .find(|(k, v)| extra_param(k, v) == ExtraKey::Unbounded)
            .map(|(k, _)| k)
        {
            return Err(UnboundedParam::Unbounded { key: key.clone() });
        }
        let cap = self
            .completion_cap(default_max_tokens)
            .ok_or(UnboundedParam::NoCap)?;
        let tokens = cap.tokens().ok_or_else(|| UnboundedParam::NotANumber {
            key: cap.key.to_string(),
            value: cap.value.to_string(),
        })?;
        Ok(tokens.saturating_mul(self.choices()?))
    }
}

fn choices_of(extra: &BTreeMap<String, Value>) -> Result<u64, UnboundedParam> {
    let mut most = 1;
    for key in CHOICE_KEYS {
        let Some(value) = extra.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let n = whole_number(value).ok_or_else(|| UnboundedParam::NotANumber {
            key: key.to_string(),
            value: value.to_string(),
        })?;
        most = most.max(n);
    }
    Ok(most)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(extra: Value) -> Params {
        Params {
            prompt: "p".into(),
            max_tokens: Some(100),
            extra: serde_json::from_value(extra).unwrap(),
            ..Params::default()
        }
    }

    /// The cap sent is the cap bounded: `max_completion_tokens` next to
    /// `max_tokens` is what the request carries, and each of `n`
    /// completions can use all of it.
    #[test]
    fn the_bound_is_the_cap_sent_times_the_completions() {
        assert_eq!(params(json!({})).completion_bound(None), Ok(100));
        let p = params(json!({"max_completion_tokens": 4000}));
        assert_eq!(p.completion_cap(None).unwrap().key, "max_completion_tokens");
        assert_eq!(p.completion_bound(None), Ok(4000));
        assert_eq!(params(json!({"n": 3})).completion_bound(None), Ok(300));
        assert_eq!(
            params(json!({"n": 2, "best_of": 5, "max_completion_tokens": 10.5}))
                .completion_bound(None),
            Ok(55)
        );
        let mut none = params(json!({}));
        none.max_tokens = None;
        assert_eq!(none.completion_bound(Some(7)), Ok(7));
        assert_eq!(none.completion_bound(None), Err(UnboundedParam::NoCap));
    }

    #[test]
    fn unbounded_keys_and_values_are_named() {
        let e = params(json!({"tools": [], "top_k": 4}))
            .completion_bound(None)
            .unwrap_err();
        assert_eq!(e.key(), "tools");
        let e = params(json!({"n": "three"}))
            .completion_bound(None)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "`n` is \"three\", not a number of tokens or completions ctx can bound by"
        );
        let e = params(json!({"max_completion_tokens": null}))
            .completion_bound(None)
            .unwrap_err();
        assert_eq!(e.key(), "max_completion_tokens");
        assert_eq!(extra_key("logprobs"), ExtraKey::Neutral);
        assert_eq!(extra_key("best_of"), ExtraKey::Bounded);
        assert_eq!(extra_key("service_tier"), ExtraKey::Unbounded);
        // A tier the bound covers is neutral; one it does not is refused.
        for (tier, class) in [
            ("flex", ExtraKey::Neutral),
            ("default", ExtraKey::Neutral),
            ("auto", ExtraKey::Unbounded),
            ("priority", ExtraKey::Unbounded),
        ] {
            assert_eq!(extra_param("service_tier", &json!(tier)), class, "{tier}");
        }
        assert_eq!(
            params(json!({"service_tier": "flex"})).completion_bound(None),
            Ok(100)
        );
        assert_eq!(
            params(json!({"service_tier": "priority"}))
                .completion_bound(None)
                .unwrap_err()
                .key(),
            "service_tier"
        );
        // The prompt cache's routing key is passed through, and allowed
        // under --max-cost (issue 24).
        assert_eq!(extra_key("prompt_cache_key"), ExtraKey::Neutral);
        assert_eq!(
            params(json!({"prompt_cache_key": "weekly-report"}))
                .completion_bound(None)
                .unwrap(),
            100
        );
    }
}
