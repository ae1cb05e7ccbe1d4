//! The tag grammar, matched on a skeleton.
//!
//! Whitespace is any Unicode whitespace, line breaks included:
//!
//! * fence tag: `<` ws* `/`* ws* `untrusted` (ws | `-` | `_`)* `content`,
//!   extended to the next `>` when one follows before any `<` (so
//!   attributes, such as a boundary nonce, belong to the tag);
//! * `<|` … `|>` with up to 64 characters between and no `<` or `>`;
//! * `<` ws* `/`* ws* NAME ws* `>` for the angle names of
//!   [`super::tokens::CONTROL_TOKENS`] (`s`, `sys`, `think`, `tool_call`,
//!   `start_of_turn`, ...);
//! * `[` ws* `/`? ws* NAME ws* `]` for its bracket names (`inst`,
//!   `tool_calls`, `gmask`, ...).
//!
//! Inside a name, a skeleton `|` also stands for `l` or `i` (the fold
//! writes `|` for every non-ASCII character whose UTS #39 prototype is
//! `l`, which Unicode gives to `l`, `I`, `1` and `|` alike), and `rn`
//! stands for `m` (UTS #39 reads `m` as `rn`).

use super::tokens::words;
use super::{SkeletonChar, TagKind};

fn skip_ws(s: &[SkeletonChar], mut j: usize) -> usize {
    while s.get(j).is_some_and(|c| c.ch.is_whitespace()) {
        j += 1;
    }
    j
}

/// `word` at `j`: the index after it.
fn word_at(s: &[SkeletonChar], j: usize, word: &str) -> Option<usize> {
    let mut k = j;
    for w in word.chars() {
        let c = s.get(k)?.ch;
        if c == w || (c == '|' && matches!(w, 'l' | 'i')) {
            k += 1;
        } else if w == 'm' && c == 'r' && s.get(k + 1)?.ch == 'n' {
            k += 2;
        } else {
            return None;
        }
    }
    Some(k)
}

/// `word` ws* `close` at `j`: the index after `close`.
fn closed_word(s: &[SkeletonChar], j: usize, word: &str, close: char) -> Option<usize> {
    let k = skip_ws(s, word_at(s, j, word)?);
    (s.get(k)?.ch == close).then_some(k + 1)
}

/// `<|` … `|>` with the `|` at `j`: the index after the `>`.
fn pipe_token(s: &[SkeletonChar], j: usize) -> Option<usize> {
    let mut k = j + 1;
    while k < s.len() && k <= j + 65 {
        match s[k].ch {
            '|' => {
                let e = skip_ws(s, k + 1);
                if s.get(e).is_some_and(|c| c.ch == '>') {
                    return Some(e + 1);
                }
            }
            '<' | '>' => return None,
            _ => {}
        }
        k += 1;
    }
    None
}

/// The fence name at `k` (after `<` and any `/`): the index after the tag.
fn fence_name(s: &[SkeletonChar], k: usize) -> Option<usize> {
    let after = word_at(s, k, "untrusted")?;
    let mut m = after;
    while s
        .get(m)
        .is_some_and(|c| c.ch.is_whitespace() || c.ch == '-' || c.ch == '_')
    {
        m += 1;
    }
    let mut end = word_at(s, m, "content")?;
    // Swallow attributes up to the `>`, when one comes first.
    let mut n = end;
    while let Some(c) = s.get(n) {
        match c.ch {
            '>' => {
                end = n + 1;
                break;
            }
            '<' => break,
            _ => n += 1,
        }
        if n > end + 256 {
            break;
        }
    }
    Some(end)
}

/// A tag starting at skeleton index `i`: its kind and the index after it.
pub(super) fn tag_at(s: &[SkeletonChar], i: usize) -> Option<(TagKind, usize)> {
    match s.get(i)?.ch {
        '<' => {
            let j = skip_ws(s, i + 1);
            if s.get(j)?.ch == '|' {
                return pipe_token(s, j).map(|end| (TagKind::Control, end));
            }
            let mut k = j;
            let mut closing = false;
            while let Some(c) = s.get(k) {
                if c.ch == '/' {
                    closing = true;
                } else if !c.ch.is_whitespace() {
                    break;
                }
                k += 1;
            }
            if let Some(end) = fence_name(s, k) {
                let kind = if closing {
                    TagKind::FenceClose
                } else {
                    TagKind::FenceOpen
                };
                return Some((kind, end));
            }
            words()
                .angle
                .iter()
                .find_map(|w| closed_word(s, k, w, '>'))
                .map(|end| (TagKind::Control, end))
        }
        '[' => {
            let mut k = skip_ws(s, i + 1);
            if s.get(k)?.ch == '/' {
                k = skip_ws(s, k + 1);
            }
            words()
                .bracket
                .iter()
                .find_map(|w| closed_word(s, k, w, ']'))
                .map(|end| (TagKind::Control, end))
        }
        _ => None,
    }
}
