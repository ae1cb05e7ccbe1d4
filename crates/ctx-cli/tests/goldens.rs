//! Every golden file under fixtures/ matches what `ctx` produces today.
//! Regenerate with `cargo xtask fixtures`; never edit a golden by hand.

mod support {
    pub mod goldens;
}

use std::path::Path;

#[test]
fn golden_files_match() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().expect("repo root");
    let bin = assert_cmd::cargo::cargo_bin("ctx");
    let problems = support::goldens::run_all(&bin, &root, support::goldens::Mode::Check)
        .expect("golden manifests are readable");
    assert!(
        problems.is_empty(),
        "golden files drifted; run `cargo xtask fixtures` and review the diff:\n{}",
        problems.join("\n")
    );
}
