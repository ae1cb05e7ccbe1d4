//! The one error type of this crate.
//!
//! Every variant names the file it is about and, where the problem has a
//! place, the 1-based line in that file (not in the front-matter fragment:
//! a YAML error on the third line of a front matter that starts on line 2
//! is reported at line 4).

use std::path::PathBuf;

/// What went wrong while reading an archive or assembling a digest.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The content root does not exist or is not a directory.
    #[error("{}: content root does not exist or is not a directory", path.display())]
    MissingContentRoot {
        /// The path given.
        path: PathBuf,
    },
    /// A file is not valid UTF-8.
    #[error("{}: not valid UTF-8 (first bad byte at offset {offset}, line {line})", path.display())]
    InvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// 1-based line of that byte.
        line: usize,
    },
    /// A front-matter block opened on line `line` never closes.
    #[error("{}:{line}: front matter opened with `{delimiter}` is never closed", path.display())]
    UnclosedFrontMatter {
        /// The file.
        path: PathBuf,
        /// 1-based line of the opening delimiter.
        line: usize,
        /// `---` or `+++`.
        delimiter: &'static str,
    },
    /// The front matter is not valid YAML/TOML.
    #[error("{}:{line}: malformed {format} front matter: {message}", path.display())]
    FrontMatter {
        /// The file.
        path: PathBuf,
        /// 1-based line in the file (best known).
        line: usize,
        /// `YAML` or `TOML`.
        format: &'static str,
        /// The parser's message.
        message: String,
    },
    /// The history configuration is malformed.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Config {
        /// The configuration file (or `<config>` for an in-memory one).
        path: PathBuf,
        /// 1-based line, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// A file named by the caller (`--previous-summary`, `--config`) is
    /// missing or is not a regular file. Reading a FIFO would block and a
    /// directory has no text, so both are refused before any read.
    #[error("{}: {role}: {problem}", path.display())]
    NotAFile {
        /// The path given.
        path: PathBuf,
        /// What it was given as (`previous summary`, `configuration`).
        role: &'static str,
        /// `does not exist`, `is a directory`, `is not a regular file (a FIFO, socket or device)`.
        problem: &'static str,
    },
    /// A file is larger than the per-file limit
    /// ([`DigestRequest::max_file_bytes`](crate::DigestRequest::max_file_bytes)):
    /// read no further than the limit, so an archive from someone else
    /// cannot make ctx read gigabytes.
    #[error("{}: larger than the limit of {limit} bytes per file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit it is over.
        limit: u64,
    },
    /// A request value is out of range (`--date`, `--share`, ...).
    #[error("{field}: {message}")]
    Request {
        /// The field or flag.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Checks that a file the caller named is a regular file (following
/// links), without opening it: a FIFO would block the read.
pub(crate) fn require_file(path: &std::path::Path, role: &'static str) -> Result<(), HistoryError> {
    let problem = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => return Ok(()),
        Ok(m) if m.is_dir() => "is a directory",
        Ok(_) => "is not a regular file (a FIFO, socket or device)",
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "does not exist",
        Err(e) => {
            return Err(HistoryError::Io {
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    Err(HistoryError::NotAFile {
        path: path.to_path_buf(),
        role,
        problem,
    })
}

/// 1-based line number of byte `offset` in `text`.
pub(crate) fn line_of(text: &[u8], offset: usize) -> usize {
    let end = offset.min(text.len());
    text.get(..end)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
        + 1
}
