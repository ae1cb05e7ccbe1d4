//! The service tier a provider billed a call at.
//!
//! Providers sell the same model at several prices: OpenAI's standard
//! tier, its `flex` tier (batch prices on an ordinary call, slower and
//! sometimes "resource unavailable"), `priority` (dearer, faster), and
//! the Batch API (half price, within a completion window). What a call
//! cost depends on the tier the server says it used, not the one asked
//! for: a flex request may be answered at the standard tier, and `auto`
//! is whatever the project's settings choose. So the tier is recorded
//! with each call's usage ([`crate::TokenUsage::service_tier`]), and the
//! call is priced at that tier's rates.
//!
//! Why an enum and not the server's string: usage is `Copy` and is summed
//! and compared everywhere; the tiers a price can name are few, and a
//! tier ctx does not know is kept as [`ServiceTier::Unrecognized`], which
//! is priced at the standard rates (docs/cost.md says why that is the
//! safe side for every tier but `priority`, which ctx knows).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A tier a call is billed at, as a server names it in its answer's
/// `service_tier` (OpenAI's chat completions), or `batch` for a call
/// answered through a provider's batch API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServiceTier {
    /// The ordinary tier (OpenAI's `default`).
    Default,
    /// `auto`: the project's setting chooses (an answer names the tier
    /// it used, so a stored usage rarely says this).
    Auto,
    /// OpenAI's flex processing.
    Flex,
    /// OpenAI's priority processing.
    Priority,
    /// OpenAI's Scale Tier (committed capacity, billed by contract).
    Scale,
    /// A provider's batch API.
    Batch,
    /// A name ctx does not know.
    Unrecognized,
}

impl ServiceTier {
    /// The tier a server's `service_tier` value names; a name ctx does not
    /// know is [`ServiceTier::Unrecognized`].
    pub fn from_name(name: &str) -> ServiceTier {
        match name {
            "default" | "standard" => ServiceTier::Default,
            "auto" => ServiceTier::Auto,
            "flex" => ServiceTier::Flex,
            "priority" => ServiceTier::Priority,
            "scale" => ServiceTier::Scale,
            "batch" => ServiceTier::Batch,
            _ => ServiceTier::Unrecognized,
        }
    }

    /// The tier's name, as servers and docs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceTier::Default => "default",
            ServiceTier::Auto => "auto",
            ServiceTier::Flex => "flex",
            ServiceTier::Priority => "priority",
            ServiceTier::Scale => "scale",
            ServiceTier::Batch => "batch",
            ServiceTier::Unrecognized => "unrecognized",
        }
    }
}

impl std::fmt::Display for ServiceTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Read by [`ServiceTier::from_name`]: a stored usage written by a later
/// ctx with a tier this one does not know still reads.
impl<'de> Deserialize<'de> for ServiceTier {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(ServiceTier::from_name(&name))
    }
}

/// Why a call went at the standard tier (and price) when a cheaper one
/// was asked for: recorded on the call ([`crate::Attempt::tier_fallback`])
/// so the run's report can mark it and `ctx runs export` can list it.
///
/// Why a record of its own and not the tier alone: a call answered at
/// `default` says what it cost, not that it was meant to cost half. The
/// reader of a weekly run's report asks "what did we pay full price for,
/// and why"; only the engine that fell back knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TierFallback {
    /// Sent in a batch that had not answered it when `--batch-deadline`
    /// passed (or that ended without answering it): cancelled there and
    /// sent as a real-time call.
    BatchLate,
    /// Failed inside its batch in a way the real-time rules retry (a 5xx,
    /// a request the batch expired before it ran): retried real-time.
    BatchFailed,
    /// Asked for `flex`, which had no capacity on the call's earlier
    /// attempts: sent at the standard tier (`--flex-fallback standard`).
    FlexUnavailable,
    /// The prefix-cache warm-up call of a group under `--batch`
    /// (`config.cache_warm_up`): its siblings wait for its first token,
    /// which a batch would give only when the whole batch ends, so it
    /// alone is sent real-time and they go batched with the prefix
    /// cached.
    WarmUp,
}

impl TierFallback {
    /// The fallback's name as stored and exported.
    pub fn as_str(self) -> &'static str {
        match self {
            TierFallback::BatchLate => "batch_late",
            TierFallback::BatchFailed => "batch_failed",
            TierFallback::FlexUnavailable => "flex_unavailable",
            TierFallback::WarmUp => "warm_up",
        }
    }

    /// In words, for a report: why the call paid the standard price.
    pub fn describe(self) -> &'static str {
        match self {
            TierFallback::BatchLate => "its batch had not answered by the deadline: sent real-time",
            TierFallback::BatchFailed => "it failed in its batch: retried real-time",
            TierFallback::FlexUnavailable => "flex had no capacity: sent at the standard tier",
            TierFallback::WarmUp => {
                "the cache warm-up call: sent real-time, its batched siblings find the prefix cached"
            }
        }
    }
}

impl std::fmt::Display for TierFallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_read() {
        for tier in [
            ServiceTier::Default,
            ServiceTier::Auto,
            ServiceTier::Flex,
            ServiceTier::Priority,
            ServiceTier::Scale,
            ServiceTier::Batch,
        ] {
            let json = serde_json::to_string(&tier).unwrap();
            assert_eq!(json, format!("\"{tier}\""));
            assert_eq!(serde_json::from_str::<ServiceTier>(&json).unwrap(), tier);
        }
        assert_eq!(ServiceTier::from_name("standard"), ServiceTier::Default);
        assert_eq!(
            serde_json::from_str::<ServiceTier>("\"turbo\"").unwrap(),
            ServiceTier::Unrecognized
        );
    }

    #[test]
    fn fallbacks_are_stored_by_their_names() {
        for fallback in [
            TierFallback::BatchLate,
            TierFallback::BatchFailed,
            TierFallback::FlexUnavailable,
            TierFallback::WarmUp,
        ] {
            let json = serde_json::to_string(&fallback).unwrap();
            assert_eq!(json, format!("\"{fallback}\""));
            assert_eq!(
                serde_json::from_str::<TierFallback>(&json).unwrap(),
                fallback
            );
        }
    }
}
