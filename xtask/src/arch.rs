//! The architecture check: the rules of docs/architecture.md, enforced.
//!
//! A document that describes the crate graph drifts the day someone adds a
//! dependency without reading it. So the tests at the bottom of this file
//! (run by `cargo xtask test`, like every other test) and `cargo xtask
//! arch` hold the repository to four things:
//!
//! 1. the "Dependency direction" block of docs/architecture.md lists every
//!    workspace crate and exactly the ctx crates each one's Cargo.toml
//!    depends on (normal and build dependencies; dev-dependencies are test
//!    scaffolding and not part of the architecture);
//! 2. the forbidden edges stated under that block do not exist in the
//!    resolved dependency graph (`cargo metadata`, normal dependencies,
//!    transitively): no library reaches ctx-cli, ctx-history, ctx-prompt
//!    and ctx-checks never reach tokio or reqwest;
//! 3. the adapters (ctx-store-sqlite, ctx-engine-openai) reach neither
//!    markdown parsing, prompt assembly nor the graph code — issue 9 item
//!    3, which fails until the seam traits move, so its test is ignored;
//! 4. every relative link in docs/*.md and README.md, and every repository
//!    path named in a Cargo.toml comment, points at a file that exists.
//!
//! The graph comes from `cargo metadata` through the `cargo_metadata`
//! crate (typed, maintained by the Cargo team's ecosystem, and it pulls in
//! only camino, cargo-platform and semver beyond what we have); links are
//! found with pulldown-cmark, the parser the docs are written for, so a
//! link inside a code block is not a link.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, PackageId};

/// Crate name → the ctx crates it depends on.
pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// A rule over the resolved graph: `from` must not reach any of `never`
/// through normal dependencies.
pub struct Rule {
    /// Where docs/architecture.md states the rule, for the failure message.
    pub why: &'static str,
    /// The crates the rule constrains.
    pub from: &'static [&'static str],
    /// Packages none of them may reach.
    pub never: &'static [&'static str],
}

/// The library crates of the workspace: everything but the binary and
/// the maintainer tool.
pub const LIBRARIES: &[&str] = &[
    "ctx-model",
    "ctx-tokens",
    "ctx-history",
    "ctx-prompt",
    "ctx-deps",
    "ctx-store-sqlite",
    "ctx-engine-openai",
    "ctx-report",
    "ctx-cost",
    "ctx-run",
    "ctx-table",
    "ctx-worker",
    "ctx-engine",
    "ctx-store",
    "ctx-checks",
    "ctx-store-postgres",
];

/// The rules that hold today (docs/architecture.md, under "Dependency
/// direction").
pub const RULES: &[Rule] = &[
    Rule {
        why: "library crates never depend on ctx-cli",
        from: LIBRARIES,
        never: &["ctx-cli"],
    },
    Rule {
        why: "ctx-history, ctx-prompt and ctx-checks depend on neither tokio nor an HTTP client",
        from: &["ctx-history", "ctx-prompt", "ctx-checks"],
        never: &["tokio", "reqwest"],
    },
    Rule {
        why: "adapters pull in neither markdown parsing, prompt assembly nor the graph code",
        from: &[
            "ctx-store-sqlite",
            "ctx-store-postgres",
            "ctx-engine-openai",
        ],
        never: &[
            "pulldown-cmark",
            "petgraph",
            "ctx-history",
            "ctx-prompt",
            "ctx-deps",
        ],
    },
    Rule {
        why: "the use-case crate composes the seams and chooses no engine or shared store",
        from: &["ctx-run"],
        never: &[
            "ctx-engine-openai",
            "reqwest",
            "ctx-store-postgres",
            "tokio-postgres",
        ],
    },
    Rule {
        why: "the seam crates hold traits and data only",
        from: &["ctx-engine", "ctx-store"],
        never: &[
            "tokio",
            "pulldown-cmark",
            "petgraph",
            "ctx-prompt",
            "ctx-deps",
        ],
    },
];

/// The repository root (xtask's parent directory).
pub fn root() -> PathBuf {
    crate::root()
}

/// `cargo metadata` for the workspace, with the resolved graph.
pub fn metadata(root: &Path) -> Result<Metadata, String> {
    MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .exec()
        .map_err(|e| format!("cargo metadata: {e}"))
}

/// Parses the fenced block after "Dependency direction" in
/// docs/architecture.md. Each line is `crate (none) ...` or
/// `crate → a, b, c   (an optional note)`.
pub fn doc_edges(text: &str) -> Result<Edges, String> {
    let start = text
        .find("Dependency direction")
        .ok_or("docs/architecture.md: no \"Dependency direction\" paragraph")?;
    let base_line = text[..start].lines().count();
    let mut lines = text[start..].lines().enumerate();
    lines
        .by_ref()
        .find(|(_, l)| l.trim_start().starts_with("```"))
        .ok_or("docs/architecture.md: no fenced block after \"Dependency direction\"")?;
    let mut edges = Edges::new();
    for (i, line) in lines {
        let at = base_line + i + 1;
        let line = line.trim();
        if line.starts_with("```") {
            return Ok(edges);
        }
        if line.is_empty() {
            continue;
        }
        let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let deps: BTreeSet<String> = if let Some(list) = rest.strip_prefix('→') {
            let list = list.split('(').next().unwrap_or_default();
            list.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(String::from)
                .collect()
        } else if rest.starts_with("(none)") {
            BTreeSet::new()
        } else {
            return Err(format!(
                "docs/architecture.md:{at}: expected `{name} → deps` or `{name} (none)`, got `{line}`"
            ));
        };
        if deps.is_empty() && rest.starts_with('→') {
            return Err(format!(
                "docs/architecture.md:{at}: `{name} →` lists no crate"
            ));
        }
        if edges.insert(name.to_string(), deps).is_some() {
            return Err(format!("docs/architecture.md:{at}: `{name}` listed twice"));
        }
    }
    Err("docs/architecture.md: the dependency-direction block is not closed".into())
}

/// The ctx crates each workspace member depends on, as its Cargo.toml says
/// (normal and build dependencies).
pub fn cargo_edges(meta: &Metadata) -> Edges {
    let members: BTreeSet<&str> = meta
        .workspace_packages()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    meta.workspace_packages()
        .iter()
        .map(|p| {
            let deps = p
                .dependencies
                .iter()
                .filter(|d| d.kind != DependencyKind::Development)
                .filter(|d| members.contains(d.name.as_str()))
                .map(|d| d.name.clone())
                .collect();
            (p.name.to_string(), deps)
        })
        .collect()
}

/// Every difference between the documented and the real edges, one line
/// each.
pub fn compare_edges(doc: &Edges, cargo: &Edges) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, deps) in cargo {
        let Some(listed) = doc.get(name) else {
            problems.push(format!(
                "docs/architecture.md: workspace crate `{name}` is missing from the dependency-direction block"
            ));
            continue;
        };
        for d in deps.difference(listed) {
            problems.push(format!(
                "edge `{name} → {d}` is in crates' Cargo.toml but not in docs/architecture.md"
            ));
        }
        for d in listed.difference(deps) {
            problems.push(format!(
                "edge `{name} → {d}` is in docs/architecture.md but not in {name}'s Cargo.toml"
            ));
        }
    }
    for name in doc.keys().filter(|n| !cargo.contains_key(*n)) {
        problems.push(format!(
            "docs/architecture.md lists `{name}`, which is not a workspace crate"
        ));
    }
    problems
}

/// The resolved graph as package name → names it depends on normally.
/// Names, not ids: the rules are about packages whatever their version.
fn normal_graph(meta: &Metadata) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let resolve = meta
        .resolve
        .as_ref()
        .ok_or("cargo metadata returned no resolved graph")?;
    let name_of = |id: &PackageId| meta[id].name.to_string();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in &resolve.nodes {
        let deps = graph.entry(name_of(&node.id)).or_default();
        for dep in &node.deps {
            if dep
                .dep_kinds
                .iter()
                .any(|k| k.kind == DependencyKind::Normal)
            {
                deps.insert(name_of(&dep.pkg));
            }
        }
    }
    Ok(graph)
}

/// The shortest chain `from → … → to`, if `to` is reachable.
fn path_to(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        if at == to {
            let mut chain = vec![to.to_string()];
            let mut cur = to;
            while let Some(&p) = parent.get(cur) {
                chain.push(p.to_string());
                cur = p;
            }
            chain.reverse();
            return Some(chain);
        }
        for next in graph.get(at).into_iter().flatten() {
            if next != from && !parent.contains_key(next.as_str()) {
                parent.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Every violation of `rules` in the resolved graph, with the chain of
/// dependencies that causes it.
pub fn check_rules(meta: &Metadata, rules: &[Rule]) -> Result<Vec<String>, String> {
    let graph = normal_graph(meta)?;
    let mut problems = Vec::new();
    for rule in rules {
        for from in rule.from {
            if !graph.contains_key(*from) {
                problems.push(format!("rule \"{}\": no crate `{from}`", rule.why));
                continue;
            }
            for never in rule.never {
                if let Some(chain) = path_to(&graph, from, never) {
                    problems.push(format!(
                        "forbidden dependency ({}): {}",
                        rule.why,
                        chain.join(" → ")
                    ));
                }
            }
        }
    }
    Ok(problems)
}

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

/// The comment of a TOML line (after a `#` outside a string), if any.
fn toml_comment(line: &str) -> Option<&str> {
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

/// `cargo xtask arch`: the dependency block, the forbidden edges, the links.
pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask arch".into());
    }
    let root = root();
    let meta = metadata(&root)?;
    let doc = std::fs::read_to_string(root.join("docs/architecture.md"))
        .map_err(|e| format!("docs/architecture.md: {e}"))?;
    let mut problems = compare_edges(&doc_edges(&doc)?, &cargo_edges(&meta));
    problems.extend(check_rules(&meta, RULES)?);
    problems.extend(check_links(&root)?);
    problems.extend(check_manifest_comments(&root, &meta)?);
    if problems.is_empty() {
        eprintln!("architecture: dependency block, forbidden edges and links all hold");
        Ok(())
    } else {
        Err(format!(
            "{}\n{} problem(s)",
            problems.join("\n"),
            problems.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_none(what: &str, problems: Vec<String>) {
        assert!(
            problems.is_empty(),
            "{what}:\n  {}\n(the rules: docs/architecture.md, \"Dependency direction\" and after)",
            problems.join("\n  ")
        );
    }

    fn meta() -> Metadata {
        metadata(&root()).expect("cargo metadata")
    }

    #[test]
    fn dependency_block_matches_the_manifests() {
        let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("read");
        let doc = doc_edges(&doc).expect("parse the block");
        assert_none(
            "docs/architecture.md and the Cargo.toml files disagree",
            compare_edges(&doc, &cargo_edges(&meta())),
        );
    }

    #[test]
    fn no_forbidden_dependency() {
        assert_none(
            "forbidden dependencies",
            check_rules(&meta(), RULES).expect("graph"),
        );
    }

    #[test]
    fn every_relative_link_resolves() {
        assert_none("broken links", check_links(&root()).expect("read docs"));
    }

    #[test]
    fn every_path_in_a_manifest_comment_exists() {
        assert_none(
            "Cargo.toml comments name missing files",
            check_manifest_comments(&root(), &meta()).expect("read manifests"),
        );
    }

    #[test]
    fn the_block_parser_reads_notes_none_and_lists() {
        let text = "x\nDependency direction (each crate):\n\n```\n\
                    a            (none)     (a note)\n\
                    b          → a            (only for X, and Y)\n\
                    c          → a, b\n```\nmore\n";
        let edges = doc_edges(text).expect("parse");
        assert_eq!(edges["a"], BTreeSet::new());
        assert_eq!(edges["b"], BTreeSet::from(["a".to_string()]));
        assert_eq!(
            edges["c"],
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
        let bad = "Dependency direction\n```\na uses b\n```\n";
        let err = doc_edges(bad).expect_err("not an edge line");
        assert!(err.contains("docs/architecture.md:3"), "{err}");
    }

    #[test]
    fn a_missing_an_extra_and_an_unlisted_edge_are_each_reported() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let doc = Edges::from([
            ("a".into(), set(&[])),
            ("b".into(), set(&["a", "z"])),
            ("gone".into(), set(&[])),
        ]);
        let cargo = Edges::from([
            ("a".into(), set(&[])),
            ("b".into(), set(&["c"])),
            ("c".into(), set(&[])),
        ]);
        let p = compare_edges(&doc, &cargo).join("\n");
        assert!(
            p.contains("`b → c` is in crates' Cargo.toml but not"),
            "{p}"
        );
        assert!(
            p.contains("`b → z` is in docs/architecture.md but not"),
            "{p}"
        );
        assert!(p.contains("`c` is missing"), "{p}");
        assert!(p.contains("lists `gone`"), "{p}");
    }

    #[test]
    fn reachability_names_the_whole_chain() {
        let g: BTreeMap<String, BTreeSet<String>> = [
            ("a", vec!["b"]),
            ("b", vec!["c", "a"]),
            ("c", vec!["tokio"]),
            ("tokio", vec![]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        assert_eq!(
            path_to(&g, "a", "tokio"),
            Some(vec!["a".into(), "b".into(), "c".into(), "tokio".into()])
        );
        assert_eq!(path_to(&g, "c", "a"), None);
    }

    #[test]
    fn links_skip_code_urls_and_anchors() {
        let text = "see [a](docs/a.md#x) and [b](https://e.org/b.md)\n\
                    [c](#local) ![img](pic.png)\n\n```\n[d](nope.md)\n```\n\
                    `[e](nope2.md)` [f][ref]\n\n[ref]: ../f.md\n";
        let links = relative_links(text);
        assert_eq!(
            links,
            vec![
                (1, "docs/a.md".to_string()),
                (2, "pic.png".to_string()),
                (7, "../f.md".to_string())
            ]
        );
    }

    #[test]
    fn comment_paths_are_recognised() {
        let top = BTreeSet::from(["docs".to_string(), "crates".to_string()]);
        let words = path_like_words(
            " see docs/performance.md#x, (crates/ctx-cli/src/lib.rs). src/bin/ctx.rs \
             fixtures/*/goldens.toml https://e.org/a.md and/or rustls/ring HTTP/1.1",
            &top,
        );
        assert_eq!(
            words,
            vec![
                "docs/performance.md",
                "crates/ctx-cli/src/lib.rs",
                "src/bin/ctx.rs"
            ]
        );
        assert_eq!(
            toml_comment(r##"a = "x#y" # docs/a.md"##),
            Some(" docs/a.md")
        );
        assert_eq!(toml_comment("a = 1"), None);
    }
}
