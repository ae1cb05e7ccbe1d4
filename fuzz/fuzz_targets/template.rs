//! Arbitrary text through the template pipeline: parse, lint, render with
//! arbitrary values, neutralize. Nothing may panic, and fences must hold:
//! a neutralized value holds no tag, a rendered prompt has exactly the
//! fence tags its template has, and no control token appears that neither
//! the template nor a trusted value wrote (not even one assembled across
//! the seam between two values).
//!
//! A template with `fence: nonce` is rendered with a nonce taken from the
//! input's length and first bytes; its prompt must hold exactly the
//! template's fence tags, each carrying that nonce.
//!
//! Input layout: the template, then values separated by NUL bytes; the
//! values are given to the template's placeholder names in order.

#![no_main]

use std::collections::BTreeMap;

use ctx_prompt::fence::{FenceNonce, TagKind, find_tags, neutralize};
use ctx_prompt::template::{Classes, FenceStyle, RenderError, Template, lint, render_with_nonce};
use libfuzzer_sys::fuzz_target;

fn fence_tags(text: &str) -> usize {
    find_tags(text).iter().filter(|t| t.kind != TagKind::Control).count()
}

fn control_tokens(text: &str) -> usize {
    find_tags(text).iter().filter(|t| t.kind == TagKind::Control).count()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.split('\0');
    let source = parts.next().unwrap_or("");
    let raw_values: Vec<&str> = parts.collect();

    for v in &raw_values {
        let n = neutralize(v);
        assert!(find_tags(&n).is_empty(), "neutralized value still holds a tag: {n:?}");
        assert_eq!(neutralize(&n), n, "neutralize is idempotent");
        assert!(
            !n.chars().any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)),
            "tag characters survive: {n:?}"
        );
    }

    let Ok(template) = Template::parse(source, "fuzz.md") else {
        return;
    };
    let report = lint(&template, &Classes::default());
    for f in &report.findings {
        assert!(f.line >= 1);
    }
    let mut values = BTreeMap::new();
    for (i, name) in template.names().into_iter().enumerate() {
        let v = raw_values.get(i % raw_values.len().max(1)).copied().unwrap_or("");
        values.insert(name.to_string(), v.to_string());
    }
    let mut seed = [0u8; 16];
    seed[..8].copy_from_slice(&(data.len() as u64).to_le_bytes());
    for (s, b) in seed[8..].iter_mut().zip(data) {
        *s = *b;
    }
    let nonce = FenceNonce::from_bytes(seed);
    match render_with_nonce(&template, &Classes::default(), &values, Some(&nonce)) {
        Ok(r) => {
            assert!(report.is_clean());
            assert_eq!(fence_tags(&r.text), fence_tags(template.body()));
            if template.fence == FenceStyle::Nonce {
                for t in find_tags(&r.text).iter().filter(|t| t.kind != TagKind::Control) {
                    let tag = &r.text[t.range.clone()];
                    assert!(
                        tag == nonce.open_tag() || tag == nonce.close_tag(),
                        "fence tag without the nonce: {tag:?}"
                    );
                }
            }
            let trusted_write_tokens = r
                .values
                .iter()
                .any(|v| v.class != ctx_prompt::template::Class::Untrusted && control_tokens(&v.text) > 0);
            if !trusted_write_tokens {
                assert_eq!(control_tokens(&r.text), control_tokens(template.body()));
            }
            for v in r.values.iter().filter(|v| v.class == ctx_prompt::template::Class::Untrusted) {
                assert!(find_tags(&v.text).is_empty());
            }
        }
        Err(RenderError::Lint(r)) => assert!(!r.findings.is_empty()),
        // A tag assembled across a seam is neutralized on the untrusted
        // side; what is left is refused as FenceBroken and never rendered
        // (a trusted value completing a control token, or an untrusted
        // value breaking a token the template writes around it).
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
