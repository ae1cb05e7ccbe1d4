//! A run's lifecycle: registered once, resumed (possibly under a changed
//! plan), removed by gc. Each is one transaction.

use std::sync::Arc;

use ctx_model::Plan;
use ctx_model::money::Usd;
use ctx_store::RunInputs;

use crate::error::{Error, Result};
use crate::rows::GcReport;
use crate::{PgStore, purses};

/// What [`PgStore::register_run`] records.
#[derive(Debug, Clone, Copy)]
pub struct RegisterRun<'a> {
    /// The plan as it will be run (secrets already redacted by the caller:
    /// workers run exactly what is stored).
    pub plan: &'a Plan,
    /// Each task's priority, in plan order: its remaining path length, so
    /// that claims take the critical path first as the local executor does.
    pub priorities: &'a [u64],
    /// The engine label, for listings.
    pub engine: &'a str,
    /// Where the plan came from, for listings.
    pub plan_source: Option<&'a str>,
    /// What the plan was filled from, for a plan with variables or the
    /// digest (a shared run's plan holds no secret: workers run it).
    pub inputs: Option<&'a RunInputs>,
    /// The most the run may spend (`--max-cost`): each claim reserves its
    /// task's high end in one of the run's purses before the engine runs
    /// ([`PgStore::reserve`]), and its commit settles it.
    pub budget: Option<Usd>,
    /// Each task's high end under `budget`, in plan order (`None`: not
    /// known, or a map task, which calls no engine): what a claim of the
    /// task reserves in the claim statement itself (schema 12), saving
    /// the worker a round trip. Empty without a budget.
    pub highs: &'a [Option<Usd>],
}

/// What [`PgStore::reopen_run`] applies.
#[derive(Debug, Clone, Copy)]
pub struct Reopen<'a> {
    /// The plan the run continues under (redacted, as at registration).
    pub plan: &'a Plan,
    /// Each task's priority, in plan order.
    pub priorities: &'a [u64],
    /// The engine label of this session, compared at the next resume.
    pub engine: &'a str,
    /// Where the plan came from, if known (else the stored one is kept).
    pub plan_source: Option<&'a str>,
    /// The tasks that run again (the resume plan's `rerun`).
    pub rerun: &'a [String],
    /// Those of `rerun` that run again only because a map above them
    /// expands again: each keeps its completed result while it waits
    /// (`kept_json`, schema 6), for its claim to take as stored when the
    /// items it receives come back unchanged.
    pub keep: &'a [String],
    /// The map tasks of `rerun` whose expansion in this session takes none
    /// of their stored items (`fresh_items`, schema 8): those a `ctx run
    /// --rerun` asked for, or below one, every item of which runs again.
    /// Every other map task matches its items by content hash as usual.
    pub fresh: &'a [String],
    /// What the plan was filled from this time (replaces the stored).
    pub inputs: Option<&'a RunInputs>,
    /// The run's budget from now on (replaces the stored; `None`: none).
    /// What the run holds already, from its earlier sessions, counts
    /// against it: a resumed run's budget covers the whole run.
    pub budget: Option<Usd>,
    /// Each task's high end under `budget`, in plan order, as
    /// [`RegisterRun::highs`] (replaces the stored).
    pub highs: &'a [Option<Usd>],
}

enum Reopened {
    Done(u64),
    NoRun,
    BadPlan(serde_json::Error),
    Busy(i64),
}

/// The tasks of an old plan that a new plan drops, with their fingerprints
/// under the old plan, as `unnest` arrays.
#[derive(Debug, Clone, Default)]
struct Dropped {
    ids: Vec<String>,
    inputs: Vec<String>,
    model: Vec<Option<String>>,
    params: Vec<String>,
}

impl Dropped {
    fn of(old: &Plan, kept: &[String]) -> Dropped {
        let kept: std::collections::HashSet<&str> = kept.iter().map(String::as_str).collect();
        let mut fingerprints = ctx_store::fingerprint_all(old);
        let mut out = Dropped::default();
        for t in &old.sub_tasks {
            if kept.contains(t.id.as_str()) {
                continue;
            }
            if let Some(f) = fingerprints.remove(&t.id) {
                out.ids.push(t.id.clone());
                out.inputs.push(f.inputs_hash);
                out.model.push(f.model);
                out.params.push(f.params_hash);
            }
        }
        out
    }
}

/// A plan's task rows and edges as `unnest` arrays.
#[derive(Debug)]
struct TaskRows {
    ids: Vec<String>,
    idx: Vec<i32>,
    deps: Vec<i32>,
    prio: Vec<i64>,
    /// `run` for a task with a `before: run` gate, else NULL.
    gate: Vec<Option<String>>,
    /// The task's high end in pico-dollars as text, else NULL.
    high: Vec<Option<String>>,
    edge_from: Vec<String>,
    edge_to: Vec<String>,
    count: i32,
}

impl TaskRows {
    fn of(plan: &Plan, priorities: &[u64], highs: &[Option<Usd>]) -> TaskRows {
        let n = plan.sub_tasks.len();
        let mut rows = TaskRows {
            ids: Vec::with_capacity(n),
            idx: Vec::with_capacity(n),
            deps: Vec::with_capacity(n),
            prio: Vec::with_capacity(n),
            gate: Vec::with_capacity(n),
            high: Vec::with_capacity(n),
            edge_from: Vec::new(),
            edge_to: Vec::new(),
            count: i32::try_from(n).unwrap_or(i32::MAX),
        };
        for (i, t) in plan.sub_tasks.iter().enumerate() {
            rows.ids.push(t.id.clone());
            rows.idx.push(i32::try_from(i).unwrap_or(i32::MAX));
            rows.deps
                .push(i32::try_from(t.dependencies.len()).unwrap_or(i32::MAX));
            let p = priorities.get(i).copied().unwrap_or(0);
            rows.prio.push(i64::try_from(p).unwrap_or(i64::MAX));
            rows.gate.push(
                ctx_model::approval::gate(t)
                    .filter(|a| a.before == ctx_model::approval::GateStage::Run)
                    .map(|a| a.before.as_str().to_string()),
            );
            rows.high.push(picos_text(highs.get(i).copied().flatten()));
            for d in &t.dependencies {
                rows.edge_from.push(d.clone());
                rows.edge_to.push(t.id.clone());
            }
        }
        rows
    }
}

impl PgStore {
    /// Records the files the session that ran `run_id` published once it
    /// completed; nothing for none.
    pub async fn record_published(
        &self,
        run_id: &str,
        published: &[ctx_store::Published],
    ) -> Result<()> {
        if published.is_empty() {
            return Ok(());
        }
        self.record_publish(run_id, published, &[]).await.map(drop)
    }

    /// Records the cheaper tier of its period budget `run_id` was started
    /// on (`ctx_runs.fallback_json`), for `ctx runs show`, the report and
    /// a resume, which keeps it.
    pub async fn record_fallback(
        &self,
        run_id: &str,
        choice: &ctx_model::FallbackChoice,
    ) -> Result<()> {
        self.set_run_json(run_id, RunJson::Fallback, choice).await
    }

    /// Writes `value` as JSON into `run_id`'s `column`.
    async fn set_run_json(
        &self,
        run_id: &str,
        column: RunJson,
        value: &(impl serde::Serialize + ?Sized),
    ) -> Result<()> {
        let (sql, what) = match column {
            RunJson::Fallback => (
                "UPDATE ctx_runs SET fallback_json = $2 WHERE run_id = $1",
                "the run's fallback tier",
            ),
        };
        let json = serde_json::to_string(value)
            .map_err(|e| self.shared.corrupt(run_id, what.into(), e))?;
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let (run_id, json) = (&run_id, &json);
            shared
                .with(
                    &|| format!("recording {what} of run `{run_id}`"),
                    3,
                    move |c, _| async move {
                        let r = c.execute(sql, &[run_id, json]).await.map(drop);
                        (c, r)
                    },
                )
                .await
        })
        .await
    }
}

/// A JSON column of `ctx_runs` a session writes after registering.
#[derive(Debug, Clone, Copy)]
enum RunJson {
    /// `fallback_json`.
    Fallback,
}

/// A run's inputs as the `inputs_json` column holds them.
fn inputs_json(
    shared: &crate::connection::Shared,
    run_id: &str,
    inputs: Option<&RunInputs>,
) -> Result<Option<String>> {
    inputs
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| shared.corrupt(run_id, "the run's inputs".into(), e))
}

/// A run id: `YYYYMMDDTHHMMSS.mmmZ-xxxxxxxx` (UTC time, 32 random bits),
/// the same shape as the SQLite store's, so ids sort by creation time.
fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let mut b = [0u8; 4];
    // The time part alone is unique enough for a retry on a collision; a
    // failing RNG leaves the suffix zero and the primary key catches it.
    let _ = getrandom::fill(&mut b);
    format!(
        "{}-{:08x}",
        now.format("%Y%m%dT%H%M%S%.3fZ"),
        u32::from_be_bytes(b)
    )
}

pub(crate) const TERMINAL: &str = "('completed','failed','skipped')";

/// Wakes the workers listening on `ctx_ready` (at commit) with the run id
/// as payload: a run registered or resumed, a task released.
pub(crate) const NOTIFY_READY: &str = "SELECT pg_notify('ctx_ready', $1)::text";

impl PgStore {
    /// Records a new run: its plan, one row per task (ready when it has no
    /// dependencies) and its edges, in one transaction. Returns its id.
    pub async fn register_run(&self, run: &RegisterRun<'_>) -> Result<String> {
        let plan_json = serde_json::to_string(run.plan)
            .map_err(|e| self.shared.corrupt("(new)", "the plan".into(), e))?;
        let plan_hash = ctx_store::sha256_hex(plan_json.as_bytes());
        let inputs_json = inputs_json(&self.shared, "(new)", run.inputs)?;
        let rows = TaskRows::of(run.plan, run.priorities, run.highs);
        let engine = run.engine.to_string();
        let source = run.plan_source.map(str::to_string);
        let budget = picos_text(run.budget);
        let purses = purses::purse_count(run.budget, run.highs);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let run_id = new_run_id();
            let context = || format!("registering run `{run_id}`");
            let (id, plan_json, plan_hash) = (&run_id, &plan_json, &plan_hash);
            let (engine, source, rows, inputs_json) = (&engine, &source, &rows, &inputs_json);
            let (budget, purses) = (&budget, &purses);
            shared
                .with(&context, 6, move |mut c, _| async move {
                    let r = async {
                        let tx = c.transaction().await?;
                        tx.execute(
                            "INSERT INTO ctx_runs (run_id, plan_json, plan_hash, plan_source, engine, ctx_version, task_count, open, inputs_json)
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $7 > 0, $8)",
                            &[id, plan_json, plan_hash, source, engine, &env!("CARGO_PKG_VERSION"), &rows.count, inputs_json],
                        )
                        .await?;
                        tx.execute(purses::OPEN, &[id, purses]).await?;
                        tx.execute(purses::SPLIT, &[id, budget, &None::<String>]).await?;
                        tx.execute(
                            "INSERT INTO ctx_tasks (run_id, task_id, idx, status, pending_deps, priority, gate, high_picos)
                             SELECT $1, t.id, t.idx, 'pending', t.deps, t.prio, t.gate, t.high::numeric
                               FROM unnest($2::text[], $3::int[], $4::int[], $5::bigint[], $6::text[], $7::text[])
                                    AS t(id, idx, deps, prio, gate, high)",
                            &[id, &rows.ids, &rows.idx, &rows.deps, &rows.prio, &rows.gate, &rows.high],
                        )
                        .await?;
                        tx.execute(
                            "INSERT INTO ctx_edges (run_id, depends_on, task_id)
                             SELECT $1, e.f, e.t FROM unnest($2::text[], $3::text[]) AS e(f, t)
                             ON CONFLICT DO NOTHING",
                            &[id, &rows.edge_from, &rows.edge_to],
                        )
                        .await?;
                        tx.execute(NOTIFY_READY, &[id]).await?;
                        tx.commit().await
                    }
                    .await;
                    (c, r)
                })
                .await?;
            Ok(run_id)
        })
        .await
    }

    /// Resumes a run under `reopen.plan` (the stored plan, or a changed
    /// one), applying decisions already taken by
    /// [`ResumePlan::compute`](ctx_store::ResumePlan::compute) over the
    /// run's stored results (see [`PgRunView`](crate::PgRunView)), in one
    /// transaction:
    ///
    /// - the run's plan, its hash, source and engine label become the new
    ///   ones, and it is open again;
    /// - tasks no longer in the plan leave the run's task rows (their
    ///   committed results stay in the attempts history); new tasks get a
    ///   row; every task gets its new plan position and priority;
    /// - the tasks in `reopen.rerun` become `pending` with their latest
    ///   result cleared (the history keeps it) — except, when the plan is
    ///   unchanged, tasks another worker holds under a live lease, which
    ///   are left to it; reused tasks keep their completed result; those
    ///   in `reopen.keep` keep it aside (`kept_json`: the completed
    ///   result, or the one an earlier resume kept, when this one reads it
    ///   as the task's latest, [`PgRunView`](crate::PgRunView)), every
    ///   other task's kept result is cleared; the map tasks in
    ///   `reopen.fresh` take none of their stored items when they expand
    ///   in this session (every other's flag is cleared);
    /// - the run's session count goes up by one: the results committed
    ///   from now on are recorded as the new session's;
    /// - the edges are replaced and every pending task's ready counter is
    ///   recomputed from its dependencies' statuses.
    ///
    /// A changed plan is refused ([`Error::Busy`]) while workers hold
    /// claims in the run under live leases: their results were asked for
    /// under the old plan. Returns how many tasks were made pending.
    pub async fn reopen_run(&self, run_id: &str, reopen: &Reopen<'_>) -> Result<u64> {
        let plan_json = serde_json::to_string(reopen.plan)
            .map_err(|e| self.shared.corrupt(run_id, "the plan".into(), e))?;
        let plan_hash = ctx_store::sha256_hex(plan_json.as_bytes());
        let inputs_json = inputs_json(&self.shared, run_id, reopen.inputs)?;
        let rows = TaskRows::of(reopen.plan, reopen.priorities, reopen.highs);
        let rerun: Vec<String> = reopen.rerun.to_vec();
        let keep: Vec<String> = reopen.keep.to_vec();
        let fresh: Vec<String> = reopen.fresh.to_vec();
        let engine = reopen.engine.to_string();
        let source = reopen.plan_source.map(str::to_string);
        let budget = picos_text(reopen.budget);
        let purses = purses::purse_count(reopen.budget, reopen.highs);
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let (run_id, plan_json, plan_hash) = (&run_id, &plan_json, &plan_hash);
            let (engine, source, rows, rerun, keep) = (&engine, &source, &rows, &rerun, &keep);
            let (inputs_json, budget, fresh, purses) = (&inputs_json, &budget, &fresh, &purses);
            let found = shared
                .with(&|| format!("resuming run `{run_id}`"), 15, move |mut c, _| {
                    async move {
                        let r = async {
                            let tx = c.transaction().await?;
                            let old = tx
                                .query_opt(
                                    "SELECT plan_hash, plan_json, engine FROM ctx_runs WHERE run_id = $1 FOR UPDATE",
                                    &[&run_id],
                                )
                                .await?;
                            let Some(old) = old else {
                                return Ok(Reopened::NoRun);
                            };
                            let same_plan = old.get::<_, String>(0) == *plan_hash;
                            let old_engine: String = old.get(2);
                            // The old plan's fingerprints of the tasks the
                            // new plan drops: what their results were
                            // produced under.
                            let old_plan = match serde_json::from_str::<Plan>(&old.get::<_, String>(1)) {
                                Ok(p) => p,
                                Err(e) => return Ok(Reopened::BadPlan(e)),
                            };
                            let dropped = Dropped::of(&old_plan, &rows.ids);
                            let live: i64 = tx
                                .query_one(
                                    "SELECT count(*) FROM ctx_tasks WHERE run_id = $1
                                        AND status = 'in_progress' AND lease_until >= now()",
                                    &[&run_id],
                                )
                                .await?
                                .get(0);
                            if !same_plan && live > 0 {
                                return Ok(Reopened::Busy(live));
                            }
                            tx.execute(
                                "UPDATE ctx_runs SET plan_json = $2, plan_hash = $3,
                                        plan_source = coalesce($4, plan_source), engine = $5,
                                        task_count = $6, finished_at = NULL, inputs_json = $7,
                                        session = session + 1
                                  WHERE run_id = $1",
                                &[&run_id, &plan_json, &plan_hash, &source, &engine, &rows.count, inputs_json],
                            )
                            .await?;
                            // A budget covers the whole run: what its
                            // attempts spent counts against it.
                            let spent: Option<String> = match budget {
                                Some(_) => tx.query_one(&format!("SELECT ({SPENT})::text"), &[&run_id]).await?.get(0),
                                None => None,
                            };
                            tx.execute(purses::OPEN, &[&run_id, purses]).await?;
                            tx.execute(purses::SPLIT, &[&run_id, budget, &spent]).await?;
                            // A dropped task keeps its latest result: its own
                            // (not a pending row's), or the completed one a
                            // resume kept aside while it waited (`kept_json`),
                            // which its pending row has no other copy of.
                            tx.execute(
                                "INSERT INTO ctx_dropped (run_id, task_id, status, result_json, engine,
                                        inputs_hash, model, params_hash, claim_seq, started_at, finished_at)
                                 SELECT t.run_id, t.task_id,
                                        CASE WHEN k.kept THEN 'completed' ELSE t.status END,
                                        CASE WHEN k.kept THEN t.kept_json ELSE t.result_json END,
                                        coalesce(t.engine, $6),
                                        f.inputs, f.model, f.params, t.claim_seq, t.started_at, t.finished_at
                                   FROM ctx_tasks t
                                   CROSS JOIN LATERAL (SELECT t.kept_json IS NOT NULL
                                        AND t.status IN ('pending', 'in_progress') AS kept) k
                                   JOIN unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS f(id, inputs, model, params)
                                     ON f.id = t.task_id
                                  WHERE t.run_id = $1
                                    AND (k.kept OR (t.status <> 'pending' AND t.result_json IS NOT NULL))
                                 ON CONFLICT (run_id, task_id) DO UPDATE SET
                                        status = excluded.status, result_json = excluded.result_json,
                                        engine = excluded.engine, inputs_hash = excluded.inputs_hash,
                                        model = excluded.model, params_hash = excluded.params_hash,
                                        claim_seq = excluded.claim_seq, started_at = excluded.started_at,
                                        finished_at = excluded.finished_at",
                                &[&run_id, &dropped.ids, &dropped.inputs, &dropped.model, &dropped.params, &old_engine],
                            )
                            .await?;
                            tx.execute(
                                "DELETE FROM ctx_tasks WHERE run_id = $1 AND task_id <> ALL($2::text[])",
                                &[&run_id, &rows.ids],
                            )
                            .await?;
                            // A task the plan brings back starts from its
                            // kept result (reused if unchanged, else reset
                            // below with the other re-runs).
                            tx.execute(
                                "INSERT INTO ctx_tasks (run_id, task_id, idx, status, pending_deps, priority,
                                        result_json, claim_seq, started_at, finished_at, engine, gate, high_picos)
                                 SELECT $1, t.id, t.idx, coalesce(d.status, 'pending'), t.deps, t.prio,
                                        d.result_json, d.claim_seq, d.started_at, d.finished_at, d.engine, t.gate,
                                        t.high::numeric
                                   FROM unnest($2::text[], $3::int[], $4::int[], $5::bigint[], $6::text[], $7::text[])
                                        AS t(id, idx, deps, prio, gate, high)
                                   LEFT JOIN ctx_dropped d ON d.run_id = $1 AND d.task_id = t.id
                                 ON CONFLICT (run_id, task_id)
                                 DO UPDATE SET idx = excluded.idx, priority = excluded.priority,
                                               gate = excluded.gate, high_picos = excluded.high_picos",
                                &[&run_id, &rows.ids, &rows.idx, &rows.deps, &rows.prio, &rows.gate, &rows.high],
                            )
                            .await?;
                            tx.execute(
                                "DELETE FROM ctx_dropped WHERE run_id = $1 AND task_id = ANY($2::text[])",
                                &[&run_id, &rows.ids],
                            )
                            .await?;
                            tx.execute(
                                "UPDATE ctx_tasks SET kept_json = CASE WHEN task_id = ANY($2::text[]) THEN kept_json END,
                                        fresh_items = task_id = ANY($3::text[])
                                  WHERE run_id = $1
                                    AND ((kept_json IS NOT NULL AND task_id <> ALL($2::text[]))
                                         OR fresh_items OR task_id = ANY($3::text[]))",
                                &[&run_id, &keep, fresh],
                            )
                            .await?;
                            // In a SET, `status` and `result_json` are the
                            // row's values before the update.
                            let n = tx
                                .execute(
                                    "UPDATE ctx_tasks SET status = 'pending', result_json = NULL,
                                            kept_json = CASE WHEN task_id = ANY($3::text[]) THEN
                                                CASE WHEN status = 'completed' THEN result_json ELSE kept_json END
                                            END,
                                            claimed_by = NULL, lease_until = NULL, finished_at = NULL,
                                            engine = NULL, joins_items = false
                                      WHERE run_id = $1 AND task_id = ANY($2::text[])
                                        AND NOT (status = 'in_progress' AND lease_until >= now())",
                                    &[&run_id, &rerun, &keep],
                                )
                                .await?;
                            tx.execute("DELETE FROM ctx_edges WHERE run_id = $1", &[&run_id])
                                .await?;
                            tx.execute(
                                "INSERT INTO ctx_edges (run_id, depends_on, task_id)
                                 SELECT $1, e.f, e.t FROM unnest($2::text[], $3::text[]) AS e(f, t)
                                 ON CONFLICT DO NOTHING",
                                &[&run_id, &rows.edge_from, &rows.edge_to],
                            )
                            .await?;
                            tx.execute(
                                "UPDATE ctx_tasks t SET pending_deps = (
                                     SELECT count(*) FROM ctx_edges e
                                       JOIN ctx_tasks d ON d.run_id = e.run_id AND d.task_id = e.depends_on
                                      WHERE e.run_id = $1 AND e.task_id = t.task_id AND d.status <> 'completed')
                                  WHERE t.run_id = $1 AND t.status = 'pending'",
                                &[&run_id],
                            )
                            .await?;
                            tx.execute(
                                &format!(
                                    "UPDATE ctx_runs SET open = o.open,
                                            finished_at = CASE WHEN o.open THEN NULL ELSE now() END
                                       FROM (SELECT EXISTS (SELECT 1 FROM ctx_tasks
                                              WHERE run_id = $1 AND status NOT IN {TERMINAL}) AS open) o
                                      WHERE run_id = $1"
                                ),
                                &[&run_id],
                            )
                            .await?;
                            tx.execute(NOTIFY_READY, &[&run_id]).await?;
                            tx.commit().await?;
                            Ok(Reopened::Done(n))
                        }
                        .await;
                        (c, r)
                    }
                })
                .await?;
            match found {
                Reopened::Done(n) => Ok(n),
                Reopened::NoRun => Err(shared.no_run(run_id)),
                Reopened::BadPlan(e) => Err(shared.corrupt(run_id, "the plan".into(), e)),
                Reopened::Busy(live) => Err(Error::Busy {
                    url: shared.url.display().to_string(),
                    run_id: run_id.clone(),
                    claimed: live,
                }),
            }
        })
        .await
    }

    /// Removes the runs beyond the newest `keep` (by registration time)
    /// that are closed, with their tasks, edges and history, in one
    /// statement; open runs (tasks remain for workers) are removed only
    /// with `force`. Workers never call this: a run's data is deleted only
    /// by `ctx runs gc`.
    pub async fn gc(&self, keep: usize, force: bool) -> Result<GcReport> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| "removing old runs".into(),
                    "WITH ranked AS (
                               SELECT run_id, open, created_at,
                                      row_number() OVER (ORDER BY created_at DESC, run_id DESC) AS n
                                 FROM ctx_runs),
                             gone AS (
                               DELETE FROM ctx_runs r USING ranked k
                                WHERE r.run_id = k.run_id AND k.n > $1 AND (NOT r.open OR $2)
                                RETURNING r.run_id)
                             SELECT k.run_id, k.open, k.n > $1, EXISTS (SELECT 1 FROM gone g WHERE g.run_id = k.run_id)
                               FROM ranked k ORDER BY k.created_at, k.run_id",
                    &[&keep, &force],
                )
                .await?;
            let mut report = GcReport::default();
            for r in &rows {
                let id: String = r.get(0);
                match (r.get::<_, bool>(3), r.get::<_, bool>(2)) {
                    (true, _) => report.removed.push(id),
                    (false, true) => report.open.push(id),
                    (false, false) => report.kept.push(id),
                }
            }
            Ok(report)
        })
        .await
    }

    /// The hash [`register_run`](Self::register_run) stores for `plan`:
    /// SHA-256 of its JSON as stored.
    pub fn plan_hash(plan: &Plan) -> Option<String> {
        serde_json::to_string(plan)
            .ok()
            .map(|j| ctx_store::sha256_hex(j.as_bytes()))
    }
}

/// What follows every commit of task `$2` of run `$1`, in a transaction
/// of its own: releases the task's map task for its join (when the task
/// is an item, its map task waits, and none of its items is open:
/// `pending_deps` 0 makes it claimable, and the workers are woken), then
/// closes the run when none of its tasks is open. Returns how many map
/// tasks it released and how many runs it closed.
///
/// A map task with `joins_items` is `pending` (the flag is set when it is
/// given back, cleared when it is released or reset): the condition
/// leaves the status out on purpose, so the planner cannot take the
/// index of every open task (`ctx_tasks_open`) to find the map task and
/// read it whole after every commit; it reads it by primary key. Both
/// checks probe the partial indexes of open tasks (schema version 5), so
/// the statement costs a few index probes, not a count of the items that
/// ended; it locks the map task's row only when it releases it, so the
/// commits of a map's items do not wait on each other.
pub(crate) const SETTLE: &str = "WITH joined AS (
       UPDATE ctx_tasks m SET pending_deps = 0, joins_items = false
         FROM ctx_tasks d
        WHERE d.run_id = $1 AND d.task_id = $2 AND m.run_id = $1 AND m.task_id = d.map_id
          AND m.joins_items
          AND NOT EXISTS (SELECT 1 FROM ctx_tasks i
                           WHERE i.run_id = $1 AND i.map_id = m.task_id
                             AND i.status IN ('pending', 'in_progress'))
        RETURNING m.run_id),
     closed AS (
       UPDATE ctx_runs r SET open = false, finished_at = now()
        WHERE r.run_id = $1 AND r.open
          AND NOT EXISTS (SELECT 1 FROM ctx_tasks t
                           WHERE t.run_id = $1 AND t.status IN ('pending', 'in_progress'))
        RETURNING r.run_id)
     SELECT (SELECT count(*) FROM joined),
            (SELECT count(*) FROM closed),
            (SELECT pg_notify('ctx_ready', $1) WHERE EXISTS (SELECT 1 FROM joined))::text";

/// [`SETTLE`] for every waiting map task and every open run (of run `$1`,
/// or, NULL, of every run): what an idle worker's claim runs, for the
/// worker that died between a commit and its settle. Reads every waiting
/// map task (few) and every open run. Changes nothing in a store whose
/// schema is newer than `$2`, this build's, and returns the store's
/// schema version last, so that an idle worker of an older ctx learns
/// that a newer one migrated the store since it opened it.
pub(crate) const SWEEP: &str = "WITH v AS (SELECT schema_version FROM ctx_meta),
     joined AS (
       UPDATE ctx_tasks m SET pending_deps = 0, joins_items = false
        WHERE m.joins_items AND ($1::text IS NULL OR m.run_id = $1)
          AND (SELECT schema_version FROM v) <= $2::int4
          AND NOT EXISTS (SELECT 1 FROM ctx_tasks i
                           WHERE i.run_id = m.run_id AND i.map_id = m.task_id
                             AND i.status IN ('pending', 'in_progress'))
        RETURNING m.run_id),
     closed AS (
       UPDATE ctx_runs r SET open = false, finished_at = now()
        WHERE r.open AND ($1::text IS NULL OR r.run_id = $1)
          AND (SELECT schema_version FROM v) <= $2::int4
          AND NOT EXISTS (SELECT 1 FROM ctx_tasks t
                           WHERE t.run_id = r.run_id AND t.status IN ('pending', 'in_progress'))
        RETURNING r.run_id)
     SELECT (SELECT count(*) FROM joined),
            (SELECT count(*) FROM closed),
            (SELECT string_agg(pg_notify('ctx_ready', w.run_id)::text, '')
               FROM (SELECT DISTINCT run_id FROM joined) w),
            (SELECT schema_version FROM v)";

/// What a run's attempts recorded as spent, in pico-dollars: every
/// result a worker committed or tried to (the late ones were spent too),
/// each counted once; a result without a cost counts nothing (its
/// reservation, when it had one, is held whole). A resume that gives the
/// run a budget holds at least this much: its budget covers the whole
/// run, sessions without a budget included. Parameter: the run.
const SPENT: &str = "SELECT coalesce(sum(round(
         (a.result_json::jsonb #>> '{metadata,cost_usd}')::numeric * 1000000000000)), 0)
       FROM ctx_attempts a WHERE a.run_id = $1";

/// An amount as the `numeric` columns of a budget take it: pico-dollars,
/// written as text (the driver has no `numeric` of its own).
pub(crate) fn picos_text(amount: Option<Usd>) -> Option<String> {
    amount.map(|a| a.picos().to_string())
}
