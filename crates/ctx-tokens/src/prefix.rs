//! The one prefix search behind every token cut in ctx.
//!
//! Two cuts exist, and they differ on purpose: [`truncate_to_tokens`] is
//! the hard cut of an engine's answer to the `max_tokens` it was allowed
//! (nothing is added: the stored output is what a provider that honours
//! the bound would have sent), while `ctx_prompt::cut_to_tokens` shortens
//! text for a prompt and marks the cut with `...` so the model can tell.
//! Both find their prefix with [`longest_prefix`], so a fix to the search
//! (a char boundary, the first or last index) is made once.

use crate::TokenCounter;

/// The byte end of the longest prefix of `text`, on a char boundary, for
/// which `fits` holds.
///
/// `fits` must be monotone over prefixes (a prefix that fits has every
/// shorter prefix fit); the empty prefix is taken to fit without asking.
///
/// `ratio` is a hint `(limit, total)`: the answer lies near `limit /
/// total` of the text, as it does when a text of `total` tokens is cut to
/// `limit`. The search then starts there and gallops outwards before
/// bisecting, so the prefixes it tries are about the size of the answer:
/// cutting a megabyte down to a few hundred tokens never tokenizes the
/// megabyte again. Without it the search bisects the whole text.
///
/// ```
/// let end = ctx_tokens::longest_prefix("héllo world", None, |p| p.len() <= 4);
/// assert_eq!(&"héllo world"[..end], "hél");
/// ```
pub fn longest_prefix(
    text: &str,
    ratio: Option<(usize, usize)>,
    mut fits: impl FnMut(&str) -> bool,
) -> usize {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    let n = bounds.len() - 1;
    let mut fits_at = |i: usize| fits(&text[..bounds[i]]);
    // Invariant: index `lo` fits (or is 0); index `hi` does not (or is n,
    // not yet asked).
    let (mut lo, mut hi) = match ratio {
        Some((limit, total)) if n > 1 => gallop(n, limit, total, &mut fits_at),
        _ => (0, n),
    };
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if fits_at(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if hi == n && lo + 1 == n && fits_at(n) {
        lo = n;
    }
    bounds[lo]
}

/// The bracket `(lo, hi)` around the answer, found from the proportional
/// guess by doubling steps (see [`longest_prefix`]). Needs `n > 1`.
fn gallop(
    n: usize,
    limit: usize,
    total: usize,
    fits_at: &mut impl FnMut(usize) -> bool,
) -> (usize, usize) {
    let guess = (n as u128 * limit as u128 / total.max(1) as u128) as usize;
    let guess = guess.clamp(1, n - 1);
    let mut step = (guess / 8).max(1);
    let (mut lo, mut hi) = (0usize, n);
    if fits_at(guess) {
        lo = guess;
        while lo + step < hi {
            if fits_at(lo + step) {
                lo += step;
                step *= 2;
            } else {
                hi = lo + step;
                break;
            }
        }
    } else {
        hi = guess;
        while hi > lo + step {
            if fits_at(hi - step) {
                lo = hi - step;
                break;
            }
            hi -= step;
            step *= 2;
        }
    }
    (lo, hi)
}

/// `text` truncated to its longest prefix (on a char boundary) of at most
/// `limit` tokens under `counter`, with nothing added; `None` when it
/// already fits. This is the cut of an answer longer than the
/// `max_tokens` it was allowed; a prompt's cut marks itself with `...`
/// (`ctx_prompt::cut_to_tokens`).
///
/// ```
/// use ctx_tokens::TokenizerExt;
/// let counter = ctx_tokens::Tokenizer::Estimate.counter();
/// assert_eq!(ctx_tokens::truncate_to_tokens("short", 10, &*counter), None);
/// let long = "word ".repeat(200);
/// let cut = ctx_tokens::truncate_to_tokens(&long, 10, &*counter).unwrap();
/// assert!(counter.count(cut) <= 10 && !cut.ends_with("..."));
/// ```
pub fn truncate_to_tokens<'a>(
    text: &'a str,
    limit: usize,
    counter: &dyn TokenCounter,
) -> Option<&'a str> {
    if counter.fits(text, limit) {
        return None;
    }
    let end = longest_prefix(text, None, |prefix| counter.fits(prefix, limit));
    Some(&text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Tokenizer, TokenizerExt};

    /// Every prefix tried in order: what the search must find.
    fn brute_force(text: &str, fits: impl Fn(&str) -> bool) -> usize {
        text.char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()))
            .filter(|&end| fits(&text[..end]))
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn finds_what_trying_every_prefix_finds_with_and_without_a_hint() {
        let text = "ab é cd ffff gg h iiiii jj k";
        for max in 0..=text.len() + 1 {
            let fits = |p: &str| p.len() <= max;
            let want = brute_force(text, fits);
            assert_eq!(longest_prefix(text, None, fits), want, "max {max}");
            for total in [1, 5, 30, 1000] {
                for limit in [0, 1, 7, 29] {
                    let got = longest_prefix(text, Some((limit, total)), fits);
                    assert_eq!(got, want, "max {max}, hint {limit}/{total}");
                }
            }
        }
    }

    #[test]
    fn the_whole_text_and_the_empty_one() {
        assert_eq!(longest_prefix("abc", None, |_| true), 3);
        assert_eq!(longest_prefix("abc", Some((1, 3)), |_| true), 3);
        assert_eq!(longest_prefix("abc", None, |p| p.is_empty()), 0);
        assert_eq!(longest_prefix("", None, |_| false), 0);
        assert_eq!(longest_prefix("é", None, |p| p.len() < 2), 0);
    }

    #[test]
    fn truncation_keeps_the_longest_prefix_within_the_limit() {
        let counter = Tokenizer::Cl100kBase.counter();
        let text = "one two three four five";
        assert_eq!(truncate_to_tokens(text, 1000, &*counter), None);
        for n in 0..5 {
            let cut = truncate_to_tokens(text, n, &*counter).unwrap();
            assert!(counter.count(cut) <= n, "{cut:?} over {n}");
            assert!(text.starts_with(cut));
            let longer = &text[..text[cut.len()..]
                .chars()
                .next()
                .map_or(text.len(), |c| cut.len() + c.len_utf8())];
            assert!(counter.count(longer) > n, "{longer:?} also fits {n}");
        }
        assert_eq!(truncate_to_tokens(text, 2, &*counter).unwrap(), "one two");
        assert_eq!(truncate_to_tokens(text, 0, &*counter).unwrap(), "");
    }
}
