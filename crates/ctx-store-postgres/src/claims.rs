//! The claim protocol (claim, heartbeat, release, commit under a fence)
//! and the single writer's unfenced store of a result.

use std::sync::Arc;
use std::time::Duration;

use ctx_model::{TaskExecutionResult, TaskStatus};
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use crate::PgStore;
use crate::connection::PgError;
use crate::error::Result;
use crate::runs::close_if_done;

/// A claim on one task: who holds it and its fencing token.
///
/// `attempt` increases by one at every claim of the task, so a worker whose
/// lease lapsed and whose task was claimed again holds a token that no
/// longer matches: its heartbeats and its commit are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The run.
    pub run_id: String,
    /// The task.
    pub task_id: String,
    /// The fencing token.
    pub attempt: i32,
    /// The worker holding it.
    pub worker: String,
    /// The hash of the run's plan when the task was claimed: a map's
    /// expansion appends its items to the stored plan, so a worker whose
    /// loaded plan has another hash loads it again before running the
    /// task (an item, or a dependent of a map, needs the items).
    pub plan_hash: String,
}

/// What happened to a result committed under a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// The result is the task's, and its dependents were released (or, for
    /// a failure, skipped) in the same transaction.
    Committed,
    /// The lease had lapsed (or the task was claimed again): the result was
    /// discarded, counted in the run's `late_commits` and kept in the
    /// attempts history with `committed = false`.
    Refused,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl PgStore {
    /// Claims the ready task with the longest remaining path, in `run` or
    /// in any open run: a `pending` task whose dependencies all completed,
    /// or an `in_progress` one whose lease has lapsed (its worker died).
    /// `FOR UPDATE SKIP LOCKED` lets concurrent workers pass over rows
    /// another is claiming, so each claim is one statement and no two
    /// workers get the same task. `None`: nothing is claimable now.
    pub async fn claim(
        &self,
        run: Option<&str>,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<Claim>> {
        let run = run.map(str::to_string);
        let worker = worker.to_string();
        let lease = ms(lease);
        let engine = self.engine.as_deref().map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| "claiming a task".to_string(),
                    "WITH c AS (
                       SELECT run_id, task_id FROM ctx_tasks
                        WHERE ($1::text IS NULL OR run_id = $1) AND pending_deps = 0
                          AND (status = 'pending' OR (status = 'in_progress' AND lease_until < now()))
                        ORDER BY priority DESC, run_id, idx
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED)
                     UPDATE ctx_tasks t
                        SET status = 'in_progress', claimed_by = $2, attempt = t.attempt + 1,
                            lease_until = now() + $3::float8 * interval '1 millisecond',
                            started_at = now(), claim_seq = nextval('ctx_claim_seq'),
                            engine = $4::text
                       FROM c
                      WHERE t.run_id = c.run_id AND t.task_id = c.task_id
                     RETURNING t.run_id, t.task_id, t.attempt,
                               (SELECT r.plan_hash FROM ctx_runs r WHERE r.run_id = t.run_id)",
                    &[&run, &worker, &lease, &engine],
                )
                .await?;
            Ok(rows.first().map(|r| Claim {
                run_id: r.get(0),
                task_id: r.get(1),
                attempt: r.get(2),
                worker,
                plan_hash: r.get(3),
            }))
        })
        .await
    }

    /// Renews `claim`'s lease. `false`: the claim is lost (the lease lapsed
    /// and the task was claimed again, or released); the worker must stop
    /// the task, its result would be refused anyway.
    pub async fn heartbeat(&self, claim: &Claim, lease: Duration) -> Result<bool> {
        let lease = ms(lease);
        self.fenced(
            claim,
            "renewing the lease of",
            "UPDATE ctx_tasks SET lease_until = now() + $5::float8 * interval '1 millisecond'
              WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                AND status = 'in_progress' AND lease_until >= now()",
            Some(Box::new(lease)),
        )
        .await
    }

    /// Gives `claim` back: the task is `pending` again at once, for any
    /// worker (a worker stopping with SIGTERM releases what it holds).
    pub async fn release(&self, claim: &Claim) -> Result<bool> {
        self.fenced(
            claim,
            "releasing",
            "WITH r AS (
               UPDATE ctx_tasks SET status = 'pending', claimed_by = NULL, lease_until = NULL
                WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                  AND status = 'in_progress'
               RETURNING run_id)
             SELECT pg_notify('ctx_ready', r.run_id)::text FROM r",
            None,
        )
        .await
    }

    /// Stores the task's `in_progress` result (its exact prompt) under the
    /// claim, for `ctx runs show` while it runs. `false`: the claim is lost.
    pub async fn save_progress(&self, claim: &Claim, result: &TaskExecutionResult) -> Result<bool> {
        let json = serde_json::to_string(result).map_err(|e| {
            self.shared
                .corrupt(&claim.run_id, format!("task `{}`", claim.task_id), e)
        })?;
        self.fenced(
            claim,
            "storing the prompt of",
            "UPDATE ctx_tasks SET result_json = $5
              WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                AND status = 'in_progress' AND lease_until >= now()",
            Some(Box::new(json)),
        )
        .await
    }

    /// One statement under `claim`'s fence: `sql` takes the run, task,
    /// fencing token and worker as `$1`..`$4` (and `extra` as `$5`), and
    /// changes one row while the claim holds. `false`: the claim is lost.
    async fn fenced(
        &self,
        claim: &Claim,
        what: &'static str,
        sql: &'static str,
        extra: Option<Box<dyn ToSql + Send + Sync>>,
    ) -> Result<bool> {
        let claim = claim.clone();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let context = || format!("{what} task `{}` of run `{}`", claim.task_id, claim.run_id);
            let mut params: Vec<&(dyn ToSql + Sync)> =
                vec![&claim.run_id, &claim.task_id, &claim.attempt, &claim.worker];
            if let Some(p) = &extra {
                params.push(p.as_ref());
            }
            let params = params.as_slice();
            let n = shared
                .with(&context, 1, move |c, _| async move {
                    let r = c.execute(sql, params).await;
                    (c, r)
                })
                .await?;
            Ok(n == 1)
        })
        .await
    }

    /// Commits the task's terminal `result` under `claim`, only while the
    /// lease is live and the fencing token matches. In the same statement
    /// (one transaction): a `completed` result (or any end of a map's
    /// item, for its map task's counter) decrements the ready counter
    /// of every dependent, which makes the last one's dependents claimable
    /// at the commit that makes its result visible; any other marks the
    /// task's transitive dependents `skipped`, with the reason the
    /// executor gives. A refused result is counted and kept in the
    /// history, never made the task's.
    ///
    /// The dependents are read from the run's own edges (one more round
    /// trip, on a failure only), not given by the caller: a worker that
    /// cannot load the stored plan still fails the task with every
    /// dependent skipped, so no run is left with pending tasks nobody can
    /// claim. The set cannot change before the commit: every dependent
    /// waits on this task, so none is claimable, and a changed plan is
    /// refused while the claim is live.
    pub async fn complete(&self, claim: &Claim, result: &TaskExecutionResult) -> Result<Commit> {
        let claim = claim.clone();
        let status = result.status.as_str().to_string();
        let json = serde_json::to_string(result).map_err(|e| {
            self.shared
                .corrupt(&claim.run_id, format!("task `{}`", claim.task_id), e)
        })?;
        let skips = if result.status == TaskStatus::Completed {
            Vec::new()
        } else {
            self.dependents(&claim.run_id, &claim.task_id).await?
        };
        let mut skip_ids = Vec::with_capacity(skips.len());
        let mut skip_json = Vec::with_capacity(skips.len());
        for (id, direct) in skips {
            let mut r = TaskExecutionResult::new(&id, TaskStatus::Skipped);
            r.error = Some(ctx_store::skip_reason(&claim.task_id, direct));
            skip_json.push(serde_json::to_string(&r).map_err(|e| {
                self.shared
                    .corrupt(&claim.run_id, format!("task `{id}`"), e)
            })?);
            skip_ids.push(id);
        }
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let context = || {
                format!(
                    "committing task `{}` of run `{}`",
                    claim.task_id, claim.run_id
                )
            };
            let (claim, status, json) = (&claim, &status, &json);
            let (skip_ids, skip_json) = (&skip_ids, &skip_json);
            let outcome = shared
                .with(&context, 2, move |c, retry| async move {
                    let r =
                        commit_statement(&c, claim, status, json, skip_ids, skip_json, retry).await;
                    (c, r)
                })
                .await?;
            Ok(outcome)
        })
        .await
    }

    /// The transitive dependents of `task_id` in `run_id`, by id, each
    /// with whether it depends on the task directly.
    pub async fn dependents(&self, run_id: &str, task_id: &str) -> Result<Vec<(String, bool)>> {
        let (run_id, task_id) = (run_id.to_string(), task_id.to_string());
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the dependents of task `{task_id}` of run `{run_id}`"),
                    // UNION (not ALL) keeps at most two rows a task (direct
                    // or not) however many paths lead to it. An item's
                    // edge to its map task (`joins`) is not followed: a
                    // failed item releases the map, whose join decides.
                    "WITH RECURSIVE d(task_id, direct) AS (
                       SELECT task_id, true FROM ctx_edges
                        WHERE run_id = $1 AND depends_on = $2 AND NOT joins
                       UNION
                       SELECT e.task_id, false FROM ctx_edges e JOIN d ON e.depends_on = d.task_id
                        WHERE e.run_id = $1 AND NOT e.joins)
                     SELECT task_id, bool_or(direct) FROM d GROUP BY task_id ORDER BY task_id",
                    &[&run_id, &task_id],
                )
                .await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
        .await
    }

    pub(crate) fn blocking_store(&self, run_id: &str, result: &TaskExecutionResult) -> Result<()> {
        let run_id = run_id.to_string();
        let status = result.status.as_str().to_string();
        let task_id = result.task_id.clone();
        let json = serde_json::to_string(result)
            .map_err(|e| self.shared.corrupt(&run_id, format!("task `{task_id}`"), e))?;
        let shared = Arc::clone(&self.shared);
        self.blocking(async move {
            let context = || format!("storing task `{task_id}` of run `{run_id}`");
            let (run_id, task_id, status, json) = (&run_id, &task_id, &status, &json);
            shared
                .with(&context, 2, move |c, _| async move {
                    let r = unfenced_store(&c, run_id, task_id, status, json).await;
                    (c, r)
                })
                .await
        })
    }
}

/// The commit of a terminal result under a claim: one statement, so one
/// transaction and one round trip, plus one to close the run when this was
/// its last task.
async fn commit_statement(
    c: &Client,
    claim: &Claim,
    status: &str,
    json: &str,
    skip_ids: &[String],
    skip_json: &[String],
    retry: bool,
) -> Result<Commit, PgError> {
    let row = c
        .query_one(
            "WITH done AS (
               UPDATE ctx_tasks SET status = $5, result_json = $6, claimed_by = NULL,
                      lease_until = NULL, finished_at = now()
                WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                  AND status = 'in_progress' AND lease_until >= now()
                RETURNING task_id),
             hist AS (
               INSERT INTO ctx_attempts (run_id, task_id, attempt, worker, status, committed, result_json)
               SELECT $1, $2, $3, $4, $5, true, $6 FROM done),
             released AS (
               UPDATE ctx_tasks t SET pending_deps = t.pending_deps - 1
                 FROM ctx_edges e, done
                WHERE ($5 = 'completed' OR e.joins) AND e.run_id = $1 AND e.depends_on = $2
                  AND t.run_id = $1 AND t.task_id = e.task_id
               RETURNING t.pending_deps),
             skipped AS (
               UPDATE ctx_tasks t SET status = 'skipped', result_json = s.j, finished_at = now()
                 FROM unnest($7::text[], $8::text[]) AS s(id, j), done
                WHERE $5 <> 'completed' AND t.run_id = $1 AND t.task_id = s.id
                  AND t.status = 'pending')
             SELECT (SELECT count(*) FROM done),
                    -- Idle workers wake when this commit makes a task
                    -- ready (delivered at commit; see `PgStore::listen`).
                    (SELECT pg_notify('ctx_ready', $1)
                      WHERE EXISTS (SELECT 1 FROM released WHERE pending_deps = 0))::text",
            &[
                &claim.run_id,
                &claim.task_id,
                &claim.attempt,
                &claim.worker,
                &status,
                &json,
                &skip_ids,
                &skip_json,
            ],
        )
        .await?;
    let committed = row.get::<_, i64>(0) == 1;
    if !committed && retry {
        // The connection broke around an earlier try of this commit: if it
        // went through, the row holds our attempt's result already.
        let row = c
            .query_opt(
                "SELECT 1 FROM ctx_tasks WHERE run_id = $1 AND task_id = $2 AND attempt = $3
                    AND status = $4 AND result_json = $5",
                &[
                    &claim.run_id,
                    &claim.task_id,
                    &claim.attempt,
                    &status,
                    &json,
                ],
            )
            .await?;
        if row.is_some() {
            close_if_done(c, &claim.run_id).await?;
            return Ok(Commit::Committed);
        }
    }
    if committed {
        close_if_done(c, &claim.run_id).await?;
        Ok(Commit::Committed)
    } else {
        c.execute(
            "WITH late AS (
               INSERT INTO ctx_attempts (run_id, task_id, attempt, worker, status, committed, result_json)
               VALUES ($1, $2, $3, $4, $5, false, $6))
             UPDATE ctx_runs SET late_commits = late_commits + 1 WHERE run_id = $1",
            &[
                &claim.run_id,
                &claim.task_id,
                &claim.attempt,
                &claim.worker,
                &status,
                &json,
            ],
        )
        .await?;
        Ok(Commit::Refused)
    }
}

/// The single-writer path of [`RunStore`](crate::RunStore): the result is
/// the task's whatever its claim; a completion still releases dependents.
///
/// The task started at its first `in_progress` result: a task whose checks
/// failed is asked again and stores each attempt's prompt as a new
/// `in_progress` result, which continues the execution (its start is kept;
/// in a `SET`, `status` is the row's value before the update).
async fn unfenced_store(
    c: &Client,
    run_id: &str,
    task_id: &str,
    status: &str,
    json: &str,
) -> Result<(), PgError> {
    c.execute(
        "WITH prev AS (
           SELECT status FROM ctx_tasks WHERE run_id = $1 AND task_id = $2 FOR UPDATE),
         upd AS (
           UPDATE ctx_tasks SET status = $3, result_json = $4, claimed_by = NULL, lease_until = NULL,
                  started_at = CASE WHEN $3 = 'in_progress' AND status <> 'in_progress'
                                    THEN now() ELSE started_at END,
                  finished_at = CASE WHEN $3 IN ('completed','failed','skipped') THEN now() END
            WHERE run_id = $1 AND task_id = $2
            RETURNING task_id)
         UPDATE ctx_tasks t SET pending_deps = t.pending_deps - 1
           FROM ctx_edges e, prev, upd
          WHERE (($3 = 'completed' AND prev.status <> 'completed')
                 OR (e.joins AND $3 IN ('failed','skipped')
                     AND prev.status NOT IN ('completed','failed','skipped')))
            AND e.run_id = $1 AND e.depends_on = $2 AND t.run_id = $1 AND t.task_id = e.task_id",
        &[&run_id, &task_id, &status, &json],
    )
    .await?;
    close_if_done(c, run_id).await
}
