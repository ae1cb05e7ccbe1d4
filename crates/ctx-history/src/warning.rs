//! Warnings: what did not stop the digest but changed it, typed so a
//! caller can act on the kind (the CLI prints each on stderr and lists them
//! in `--format json`) and worded by `Display`.
//!
//! A source that exists but is left out for lack of room is the one that
//! matters most: before these were typed, such a source disappeared with
//! only a `dropped` status in the JSON report, and a digest that lost all
//! of its sources exited 0 in silence.

use std::fmt;

use serde::Serialize;

/// One thing worth telling about an assembly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Warning {
    /// A report under a `before` directory was left out of the search: it
    /// has no date, or its front matter or encoding is broken and it is
    /// not the chosen report. `message` is the full sentence.
    SkippedReport {
        /// The report.
        path: String,
        /// What is wrong and what was done.
        message: String,
    },
    /// A symbolic link was not followed: a link to a directory, a link
    /// that leads outside the content root (without `follow_symlinks`),
    /// or a link to nothing readable.
    SymlinkNotFollowed {
        /// The link.
        path: String,
        /// Why.
        reason: String,
    },
    /// An archive file larger than the per-file limit
    /// ([`DigestRequest::max_file_bytes`](crate::DigestRequest::max_file_bytes))
    /// was skipped without being read, as an unreadable report is.
    FileTooLarge {
        /// The file.
        path: String,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A source that exists and has text was left out because not even
    /// its smallest piece fits the room the caps leave.
    SourceDropped {
        /// The source's key.
        source: String,
        /// The file it was read from.
        path: String,
        /// Words of its extracted text.
        extracted_words: usize,
    },
    /// None of the configured sources exists under the content root: most
    /// likely the wrong directory was given.
    NoRecognisedSource {
        /// The content root given.
        content_root: String,
        /// Where the sources were looked for, relative to it.
        looked_for: Vec<String>,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::SkippedReport { message, .. } => f.write_str(message),
            Warning::SymlinkNotFollowed { path, reason } => write!(f, "{path}: {reason}"),
            Warning::FileTooLarge { path, bytes, limit } => write!(
                f,
                "{path}: {bytes} bytes, larger than the limit of {limit} bytes per file; skipped"
            ),
            Warning::SourceDropped {
                source,
                path,
                extracted_words,
            } => write!(
                f,
                "{path}: source `{source}` dropped: not even its smallest piece fits the room left by the caps ({extracted_words} words extracted)"
            ),
            Warning::NoRecognisedSource {
                content_root,
                looked_for,
            } => write!(
                f,
                "{content_root}: no source found (looked for {}); is this the content root?",
                looked_for.join(", ")
            ),
        }
    }
}
