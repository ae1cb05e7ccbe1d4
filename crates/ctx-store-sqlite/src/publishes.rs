//! A run's publishes and their undos (`publishes`, schema 5): what
//! `ctx run --publish-root`, `ctx runs publish` and `ctx runs unpublish`
//! record, and the manifest `ctx runs show` lists.

use std::path::Path;

use ctx_store::{PublishEvent, PublishKind, Published};
use rusqlite::{TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::id::now_rfc3339;
use crate::lock::RunLock;
use crate::view::RunView;

impl RunView {
    /// Every publish and undo of the run, oldest first.
    pub fn publish_events(&self) -> Result<Vec<PublishEvent>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, kind, at, files_json, undone_by FROM publishes ORDER BY seq",
            )
            .map_err(Error::sql(&self.path))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                ))
            })
            .map_err(Error::sql(&self.path))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, kind, at, files, undone_by) = row.map_err(Error::sql(&self.path))?;
            let bad = |detail: String| Error::BadRow {
                path: self.path.clone(),
                task_id: String::new(),
                field: "publishes",
                detail,
            };
            let kind = PublishKind::parse(&kind).ok_or_else(|| bad(format!("kind {kind:?}")))?;
            let files = serde_json::from_str(&files).map_err(|e| bad(e.to_string()))?;
            out.push(PublishEvent {
                seq,
                kind,
                at,
                files,
                undone_by,
            });
        }
        Ok(out)
    }

    /// The files of the latest publish still in effect (not undone), in
    /// plan order; none when every publish was undone.
    pub fn published(&self) -> Result<Vec<Published>> {
        Ok(ctx_store::in_effect(self.publish_events()?))
    }
}

/// Records one publish (`undone` empty) or one undo of the publishes
/// `undone`, in one transaction; returns its `seq`.
pub(crate) fn insert(
    view: &RunView,
    session: Option<i64>,
    files: &[Published],
    undone: &[i64],
) -> Result<i64> {
    let path = &view.path;
    let json = serde_json::to_string(files).map_err(|e| Error::BadRow {
        path: path.clone(),
        task_id: String::new(),
        field: "publishes.files_json",
        detail: e.to_string(),
    })?;
    let kind = if undone.is_empty() {
        PublishKind::Publish
    } else {
        PublishKind::Unpublish
    };
    let mut conn = view.conn();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(Error::sql(path))?;
    tx.execute(
        "INSERT INTO publishes (session, kind, at, files_json) VALUES (?1, ?2, ?3, ?4)",
        params![session, kind.as_str(), now_rfc3339(), json],
    )
    .map_err(Error::sql(path))?;
    let seq = tx.last_insert_rowid();
    for undone in undone {
        tx.execute(
            "UPDATE publishes SET undone_by = ?1 WHERE seq = ?2",
            params![seq, undone],
        )
        .map_err(Error::sql(path))?;
    }
    tx.commit().map_err(Error::sql(path))?;
    Ok(seq)
}

/// A stored run opened to publish or undo outside any session (`ctx runs
/// publish`, `ctx runs unpublish`): it holds the run's lock, so no `ctx
/// run` writes it meanwhile, and no session is opened (a publish is not
/// an execution: `RUN@N` and the session count stay as they were).
pub struct PublishLog {
    view: RunView,
    _lock: RunLock,
}

impl PublishLog {
    /// Opens the run in `dir`: the checks and the lock of a resume (an
    /// older schema is migrated).
    pub fn open(dir: &Path) -> Result<PublishLog> {
        let (view, lock) = crate::store::open_writer(dir)?;
        Ok(PublishLog { view, _lock: lock })
    }

    /// Read access to the run.
    pub fn view(&self) -> &RunView {
        &self.view
    }

    /// Records a publish of `files`; returns its `seq`.
    pub fn record_publish(&self, files: &[Published]) -> Result<i64> {
        insert(&self.view, None, files, &[])
    }

    /// Records the undo of the publishes `undone` (their `seq`s), which
    /// wrote back or removed `files`; returns its `seq`.
    pub fn record_unpublish(&self, undone: &[i64], files: &[Published]) -> Result<i64> {
        insert(&self.view, None, files, undone)
    }
}
