//! A shared run's decisions on its approval gates (`ctx_decisions`,
//! schema 11), as a run directory's store keeps them in its `decisions`
//! table: recorded by `ctx runs approve/reject --store` from any machine
//! ([`PgStore::decide`]), read by every claim of a gated task and by
//! everything that shows a run.
//!
//! A `before: run` task (`ctx_tasks.gate = 'run'`) is claimable only once
//! its run has a decision on it: an approval lets the worker run it, a
//! rejection lets the worker fail it with the note (ctx-deps'
//! `TaskRunner`), its dependents skipped by the commit as for any failure.

use std::sync::Arc;

use ctx_model::approval::{Decision, GateStage, Verdict};
use ctx_model::{TaskExecutionResult, TaskStatus};
use ctx_store::{DecisionRefused, DecisionRequest};

use crate::error::{Error, Result};
use crate::store::PgStore;

impl PgStore {
    /// Every decision on `run_id`'s gates, oldest first.
    pub async fn decisions(&self, run_id: &str) -> Result<Vec<Decision>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the decisions of run `{run_id}`"),
                    "SELECT task_id, stage, verdict, decided_by, at, note, output_sha256
                       FROM ctx_decisions WHERE run_id = $1 ORDER BY seq",
                    &[&run_id],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| Decision {
                    task_id: r.get(0),
                    stage: GateStage::parse(r.get(1)).unwrap_or(GateStage::Run),
                    verdict: Verdict::parse(r.get(2)).unwrap_or(Verdict::Reject),
                    by: r.get(3),
                    at: r.get(4),
                    note: r.get(5),
                    output_sha256: r.get(6),
                })
                .collect())
        })
        .await
    }

    /// Records `req` on `run_id` and returns the decision recorded, or
    /// [`Error::Decision`] when it is refused (nothing is written): the
    /// rules of ctx-store's `check_decision` over the run's plan, the
    /// task's row and the decisions so far. The insert holds on to what
    /// was checked: a `before: run` decision only while the task is still
    /// `pending`, and one decision per gate and output (the unique
    /// index); a decision that loses either race is checked again and
    /// told why. An approval wakes the workers (`NOTIFY ctx_ready`).
    pub async fn decide(&self, run_id: &str, req: &DecisionRequest) -> Result<Decision> {
        for _ in 0..3 {
            let decision = self.checked(run_id, req).await?;
            if self.insert_decision(run_id, &decision).await? {
                return Ok(decision);
            }
        }
        // The gate kept changing under the decision (a claim and a
        // resume in turn): refused, nothing written.
        let d = self.checked(run_id, req).await?;
        Err(Error::Decision(Box::new(DecisionRefused::NotWaiting {
            run: run_id.to_string(),
            task: d.task_id,
            stage: d.stage,
            why: "it changed while the decision was recorded; try again".into(),
        })))
    }

    /// The decision `req` would record now, or why it is refused.
    async fn checked(&self, run_id: &str, req: &DecisionRequest) -> Result<Decision> {
        let (plan, _) = self.plan_and_hash(run_id).await?;
        let latest = self
            .tasks(run_id)
            .await?
            .into_iter()
            .find(|t| t.task_id == req.task_id)
            .map(|t| match t.result {
                Some(r) if t.status != TaskStatus::Pending => r,
                _ => TaskExecutionResult::new(&t.task_id, t.status),
            });
        let decisions = self.decisions(run_id).await?;
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        ctx_store::check_decision(run_id, &plan, latest.as_ref(), &decisions, req, at)
            .map_err(|e| Error::Decision(Box::new(e)))
    }

    /// Inserts `d` if its gate still waits; whether it was inserted.
    async fn insert_decision(&self, run_id: &str, d: &Decision) -> Result<bool> {
        let run_id = run_id.to_string();
        let d = d.clone();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("recording a decision on task `{}` of run `{run_id}`", d.task_id),
                    "WITH ins AS (
                         INSERT INTO ctx_decisions
                                (run_id, task_id, stage, verdict, decided_by, at, note, output_sha256)
                         SELECT $1, $2, $3, $4, $5, $6, $7, $8
                          WHERE $3 = 'publish' OR EXISTS (
                                SELECT 1 FROM ctx_tasks
                                 WHERE run_id = $1 AND task_id = $2 AND status = 'pending')
                         ON CONFLICT DO NOTHING
                         RETURNING seq)
                     SELECT count(*), CASE WHEN count(*) > 0 THEN pg_notify('ctx_ready', $1)::text END
                       FROM ins",
                    &[
                        &run_id,
                        &d.task_id,
                        &d.stage.as_str(),
                        &d.verdict.as_str(),
                        &d.by,
                        &d.at,
                        &d.note,
                        &d.output_sha256,
                    ],
                )
                .await?;
            Ok(rows.first().is_some_and(|r| r.get::<_, i64>(0) > 0))
        })
        .await
    }
}
