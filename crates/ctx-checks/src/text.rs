//! Small text rules shared by the checks: what a word is, the one code
//! fence that is stripped before JSON is parsed, and how text is quoted in
//! messages.

/// Words as ctx's word caps count them ([`ctx_tokens::count_words`], the
/// one definition, which ctx-history's compression uses too), as the `u64`
/// a `max_words` limit is.
pub fn count_words(text: &str) -> u64 {
    ctx_tokens::count_words(text) as u64
}

/// Characters as `max_chars` counts them: Unicode scalar values, so an
/// accented letter is one character whatever its UTF-8 length.
pub fn count_chars(text: &str) -> u64 {
    text.chars().count() as u64
}

/// The text inside one markdown code fence that surrounds all of `text`,
/// or `text` itself (trimmed) when there is none.
///
/// Models asked for JSON often wrap it in ```` ```json ... ``` ````. Only a
/// fence that *surrounds* the whole answer (leading and trailing whitespace
/// aside) is stripped, and only one: prose around a fence, or two fences,
/// leave the text as it is, so a JSON check never guesses which block the
/// model meant. The opening line is three or more backticks or tildes with
/// an optional info string; the closing line is the same character, at
/// least as many times, and nothing else.
pub fn strip_code_fence(text: &str) -> &str {
    match fenced_body(text) {
        Some(body) => &text[body],
        None => text.trim(),
    }
}

/// Where the body of the one code fence that wraps all of `text` lies
/// (the rules of [`strip_code_fence`]): the byte range between the
/// opening line's break and the break before the closing line (less a
/// `\r`), `None` when no such fence wraps the text. The `json` checks
/// and an `output` block's `unwrap_fence` share this one definition.
pub fn fenced_body(text: &str) -> Option<std::ops::Range<usize>> {
    let start = text.len() - text.trim_start().len();
    let trimmed = text.trim();
    let (first, rest) = trimmed.split_once('\n')?;
    let first = first.trim_end_matches('\r');
    let fence_char = match first.chars().next() {
        Some(c @ ('`' | '~')) => c,
        _ => return None,
    };
    let open_len = first.chars().take_while(|&c| c == fence_char).count();
    if open_len < 3 || (fence_char == '`' && first[open_len..].contains('`')) {
        return None;
    }
    let (body, last) = match rest.rsplit_once('\n') {
        Some((body, last)) => (body, last),
        None => ("", rest),
    };
    let last = last.trim();
    let close_len = last.chars().take_while(|&c| c == fence_char).count();
    if close_len < open_len || close_len != last.chars().count() {
        return None;
    }
    let body = body.strip_suffix('\r').unwrap_or(body);
    let body_start = start + (trimmed.len() - rest.len());
    Some(body_start..body_start + body.len())
}

/// `text` cut to at most `max` characters, with `…` when it was cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `text` on one line (every run of whitespace, newlines included, becomes
/// one space) and cut to `max` characters: safe to put in a list item or a
/// one-line report.
pub fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&joined, max)
}

/// `text` quoted for a message: on one line, cut, in double quotes.
pub fn quote(text: &str) -> String {
    format!("\"{}\"", one_line(text, QUOTE_CHARS))
}

/// How much of a plan's text a message quotes.
pub const QUOTE_CHARS: usize = 120;

/// The 1-based line of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_surrounding_fence_is_stripped() {
        assert_eq!(strip_code_fence("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(strip_code_fence("  \n```\n[1]\n```\n\n"), "[1]");
        assert_eq!(strip_code_fence("~~~~\n[1]\n~~~~~"), "[1]");
        assert_eq!(strip_code_fence("```\r\n[1]\r\n```\r\n"), "[1]");
        assert_eq!(strip_code_fence("```\n```"), "");
        assert_eq!(strip_code_fence("{\"a\": 1}"), "{\"a\": 1}");
    }

    #[test]
    fn anything_but_one_surrounding_fence_is_left() {
        // Prose before the fence.
        let t = "Here:\n```json\n{}\n```";
        assert_eq!(strip_code_fence(t), t);
        // Closing fence shorter than the opening one, or of the other char.
        assert_eq!(strip_code_fence("````\n{}\n```"), "````\n{}\n```");
        assert_eq!(strip_code_fence("```\n{}\n~~~"), "```\n{}\n~~~");
        // Two fences: only the outer lines are fence lines, and the body
        // keeps the inner ones, which then fail to parse as JSON.
        assert_eq!(
            strip_code_fence("```\n{}\n```\n```\n[]\n```"),
            "{}\n```\n```\n[]"
        );
        // Not a fence: two backticks, or a backtick in the info string.
        assert_eq!(strip_code_fence("``\n{}\n``"), "``\n{}\n``");
        assert_eq!(strip_code_fence("``` a`b\n{}\n```"), "``` a`b\n{}\n```");
        // A single line is never a fence.
        assert_eq!(strip_code_fence("```"), "```");
    }

    #[test]
    fn words_and_chars_count_like_the_caps() {
        assert_eq!(count_words("  one two\nthree\t four  "), 4);
        assert_eq!(count_words(""), 0);
        assert_eq!(count_chars("héllo"), 5);
    }

    #[test]
    fn quoting_is_one_line_and_bounded() {
        assert_eq!(quote("a\n\n b"), "\"a b\"");
        let long = "x".repeat(500);
        let q = quote(&long);
        assert_eq!(q.chars().count(), QUOTE_CHARS + 3);
        assert!(q.ends_with("…\""));
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hé", 2), "hé");
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }
}
