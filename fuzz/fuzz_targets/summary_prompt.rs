//! Arbitrary text through the `summarize_strategy: llm` summary prompt:
//! a `summary_prompt` template (the plan author's), an output (untrusted)
//! and a description, separated by NUL bytes. Nothing may panic, and the
//! output adds no tag: the rendered prompt holds exactly the fence tags and
//! control tokens it holds with an empty output, for the given template
//! and for ctx's default prompt.

#![no_main]

use ctx_deps::summarize::{default_summary_prompt, render_summary_prompt};
use ctx_prompt::fence::{TagKind, find_tags};
use libfuzzer_sys::fuzz_target;

fn kinds(text: &str) -> (usize, usize, usize) {
    let tags = find_tags(text);
    let n = |k: TagKind| tags.iter().filter(|t| t.kind == k).count();
    (n(TagKind::FenceOpen), n(TagKind::FenceClose), n(TagKind::Control))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\0');
    let template = parts.next().unwrap_or_default();
    let output = parts.next().unwrap_or_default();
    let description = parts.next().unwrap_or_default();
    let rendered = render_summary_prompt(template, description, output, Some("focus"));
    let empty = render_summary_prompt(template, description, "", Some("focus"));
    assert_eq!(kinds(&rendered), kinds(&empty), "{rendered:?}");
    let rendered = default_summary_prompt(description, output, None, 300);
    let empty = default_summary_prompt(description, "", None, 300);
    assert_eq!(kinds(&rendered), kinds(&empty), "{rendered:?}");
});
