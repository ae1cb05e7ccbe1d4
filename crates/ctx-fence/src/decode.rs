//! Decoding the escapes a tag can hide behind: HTML character references,
//! JSON and JavaScript string escapes, and percent-encoding.
//!
//! Each decoded character keeps the byte range of its whole escape in the
//! original text, so a tag found through a decoding is replaced there.
//! One pass decodes one level; [`super::skeleton`] repeats the passes, so
//! nested encodings (`&amp;lt;`, `\\u003c`, `%253C`) unwind too.
//!
//! * **HTML**: every named reference in the WHATWG table (through the
//!   `htmlize` crate's copy of `entities.json`), matched case-sensitively
//!   first and then case-insensitively (so `&LT;`, `&Lt;` and
//!   `&LeftAngleBracket;` all decode), with or without the `;`; decimal and
//!   hex references with any number of digits, as HTML reads them.
//! * **JSON / JavaScript**: `\uXXXX` (surrogate pairs joined), `\u{X…}`,
//!   `\xXX`, `\UXXXXXXXX` and `\UXXXX`, the whitespace escapes `\n` `\t` `\r`
//!   `\f` `\v`, and a backslash before any ASCII punctuation (`\/` `\\` `\<`
//!   `\-` …), which is also Markdown's escape. Go's `json.Marshal` writes `<`
//!   as `\u003c`.
//! * **Percent-encoding**: `%XX`, and a run of `%XX` that spells one UTF-8
//!   character (`%EF%BC%9C` is `＜`).

use super::SkeletonChar;

/// What an escape decodes to.
enum Expansion {
    One(char),
    Str(&'static str),
}

/// The WHATWG named references, laid out at compile time by build.rs
/// (`LONGEST`, `TEXT`, `EXACT`, `FOLDED`): no table is built at run time,
/// and none needs relocating when `ctx` starts.
mod entities {
    include!(concat!(env!("OUT_DIR"), "/entities.rs"));
}

/// The text of a packed span (`offset << 8 | length`) of the entity text.
fn span(packed: u32) -> &'static str {
    let (offset, len) = ((packed >> 8) as usize, (packed & 0xff) as usize);
    entities::TEXT.get(offset..offset + len).unwrap_or_default()
}

/// The value of entity `name` in `table` (sorted by name).
fn entity(table: &'static [[u32; 2]], name: &str) -> Option<&'static str> {
    table
        .binary_search_by(|[k, _]| span(*k).cmp(name))
        .ok()
        .map(|i| span(table[i][1]))
}

fn at(items: &[SkeletonChar], k: usize) -> Option<char> {
    items.get(k).map(|s| s.ch)
}

/// Every digit of `base` from `j`, saturating just past U+10FFFF: the
/// value and the index after the digits (none: `None`).
fn digits(items: &[SkeletonChar], mut j: usize, base: u32, max: usize) -> Option<(u32, usize)> {
    let start = j;
    let mut value: u32 = 0;
    while j - start < max
        && let Some(d) = at(items, j).and_then(|c| c.to_digit(base))
    {
        value = value.saturating_mul(base).saturating_add(d).min(0x11_0000);
        j += 1;
    }
    (j > start).then_some((value, j))
}

/// Exactly `n` hex digits from `j`.
fn hex_exact(items: &[SkeletonChar], j: usize, n: usize) -> Option<(u32, usize)> {
    let (value, end) = digits(items, j, 16, n)?;
    (end - j == n).then_some((value, end))
}

fn char_or_replacement(value: u32) -> char {
    char::from_u32(value).unwrap_or('\u{FFFD}')
}

/// An HTML character reference at `i` (an `&`).
fn html_at(items: &[SkeletonChar], i: usize) -> Option<(Expansion, usize)> {
    let mut j = i + 1;
    if at(items, j) == Some('#') {
        j += 1;
        let hex = matches!(at(items, j), Some('x' | 'X'));
        if hex {
            j += 1;
        }
        // As in HTML, every digit belongs to the reference, however many
        // there are: leading zeros add nothing (`&#000000060;` is `<`),
        // and a value past U+10FFFF (or a surrogate) is U+FFFD.
        let (value, mut end) = digits(items, j, if hex { 16 } else { 10 }, usize::MAX)?;
        if at(items, end) == Some(';') {
            end += 1;
        }
        return Some((Expansion::One(char_or_replacement(value)), end));
    }
    let mut name = String::new();
    while let Some(c) = at(items, j) {
        if !c.is_ascii_alphanumeric() || name.len() >= entities::LONGEST {
            break;
        }
        name.push(c);
        j += 1;
    }
    // The longest name that is a prefix: legacy references such as
    // `&ltfoo` decode without the `;`.
    for len in (1..=name.len()).rev() {
        let candidate = &name[..len];
        let found = entity(&entities::EXACT, candidate)
            .or_else(|| entity(&entities::FOLDED, &candidate.to_ascii_lowercase()));
        if let Some(value) = found {
            let mut end = i + 1 + len;
            if at(items, end) == Some(';') {
                end += 1;
            }
            return Some((Expansion::Str(value), end));
        }
    }
    None
}

/// A JSON or JavaScript escape at `i` (a `\`).
fn backslash_at(items: &[SkeletonChar], i: usize) -> Option<(Expansion, usize)> {
    let j = i + 1;
    // Escape letters are read in either case: the skeleton lower-cases
    // ASCII between rounds, so `\X3c` would otherwise decode or not
    // depending on whether something else in the text asked for another
    // round.
    match at(items, j)? {
        'u' | 'U' if at(items, j + 1) == Some('{') => {
            let (value, end) = digits(items, j + 2, 16, usize::MAX)?;
            (at(items, end) == Some('}'))
                .then(|| (Expansion::One(char_or_replacement(value)), end + 1))
        }
        'u' => {
            let (unit, end) = hex_exact(items, j + 1, 4)?;
            if (0xD800..0xDC00).contains(&unit)
                && at(items, end) == Some('\\')
                && at(items, end + 1) == Some('u')
                && let Some((low, end2)) = hex_exact(items, end + 2, 4)
                && (0xDC00..0xE000).contains(&low)
            {
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                return Some((Expansion::One(char_or_replacement(c)), end2));
            }
            Some((Expansion::One(char_or_replacement(unit)), end))
        }
        // Python's `\U` takes 8 digits; with 4 it reads as `\u` does
        // once lower-cased, so it is decoded either way.
        'U' => {
            let (value, end) = hex_exact(items, j + 1, 8).or_else(|| hex_exact(items, j + 1, 4))?;
            Some((Expansion::One(char_or_replacement(value)), end))
        }
        'x' | 'X' => {
            let (value, end) = hex_exact(items, j + 1, 2)?;
            Some((Expansion::One(char_or_replacement(value)), end))
        }
        // Markdown (CommonMark) lets a backslash escape any ASCII
        // punctuation, and JavaScript reads `\-` as `-`: `</untrusted\-content>`
        // renders, and reads, as the tag.
        c if c.is_ascii_punctuation() => Some((Expansion::One(c), j + 1)),
        // JSON's and JavaScript's whitespace escapes: `<\n/untrusted-content>`
        // in a JSON string is the tag with a line break inside.
        c => whitespace_escape(c.to_ascii_lowercase()).map(|w| (Expansion::One(w), j + 1)),
    }
}

/// The character of a whitespace escape's letter (`n` is a line feed).
fn whitespace_escape(letter: char) -> Option<char> {
    Some(match letter {
        'n' => '\n',
        't' => '\t',
        'r' => '\r',
        'f' => '\u{C}',
        'v' => '\u{B}',
        _ => return None,
    })
}

/// Percent-encoding at `i` (a `%`): one ASCII byte, or the bytes of one
/// UTF-8 character.
fn percent_at(items: &[SkeletonChar], i: usize) -> Option<(Expansion, usize)> {
    let byte = |k: usize| -> Option<(u8, usize)> {
        (at(items, k)? == '%')
            .then(|| hex_exact(items, k + 1, 2))
            .flatten()
            .map(|(v, e)| (v as u8, e))
    };
    let (first, mut end) = byte(i)?;
    let len = match first {
        0x00..=0x7F => return Some((Expansion::One(first as char), end)),
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return None,
    };
    let mut bytes = vec![first];
    for _ in 1..len {
        let (b, e) = byte(end)?;
        bytes.push(b);
        end = e;
    }
    let c = std::str::from_utf8(&bytes).ok()?.chars().next()?;
    Some((Expansion::One(c), end))
}

/// One decoding round; the flag is true when an escape was decoded.
pub(super) fn decode_pass(items: Vec<SkeletonChar>) -> (Vec<SkeletonChar>, bool) {
    if !items.iter().any(|c| matches!(c.ch, '&' | '\\' | '%')) {
        return (items, false);
    }
    let mut out = Vec::with_capacity(items.len());
    let mut decoded = false;
    let mut i = 0;
    while i < items.len() {
        let it = items[i];
        let found = match it.ch {
            '&' => html_at(&items, i),
            '\\' => backslash_at(&items, i),
            '%' => percent_at(&items, i),
            _ => None,
        };
        if let Some((expansion, next)) = found {
            let end = items.get(next - 1).map_or(it.end, |l| l.end);
            let mut push = |ch: char| {
                out.push(SkeletonChar {
                    ch,
                    start: it.start,
                    end,
                })
            };
            match expansion {
                Expansion::One(c) => push(c),
                Expansion::Str(s) => s.chars().for_each(push),
            }
            decoded = true;
            i = next;
            continue;
        }
        out.push(it);
        i += 1;
    }
    (out, decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> String {
        let items = SkeletonChar::each_of(text);
        decode_pass(items).0.iter().map(|c| c.ch).collect()
    }

    #[test]
    fn html_named_references_use_the_whole_table() {
        assert_eq!(decode("&ndash;&mdash;&frasl;"), "\u{2013}\u{2014}\u{2044}");
        assert_eq!(decode("&LeftAngleBracket;"), "\u{27E8}");
        assert_eq!(decode("&LT;&lt&Lt;"), "<<\u{226A}");
        // Case-insensitive fallback for names the table spells otherwise.
        assert_eq!(decode("&leftanglebracket;"), "\u{27E8}");
        assert_eq!(decode("&nvlt;"), "<\u{20D2}");
        assert_eq!(decode("&ltfoo &unknown; & x"), "<foo &unknown; & x");
    }

    #[test]
    fn json_and_js_escapes() {
        assert_eq!(decode("\\u003c\\/\\u003E"), "</>");
        assert_eq!(decode("\\x3c\\u{3e}\\u{00003C}"), "<><");
        assert_eq!(decode("\\ud83d\\ude00 \\ud83d"), "\u{1F600} \u{FFFD}");
        assert_eq!(decode("\\U0000003C \\U003C"), "< <");
        assert_eq!(decode("\\\\u003c"), "\\u003c");
        assert_eq!(decode("C:\\path \\q \\u12"), "C:\\path \\q \\u12");
        // Punctuation, whitespace escapes, and escape letters in either case.
        assert_eq!(decode("\\-\\_\\!"), "-_!");
        assert_eq!(decode("\\n\\t\\r\\f\\v\\N"), "\n\t\r\u{C}\u{B}\n");
        assert_eq!(decode("\\X3C\\U{3c}"), "<<");
    }

    #[test]
    fn percent_encoding() {
        assert_eq!(decode("%3C%2f%3e"), "</>");
        assert_eq!(decode("%EF%BC%9C"), "\u{FF1C}");
        assert_eq!(decode("%253C"), "%3C");
        assert_eq!(decode("100% %zz %EF%BC %C3"), "100% %zz %EF%BC %C3");
    }

    #[test]
    fn a_decoded_character_keeps_the_whole_range() {
        let items = SkeletonChar::each_of("a\\u003cb");
        let (out, decoded) = decode_pass(items);
        assert!(decoded);
        assert_eq!((out[1].ch, out[1].start, out[1].end), ('<', 1, 7));
    }
}

#[cfg(test)]
mod entity_tests {
    use super::{entities, entity, span};

    /// The compile-time tables hold exactly htmlize's names (the table
    /// read at run time before), each with its value, sorted for the
    /// binary search.
    #[test]
    fn the_static_tables_are_htmlizes_names_sorted() {
        let mut count = 0;
        for (k, v) in htmlize::ENTITIES.entries() {
            let name = std::str::from_utf8(k).unwrap();
            let name = name.strip_prefix('&').unwrap();
            let name = name.strip_suffix(';').unwrap_or(name);
            let value = std::str::from_utf8(v).unwrap();
            assert_eq!(entity(&entities::EXACT, name), Some(value), "&{name};");
            count += 1;
        }
        assert!(count > 2000, "{count} entities");
        for table in [&entities::EXACT[..], &entities::FOLDED[..]] {
            assert!(table.windows(2).all(|w| span(w[0][0]) < span(w[1][0])));
        }
        assert!(
            entities::EXACT
                .iter()
                .all(|[k, _]| span(*k).len() <= entities::LONGEST)
        );
    }

    #[test]
    fn exact_names_win_and_folding_finds_the_rest() {
        assert_eq!(entity(&entities::EXACT, "lt"), Some("<"));
        assert_eq!(entity(&entities::EXACT, "LT"), Some("<"));
        // `&Lt;` is its own entity (much less than), not `<`.
        assert_eq!(entity(&entities::EXACT, "Lt"), Some("\u{226A}"));
        assert_eq!(entity(&entities::EXACT, "lT"), None);
        assert_eq!(entity(&entities::FOLDED, "lt"), Some("<"));
        assert_eq!(
            entity(&entities::FOLDED, "leftanglebracket"),
            Some("\u{27E8}")
        );
        assert_eq!(entity(&entities::EXACT, "nosuchentity"), None);
    }
}
