//! Files written whole or not at all.
//!
//! Every file ctx says it writes atomically (`--out` files, `results.json`,
//! HTML reports, schemas) goes through [`write_atomic`], so the promise is
//! kept by one function rather than by each caller's comment.
//!
//! "Atomically" is a promise about regular files only. A path that names
//! something else (a FIFO, `/dev/null`, `/dev/stdout`, a terminal) is
//! written into as it stands: replacing it with a regular file would, as
//! root, destroy a system's device node, and would leave a reader of the
//! FIFO waiting for ever. A symbolic link is followed, so the file it
//! points to is the one replaced and the link stays a link.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A file that could not be written: the path and the system's reason.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WriteError {
    /// The file that was to be written.
    pub path: PathBuf,
    /// Why it was not.
    #[source]
    pub source: std::io::Error,
}

/// Writes `contents` to `path`, creating parent directories, so that
/// `path` holds either its old content or all of the new one, never a
/// part, and no temporary file outlives the call.
///
/// The bytes go to a temporary file of a unique name in the same
/// directory (`.NAME.PID-N.ctx-tmp`, created exclusively, so two writers
/// never share one), are flushed to disk (`fsync`), and the file is
/// renamed over `path`. On any error (disk full, a directory in the way)
/// the temporary file is removed before the error is returned. Only a
/// crash between creating and renaming it can leave one behind.
///
/// A path that already exists and is not a regular file or a directory
/// (a FIFO, a character or block device, a socket) is never replaced:
/// the bytes are written into it directly, with no temporary file and no
/// `fsync` (see the module's comment). A socket cannot be opened and is
/// an error. A symbolic link is resolved first, so the link survives and
/// its target is what gets written.
///
/// This blocks (it waits for the disk, or for a FIFO's reader): from
/// async code, call it on the blocking pool.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), WriteError> {
    let fail = |source: std::io::Error| WriteError {
        path: path.to_path_buf(),
        source,
    };
    let resolved;
    let path = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            // A dangling link is an error: following it would create a
            // file wherever it points, renaming over it would drop it.
            resolved = std::fs::canonicalize(path).map_err(fail)?;
            resolved.as_path()
        }
        _ => path,
    };
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
        && !meta.is_dir()
    {
        return write_in_place(path, contents).map_err(fail);
    }
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => {
            std::fs::create_dir_all(parent).map_err(fail)?;
            parent
        }
        None => Path::new("."),
    };
    let (tmp, mut file) = create_temporary(parent, path).map_err(fail)?;
    let written = file
        .write_all(contents)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            std::fs::rename(&tmp, path)
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    // The rename is durable once the directory is flushed too; a file
    // system that cannot flush a directory loses nothing it had promised.
    #[cfg(unix)]
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Writes `contents` into an existing non-regular file (a FIFO, a device)
/// as it stands: opened for writing without creating or truncating it.
fn write_in_place(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all(contents)?;
    file.flush()
}

/// Creates a new, empty temporary file beside `path`, under a name no
/// other writer (thread or process) is using.
fn create_temporary(dir: &Path, path: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}-{n}.ctx-tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            // Left by an earlier process with the same id: try the next.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_write_replaces_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub/a.md");
        write_atomic(&file, b"one").unwrap();
        write_atomic(&file, b"two").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        assert_eq!(names(&dir.path().join("sub")), ["a.md"]);
    }

    #[test]
    fn a_failed_write_removes_its_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should go: the rename fails after
        // the bytes were written.
        std::fs::create_dir_all(dir.path().join("taken/inside")).unwrap();
        let err = write_atomic(&dir.path().join("taken"), b"data").unwrap_err();
        assert_eq!(err.path, dir.path().join("taken"));
        assert!(err.to_string().contains("taken"), "{err}");
        assert_eq!(names(dir.path()), ["taken"]);
    }

    /// A FIFO at the path is written into and stays a FIFO: its reader
    /// gets the bytes, and no temporary file is made beside it.
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_written_into_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"report").unwrap();
        // Checked before joining: a replaced FIFO leaves the reader
        // waiting for a writer that never comes.
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(kind.is_fifo(), "the FIFO was replaced: {kind:?}");
        assert_eq!(reader.join().unwrap(), b"report");
        assert_eq!(names(dir.path()), ["pipe"]);
    }

    /// `/dev/null` stays a character device (as root, a rename over it
    /// would replace the system's device with a regular file).
    #[cfg(unix)]
    #[test]
    fn dev_null_stays_a_character_device() {
        use std::os::unix::fs::FileTypeExt;
        let null = Path::new("/dev/null");
        write_atomic(null, b"discarded").unwrap();
        let kind = std::fs::symlink_metadata(null).unwrap().file_type();
        assert!(kind.is_char_device(), "{kind:?}");
    }

    /// A symbolic link is followed: its target gets the new bytes and the
    /// link stays a link.
    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.html");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.html");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }
}
