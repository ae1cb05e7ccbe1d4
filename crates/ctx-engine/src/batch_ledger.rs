//! The journal of a run's provider batches ([`BatchLedger`]): what an
//! engine that sends requests through a provider's batch API writes
//! before it waits on a batch, so that a process that dies while the
//! provider works loses nothing, and a resume finds the batch and reads
//! its answers instead of paying for the requests again.
//!
//! Plain data and a trait: the engine writes [`BatchEntry`]s, a durable
//! store keeps them (the SQLite run store's `batches` tables, docs/runs.md
//! "Durable batches") and gives back the batches whose answers were not
//! yet handed out ([`BatchLedger::unsettled`]). The engine does not know
//! the store, nor the store the engine: the session binds one to the
//! other ([`crate::InferenceEngine::keep_batches`]).

/// One request put in a batch input file: enough to map its answer back
/// to its task and attempt, and to tell whether a later request is the
/// same one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchedRequest {
    /// The line's `custom_id`.
    pub custom_id: String,
    /// The task it is for.
    pub task_id: String,
    /// The engine's attempt number for the task (1 for the first).
    pub attempt: u32,
    /// SHA-256 (hex) of the request body as sent, inside its line.
    pub body_sha256: String,
    /// The output bound of the request (`max_output_bytes`): what its
    /// answer may take when the output file is read.
    pub max_output_bytes: usize,
}

/// A batch as the provider last reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchReport {
    /// The batch's id.
    pub id: String,
    /// Its status (`validating`, `in_progress`, `finalizing`,
    /// `completed`, `failed`, `expired`, `cancelling`, `cancelled`).
    pub status: String,
    /// `request_counts.total`.
    pub total: u64,
    /// `request_counts.completed`.
    pub completed: u64,
    /// `request_counts.failed`.
    pub failed: u64,
}

impl BatchReport {
    /// Whether the status is one a batch never leaves
    /// ([`ctx_model::batch_status::is_final`]).
    pub fn is_final(&self) -> bool {
        ctx_model::batch_status::is_final(&self.status)
    }
}

/// What happened to a batch, written as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEntry<'a> {
    /// The input file was uploaded, holding `requests` for `model`:
    /// written before the batch is created, so a process that dies before
    /// creating it leaves a file the resume knows to delete.
    Uploaded {
        /// The file's id.
        file_id: &'a str,
        /// The model every request asks for.
        model: &'a str,
        /// Each request of the file.
        requests: &'a [BatchedRequest],
    },
    /// The batch was created from file `file_id`: written before it is
    /// waited on.
    Created {
        /// The input file's id.
        file_id: &'a str,
        /// The batch as the create call answered it.
        batch: &'a BatchReport,
    },
    /// The batch was read (or cancelled) and its status or counts moved.
    Status {
        /// The batch as read.
        batch: &'a BatchReport,
    },
    /// Every answer of the batch was handed to its call: a resume no
    /// longer waits on it.
    Collected {
        /// The batch's id.
        batch_id: &'a str,
    },
    /// An input file whose batch was never created was deleted (or found
    /// gone) at the provider.
    FileDeleted {
        /// The file's id.
        file_id: &'a str,
    },
}

/// A batch whose answers were not handed out: one a resume waits on, or
/// (with no `batch`) a file a process uploaded and died before creating
/// its batch from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournaledBatch {
    /// The input file's id.
    pub file_id: String,
    /// The model its requests ask for.
    pub model: String,
    /// The batch as last recorded; `None` when it was never created.
    pub batch: Option<BatchReport>,
    /// When the batch was created, in milliseconds since the Unix epoch
    /// by the recording machine's clock (a deadline counts from it).
    pub created_unix_ms: Option<u64>,
    /// Each request of the file.
    pub requests: Vec<BatchedRequest>,
}

/// A ledger that could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("the run's batch ledger: {message}")]
pub struct LedgerError {
    /// What failed, with its path.
    pub message: String,
}

impl LedgerError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> LedgerError {
        LedgerError {
            message: message.into(),
        }
    }
}

/// Where an engine journals the batches of one run. Calls are synchronous
/// and short (one committed write each): an async engine makes them off
/// its runtime's workers.
pub trait BatchLedger: Send + Sync {
    /// The run's id, which each request's `custom_id` names.
    fn run_id(&self) -> &str;

    /// Records `entry`, durably, before returning.
    fn record(&self, entry: &BatchEntry<'_>) -> Result<(), LedgerError>;

    /// Every batch not yet collected, and every uploaded file whose batch
    /// was never created nor the file deleted, oldest first.
    fn unsettled(&self) -> Result<Vec<JournaledBatch>, LedgerError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_final_by_its_status() {
        let mut report = BatchReport {
            id: "b".into(),
            status: "cancelling".into(),
            total: 2,
            completed: 1,
            failed: 0,
        };
        assert!(!report.is_final());
        report.status = "cancelled".into();
        assert!(report.is_final());
    }
}
