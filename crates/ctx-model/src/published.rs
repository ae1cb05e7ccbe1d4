//! A published output and its manifest line: what `ctx run
//! --publish-root` and `ctx runs publish` record per file, what the stores
//! keep, results.json and `ctx runs show` list, and the report shows.

/// One published output (`ctx run --publish-root`, `ctx runs publish`):
/// the task whose final output it holds, the file written, as the run
/// that wrote it named it, and its manifest line.
///
/// The manifest fields are what `ctx runs unpublish` needs to undo the
/// write safely: the new digest tells whether someone changed the file
/// since (then it is not ours to overwrite), the old digest names the
/// backup of the bytes it replaced (`None` when the file did not exist,
/// so undoing removes it). They are optional so that a publish recorded
/// before manifests were kept still reads; such a line cannot be undone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// The task whose output it holds.
    pub task_id: String,
    /// The file: the publish root joined with the task's `publish` path.
    pub path: String,
    /// SHA-256 (hex) of the bytes written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// SHA-256 of the bytes the write replaced, which were kept as a
    /// backup under that digest; `None` when there was no file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_sha256: Option<String>,
    /// How many bytes were written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// When the file was written (RFC 3339, UTC, milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
}

impl Published {
    /// The first 12 digits of the digest written; empty when unknown (a
    /// line recorded before manifests were kept, or a file an undo
    /// removed).
    pub fn short_sha256(&self) -> &str {
        short(self.sha256.as_deref().unwrap_or_default())
    }

    /// The first 12 digits of the digest replaced; `new file` when there
    /// was no file, empty when unknown (no manifest).
    pub fn replaced(&self) -> &str {
        match (&self.sha256, &self.old_sha256) {
            (_, Some(old)) => short(old),
            (Some(_), None) => "new file",
            (None, None) => "",
        }
    }
}

/// A digest cut to the 12 digits a reader compares.
fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}
