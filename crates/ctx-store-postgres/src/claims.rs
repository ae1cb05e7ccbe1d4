//! The claim protocol (claim, heartbeat, release, commit under a fence)
//! and the single writer's unfenced store of a result.

use std::sync::Arc;
use std::time::Duration;

use ctx_model::money::Usd;
use ctx_model::{TaskExecutionResult, TaskStatus};
use tokio_postgres::Client;
use tokio_postgres::types::{ToSql, Type};

use crate::PgStore;
use crate::connection::{PgError, Prepared};
use crate::error::{Error, Result};
use crate::runs::{SETTLE, SWEEP};
use crate::schema::SCHEMA_VERSION;

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
    /// The run's budget when the task was claimed (`--max-cost`): the
    /// worker reserves the task's high end in it before the engine runs
    /// ([`PgStore::reserve`]). `None`: the run has no budget.
    pub budget: Option<Usd>,
    /// What the claim reserved in that budget (the high end the task's
    /// row recorded, schema 12): the worker tops it up to its own high
    /// end when that is larger, and reserves nothing more otherwise.
    /// `None`: nothing was reserved (no budget, no high end recorded, or
    /// the run's did not fit at the claim).
    pub reserved: Option<Usd>,
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

/// An amount a `numeric` column of a budget gave as text, in
/// pico-dollars (`None`: NULL).
fn picos(text: Option<String>) -> Option<Usd> {
    text.and_then(|t| t.parse::<u128>().ok())
        .map(Usd::from_picos)
}

/// A claim with what its task's prompt is assembled from: the latest
/// results of the task's dependencies, read in the claim's statement.
///
/// A claimed task's dependencies have all completed (that is what made
/// it claimable), and a completed result changes only when a resume
/// reopens the run, which a live claim holds off: what the claim read is
/// what a later read would return.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The claim.
    pub claim: Claim,
    /// The results of the task's dependencies (by its edges), by task id.
    pub inputs: Vec<TaskExecutionResult>,
    /// The task's previous completed result, kept by a resume because
    /// the task waited only on a map above it (schema 6): the worker
    /// commits it as is ([`PgStore::complete_taken`]) when the items
    /// the task would receive now digest as those it received then
    /// (`metadata.map_inputs`), instead of calling the engine. `None`
    /// for every other claim.
    pub kept: Option<TaskExecutionResult>,
}

/// The claim statement, its runs narrowed by `$run` (a condition on
/// `$1`, the run): ready and lapsed tasks are looked up apart (a ready
/// task behind a `before: run` gate only once its run has a decision on
/// it, schema 11), each in
/// the order of its own index (one condition with an OR would sort every
/// ready task at every claim), and the best `$5` of both are taken.
/// Parameters: the run, the worker, the lease in ms, the engine label,
/// the most tasks, and this build's schema version: nothing is claimed
/// from a store a newer ctx has migrated since it was opened (the rules
/// this build follows may no longer be the store's; the empty claim's
/// sweep then says so, [`PgStore::sweep`]).
///
/// Under a budget the claim reserves (schema 12, in purses since schema
/// 13, see `purses`): the high ends the taken tasks recorded
/// (`high_picos`) are added, all of a run's at once, to one purse of the
/// run that no other statement holds (`SKIP LOCKED`, looked for from
/// the worker's own place in the purse order) and that has room for
/// them within its share (checked again on the row as the lock finds
/// it), and each task's `reserved_picos` and `purse` are marked in the
/// same transaction. A task whose reservation was not taken here (no
/// high end recorded, or no free purse had room) is claimed with none:
/// its worker reserves with [`PgStore::reserve`] as before.
macro_rules! claim_sql {
    ($run:literal) => {
        concat!(
            "WITH ready AS (
               SELECT run_id, task_id, priority, idx, high_picos FROM ctx_tasks
                WHERE status = 'pending' AND pending_deps = 0
                  AND (gate IS NULL OR EXISTS (
                       SELECT 1 FROM ctx_decisions d
                        WHERE d.run_id = ctx_tasks.run_id AND d.task_id = ctx_tasks.task_id
                          AND d.stage = 'run'))",
            $run,
            "
                ORDER BY priority DESC, run_id, idx
                LIMIT $5
                FOR UPDATE SKIP LOCKED),
             lapsed AS (
               SELECT run_id, task_id, priority, idx, high_picos FROM ctx_tasks
                WHERE status = 'in_progress' AND lease_until < now()",
            $run,
            "
                ORDER BY priority DESC, run_id, idx
                LIMIT $5
                FOR UPDATE SKIP LOCKED),
             c AS (
               SELECT run_id, task_id, high_picos FROM (SELECT * FROM ready UNION ALL SELECT * FROM lapsed) u
                ORDER BY priority DESC, run_id, idx
                LIMIT $5),
             v AS (SELECT (SELECT m.schema_version FROM ctx_meta m) <= $6::int4 AS ok),
             w AS (
               SELECT run_id, sum(high_picos) AS picos FROM c
                WHERE high_picos IS NOT NULL GROUP BY run_id),
             pick AS (
               SELECT w.run_id, w.picos, q.purse FROM w CROSS JOIN LATERAL (
                 SELECT p.purse FROM ctx_budget_purses p
                  WHERE p.run_id = w.run_id AND p.held_picos + w.picos <= p.share_picos
                  ORDER BY (p.purse + (hashtext($2) & 15)) % 16
                  LIMIT 1
                  FOR UPDATE SKIP LOCKED) q
                WHERE (SELECT ok FROM v)),
             held AS (
               UPDATE ctx_budget_purses p SET held_picos = p.held_picos + k.picos
                 FROM pick k
                WHERE p.run_id = k.run_id AND p.purse = k.purse
                  AND p.held_picos + k.picos <= p.share_picos
               RETURNING p.run_id, p.purse)
             UPDATE ctx_tasks t
                SET status = 'in_progress', claimed_by = $2, attempt = t.attempt + 1,
                    lease_until = now() + $3::float8 * interval '1 millisecond',
                    started_at = now(), claim_seq = nextval('ctx_claim_seq'),
                    engine = $4::text,
                    reserved_picos = CASE WHEN EXISTS (SELECT 1 FROM held h WHERE h.run_id = c.run_id)
                                          THEN c.high_picos END,
                    purse = CASE WHEN c.high_picos IS NOT NULL
                                 THEN (SELECT h.purse FROM held h WHERE h.run_id = c.run_id) END
               FROM c
              WHERE t.run_id = c.run_id AND t.task_id = c.task_id
                AND (SELECT ok FROM v)
             RETURNING t.run_id, t.task_id, t.attempt,
                       (SELECT r.plan_hash FROM ctx_runs r WHERE r.run_id = t.run_id),
                       ARRAY(SELECT d.result_json FROM ctx_edges e
                               JOIN ctx_tasks d ON d.run_id = e.run_id AND d.task_id = e.depends_on
                              WHERE e.run_id = t.run_id AND e.task_id = t.task_id
                                AND d.result_json IS NOT NULL
                              ORDER BY e.depends_on),
                       t.priority, t.idx, t.kept_json,
                       (SELECT r.budget_picos::text FROM ctx_budget_purses r
                         WHERE r.run_id = t.run_id AND r.purse = 0),
                       t.reserved_picos::text"
        )
    };
}

/// What [`PgStore::reserve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Reserved: the task may run, and its commit settles the
    /// reservation at its cost.
    Reserved,
    /// The claim is no longer this worker's (its lease lapsed): nothing
    /// was reserved for it.
    Lost,
    /// The task's high end does not fit what the budget has left.
    /// `waiting`: it would fit if the reservations of the run's live
    /// claims settled at nothing (or the budget has room again, or is
    /// gone), so it may fit once they end; else it never will in this
    /// run: what was settled, and what dead claims hold, only grows.
    Full {
        /// Whether the task may fit once live claims settle.
        waiting: bool,
    },
}

/// [`PgStore::reserve`]'s statement, the purses' slow path: the fence
/// (the task's row locked first, as a claim and a commit lock it before
/// a purse), then every purse of the run locked in purse order and read
/// as it is now, then, under those locks, the claim's reservation raised
/// to the amount while what the purses hold together stays within the
/// budget: the difference is added to the task's purse (the first, for
/// a task with none), the task's mark, which its commit settles, is
/// raised, and what is left is split evenly among the purses again
/// (`ctx_purse_share`). When it does not fit, what the claim reserved is
/// given back (nothing ran under it), every purse's `budget_wait` turns
/// true, so the next commit that settles a reservation in one wakes the
/// workers, and a reservation given back wakes them at once. Parameters: the claim
/// (run, task, attempt, worker) and the amount in pico-dollars as text.
/// Returns whether the claim held, and whether it fits.
const RESERVE: &str = "WITH t AS (
       SELECT coalesce(reserved_picos, 0) AS had, purse FROM ctx_tasks
        WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
          AND status = 'in_progress' AND lease_until >= now()
        FOR UPDATE),
     p AS (
       SELECT purse, held_picos, budget_picos FROM ctx_budget_purses
        WHERE run_id = $1 AND EXISTS (SELECT 1 FROM t)
        ORDER BY purse FOR UPDATE),
     tot AS (
       SELECT sum(held_picos) AS held, count(*) AS n, min(purse) AS first,
              min(budget_picos) AS budget FROM p),
     b AS (
       SELECT t.had, t.purse AS mine, coalesce(t.purse, tot.first) AS target, tot.n, tot.first,
              greatest($5::text::numeric - t.had, 0) AS more,
              tot.budget IS NULL
                OR tot.held + greatest($5::text::numeric - t.had, 0) <= tot.budget AS fits,
              tot.budget
         FROM t, tot),
     after AS (
       SELECT p.purse, p.held_picos
                + CASE WHEN b.fits AND p.purse = b.target THEN b.more
                       WHEN NOT b.fits AND p.purse = b.mine THEN -b.had
                       ELSE 0 END AS held
         FROM p, b),
     held AS (
       UPDATE ctx_budget_purses q SET held_picos = a.held,
              share_picos = ctx_purse_share(a.held, b.budget - (SELECT sum(held) FROM after),
                                            b.n, a.purse = b.first),
              budget_wait = CASE WHEN b.fits THEN q.budget_wait ELSE true END
         FROM after a, b
        WHERE q.run_id = $1 AND q.purse = a.purse),
     m AS (
       UPDATE ctx_tasks SET reserved_picos = CASE WHEN b.fits THEN greatest(b.had, $5::text::numeric) END,
                            purse = CASE WHEN b.fits THEN b.target END
         FROM b
        WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
        RETURNING b.fits, b.had)
     SELECT (SELECT count(*) FROM t), coalesce((SELECT fits FROM m), false),
            (SELECT pg_notify('ctx_ready', $1) FROM m WHERE NOT m.fits AND m.had > 0)::text";

/// Whether a reservation [`RESERVE`] refused may fit later: what the run
/// holds, less the reservations of its live claims (which may settle at
/// nothing), plus the amount, within the budget. What is left once they
/// are taken out is settled costs and the reservations of dead claims,
/// which stay held at their whole amount: neither ever shrinks.
/// Parameters: the run, the task, the amount as text.
const MAY_FIT: &str = "SELECT r.budget_picos IS NULL
            OR (SELECT sum(p.held_picos) FROM ctx_budget_purses p WHERE p.run_id = $1)
               + $3::text::numeric
               - coalesce((SELECT sum(t.reserved_picos) FROM ctx_tasks t
                            WHERE t.run_id = $1 AND t.task_id <> $2
                              AND t.reserved_picos IS NOT NULL AND t.status = 'in_progress'
                              AND t.lease_until >= now()), 0)
               <= r.budget_picos
       FROM ctx_budget_purses r WHERE r.run_id = $1 AND r.purse = 0";

/// The claim in one run (`$1`): prepared once per connection, its
/// generic plan reads the run's part of each index.
const CLAIM_IN_RUN: &str = claim_sql!(" AND run_id = $1::text");

/// The claim in any open run (`$1` is NULL).
const CLAIM_ANY_RUN: &str = claim_sql!(" AND $1::text IS NULL");

/// The most tasks one claim statement takes (a worker without a
/// concurrency limit asks for this many at a time).
pub const MAX_CLAIM_BATCH: usize = 64;

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
        Ok(self
            .claim_many(run, worker, lease, 1)
            .await?
            .pop()
            .map(|c| c.claim))
    }

    /// Claims up to `max` ready tasks (at most [`MAX_CLAIM_BATCH`]) in one
    /// statement, as [`claim`](Self::claim) claims one, each with its
    /// dependencies' results ([`Claimed::inputs`]): a worker with free
    /// slots fills them, and starts each task's prompt, in one round trip.
    /// The claims come longest remaining path first. Empty: nothing is
    /// claimable now, after a [sweep](Self::sweep) found no map task to
    /// release for its join either.
    pub async fn claim_many(
        &self,
        run: Option<&str>,
        worker: &str,
        lease: Duration,
        max: usize,
    ) -> Result<Vec<Claimed>> {
        let max = max.clamp(1, MAX_CLAIM_BATCH);
        let found = self.claim_statement(run, worker, lease, max).await?;
        if !found.is_empty() {
            return Ok(found);
        }
        // Nothing ready: a map task whose last item's commit did not get
        // to release it (its worker died between the two statements) is
        // released here, and claimed at once.
        if self.sweep(run).await? {
            return self.claim_statement(run, worker, lease, max).await;
        }
        Ok(found)
    }

    async fn claim_statement(
        &self,
        run: Option<&str>,
        worker: &str,
        lease: Duration,
        max: usize,
    ) -> Result<Vec<Claimed>> {
        let run = run.map(str::to_string);
        let worker = worker.to_string();
        let lease = ms(lease);
        let limit = i64::try_from(max).unwrap_or(1);
        let engine = self.engine.as_deref().map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let sql = if run.is_some() {
                CLAIM_IN_RUN
            } else {
                CLAIM_ANY_RUN
            };
            let rows = shared
                .query_prepared(
                    &|| "claiming a task".to_string(),
                    sql,
                    &[
                        Type::TEXT,
                        Type::TEXT,
                        Type::FLOAT8,
                        Type::TEXT,
                        Type::INT8,
                        Type::INT4,
                    ],
                    &[&run, &worker, &lease, &engine, &limit, &SCHEMA_VERSION],
                )
                .await?;
            let mut claimed = Vec::with_capacity(rows.len());
            for r in &rows {
                let run_id: String = r.get(0);
                let task_id: String = r.get(1);
                let inputs = r
                    .get::<_, Vec<String>>(4)
                    .iter()
                    .map(|j| serde_json::from_str(j))
                    .collect::<std::result::Result<Vec<TaskExecutionResult>, _>>()
                    .map_err(|e| {
                        shared.corrupt(&run_id, format!("a dependency of task `{task_id}`"), e)
                    })?;
                let kept = r
                    .get::<_, Option<String>>(7)
                    .map(|j| serde_json::from_str::<TaskExecutionResult>(&j))
                    .transpose()
                    .map_err(|e| {
                        shared.corrupt(&run_id, format!("the kept result of task `{task_id}`"), e)
                    })?;
                let order = (
                    std::cmp::Reverse(r.get::<_, i64>(5)),
                    run_id.clone(),
                    r.get::<_, i32>(6),
                );
                claimed.push((
                    order,
                    Claimed {
                        claim: Claim {
                            run_id,
                            task_id,
                            attempt: r.get(2),
                            worker: worker.clone(),
                            plan_hash: r.get(3),
                            budget: picos(r.get(8)),
                            reserved: picos(r.get(9)),
                        },
                        inputs,
                        kept,
                    },
                ));
            }
            claimed.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(claimed.into_iter().map(|(_, c)| c).collect())
        })
        .await
    }

    /// Releases for its join every map task (of `run`, or of any run)
    /// whose items have all ended, and closes every run (of those) whose
    /// tasks have all ended. `true`: a map task was released.
    ///
    /// The statement that follows each commit does the same for the
    /// committed task's run; this is the fallback for a worker that died
    /// between the two, which an idle worker's claim runs.
    pub async fn sweep(&self, run: Option<&str>) -> Result<bool> {
        let run = run.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query_typed(
                    &|| "releasing map tasks whose items ended".to_string(),
                    SWEEP,
                    &[(&run, Type::TEXT), (&SCHEMA_VERSION, Type::INT4)],
                )
                .await?;
            let Some(row) = rows.first() else {
                return Ok(false);
            };
            let found: i32 = row.get(3);
            if found > SCHEMA_VERSION {
                return Err(Error::NewerSchema {
                    url: shared.url.display().to_string(),
                    found,
                    known: SCHEMA_VERSION,
                });
            }
            Ok(row.get::<_, i64>(0) > 0)
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
                AND status = 'in_progress' AND lease_until >= now()
              RETURNING 1",
            Some((Box::new(lease), Type::FLOAT8)),
        )
        .await
    }

    /// The run's budget (`--max-cost`), and what it holds: reservations
    /// not yet settled plus what commits settled them at. `None`: the run
    /// has no budget.
    pub async fn budget(&self, run_id: &str) -> Result<Option<(Usd, Usd)>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the budget of run `{run_id}`"),
                    "SELECT budget_picos::text,
                            (SELECT sum(held_picos) FROM ctx_budget_purses p WHERE p.run_id = $1)::text
                       FROM ctx_budget_purses WHERE run_id = $1 AND purse = 0",
                    &[&run_id],
                )
                .await?;
            let Some(row) = rows.first() else {
                return Err(shared.no_run(&run_id));
            };
            Ok(picos(row.get(0)).map(|budget| (budget, picos(row.get(1)).unwrap_or(Usd::ZERO))))
        })
        .await
    }

    /// Raises `claim`'s reservation in its run's budget to `amount`, the
    /// claimed task's high end by this worker's prices, before its engine
    /// runs; the claim's commit settles it at the task's cost
    /// ([`complete`](Self::complete)). The claim itself reserved the high
    /// end its task's row recorded ([`Claim::reserved`]); this is the
    /// reservation when it did not, or the top-up when the worker's high
    /// end is larger.
    ///
    /// One statement: the run's purses are updated only while what they
    /// hold together plus what the reservation grows by stays within the
    /// budget, so concurrent reservations and claims of many workers
    /// never pass it (this waits for every purse's lock and checks again;
    /// a claim adds only within one purse's share), and only while the
    /// claim is live, so a claim lost before it reserves nothing and its
    /// task is never run under it. When it does not fit, what the claim
    /// reserved is given back in the same statement (nothing ran under
    /// it): a refused reservation leaves the claim holding nothing.
    ///
    /// A reservation is settled once, by the first of: the claim's commit
    /// (at the result's cost); its late commit, refused by the fence but
    /// made before anyone claimed the task again (at the cost that
    /// result records); the task's next claim, which finds nothing stored
    /// and settles it at the whole amount (the worst case: the dead
    /// worker's call may have been billed in full). A result without a
    /// cost settles at the whole amount too. A run without a budget
    /// reserves anything.
    pub async fn reserve(&self, claim: &Claim, amount: Usd) -> Result<Reservation> {
        let claim = claim.clone();
        let amount = amount.picos().to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let context = || {
                format!(
                    "reserving the budget of task `{}` of run `{}`",
                    claim.task_id, claim.run_id
                )
            };
            let params: [&(dyn ToSql + Sync); 5] = [
                &claim.run_id,
                &claim.task_id,
                &claim.attempt,
                &claim.worker,
                &amount,
            ];
            let rows = shared
                .query_prepared(
                    &context,
                    RESERVE,
                    &[Type::TEXT, Type::TEXT, Type::INT4, Type::TEXT, Type::TEXT],
                    &params,
                )
                .await?;
            let Some(row) = rows.first().filter(|r| r.get::<_, i64>(0) == 1) else {
                return Ok(Reservation::Lost);
            };
            if row.get::<_, bool>(1) {
                return Ok(Reservation::Reserved);
            }
            // Another statement, so another snapshot: a reservation that
            // made this one not fit is visible by now, with its mark.
            let waiting = shared
                .query(&context, MAY_FIT, &[&claim.run_id, &claim.task_id, &amount])
                .await?
                .first()
                .is_none_or(|r| r.get::<_, bool>(0));
            Ok(Reservation::Full { waiting })
        })
        .await
    }

    /// Gives `claim` back: the task is `pending` again at once, for any
    /// worker (a worker stopping with SIGTERM releases what it holds).
    /// A reservation the claim made stays held until the task's next
    /// claim settles it at its whole amount: the call it was made for may
    /// have been billed before it was stopped.
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

    /// Gives back a claim whose task waits for its run's budget (its
    /// high end does not fit until live claims settle), as
    /// [`release`](Self::release) does but waking nobody: no worker could
    /// run it now, and the commit that settles a reservation wakes them
    /// (the refused [`reserve`](Self::reserve) marked the run as waiting).
    /// Nothing ran under the claim, so whatever it still reserved is
    /// given back too (a refused reservation gave it back already).
    pub async fn release_for_budget(&self, claim: &Claim) -> Result<bool> {
        self.fenced(
            claim,
            "giving back",
            "WITH o AS (
               SELECT reserved_picos AS had, purse FROM ctx_tasks
                WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                  AND status = 'in_progress'
                FOR UPDATE),
             g AS (
               UPDATE ctx_tasks SET status = 'pending', claimed_by = NULL, lease_until = NULL,
                      reserved_picos = NULL, purse = NULL
                 FROM o
                WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                RETURNING o.had, o.purse),
             b AS (
               UPDATE ctx_budget_purses q SET held_picos = q.held_picos - g.had
                 FROM g WHERE q.run_id = $1 AND q.purse = g.purse AND g.had IS NOT NULL)
             SELECT 1 FROM g",
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
                AND status = 'in_progress' AND lease_until >= now()
              RETURNING 1",
            Some((Box::new(json), Type::TEXT)),
        )
        .await
    }

    /// One statement under `claim`'s fence: `sql` takes the run, task,
    /// fencing token and worker as `$1`..`$4` (and `extra`, of its type,
    /// as `$5`), and changes (and returns) one row while the claim holds.
    /// `false`: the claim is lost.
    async fn fenced(
        &self,
        claim: &Claim,
        what: &'static str,
        sql: &'static str,
        extra: Option<(Box<dyn ToSql + Send + Sync>, Type)>,
    ) -> Result<bool> {
        let claim = claim.clone();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let context = || format!("{what} task `{}` of run `{}`", claim.task_id, claim.run_id);
            let mut params: Vec<&(dyn ToSql + Sync)> =
                vec![&claim.run_id, &claim.task_id, &claim.attempt, &claim.worker];
            let mut types = vec![Type::TEXT, Type::TEXT, Type::INT4, Type::TEXT];
            if let Some((p, t)) = &extra {
                params.push(p.as_ref());
                types.push(t.clone());
            }
            let rows = shared
                .query_prepared(&context, sql, &types, &params)
                .await?;
            Ok(rows.len() == 1)
        })
        .await
    }

    /// Commits the task's terminal `result` under `claim`, only while the
    /// lease is live and the fencing token matches. In the same statement
    /// (one transaction): a `completed` result decrements the ready
    /// counter of every dependent, which makes the last one's dependents
    /// claimable at the commit that makes its result visible; any other
    /// marks the task's transitive dependents `skipped`, with the reason
    /// the executor gives. A refused result is counted and kept in the
    /// history, never made the task's.
    ///
    /// A map's item does not touch its map task's row (that one row's
    /// lock made a map's commits run one at a time): the statement sent
    /// right behind the commit, in the same round trip but its own
    /// transaction (`runs::SETTLE`), releases the map task for its join when
    /// it finds none of its items open, and closes the run when none of
    /// its tasks is. Running after the commit is what makes it sound:
    /// of two last items committed at once, the later commit's follower
    /// sees both.
    ///
    /// The dependents are read from the run's own edges (one more round
    /// trip, on a failure only), not given by the caller: a worker that
    /// cannot load the stored plan still fails the task with every
    /// dependent skipped, so no run is left with pending tasks nobody can
    /// claim. The set cannot change before the commit: every dependent
    /// waits on this task, so none is claimable, and a changed plan is
    /// refused while the claim is live.
    ///
    /// The result is one the claim produced: it clears the kept result
    /// (schema 6) of the task and of its direct dependents, whose kept
    /// results were computed from the output this one replaces.
    pub async fn complete(&self, claim: &Claim, result: &TaskExecutionResult) -> Result<Commit> {
        self.commit(claim, result, Made::Ran).await
    }

    /// Commits a map task's own result (its join, or why it could not
    /// expand) as [`complete`](Self::complete) does, except that the
    /// kept results (schema 6) of the tasks below it stand: they are
    /// judged by the items they receive, not by this result.
    pub async fn complete_join(
        &self,
        claim: &Claim,
        result: &TaskExecutionResult,
    ) -> Result<Commit> {
        self.commit(claim, result, Made::Joined).await
    }

    /// Commits the task's kept result ([`Claimed::kept`]), taken as
    /// stored, as [`complete`](Self::complete) commits a result, except
    /// that nothing ran: its dependents' kept results stand (it is the
    /// result they were computed from), the row keeps it too (which
    /// marks the result as taken: reused, not run), and no attempt is
    /// added to the history, which holds it already (what the run spent
    /// counts it once). A refused one is not a late commit either.
    pub async fn complete_taken(
        &self,
        claim: &Claim,
        kept: &TaskExecutionResult,
    ) -> Result<Commit> {
        self.commit(claim, kept, Made::Taken).await
    }

    async fn commit(
        &self,
        claim: &Claim,
        result: &TaskExecutionResult,
        made: Made,
    ) -> Result<Commit> {
        let claim = claim.clone();
        // A taken result cost nothing now (its cost is the earlier
        // attempt's, counted then).
        let cost = match made {
            Made::Taken => Some("0".to_string()),
            _ => crate::runs::picos_text(result.metadata.cost_usd),
        };
        let status = result.status.as_str().to_string();
        let json = serde_json::to_string(result).map_err(|e| {
            self.shared
                .corrupt(&claim.run_id, format!("task `{}`", claim.task_id), e)
        })?;
        // A task the budget could not fit skips its dependents for the
        // budget, as a local run does.
        let over_budget = result.status == TaskStatus::Skipped
            && result
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("budget"));
        let skips = if result.status == TaskStatus::Completed {
            Vec::new()
        } else {
            self.dependents(&claim.run_id, &claim.task_id).await?
        };
        let mut skip_ids = Vec::with_capacity(skips.len());
        let mut skip_json = Vec::with_capacity(skips.len());
        for (id, direct) in skips {
            let mut r = TaskExecutionResult::new(&id, TaskStatus::Skipped);
            r.error = Some(if over_budget {
                ctx_store::over_budget_reason(&claim.task_id, direct)
            } else {
                ctx_store::skip_reason(&claim.task_id, direct)
            });
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
            let (claim, status, json, cost) = (&claim, &status, &json, &cost);
            let (skip_ids, skip_json) = (&skip_ids, &skip_json);
            let outcome = shared
                .with_prepared(&context, 1, move |c, prepared, retry| async move {
                    let r = commit_statement(
                        &c,
                        &prepared,
                        claim,
                        Terminal {
                            status,
                            json,
                            made,
                            cost: cost.as_deref(),
                        },
                        skip_ids,
                        skip_json,
                        retry,
                    )
                    .await;
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

/// How a committed result came to be, for the results a resume kept
/// (schema 6) and the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Made {
    /// The task ran: its own and its dependents' kept results are
    /// cleared.
    Ran,
    /// A map task's own result: the kept results below it stand.
    Joined,
    /// The task's kept result, taken as stored: kept results stand, and
    /// the history, which holds it already, gets no attempt.
    Taken,
}

/// The commit of a terminal result under a claim (see
/// [`PgStore::complete`]), prepared once per connection. Parameters:
/// the run, the task, the fencing token, the worker, the status, the
/// result, the ids and results of the dependents a failure skips (each
/// skip recorded in the history too), whether kept results stand,
/// whether an attempt is recorded.
const COMMIT: &str = "WITH old AS (
               SELECT reserved_picos, purse FROM ctx_tasks WHERE run_id = $1 AND task_id = $2),
             done AS (
               UPDATE ctx_tasks SET status = $5, result_json = $6, claimed_by = NULL,
                      lease_until = NULL, finished_at = now(),
                      kept_json = CASE WHEN $9 THEN kept_json END,
                      reserved_picos = NULL, purse = NULL
                WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                  AND status = 'in_progress' AND lease_until >= now()
                RETURNING task_id),
             -- A run some task waits on (`budget_wait` true, set under
             -- this row's lock by the reservation that did not fit) is
             -- woken by this commit, and only then: the flag goes false,
             -- which RETURNING reads as: it was true.
             budget AS (
               UPDATE ctx_budget_purses r
                  SET held_picos = r.held_picos - o.reserved_picos
                                   + coalesce($11::text::numeric, o.reserved_picos),
                      budget_wait = CASE WHEN r.budget_wait THEN false END
                 FROM old o, done
                WHERE r.run_id = $1 AND r.purse = o.purse AND o.reserved_picos IS NOT NULL
               RETURNING r.budget_wait IS FALSE AS woke),
             hist AS (
               INSERT INTO ctx_attempts (run_id, task_id, attempt, worker, status, committed, result_json, session)
               SELECT $1, $2, $3, $4, $5, true, $6, (SELECT session FROM ctx_runs WHERE run_id = $1)
                 FROM done WHERE $10),
             released AS (
               UPDATE ctx_tasks t SET pending_deps = t.pending_deps - 1,
                      kept_json = CASE WHEN $9 THEN t.kept_json END
                 FROM ctx_edges e, done
                WHERE $5 = 'completed' AND NOT e.joins AND e.run_id = $1 AND e.depends_on = $2
                  AND t.run_id = $1 AND t.task_id = e.task_id
               RETURNING t.pending_deps),
             skipped AS (
               UPDATE ctx_tasks t SET status = 'skipped', result_json = s.j, finished_at = now()
                 FROM unnest($7::text[], $8::text[]) AS s(id, j), done
                WHERE $5 <> 'completed' AND t.run_id = $1 AND t.task_id = s.id
                  AND t.status = 'pending'
               RETURNING t.task_id, t.attempt, s.j),
             -- A skip is a result of the session too, as in a run
             -- directory's history: the run as of this session reads it.
             skipped_hist AS (
               INSERT INTO ctx_attempts (run_id, task_id, attempt, worker, status, committed, result_json, session)
               SELECT $1, k.task_id, k.attempt, NULL, 'skipped', true, k.j,
                      (SELECT session FROM ctx_runs WHERE run_id = $1)
                 FROM skipped k)
             SELECT (SELECT count(*) FROM done),
                    -- Idle workers wake when this commit makes a task
                    -- ready (delivered at commit; see `PgStore::listen`).
                    -- A settled reservation may make room for a task
                    -- that waits for the budget, when one does.
                    (SELECT pg_notify('ctx_ready', $1)
                      WHERE EXISTS (SELECT 1 FROM released WHERE pending_deps = 0)
                         OR EXISTS (SELECT 1 FROM budget WHERE woke))::text";

/// [`COMMIT`]'s parameter types.
const COMMIT_TYPES: [Type; 11] = [
    Type::TEXT,
    Type::TEXT,
    Type::INT4,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::BOOL,
    Type::BOOL,
    Type::TEXT,
];

/// A terminal result as the commit writes it.
#[derive(Clone, Copy)]
struct Terminal<'a> {
    status: &'a str,
    json: &'a str,
    made: Made,
    /// What the attempt cost, in pico-dollars as text: what the commit
    /// settles the claim's reservation at (`None`: unknown, and the
    /// reservation stays held whole).
    cost: Option<&'a str>,
}

/// The commit of a terminal result under a claim: one statement, so one
/// transaction, and [`SETTLE`] for its run right behind it, in the same
/// round trip.
async fn commit_statement(
    c: &Client,
    prepared: &Prepared,
    claim: &Claim,
    t: Terminal<'_>,
    skip_ids: &[String],
    skip_json: &[String],
    retry: bool,
) -> Result<Commit, PgError> {
    let (status, json) = (t.status, t.json);
    // Kept results stand ($9); an attempt is recorded ($10).
    let stand = t.made != Made::Ran;
    let record = t.made != Made::Taken;
    let cost = t.cost;
    let params: [&(dyn ToSql + Sync); 11] = [
        &claim.run_id,
        &claim.task_id,
        &claim.attempt,
        &claim.worker,
        &status,
        &json,
        &skip_ids,
        &skip_json,
        &stand,
        &record,
        &cost,
    ];
    let (commit, settle) = tokio::join!(
        prepared.get(c, COMMIT, &COMMIT_TYPES),
        prepared.get(c, SETTLE, &[Type::TEXT, Type::TEXT]),
    );
    let (commit, settle) = (commit?, settle?);
    let settle_params: [&(dyn ToSql + Sync); 2] = [&claim.run_id, &claim.task_id];
    let (row, settled) = tokio::join!(c.query(&commit, &params), c.query(&settle, &settle_params),);
    let committed = row?.first().is_some_and(|r| r.get::<_, i64>(0) == 1);
    settled?;
    if !committed && retry {
        // The connection broke around an earlier try of this commit: if it
        // went through, the row holds our attempt's result already (and
        // the settle just sent saw it).
        let row = c
            .query_typed(
                "SELECT 1 FROM ctx_tasks WHERE run_id = $1 AND task_id = $2 AND attempt = $3
                    AND status = $4 AND result_json = $5",
                &[
                    (&claim.run_id, Type::TEXT),
                    (&claim.task_id, Type::TEXT),
                    (&claim.attempt, Type::INT4),
                    (&status, Type::TEXT),
                    (&json, Type::TEXT),
                ],
            )
            .await?;
        if !row.is_empty() {
            return Ok(Commit::Committed);
        }
    }
    if committed {
        Ok(Commit::Committed)
    } else if !record {
        // Nothing ran: nothing was done twice.
        Ok(Commit::Refused)
    } else {
        execute_typed(
            c,
            LATE_COMMIT,
            &[
                (&claim.run_id, Type::TEXT),
                (&claim.task_id, Type::TEXT),
                (&claim.attempt, Type::INT4),
                (&claim.worker, Type::TEXT),
                (&status, Type::TEXT),
                (&json, Type::TEXT),
                (&cost, Type::TEXT),
            ],
        )
        .await?;
        Ok(Commit::Refused)
    }
}

/// A commit the fence refused: kept in the history, counted, and, while
/// nobody claimed the task again (the row still carries this attempt's
/// reservation), settling that reservation at the cost the result
/// records (its whole amount when it records none): the late result is
/// the stored attempt that says what the call spent. Once the task was
/// claimed again its reservation was settled at its whole amount, and a
/// later late commit settles nothing. Parameters: the claim (run, task,
/// attempt, worker), the status, the result, its cost in pico-dollars as
/// text.
const LATE_COMMIT: &str = "WITH late AS (
       INSERT INTO ctx_attempts (run_id, task_id, attempt, worker, status, committed, result_json, session)
       SELECT $1, $2, $3, $4, $5, false, $6, session FROM ctx_runs WHERE run_id = $1),
     old AS (
       SELECT reserved_picos, purse FROM ctx_tasks
        WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
          AND reserved_picos IS NOT NULL),
     mark AS (
       UPDATE ctx_tasks SET reserved_picos = NULL, purse = NULL
        WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
          AND reserved_picos IS NOT NULL
        RETURNING 1),
     settled AS (
       UPDATE ctx_budget_purses r
          SET held_picos = r.held_picos + coalesce($7::text::numeric, o.reserved_picos) - o.reserved_picos
         FROM old o
        WHERE r.run_id = $1 AND r.purse = o.purse AND EXISTS (SELECT 1 FROM mark))
     UPDATE ctx_runs SET late_commits = late_commits + 1 WHERE run_id = $1";

/// `sql` with typed parameters, in one round trip (no statement is
/// prepared first): how many rows it returned (a fenced statement
/// returns the row it changed).
pub(crate) async fn execute_typed(
    c: &Client,
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Result<u64, PgError> {
    let rows = c.query_typed(sql, params).await?;
    Ok(u64::try_from(rows.len()).unwrap_or(u64::MAX))
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
                  kept_json = NULL,
                  started_at = CASE WHEN $3 = 'in_progress' AND status <> 'in_progress'
                                    THEN now() ELSE started_at END,
                  finished_at = CASE WHEN $3 IN ('completed','failed','skipped') THEN now() END
            WHERE run_id = $1 AND task_id = $2
            RETURNING task_id)
         UPDATE ctx_tasks t SET pending_deps = t.pending_deps - 1, kept_json = NULL
           FROM ctx_edges e, prev, upd
          WHERE $3 = 'completed' AND prev.status <> 'completed' AND NOT e.joins
            AND e.run_id = $1 AND e.depends_on = $2 AND t.run_id = $1 AND t.task_id = e.task_id",
        &[&run_id, &task_id, &status, &json],
    )
    .await?;
    // After the write, in a transaction of its own (see `complete`).
    c.query_typed(SETTLE, &[(&run_id, Type::TEXT), (&task_id, Type::TEXT)])
        .await?;
    Ok(())
}
