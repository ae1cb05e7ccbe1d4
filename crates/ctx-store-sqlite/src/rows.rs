//! The attempts rows as read back: the column list every read query
//! selects, and the decoding of a row into a [`ResultRecord`].

use std::path::Path;

use ctx_model::{ResultMetadata, TaskExecutionResult, TaskStatus};
use ctx_store::ResultRecord;
use rusqlite::Row;

use crate::error::{Error, Result};
use ctx_store::fingerprint::TaskFingerprint;

pub(crate) const COLUMNS: &str = "a.task_id, a.status, a.output, a.summary, a.error, a.prompt, a.prompt_hash,
    a.metadata_json, a.engine, a.inputs_hash, a.model, a.params_hash, a.session, a.recorded_at, a.seq, a.raw_output";

/// The latest-result columns after [`COLUMNS`]: where the execution started
/// (`s` is the `attempts` row `t.started_seq` points at, left-joined).
pub(crate) const STARTED: &str = "t.started_seq, s.recorded_at";

/// A row as read, before its JSON and status are decoded (decoding errors
/// must name the path and task, which a rusqlite row mapper cannot).
pub(crate) struct RawRow {
    task_id: String,
    status: String,
    output: String,
    summary: Option<String>,
    error: Option<String>,
    prompt: Option<String>,
    prompt_hash: Option<String>,
    metadata_json: String,
    engine: String,
    inputs_hash: Option<String>,
    model: Option<String>,
    params_hash: Option<String>,
    session: i64,
    recorded_at: String,
    seq: i64,
    raw_output: Option<String>,
    started_seq: Option<i64>,
    started_at: Option<String>,
}

impl RawRow {
    pub(crate) fn read(r: &Row<'_>, with_started: bool) -> rusqlite::Result<RawRow> {
        Ok(RawRow {
            task_id: r.get(0)?,
            status: r.get(1)?,
            output: r.get(2)?,
            summary: r.get(3)?,
            error: r.get(4)?,
            prompt: r.get(5)?,
            prompt_hash: r.get(6)?,
            metadata_json: r.get(7)?,
            engine: r.get(8)?,
            inputs_hash: r.get(9)?,
            model: r.get(10)?,
            params_hash: r.get(11)?,
            session: r.get(12)?,
            recorded_at: r.get(13)?,
            seq: r.get(14)?,
            raw_output: r.get(15)?,
            started_seq: if with_started { r.get(16)? } else { None },
            started_at: if with_started { r.get(17)? } else { None },
        })
    }

    pub(crate) fn decode(self, path: &Path) -> Result<ResultRecord> {
        let status = parse_status(&self.status, path, &self.task_id)?;
        let metadata: ResultMetadata =
            serde_json::from_str(&self.metadata_json).map_err(|e| Error::BadRow {
                path: path.to_path_buf(),
                task_id: self.task_id.clone(),
                field: "attempts.metadata_json",
                detail: e.to_string(),
            })?;
        let fingerprint = match (self.inputs_hash, self.params_hash) {
            (Some(inputs_hash), Some(params_hash)) => Some(TaskFingerprint {
                inputs_hash,
                model: self.model,
                params_hash,
            }),
            _ => None,
        };
        Ok(ResultRecord {
            result: TaskExecutionResult {
                task_id: self.task_id,
                status,
                output: self.output,
                raw_output: self.raw_output,
                summary: self.summary,
                error: self.error,
                prompt: self.prompt,
                metadata,
            },
            prompt_hash: self.prompt_hash,
            engine: self.engine,
            fingerprint,
            session: self.session,
            recorded_at: self.recorded_at,
            seq: self.seq,
            started_seq: self.started_seq,
            started_at: self.started_at,
        })
    }
}

pub(crate) fn parse_status(s: &str, path: &Path, task_id: &str) -> Result<TaskStatus> {
    Ok(match s {
        "pending" => TaskStatus::Pending,
        "in_progress" => TaskStatus::InProgress,
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "skipped" => TaskStatus::Skipped,
        other => {
            return Err(Error::BadRow {
                path: path.to_path_buf(),
                task_id: task_id.to_string(),
                field: "status",
                detail: format!("unknown status `{other}`"),
            });
        }
    })
}
