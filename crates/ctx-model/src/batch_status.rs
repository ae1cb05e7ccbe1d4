//! A provider batch's status names (OpenAI's Batch API, which Anthropic's
//! and LiteLLM's follow): which of them a batch never leaves, the one rule
//! the engine that waits on a batch and the stores that list one share.

/// Whether a batch `status` is one a batch never leaves: `completed`,
/// `failed`, `expired` or `cancelled`.
pub fn is_final(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "expired" | "cancelled")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_statuses_are_the_four_a_batch_never_leaves() {
        for status in ["completed", "failed", "expired", "cancelled"] {
            assert!(is_final(status), "{status}");
        }
        for status in ["validating", "in_progress", "finalizing", "cancelling", ""] {
            assert!(!is_final(status), "{status}");
        }
    }
}
