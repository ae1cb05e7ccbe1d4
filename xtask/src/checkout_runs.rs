//! The runs recorded in the checkout's own stores: what `cargo xtask test`
//! compares before and after its steps, so a test that records a run where
//! a user's `ctx run` would (and `ctx runs list` and `gc --keep` would mix
//! it with the user's runs) fails the job.
//!
//! A `ctx run` without `--root` records under `.ctx/runs` of its working
//! directory. The working directories a test can have inside the checkout
//! are the checkout itself (`cargo xtask`, the goldens, a script) and a
//! package's folder (cargo runs each integration test binary in its
//! package's manifest directory: `crates/ctx-cli`, `xtask`, `fuzz`), so
//! those are the stores watched. Tests use roots of their own: a scratch
//! directory, `--root`, `--no-store`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every run directory under a watched store of the checkout at `root`,
/// as `STORE/RUN` relative to `root` (`.ctx/runs/20261203-...`,
/// `crates/ctx-cli/.ctx/runs/...`).
pub fn checkout_runs(root: &Path) -> BTreeSet<String> {
    let mut runs = BTreeSet::new();
    for dir in watched_dirs(root) {
        let store = dir.join(".ctx/runs");
        let Ok(entries) = std::fs::read_dir(&store) else {
            continue;
        };
        let shown = store.strip_prefix(root).unwrap_or(&store).to_path_buf();
        for e in entries.filter_map(Result::ok) {
            runs.insert(shown.join(e.file_name()).to_string_lossy().into_owned());
        }
    }
    runs
}

/// The checkout, `xtask`, `fuzz` and each folder of `crates/`.
fn watched_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf(), root.join("xtask"), root.join("fuzz")];
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        let mut packages: Vec<PathBuf> = crates
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        packages.sort();
        dirs.extend(packages);
    }
    dirs
}

/// The runs in `after` that `before` did not have, or an error naming
/// them.
pub fn refuse_new(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Result<(), String> {
    let leaked: Vec<&str> = after.difference(before).map(String::as_str).collect();
    if leaked.is_empty() {
        return Ok(());
    }
    Err(format!(
        "tests recorded {} run(s) in the checkout's own stores ({}): tests must use roots of their own (a scratch directory, --root, --no-store)",
        leaked.len(),
        leaked.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_recorded_in_a_package_folder_is_found_too() {
        let root = std::env::temp_dir().join(format!("xtask-checkout-runs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(".ctx/runs/user-run")).unwrap();
        let before = checkout_runs(&root);
        assert_eq!(before, BTreeSet::from([".ctx/runs/user-run".to_string()]));
        // What an integration test of ctx-cli run without --root leaves:
        // cargo runs it in crates/ctx-cli.
        std::fs::create_dir_all(root.join("crates/ctx-cli/.ctx/runs/test-run")).unwrap();
        std::fs::create_dir_all(root.join(".ctx/runs/test-run-2")).unwrap();
        let after = checkout_runs(&root);
        let err = refuse_new(&before, &after).unwrap_err();
        assert!(
            err.contains("2 run(s)")
                && err.contains("crates/ctx-cli/.ctx/runs/test-run")
                && err.contains(".ctx/runs/test-run-2"),
            "{err}"
        );
        assert_eq!(refuse_new(&after, &after), Ok(()));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
