//! Hand-written pre-tokenizers, each exactly equivalent to one encoding's
//! splitting regex in tiktoken-rs.
//!
//! tiktoken splits text into pieces with a backtracking regex before it
//! merges bytes; compiling that regex is a large part of its start-up and
//! running it most of its counting time. The three patterns ctx needs are
//! small enough to decide by hand, one character class lookup per
//! character and no backtracking:
//!
//! * `Gpt2` (r50k_base, p50k_base):
//!   `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
//! * `Cl100k`: `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|`
//!   ` ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
//! * `O200k` (o200k_base, o200k_harmony): letters split into an upper run
//!   `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*` and a lower run
//!   `[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` with an optional contraction, then
//!   `\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
//!
//! Each function below returns where the regex's leftmost-first match
//! starting at `i` ends; the comments name the alternative each branch
//! decides and why backtracking cannot change the answer. The character
//! classes come from regex-syntax at build time (see `build.rs`), the same
//! Unicode tables the regex uses. The tests compare every piece boundary's
//! consequence, the token count, with tiktoken-rs on random Unicode and on
//! every corpus file.

use crate::rank_table::{CLASS_BLOCKS, CONTRACTION_FOLDS};

/// `\p{L}`.
const LETTER: u8 = 1;
/// `\p{N}`.
const NUMBER: u8 = 2;
/// `\s` (Unicode White_Space).
const SPACE: u8 = 4;
/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, o200k's upper group.
const UPPER: u8 = 8;
/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`, o200k's lower group.
const LOWER: u8 = 16;

static STAGE1: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/class.stage1"));
static STAGE2: &[u8; CLASS_BLOCKS * 256] =
    include_bytes!(concat!(env!("OUT_DIR"), "/class.stage2"));

/// Which splitting regex to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// r50k_base and p50k_base.
    Gpt2,
    /// cl100k_base.
    Cl100k,
    /// o200k_base and o200k_harmony.
    O200k,
}

/// The class bits of the character starting at byte `i`, and its length.
#[inline]
fn class_at(text: &[u8], i: usize) -> (u8, usize) {
    let b0 = text[i];
    if b0 < 0x80 {
        return (STAGE2[b0 as usize], 1);
    }
    // `text` is valid UTF-8 (it comes from a `&str`), so the lead byte
    // gives the length and the continuation bytes follow.
    let (len, mut cp) = if b0 < 0xE0 {
        (2, u32::from(b0 & 0x1F))
    } else if b0 < 0xF0 {
        (3, u32::from(b0 & 0x0F))
    } else {
        (4, u32::from(b0 & 0x07))
    };
    for k in 1..len {
        cp = (cp << 6) | u32::from(text.get(i + k).copied().unwrap_or(0x80) & 0x3F);
    }
    let block = (cp >> 8) as usize;
    let id = match STAGE1.get(block * 2..block * 2 + 2) {
        Some(&[lo, hi]) => u16::from_le_bytes([lo, hi]) as usize,
        _ => 0,
    };
    (
        STAGE2
            .get(id * 256 + (cp & 0xFF) as usize)
            .copied()
            .unwrap_or(0),
        len,
    )
}

/// The character starting at `i` (valid UTF-8 guaranteed by the caller).
fn char_at(text: &[u8], i: usize) -> Option<char> {
    let len = match text.get(i)? {
        b if *b < 0x80 => 1,
        b if *b < 0xE0 => 2,
        b if *b < 0xF0 => 3,
        _ => 4,
    };
    std::str::from_utf8(text.get(i..i + len)?)
        .ok()?
        .chars()
        .next()
}

/// The contraction letter `c` stands for under `(?i)`, if any.
fn folded_letter(c: char) -> Option<u8> {
    if c.is_ascii() {
        return Some((c as u8).to_ascii_lowercase());
    }
    CONTRACTION_FOLDS
        .iter()
        .find(|(f, _)| *f == c)
        .map(|(_, letter)| *letter)
}

/// Length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`)
/// starting at `i`, or 0. `fold` applies `(?i)`.
#[inline]
fn contraction(text: &[u8], i: usize, fold: bool) -> usize {
    if text.get(i) != Some(&b'\'') {
        return 0;
    }
    let letter = |at: usize| -> Option<(u8, usize)> {
        let c = char_at(text, at)?;
        let l = if fold {
            folded_letter(c)?
        } else if c.is_ascii_lowercase() {
            c as u8
        } else {
            return None;
        };
        Some((l, c.len_utf8()))
    };
    let Some((first, len1)) = letter(i + 1) else {
        return 0;
    };
    match first {
        b's' | b't' | b'm' | b'd' => 1 + len1,
        b'l' | b'v' | b'r' => {
            let want = match first {
                b'l' => b'l',
                _ => b'e',
            };
            match letter(i + 1 + len1) {
                Some((second, len2)) if second == want => 1 + len1 + len2,
                _ => 0,
            }
        }
        _ => 0,
    }
}

/// The end of the run of characters from `i` whose class bits satisfy
/// `keep`.
#[inline]
fn run_end(text: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < text.len() {
        let (class, len) = class_at(text, i);
        if !keep(class) {
            break;
        }
        i += len;
    }
    i
}

#[inline]
fn is_other(class: u8) -> bool {
    class & (LETTER | NUMBER | SPACE) == 0
}

#[inline]
fn is_newline(b: u8) -> bool {
    b == b'\r' || b == b'\n'
}

/// The whitespace alternatives shared by every pattern, for a run starting
/// at `i`:
/// * `\s++$` (Gpt2, Cl100k): a run reaching the end of text is one piece;
/// * `\s*[\r\n]` / `\s*[\r\n]+` (Cl100k, O200k): `\s*` backs off until a
///   newline follows, so the piece ends just after the run's last newline
///   (the newline class can extend no further: nothing after it in the run
///   is a newline, and the run is followed by a non-space);
/// * `\s+(?!\S)`: a run followed by a non-space leaves its last character
///   to the next piece, unless that would leave the run empty;
/// * `\s` / `\s+`: then the single character.
fn whitespace(text: &[u8], i: usize, end_rule: bool, newline_rule: bool) -> usize {
    let mut j = i;
    let mut last_start = i;
    let mut last_newline = None;
    while j < text.len() {
        let (class, len) = class_at(text, j);
        if class & SPACE == 0 {
            break;
        }
        if is_newline(text[j]) {
            last_newline = Some(j);
        }
        last_start = j;
        j += len;
    }
    if end_rule && j == text.len() {
        return j;
    }
    if newline_rule && let Some(p) = last_newline {
        return p + 1;
    }
    if j == text.len() || last_start == i {
        return j;
    }
    last_start
}

/// The end of the piece that starts at `i` (`i < text.len()`).
pub(crate) fn piece_end(pattern: Pattern, text: &[u8], i: usize) -> usize {
    match pattern {
        Pattern::Gpt2 => gpt2(text, i),
        Pattern::Cl100k => cl100k(text, i),
        Pattern::O200k => o200k(text, i),
    }
}

fn gpt2(text: &[u8], i: usize) -> usize {
    let c = contraction(text, i, false);
    if c > 0 {
        return i + c;
    }
    let (class, _) = class_at(text, i);
    // ` ?\p{L}++`, ` ?\p{N}++`, ` ?[^\s\p{L}\p{N}]++`: a space joins the
    // run of the class that follows it.
    let (start, run_class) = if text[i] == b' ' && i + 1 < text.len() {
        let (next, _) = class_at(text, i + 1);
        if next & SPACE == 0 {
            (i + 1, next)
        } else {
            (i, class)
        }
    } else {
        (i, class)
    };
    if run_class & LETTER != 0 {
        return run_end(text, start, |c| c & LETTER != 0);
    }
    if run_class & NUMBER != 0 {
        return run_end(text, start, |c| c & NUMBER != 0);
    }
    if is_other(run_class) {
        return run_end(text, start, is_other);
    }
    whitespace(text, i, true, false)
}

fn cl100k(text: &[u8], i: usize) -> usize {
    let c = contraction(text, i, true);
    if c > 0 {
        return i + c;
    }
    let (class, len) = class_at(text, i);
    // `[^\r\n\p{L}\p{N}]?+\p{L}++`
    if class & LETTER != 0 {
        return run_end(text, i, |c| c & LETTER != 0);
    }
    if class & NUMBER == 0 && !is_newline(text[i]) && i + len < text.len() {
        let (next, _) = class_at(text, i + len);
        if next & LETTER != 0 {
            return run_end(text, i + len, |c| c & LETTER != 0);
        }
    }
    // `\p{N}{1,3}+`
    if class & NUMBER != 0 {
        return digits_up_to_three(text, i + len);
    }
    // ` ?[^\s\p{L}\p{N}]++[\r\n]*+`
    if let Some(j) = other_run(text, i, class) {
        return newline_tail(text, j, false);
    }
    whitespace(text, i, true, true)
}

/// `\p{N}{1,3}` after the first digit, which ends at `j`: up to two more
/// digits (both patterns split numbers into runs of at most three).
fn digits_up_to_three(text: &[u8], mut j: usize) -> usize {
    for _ in 0..2 {
        if j >= text.len() {
            break;
        }
        let (next, l) = class_at(text, j);
        if next & NUMBER == 0 {
            break;
        }
        j += l;
    }
    j
}

/// ` ?[^\s\p{L}\p{N}]+`: where the run ends, if one starts at `i`.
fn other_run(text: &[u8], i: usize, class: u8) -> Option<usize> {
    if is_other(class) {
        return Some(run_end(text, i, is_other));
    }
    if text[i] == b' ' && i + 1 < text.len() && is_other(class_at(text, i + 1).0) {
        return Some(run_end(text, i + 1, is_other));
    }
    None
}

/// `[\r\n]*` (or `[\r\n/]*` for o200k) after a run of other characters.
fn newline_tail(text: &[u8], mut j: usize, slash: bool) -> usize {
    while j < text.len() && (is_newline(text[j]) || (slash && text[j] == b'/')) {
        j += 1;
    }
    j
}

/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:contraction)?`
/// from `q`. Greedy: the upper run takes all it can; if no lower character
/// follows, it gives back characters until one it gave back is itself in
/// the lower group (Lm, Lo, M are in both), which then ends the match.
fn o200k_lower_word(text: &[u8], q: usize) -> Option<usize> {
    let mut j = q;
    let mut last_lower_end = None;
    while j < text.len() {
        let (class, len) = class_at(text, j);
        if class & UPPER == 0 {
            break;
        }
        if class & LOWER != 0 {
            last_lower_end = Some(j + len);
        }
        j += len;
    }
    let end = if j < text.len() && class_at(text, j).0 & LOWER != 0 {
        run_end(text, j, |c| c & LOWER != 0)
    } else {
        last_lower_end?
    };
    Some(end + contraction(text, end, true))
}

/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:contraction)?`
/// from `q`: greedy throughout, nothing after the upper run can fail.
fn o200k_upper_word(text: &[u8], q: usize) -> Option<usize> {
    if q >= text.len() || class_at(text, q).0 & UPPER == 0 {
        return None;
    }
    let upper_end = run_end(text, q, |c| c & UPPER != 0);
    let end = run_end(text, upper_end, |c| c & LOWER != 0);
    Some(end + contraction(text, end, true))
}

fn o200k(text: &[u8], i: usize) -> usize {
    let (class, len) = class_at(text, i);
    // The optional `[^\r\n\p{L}\p{N}]?` prefix is tried first, then
    // without it (a mark can be both the prefix and the word's start).
    let prefix = class & (LETTER | NUMBER) == 0 && !is_newline(text[i]);
    for word in [o200k_lower_word, o200k_upper_word] {
        if prefix && let Some(end) = word(text, i + len) {
            return end;
        }
        if let Some(end) = word(text, i) {
            return end;
        }
    }
    // `\p{N}{1,3}`
    if class & NUMBER != 0 {
        return digits_up_to_three(text, i + len);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    if let Some(j) = other_run(text, i, class) {
        return newline_tail(text, j, true);
    }
    whitespace(text, i, false, true)
}
