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
    // Copy runs of ordinary characters as slices; only the few characters
    // that need a replacement are handled one by one.
    let mut from = 0;
    for (i, c) in s.char_indices() {
        let mut buf = [0u8; 4];
        let replacement: &str = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&#39;",
            '\n' | '\t' => continue,
            // CR would be normalised away by the parser; show it.
            '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32)
                .unwrap_or('\u{fffd}')
                .encode_utf8(&mut buf),
            '\u{7f}'..='\u{9f}' => "\u{fffd}",
            _ => continue,
        };
        out.write_str(&s[from..i])?;
        out.write_str(replacement)?;
        from = i + c.len_utf8();
    }
    out.write_str(&s[from..])
}

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
}
