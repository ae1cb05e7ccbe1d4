//! Escaping task content for HTML, the one door content goes through.
//!
//! Everything a task carries (ids, descriptions, prompts, outputs, errors,
//! model names) is written into element content or into a double-quoted
//! attribute value, and nowhere else: never into a `<script>` or `<style>`
//! element, never into a URL attribute (links inside the report are built
//! from task *positions*, `#task-12`), never into an attribute name or an
//! unquoted value. In those two contexts escaping `&`, `<`, `>`, `"` and
//! `'` is sufficient: no tag can open, no attribute can close, and an
//! entity cannot be started by content. Control characters are made
//! visible (U+2400 pictures for C0, U+FFFD for the rest) so a NUL or an ESC
//! cannot change how the page parses or hide text.
//!
//! The page's templates (`templates/`) escape every `{{ value }}` with
//! [`Html`], this module's escaper, by default: `askama.toml` maps the
//! `.html` templates to it in place of askama's own HTML escaper, which
//! leaves control characters as they are and spells entities differently
//! (`&#60;`), so the page keeps one escaping policy, this one.

use std::fmt;

/// The templates' escaper (`askama.toml`): [`write_text`] for every value
/// a template writes, unless the template says `|safe`, which the report's
/// templates say only of the page's own script, a constant.
#[derive(Debug, Clone, Copy, Default)]
pub struct Html;

impl askama::filters::Escaper for Html {
    fn write_escaped_str<W: fmt::Write>(&self, mut dest: W, string: &str) -> fmt::Result {
        write_text(&mut dest, string)
    }
}

/// `s` escaped for HTML text and double-quoted attribute values.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 16);
    push_text(&mut out, s);
    out
}

/// Appends `s`, escaped as by [`text`], to `out`.
pub fn push_text(out: &mut String, s: &str) {
    // Writing to a `String` cannot fail.
    let _ = write_text(out, s);
}

/// Writes `s`, escaped as by [`text`], to `out`: the one implementation
/// behind [`text`], [`push_text`] and the templates' [`Html`].
pub fn write_text<W: fmt::Write + ?Sized>(out: &mut W, s: &str) -> fmt::Result {
    // Prompts and outputs are most of a page's bytes, and almost none of
    // them need a replacement: scan bytes against a table and copy runs of
    // ordinary text as slices. Every byte that can start a replacement is
    // ASCII or 0xC2 (the lead byte of U+0080..U+00BF, where the C1
    // controls are), so a run never ends inside a character.
    let bytes = s.as_bytes();
    let (mut from, mut i) = (0, 0);
    while i < bytes.len() {
        if !MAY_NEED_ESCAPE[usize::from(bytes[i])] {
            i += 1;
            continue;
        }
        let mut picture = [0u8; 4];
        let (replacement, width): (&str, usize) = match bytes[i] {
            b'&' => ("&amp;", 1),
            b'<' => ("&lt;", 1),
            b'>' => ("&gt;", 1),
            b'"' => ("&quot;", 1),
            b'\'' => ("&#39;", 1),
            // CR would be normalised away by the parser; show it (LF and
            // tab are not in the table).
            b @ 0x00..=0x1f => {
                let c = char::from_u32(0x2400 + u32::from(b)).unwrap_or('\u{fffd}');
                (&*c.encode_utf8(&mut picture), 1)
            }
            0x7f => ("\u{fffd}", 1),
            // 0xC2 0x80..=0x9F: U+0080..U+009F, the C1 controls.
            _ if matches!(bytes.get(i + 1), Some(0x80..=0x9f)) => ("\u{fffd}", 2),
            _ => {
                i += 1;
                continue;
            }
        };
        out.write_str(&s[from..i])?;
        out.write_str(replacement)?;
        i += width;
        from = i;
    }
    out.write_str(&s[from..])
}

/// The bytes [`write_text`] stops at: the five HTML specials, the C0
/// controls but LF and tab, DEL, and 0xC2 (which may start a C1 control).
const MAY_NEED_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b != b'\n' as usize && b != b'\t' as usize;
        b += 1;
    }
    table[b'&' as usize] = true;
    table[b'<' as usize] = true;
    table[b'>' as usize] = true;
    table[b'"' as usize] = true;
    table[b'\'' as usize] = true;
    table[0x7f] = true;
    table[0xc2] = true;
    table
};

/// At most `max` characters of `s` for a label, with `…` when cut (the
/// ellipsis alone when `max` is 0).
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_cannot_open_or_close_anything() {
        let attack = r#"</script><script>document.title='pwned'</script><img src=x onerror="document.title='pwned'"><a href="javascript:alert(1)">x</a>&amp;"#;
        let e = text(attack);
        assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
        assert!(e.starts_with("&lt;/script&gt;&lt;script&gt;"));
        // Every `&` in the output starts one of our entities.
        for (i, _) in e.match_indices('&') {
            let rest = &e[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                    .iter()
                    .any(|ent| rest.starts_with(ent)),
                "{rest}"
            );
        }
    }

    #[test]
    fn control_characters_are_visible() {
        assert_eq!(
            text("a\0b\r\n\tc\u{1b}\u{85}"),
            "a\u{2400}b\u{240d}\n\tc\u{241b}\u{fffd}"
        );
    }

    #[test]
    fn the_templates_escaper_is_this_one() {
        use askama::filters::Escaper as _;
        let attack = "<b a='1'>&\"\u{0}\u{85}</b>";
        let mut via_templates = String::new();
        Html.write_escaped_str(&mut via_templates, attack).unwrap();
        assert_eq!(via_templates, text(attack));
        let mut one = String::new();
        Html.write_escaped_char(&mut one, '\'').unwrap();
        assert_eq!(one, "&#39;");
    }

    #[test]
    fn truncate_counts_characters() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcd", 3), "ab…");
        assert_eq!(truncate("éééé", 2), "é…");
        assert_eq!(truncate("ab", 0), "…");
    }

    /// The rule of [`write_text`] one character at a time: what the byte
    /// scan must give.
    fn by_chars(s: &str) -> String {
        s.chars()
            .map(|c| match c {
                '&' => "&amp;".to_string(),
                '<' => "&lt;".to_string(),
                '>' => "&gt;".to_string(),
                '"' => "&quot;".to_string(),
                '\'' => "&#39;".to_string(),
                '\n' | '\t' => c.to_string(),
                '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap().to_string(),
                '\u{7f}'..='\u{9f}' => "\u{fffd}".to_string(),
                _ => c.to_string(),
            })
            .collect()
    }

    #[test]
    fn every_character_up_to_u_0800_escapes_as_the_rule_says() {
        for c in (0..0x800).filter_map(char::from_u32) {
            for s in [c.to_string(), format!("a{c}b"), format!("{c}{c}\u{c2}x")] {
                assert_eq!(text(&s), by_chars(&s), "U+{:04X}", c as u32);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_byte_scan_agrees_with_the_character_rule(s in "(\\PC|[\\x00-\\x1f\\x7f-\\u{a0}&<>\"'\u{c2}])*") {
            proptest::prop_assert_eq!(text(&s), by_chars(&s));
        }
    }
}
