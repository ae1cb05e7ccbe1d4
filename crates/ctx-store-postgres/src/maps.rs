//! A map task's items in the shared store (issue 23): the one transaction
//! that registers them when their map expands, and the reads a worker
//! makes around it.
//!
//! A map task is claimed like any task once its dependencies completed
//! (its source is ready). The worker holding that claim computes the
//! items with the library's one expansion (ctx-deps' `map` module: the
//! store knows nothing of prompts) and hands them to
//! [`PgStore::expand_map`], which, in one transaction under the claim's
//! fence:
//!
//! - replaces the run's plan with the plan with the items appended
//!   (only if the plan is still the one the expansion was computed on:
//!   two maps of one run expanding at once must not lose each other's
//!   items; the loser is told [`Expanded::Stale`] and computes again);
//! - inserts one task row per item (ready at once: the item's
//!   dependencies are the map task's, which completed), its content hash
//!   beside it, or, for an item a resume takes as stored, its completed
//!   result;
//! - inserts the items' edges to their dependencies; an item names its
//!   map task in its row (`map_id`) instead of an edge: the map task
//!   waits for its items to *end*, whatever their status, and a failed
//!   item never skips it;
//! - gives the map task back as `pending`, waiting for its items
//!   (`joins_items`), or, when none is left to run, keeps it claimed for
//!   its join.
//!
//! An item's commit does not count itself on its map task's row (one
//! row every commit of the map would lock): the statement that follows
//! each commit releases the map task once it finds none of its items
//! open (`runs::SETTLE`), and the join then reads every item's result.
//!
//! Exactly one expansion happens per map turn: the claim is the map
//! task's only one (a lapsed lease's worker is fenced out), the plan
//! hash check refuses a second expansion computed on the old plan, and
//! the items' primary keys refuse a second insert.

use std::sync::Arc;

use ctx_model::{Plan, TaskExecutionResult};
use tokio_postgres::Client;

use crate::PgStore;
use crate::claims::Claim;
use crate::connection::PgError;
use crate::error::Result;
use crate::runs::NOTIFY_READY;

/// One item of an expansion, as the store registers it.
#[derive(Debug, Clone)]
pub struct ItemRow {
    /// `TASK[i]`.
    pub task_id: String,
    /// Its claim priority (remaining path length in the expanded plan).
    pub priority: u64,
    /// Its content hash (`ctx_deps::map::item_hash`).
    pub hash: String,
    /// Its dependencies (the map task's, but the source).
    pub dependencies: Vec<String>,
    /// A stored completed result of the same content a resume takes for
    /// it (under this item's id): the item is registered completed and
    /// does not run.
    pub reused: Option<TaskExecutionResult>,
}

/// What [`PgStore::expand_map`] registers.
#[derive(Debug, Clone, Copy)]
pub struct Expansion<'a> {
    /// The hash of the stored plan the items were computed on (the
    /// claim's, or a later one read with [`PgStore::plan_and_hash`]).
    pub base_hash: &'a str,
    /// That plan with the items appended (`ctx_deps::map::plan_with_items`).
    pub plan: &'a Plan,
    /// The items, in item order: the last `items.len()` tasks of `plan`.
    pub items: &'a [ItemRow],
}

/// What became of an expansion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expanded {
    /// Registered; the map task was given back, waiting for this many
    /// items to end (its next claim is its join).
    Waiting(usize),
    /// Registered with no item left to run (an empty list, or every item
    /// taken as stored): the claim still holds, for the join at once.
    Ready,
    /// The run's plan changed since `base_hash` (another map expanded):
    /// nothing was written; compute the items again on the new plan.
    Stale,
    /// The claim is lost (its lease lapsed): nothing was written.
    Lost,
}

impl PgStore {
    /// The plan stored for `run_id` with its hash: what a worker's task
    /// runner is built on, and what an expansion is computed on.
    pub async fn plan_and_hash(&self, run_id: &str) -> Result<(Plan, String)> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the plan of run `{run_id}`"),
                    "SELECT plan_json, plan_hash FROM ctx_runs WHERE run_id = $1",
                    &[&run_id],
                )
                .await?;
            let Some(row) = rows.first() else {
                return Err(shared.no_run(&run_id));
            };
            let text: String = row.get(0);
            let plan = serde_json::from_str(&text)
                .map_err(|e| shared.corrupt(&run_id, "the plan".into(), e))?;
            Ok((plan, row.get(1)))
        })
        .await
    }

    /// Each registered item's content hash in `run_id`, by item id: what
    /// a worker's task runner records with each item's result.
    pub async fn item_hashes(&self, run_id: &str) -> Result<Vec<(String, String)>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the item hashes of run `{run_id}`"),
                    "SELECT task_id, item_hash FROM ctx_tasks
                      WHERE run_id = $1 AND item_hash IS NOT NULL ORDER BY task_id",
                    &[&run_id],
                )
                .await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
        .await
    }

    /// The latest results of `run_id`'s tasks whose ids start with
    /// `map_id[` (its items, registered or left by a resume), and how
    /// many there are: what a resumed map matches its new items against.
    /// The caller keeps those `ctx_model::map::parse_item_id` names
    /// items of `map_id`. None for a map task the session's resume marked
    /// `fresh_items` (`ctx run --rerun` at or above it): its items all run
    /// again, whichever worker expands it.
    pub async fn stored_items(
        &self,
        run_id: &str,
        map_id: &str,
    ) -> Result<Vec<TaskExecutionResult>> {
        let run_id = run_id.to_string();
        let prefix = format!("{map_id}[");
        let map_id = map_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the stored items of run `{run_id}`"),
                    "WITH fresh AS (SELECT EXISTS (SELECT 1 FROM ctx_tasks
                                         WHERE run_id = $1 AND task_id = $3 AND fresh_items) AS f)
                     SELECT task_id, result_json FROM ctx_tasks
                      WHERE run_id = $1 AND left(task_id, length($2)) = $2
                        AND status <> 'pending' AND result_json IS NOT NULL
                        AND NOT (SELECT f FROM fresh)
                     UNION ALL
                     SELECT task_id, result_json FROM ctx_dropped d
                      WHERE run_id = $1 AND left(task_id, length($2)) = $2
                        AND NOT EXISTS (SELECT 1 FROM ctx_tasks t
                                         WHERE t.run_id = $1 AND t.task_id = d.task_id)
                        AND NOT (SELECT f FROM fresh)
                     ORDER BY 1",
                    &[&run_id, &prefix, &map_id],
                )
                .await?;
            crate::reads::results_of_rows(&shared, &run_id, &rows)
        })
        .await
    }

    /// Registers the items of the map task `claim` holds (see the module
    /// docs), in one transaction under the claim's fence.
    pub async fn expand_map(&self, claim: &Claim, expansion: &Expansion<'_>) -> Result<Expanded> {
        let plan_json = serde_json::to_string(expansion.plan)
            .map_err(|e| self.shared.corrupt(&claim.run_id, "the plan".into(), e))?;
        let rows = ItemArrays::of(expansion).map_err(|e| {
            self.shared
                .corrupt(&claim.run_id, "an item's result".into(), e)
        })?;
        let args = ExpandArgs {
            claim: claim.clone(),
            base_hash: expansion.base_hash.to_string(),
            plan_hash: ctx_store::sha256_hex(plan_json.as_bytes()),
            task_count: i32::try_from(expansion.plan.sub_tasks.len()).unwrap_or(i32::MAX),
            plan_json,
            rows,
        };
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let args = &args;
            let context = || {
                format!(
                    "expanding map task `{}` of run `{}`",
                    args.claim.task_id, args.claim.run_id
                )
            };
            shared
                .with(&context, 8, move |mut c, retry| async move {
                    let r = expand_transaction(&mut c, args, retry).await;
                    (c, r)
                })
                .await
        })
        .await
    }
}

/// An expansion as statement parameters.
struct ExpandArgs {
    claim: Claim,
    base_hash: String,
    plan_hash: String,
    plan_json: String,
    task_count: i32,
    rows: ItemArrays,
}

/// The items as `unnest` arrays.
struct ItemArrays {
    ids: Vec<String>,
    idx: Vec<i32>,
    prio: Vec<i64>,
    hash: Vec<String>,
    /// The reused result's JSON, or NULL for an item that runs.
    reused: Vec<Option<String>>,
    edge_from: Vec<String>,
    edge_to: Vec<String>,
    /// How many items run (are not reused).
    waiting: i32,
}

impl ItemArrays {
    fn of(e: &Expansion<'_>) -> std::result::Result<ItemArrays, serde_json::Error> {
        let first = e.plan.sub_tasks.len().saturating_sub(e.items.len());
        let mut a = ItemArrays {
            ids: Vec::with_capacity(e.items.len()),
            idx: Vec::with_capacity(e.items.len()),
            prio: Vec::with_capacity(e.items.len()),
            hash: Vec::with_capacity(e.items.len()),
            reused: Vec::with_capacity(e.items.len()),
            edge_from: Vec::new(),
            edge_to: Vec::new(),
            waiting: 0,
        };
        for (k, item) in e.items.iter().enumerate() {
            a.ids.push(item.task_id.clone());
            a.idx.push(i32::try_from(first + k).unwrap_or(i32::MAX));
            a.prio
                .push(i64::try_from(item.priority).unwrap_or(i64::MAX));
            a.hash.push(item.hash.clone());
            a.reused.push(
                item.reused
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()?,
            );
            if item.reused.is_none() {
                a.waiting += 1;
            }
            for d in &item.dependencies {
                a.edge_from.push(d.clone());
                a.edge_to.push(item.task_id.clone());
            }
        }
        Ok(a)
    }
}

async fn expand_transaction(
    c: &mut Client,
    a: &ExpandArgs,
    retry: bool,
) -> std::result::Result<Expanded, PgError> {
    let tx = c.transaction().await?;
    if let Some(outcome) = expansion_refused(&tx, a, retry).await? {
        return Ok(outcome);
    }
    write_items(&tx, a).await?;
    let (claim, waiting) = (&a.claim, a.rows.waiting);
    if waiting > 0 {
        tx.execute(
            "UPDATE ctx_tasks SET status = 'pending', pending_deps = $5, claimed_by = NULL,
                    lease_until = NULL, joins_items = true
              WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4",
            &[
                &claim.run_id,
                &claim.task_id,
                &claim.attempt,
                &claim.worker,
                &waiting,
            ],
        )
        .await?;
        tx.execute(NOTIFY_READY, &[&claim.run_id]).await?;
    }
    tx.commit().await?;
    Ok(expanded(waiting))
}

/// `Ready`, or `Waiting` for that many items.
fn expanded(waiting: i32) -> Expanded {
    if waiting == 0 {
        Expanded::Ready
    } else {
        Expanded::Waiting(usize::try_from(waiting).unwrap_or(0))
    }
}

/// Why this expansion must not write, read under the run's and the
/// claim's row locks: the run is gone or the claim lost (`Lost`), another
/// expansion changed the plan first (`Stale`), or an earlier try of this
/// very transaction went through before the connection broke (its
/// outcome). `None`: write.
async fn expansion_refused(
    tx: &tokio_postgres::Transaction<'_>,
    a: &ExpandArgs,
    retry: bool,
) -> std::result::Result<Option<Expanded>, PgError> {
    let claim = &a.claim;
    let current: Option<String> = tx
        .query_opt(
            "SELECT plan_hash FROM ctx_runs WHERE run_id = $1 FOR UPDATE",
            &[&claim.run_id],
        )
        .await?
        .map(|r| r.get(0));
    let Some(current) = current else {
        return Ok(Some(Expanded::Lost));
    };
    if retry && current == a.plan_hash {
        return Ok(Some(expanded(a.rows.waiting)));
    }
    if current != a.base_hash {
        return Ok(Some(Expanded::Stale));
    }
    let held = tx
        .query_opt(
            "SELECT 1 FROM ctx_tasks
              WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND claimed_by = $4
                AND status = 'in_progress' AND lease_until >= now()
              FOR UPDATE",
            &[&claim.run_id, &claim.task_id, &claim.attempt, &claim.worker],
        )
        .await?;
    Ok(held.is_none().then_some(Expanded::Lost))
}

/// The expanded plan, its items and their edges. A reused item is
/// completed at once, as stored (its claim order and times are this
/// expansion's: it was not run here); a result left by a resume under an
/// item's id is the registered item's now (taken, or replaced when the
/// item runs again).
async fn write_items(
    tx: &tokio_postgres::Transaction<'_>,
    a: &ExpandArgs,
) -> std::result::Result<(), PgError> {
    let (claim, r) = (&a.claim, &a.rows);
    tx.execute(
        "UPDATE ctx_runs SET plan_json = $2, plan_hash = $3, task_count = $4 WHERE run_id = $1",
        &[&claim.run_id, &a.plan_json, &a.plan_hash, &a.task_count],
    )
    .await?;
    tx.execute(
        "INSERT INTO ctx_tasks (run_id, task_id, idx, status, pending_deps, priority, item_hash,
                result_json, finished_at, map_id)
         SELECT $1, t.id, t.idx, CASE WHEN t.reused IS NULL THEN 'pending' ELSE 'completed' END,
                0, t.prio, t.hash, t.reused, CASE WHEN t.reused IS NULL THEN NULL ELSE now() END, $7
           FROM unnest($2::text[], $3::int[], $4::bigint[], $5::text[], $6::text[])
                AS t(id, idx, prio, hash, reused)",
        &[
            &claim.run_id,
            &r.ids,
            &r.idx,
            &r.prio,
            &r.hash,
            &r.reused,
            &claim.task_id,
        ],
    )
    .await?;
    tx.execute(
        "INSERT INTO ctx_edges (run_id, depends_on, task_id)
         SELECT $1, e.f, e.t FROM unnest($2::text[], $3::text[]) AS e(f, t)
         ON CONFLICT DO NOTHING",
        &[&claim.run_id, &r.edge_from, &r.edge_to],
    )
    .await?;
    tx.execute(
        "DELETE FROM ctx_dropped WHERE run_id = $1 AND task_id = ANY($2::text[])",
        &[&claim.run_id, &r.ids],
    )
    .await?;
    Ok(())
}
