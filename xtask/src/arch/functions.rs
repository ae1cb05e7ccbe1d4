//! The function-size rule of docs/architecture.toml: no function outside
//! test code is longer than `[functions].max_lines`, but those on the
//! allowlist, and the allowlist only shrinks (a listed function that is now
//! short enough, or gone, is a problem until it is taken off), so the list
//! is kept honest and every split is kept.
//!
//! Lines are counted on rustfmt's layout, from the `fn` line to the brace
//! at the same indentation that closes it. Test code is left out: files
//! named `tests.rs` or `*_tests.rs`, and `#[cfg(test)]` modules written
//! inline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::intended::{FILE, Functions};

/// Where the rule applies: every crate's sources and xtask's.
fn source_dirs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let crates = root.join("crates");
    let mut dirs = vec![root.join("xtask/src")];
    let entries = std::fs::read_dir(&crates).map_err(|e| format!("{}: {e}", crates.display()))?;
    for entry in entries {
        let src = entry
            .map_err(|e| format!("{}: {e}", crates.display()))?
            .path()
            .join("src");
        if src.is_dir() {
            dirs.push(src);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Whether `path` holds only tests (`tests.rs`, `*_tests.rs`).
fn is_test_file(path: &Path) -> bool {
    path.file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|s| s == "tests" || s.ends_with("_tests"))
}

/// The 1-based line ranges of the `#[cfg(test)]` modules written inline in
/// `text`.
pub fn test_module_lines(text: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut ranges = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        let Some(next) = lines.get(i + 1) else {
            continue;
        };
        let trimmed = next.trim_start();
        let is_mod = ["mod ", "pub mod ", "pub(crate) mod "]
            .iter()
            .any(|p| trimmed.starts_with(p));
        if !is_mod || !trimmed.ends_with('{') {
            continue;
        }
        let close = format!("{}}}", " ".repeat(next.len() - trimmed.len()));
        if let Some(end) = lines[i + 1..].iter().position(|l| l.trim_end() == close) {
            ranges.push((i + 1, i + 2 + end));
        }
    }
    ranges
}

/// Every function outside test code under `root`'s sources: `path::fn`
/// (path from the root) → `(line, length)` of each function of that name
/// in the file.
pub fn non_test_functions(root: &Path) -> Result<BTreeMap<String, Vec<(usize, usize)>>, String> {
    let mut found: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
    for dir in source_dirs(root)? {
        for path in rust_files(&dir)?.into_iter().filter(|p| !is_test_file(p)) {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let tests = test_module_lines(&text);
            let shown = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            for (name, line, len) in function_lengths(&text) {
                if tests.iter().any(|(a, b)| (*a..=*b).contains(&line)) {
                    continue;
                }
                found
                    .entry(format!("{shown}::{name}"))
                    .or_default()
                    .push((line, len));
            }
        }
    }
    Ok(found)
}

/// Every function over the limit that the allowlist does not hold, and
/// every allowlist entry that no longer needs to be there.
pub fn check_functions(
    found: &BTreeMap<String, Vec<(usize, usize)>>,
    rule: &Functions,
) -> Vec<String> {
    let max = rule.max_lines;
    let allowed: BTreeSet<&str> = rule.allow.iter().map(String::as_str).collect();
    let mut problems = Vec::new();
    for (key, at) in found {
        let (path, name) = key.rsplit_once("::").unwrap_or((key, ""));
        for (line, len) in at.iter().filter(|(_, len)| *len > max) {
            if !allowed.contains(key.as_str()) {
                problems.push(format!(
                    "{path}:{line}: fn {name} is {len} lines, more than {max} ({FILE}, [functions]: split it)"
                ));
            }
        }
    }
    for key in &rule.allow {
        let longest = found
            .get(key)
            .and_then(|at| at.iter().map(|(_, len)| *len).max());
        match longest {
            None => problems.push(format!(
                "{FILE}: `{key}` is on the allowlist but no such function exists: take it off"
            )),
            Some(len) if len <= max => problems.push(format!(
                "{FILE}: `{key}` is on the allowlist but is {len} lines now, within {max}: take it off"
            )),
            Some(_) => {}
        }
    }
    problems
}

/// Every function in `text` (Rust source, formatted by rustfmt): its name,
/// first line (1-based) and length in lines, from the `fn` line to the
/// brace at the same indentation that closes it. A declaration without a
/// body is none.
pub fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let after_vis = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|v| trimmed.strip_prefix(v))
            .unwrap_or(trimmed);
        let after_async = after_vis.strip_prefix("async ").unwrap_or(after_vis);
        let Some(rest) = after_async.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{}}}", " ".repeat(indent));
        let mut end = None;
        for (j, l) in lines.iter().enumerate().skip(i) {
            if l.trim_end().ends_with(';') && j == i {
                break;
            }
            if l.starts_with(&close) && l[indent..].starts_with('}') {
                end = Some(j);
                break;
            }
        }
        if let Some(end) = end {
            out.push((name, i + 1, end - i + 1));
        }
    }
    out
}

/// The `.rs` files under `dir`, sorted.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", d.display()))?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
