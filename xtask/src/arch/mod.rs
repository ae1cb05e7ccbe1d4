//! The architecture check: docs/architecture.toml, enforced.
//!
//! A document that describes the crate graph drifts the day someone adds a
//! dependency without reading it, and rules written by hand in this tool
//! drift from the document. So the intended architecture is data
//! (docs/architecture.toml: the parts, the arrows between them, the nevers,
//! the seam budgets and the function-size rule, each with its reason), and
//! `cargo xtask arch`, and the tests at the bottom of this file (run by
//! `cargo xtask test` like every other test), hold the repository to it:
//!
//! 1. every workspace crate is on one part, and every edge between ctx
//!    crates in the manifests is an arrow its part allows
//!    ([`intended`]);
//! 2. no crate reaches what a never forbids, and each budgeted crate
//!    compiles at most its bound of distinct crates, in the graph `cargo
//!    tree -p CRATE -e normal,build` resolves for that crate alone
//!    ([`resolved`]): `cargo metadata`'s graph unifies the features of
//!    the whole workspace, so it would charge the seams with ctx-model's
//!    `parse` feature that only other crates turn on;
//! 3. no function outside test code is longer than the limit but those on
//!    a list that only shrinks ([`functions`]);
//! 4. docs/architecture.md's "Parts and arrows" section is the drawing of
//!    the file and the manifests (`cargo xtask arch --write` redraws it;
//!    [`drawing`]);
//! 5. every relative link in docs/*.md and README.md, and every repository
//!    path named in a Cargo.toml comment, points at a file that exists, and
//!    every `cargo install` the docs and scripts give is `--locked`
//!    ([`hygiene`]).
//!
//! The manifests come from `cargo metadata` through the `cargo_metadata`
//! crate (typed, maintained by the Cargo team's ecosystem, and it pulls in
//! only camino, cargo-platform and semver beyond what we have). Links are
//! found with pulldown-cmark, the parser the docs are written for, so a
//! link inside a code block is not a link.

mod drawing;
mod functions;
mod hygiene;
mod intended;
mod resolved;

use std::path::PathBuf;

use functions::{check_functions, non_test_functions};
use hygiene::{check_links, check_locked_installs, check_manifest_comments};
use intended::Intended;
use resolved::{cargo_edges, check_budgets, check_nevers, metadata, trees};

/// The repository root (xtask's parent directory).
pub fn root() -> PathBuf {
    crate::root()
}

const USAGE: &str = "usage: cargo xtask arch [--write]";

/// `cargo xtask arch [--write]`: every check above; `--write` first
/// redraws docs/architecture.md's drawn section.
pub fn run(args: &[String]) -> Result<(), String> {
    let write = match args {
        [] => false,
        [flag] if flag == "--write" => true,
        _ => return Err(USAGE.into()),
    };
    let root = root();
    let intended = Intended::load(&root)?;
    let meta = metadata(&root)?;
    let cargo = cargo_edges(&meta);
    let page_path = root.join(drawing::PAGE);
    let page =
        std::fs::read_to_string(&page_path).map_err(|e| format!("{}: {e}", drawing::PAGE))?;
    let drawn = drawing::draw(&intended, &cargo);
    if write {
        std::fs::write(&page_path, drawing::redraw(&page, &drawn)?)
            .map_err(|e| format!("{}: {e}", drawing::PAGE))?;
    }
    let mut problems = intended.check_self();
    problems.extend(intended.check_membership(&cargo));
    problems.extend(intended.check_arrows(&cargo));
    if !write {
        problems.extend(drawing::check(&page, &drawn)?);
    }
    let trees = trees(&root, &intended)?;
    problems.extend(check_nevers(&trees, &intended));
    problems.extend(check_budgets(&trees, &intended.budgets));
    problems.extend(check_functions(
        &non_test_functions(&root)?,
        &intended.functions,
    ));
    problems.extend(check_links(&root)?);
    problems.extend(check_manifest_comments(&root, &meta)?);
    problems.extend(check_locked_installs(&root)?);
    if !problems.is_empty() {
        return Err(format!(
            "{}\n{} problem(s)",
            problems.join("\n"),
            problems.len()
        ));
    }
    let counts: Vec<String> = intended
        .budgets
        .iter()
        .map(|b| {
            let n = trees[&b.crate_name].distinct().len();
            format!("{} {n} of at most {}", b.crate_name, b.max)
        })
        .collect();
    eprintln!(
        "architecture: {} parts, their arrows and nevers, crate budgets ({}), functions within {} lines ({} allowed over, a list that only shrinks), the drawn section, links and locked installs all hold",
        intended.parts.len(),
        counts.join(", "),
        intended.functions.max_lines,
        intended.functions.allow.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    use cargo_metadata::Metadata;
    use functions::{function_lengths, test_module_lines};
    use hygiene::{path_like_words, relative_links, toml_comment, unlocked_installs};
    use intended::{Budget, Functions};
    use resolved::Tree;

    fn assert_none(what: &str, problems: Vec<String>) {
        assert!(
            problems.is_empty(),
            "{what}:\n  {}\n(the rules: docs/architecture.toml)",
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

    fn intended() -> Intended {
        Intended::load(&root()).expect("docs/architecture.toml")
    }

    #[test]
    fn the_tree_holds_the_intended_architecture() {
        let intended = intended();
        let cargo = cargo_edges(&meta());
        assert_none("the file itself", intended.check_self());
        assert_none("crates and parts", intended.check_membership(&cargo));
        assert_none("edges no arrow allows", intended.check_arrows(&cargo));
        let page = std::fs::read_to_string(root().join(drawing::PAGE)).expect("read");
        assert_none(
            "the drawn section",
            drawing::check(&page, &drawing::draw(&intended, &cargo)).expect("section"),
        );
    }

    /// The check is not vacuous: an edge the file forbids, added to the
    /// real graph, fails naming the edge and the part's rule.
    #[test]
    fn a_forbidden_edge_added_to_the_real_graph_fails() {
        let intended = intended();
        let mut cargo = cargo_edges(&meta());
        cargo
            .get_mut("ctx-tokens")
            .expect("ctx-tokens")
            .insert("ctx-prompt".into());
        cargo
            .get_mut("ctx-cli")
            .expect("ctx-cli")
            .insert("ctx-checks".into());
        let problems = intended.check_arrows(&cargo);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "edge `ctx-cli → ctx-checks` is not allowed: `ctx-cli` is on part `binary`"
            ),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("edge `ctx-tokens → ctx-prompt` is not allowed: `ctx-tokens` is on part `seams`, which uses `vocabulary` (not `context`)"),
            "{problems:?}"
        );
    }

    #[test]
    fn no_forbidden_dependency_and_small_seams() {
        let intended = intended();
        let trees = trees(&root(), &intended).expect("cargo tree");
        assert_none("forbidden dependencies", check_nevers(&trees, &intended));
        assert_none(
            "seams over their size",
            check_budgets(&trees, &intended.budgets),
        );
    }

    #[test]
    fn no_function_is_longer_than_its_limit_but_the_shrinking_list() {
        let found = non_test_functions(&root()).expect("read sources");
        assert_none(
            "functions over the limit",
            check_functions(&found, &intended().functions),
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
    fn function_lengths_run_from_fn_to_its_closing_brace() {
        let text = "fn a() {\n    x();\n}\n\nimpl T {\n    pub(crate) async fn b(\n        y: u8,\n    ) -> u8 {\n        if y > 0 {\n        }\n        y\n    }\n    fn decl(&self);\n}\n";
        let got = function_lengths(text);
        assert_eq!(got, [("a".to_string(), 1, 3), ("b".to_string(), 6, 7)]);
    }

    #[test]
    fn inline_test_modules_are_found_to_their_closing_brace() {
        let text =
            "fn a() {\n}\n\n#[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\nfn b() {\n}\n";
        assert_eq!(test_module_lines(text), [(4, 8)]);
    }

    #[test]
    fn the_allowlist_only_shrinks() {
        let rule = |allow: &[&str]| Functions {
            max_lines: 3,
            why: "short".into(),
            allow: allow.iter().map(|s| s.to_string()).collect(),
        };
        let found = BTreeMap::from([
            ("x.rs::long".to_string(), vec![(1, 5)]),
            ("x.rs::short".to_string(), vec![(9, 3)]),
        ]);
        assert_eq!(
            check_functions(&found, &rule(&[])),
            [
                "x.rs:1: fn long is 5 lines, more than 3 (docs/architecture.toml, [functions]: split it)"
            ]
        );
        assert!(check_functions(&found, &rule(&["x.rs::long"])).is_empty());
        let kept = check_functions(&found, &rule(&["x.rs::long", "x.rs::short", "y.rs::gone"]));
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(
            kept[0].contains("`x.rs::short` is on the allowlist but is 3 lines now"),
            "{kept:?}"
        );
        assert!(
            kept[1].contains("`y.rs::gone` is on the allowlist but no such function exists"),
            "{kept:?}"
        );
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
        let intended = Intended::parse(
            "[[part]]\nname = \"a\"\ncrates = [\"ctx-a\"]\nuses = []\nwhy = \"w\"\n\n\
             [[never]]\nfrom = [\"a\"]\nreach = [\"regex\", \"tokio\"]\nwhy = \"no regex\"\n\n\
             [functions]\nmax_lines = 80\nwhy = \"w\"\nallow = []\n",
        )
        .expect("parse");
        assert_eq!(
            check_nevers(&trees, &intended),
            [
                "forbidden dependency (no regex; docs/architecture.toml): ctx-a → ctx-b → fancy → regex"
            ]
        );
    }

    #[test]
    fn a_budget_counts_distinct_names_and_versions() {
        let tree = Tree::parse(TREE).expect("parse");
        // ctx-a, serde, serde_derive, ctx-b, fancy, regex, syn 2, syn 3.
        assert_eq!(tree.distinct().len(), 8);
        let trees = BTreeMap::from([("ctx-a".to_string(), tree)]);
        let budget = |max| Budget {
            why: "small".into(),
            crate_name: "ctx-a".into(),
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
