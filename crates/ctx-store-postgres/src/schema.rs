//! The database schema and its versioned migrations.
//!
//! `ctx_meta` holds one row: the application (`ctx-execution-store`) and
//! the schema version. Opening a store:
//!
//! - an empty database (no tables in the current schema) gets every
//!   migration;
//! - a ctx store of an older version gets the missing ones;
//! - a ctx store of a *newer* version is refused ([`Error::NewerSchema`]):
//!   this build does not know what the newer columns mean;
//! - anything else — tables but no `ctx_meta`, or a `ctx_meta` naming
//!   another application — is a foreign database ([`Error::Foreign`]) and
//!   is never written to.
//!
//! Migrations run in one transaction under an advisory lock, so workers
//! that start together against a new database apply them once.
//!
//! A result is stored whole as JSON (`result_json`, in `ctx_tasks` and
//! `ctx_attempts`), so a field a result gains needs no migration: the
//! raw output an `output` block cleaned (`raw_output`, issue 38) is kept
//! there, beside the cleaned `output`, where a run directory's store
//! needed a column (its schema version 3). Columns are for what is not a
//! result: the run's inputs, claims, leases, budgets.
//!
//! [`Error::NewerSchema`]: crate::Error::NewerSchema
//! [`Error::Foreign`]: crate::Error::Foreign

use std::time::Instant;

use crate::connection::{PgError, Shared, is_disconnect};
use crate::error::{Error, Result};

/// The `application` value of `ctx_meta`.
pub const APPLICATION: &str = "ctx-execution-store";

/// The advisory lock key taken while migrating (`ctx` in ASCII).
pub(crate) const MIGRATION_LOCK: i64 = 0x0063_7478;

/// One schema step: from version `version - 1` to `version`.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The version after this step.
    pub version: i32,
    /// The statements.
    pub sql: &'static str,
}

/// Every migration, in order. The last one's version is
/// [`SCHEMA_VERSION`].
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: r#"
CREATE TABLE ctx_meta (
    application    text    NOT NULL,
    schema_version integer NOT NULL
);
-- One row per registered run. `open` turns false in the transaction after
-- the one that made its last task terminal.
CREATE TABLE ctx_runs (
    run_id       text        PRIMARY KEY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    open         boolean     NOT NULL DEFAULT true,
    plan_json    text        NOT NULL,
    plan_hash    text        NOT NULL,
    plan_source  text,
    engine       text        NOT NULL,
    ctx_version  text        NOT NULL,
    task_count   integer     NOT NULL,
    late_commits bigint      NOT NULL DEFAULT 0
);
-- One row per task: its latest result and its claim.
CREATE SEQUENCE ctx_claim_seq;
CREATE TABLE ctx_tasks (
    run_id       text        NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    task_id      text        NOT NULL,
    idx          integer     NOT NULL,          -- plan order
    status       text        NOT NULL,          -- pending | in_progress | completed | failed | skipped
    pending_deps integer     NOT NULL,          -- dependencies not yet completed
    priority     bigint      NOT NULL,          -- remaining path length: critical path first
    claimed_by   text,                          -- worker id
    lease_until  timestamptz,                   -- the claim lapses unless renewed
    attempt      integer     NOT NULL DEFAULT 0, -- the fencing token: +1 at every claim
    claim_seq    bigint,                        -- global claim order (ctx_claim_seq): the dispatch order
    result_json  text,
    started_at   timestamptz,
    finished_at  timestamptz,
    PRIMARY KEY (run_id, task_id)
);
CREATE INDEX ctx_tasks_ready ON ctx_tasks (priority DESC, run_id, idx)
    WHERE status = 'pending' AND pending_deps = 0;
CREATE INDEX ctx_tasks_leased ON ctx_tasks (lease_until) WHERE status = 'in_progress';
CREATE TABLE ctx_edges (
    run_id     text NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    depends_on text NOT NULL,
    task_id    text NOT NULL,
    PRIMARY KEY (run_id, depends_on, task_id)
);
-- Every terminal result a worker tried to commit; `committed` is false for
-- the late commits a fence refused.
CREATE TABLE ctx_attempts (
    seq         bigserial   PRIMARY KEY,
    run_id      text        NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    task_id     text        NOT NULL,
    attempt     integer     NOT NULL,
    worker      text,
    status      text        NOT NULL,
    committed   boolean     NOT NULL,
    result_json text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ctx_attempts_task ON ctx_attempts (run_id, task_id);
"#,
    },
    Migration {
        version: 2,
        sql: r#"
-- The latest results of tasks that a resume with a changed plan dropped
-- from the run, kept as a run directory keeps them: a resume plan names
-- them, and a later plan that brings a task back unchanged reuses its
-- result. The fingerprint and engine are those it was produced under.
CREATE TABLE ctx_dropped (
    run_id      text        NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    task_id     text        NOT NULL,
    status      text        NOT NULL,
    result_json text        NOT NULL,
    engine      text        NOT NULL,
    inputs_hash text        NOT NULL,
    model       text,
    params_hash text        NOT NULL,
    claim_seq   bigint,
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (run_id, task_id)
);
-- The engine label of the worker that claimed the task last: the engine
-- its result was produced with, which a resume compares (NULL: the run's).
ALTER TABLE ctx_tasks ADD COLUMN engine text;
"#,
    },
    Migration {
        version: 3,
        sql: r#"
-- What the run's plan was filled from (ctx_store::RunInputs as JSON: the
-- plan before filling, each --var value, the history digest), so that a
-- resume fills it again without being given them. NULL for a plan with
-- nothing to fill and for runs registered before this version.
ALTER TABLE ctx_runs ADD COLUMN inputs_json text;
-- The files the session that ran the plan published once the run
-- completed ([{task_id, path}], ctx run --publish-root). NULL: none.
ALTER TABLE ctx_runs ADD COLUMN published_json text;
"#,
    },
    Migration {
        version: 4,
        sql: r#"
-- A map task's items (issue 23). An item's edge to its map task `joins`:
-- the map task waits for its items to *end*, whatever their status, so
-- a failed item releases the map (its join then decides, within
-- map.allow_failures) instead of skipping it.
ALTER TABLE ctx_edges ADD COLUMN joins boolean NOT NULL DEFAULT false;
-- An item's content hash (ctx_deps::map::item_hash), written when its map
-- expands and recorded with its result, which a resume matches items by.
ALTER TABLE ctx_tasks ADD COLUMN item_hash text;
"#,
    },
    Migration {
        version: 5,
        sql: r#"
-- An item's map task (issue 23), and whether a map task waits for its
-- items. An item's commit no longer counts itself on its map task's row
-- (every commit of a map's items took that one row's lock, so they ran
-- one at a time): a waiting map task is released for its join by the
-- first statement that finds none of its items open (the one that follows
-- each commit, or an idle worker's sweep), which the partial indexes
-- answer without reading the items that ended. The `joins` edges are no
-- longer written.
ALTER TABLE ctx_tasks ADD COLUMN map_id text;
ALTER TABLE ctx_tasks ADD COLUMN joins_items boolean NOT NULL DEFAULT false;
UPDATE ctx_tasks t SET map_id = e.task_id FROM ctx_edges e
 WHERE e.joins AND e.run_id = t.run_id AND e.depends_on = t.task_id;
UPDATE ctx_tasks t SET joins_items = true
 WHERE t.status = 'pending' AND t.pending_deps > 0
   AND EXISTS (SELECT 1 FROM ctx_edges e
                WHERE e.joins AND e.run_id = t.run_id AND e.task_id = t.task_id);
CREATE INDEX ctx_tasks_open_items ON ctx_tasks (run_id, map_id)
    WHERE map_id IS NOT NULL AND status IN ('pending', 'in_progress');
CREATE INDEX ctx_tasks_open ON ctx_tasks (run_id) WHERE status IN ('pending', 'in_progress');
CREATE INDEX ctx_tasks_joining ON ctx_tasks (run_id) WHERE joins_items;
-- A claim looks for a lapsed lease in its run: by run, then by time (the
-- index by time alone lost to ctx_tasks_open, read whole at every claim).
DROP INDEX ctx_tasks_leased;
CREATE INDEX ctx_tasks_leased ON ctx_tasks (run_id, lease_until) WHERE status = 'in_progress';
-- A claim returns the claimed task's dependency results: its edges by
-- the dependent.
CREATE INDEX ctx_edges_dependent ON ctx_edges (run_id, task_id);
"#,
    },
    Migration {
        version: 6,
        sql: r#"
-- A resume no longer runs again what is below a map whose items came back
-- unchanged (issue 23). A task whose only reason to run again is a map
-- above it (the map expands again on every run) keeps its previous
-- completed result here while it waits, pending; its claim returns it,
-- and the worker commits it as is when the items the task would receive
-- digest as those it received then (metadata.map_inputs). A dependency
-- that really runs again clears its dependents' kept results in its
-- commit. On a completed row, a kept result marks a result taken as
-- stored in the latest resume. NULL everywhere else, and for every row
-- written before this version.
ALTER TABLE ctx_tasks ADD COLUMN kept_json text;
"#,
    },
    Migration {
        version: 7,
        sql: r#"
-- A budget on the shared store (`ctx run --store ... --max-cost`). The
-- run's budget and what it holds, in pico-dollars: every reservation a
-- claim made (its task's high end, taken before the engine runs) less
-- what each commit settled it at (the task's cost). A reservation whose
-- claim never commits (its worker died, its commit came late) stays
-- held, as money that may have been spent. A task's reserved_picos is
-- its current claim's reservation until its commit settles it (NULL:
-- none). NULL budget: no budget.
ALTER TABLE ctx_runs ADD COLUMN budget_picos numeric;
ALTER TABLE ctx_runs ADD COLUMN held_picos numeric NOT NULL DEFAULT 0;
ALTER TABLE ctx_tasks ADD COLUMN reserved_picos numeric;
"#,
    },
    Migration {
        version: 8,
        sql: r#"
-- Sessions (issue 39), as a run directory counts them: a run is
-- registered in session 1 and each resume opens the next. Every attempt
-- records the session its run was in, so that the run as it stood after
-- session N (`ctx runs diff RUN@N RUN`) is its history cut after N.
-- Attempts recorded before this version read as session 1.
ALTER TABLE ctx_runs ADD COLUMN session integer NOT NULL DEFAULT 1;
ALTER TABLE ctx_attempts ADD COLUMN session integer NOT NULL DEFAULT 1;
-- A map task at or below a task `ctx run --resume RUN --rerun TASK` asked
-- for: its expansion in this session takes none of its stored items
-- (every item runs again, as below a local --rerun). Set by the resume
-- that asked, for its session; cleared by the next resume.
ALTER TABLE ctx_tasks ADD COLUMN fresh_items boolean NOT NULL DEFAULT false;
"#,
    },
    Migration {
        version: 9,
        sql: r#"
-- Period budgets on the shared store (issue 40), the ledger a store
-- root's budgets.sqlite keeps for run directories: what the settled runs
-- of a named budget spent in a calendar period (by its first day, UTC),
-- and what each run still running holds of it, in pico-dollars. A hold
-- is taken in one transaction that locks the period's spent row first,
-- so two runs starting at once are served one after the other and cannot
-- both take the last dollars; a settlement deletes the hold and adds
-- what the run spent, once.
CREATE TABLE ctx_period_spent (
    name         text    NOT NULL,
    period_start text    NOT NULL,
    picos        numeric NOT NULL DEFAULT 0 CHECK (picos >= 0),
    PRIMARY KEY (name, period_start)
);
CREATE TABLE ctx_period_holds (
    name         text        NOT NULL,
    period_start text        NOT NULL,
    holder       text        NOT NULL,
    picos        numeric     NOT NULL CHECK (picos >= 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, period_start, holder)
);
-- The cheaper tier of its period budget a run was started on
-- (ctx_model::FallbackChoice as JSON), which a resume keeps and `ctx runs
-- show` and the report name. NULL: the standard tier.
ALTER TABLE ctx_runs ADD COLUMN fallback_json text;
"#,
    },
    Migration {
        version: 10,
        sql: r#"
-- A run's publishes and their undos (issue 38), as a run directory's
-- store keeps them (its `publishes`): one row per `ctx run --publish-root`
-- session that wrote something, per `ctx runs publish` and per `ctx runs
-- unpublish`, numbered in the run. files_json is the manifest
-- ([ctx_store::Published]: path, new and old SHA-256, size, time);
-- undone_by is, for a publish, the seq of the undo that reverted it.
CREATE TABLE ctx_publishes (
    run_id     text   NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    seq        bigint NOT NULL,
    kind       text   NOT NULL CHECK (kind IN ('publish', 'unpublish')),
    at         text   NOT NULL,
    files_json text   NOT NULL,
    undone_by  bigint,
    PRIMARY KEY (run_id, seq)
);
-- The bytes a publish replaced, by their SHA-256, kept before the file
-- was replaced: what `ctx runs unpublish` writes back. A run directory
-- keeps them as files (RUN_DIR/published/backup/SHA256).
CREATE TABLE ctx_publish_backups (
    run_id text  NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    sha256 text  NOT NULL,
    bytes  bytea NOT NULL,
    PRIMARY KEY (run_id, sha256)
);
-- What earlier sessions published becomes each run's first publish (its
-- lines carry no digests: it cannot be undone). published_json is no
-- longer written.
INSERT INTO ctx_publishes (run_id, seq, kind, at, files_json)
    SELECT run_id, 1, 'publish',
           to_char(COALESCE(finished_at, created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           published_json
    FROM ctx_runs WHERE published_json IS NOT NULL;
"#,
    },
    Migration {
        version: 11,
        sql: r#"
-- Approval gates (issue 38). A task whose plan says `approval: {before:
-- run}` has gate 'run': no claim takes it before its run has a decision
-- on it. ctx_decisions keeps every decision, as a run directory's store
-- does (its `decisions`): output_sha256 names the output a `before:
-- publish` decision is about; the unique index keeps one decision per
-- gate and output, so of two at once one wins.
ALTER TABLE ctx_tasks ADD COLUMN gate text;
CREATE TABLE ctx_decisions (
    run_id        text      NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    seq           bigserial NOT NULL,
    task_id       text      NOT NULL,
    stage         text      NOT NULL CHECK (stage IN ('run', 'publish')),
    verdict       text      NOT NULL CHECK (verdict IN ('approve', 'reject')),
    decided_by    text      NOT NULL,
    at            text      NOT NULL,
    note          text,
    output_sha256 text,
    PRIMARY KEY (run_id, seq)
);
CREATE UNIQUE INDEX ctx_decisions_once
    ON ctx_decisions (run_id, task_id, stage, coalesce(output_sha256, ''));
"#,
    },
    Migration {
        version: 12,
        sql: r#"
-- A budget's reservation taken by the claim (issue 40). A task's
-- high_picos is its high end under the run's budget, recorded by the
-- session that registered or resumed the run (NULL: not known, a map
-- task, or no budget): the claim statement adds the high ends of the
-- tasks it takes to the run's held_picos under the run row's lock,
-- only while they fit the budget, and marks each task's
-- reserved_picos, in its one transaction. A worker whose own high end
-- is larger tops the reservation up (PgStore::reserve).
ALTER TABLE ctx_tasks ADD COLUMN high_picos numeric;
-- Whether a task waits for the budget: true once a reservation did not
-- fit (its task is given back until reservations settle); the next
-- commit that settles a reservation wakes the workers (NOTIFY) and
-- turns it false, the one after to NULL. Only a commit that finds it
-- true notifies: commits under a budget nobody waits on send nothing.
ALTER TABLE ctx_runs ADD COLUMN budget_wait boolean;
"#,
    },
    Migration {
        version: 13,
        sql: r#"
-- A run's budget split into purses (issue 40). Every budgeted claim and
-- commit used to update the run's one row, so the claimers of a run
-- took turns on its lock. Now the budget lives in up to 16 rows a run:
-- each purse holds a share of what the run has left, and a claim
-- reserves in a purse that is not locked (SKIP LOCKED) and has room,
-- a commit settles in the purse its claim reserved in. The bound: while
-- a purse holds less than its share, the shares sum to the budget, and
-- a reservation is taken in one purse only within its share, so the
-- purses together never hold more than the budget. A reservation that
-- fits no free purse (PgStore::reserve) locks all of the run's purses
-- in order, checks what they hold together against the budget, and
-- splits what is left evenly again. Per purse: budget_picos is the
-- run's whole budget (the same in every purse; NULL: none),
-- share_picos what this purse may hold (NULL: no budget), held_picos
-- what it holds (reservations and what commits settled them at, as
-- schema 7's held_picos), budget_wait as schema 12's, set on every
-- purse by a reservation that did not fit, cleared by the next commit
-- that settles in that purse. Purse 0 always exists; a task's purse is
-- where its reserved_picos is held.
CREATE TABLE ctx_budget_purses (
    run_id       text    NOT NULL REFERENCES ctx_runs ON DELETE CASCADE,
    purse        integer NOT NULL,
    budget_picos numeric,
    share_picos  numeric,
    held_picos   numeric NOT NULL DEFAULT 0,
    budget_wait  boolean,
    PRIMARY KEY (run_id, purse)
) WITH (fillfactor = 20);
-- A purse's share when the run has `slack` left over what its `n`
-- purses hold: its own held plus an even part of the slack, the
-- remainder going to the first purse, so the shares sum to the budget
-- (nothing when the slack is gone; NULL without a budget).
CREATE FUNCTION ctx_purse_share(held numeric, slack numeric, n bigint, first boolean)
    RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN slack IS NULL THEN NULL
                WHEN slack <= 0 THEN held
                ELSE held + floor(slack / n)
                     + CASE WHEN first THEN slack - floor(slack / n) * n ELSE 0 END END
$$;
INSERT INTO ctx_budget_purses (run_id, purse, budget_picos, share_picos, held_picos, budget_wait)
    SELECT run_id, 0, budget_picos, ctx_purse_share(held_picos, budget_picos - held_picos, 1, true),
           held_picos, budget_wait
      FROM ctx_runs;
ALTER TABLE ctx_tasks ADD COLUMN purse integer;
UPDATE ctx_tasks SET purse = 0 WHERE reserved_picos IS NOT NULL;
ALTER TABLE ctx_runs DROP COLUMN budget_picos, DROP COLUMN held_picos, DROP COLUMN budget_wait;
"#,
    },
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = 13;
/// Checks the database and applies the missing migrations (see the
/// module docs), on one connection taken without waiting.
pub(crate) async fn migrate(shared: &Shared) -> Result<()> {
    let url = shared.url.display().to_string();
    // Opening does not wait for a server that is not there.
    let mut client = shared.client(Instant::now()).await?;
    let q = |context: &str, source: PgError| {
        if is_disconnect(&source) {
            Error::Unreachable {
                url: url.clone(),
                source,
            }
        } else {
            Error::Query {
                url: url.clone(),
                context: context.to_string(),
                source,
            }
        }
    };
    let tx = client
        .transaction()
        .await
        .map_err(|e| q("starting the schema check", e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| q("taking the migration lock", e))?;
    let tables: Vec<String> = tx
        .query(
            "SELECT table_name::text FROM information_schema.tables
              WHERE table_schema = current_schema() ORDER BY 1",
            &[],
        )
        .await
        .map_err(|e| q("listing tables", e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let current = if tables.iter().any(|t| t == "ctx_meta") {
        let rows = tx
            .query("SELECT application, schema_version FROM ctx_meta", &[])
            .await
            .map_err(|e| q("reading ctx_meta", e))?;
        match rows.as_slice() {
            [row] => {
                let app: String = row.get(0);
                if app != APPLICATION {
                    return Err(Error::Foreign {
                        url,
                        reason: format!("its ctx_meta names the application `{app}`"),
                    });
                }
                row.get::<_, i32>(1)
            }
            _ => {
                return Err(Error::Foreign {
                    url,
                    reason: format!("its ctx_meta has {} rows, not one", rows.len()),
                });
            }
        }
    } else if tables.is_empty() {
        0
    } else {
        let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
        return Err(Error::Foreign {
            url,
            reason: format!(
                "it has {} table(s) ({}{}) and no ctx_meta",
                tables.len(),
                shown.join(", "),
                if tables.len() > 5 { ", ..." } else { "" }
            ),
        });
    };
    if current > SCHEMA_VERSION {
        return Err(Error::NewerSchema {
            url,
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > current) {
        tx.batch_execute(m.sql)
            .await
            .map_err(|e| q(&format!("migrating to schema version {}", m.version), e))?;
    }
    if current == 0 {
        tx.execute(
            "INSERT INTO ctx_meta (application, schema_version) VALUES ($1, $2)",
            &[&APPLICATION, &SCHEMA_VERSION],
        )
        .await
        .map_err(|e| q("writing ctx_meta", e))?;
    } else if current < SCHEMA_VERSION {
        tx.execute(
            "UPDATE ctx_meta SET schema_version = $1",
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(|e| q("writing ctx_meta", e))?;
    }
    tx.commit()
        .await
        .map_err(|e| q("committing the schema", e))?;
    shared.give_back(client);
    Ok(())
}
