//! The resolved dependency graph: the ctx crates each member's Cargo.toml
//! names, and each constrained crate's whole tree as `cargo tree` resolves
//! it, with the checks over them ([`check_nevers`], [`check_budgets`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cargo_metadata::{DependencyKind, Metadata, MetadataCommand};

use super::intended::{Budget, Intended};

/// Crate name → the ctx crates it depends on.
pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// `cargo metadata` for the workspace, with the resolved graph.
pub fn metadata(root: &Path) -> Result<Metadata, String> {
    MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .exec()
        .map_err(|e| format!("cargo metadata: {e}"))
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

/// The trees of the crates the nevers and the budgets constrain, each read
/// once.
pub fn trees(root: &Path, intended: &Intended) -> Result<BTreeMap<String, Tree>, String> {
    let names: BTreeSet<&str> = intended
        .nevers
        .iter()
        .flat_map(|n| n.from.iter().flat_map(|f| intended.expand(f)))
        .chain(intended.budgets.iter().map(|b| b.crate_name.as_str()))
        .collect();
    names
        .into_iter()
        .map(|n| cargo_tree(root, n).map(|t| (n.to_string(), t)))
        .collect()
}

/// Every violation of a never, with the chain of dependencies that causes
/// it.
pub fn check_nevers(trees: &BTreeMap<String, Tree>, intended: &Intended) -> Vec<String> {
    let mut problems = Vec::new();
    for never in &intended.nevers {
        let reach: Vec<&str> = never
            .reach
            .iter()
            .flat_map(|r| intended.expand(r))
            .collect();
        for from in never.from.iter().flat_map(|f| intended.expand(f)) {
            let Some(tree) = trees.get(from) else {
                problems.push(format!("never \"{}\": no crate `{from}`", never.why));
                continue;
            };
            for name in reach.iter().filter(|r| **r != from) {
                if let Some(chain) = tree.chain_to(name) {
                    problems.push(format!(
                        "forbidden dependency ({}; {}): {}",
                        never.why,
                        super::intended::FILE,
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
        let Some(tree) = trees.get(&budget.crate_name) else {
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
