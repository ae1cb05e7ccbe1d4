//! `ctx completions SHELL`: scripts generated from the clap definition;
//! and `ctx man --out DIR`, the man pages from the same definition.

use ctx_test_support::ctx;

#[test]
fn bash_completions_name_every_subcommand() {
    let out = ctx().args(["completions", "bash"]).assert().success();
    let script = String::from_utf8(out.get_output().stdout.clone()).expect("UTF-8");
    assert!(script.contains("_ctx()"), "no bash function:\n{script}");
    // Each subcommand, top-level or nested (`plan check`), has the case
    // label `PARENT,NAME)` that completes it.
    for name in [
        "run",
        "plan",
        "check",
        "graph",
        "schema",
        "history",
        "render",
        "lint",
        "engines",
        "runs",
        "spend",
        "completions",
    ] {
        assert!(
            script.contains(&format!(",{name})")),
            "bash script does not complete `{name}`"
        );
    }
}

#[test]
fn every_shell_gets_a_script() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = ctx().args(["completions", shell]).assert().success();
        let script = String::from_utf8(out.get_output().stdout.clone()).expect("UTF-8");
        assert!(
            script.contains("history") && script.contains("render"),
            "{shell}: script lacks subcommand names"
        );
    }
}

#[test]
fn same_script_every_time() {
    let a = ctx().args(["completions", "zsh"]).output().expect("run");
    let b = ctx().args(["completions", "zsh"]).output().expect("run");
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn unknown_shell_is_a_usage_error() {
    let out = ctx().args(["completions", "tcsh"]).assert().code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).expect("UTF-8");
    assert!(
        err.contains("tcsh"),
        "stderr does not name the shell: {err}"
    );
    assert!(
        err.contains("bash"),
        "stderr does not list valid shells: {err}"
    );
}

/// `ctx man --out DIR` (what `cargo xtask man` runs) writes a page per
/// command, and stays out of `--help`; without `--out` it is a usage error.
#[test]
fn man_writes_the_pages_and_is_not_in_help() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("man");
    ctx().args(["man", "--out"]).arg(&out).assert().success();
    for page in ["ctx.1", "ctx-run.1", "ctx-runs-list.1"] {
        assert!(out.join(page).is_file(), "no {page}");
    }
    assert!(!out.join("ctx-man.1").exists(), "a page for `man` itself");
    let help = ctx().arg("--help").assert().success();
    let help = String::from_utf8(help.get_output().stdout.clone()).expect("UTF-8");
    assert!(!help.contains("  man "), "--help lists man:\n{help}");
    let err = ctx().arg("man").assert().code(2);
    let err = String::from_utf8(err.get_output().stderr.clone()).expect("UTF-8");
    assert!(
        err.contains("ctx man --out"),
        "usage does not name ctx man: {err}"
    );
}
