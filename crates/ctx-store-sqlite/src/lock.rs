//! One writer per run: an OS file lock on `run.lock` in the run directory.
//!
//! The lock is `flock(2)`-style (`std::fs::File::try_lock`): the kernel
//! releases it when the holding process exits for any reason, SIGKILL
//! included, so a crashed run never stays locked and needs no stale-lock
//! heuristics. Locks belong to the open file description, so a second open
//! in the *same* process conflicts too (the tests rely on that).
//!
//! SQLite's own locking was not used for this: its write lock lasts one
//! transaction, not a run, and `locking_mode=EXCLUSIVE` would also shut out
//! the readers (`ctx runs show` on a running run).
//!
//! After taking the lock the holder writes its pid into the file; a refused
//! opener reads it back for the error message.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// The lock file's name inside a run directory.
pub const LOCK_FILE: &str = "run.lock";

/// A held run lock; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock of the run in `dir`, or fails with
    /// [`Error::Locked`] naming `run` and the holder's pid.
    ///
    /// A failed attempt is retried for ~250 ms: `ctx runs list` probes locks
    /// by taking them for a few microseconds, and such a probe must not make
    /// a starting run fail.
    pub(crate) fn acquire(dir: &Path, run: &str) -> Result<RunLock> {
        let path = dir.join(LOCK_FILE);
        let mut file = open_lock_file(&path)?;
        let mut tries = 0;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if tries < 25 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Locked {
                        run: run.to_string(),
                        pid: read_pid(&mut file),
                        lock: path,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(Error::io(&path)(e)),
            }
        }
        let pid = format!("{}\n", std::process::id());
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()))
            .and_then(|()| file.sync_data())
            .map_err(Error::io(&path))?;
        Ok(RunLock { _file: file })
    }
}

/// Whether a process currently holds the lock of the run in `dir`, and its
/// pid if it wrote one. Takes the lock for an instant when it is free.
pub(crate) fn probe(dir: &Path) -> Option<Option<u32>> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new().read(true).write(true).open(&path).ok()?;
    match file.try_lock() {
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => Some(read_pid(&mut file)),
        Err(TryLockError::Error(_)) => None,
    }
}

/// Takes the lock without retrying and returns it, or `None` when held
/// elsewhere (used by `gc`, which skips running runs).
pub(crate) fn try_take(dir: &Path) -> Result<Option<RunLock>> {
    let path = dir.join(LOCK_FILE);
    let file = open_lock_file(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(RunLock { _file: file })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(Error::io(&path)(e)),
    }
}

fn open_lock_file(path: &PathBuf) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(Error::io(path))
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut s = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}
