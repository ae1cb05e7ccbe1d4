//! The one escaper for untrusted text shown on a terminal.
//!
//! Task ids, a server's error message, a command's stderr, a file name in
//! someone else's archive: none of it is ctx's own text, and a terminal
//! obeys what it is sent. `ESC ] 52 ; c ; … BEL` writes the clipboard,
//! `ESC ] 0 ; … BEL` retitles the window, a CSI sequence moves the cursor
//! or recolours what follows, and U+202E (right-to-left override) or
//! U+2028 (line separator) make a line read as something it is not. So
//! every such string printed to a terminal goes through [`printable`] (or
//! [`printable_lines`] for multi-line messages), and every table cell
//! [`render`](crate::render) prints does too.
//!
//! The rule is simple and visible: a string with any character below is
//! shown Rust-escaped and quoted (`"a\u{1b}]52;c;…\u{7}"`), whole, so the
//! reader sees that it was escaped; any other string is shown as it is.
//! Escaped text has only printable ASCII escapes, so escaping twice
//! changes nothing.
//!
//! It lives here, in the crate every text report already prints through,
//! because the libraries (ctx-run's summary and `ctx runs show`) format
//! those messages as much as the CLI does, and one escaper must serve both.

/// Whether `c` must not reach a terminal as it is: control characters
/// (C0 with tab, DEL, C1 including the 8-bit CSI U+009B), line and
/// paragraph separators, bidirectional overrides, embeddings and
/// isolates, zero-width characters and the byte-order mark, and Unicode
/// tag characters (invisible text).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `s` as it is, or Rust-escaped and quoted when it holds a character
/// [`is_unsafe`]: the form a one-line value (an id, a cell, a message's
/// line) takes on a terminal.
pub fn printable(s: &str) -> String {
    if s.chars().any(is_unsafe) {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            if is_unsafe(c) || matches!(c, '"' | '\\') {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        out.push('"');
        out
    } else {
        s.to_string()
    }
}

/// Multi-line text for a terminal (an error message, a stored prompt or
/// output): each line (split at `\n`) that holds a character
/// [`is_unsafe`] other than a tab goes through [`printable`]; the others,
/// tabs and all, are kept as they are, so a message keeps its line breaks
/// and code keeps its indentation.
pub fn printable_lines(s: &str) -> String {
    if !s.chars().any(is_unsafe_in_lines) {
        return s.to_string();
    }
    s.split('\n')
        .map(|line| {
            if line.chars().any(is_unsafe_in_lines) {
                printable(line)
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`is_unsafe`] except the line feed and the tab, which
/// [`printable_lines`] keeps.
fn is_unsafe_in_lines(c: char) -> bool {
    !matches!(c, '\n' | '\t') && is_unsafe(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terminal_sequences_and_bidi_controls_are_escaped() {
        let osc52 = "boom\u{1b}]52;c;ZWNobyBwd25lZA==\u{7} after";
        assert_eq!(
            printable(osc52),
            "\"boom\\u{1b}]52;c;ZWNobyBwd25lZA==\\u{7} after\""
        );
        assert_eq!(
            printable("\u{1b}]0;owned\u{7}"),
            "\"\\u{1b}]0;owned\\u{7}\""
        );
        assert_eq!(printable("a\u{1b}[2Jb"), "\"a\\u{1b}[2Jb\"");
        assert_eq!(printable("a\u{9b}31mb"), "\"a\\u{9b}31mb\"");
        assert_eq!(printable("evil\u{202e}txt.exe"), "\"evil\\u{202e}txt.exe\"");
        assert_eq!(printable("one\u{2028}two"), "\"one\\u{2028}two\"");
        assert_eq!(printable("say \"hi\"\r"), "\"say \\\"hi\\\"\\r\"");
        // Ordinary text, accents and CJK included, is left alone.
        for s in ["task-1", "café 東京", "a \"quoted\" b", ""] {
            assert_eq!(printable(s), s);
        }
    }

    #[test]
    fn lines_keep_their_breaks() {
        assert_eq!(printable_lines("one\ntwo"), "one\ntwo");
        assert_eq!(printable_lines("fn f() {\n\tx\n}"), "fn f() {\n\tx\n}");
        assert_eq!(
            printable_lines("server said:\n\u{1b}]52;c;eA==\u{7}"),
            "server said:\n\"\\u{1b}]52;c;eA==\\u{7}\""
        );
    }

    proptest! {
        /// No unsafe character survives, and escaping is idempotent.
        #[test]
        fn nothing_unsafe_survives(s in "(\\PC|[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{2028}\\u{202e}\\u{200b}])*") {
            let once = printable(&s);
            prop_assert!(!once.chars().any(is_unsafe), "{once:?}");
            prop_assert_eq!(printable(&once), once.clone());
            let lines = printable_lines(&s);
            prop_assert!(!lines.chars().any(is_unsafe_in_lines), "{lines:?}");
        }
    }
}
