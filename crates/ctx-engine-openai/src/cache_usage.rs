//! The prompt-cache counts of a server's `usage`: cache reads and cache
//! writes, wherever each kind of server reports them.
//!
//! * OpenAI, vLLM and llama.cpp: `prompt_tokens_details.cached_tokens`
//!   (reads; they bill no writes).
//! * Anthropic models through LiteLLM: LiteLLM copies Anthropic's
//!   `cache_read_input_tokens` and `cache_creation_input_tokens` to the top
//!   of `usage`, puts the reads in `prompt_tokens_details.cached_tokens`
//!   and the writes in `prompt_tokens_details.cache_creation_tokens`, and
//!   counts both into `prompt_tokens` (LiteLLM 1.100.5,
//!   `llms/anthropic/chat/transformation.py`, `calculate_usage`).
//!
//! A count no field gives stays `None` ("not reported"), never 0: a
//! server that does not report its cache says nothing about hits.

use serde_json::Value;

/// A count of tokens: a non-negative integer (or a non-negative float, as
/// some servers write them), else `None`.
pub(crate) fn count(v: Option<&Value>) -> Option<u64> {
    v.and_then(|v| {
        v.as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

/// `(cache reads, cache writes)` of a `usage` object, each `None` when no
/// field reports it.
pub(crate) fn cache_counts(usage: &Value) -> (Option<u64>, Option<u64>) {
    let details = usage.get("prompt_tokens_details");
    let detail = |key: &str| count(details.and_then(|d| d.get(key)));
    let reads = detail("cached_tokens").or_else(|| count(usage.get("cache_read_input_tokens")));
    let writes =
        count(usage.get("cache_creation_input_tokens")).or_else(|| detail("cache_creation_tokens"));
    (reads, writes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_vllm_and_llama_cpp_report_reads_only() {
        let u = json!({"prompt_tokens": 2048, "prompt_tokens_details": {"cached_tokens": 1920}});
        assert_eq!(cache_counts(&u), (Some(1920), None));
    }

    #[test]
    fn anthropic_through_litellm_reports_reads_and_writes() {
        // LiteLLM 1.100.5's shape for a Claude call that wrote 1,500
        // tokens and read 3,000.
        let u = json!({"prompt_tokens": 4600, "completion_tokens": 20, "total_tokens": 4620,
            "prompt_tokens_details": {"cached_tokens": 3000, "cache_creation_tokens": 1500},
            "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 3000});
        assert_eq!(cache_counts(&u), (Some(3000), Some(1500)));
        // Only the top-level fields (an older LiteLLM).
        let u = json!({"prompt_tokens": 4600,
            "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 0});
        assert_eq!(cache_counts(&u), (Some(0), Some(1500)));
    }

    #[test]
    fn a_litellm_claude_answer_records_both_counts_in_the_call_usage() {
        let body = br#"{"choices":[{"message":{"content":"ok"}}],
            "usage":{"prompt_tokens":4600,"completion_tokens":20,"total_tokens":4620,
              "cache_creation_input_tokens":1500,"cache_read_input_tokens":3000}}"#;
        let bounds = crate::wire::RequestBounds {
            prompt_tokens: 4590,
            completion_tokens: Some(100),
        };
        let usage = crate::wire::parse_completion(body)
            .unwrap()
            .usage
            .unwrap()
            .resolve(bounds, 2);
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens
            ),
            (4600, Some(3000), Some(1500))
        );
    }

    #[test]
    fn a_server_reporting_nothing_leaves_both_unreported_not_zero() {
        let u = json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12});
        assert_eq!(cache_counts(&u), (None, None));
        let u = json!({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": null}});
        assert_eq!(cache_counts(&u), (None, None));
    }
}
