//! # ctx-test-support: scaffolding for ctx's integration tests
//!
//! The helpers every `crates/ctx-cli/tests/*.rs` file used to define for
//! itself: where the repository is, the `ctx` binary as a command that runs
//! from there (so fixture paths such as `fixtures/plans/invalid.yaml` stay
//! relative and golden-stable), and writing a scratch file. One copy, so
//! that a change (say, to how the binary is found) is made once.
//!
//! A dev-dependency only: shipped crates never depend on it, and the
//! architecture check (`cargo xtask arch`) counts normal and build
//! dependencies, so it cannot leak into the library graph unseen.

use std::path::{Path, PathBuf};

/// The repository root (the workspace directory), canonicalized.
///
/// Found from this crate's own manifest directory, `crates/ctx-test-support`,
/// two levels down from the root, so it is the same for every test crate.
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The `ctx` binary of this build as a command, run from [`repo_root`].
///
/// `assert_cmd` finds the binary next to the running test executable, so
/// this works from any test crate of the workspace that builds `ctx-cli`.
///
/// # Panics
///
/// When the `ctx` binary has not been built (a test of a crate that does
/// not depend on ctx-cli).
pub fn ctx() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("ctx").expect("the ctx binary is built");
    cmd.current_dir(repo_root());
    cmd
}

/// The `ctx` binary as a command run from `dir` (a test's scratch
/// directory, so that relative outputs such as `runs/` land there).
///
/// # Panics
///
/// As [`ctx`].
pub fn ctx_in(dir: impl AsRef<Path>) -> assert_cmd::Command {
    let mut cmd = ctx();
    cmd.current_dir(dir);
    cmd
}

/// Runs [`ctx`] with `args` and returns its exit code (-1 when killed by
/// a signal), standard output and standard error.
///
/// # Panics
///
/// When the binary cannot be started or its standard output is not UTF-8
/// (ctx writes UTF-8 only; a test should fail loudly if that changes).
pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = ctx().args(args).output().expect("run ctx");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("ctx writes UTF-8 to stdout"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `text` to `dir/name` and returns the path.
///
/// # Panics
///
/// When the file cannot be written (a test's scratch directory is gone).
pub fn write_path(dir: impl AsRef<Path>, name: &str, text: &str) -> PathBuf {
    let path = dir.as_ref().join(name);
    std::fs::write(&path, text).expect("write a test file");
    path
}

/// [`write_path`], with the path as a `String` for a command's arguments.
pub fn write(dir: impl AsRef<Path>, name: &str, text: &str) -> String {
    write_path(dir, name, text).to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_workspace() {
        let root = repo_root();
        assert!(root.join("Cargo.toml").is_file(), "{}", root.display());
        assert!(root.join("crates/ctx-test-support").is_dir());
    }

    #[test]
    fn write_puts_the_text_in_the_named_file() {
        let dir = std::env::temp_dir().join(format!("ctx-test-support-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = write(&dir, "a.txt", "hello");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "hello");
        assert_eq!(write_path(&dir, "b.txt", "x"), dir.join("b.txt"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
