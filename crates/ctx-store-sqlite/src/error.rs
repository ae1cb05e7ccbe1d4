//! The one error type of this crate. Every variant names the path, run or
//! task it is about, so the CLI can print it as is.

use std::path::PathBuf;

use ctx_store::StoreError;

/// What went wrong opening, locking, reading or writing a run store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `RUN` names neither a run id under the root nor a directory.
    #[error("run `{run}` not found: no run of that id under {} and no directory of that name", root.display())]
    NotFound {
        /// The run id or directory as given.
        run: String,
        /// The store root that was searched.
        root: PathBuf,
    },
    /// The directory exists but holds no `store.sqlite`.
    #[error("{}: not a ctx run directory (no store.sqlite in it)", dir.display())]
    NoStore {
        /// The directory.
        dir: PathBuf,
    },
    /// A new run was asked for in a directory that already holds one.
    #[error("{}: already holds a run (store.sqlite exists); resume it or choose another directory", dir.display())]
    AlreadyExists {
        /// The directory.
        dir: PathBuf,
    },
    /// Another process holds the run's lock.
    #[error("run {run} is being executed by another ctx process ({}); lock file {}", pid.map_or_else(|| "pid unknown".to_string(), |p| format!("pid {p}")), lock.display())]
    Locked {
        /// The run's id (or directory when the id could not be read).
        run: String,
        /// The holder's process id, as it wrote it into the lock file.
        pid: Option<u32>,
        /// The lock file.
        lock: PathBuf,
    },
    /// The store was written by a newer ctx.
    #[error("{}: store schema version {found} is newer than this ctx supports ({supported}); use a newer ctx (the store was left untouched)", path.display())]
    NewerSchema {
        /// The `store.sqlite` file.
        path: PathBuf,
        /// Its `PRAGMA user_version`.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The file is a SQLite database but not a ctx store (or an empty one).
    #[error("{}: not a ctx run store: {detail} (the file was left untouched)", path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        detail: String,
    },
    /// The file is not a SQLite database at all, or is damaged.
    #[error("{}: not a SQLite database, or corrupt: {source} (the file was left untouched)", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// SQLite's words.
        #[source]
        source: rusqlite::Error,
    },
    /// A SQLite call failed (disk full, read-only file, I/O error, ...).
    #[error("{}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's words.
        #[source]
        source: rusqlite::Error,
    },
    /// A file-system call failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS's words.
        #[source]
        source: std::io::Error,
    },
    /// A stored row could not be decoded.
    #[error("{}: task `{task_id}`: stored {field} is unreadable: {detail}", path.display())]
    BadRow {
        /// The database file.
        path: PathBuf,
        /// The task the row belongs to (empty for run-level rows).
        task_id: String,
        /// The column.
        field: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// A decision on an approval gate was refused (nothing was written).
    #[error(transparent)]
    Decision(Box<ctx_store::DecisionRefused>),
}

impl From<ctx_store::DecisionRefused> for Error {
    fn from(e: ctx_store::DecisionRefused) -> Self {
        Error::Decision(Box::new(e))
    }
}

impl Error {
    /// Whether the error is the user's naming of a run that does not exist
    /// (a usage error) rather than a store that could not be used.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. } | Error::NoStore { .. })
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }

    pub(crate) fn sql(path: impl Into<PathBuf>) -> impl FnOnce(rusqlite::Error) -> Error {
        let path = path.into();
        move |source| Error::Sqlite { path, source }
    }

    /// Whether SQLite answered "database is locked" (or "busy"): another
    /// connection held a lock longer than it would wait, or a step that
    /// does not wait at all met one.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(
            self,
            Error::Sqlite {
                source: rusqlite::Error::SqliteFailure(f, _),
                ..
            } if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

impl From<Error> for StoreError {
    fn from(e: Error) -> StoreError {
        StoreError::wrap(e)
    }
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A store error handed through the seam keeps the typed error, so an
    /// embedder tells a missing run from a failing store without reading
    /// the message.
    #[test]
    fn the_seam_error_keeps_the_typed_error_as_its_source() {
        let e = StoreError::from(Error::NotFound {
            run: "20261201T000000Z-0001".into(),
            root: std::path::PathBuf::from(".ctx/runs"),
        });
        let typed = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<Error>())
            .expect("the sqlite error is the source");
        assert!(typed.is_not_found());
        assert!(e.to_string().contains("20261201T000000Z-0001"), "{e}");
    }
}
