//! Folding one character onto what a reader takes it for.
//!
//! A tag can be spelled in characters that are not the ASCII ones the
//! grammar names but that a model (or a person) reads as them. This module
//! maps each character of a value onto that reading, in this order:
//!
//! 1. **Tag characters** (U+E0020–U+E007E) become the ASCII character they
//!    shadow: some models read them, no renderer shows them.
//! 2. **Ignorables** disappear: zero-width characters, bidi controls,
//!    soft hyphens, variation selectors, the other tag characters, control
//!    characters and combining marks.
//! 3. **NFKD**, the compatibility decomposition, then combining marks
//!    dropped: fullwidth and small forms, ligatures, precomposed accents
//!    (`ü` is `u`).
//! 4. For what is still not ASCII, the **grammar's punctuation** first
//!    ([`punctuation`]): brackets, slashes, bars and dashes that a reader
//!    takes for `<` `>` `/` `|` `[` `]` `-` although Unicode's confusables
//!    data maps them elsewhere or nowhere (it maps `—` to `ー`, `│` to `l`,
//!    and leaves `«` and `【` alone).
//! 5. Then **UTS #39**: the prototype that Unicode's own confusables data
//!    gives the character (through the `unicode-security` crate): Cyrillic,
//!    Greek, Armenian, Cherokee, Lisu and the rest of the script look-alikes.
//!    A prototype of `l` is ambiguous in that data (it is the prototype of
//!    `l`, `I`, `1` and `|` alike), so a non-ASCII character whose prototype
//!    is `l` folds to `|`, and the matcher lets a `|` stand for `l` or `i`
//!    inside a word.
//! 6. Where UTS #39 has nothing, the **Latin letters** Unicode names as a
//!    letter with a mark or a small capital ([`super::latin`], generated
//!    from the character names).
//! 7. Lower-casing.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::latin::LATIN_LETTERS;

/// Whether `c` is a Unicode tag character (U+E0000–U+E007F).
pub(crate) fn is_tag_character(c: char) -> bool {
    ('\u{E0000}'..='\u{E007F}').contains(&c)
}

/// The ASCII character a tag character shadows (U+E0020–U+E007E).
fn tag_character(c: char) -> Option<char> {
    let u = c as u32;
    (0xE0020..=0xE007E)
        .contains(&u)
        .then(|| char::from_u32(u - 0xE0000))
        .flatten()
}

/// Code points a renderer shows as nothing (or that only modify their
/// neighbour): removed from the skeleton.
pub(super) fn is_ignorable(c: char) -> bool {
    let u = c as u32;
    matches!(u,
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF)
        || (c.is_control() && !c.is_whitespace())
        || is_combining_mark(c)
}

/// Characters read as the tag grammar's punctuation that UTS #39 maps
/// elsewhere or not at all. This is policy, not look-alike data: it names
/// only what the grammar uses.
fn punctuation(c: char) -> Option<char> {
    Some(match c {
        '‹' | '\u{2329}' | '\u{3008}' | '⟨' | '❬' | '❮' | '˂' | 'ᐸ' | '⧼' | '⋖' | '≺' | '«'
        | '⟪' | '《' => '<',
        '›' | '\u{232A}' | '\u{3009}' | '⟩' | '❭' | '❯' | '˃' | 'ᐳ' | '⧽' | '⋗' | '≻' | '»'
        | '⟫' | '》' => '>',
        '⁄' | '∕' | '⧸' | '╱' | '⟋' | '丿' => '/',
        'ǀ' | '׀' | '∣' | '│' | '┃' | '￨' | '⏐' | '❘' => '|',
        '‐' | '‑' | '‒' | '–' | '—' | '―' | '−' | '⁃' | '➖' | '˗' | '‧' | '・' | '\u{058A}'
        | '\u{05BE}' | '\u{1806}' | '\u{10EAD}' | '\u{2E3B}' | '\u{2E5D}' => '-',
        '⟦' | '【' | '〚' | '［' | '〔' => '[',
        '⟧' | '】' | '〛' | '］' | '〕' => ']',
        _ => return None,
    })
}

/// The generated Latin-letter table's reading of `c`.
fn latin(c: char) -> Option<char> {
    LATIN_LETTERS
        .binary_search_by_key(&c, |&(k, _)| k)
        .ok()
        .map(|i| LATIN_LETTERS[i].1)
}

/// Emits the lower case of `c`.
fn lower(c: char, emit: &mut impl FnMut(char)) {
    if c.is_ascii() {
        emit(c.to_ascii_lowercase());
    } else {
        c.to_lowercase().for_each(emit);
    }
}

/// Emits what `c` (not ASCII, not ignorable, already decomposed) reads as.
fn fold_decomposed(c: char, emit: &mut impl FnMut(char)) {
    if let Some(p) = punctuation(c) {
        return emit(p);
    }
    let mut buf = [0u8; 4];
    let mut prototype = unicode_security::skeleton(c.encode_utf8(&mut buf))
        .filter(|p| !is_ignorable(*p))
        .peekable();
    match prototype.peek() {
        Some(&p) if p == c => {
            drop(prototype);
            match latin(c) {
                Some(l) => emit(l),
                None => lower(c, emit),
            }
        }
        _ => {
            for p in prototype {
                if p == 'l' {
                    // `l`, `I`, `1` and `|` share this prototype.
                    emit('|');
                } else if p.is_ascii() {
                    lower(p, emit);
                } else if let Some(q) = punctuation(p).or_else(|| latin(p)) {
                    emit(q);
                } else {
                    lower(p, emit);
                }
            }
        }
    }
}

/// Emits the folded reading of `c`: nothing for an ignorable, usually one
/// character, sometimes more (`ﬁ` is `fi`, `ǁ` is `||`).
pub(super) fn fold_char(c: char, emit: &mut impl FnMut(char)) {
    if c.is_ascii() {
        if !c.is_ascii_control() || c.is_ascii_whitespace() {
            emit(c.to_ascii_lowercase());
        }
        return;
    }
    if let Some(a) = tag_character(c) {
        return emit(a.to_ascii_lowercase());
    }
    if is_ignorable(c) {
        return;
    }
    for n in std::iter::once(c).nfkd() {
        if is_ignorable(n) {
            continue;
        }
        if n.is_ascii() {
            emit(n.to_ascii_lowercase());
        } else {
            fold_decomposed(n, emit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(text: &str) -> String {
        let mut out = String::new();
        for c in text.chars() {
            fold_char(c, &mut |f| out.push(f));
        }
        out
    }

    #[test]
    fn script_look_alikes_fold_through_uts39() {
        // Greek capital Nu is N (it used to become `v` by lower-casing
        // first), Armenian, Cherokee, Lisu.
        assert_eq!(fold("CONTEΝT"), "content");
        assert_eq!(fold("սօ"), "uo");
        assert_eq!(fold("ᎢᏟ"), "tc");
        assert_eq!(fold("ꓴꓠꓔꓣꓢꓰꓓꓚꓳ"), "untrsedco");
        assert_eq!(fold("аеорс"), "aeopc");
    }

    #[test]
    fn accents_small_capitals_and_latin_with_marks() {
        assert_eq!(fold("üntrüsted cöntént"), "untrusted content");
        assert_eq!(fold("ᴜɴᴛʀᴜꜱᴛᴇᴅ"), "untrusted");
        // `ł` has the prototype `l`, which stands for `l`, `I` and `|`.
        assert_eq!(fold("ŧđøł"), "tdo|");
    }

    #[test]
    fn grammar_punctuation_and_ambiguous_l() {
        assert_eq!(fold("‹⁄—│›"), "</-|>");
        assert_eq!(fold("ＦＵＬＬ＜／＞"), "full</>");
        // Greek capital iota's prototype is `l`, shared with `I` and `|`.
        assert_eq!(fold("Ι"), "|");
    }

    #[test]
    fn tag_characters_read_as_ascii_and_ignorables_vanish() {
        assert_eq!(fold("\u{E003C}\u{E0053}\u{E003E}"), "<s>");
        assert_eq!(fold("a\u{200B}\u{E0001}\u{202E}b\u{0301}"), "ab");
        assert!(is_tag_character('\u{E007F}') && !is_tag_character('\u{E0080}'));
    }

    #[test]
    fn latin_table_is_sorted() {
        assert!(LATIN_LETTERS.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
