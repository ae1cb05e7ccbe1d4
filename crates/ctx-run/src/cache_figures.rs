//! What the provider's prompt cache did for a task or a run, as every
//! output shows it: `ctx run`'s summary and `--format json`, `ctx runs
//! show`, `ctx runs export` (JSON and CSV) and the HTML report.
//!
//! The figures come from what is stored, never recomputed: each task's
//! usage (`metadata.tokens_used`: `cached_tokens`, `cache_write_tokens`, as
//! the server reported them) and its `metadata.cache_saving_usd`, computed
//! once when the task was priced (`ctx_cost::cache_saving`). Why a type of
//! its own rather than the stored keys: the store leaves an unreported
//! count out of the metadata JSON, and the outputs must say `null` ("not
//! reported") rather than drop the key or print 0. A server that says
//! nothing about its cache has not said it missed, so a sum stays `null`
//! until some task reports a count.

use ctx_cost::Saving;
use ctx_model::ResultMetadata;
use serde::Serialize;

/// A task's or a run's prompt-cache figures. Each is `None` (JSON `null`,
/// text "not reported") unless some call reported it. Serialized flat, in
/// this order, after the `cost_usd` or `spent_usd` it qualifies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheFigures {
    /// Prompt tokens read from the provider's cache.
    pub cached_tokens: Option<u64>,
    /// The share of the prompt tokens they are: `cached_tokens` over the
    /// prompt tokens of the same usage (a run's: of the tasks that
    /// reported a cache read). A number from 0 to 1 in JSON.
    pub cached_fraction: Option<CachedShare>,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: Option<u64>,
    /// What the cache saved: the cache reads and writes at the input
    /// price, less what they cost (negative when writes cost more).
    pub cache_saving_usd: Option<Saving>,
}

/// Cached prompt tokens out of the prompt tokens they are part of. Kept as
/// the two counts, so a run's share is summed exactly and compared
/// exactly; written as their ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedShare {
    /// Prompt tokens read from the cache.
    pub cached: u64,
    /// The prompt tokens of the usage they were reported in, never 0.
    pub prompt: u64,
}

impl CachedShare {
    /// `cached` of `prompt`; `None` for no prompt tokens.
    pub fn new(cached: u64, prompt: u64) -> Option<CachedShare> {
        (prompt > 0).then_some(CachedShare { cached, prompt })
    }

    /// The ratio, from 0 to 1 (above 1 only if a server reports more
    /// cached tokens than prompt tokens).
    pub fn fraction(self) -> f64 {
        self.cached as f64 / self.prompt as f64
    }

    /// `27.3%`.
    pub fn percent(self) -> String {
        format!("{:.1}%", self.fraction() * 100.0)
    }
}

impl Serialize for CachedShare {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.fraction())
    }
}

impl CacheFigures {
    /// One task's figures, from its stored metadata.
    pub fn of(metadata: &ResultMetadata) -> CacheFigures {
        let usage = metadata.tokens_used.unwrap_or_default();
        CacheFigures {
            cached_tokens: usage.cached_tokens,
            cached_fraction: usage
                .cached_tokens
                .and_then(|c| CachedShare::new(c, usage.prompt_tokens)),
            cache_write_tokens: usage.cache_write_tokens,
            cache_saving_usd: metadata.cache_saving_usd,
        }
    }

    /// The figures of several tasks, summed: each stays `None` only when no
    /// task reported it.
    pub fn total<'a>(metadata: impl IntoIterator<Item = &'a ResultMetadata>) -> CacheFigures {
        metadata
            .into_iter()
            .map(CacheFigures::of)
            .fold(CacheFigures::default(), CacheFigures::plus)
    }

    fn plus(self, other: CacheFigures) -> CacheFigures {
        fn add<T>(a: Option<T>, b: Option<T>, f: fn(T, T) -> T) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(f(a, b)),
                (a, b) => a.or(b),
            }
        }
        CacheFigures {
            cached_tokens: add(self.cached_tokens, other.cached_tokens, u64::saturating_add),
            cached_fraction: add(self.cached_fraction, other.cached_fraction, |a, b| {
                CachedShare {
                    cached: a.cached.saturating_add(b.cached),
                    prompt: a.prompt.saturating_add(b.prompt),
                }
            }),
            cache_write_tokens: add(
                self.cache_write_tokens,
                other.cache_write_tokens,
                u64::saturating_add,
            ),
            cache_saving_usd: add(
                self.cache_saving_usd,
                other.cache_saving_usd,
                Saving::saturating_add,
            ),
        }
    }

    /// `3000 of 4600 prompt tokens read (65.2%), 1500 tokens written, saved
    /// $0.008100` (each part only when reported; `cost $0.000750 more` for
    /// a negative saving), or `not reported` — never a 0 the server did not
    /// give.
    pub fn text(&self) -> String {
        let read = self.cached_tokens.map(|n| match self.cached_fraction {
            Some(share) => format!(
                "{n} of {} prompt tokens read ({})",
                share.prompt,
                share.percent()
            ),
            None => format!("{n} tokens read"),
        });
        let written = self
            .cache_write_tokens
            .map(|n| format!("{n} tokens written"));
        let mut parts: Vec<String> = read.into_iter().chain(written).collect();
        if let Some(s) = self.cache_saving_usd {
            parts.push(if s.is_negative() {
                format!(
                    "cost {} more",
                    s.magnitude().to_dollars(6, ctx_cost::Round::Up)
                )
            } else {
                format!("saved {}", s.to_dollars(6))
            });
        }
        if parts.is_empty() {
            "not reported".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// Whether any of these tasks has a usage the engine reported: the run's
/// text outputs add a `prompt cache` line only then (an engine that reports
/// no usage at all, such as the dry run or a command, says nothing about a
/// cache either, and its summaries stay as they were).
pub fn any_usage<'a>(metadata: impl IntoIterator<Item = &'a ResultMetadata>) -> bool {
    metadata.into_iter().any(|m| m.tokens_used.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::TokenUsage;

    fn metadata(cached: Option<u64>, written: Option<u64>, saving: Option<&str>) -> ResultMetadata {
        ResultMetadata {
            tokens_used: Some(TokenUsage {
                prompt_tokens: 4600,
                completion_tokens: 20,
                total_tokens: 4620,
                cached_tokens: cached,
                cache_write_tokens: written,
                partial: false,
                prompt_counted: false,
                service_tier: None,
            }),
            cache_saving_usd: saving.map(|s| serde_json::from_str(s).unwrap()),
            ..ResultMetadata::default()
        }
    }

    #[test]
    fn an_unreported_count_is_null_and_not_reported_never_zero() {
        let silent = CacheFigures::of(&metadata(None, None, None));
        assert_eq!(silent.text(), "not reported");
        assert_eq!(
            serde_json::to_value(silent).unwrap(),
            serde_json::json!({"cached_tokens": null, "cached_fraction": null, "cache_write_tokens": null, "cache_saving_usd": null})
        );
        let zero = CacheFigures::of(&metadata(Some(0), None, Some("0")));
        assert_eq!(
            zero.text(),
            "0 of 4600 prompt tokens read (0.0%), saved $0.000000"
        );
        assert_eq!(
            serde_json::to_value(zero).unwrap(),
            serde_json::json!({"cached_tokens": 0, "cached_fraction": 0.0, "cache_write_tokens": null, "cache_saving_usd": 0.0})
        );
    }

    #[test]
    fn a_total_is_null_until_some_task_reports() {
        let tasks = [
            metadata(None, None, None),
            metadata(Some(3000), None, Some("0.0081")),
            metadata(None, Some(1500), Some("-0.00075")),
            ResultMetadata::default(),
        ];
        let total = CacheFigures::total(&tasks);
        assert_eq!(total.cached_tokens, Some(3000));
        assert_eq!(total.cache_write_tokens, Some(1500));
        // The share is of the prompt tokens of the one task that read.
        assert_eq!(total.cached_fraction, CachedShare::new(3000, 4600));
        assert_eq!(
            serde_json::to_value(total).unwrap()["cached_fraction"],
            serde_json::json!(3000.0 / 4600.0)
        );
        assert_eq!(
            total.text(),
            "3000 of 4600 prompt tokens read (65.2%), 1500 tokens written, saved $0.007350"
        );
        // Two tasks that read: their counts summed, then divided.
        let two = CacheFigures::total(&[tasks[1].clone(), metadata(Some(600), None, None)]);
        assert_eq!(two.cached_fraction, CachedShare::new(3600, 9200));
        assert_eq!(CacheFigures::total(&tasks[..1]), CacheFigures::default());
        let dearer = CacheFigures::of(&tasks[2]);
        assert_eq!(dearer.text(), "1500 tokens written, cost $0.000750 more");
    }
}
