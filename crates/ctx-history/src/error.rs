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
    #[error("{}: {message}", path.display())]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's message.
        message: String,
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
    /// A request value is out of range (`--date`, `--share`, ...).
    #[error("{field}: {message}")]
    Request {
        /// The field or flag.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// 1-based line number of byte `offset` in `text`.
pub(crate) fn line_of(text: &[u8], offset: usize) -> usize {
    let end = offset.min(text.len());
    text.get(..end)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
        + 1
}
