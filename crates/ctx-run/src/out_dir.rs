//! The `--out DIR` layout: one file per prompt and per output, plus
//! results.json.
//!
//! ```text
//! DIR/prompts/{id}.md   the exact prompt sent (tasks that got one)
//! DIR/outputs/{id}.md   the output (completed tasks)
//! DIR/results.json      the same object as --format json
//! ```
//!
//! A task id becomes a file name by [`file_stem`], which is injective by
//! construction, so two tasks never share a file:
//!
//! * **plain**: an id of 1 to 120 bytes made only of ASCII letters, digits,
//!   `.`, `_` and `-`, not starting with `.`, is its own name;
//! * **escaped**: any other id has each byte outside that set (and a
//!   leading `.`) written as `%XX` (upper-case hex), so `a b*` is
//!   `a%20b%2A` and `.hidden` is `%2Ehidden`. Percent-encoding is
//!   reversible, and an escaped name always holds a `%`, which no plain
//!   name does;
//! * **hashed**: when the escaped name would be longer than 120 bytes (or
//!   empty), it is cut after 56 bytes (at a whole `%XX`) and followed by
//!   `~` and the id's full SHA-256 in hex. Only hashed names hold a `~`
//!   (an id's own `~` is escaped as `%7E`), and the hash is not truncated.
//!
//! No name contains a path separator or starts with `.`, so no id can name
//! a path outside `DIR`. (On a case-insensitive file system ids differing
//! only in case, `A` and `a`, still share a file; the name rule cannot see
//! the file system.)

use std::path::{Path, PathBuf};

use ctx_deps::RunReport;
use ctx_model::TaskStatus;

use crate::atomic::{WriteError, write_atomic};
use crate::results::{ResultsJson, json_text};

/// `--out` files that could not be written: the first failure, and how
/// many others failed too.
#[derive(Debug, thiserror::Error)]
#[error("{first}{}", more_files(*.more))]
pub struct OutDirError {
    /// The first file that could not be written.
    #[source]
    pub first: WriteError,
    /// How many more files could not be written.
    pub more: usize,
}

fn more_files(more: usize) -> String {
    match more {
        0 => String::new(),
        1 => " (and 1 more file not written)".to_string(),
        n => format!(" (and {n} more files not written)"),
    }
}

/// Creates `DIR/prompts` and `DIR/outputs`, before a run starts, so that
/// a directory that cannot be created fails before anything is spent.
pub fn prepare(dir: &Path) -> Result<(), WriteError> {
    for sub in ["prompts", "outputs"] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).map_err(|source| WriteError { path: d, source })?;
    }
    Ok(())
}

/// Writes every `--out` file of `report`, each atomically. One file that
/// cannot be written does not stop the others (a directory in the way of
/// one output leaves the rest useful); the error names the first failure
/// and counts the others.
///
/// This blocks (it waits for the disk): from async code, call it on the
/// blocking pool.
pub fn write(dir: &Path, report: &RunReport) -> Result<(), OutDirError> {
    let mut files: Vec<(PathBuf, &[u8])> = Vec::new();
    for r in &report.results {
        let stem = file_stem(&r.task_id);
        if let Some(prompt) = &r.prompt {
            files.push((
                dir.join("prompts").join(format!("{stem}.md")),
                prompt.as_bytes(),
            ));
        }
        if r.status == TaskStatus::Completed {
            files.push((
                dir.join("outputs").join(format!("{stem}.md")),
                r.output.as_bytes(),
            ));
        }
    }
    let path = dir.join("results.json");
    let results = json_text(&ResultsJson::of(report)).map_err(|e| OutDirError {
        first: WriteError {
            path: path.clone(),
            source: std::io::Error::other(e),
        },
        more: 0,
    })?;
    files.push((path, results.as_bytes()));
    let mut failures = files
        .iter()
        .filter_map(|(path, bytes)| write_atomic(path, bytes).err());
    match failures.next() {
        None => Ok(()),
        Some(first) => Err(OutDirError {
            first,
            more: failures.count(),
        }),
    }
}

/// The longest stem a plain or escaped name may have (bytes).
const MAX_STEM: usize = 120;
/// How much of the escaped id a hashed name keeps before `~` and the hash.
const HASHED_PREFIX: usize = 56;

/// Bytes an id may keep as they are in a file name.
fn plain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

/// The file name stem for a task id: plain, escaped or hashed, as the
/// module docs describe. Distinct ids always get distinct stems.
pub fn file_stem(id: &str) -> String {
    if !id.is_empty() && id.len() <= MAX_STEM && !id.starts_with('.') && id.bytes().all(plain_byte)
    {
        return id.to_string();
    }
    let mut escaped = String::with_capacity(id.len() * 3);
    for (i, b) in id.bytes().enumerate() {
        if plain_byte(b) && !(i == 0 && b == b'.') {
            escaped.push(char::from(b));
        } else {
            escaped.push_str(&format!("%{b:02X}"));
        }
    }
    if !escaped.is_empty() && escaped.len() <= MAX_STEM {
        return escaped;
    }
    // Cut at a whole `%XX`: every `%` in `escaped` starts one.
    let bytes = escaped.as_bytes();
    let mut cut = HASHED_PREFIX.min(bytes.len());
    if let Some(p) = bytes[cut.saturating_sub(2)..cut]
        .iter()
        .position(|&b| b == b'%')
    {
        cut = cut.saturating_sub(2) + p;
    }
    format!(
        "{}~{}",
        &escaped[..cut],
        ctx_store::sha256_hex(id.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Undoes the escaping of an escaped (not hashed) stem.
    fn unescape(stem: &str) -> Vec<u8> {
        let b = stem.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                out.push(u8::from_str_radix(&stem[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    fn check_shape(id: &str, s: &str) {
        assert!(!s.is_empty(), "{id:?}");
        assert!(!s.starts_with('.'), "{id:?} -> {s}");
        assert!(s.len() <= MAX_STEM + 1, "{id:?} -> {s}");
        assert!(
            s.bytes().all(|b| plain_byte(b) || b == b'%' || b == b'~'),
            "{id:?} -> {s}"
        );
        if s.contains('~') {
            let (_, hash) = s.split_once('~').unwrap();
            assert_eq!(hash, ctx_store::sha256_hex(id.as_bytes()));
        } else if s.contains('%') {
            assert_eq!(unescape(s), id.as_bytes(), "{s}");
        } else {
            assert_eq!(s, id);
        }
    }

    #[test]
    fn file_stems_stay_inside_the_directory() {
        assert_eq!(file_stem("1"), "1");
        assert_eq!(file_stem("css-v2.final"), "css-v2.final");
        assert_eq!(file_stem("a b*"), "a%20b%2A");
        assert_eq!(file_stem(".hidden"), "%2Ehidden");
        assert_eq!(file_stem("ü"), "%C3%BC");
        assert_eq!(file_stem("a%20b%2A"), "a%2520b%252A");
        for id in [
            "../x",
            "a/b",
            "..",
            ".",
            "",
            "/etc/passwd",
            "a\\b",
            "ü",
            "a b",
            "~",
            &"x".repeat(300),
            &"ü".repeat(100),
        ] {
            check_shape(id, &file_stem(id));
        }
    }

    #[test]
    fn the_collisions_of_the_old_rule_are_gone() {
        // Issue 8: both pairs shared one file under the truncated-hash rule.
        assert_ne!(file_stem("a b*"), file_stem("a_b_-aaf960a8"));
        assert_ne!(file_stem(".hidden"), file_stem("_hidden-cdcb6865"));
        // Every escaped or hashed name, used as an id, is its own name.
        for id in ["a b*", ".hidden", "", &"y".repeat(200)] {
            let s = file_stem(id);
            assert_ne!(file_stem(&s), s, "{id:?}");
        }
        // Long ids sharing a prefix differ by their full hash.
        let a = format!("{}a", "x".repeat(200));
        let b = format!("{}b", "x".repeat(200));
        assert_ne!(file_stem(&a), file_stem(&b));
        // A cut never splits a `%XX`.
        let s = file_stem(&"ü".repeat(60));
        let (prefix, _) = s.split_once('~').unwrap();
        assert_eq!(prefix.len() % 3, 0, "{s}");
    }

    fn id() -> impl Strategy<Value = String> {
        // A small alphabet of the characters each rule treats differently,
        // and lengths around the 120-byte limits, so near-misses are common.
        prop_oneof![
            "[a._%~ /ü-]{0,8}",
            "[a_%.-]{110,130}",
            "[aü ]{35,45}",
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn distinct_ids_get_distinct_file_names(ids in proptest::collection::vec(id(), 1..40)) {
            let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
            let stems: std::collections::BTreeSet<String> =
                unique.iter().map(|id| file_stem(id)).collect();
            prop_assert_eq!(stems.len(), unique.len());
        }

        #[test]
        fn an_id_spelled_like_another_ids_file_name_gets_another(id in id()) {
            let s = file_stem(&id);
            check_shape(&id, &s);
            // The old rule's collision: the escaped name, taken as an id.
            prop_assert_eq!(file_stem(&s) == s, s == id);
        }
    }
}
