//! A stored run's outputs published after the run (`ctx runs publish`)
//! and its publishes undone (`ctx runs unpublish`).
//!
//! Publishing later goes through the very function a run's session
//! publishes with ([`crate::publish::publish`]), on the run's plan as it
//! was stored (filled) and its latest results: a task's output is written
//! only when its latest result completed (its checks passed). Approval
//! gates will narrow that to approved outputs.
//!
//! Undoing is checked whole before anything is written. Every publish
//! still in effect is undone, newest first, and every file in it must
//! still hold what that publish wrote (its SHA-256 as recorded; after a
//! newer publish of the same path is undone, what the older one wrote):
//! a file someone changed since is not ctx's to overwrite, so the undo
//! refuses, naming it, unless forced. Every backup it needs must be
//! there and hold the bytes its name says. Only then are files written
//! back (each atomically) or removed (those the publish created), and
//! the undo recorded, so a second undo finds nothing to do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ctx_model::digest::sha256_hex;
use ctx_store::{PublishEvent, PublishKind, Published};
use ctx_store_sqlite::{PublishLog, RunRoot};

use crate::atomic::{WriteError, write_atomic};
use crate::publish::{
    BackupDir, BackupError, Backups, PublishError, now, publish, publish_targets,
};

/// Why a stored run could not be published or unpublished.
#[derive(Debug, thiserror::Error)]
pub enum UnpublishError {
    /// The run could not be found, opened, locked, read or written.
    #[error(transparent)]
    Store(#[from] ctx_store_sqlite::Error),
    /// The run's plan names no `publish:` path.
    #[error("run {run}: its plan has no task with a publish: path; nothing to publish")]
    NoTargets {
        /// The run.
        run: String,
    },
    /// A file no longer holds what the run wrote into it.
    #[error(
        "{}: changed since run {run} published it (SHA-256 {found}, the run wrote {wrote}); nothing was undone (--force undoes it anyway)",
        path.display()
    )]
    Changed {
        /// The run.
        run: String,
        /// The file.
        path: PathBuf,
        /// What it holds now (`none`: it is gone).
        found: String,
        /// What the publish wrote.
        wrote: String,
    },
    /// The path holds something other than a regular file (a FIFO, a
    /// device, a directory): an undo neither reads nor removes it, even
    /// forced.
    #[error("{}: not a regular file now; nothing was undone", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
    /// A publish recorded before manifests were kept: what it replaced
    /// is unknown.
    #[error("{}: published by run {run} before ctx kept manifests and backups; it cannot be undone", path.display())]
    NoManifest {
        /// The run.
        run: String,
        /// The file.
        path: PathBuf,
    },
    /// The backup of what a publish replaced is missing or damaged.
    #[error("{}: its backup {backup} is {state}; nothing was undone", path.display())]
    MissingBackup {
        /// The file to restore.
        path: PathBuf,
        /// Where its backup should be.
        backup: String,
        /// `missing`, or what is wrong with it.
        state: String,
    },
    /// A file could not be written back or removed (the files undone
    /// before it stay undone; the undo is not recorded).
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// A stored run's publish: what was written, the publish that failed
/// after them (the files written before it are recorded all the same),
/// and the outputs its approval gates held back.
#[derive(Debug, Default)]
pub struct PublishedRun {
    /// The files written, in plan order.
    pub written: Vec<Published>,
    /// The publish that failed, after those written.
    pub failed: Option<PublishError>,
    /// The `before: publish` outputs not written: waiting for a decision
    /// on their digest, or rejected ([`crate::gates::withhold`]).
    pub withheld: Vec<crate::gates::Withheld>,
}

/// `ctx runs publish`: publishes the completed outputs of the run `run`
/// under `publish_root` (those its gates approve) and records the
/// publish with the run.
pub fn publish_stored(
    root: &RunRoot,
    run: &str,
    publish_root: &Path,
) -> Result<PublishedRun, UnpublishError> {
    let dir = root.resolve(run)?;
    let log = PublishLog::open(&dir)?;
    let results: Vec<_> = log
        .view()
        .results()?
        .into_iter()
        .map(|r| r.result)
        .collect();
    let done = publish_results(
        log.view().run_id(),
        &log.view().plan()?,
        &results,
        &log.view().decisions()?,
        publish_root,
        &BackupDir::of_run(&dir),
    )?;
    if !done.written.is_empty() {
        log.record_publish(&done.written)?;
    }
    Ok(done)
}

/// A stored run's publish, for any store: the completed outputs among
/// `results` written where `plan` (the run's stored, filled plan) says,
/// under `publish_root`, through [`publish`], but for those its
/// `before: publish` gates hold back (`decisions`: the run's). The
/// caller records what was written.
pub fn publish_results(
    run_id: &str,
    plan: &ctx_model::Plan,
    results: &[ctx_model::TaskExecutionResult],
    decisions: &[ctx_model::approval::Decision],
    publish_root: &Path,
    backups: &dyn Backups,
) -> Result<PublishedRun, UnpublishError> {
    let targets = publish_targets(plan);
    if targets.is_empty() {
        return Err(UnpublishError::NoTargets {
            run: run_id.to_string(),
        });
    }
    let (open, withheld) = crate::gates::withhold(plan, &targets, results, decisions, Some(run_id));
    let (written, failed) = publish(publish_root, &open, results, false, Some(backups));
    Ok(PublishedRun {
        written,
        failed,
        withheld,
    })
}

/// One step of an undo, decided before anything is written.
enum Step {
    /// Write these bytes (the backup) back.
    Restore(Vec<u8>),
    /// Remove the file: the publish created it.
    Remove,
}

/// An undo done: the publishes it reverted and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// The `seq` of each publish reverted.
    pub seqs: Vec<i64>,
    /// One line per file, in the order taken: its `sha256` is what it
    /// holds now (`None`: removed), `old_sha256` what it held before.
    pub lines: Vec<Published>,
}

/// `ctx runs unpublish`: undoes every publish of `run` still in effect,
/// newest first (`force`: even files changed since); a publish recorded
/// before manifests were kept is left alone. Returns the lines of
/// the undo recorded (each file's `sha256` is what it holds now, `None`
/// when removed), empty when there was nothing to undo.
pub fn unpublish(root: &RunRoot, run: &str, force: bool) -> Result<Vec<Published>, UnpublishError> {
    let dir = root.resolve(run)?;
    let log = PublishLog::open(&dir)?;
    let run_id = log.view().run_id().to_string();
    let events = log.view().publish_events()?;
    let Some(undone) = undo(&run_id, events, &BackupDir::of_run(&dir), force)? else {
        return Ok(Vec::new());
    };
    log.record_unpublish(&undone.seqs, &undone.lines)?;
    Ok(undone.lines)
}

/// An undo for any store: of `events` (the run's, oldest first), every
/// publish still in effect, newest first, checked whole and then taken.
/// `None` when there is nothing to undo. The caller records the result.
pub fn undo(
    run_id: &str,
    events: Vec<PublishEvent>,
    backups: &dyn Backups,
    force: bool,
) -> Result<Option<Undone>, UnpublishError> {
    // A publish recorded before manifests were kept cannot be undone; it
    // is left as it is, and named when it is all there is.
    let (pending, legacy): (Vec<PublishEvent>, Vec<PublishEvent>) = events
        .into_iter()
        .filter(|e| e.kind == PublishKind::Publish && e.undone_by.is_none())
        .rev()
        .partition(|e| e.files.iter().all(|f| f.sha256.is_some()));
    if pending.is_empty() {
        return match legacy.iter().flat_map(|e| &e.files).next() {
            Some(file) => Err(UnpublishError::NoManifest {
                run: run_id.to_string(),
                path: PathBuf::from(&file.path),
            }),
            None => Ok(None),
        };
    }
    let steps = plan_undo(run_id, &pending, backups, force)?;
    let mut lines = Vec::new();
    for (line, step) in steps {
        take(Path::new(&line.path), &step)?;
        lines.push(line);
    }
    Ok(Some(Undone {
        seqs: pending.iter().map(|e| e.seq).collect(),
        lines,
    }))
}

/// Writes back or removes one file.
fn take(path: &Path, step: &Step) -> Result<(), WriteError> {
    match step {
        Step::Restore(bytes) => write_atomic(path, bytes),
        Step::Remove => match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(WriteError {
                path: path.to_path_buf(),
                source,
            }),
        },
    }
}

/// Checks every file of `pending` (newest publish first, each one's files
/// last first) and reads every backup, writing nothing; returns each
/// undo line with its step, in the order to take them.
fn plan_undo(
    run: &str,
    pending: &[PublishEvent],
    backups: &dyn Backups,
    force: bool,
) -> Result<Vec<(Published, Step)>, UnpublishError> {
    // What each path holds once the steps before are taken.
    let mut holds: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut steps = Vec::new();
    for file in pending.iter().flat_map(|e| e.files.iter().rev()) {
        let path = PathBuf::from(&file.path);
        let Some(wrote) = &file.sha256 else {
            return Err(UnpublishError::NoManifest {
                run: run.into(),
                path,
            });
        };
        let now_holds = match holds.get(&file.path) {
            Some(h) => h.clone(),
            None => digest_of(&path)?,
        };
        if now_holds.as_deref() != Some(wrote.as_str()) && !force {
            return Err(UnpublishError::Changed {
                run: run.into(),
                path,
                found: now_holds.unwrap_or_else(|| "none: the file is gone".into()),
                wrote: wrote.clone(),
            });
        }
        let step = match &file.old_sha256 {
            Some(old) => Step::Restore(backup_bytes(backups, &path, old)?),
            None => Step::Remove,
        };
        holds.insert(file.path.clone(), file.old_sha256.clone());
        let line = Published {
            task_id: file.task_id.clone(),
            path: file.path.clone(),
            sha256: file.old_sha256.clone(),
            old_sha256: now_holds,
            size: match &step {
                Step::Restore(bytes) => Some(bytes.len() as u64),
                Step::Remove => None,
            },
            published_at: Some(now()),
        };
        steps.push((line, step));
    }
    Ok(steps)
}

/// The lines an undo prints, one per file: `restored TASK -> PATH` or
/// `removed TASK -> PATH` (a file the publish had created).
pub fn unpublished_text(undone: &[Published]) -> String {
    undone
        .iter()
        .map(|p| {
            format!(
                "{} {} -> {}\n",
                if p.sha256.is_some() {
                    "restored"
                } else {
                    "removed"
                },
                ctx_table::printable(&p.task_id),
                ctx_table::printable(&p.path)
            )
        })
        .collect()
}

/// The SHA-256 of the file at `path`, `None` when there is none. A path
/// that is not a regular file is refused before it is read (reading a
/// FIFO would wait for a writer).
fn digest_of(path: &Path) -> Result<Option<String>, UnpublishError> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(UnpublishError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(sha256_hex(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(WriteError {
            path: path.to_path_buf(),
            source,
        }
        .into()),
    }
}

/// The backup named `sha256`, checked against its name.
fn backup_bytes(
    backups: &dyn Backups,
    path: &Path,
    sha256: &str,
) -> Result<Vec<u8>, UnpublishError> {
    let missing = |state: String| UnpublishError::MissingBackup {
        path: path.to_path_buf(),
        backup: backups.location(sha256),
        state,
    };
    match backups.read(sha256) {
        Ok(Some(bytes)) if sha256_hex(&bytes) == sha256 => Ok(bytes),
        Ok(Some(_)) => Err(missing("damaged (its SHA-256 is not its name)".into())),
        Ok(None) => Err(missing("missing".into())),
        Err(BackupError { detail, .. }) => Err(missing(format!("unreadable: {detail}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Kept(RefCell<HashMap<String, Vec<u8>>>);

    impl Backups for Kept {
        fn keep(&self, sha256: &str, bytes: &[u8]) -> Result<(), BackupError> {
            self.0.borrow_mut().insert(sha256.into(), bytes.to_vec());
            Ok(())
        }
        fn read(&self, sha256: &str) -> Result<Option<Vec<u8>>, BackupError> {
            Ok(self.0.borrow().get(sha256).cloned())
        }
        fn location(&self, sha256: &str) -> String {
            format!("memory:{sha256}")
        }
    }

    fn line(path: &Path, new: &str, old: Option<&str>) -> Published {
        Published {
            task_id: "a".into(),
            path: path.display().to_string(),
            sha256: Some(sha256_hex(new.as_bytes())),
            old_sha256: old.map(|o| sha256_hex(o.as_bytes())),
            size: Some(new.len() as u64),
            published_at: None,
        }
    }

    fn event(seq: i64, files: Vec<Published>) -> PublishEvent {
        PublishEvent {
            seq,
            kind: PublishKind::Publish,
            at: String::new(),
            files,
            undone_by: None,
        }
    }

    /// Two publishes of one path, undone newest first: the older one is
    /// checked against what the newer one replaced, not the disk, and
    /// the last step puts back what was there before both.
    #[test]
    fn two_publishes_of_one_path_undo_to_the_first_bytes() {
        let dir = ctx_test_support::Dir::new();
        let path = dir.path().join("a.md");
        std::fs::write(&path, "second").unwrap();
        let kept = Kept::default();
        kept.keep(&sha256_hex(b"orig"), b"orig").unwrap();
        kept.keep(&sha256_hex(b"first"), b"first").unwrap();
        let pending = [
            event(2, vec![line(&path, "second", Some("first"))]),
            event(1, vec![line(&path, "first", Some("orig"))]),
        ];
        let steps = plan_undo("r", &pending, &kept, false).unwrap();
        assert_eq!(steps.len(), 2);
        assert!(matches!(&steps[1].1, Step::Restore(b) if b == b"orig"));
        // A file changed since is refused by name; --force takes it.
        std::fs::write(&path, "edited").unwrap();
        let err = plan_undo("r", &pending, &kept, false).err().unwrap();
        assert!(matches!(&err, UnpublishError::Changed { path: p, .. } if *p == path));
        assert!(plan_undo("r", &pending, &kept, true).is_ok());
    }

    /// Something other than a regular file where the publish wrote is
    /// never read or removed, even forced.
    #[test]
    fn a_path_that_is_no_longer_a_regular_file_is_refused_even_forced() {
        let dir = ctx_test_support::Dir::new();
        let path = dir.path().join("a.md");
        std::fs::create_dir(&path).unwrap();
        let pending = [event(1, vec![line(&path, "new", None)])];
        let err = plan_undo("r", &pending, &Kept::default(), true)
            .err()
            .unwrap();
        assert!(matches!(err, UnpublishError::NotRegular { .. }), "{err}");
    }

    /// A missing or damaged backup is an error naming the file and the
    /// backup; a file the publish created is removed.
    #[test]
    fn a_missing_or_damaged_backup_is_named() {
        let dir = ctx_test_support::Dir::new();
        let path = dir.path().join("a.md");
        std::fs::write(&path, "new").unwrap();
        let kept = Kept::default();
        let pending = [event(1, vec![line(&path, "new", Some("orig"))])];
        let err = plan_undo("r", &pending, &kept, false).err().unwrap();
        assert!(
            matches!(&err, UnpublishError::MissingBackup { state, .. } if state == "missing"),
            "{err}"
        );
        kept.0
            .borrow_mut()
            .insert(sha256_hex(b"orig"), b"not it".to_vec());
        let err = plan_undo("r", &pending, &kept, false).err().unwrap();
        assert!(err.to_string().contains("damaged"), "{err}");
        let created = [event(1, vec![line(&path, "new", None)])];
        let steps = plan_undo("r", &created, &kept, false).unwrap();
        assert!(matches!(steps[0].1, Step::Remove));
    }
}
