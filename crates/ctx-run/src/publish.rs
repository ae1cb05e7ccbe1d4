//! Published outputs: a task's final output written where its `publish:`
//! path says, under a root the caller names (`ctx run --publish-root
//! DIR`), after the run.
//!
//! Publishing is a step after the run, not part of it: the executor knows
//! nothing of it, and a file is written only for a task that completed
//! (its checks passed) in a run that was not interrupted, so an existing
//! file is replaced only by a finished answer. Each write is atomic
//! ([`write_atomic`]).
//!
//! The paths were checked when the plan was filled (relative, no `..`,
//! no two tasks on one path); here each is checked once more against the
//! disk: every directory on the way and the file itself, when it is a
//! symbolic link, must resolve inside the root. A link that leads out is
//! refused, and nothing is written through it.
//!
//! Every file written gets a manifest line ([`Published`]: new and old
//! SHA-256, size, time), and the bytes it replaces are kept first, under
//! their digest, by the caller's [`Backups`]: a local run keeps them in
//! its directory ([`BackupDir`]), a shared one in its database. That is
//! what lets `ctx runs unpublish` ([`crate::unpublish`]) put them back.
//! A backup is written before the file is replaced, and a backup that
//! cannot be kept stops the publish before that file, so no byte is ever
//! replaced without a copy. Naming a backup by its digest means two
//! publishes can never overwrite each other's backup with other bytes.

use std::path::{Component, Path, PathBuf};

use ctx_model::digest::sha256_hex;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};

use crate::atomic::{WriteError, write_atomic};

/// Where a task's output goes: the task and its path under the root, as
/// filled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishTarget {
    /// The task.
    pub task_id: String,
    /// Its `publish` path, relative to the root.
    pub path: String,
}

/// The `publish` paths of a (filled) plan, in plan order.
pub fn publish_targets(plan: &Plan) -> Vec<PublishTarget> {
    plan.sub_tasks
        .iter()
        .filter_map(|t| {
            Some(PublishTarget {
                task_id: t.id.clone(),
                path: t.publish.clone()?,
            })
        })
        .collect()
}

/// One file written (the type the stores keep, `ctx_store::Published`).
pub use ctx_store::Published;

/// Where a run publishes: `--publish-root` and the filled plan's targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishTo {
    /// The root every path is under (`--publish-root DIR`).
    pub root: PathBuf,
    /// Each task's path under it ([`publish_targets`] of the filled plan).
    pub targets: Vec<PublishTarget>,
}

/// Why a file was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The path resolves outside the root through a symbolic link.
    #[error("{}: a symbolic link leads outside the publish root {}", path.display(), root.display())]
    Escapes {
        /// The path that leads out.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// The path is not a plain relative path (checked when the plan was
    /// filled; a library caller may skip that).
    #[error("{path}: not a relative path inside the publish root")]
    NotRelative {
        /// The path.
        path: String,
    },
    /// A directory or the file could not be created or written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The bytes the file holds could not be kept before replacing it;
    /// the file was left as it was.
    #[error("{}: its current bytes could not be kept as a backup in {}: {}", file.display(), source.location, source.detail)]
    Backup {
        /// The file that was to be replaced.
        file: PathBuf,
        /// Why its backup failed.
        source: BackupError,
    },
}

/// A backup that could not be written or read: where, and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{location}: {detail}")]
pub struct BackupError {
    /// The backup's place: a file, or a store's URL and table.
    pub location: String,
    /// The system's or the store's words.
    pub detail: String,
}

/// Where the bytes a publish replaces are kept, by their SHA-256, before
/// the file is replaced.
pub trait Backups {
    /// Keeps `bytes`, whose SHA-256 is `sha256`, durably; keeping the
    /// same digest twice is a no-op.
    fn keep(&self, sha256: &str, bytes: &[u8]) -> Result<(), BackupError>;

    /// The bytes kept under `sha256`; `Ok(None)` when there are none.
    fn read(&self, sha256: &str) -> Result<Option<Vec<u8>>, BackupError>;

    /// Where the backup of `sha256` is (or would be), for messages.
    fn location(&self, sha256: &str) -> String;
}

/// A local run's backups: files named by their digest under
/// `RUN_DIR/published/backup/`, each written atomically.
#[derive(Debug, Clone)]
pub struct BackupDir {
    dir: PathBuf,
}

impl BackupDir {
    /// The backup directory of the run stored in `run_dir`.
    pub fn of_run(run_dir: &Path) -> BackupDir {
        BackupDir {
            dir: run_dir.join("published").join("backup"),
        }
    }

    fn file(&self, sha256: &str) -> PathBuf {
        self.dir.join(sha256)
    }
}

impl Backups for BackupDir {
    fn keep(&self, sha256: &str, bytes: &[u8]) -> Result<(), BackupError> {
        let path = self.file(sha256);
        if path.is_file() {
            return Ok(());
        }
        write_atomic(&path, bytes).map_err(|e| BackupError {
            location: path.display().to_string(),
            detail: e.source.to_string(),
        })
    }

    fn read(&self, sha256: &str) -> Result<Option<Vec<u8>>, BackupError> {
        let path = self.file(sha256);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(BackupError {
                location: path.display().to_string(),
                detail: e.to_string(),
            }),
        }
    }

    fn location(&self, sha256: &str) -> String {
        self.file(sha256).display().to_string()
    }
}

/// The current UTC time as a manifest records it.
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Writes the output of every task of `targets` that completed, under
/// `root` (created if missing), in plan order, and stops at the first
/// failure. Returns what was written, and the failure if there was one.
/// Nothing is written when `interrupted`. The bytes each write replaces
/// are kept in `backups` first; `None` keeps none (a run held in memory
/// has nowhere to keep them, and nothing to undo with).
pub fn publish(
    root: &Path,
    targets: &[PublishTarget],
    results: &[TaskExecutionResult],
    interrupted: bool,
    backups: Option<&dyn Backups>,
) -> (Vec<Published>, Option<PublishError>) {
    let mut done = Vec::new();
    if interrupted {
        return (done, None);
    }
    // The manifest names each file by an absolute path, so that an undo
    // from another directory finds it.
    let root = match std::path::absolute(root) {
        Ok(root) => root,
        Err(source) => {
            let path = root.to_path_buf();
            return (done, Some(WriteError { path, source }.into()));
        }
    };
    let root = root.as_path();
    for target in targets {
        let Some(result) = results
            .iter()
            .find(|r| r.task_id == target.task_id && r.status == TaskStatus::Completed)
        else {
            continue;
        };
        match publish_one(root, &target.path, &result.output, backups) {
            Ok((path, old_sha256)) => done.push(Published {
                task_id: target.task_id.clone(),
                path: path.display().to_string(),
                sha256: Some(sha256_hex(result.output.as_bytes())),
                old_sha256,
                size: Some(result.output.len() as u64),
                published_at: Some(now()),
            }),
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

/// Keeps what the regular file `at` holds, if it exists, in `backups`;
/// returns its digest (`None`: no file, or no backups asked for).
fn keep_old(at: &Path, backups: Option<&dyn Backups>) -> Result<Option<String>, PublishError> {
    let Some(backups) = backups else {
        return Ok(None);
    };
    let io = |source| WriteError {
        path: at.to_path_buf(),
        source,
    };
    match std::fs::metadata(at) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e).into()),
    }
    let old = std::fs::read(at).map_err(io)?;
    let sha = sha256_hex(&old);
    backups
        .keep(&sha, &old)
        .map_err(|source| PublishError::Backup {
            file: at.to_path_buf(),
            source,
        })?;
    Ok(Some(sha))
}

/// One file: directories created one at a time under the root, each one
/// that exists resolved and held inside it.
fn publish_one(
    root: &Path,
    relative: &str,
    output: &str,
    backups: Option<&dyn Backups>,
) -> Result<(PathBuf, Option<String>), PublishError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError { path, source }
    };
    let parts: Vec<&str> = Path::new(relative)
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str().ok_or(()),
            Component::CurDir => Ok(""),
            _ => Err(()),
        })
        .collect::<Result<_, ()>>()
        .map_err(|()| PublishError::NotRelative {
            path: relative.into(),
        })?;
    let parts: Vec<&str> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    let Some((file, dirs)) = parts.split_last() else {
        return Err(PublishError::NotRelative {
            path: relative.into(),
        });
    };
    std::fs::create_dir_all(root).map_err(io(root))?;
    let real_root = std::fs::canonicalize(root).map_err(io(root))?;
    let inside = |path: &Path| -> Result<(), PublishError> {
        let real = std::fs::canonicalize(path).map_err(io(path))?;
        if real.starts_with(&real_root) {
            Ok(())
        } else {
            Err(PublishError::Escapes {
                path: path.to_path_buf(),
                root: root.to_path_buf(),
            })
        }
    };
    let mut at = root.to_path_buf();
    for dir in dirs {
        at.push(dir);
        match std::fs::symlink_metadata(&at) {
            Ok(_) => inside(&at)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&at).map_err(io(&at))?
            }
            Err(e) => return Err(io(&at)(e).into()),
        }
    }
    at.push(file);
    if let Ok(meta) = std::fs::symlink_metadata(&at)
        && meta.file_type().is_symlink()
    {
        inside(&at)?;
    }
    let old = keep_old(&at, backups)?;
    write_atomic(&at, output.as_bytes())?;
    Ok((at, old))
}

/// The summary's lines for what was published, one per file:
/// `published TASK -> PATH`.
pub fn published_text(published: &[Published]) -> String {
    published
        .iter()
        .map(|p| {
            format!(
                "published {} -> {}\n",
                ctx_table::printable(&p.task_id),
                ctx_table::printable(&p.path)
            )
        })
        .collect()
}

/// The manifest `ctx runs show` prints: each publish and undo, oldest
/// first (`publish 1 at TIME`, `undone by 3`), and under it one line per
/// file: the task, the path, the SHA-256 written (`-`: a line recorded
/// before manifests, or a file an undo removed), what it replaced (`new`:
/// no file was there), and the size.
pub fn manifest_text(events: &[ctx_store::PublishEvent]) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("{} {} at {}", e.kind.as_str(), e.seq, e.at));
        if let Some(by) = e.undone_by {
            out.push_str(&format!(", undone by {by}"));
        }
        out.push('\n');
        for f in &e.files {
            out.push_str(&format!(
                "  {} -> {}  sha256 {}  replaced {}  {}\n",
                ctx_table::printable(&f.task_id),
                ctx_table::printable(&f.path),
                dash(f.short_sha256()),
                match f.replaced() {
                    "new file" => "new",
                    other => dash(other),
                },
                f.size.map_or_else(|| "-".into(), |n| format!("{n} bytes")),
            ));
        }
    }
    out
}

/// `-` for a field not known.
fn dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(id: &str, output: &str) -> TaskExecutionResult {
        let mut r: TaskExecutionResult = serde_json::from_value(serde_json::json!({
            "task_id": id, "status": "completed", "output": output
        }))
        .unwrap();
        r.output = output.into();
        r
    }

    fn target(id: &str, path: &str) -> PublishTarget {
        PublishTarget {
            task_id: id.into(),
            path: path.into(),
        }
    }

    #[test]
    fn completed_outputs_are_written_under_the_root() {
        let dir = ctx_test_support::Dir::new();
        let root = dir.path().join("site");
        let (done, err) = publish(
            &root,
            &[target("a", "weekly/2026-W33.md"), target("b", "b.md")],
            &[completed("a", "# Report\n")],
            false,
            None,
        );
        assert!(err.is_none(), "{err:?}");
        assert_eq!(done.len(), 1);
        assert_eq!(
            std::fs::read_to_string(root.join("weekly/2026-W33.md")).unwrap(),
            "# Report\n"
        );
        // Interrupted: nothing.
        let (done, _) = publish(
            &root,
            &[target("a", "again.md")],
            &[completed("a", "x")],
            true,
            None,
        );
        assert!(done.is_empty() && !root.join("again.md").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_that_leaves_the_root_is_refused() {
        let dir = ctx_test_support::Dir::new();
        let root = dir.path().join("site");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f.md"), "theirs").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("f.md"), root.join("f.md")).unwrap();
        for path in ["out/x.md", "f.md"] {
            let (done, err) = publish(
                &root,
                &[target("a", path)],
                &[completed("a", "x")],
                false,
                None,
            );
            assert!(done.is_empty());
            assert!(
                matches!(err, Some(PublishError::Escapes { .. })),
                "{path}: {err:?}"
            );
        }
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
        assert_eq!(
            std::fs::read_to_string(outside.join("f.md")).unwrap(),
            "theirs"
        );
        let (_, err) = publish(
            &root,
            &[target("a", "../x.md")],
            &[completed("a", "x")],
            false,
            None,
        );
        assert!(matches!(err, Some(PublishError::NotRelative { .. })));
    }

    /// Each write's manifest line names the bytes written and those
    /// replaced, and the replaced bytes are kept under their digest
    /// before the file changes; a new file has no old digest.
    #[test]
    fn a_replaced_file_is_kept_and_the_manifest_names_both_digests() {
        let dir = ctx_test_support::Dir::new();
        let root = dir.path().join("site");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.md"), "old text").unwrap();
        let backups = BackupDir::of_run(&dir.path().join("run"));
        let (done, err) = publish(
            &root,
            &[target("a", "a.md"), target("b", "b.md")],
            &[completed("a", "new text"), completed("b", "bee")],
            false,
            Some(&backups),
        );
        assert!(err.is_none(), "{err:?}");
        let old = sha256_hex(b"old text");
        assert_eq!(
            done[0].sha256.as_deref(),
            Some(sha256_hex(b"new text").as_str())
        );
        assert_eq!(done[0].old_sha256.as_deref(), Some(old.as_str()));
        assert_eq!(done[0].size, Some(8));
        assert!(done[0].published_at.is_some());
        assert_eq!(done[1].old_sha256, None);
        assert_eq!(backups.read(&old).unwrap().unwrap(), b"old text");
        assert_eq!(
            dir.path()
                .join("run/published/backup")
                .read_dir()
                .unwrap()
                .count(),
            1
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.md")).unwrap(),
            "new text"
        );
    }

    /// A backup that cannot be kept stops the publish before the file
    /// is touched.
    #[cfg(unix)]
    #[test]
    fn a_backup_that_cannot_be_kept_leaves_the_file_as_it_was() {
        let dir = ctx_test_support::Dir::new();
        let root = dir.path().join("site");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.md"), "old text").unwrap();
        // The run directory is a file: no backup directory can be made.
        std::fs::write(dir.path().join("run"), "").unwrap();
        let backups = BackupDir::of_run(&dir.path().join("run"));
        let (done, err) = publish(
            &root,
            &[target("a", "a.md")],
            &[completed("a", "new text")],
            false,
            Some(&backups),
        );
        assert!(done.is_empty());
        assert!(matches!(err, Some(PublishError::Backup { .. })), "{err:?}");
        assert_eq!(
            std::fs::read_to_string(root.join("a.md")).unwrap(),
            "old text"
        );
    }
}
