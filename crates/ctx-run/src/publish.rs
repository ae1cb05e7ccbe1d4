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

use std::path::{Component, Path, PathBuf};

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
}

/// Writes the output of every task of `targets` that completed, under
/// `root` (created if missing), in plan order, and stops at the first
/// failure. Returns what was written, and the failure if there was one.
/// Nothing is written when `interrupted`.
pub fn publish(
    root: &Path,
    targets: &[PublishTarget],
    results: &[TaskExecutionResult],
    interrupted: bool,
) -> (Vec<Published>, Option<PublishError>) {
    let mut done = Vec::new();
    if interrupted {
        return (done, None);
    }
    for target in targets {
        let Some(result) = results
            .iter()
            .find(|r| r.task_id == target.task_id && r.status == TaskStatus::Completed)
        else {
            continue;
        };
        match publish_one(root, &target.path, &result.output) {
            Ok(path) => done.push(Published {
                task_id: target.task_id.clone(),
                path: path.display().to_string(),
            }),
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

/// One file: directories created one at a time under the root, each one
/// that exists resolved and held inside it.
fn publish_one(root: &Path, relative: &str, output: &str) -> Result<PathBuf, PublishError> {
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
    write_atomic(&at, output.as_bytes())?;
    Ok(at)
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
            let (done, err) = publish(&root, &[target("a", path)], &[completed("a", "x")], false);
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
        );
        assert!(matches!(err, Some(PublishError::NotRelative { .. })));
    }
}
