//! A shared run's publishes, their undos and the backups of what they
//! replaced (`ctx_publishes`, `ctx_publish_backups`, schema 10), as a run
//! directory's store keeps them in its `publishes` table and its
//! `published/backup` directory.

use std::sync::Arc;

use ctx_store::{PublishEvent, PublishKind, Published};

use crate::error::Result;
use crate::store::PgStore;

impl PgStore {
    /// Records a publish of `files` (`undone` empty) or the undo of the
    /// publishes `undone`, in one statement; returns its `seq`. Two at
    /// once on one run: one of them fails on the key, and nothing of it
    /// is recorded.
    pub async fn record_publish(
        &self,
        run_id: &str,
        files: &[Published],
        undone: &[i64],
    ) -> Result<i64> {
        let json = serde_json::to_string(files).map_err(|e| {
            self.shared
                .corrupt(run_id, "a publish's manifest".into(), e)
        })?;
        let kind = if undone.is_empty() {
            PublishKind::Publish
        } else {
            PublishKind::Unpublish
        };
        let (run_id, undone) = (run_id.to_string(), undone.to_vec());
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("recording a {} of run `{run_id}`", kind.as_str()),
                    "WITH ins AS (
                         INSERT INTO ctx_publishes (run_id, seq, kind, at, files_json)
                         SELECT $1, COALESCE(max(seq), 0) + 1, $2, $3, $4
                         FROM ctx_publishes WHERE run_id = $1
                         RETURNING seq
                     ), marked AS (
                         UPDATE ctx_publishes SET undone_by = (SELECT seq FROM ins)
                         WHERE run_id = $1 AND seq = ANY($5::bigint[]) AND undone_by IS NULL
                     )
                     SELECT seq FROM ins",
                    &[&run_id, &kind.as_str(), &at, &json, &undone],
                )
                .await?;
            Ok(rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or_default())
        })
        .await
    }

    /// Every publish and undo of `run_id`, oldest first.
    pub async fn publish_events(&self, run_id: &str) -> Result<Vec<PublishEvent>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the publishes of run `{run_id}`"),
                    "SELECT seq, kind, at, files_json, undone_by FROM ctx_publishes
                     WHERE run_id = $1 ORDER BY seq",
                    &[&run_id],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    let kind: String = r.get(1);
                    let files: String = r.get(3);
                    let files = serde_json::from_str(&files)
                        .map_err(|e| shared.corrupt(&run_id, "a publish's manifest".into(), e))?;
                    Ok(PublishEvent {
                        seq: r.get(0),
                        kind: PublishKind::parse(&kind).unwrap_or(PublishKind::Publish),
                        at: r.get(2),
                        files,
                        undone_by: r.get(4),
                    })
                })
                .collect()
        })
        .await
    }

    /// The files of `run_id`'s latest publish still in effect.
    pub async fn published(&self, run_id: &str) -> Result<Vec<Published>> {
        Ok(ctx_store::in_effect(self.publish_events(run_id).await?))
    }

    /// Keeps `bytes` as the backup named `sha256` of `run_id` (a second
    /// keep of the same digest is a no-op).
    pub async fn keep_backup(&self, run_id: &str, sha256: &str, bytes: Vec<u8>) -> Result<()> {
        let (run_id, sha256) = (run_id.to_string(), sha256.to_string());
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            shared
                .query(
                    &|| format!("keeping a backup for run `{run_id}`"),
                    "INSERT INTO ctx_publish_backups (run_id, sha256, bytes) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                    &[&run_id, &sha256, &bytes],
                )
                .await
                .map(drop)
        })
        .await
    }

    /// The backup named `sha256` of `run_id`, if kept.
    pub async fn read_backup(&self, run_id: &str, sha256: &str) -> Result<Option<Vec<u8>>> {
        let (run_id, sha256) = (run_id.to_string(), sha256.to_string());
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading a backup of run `{run_id}`"),
                    "SELECT bytes FROM ctx_publish_backups WHERE run_id = $1 AND sha256 = $2",
                    &[&run_id, &sha256],
                )
                .await?;
            Ok(rows.first().map(|r| r.get::<_, Vec<u8>>(0)))
        })
        .await
    }
}
