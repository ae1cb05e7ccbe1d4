//! The intended architecture, read from docs/architecture.toml: the parts
//! and the arrows between them, the nevers, the seam budgets and the
//! function-size rule. This module reads the file and judges the direct
//! edges against it; the transitive rules are judged over the resolved
//! trees in [`super::resolved`], and the function rule in
//! [`super::functions`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use super::resolved::Edges;

/// Where the intended architecture lives, from the repository root.
pub const FILE: &str = "docs/architecture.toml";

/// docs/architecture.toml, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intended {
    /// The parts, bottom to top.
    #[serde(rename = "part")]
    pub parts: Vec<Part>,
    /// Why a crate uses what it uses, shown beside its row.
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
    /// What must not be reached, transitively.
    #[serde(rename = "never", default)]
    pub nevers: Vec<Never>,
    /// How many distinct crates a crate may compile.
    #[serde(rename = "budget", default)]
    pub budgets: Vec<Budget>,
    /// The function-size rule.
    pub functions: Functions,
}

/// A group of crates with one job, and the parts (or crates) it may use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// The part's name, as `uses` and `[[never]]` name it.
    pub name: String,
    /// Its crates.
    pub crates: Vec<String>,
    /// The parts or single crates its crates may depend on, beside their
    /// own part's.
    pub uses: Vec<String>,
    /// Why the part exists and may use what it uses.
    pub why: String,
}

/// `from` must not reach any of `reach` through normal or build
/// dependencies.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Never {
    /// Parts or crates constrained.
    pub from: Vec<String>,
    /// Parts, crates or packages none of them may reach.
    pub reach: Vec<String>,
    /// The reason, shown with a violation.
    pub why: String,
}

/// A bound on how many distinct crates (name and version) `crate_name`'s
/// resolved graph holds, itself included.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The crate bounded.
    #[serde(rename = "crate")]
    pub crate_name: String,
    /// The most distinct crates it may compile.
    pub max: usize,
    /// The reason, shown with a violation.
    pub why: String,
}

/// The function-size rule and its shrinking allowlist.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Functions {
    /// The most lines a function may have, its signature and closing brace
    /// included.
    pub max_lines: usize,
    /// The reason, shown with a violation.
    pub why: String,
    /// `path::fn` of the functions allowed over the limit.
    pub allow: Vec<String>,
}

impl Intended {
    /// Reads and parses docs/architecture.toml under `root`; an error names
    /// the file, and the line and column TOML reports.
    pub fn load(root: &Path) -> Result<Intended, String> {
        let text = std::fs::read_to_string(root.join(FILE)).map_err(|e| format!("{FILE}: {e}"))?;
        Intended::parse(&text)
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<Intended, String> {
        toml::from_str(text).map_err(|e| format!("{FILE}: {e}"))
    }

    /// The part `crate_name` is on, if any.
    pub fn part_of(&self, crate_name: &str) -> Option<&Part> {
        self.parts
            .iter()
            .find(|p| p.crates.iter().any(|c| c == crate_name))
    }

    /// `name` as crates: a part's crates, or the name itself (a crate or
    /// an outside package).
    pub fn expand<'a>(&'a self, name: &'a str) -> Vec<&'a str> {
        match self.parts.iter().find(|p| p.name == name) {
            Some(part) => part.crates.iter().map(String::as_str).collect(),
            None => vec![name],
        }
    }

    /// The ctx crates `part`'s crates may depend on.
    pub fn allowed<'a>(&'a self, part: &'a Part) -> BTreeSet<&'a str> {
        part.crates
            .iter()
            .map(String::as_str)
            .chain(part.uses.iter().flat_map(|u| self.expand(u)))
            .collect()
    }

    /// Problems with the file itself: a part or crate named twice, a
    /// `uses` that names neither a part nor a crate on one.
    pub fn check_self(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut seen = BTreeMap::new();
        for part in &self.parts {
            for c in &part.crates {
                if let Some(first) = seen.insert(c.as_str(), part.name.as_str()) {
                    problems.push(format!(
                        "{FILE}: `{c}` is on two parts, `{first}` and `{}`",
                        part.name
                    ));
                }
            }
        }
        for part in &self.parts {
            for u in &part.uses {
                let known =
                    self.parts.iter().any(|p| &p.name == u) || seen.contains_key(u.as_str());
                if !known {
                    problems.push(format!(
                        "{FILE}: part `{}` uses `{u}`, which is neither a part nor a crate on one",
                        part.name
                    ));
                }
            }
        }
        problems
    }

    /// Every workspace crate that is on no part, and every crate on a part
    /// that is not in the workspace.
    pub fn check_membership(&self, cargo: &Edges) -> Vec<String> {
        let mut problems: Vec<String> = cargo
            .keys()
            .filter(|c| self.part_of(c).is_none())
            .map(|c| format!("{FILE}: workspace crate `{c}` is on no part"))
            .collect();
        for part in &self.parts {
            for c in part.crates.iter().filter(|c| !cargo.contains_key(*c)) {
                problems.push(format!(
                    "{FILE}: part `{}` lists `{c}`, which is not a workspace crate",
                    part.name
                ));
            }
        }
        problems
    }

    /// Every dependency between ctx crates that no arrow allows, naming the
    /// edge, the part and the part's reason.
    pub fn check_arrows(&self, cargo: &Edges) -> Vec<String> {
        let mut problems = Vec::new();
        for (from, deps) in cargo {
            let Some(part) = self.part_of(from) else {
                continue;
            };
            let allowed = self.allowed(part);
            for dep in deps.iter().filter(|d| !allowed.contains(d.as_str())) {
                let to = self.part_of(dep).map_or("no part", |p| p.name.as_str());
                problems.push(format!(
                    "edge `{from} → {dep}` is not allowed: `{from}` is on part `{}`, which uses {} (not `{to}`); {FILE}: \"{}\"",
                    part.name,
                    list_or_nothing(&part.uses),
                    part.why
                ));
            }
        }
        problems
    }
}

/// `a, b, c`, or `nothing of ours`.
fn list_or_nothing(names: &[String]) -> String {
    if names.is_empty() {
        "nothing of ours".to_string()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
[[part]]
name = "base"
crates = ["a"]
uses = []
why = "the bottom"

[[part]]
name = "top"
crates = ["b", "c"]
uses = ["base"]
why = "uses the bottom"

[[never]]
from = ["top"]
reach = ["tokio"]
why = "no runtime"

[functions]
max_lines = 80
why = "short"
allow = []
"#;

    fn edges(list: &[(&str, &[&str])]) -> Edges {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn an_edge_no_arrow_allows_is_named_with_its_rule() {
        let intended = Intended::parse(SMALL).expect("parse");
        assert!(intended.check_self().is_empty());
        let ok = edges(&[("a", &[]), ("b", &["a", "c"]), ("c", &[])]);
        assert_eq!(intended.check_arrows(&ok), Vec::<String>::new());
        let upward = edges(&[("a", &["b"]), ("b", &[]), ("c", &[])]);
        let problems = intended.check_arrows(&upward);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("edge `a → b` is not allowed: `a` is on part `base`, which uses nothing of ours (not `top`)"),
            "{problems:?}"
        );
        assert!(problems[0].contains("\"the bottom\""), "{problems:?}");
    }

    #[test]
    fn a_crate_on_no_part_or_two_parts_is_reported() {
        let intended = Intended::parse(SMALL).expect("parse");
        let problems = intended.check_membership(&edges(&[("a", &[]), ("b", &[]), ("d", &[])]));
        assert_eq!(
            problems,
            [
                format!("{FILE}: workspace crate `d` is on no part"),
                format!("{FILE}: part `top` lists `c`, which is not a workspace crate"),
            ]
        );
        let twice = SMALL.replace(r#"crates = ["b", "c"]"#, r#"crates = ["b", "a"]"#);
        let twice = Intended::parse(&twice).expect("parse");
        assert_eq!(
            twice.check_self(),
            [format!("{FILE}: `a` is on two parts, `base` and `top`")]
        );
    }

    #[test]
    fn a_part_name_expands_to_its_crates_and_a_package_to_itself() {
        let intended = Intended::parse(SMALL).expect("parse");
        assert_eq!(intended.expand("top"), ["b", "c"]);
        assert_eq!(intended.expand("tokio"), ["tokio"]);
    }

    #[test]
    fn an_unknown_key_or_use_is_refused_with_its_place() {
        let err = Intended::parse(&SMALL.replace("why = \"short\"", "why = \"short\"\nmax = 3"))
            .expect_err("unknown key");
        assert!(err.starts_with(FILE) && err.contains("max"), "{err}");
        let bad = Intended::parse(&SMALL.replace(r#"uses = ["base"]"#, r#"uses = ["bse"]"#))
            .expect("parse");
        assert_eq!(
            bad.check_self(),
            [format!(
                "{FILE}: part `top` uses `bse`, which is neither a part nor a crate on one"
            )]
        );
    }
}
