//! A run's decisions on its approval gates (`decisions`, schema 6):
//! recorded by `ctx runs approve` and `ctx runs reject` ([`decide`]),
//! read by the executor when a gated task is ready and by everything
//! that shows a run.
//!
//! A decision takes no lock on the run: the run may be executing in
//! another process, waiting (`--wait-approval`) for this very decision.
//! What it checks (ctx-store's `check_decision`) is read inside the
//! `BEGIN IMMEDIATE` transaction that inserts it, and the unique index
//! on (task, stage, output) refuses a second decision on one gate, so of
//! two decisions at once one wins and the other is told which.

use std::path::Path;

use ctx_model::approval::{Decision, GateStage, Verdict};
use ctx_store::{DecisionRefused, DecisionRequest};
use rusqlite::params;

use crate::error::{Error, Result};
use crate::id::now_rfc3339;
use crate::schema::{self, Access};
use crate::view::RunView;

impl RunView {
    /// Every decision on the run's gates, oldest first.
    pub fn decisions(&self) -> Result<Vec<Decision>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT task_id, stage, verdict, by, at, note, output_sha256
                 FROM decisions ORDER BY seq",
            )
            .map_err(Error::sql(&self.path))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            })
            .map_err(Error::sql(&self.path))?;
        let mut out = Vec::new();
        for row in rows {
            let (task_id, stage, verdict, by, at, note, output_sha256) =
                row.map_err(Error::sql(&self.path))?;
            let bad = |detail: String| Error::BadRow {
                path: self.path.clone(),
                task_id: task_id.clone(),
                field: "decisions",
                detail,
            };
            let stage = GateStage::parse(&stage).ok_or_else(|| bad(format!("stage {stage:?}")))?;
            let verdict =
                Verdict::parse(&verdict).ok_or_else(|| bad(format!("verdict {verdict:?}")))?;
            out.push(Decision {
                task_id,
                stage,
                verdict,
                by,
                at,
                note,
                output_sha256,
            });
        }
        Ok(out)
    }
}

/// Records `req` on the run in `dir` and returns the decision recorded;
/// [`Error::Decision`] when it is refused (nothing is written). An
/// older store is migrated first (for that moment under the run's lock).
pub fn decide(dir: &Path, req: &DecisionRequest) -> Result<Decision> {
    let migrated = RunView::open(dir)?;
    let path = migrated.path.clone();
    drop(migrated);
    let conn = schema::connect(&path, Access::Write)?;
    let view = RunView::from_conn(conn, path.clone(), dir)?;
    view.conn()
        .execute_batch("BEGIN IMMEDIATE")
        .map_err(Error::sql(&path))?;
    let decided = check_and_insert(&view, req);
    let end = if decided.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    view.conn().execute_batch(end).map_err(Error::sql(&path))?;
    decided
}

/// Inside the caller's transaction: checks `req` against the plan as
/// last run, the task's latest result and the decisions so far, and
/// inserts it.
fn check_and_insert(view: &RunView, req: &DecisionRequest) -> Result<Decision> {
    let plan = view.plan()?;
    let latest = view.result(&req.task_id)?.map(|r| r.result);
    let decisions = view.decisions()?;
    let decision = ctx_store::check_decision(
        view.run_id(),
        &plan,
        latest.as_ref(),
        &decisions,
        req,
        now_rfc3339(),
    )?;
    let inserted = view.conn().execute(
        "INSERT INTO decisions (task_id, stage, verdict, by, at, note, output_sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            decision.task_id,
            decision.stage.as_str(),
            decision.verdict.as_str(),
            decision.by,
            decision.at,
            decision.note,
            decision.output_sha256,
        ],
    );
    match inserted {
        Ok(_) => Ok(decision),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            // Another decision on this gate was committed first.
            let all = view.decisions()?;
            let winner = ctx_model::approval::settling(
                &all,
                &decision.task_id,
                decision.stage,
                decision.output_sha256.as_deref(),
            );
            Err(match winner {
                Some(w) => DecisionRefused::settled(view.run_id(), w).into(),
                None => Error::sql(&view.path)(rusqlite::Error::SqliteFailure(e, None)),
            })
        }
        Err(e) => Err(Error::sql(&view.path)(e)),
    }
}
