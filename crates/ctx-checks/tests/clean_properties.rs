//! The invariants of an `output` block (issue 38): cleaning only removes
//! whole lines; `strip_lines` never leaves a line a pattern matches; and
//! `unwrap_fence` never removes text outside the fence: every line it
//! removes is blank or a fence line, two fence lines at most.

use ctx_checks::OutputCleaner;
use ctx_model::output_cleaning::{OutputCleaning, removed_lines};
use proptest::prelude::*;

/// Lines a model writes: prose, status lines, fences, blank lines.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{0,12}",
        Just("✅ Done.".to_string()),
        Just("Quality score: 9/10".to_string()),
        Just("```".to_string()),
        Just("```markdown".to_string()),
        Just("~~~".to_string()),
        Just("   ".to_string()),
        Just(String::new()),
    ]
}

/// A text of those lines, each ended by `\n` or `\r\n`, the last one
/// maybe by nothing.
fn text() -> impl Strategy<Value = String> {
    (
        prop::collection::vec((line(), any::<bool>()), 0..12),
        any::<bool>(),
    )
        .prop_map(|(lines, open_end)| {
            let mut out = String::new();
            let n = lines.len();
            for (i, (l, crlf)) in lines.into_iter().enumerate() {
                out.push_str(&l);
                if i + 1 < n || !open_end {
                    out.push_str(if crlf { "\r\n" } else { "\n" });
                }
            }
            out
        })
}

fn cleaner(strip: &[&str], unwrap_fence: bool) -> OutputCleaner {
    OutputCleaner::compile(&OutputCleaning {
        strip_lines: strip.iter().map(|s| s.to_string()).collect(),
        unwrap_fence,
    })
    .unwrap()
}

fn is_fence_line(l: &str) -> bool {
    let t = l.trim();
    t.starts_with("```") || t.starts_with("~~~")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn strip_lines_never_leaves_a_matching_line(raw in text(), unwrap in any::<bool>()) {
        let patterns = ["^✅", "^Quality score:", "^$"];
        let c = cleaner(&patterns, unwrap);
        let cleaned = c.clean(&raw);
        let regexes: Vec<regex::Regex> =
            patterns.iter().map(|p| regex::Regex::new(p).unwrap()).collect();
        for l in cleaned.lines() {
            let l = l.strip_suffix('\r').unwrap_or(l);
            prop_assert!(!regexes.iter().any(|r| r.is_match(l)), "{l:?} left in {cleaned:?}");
        }
        // Only whole lines go: the kept lines are the raw ones less the
        // removed ones.
        let removed = removed_lines(&raw, &cleaned);
        prop_assert_eq!(removed.len() + cleaned.lines().count(), raw.lines().count());
    }

    #[test]
    fn unwrap_fence_never_removes_text_outside_the_fence(raw in text()) {
        let cleaned = cleaner(&[], true).clean(&raw);
        let removed = removed_lines(&raw, &cleaned);
        prop_assert_eq!(removed.len() + cleaned.lines().count(), raw.lines().count());
        for l in &removed {
            prop_assert!(l.trim().is_empty() || is_fence_line(l), "{l:?} removed from {raw:?}");
        }
        prop_assert!(removed.iter().filter(|l| is_fence_line(l)).count() <= 2);
        // Text before the opening fence keeps the fence.
        let prose = format!("Here it is:\n{raw}");
        if !raw.trim().is_empty() {
            let kept = cleaner(&[], true).clean(&prose);
            prop_assert_eq!(kept.as_ref(), prose.as_str());
        }
        // What is kept inside is byte for byte the fence's body.
        if cleaned.as_ref() != raw.as_str() && !cleaned.is_empty() {
            prop_assert!(raw.contains(cleaned.trim_end_matches(['\n', '\r'])));
        }
    }
}
