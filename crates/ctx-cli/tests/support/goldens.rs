//! The golden-fixture runner, shared by `cargo xtask fixtures` (which
//! writes or checks the files) and the `goldens` integration test (which
//! fails when any file drifts). One implementation, so the test can never
//! check something other than what the maintainer regenerated.
//!
//! Each `fixtures/<name>/goldens.toml` lists commands:
//!
//! ```toml
//! [[golden]]
//! name = "digest at the default budget"
//! args = ["history", "--content-root", "{fixture}/content", "--date", "2026-08-20"]
//! stdout = "golden/digest-90000.md"   # compared with the command's stdout
//! out_dir = "golden/dry-run"          # compared with the files under {out}
//! out_include = ["prompts", "outputs"] # only these subfolders of {out}
//! exit = 0                             # expected exit code (default 0)
//! ```
//!
//! `{fixture}` is the fixture folder relative to the repo root (commands run
//! from the root, so paths in goldens stay relative and portable); `{out}`
//! is a fresh scratch directory.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    golden: Vec<Golden>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Golden {
    name: String,
    args: Vec<String>,
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    out_dir: Option<String>,
    #[serde(default)]
    out_include: Vec<String>,
    #[serde(default)]
    exit: i32,
}

/// Write the files, or only compare them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Regenerate every golden file.
    Write,
    /// Report drift without touching anything.
    Check,
}

/// Runs every manifest under `root/fixtures`. Returns the problems found
/// (drift in `Check` mode, failures in either).
pub fn run_all(ctx_bin: &Path, root: &Path, mode: Mode) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    let fixtures = root.join("fixtures");
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .map_err(|e| format!("{}: {e}", fixtures.display()))?
        .filter_map(|e| e.ok().map(|e| e.path().join("goldens.toml")))
        .filter(|p| p.is_file())
        .collect();
    manifests.sort();
    let scratch_root = std::env::temp_dir().join(format!("ctx-goldens-{}", std::process::id()));
    for manifest_path in manifests {
        let fixture_dir = manifest_path.parent().unwrap_or(root);
        let fixture_rel = fixture_dir
            .strip_prefix(root)
            .unwrap_or(fixture_dir)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&manifest_path)
            .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        let manifest: Manifest =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        for (i, g) in manifest.golden.iter().enumerate() {
            let out = scratch_root.join(format!("{fixture_rel}-{i}").replace('/', "_"));
            let _ = std::fs::remove_dir_all(&out);
            std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let args: Vec<String> = g
                .args
                .iter()
                .map(|a| {
                    a.replace("{fixture}", &fixture_rel)
                        .replace("{out}", &out.to_string_lossy())
                })
                .collect();
            let output = Command::new(ctx_bin)
                .args(&args)
                .current_dir(root)
                .env("NO_COLOR", "1")
                .env_remove("RUST_LOG")
                .output()
                .map_err(|e| format!("{}: {e}", ctx_bin.display()))?;
            let label = format!("{fixture_rel}: {}", g.name);
            let code = output.status.code().unwrap_or(-1);
            if code != g.exit {
                problems.push(format!(
                    "{label}: exit {code}, expected {}\n  ctx {}\n  stderr: {}",
                    g.exit,
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
                continue;
            }
            if let Some(stdout) = &g.stdout {
                let path = fixture_dir.join(stdout);
                compare_or_write(&path, &output.stdout, mode, &label, &mut problems)?;
            }
            if let Some(out_dir) = &g.out_dir {
                let golden_dir = fixture_dir.join(out_dir);
                let produced = collect_files(&out, &g.out_include)?;
                let existing = collect_files(&golden_dir, &[])?;
                for (rel, bytes) in &produced {
                    let path = golden_dir.join(rel);
                    compare_or_write(&path, bytes, mode, &label, &mut problems)?;
                }
                for rel in existing.keys().filter(|k| !produced.contains_key(*k)) {
                    let path = golden_dir.join(rel);
                    match mode {
                        Mode::Write => std::fs::remove_file(&path)
                            .map_err(|e| format!("{}: {e}", path.display()))?,
                        Mode::Check => problems
                            .push(format!("{label}: {} is no longer produced", path.display())),
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    let _ = std::fs::remove_dir_all(&scratch_root);
    Ok(problems)
}

fn compare_or_write(
    path: &Path,
    bytes: &[u8],
    mode: Mode,
    label: &str,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let current = std::fs::read(path).ok();
    if current.as_deref() == Some(bytes) {
        return Ok(());
    }
    match mode {
        Mode::Write => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Mode::Check => problems.push(match current {
            None => format!("{label}: {} is missing", path.display()),
            Some(old) => format!(
                "{label}: {} drifted (first difference at byte {})",
                path.display(),
                old.iter().zip(bytes).take_while(|(a, b)| a == b).count()
            ),
        }),
    }
    Ok(())
}

/// Files under `dir` (relative path → bytes), only below `include` when it
/// is not empty. A missing `dir` has no files.
fn collect_files(dir: &Path, include: &[String]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let path = entry.map_err(|e| format!("{}: {e}", d.display()))?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            if !include.is_empty()
                && !include
                    .iter()
                    .any(|i| rel.starts_with(&format!("{i}/")) || &rel == i)
            {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            out.insert(rel, bytes);
        }
    }
    Ok(out)
}
