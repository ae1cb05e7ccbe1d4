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
//!    resolved dependency graph of each constrained crate (normal and
//!    build dependencies, transitively): no library reaches ctx-cli,
//!    ctx-history, ctx-prompt and ctx-checks never reach tokio or reqwest,
//!    the adapters reach neither markdown parsing, prompt assembly nor the
//!    executor, and the vocabulary (ctx-model), the seams (ctx-engine,
//!    ctx-store) and ctx-report reach no regex or JSON Schema engine, no
//!    BPE tables, no check compiler and no pricing, the vocabulary and
//!    the seams reach no fence, and the fence (ctx-fence) reaches no other
//!    ctx crate ([`RULES`]);
//! 3. the seams stay small: each compiles at most [`SEAM_MAX_CRATES`]
//!    distinct crates ([`BUDGETS`]), so an engine or store written outside
//!    this repo pays for traits and data, not for ctx's machinery; and so
//!    does the fence (at most [`FENCE_MAX_CRATES`]), which every crate
//!    that fences untrusted text compiles;
//! 4. every relative link in docs/*.md and README.md, and every repository
//!    path named in a Cargo.toml comment, points at a file that exists;
//! 5. every `cargo install` the docs and scripts give is `--locked`
//!    ([`check_locked_installs`]).
//!
//! The manifests come from `cargo metadata` through the `cargo_metadata`
//! crate (typed, maintained by the Cargo team's ecosystem, and it pulls in
//! only camino, cargo-platform and semver beyond what we have). Each
//! constrained crate's graph is what `cargo tree -p CRATE -e normal,build`
//! prints: features resolved for that crate alone and the host target,
//! which is what a program depending on it compiles (`cargo metadata`'s
//! graph unifies the features of the whole workspace, so it would charge
//! the seams with ctx-model's `parse` feature that only other crates turn
//! on). Links are found with pulldown-cmark, the parser the docs are
//! written for, so a link inside a code block is not a link.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cargo_metadata::{DependencyKind, Metadata, MetadataCommand};

/// Crate name → the ctx crates it depends on.
pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// A rule over the resolved graph: `from` must not reach any of `never`
/// through normal or build dependencies.
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
    "ctx-engine-command",
    "ctx-report",
    "ctx-cost",
    "ctx-run",
    "ctx-table",
    "ctx-worker",
    "ctx-engine",
    "ctx-store",
    "ctx-checks",
    "ctx-store-postgres",
    "ctx-fence",
];

/// The rules that hold today (docs/architecture.md, under "Dependency
/// direction").
pub const RULES: &[Rule] = &[
    // xtask linked ctx-cli for `cargo xtask man` until issue 26: every
    // `cargo xtask` then compiled ctx-cli's whole dependency tree a second
    // time, its features unified with xtask's own dependencies (clap with
    // `env`, serde_json with `unbounded_depth`), beside the one `cargo
    // build -p ctx-cli` compiles. xtask drives the built `ctx` instead.
    Rule {
        why: "xtask links no ctx crate: it drives the `ctx` binary (docs/performance.md, \"The first hour\")",
        from: &["xtask"],
        never: &["ctx-cli"],
    },
    Rule {
        why: "xtask links no ctx library either, for the same reason",
        from: &["xtask"],
        never: LIBRARIES,
    },
    Rule {
        why: "library crates never depend on ctx-cli",
        from: LIBRARIES,
        never: &["ctx-cli"],
    },
    Rule {
        why: "ctx-history, ctx-prompt, ctx-checks and ctx-fence depend on neither tokio nor an HTTP client",
        from: &["ctx-history", "ctx-prompt", "ctx-checks", "ctx-fence"],
        never: &["tokio", "reqwest"],
    },
    Rule {
        why: "adapters pull in neither markdown parsing, prompt assembly nor the executor",
        from: &[
            "ctx-store-sqlite",
            "ctx-store-postgres",
            "ctx-engine-openai",
            "ctx-engine-command",
        ],
        never: &["pulldown-cmark", "ctx-history", "ctx-prompt", "ctx-deps"],
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
        never: &["tokio", "pulldown-cmark", "ctx-prompt", "ctx-deps"],
    },
    Rule {
        why: "the vocabulary, the seams and the report compile no regex or JSON Schema engine, no BPE tables, no check compiler and no pricing",
        from: &["ctx-model", "ctx-engine", "ctx-store", "ctx-report"],
        never: &[
            "regex",
            "jsonschema",
            "tiktoken-rs",
            "ctx-checks",
            "ctx-cost",
        ],
    },
    Rule {
        why: "the vocabulary and the seams fence nothing: prompts are written above them",
        from: &["ctx-model", "ctx-engine", "ctx-store"],
        never: &["ctx-fence"],
    },
    Rule {
        why: "the fence is Unicode data and a matcher: no other ctx crate, no regex engine, no markdown parser",
        from: &["ctx-fence"],
        never: &[
            "ctx-model",
            "ctx-tokens",
            "ctx-history",
            "ctx-prompt",
            "ctx-checks",
            "ctx-deps",
            "regex",
            "pulldown-cmark",
        ],
    },
];

/// The most distinct crates (name and version) a seam may compile.
pub const SEAM_MAX_CRATES: usize = 40;

/// A bound on how many distinct crates (name and version) `crate_name`'s
/// resolved graph holds, itself included: the lines of `cargo tree -p
/// CRATE -e normal,build --prefix none`, deduplicated.
pub struct Budget {
    /// Where docs/architecture.md states the bound, for the failure message.
    pub why: &'static str,
    /// The crate bounded.
    pub crate_name: &'static str,
    /// The most distinct crates it may compile.
    pub max: usize,
}

/// The bounds that hold today (docs/architecture.md, "The vocabulary crate").
pub const BUDGETS: &[Budget] = &[
    Budget {
        why: "an engine written outside this repo compiles the engine seam only",
        crate_name: "ctx-engine",
        max: SEAM_MAX_CRATES,
    },
    Budget {
        why: "a store written outside this repo compiles the store seam only",
        crate_name: "ctx-store",
        max: SEAM_MAX_CRATES,
    },
    Budget {
        why: "the fence stays small: everything that fences untrusted text compiles it",
        crate_name: "ctx-fence",
        max: FENCE_MAX_CRATES,
    },
];

/// The most distinct crates (name and version) the fence may compile: 18
/// when it was split out of ctx-prompt (its Unicode tables, and htmlize's
/// entity map at build time only).
pub const FENCE_MAX_CRATES: usize = 20;

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

/// One crate's resolved dependency tree, as `cargo tree -p CRATE -e
/// normal,build --prefix depth` prints it: each line a depth, a package
/// name and its version, in depth-first order. cargo prints a package's
/// dependencies once (later occurrences end in `(*)`), so every package
/// reachable from the root appears, the first time under a chain of its
/// ancestors.
pub struct Tree {
    /// `(depth, name, version)`, the root at depth 0.
    pub lines: Vec<(usize, String, String)>,
}

impl Tree {
    /// Reads `cargo tree --prefix depth` output.
    pub fn parse(text: &str) -> Result<Tree, String> {
        let mut lines = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let depth = line[..digits]
                .parse()
                .map_err(|_| format!("cargo tree: no depth on `{line}`"))?;
            let mut words = line[digits..].split_whitespace();
            let (Some(name), Some(version)) = (words.next(), words.next()) else {
                return Err(format!("cargo tree: no name and version on `{line}`"));
            };
            lines.push((depth, name.to_string(), version.to_string()));
        }
        Ok(Tree { lines })
    }

    /// Every distinct package, as `name version`, the root included.
    pub fn distinct(&self) -> BTreeSet<String> {
        self.lines
            .iter()
            .map(|(_, name, version)| format!("{name} {version}"))
            .collect()
    }

    /// The chain `root → … → name` to the first occurrence of `name`.
    pub fn chain_to(&self, name: &str) -> Option<Vec<String>> {
        let mut stack: Vec<&str> = Vec::new();
        for (depth, at, _) in &self.lines {
            stack.truncate(*depth);
            stack.push(at);
            if at == name && *depth > 0 {
                return Some(stack.iter().map(|s| s.to_string()).collect());
            }
        }
        None
    }
}

/// `crate_name`'s resolved tree from `cargo tree` (normal and build
/// dependencies, host target, features resolved for that crate alone).
pub fn cargo_tree(root: &Path, crate_name: &str) -> Result<Tree, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(root)
        .args([
            "tree",
            "-p",
            crate_name,
            "-e",
            "normal,build",
            "--prefix",
            "depth",
        ])
        .output()
        .map_err(|e| format!("cargo tree -p {crate_name}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree -p {crate_name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Tree::parse(&String::from_utf8_lossy(&out.stdout))
}

/// The trees of the crates `rules` and `budgets` constrain, each read once.
pub fn trees(
    root: &Path,
    rules: &[Rule],
    budgets: &[Budget],
) -> Result<BTreeMap<String, Tree>, String> {
    let names: BTreeSet<&str> = rules
        .iter()
        .flat_map(|r| r.from.iter().copied())
        .chain(budgets.iter().map(|b| b.crate_name))
        .collect();
    names
        .into_iter()
        .map(|n| cargo_tree(root, n).map(|t| (n.to_string(), t)))
        .collect()
}

/// Every violation of `rules`, with the chain of dependencies that causes
/// it.
pub fn check_rules(trees: &BTreeMap<String, Tree>, rules: &[Rule]) -> Vec<String> {
    let mut problems = Vec::new();
    for rule in rules {
        for from in rule.from {
            let Some(tree) = trees.get(*from) else {
                problems.push(format!("rule \"{}\": no crate `{from}`", rule.why));
                continue;
            };
            for never in rule.never {
                if let Some(chain) = tree.chain_to(never) {
                    problems.push(format!(
                        "forbidden dependency ({}): {}",
                        rule.why,
                        chain.join(" → ")
                    ));
                }
            }
        }
    }
    problems
}

/// Every crate over its budget, with the count and the crates counted.
pub fn check_budgets(trees: &BTreeMap<String, Tree>, budgets: &[Budget]) -> Vec<String> {
    let mut problems = Vec::new();
    for budget in budgets {
        let Some(tree) = trees.get(budget.crate_name) else {
            problems.push(format!(
                "budget \"{}\": no crate `{}`",
                budget.why, budget.crate_name
            ));
            continue;
        };
        let distinct = tree.distinct();
        if distinct.len() > budget.max {
            problems.push(format!(
                "{} compiles {} distinct crates, more than {} ({}): {}",
                budget.crate_name,
                distinct.len(),
                budget.max,
                budget.why,
                distinct.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    problems
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

/// `cargo xtask arch`: the dependency block, the forbidden edges, the seam
/// sizes, the links.
/// The most lines a function of ctx-cli may have, its signature and
/// closing brace included: the CLI parses flags, calls a library and
/// prints, and a longer function is a use case that belongs in a library
/// (docs/architecture.md, "ctx-cli").
pub const CLI_FN_MAX_LINES: usize = 80;

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

/// Every function of ctx-cli longer than [`CLI_FN_MAX_LINES`], as
/// `path:line: fn NAME is N lines`.
pub fn check_cli_function_lengths(root: &Path) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    for path in rust_files(&root.join("crates/ctx-cli/src"))? {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (name, line, len) in function_lengths(&text) {
            if len > CLI_FN_MAX_LINES {
                let shown = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                problems.push(format!(
                    "{shown}:{line}: fn {name} is {len} lines (at most {CLI_FN_MAX_LINES} in ctx-cli: move the use case into a library)"
                ));
            }
        }
    }
    Ok(problems)
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

pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask arch".into());
    }
    let root = root();
    let meta = metadata(&root)?;
    let doc = std::fs::read_to_string(root.join("docs/architecture.md"))
        .map_err(|e| format!("docs/architecture.md: {e}"))?;
    let mut problems = compare_edges(&doc_edges(&doc)?, &cargo_edges(&meta));
    let trees = trees(&root, RULES, BUDGETS)?;
    problems.extend(check_rules(&trees, RULES));
    problems.extend(check_budgets(&trees, BUDGETS));
    problems.extend(check_links(&root)?);
    problems.extend(check_manifest_comments(&root, &meta)?);
    problems.extend(check_cli_function_lengths(&root)?);
    problems.extend(check_locked_installs(&root)?);
    if problems.is_empty() {
        let counts: Vec<String> = BUDGETS
            .iter()
            .map(|b| {
                let n = trees[b.crate_name].distinct().len();
                format!("{} {n} of at most {}", b.crate_name, b.max)
            })
            .collect();
        eprintln!(
            "architecture: dependency block, forbidden edges, crate budgets ({} distinct crates), links, ctx-cli's function lengths (at most {CLI_FN_MAX_LINES} lines) and locked installs all hold",
            counts.join(", ")
        );
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

    #[test]
    fn every_install_the_docs_give_is_locked() {
        assert_none(
            "installs without --locked",
            check_locked_installs(&root()).expect("read the docs"),
        );
        let install = ["cargo", " install "].concat();
        let text = format!(
            "a\n{install}--path crates/ctx-cli\nb\n{install}--locked x\n{install}--path p\n  --locked\n`{}` in prose\n",
            install.trim_end()
        );
        assert_eq!(unlocked_installs(&text), [2]);
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
    fn no_forbidden_dependency_and_small_seams() {
        let trees = trees(&root(), RULES, BUDGETS).expect("cargo tree");
        assert_none("forbidden dependencies", check_rules(&trees, RULES));
        assert_none("seams over their size", check_budgets(&trees, BUDGETS));
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
    fn no_cli_function_is_longer_than_its_limit() {
        assert_none(
            "ctx-cli functions over the limit",
            check_cli_function_lengths(&root()).expect("read ctx-cli"),
        );
    }

    #[test]
    fn function_lengths_run_from_fn_to_its_closing_brace() {
        let text = "fn a() {\n    x();\n}\n\nimpl T {\n    pub(crate) async fn b(\n        y: u8,\n    ) -> u8 {\n        if y > 0 {\n        }\n        y\n    }\n    fn decl(&self);\n}\n";
        let got = function_lengths(text);
        assert_eq!(got, [("a".to_string(), 1, 3), ("b".to_string(), 6, 7)]);
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

    /// A tree as `cargo tree --prefix depth` prints it: `regex` is reached
    /// twice, the second time deduplicated (`(*)`), and a build dependency.
    const TREE: &str = "0ctx-a v0.1.0 (/w/crates/ctx-a)\n\
                        1serde v1.0.229\n\
                        2serde_derive v1.0.229 (proc-macro)\n\
                        1ctx-b v0.1.0 (/w/crates/ctx-b)\n\
                        2fancy v0.19.2\n\
                        3regex v1.13.2\n\
                        1regex v1.13.2 (*)\n\
                        1syn v2.0.1\n\
                        1syn v3.0.10\n";

    #[test]
    fn reachability_names_the_whole_chain() {
        let tree = Tree::parse(TREE).expect("parse");
        assert_eq!(
            tree.chain_to("regex"),
            Some(vec![
                "ctx-a".into(),
                "ctx-b".into(),
                "fancy".into(),
                "regex".into()
            ])
        );
        assert_eq!(tree.chain_to("tokio"), None);
        // The root does not reach itself.
        assert_eq!(tree.chain_to("ctx-a"), None);
        let trees = BTreeMap::from([("ctx-a".to_string(), tree)]);
        let rule = Rule {
            why: "no regex",
            from: &["ctx-a"],
            never: &["regex", "tokio"],
        };
        assert_eq!(
            check_rules(&trees, &[rule]),
            ["forbidden dependency (no regex): ctx-a → ctx-b → fancy → regex"]
        );
    }

    #[test]
    fn a_budget_counts_distinct_names_and_versions() {
        let tree = Tree::parse(TREE).expect("parse");
        // ctx-a, serde, serde_derive, ctx-b, fancy, regex, syn 2, syn 3.
        assert_eq!(tree.distinct().len(), 8);
        let trees = BTreeMap::from([("ctx-a".to_string(), tree)]);
        let budget = |max| Budget {
            why: "small",
            crate_name: "ctx-a",
            max,
        };
        assert_eq!(check_budgets(&trees, &[budget(8)]), Vec::<String>::new());
        let over = check_budgets(&trees, &[budget(7)]);
        assert_eq!(over.len(), 1);
        assert!(
            over[0].starts_with("ctx-a compiles 8 distinct crates, more than 7 (small): ctx-a v0.1.0, ctx-b v0.1.0, fancy v0.19.2"),
            "{}",
            over[0]
        );
        assert!(Tree::parse("x v1\n").is_err());
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
