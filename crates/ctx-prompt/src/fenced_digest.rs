//! The historical digest as untrusted text: what `ctx history` prints
//! (unless `--raw`) and what fills `{{HISTORICAL_CONTEXT}}` in a render.
//!
//! Each source is neutralized *before* it is cut to the caps, so the caps
//! hold for the text that is printed (neutralizing a fence tag changes its
//! length). Cutting and joining cannot make a new tag, and the last pass
//! here makes sure of it: if it changes anything, the report is recounted
//! so that its figures describe what is printed.

use ctx_history::{Digest, DigestRequest, HistoryConfig, HistoryError, assemble_digest};
use ctx_tokens::TokenCounter;

use crate::fence::neutralize;

/// [`assemble_digest`] with every source neutralized as an untrusted value
/// (whatever `request.rewrite` says), then the whole digest checked once
/// more.
pub fn fenced_digest(
    config: &HistoryConfig,
    request: &DigestRequest,
    counter: &dyn TokenCounter,
) -> Result<Digest, HistoryError> {
    let mut request = request.clone();
    request.rewrite = Some(neutralize as fn(&str) -> String);
    let mut digest = assemble_digest(config, &request, counter)?;
    let safe = neutralize(&digest.markdown);
    if safe != digest.markdown {
        digest.replace_markdown(safe, counter);
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use ctx_history::Digest;
    use ctx_tokens::EstimateCounter;

    /// The recount after a rewrite describes the new text.
    #[test]
    fn a_replaced_text_is_recounted() {
        let mut d = Digest {
            markdown: "a b".into(),
            words: 2,
            tokens: 1,
            tokens_exact: true,
            max_words: 10,
            token_cap: 10,
            tokenizer: "estimate".into(),
            sources: Vec::new(),
            slack: ctx_history::Slack {
                words: 8,
                tokens: 9,
            },
            warnings: Vec::new(),
        };
        d.replace_markdown("one two three four".into(), &EstimateCounter);
        assert_eq!((d.words, d.tokens), (4, 5));
        assert_eq!((d.slack.words, d.slack.tokens), (6, 5));
    }
}
