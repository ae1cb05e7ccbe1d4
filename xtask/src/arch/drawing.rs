//! docs/architecture.md's "Parts and arrows" section, drawn from
//! docs/architecture.toml and the manifests, so that the page and the
//! rules CI enforces are one list: `cargo xtask arch --write` redraws it,
//! and `cargo xtask arch` fails while the page holds another drawing.

use std::fmt::Write as _;

use super::intended::{FILE, Intended};
use super::resolved::Edges;

/// The page the section is drawn on.
pub const PAGE: &str = "docs/architecture.md";

/// The line that opens the drawn section.
pub const BEGIN: &str = "<!-- drawn from docs/architecture.toml by `cargo xtask arch --write`: edit that file, not this section -->";

/// The line that closes it.
pub const END: &str = "<!-- end of the drawn section -->";

/// The section's text, between [`BEGIN`] and [`END`] (both excluded).
pub fn draw(intended: &Intended, cargo: &Edges) -> String {
    let mut out = String::new();
    parts_table(&mut out, intended);
    crates_table(&mut out, intended, cargo);
    rules_list(&mut out, intended);
    out
}

/// Escapes a table cell's `|`.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// `` `a`, `b` `` or `—`.
fn names<'a>(list: impl IntoIterator<Item = &'a str>) -> String {
    let shown: Vec<String> = list.into_iter().map(|n| format!("`{n}`")).collect();
    if shown.is_empty() {
        "—".to_string()
    } else {
        shown.join(", ")
    }
}

fn parts_table(out: &mut String, intended: &Intended) {
    out.push_str("\nThe parts, bottom to top, and what each may use (a crate may always use\nthe crates of its own part):\n\n");
    out.push_str("| part | crates | uses | why |\n|---|---|---|---|\n");
    for part in &intended.parts {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            part.name,
            names(part.crates.iter().map(String::as_str)),
            names(part.uses.iter().map(String::as_str)),
            cell(&part.why)
        );
    }
}

fn crates_table(out: &mut String, intended: &Intended, cargo: &Edges) {
    out.push_str("\nDependency direction: each crate and the ctx crates it uses and is used\nby, as the Cargo.toml files say (normal and build dependencies):\n\n");
    out.push_str("| crate | part | uses | used by | note |\n|---|---|---|---|---|\n");
    for part in &intended.parts {
        for name in &part.crates {
            let uses = cargo.get(name).into_iter().flatten().map(String::as_str);
            let used_by = cargo
                .iter()
                .filter(|(_, deps)| deps.contains(name))
                .map(|(user, _)| user.as_str());
            let note = intended.notes.get(name).map_or(String::new(), |n| cell(n));
            let _ = writeln!(
                out,
                "| `{name}` | {} | {} | {} | {note} |",
                part.name,
                names(uses),
                names(used_by)
            );
        }
    }
}

fn rules_list(out: &mut String, intended: &Intended) {
    out.push_str("\nWhat no crate may reach, through any chain of dependencies (features\nresolved for that crate alone):\n\n");
    for never in &intended.nevers {
        let _ = writeln!(
            out,
            "- {} → never {}: {}.",
            names(never.from.iter().map(String::as_str)),
            names(never.reach.iter().map(String::as_str)),
            never.why
        );
    }
    out.push_str(
        "\nHow many distinct crates (name and version, itself included) a crate may\ncompile:\n\n",
    );
    for budget in &intended.budgets {
        let _ = writeln!(
            out,
            "- `{}`: at most {} ({}).",
            budget.crate_name, budget.max, budget.why
        );
    }
    let rule = &intended.functions;
    let _ = writeln!(
        out,
        "\nNo function outside test code is longer than {} lines ({}); {} allowed over it today, a list that only shrinks:\n",
        rule.max_lines,
        rule.why,
        count(rule.allow.len(), "function is", "functions are")
    );
    for key in &rule.allow {
        let _ = writeln!(out, "- `{key}`");
    }
    if rule.allow.is_empty() {
        out.push_str("- none\n");
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Where the drawn section sits in `page`: the byte range between the
/// [`BEGIN`] line's end and the [`END`] line's start.
fn section(page: &str) -> Result<std::ops::Range<usize>, String> {
    let begin = page
        .find(BEGIN)
        .ok_or_else(|| format!("{PAGE}: no drawn section (a line `{BEGIN}`)"))?
        + BEGIN.len();
    let end = page[begin..]
        .find(END)
        .ok_or_else(|| format!("{PAGE}: the drawn section is not closed (a line `{END}`)"))?;
    Ok(begin..begin + end)
}

/// A problem when `page`'s drawn section is not `drawn`.
pub fn check(page: &str, drawn: &str) -> Result<Vec<String>, String> {
    let range = section(page)?;
    let stale = page[range.clone()].trim() != drawn.trim();
    Ok(if stale {
        let line = page[..range.start].lines().count();
        vec![format!(
            "{PAGE}:{line}: the section drawn from {FILE} is out of date: run `cargo xtask arch --write`"
        )]
    } else {
        Vec::new()
    })
}

/// `page` with its drawn section replaced by `drawn`.
pub fn redraw(page: &str, drawn: &str) -> Result<String, String> {
    let range = section(page)?;
    Ok(format!(
        "{}\n{}\n{}",
        &page[..range.start],
        drawn.trim(),
        &page[range.end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_section_is_found_and_redrawn() {
        let page = format!("# A\n\ntext\n{BEGIN}\nold\n{END}\nafter\n");
        let problems = check(&page, "new").expect("section");
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with(&format!("{PAGE}:4:")),
            "{problems:?}"
        );
        let redrawn = redraw(&page, "new").expect("section");
        assert_eq!(
            redrawn,
            format!("# A\n\ntext\n{BEGIN}\nnew\n{END}\nafter\n")
        );
        assert!(check(&redrawn, "new").expect("section").is_empty());
    }

    #[test]
    fn a_page_without_the_section_is_an_error() {
        let err = check("# A\n", "x").expect_err("no section");
        assert!(err.starts_with(PAGE), "{err}");
        let err = check(&format!("{BEGIN}\nx\n"), "x").expect_err("not closed");
        assert!(err.contains("not closed"), "{err}");
    }
}
