//! The one JSON layout of ctx: pretty-printed, two-space indents, keys in
//! the order the types declare them, a final newline. Every `--format
//! json` output, `results.json`, `ctx schema`, `ctx plan cost` and `ctx
//! prices` are written by [`json_text`], so they agree on layout and on
//! what a failure is: an error to report, never an empty line or a
//! made-up document.

use serde::Serialize;

/// `value` as pretty-printed JSON with a trailing newline.
///
/// Fails only for a value serde cannot encode (a map with non-string
/// keys, a serializer that reports an error); none of ctx's own output
/// types is one, and the caller reports the error as it reports a write
/// that failed.
///
/// ```
/// assert_eq!(ctx_model::json_text(&[1, 2]).unwrap(), "[\n  1,\n  2\n]\n");
/// ```
pub fn json_text<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_value_serde_cannot_encode_is_an_error_not_text() {
        let mut bad = BTreeMap::new();
        bad.insert(vec![1u8], "a map keyed by a list");
        assert!(json_text(&bad).is_err());
        assert_eq!(
            json_text(&serde_json::json!({"a": 1})).unwrap(),
            "{\n  \"a\": 1\n}\n"
        );
    }
}
