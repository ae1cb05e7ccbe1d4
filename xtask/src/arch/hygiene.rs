//! The repository's hygiene around the architecture: every relative link
//! in the docs resolves, every path a Cargo.toml comment names exists, and
//! every `cargo install` the docs give is `--locked`.

use std::collections::BTreeSet;
use std::path::Path;

use cargo_metadata::Metadata;

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The relative link targets in a markdown text, with their lines. Links
/// with a scheme (`https:`, `mailto:`) and same-file anchors are left out;
/// `#anchor` and `?query` are cut from the rest.
pub fn relative_links(text: &str) -> Vec<(usize, String)> {
    use pulldown_cmark::{Event, Options, Parser, Tag};
    let mut links = Vec::new();
    for (event, range) in Parser::new_ext(text, Options::all()).into_offset_iter() {
        let dest = match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => dest_url,
            _ => continue,
        };
        let dest = dest.split(['#', '?']).next().unwrap_or_default();
        let has_scheme = dest.split_once(':').is_some_and(|(s, _)| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        });
        if dest.is_empty() || has_scheme || dest.starts_with("//") {
            continue;
        }
        links.push((line_of(text, range.start), dest.to_string()));
    }
    links
}

/// Broken relative links in README.md and docs/*.md, as `file:line`.
pub fn check_links(root: &Path) -> Result<Vec<String>, String> {
    let mut files = vec![root.join("README.md")];
    let docs = root.join("docs");
    let entries = std::fs::read_dir(&docs).map_err(|e| format!("{}: {e}", docs.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("{}: {e}", docs.display()))?
            .path();
        if path.extension().is_some_and(|x| x == "md") {
            files.push(path);
        }
    }
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let dir = file.parent().unwrap_or(root);
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line, dest) in relative_links(&text) {
            if !dir.join(&dest).exists() {
                problems.push(format!(
                    "{shown}:{line}: link to `{dest}`, which does not exist"
                ));
            }
        }
    }
    Ok(problems)
}

/// `cargo install` commands without `--locked`, as `file:line`, in
/// README.md, docs/*.md, scripts/*.sh and xtask/src/*.rs. Without it cargo
/// resolves the dependencies again and builds versions the lockfile never
/// tested (issue 26: 33 crates on a fresh machine). A command wrapped over
/// two lines counts its next line too.
pub fn check_locked_installs(root: &Path) -> Result<Vec<String>, String> {
    let mut files = vec![root.join("README.md")];
    for (dir, ext) in [("docs", "md"), ("scripts", "sh"), ("xtask/src", "rs")] {
        let dir = root.join(dir);
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if path.extension().is_some_and(|x| x == ext) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        problems.extend(
            unlocked_installs(&text)
                .into_iter()
                .map(|line| format!("{shown}:{line}: `cargo install` without --locked")),
        );
    }
    Ok(problems)
}

/// The 1-based lines of `text` where a `cargo install ` command has no
/// `--locked` on its line (after it) or the next.
pub fn unlocked_installs(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    // Spelled in two parts so this file does not name the command itself.
    let command = ["cargo", " install "].concat();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find(&command) else {
            continue;
        };
        let next = lines.get(i + 1).copied().unwrap_or("");
        if !line[at..].contains("--locked") && !next.contains("--locked") {
            found.push(i + 1);
        }
    }
    found
}

/// The comment of a TOML line (after a `#` outside a string), if any.
pub(super) fn toml_comment(line: &str) -> Option<&str> {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') => return Some(&line[i + 1..]),
            _ => {}
        }
    }
    None
}

/// Words of a comment that look like repository paths: they hold a `/`,
/// no `://` or glob, and end in a file name with an extension or start at
/// a top-level directory of the repository (`docs/`, `crates/`, ...).
pub fn path_like_words(comment: &str, top_dirs: &BTreeSet<String>) -> Vec<String> {
    comment
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "`'\"()[],;:.".contains(c)))
        .filter(|w| w.contains('/') && !w.contains("://") && !w.contains('*'))
        .filter(|w| {
            let first = w.split('/').next().unwrap_or_default();
            let file = w.rsplit('/').next().unwrap_or_default();
            top_dirs.contains(first)
                || file.rsplit_once('.').is_some_and(|(stem, ext)| {
                    !stem.is_empty()
                        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
                        && ext.chars().all(|c| c.is_ascii_alphanumeric())
                })
        })
        .map(|w| w.split('#').next().unwrap_or_default().to_string())
        .collect()
}

/// Paths named in Cargo.toml comments (the root's and every member's) that
/// exist neither from the repository root nor from the manifest's
/// directory.
pub fn check_manifest_comments(root: &Path, meta: &Metadata) -> Result<Vec<String>, String> {
    let top_dirs: BTreeSet<String> = std::fs::read_dir(root)
        .map_err(|e| format!("{}: {e}", root.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect();
    let mut manifests = vec![root.join("Cargo.toml")];
    manifests.extend(
        meta.workspace_packages()
            .iter()
            .map(|p| p.manifest_path.clone().into_std_path_buf()),
    );
    manifests.sort();
    let mut problems = Vec::new();
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("{}: {e}", manifest.display()))?;
        let dir = manifest.parent().unwrap_or(root);
        let shown = manifest
            .strip_prefix(root)
            .unwrap_or(&manifest)
            .display()
            .to_string();
        for (i, line) in text.lines().enumerate() {
            let Some(comment) = toml_comment(line) else {
                continue;
            };
            for word in path_like_words(comment, &top_dirs) {
                if !root.join(&word).exists() && !dir.join(&word).exists() {
                    problems.push(format!(
                        "{shown}:{}: comment names `{word}`, which does not exist",
                        i + 1
                    ));
                }
            }
        }
    }
    Ok(problems)
}
