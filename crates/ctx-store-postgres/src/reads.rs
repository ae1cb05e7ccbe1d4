//! The read side: runs, tasks, results, history and dropped results,
//! each one statement.

use std::sync::Arc;

use ctx_model::{Plan, TaskExecutionResult};

use crate::PgStore;
use crate::connection::Shared;
use crate::error::Result;
use ctx_store::{RunInputs, StatusCounts};

use crate::rows::{AttemptRow, DroppedRow, RunInfo, TaskRow, parse_status};

/// `column` as RFC 3339 UTC text with milliseconds (`...T...Z`), for a
/// `concat!` of a statement.
macro_rules! utc {
    ($column:literal) => {
        concat!(
            "to_char(",
            $column,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
        )
    };
}

impl PgStore {
    /// The kept results of tasks that resumes dropped from `run_id`'s
    /// plan, by task id.
    pub async fn dropped(&self, run_id: &str) -> Result<Vec<DroppedRow>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the dropped tasks of run `{run_id}`"),
                    concat!(
                        "SELECT task_id, status, result_json, engine, inputs_hash, model, params_hash, claim_seq, ",
                        utc!("started_at"), ", ", utc!("finished_at"),
                        " FROM ctx_dropped WHERE run_id = $1 ORDER BY task_id"
                    ),
                    &[&run_id],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    let task_id: String = r.get(0);
                    let text: String = r.get(2);
                    let result = serde_json::from_str(&text).map_err(|e| {
                        shared.corrupt(&run_id, format!("dropped task `{task_id}`"), e)
                    })?;
                    Ok(DroppedRow {
                        status: parse_status(&r.get::<_, String>(1)),
                        task_id,
                        result,
                        engine: r.get(3),
                        fingerprint: ctx_store::TaskFingerprint {
                            inputs_hash: r.get(4),
                            model: r.get(5),
                            params_hash: r.get(6),
                        },
                        claim_seq: r.get(7),
                        started_at: r.get(8),
                        finished_at: r.get(9),
                    })
                })
                .collect()
        })
        .await
    }

    /// Every terminal result committed or refused for `run_id` (of
    /// `task_id` only, when given), in the order they were recorded.
    pub async fn attempts(&self, run_id: &str, task_id: Option<&str>) -> Result<Vec<AttemptRow>> {
        let run_id = run_id.to_string();
        let task_id = task_id.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the history of run `{run_id}`"),
                    concat!(
                        "SELECT seq, task_id, attempt, worker, committed, result_json, ",
                        utc!("recorded_at"),
                        ", session",
                        " FROM ctx_attempts
                          WHERE run_id = $1 AND ($2::text IS NULL OR task_id = $2)
                          ORDER BY task_id, seq"
                    ),
                    &[&run_id, &task_id],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    let task_id: String = r.get(1);
                    let text: String = r.get(5);
                    let result = serde_json::from_str(&text).map_err(|e| {
                        shared.corrupt(&run_id, format!("task `{task_id}` (history)"), e)
                    })?;
                    Ok(AttemptRow {
                        seq: r.get(0),
                        task_id,
                        attempt: r.get(2),
                        worker: r.get(3),
                        committed: r.get(4),
                        result,
                        recorded_at: r.get(6),
                        session: r.get(7),
                    })
                })
                .collect()
        })
        .await
    }

    /// Whether `run` (or, without one, any run) still has tasks that are
    /// not terminal and can go on without a person: one running, or one
    /// ready to claim. A run whose open tasks all wait on an approval gate
    /// (a `before: run` task with no decision, and what is below it) is
    /// open but has nothing to work on: it counts only when
    /// `waiting_counts`.
    pub async fn has_open_runs(&self, run: Option<&str>, waiting_counts: bool) -> Result<bool> {
        let run = run.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| "listing open runs".into(),
                    "SELECT EXISTS (SELECT 1 FROM ctx_runs r
                      WHERE r.open AND ($1::text IS NULL OR r.run_id = $1)
                        AND ($2 OR EXISTS (
                             SELECT 1 FROM ctx_tasks t
                              WHERE t.run_id = r.run_id
                                AND (t.status = 'in_progress'
                                     OR t.status = 'pending' AND t.pending_deps = 0
                                        AND (t.gate IS NULL OR EXISTS (
                                             SELECT 1 FROM ctx_decisions d
                                              WHERE d.run_id = t.run_id AND d.task_id = t.task_id
                                                AND d.stage = 'run'))))))",
                    &[&run, &waiting_counts],
                )
                .await?;
            Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
        })
        .await
    }

    /// The plan stored for `run_id` ([`PgStore::plan_and_hash`] without
    /// its hash).
    pub async fn plan(&self, run_id: &str) -> Result<Plan> {
        Ok(self.plan_and_hash(run_id).await?.0)
    }

    /// What `run_id`'s plan was filled from (`None`: nothing to fill).
    pub async fn inputs(&self, run_id: &str) -> Result<Option<RunInputs>> {
        self.run_json(run_id, "inputs_json", "the run's inputs")
            .await
    }

    /// The cheaper tier of its period budget `run_id` was started on
    /// (`None`: the standard tier).
    pub async fn fallback(&self, run_id: &str) -> Result<Option<ctx_model::FallbackChoice>> {
        self.run_json(run_id, "fallback_json", "the run's fallback tier")
            .await
    }

    /// A JSON column of `run_id`'s row in `ctx_runs` (`column` is one of
    /// this crate's names, never input), `None` when it is NULL; `what`
    /// names it in errors.
    async fn run_json<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        run_id: &str,
        column: &'static str,
        what: &'static str,
    ) -> Result<Option<T>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading {what} of run `{run_id}`"),
                    &format!("SELECT {column} FROM ctx_runs WHERE run_id = $1"),
                    &[&run_id],
                )
                .await?;
            let Some(row) = rows.first() else {
                return Err(shared.no_run(&run_id));
            };
            let text: Option<String> = row.get(0);
            text.map(|t| serde_json::from_str(&t))
                .transpose()
                .map_err(|e| shared.corrupt(&run_id, what.into(), e))
        })
        .await
    }

    /// Every run, newest first (or the one `run_id`), with its counts.
    pub async fn runs(&self, run_id: Option<&str>) -> Result<Vec<RunInfo>> {
        let run_id = run_id.map(str::to_string);
        let shared = Arc::clone(&self.shared);
        let want = run_id.clone();
        let runs = self
            .call(async move {
                let rows = shared
                    .query(
                        &|| "listing runs".into(),
                        concat!(
                            "SELECT r.run_id, ", utc!("r.created_at"), ", ", utc!("r.finished_at"), ",
                                    r.open, r.engine, r.plan_source, r.plan_hash, r.task_count, r.late_commits,
                                    count(*) FILTER (WHERE t.status = 'pending'),
                                    count(*) FILTER (WHERE t.status = 'in_progress'),
                                    count(*) FILTER (WHERE t.status = 'completed'),
                                    count(*) FILTER (WHERE t.status = 'failed'),
                                    count(*) FILTER (WHERE t.status = 'skipped'),
                                    coalesce(sum(greatest(t.attempt - 1, 0)), 0)::bigint
                               FROM ctx_runs r LEFT JOIN ctx_tasks t ON t.run_id = r.run_id
                              WHERE $1::text IS NULL OR r.run_id = $1
                              GROUP BY r.run_id
                              ORDER BY r.created_at DESC, r.run_id DESC"
                        ),
                        &[&run_id],
                    )
                    .await?;
                let count = |r: &tokio_postgres::Row, i: usize| {
                    usize::try_from(r.get::<_, i64>(i)).unwrap_or(0)
                };
                Ok(rows
                    .iter()
                    .map(|r| RunInfo {
                        run_id: r.get(0),
                        created_at: r.get(1),
                        finished_at: r.get(2),
                        open: r.get(3),
                        engine: r.get(4),
                        plan_source: r.get(5),
                        plan_hash: r.get(6),
                        task_count: usize::try_from(r.get::<_, i32>(7)).unwrap_or(0),
                        late_commits: r.get(8),
                        counts: StatusCounts {
                            pending: count(r, 9),
                            in_progress: count(r, 10),
                            completed: count(r, 11),
                            failed: count(r, 12),
                            skipped: count(r, 13),
                        },
                        reclaims: r.get(14),
                    })
                    .collect::<Vec<_>>())
            })
            .await?;
        if let Some(id) = want
            && runs.is_empty()
        {
            return Err(self.shared.no_run(&id));
        }
        Ok(runs)
    }

    /// Every task of `run_id`, in plan order, with its latest result.
    pub async fn tasks(&self, run_id: &str) -> Result<Vec<TaskRow>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move { tasks(&shared, &run_id).await })
            .await
    }

    /// The latest results of `ids` in `run_id` (those that have one),
    /// by task id.
    pub async fn results_of(
        &self,
        run_id: &str,
        ids: &[String],
    ) -> Result<Vec<TaskExecutionResult>> {
        let (run_id, ids) = (run_id.to_string(), ids.to_vec());
        let shared = Arc::clone(&self.shared);
        self.call(async move { results(&shared, &run_id, Some(ids)).await })
            .await
    }

    /// The results a resume kept aside (schema 6) for `run_id`'s tasks
    /// that wait, pending or claimed, for their claim to decide whether
    /// the items they receive came back unchanged: what a later resume
    /// reads as their latest result ([`PgRunView`](crate::PgRunView)).
    pub async fn kept(&self, run_id: &str) -> Result<Vec<TaskExecutionResult>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.call(async move {
            let rows = shared
                .query(
                    &|| format!("reading the kept results of run `{run_id}`"),
                    "SELECT task_id, kept_json FROM ctx_tasks
                      WHERE run_id = $1 AND kept_json IS NOT NULL
                        AND status IN ('pending', 'in_progress')
                      ORDER BY task_id",
                    &[&run_id],
                )
                .await?;
            results_of_rows(&shared, &run_id, &rows)
        })
        .await
    }

    pub(crate) fn blocking_results(
        &self,
        run_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<TaskExecutionResult>> {
        let run_id = run_id.to_string();
        let shared = Arc::clone(&self.shared);
        self.blocking(async move { results(&shared, &run_id, ids).await })
    }
}

async fn results(
    shared: &Shared,
    run_id: &str,
    ids: Option<Vec<String>>,
) -> Result<Vec<TaskExecutionResult>> {
    let rows = shared
        .query(
            &|| format!("reading results of run `{run_id}`"),
            "SELECT task_id, result_json FROM ctx_tasks
              WHERE run_id = $1 AND result_json IS NOT NULL
                AND ($2::text[] IS NULL OR task_id = ANY($2))
              ORDER BY task_id",
            &[&run_id, &ids],
        )
        .await?;
    results_of_rows(shared, run_id, &rows)
}

/// The results in `rows` of `(task_id, result_json)`, a row that does not
/// parse reported as a corrupt store naming its run and task.
pub(crate) fn results_of_rows(
    shared: &Shared,
    run_id: &str,
    rows: &[tokio_postgres::Row],
) -> Result<Vec<TaskExecutionResult>> {
    rows.iter()
        .map(|r| {
            let id: String = r.get(0);
            let text: String = r.get(1);
            serde_json::from_str(&text)
                .map_err(|e| shared.corrupt(run_id, format!("task `{id}`"), e))
        })
        .collect()
}

async fn tasks(shared: &Shared, run_id: &str) -> Result<Vec<TaskRow>> {
    let rows = shared
        .query(
            &|| format!("reading tasks of run `{run_id}`"),
            concat!(
                "SELECT task_id, status, attempt, result_json, ",
                utc!("started_at"),
                ", ",
                utc!("finished_at"),
                ", claim_seq, engine, status = 'completed' AND kept_json IS NOT NULL
                 FROM ctx_tasks WHERE run_id = $1 ORDER BY idx"
            ),
            &[&run_id],
        )
        .await?;
    if rows.is_empty() {
        // A run of no tasks still exists; a missing run is an error.
        let exists = shared
            .query(
                &|| format!("reading run `{run_id}`"),
                "SELECT 1 FROM ctx_runs WHERE run_id = $1",
                &[&run_id],
            )
            .await?;
        if exists.is_empty() {
            return Err(shared.no_run(run_id));
        }
    }
    rows.iter()
        .map(|r| {
            let task_id: String = r.get(0);
            let status: String = r.get(1);
            let json: Option<String> = r.get(3);
            let result = json
                .map(|j| serde_json::from_str::<TaskExecutionResult>(&j))
                .transpose()
                .map_err(|e| shared.corrupt(run_id, format!("task `{task_id}`"), e))?;
            Ok(TaskRow {
                status: parse_status(&status),
                task_id,
                attempt: r.get(2),
                result,
                started_at: r.get(4),
                finished_at: r.get(5),
                claim_seq: r.get(6),
                engine: r.get(7),
                taken: r.get(8),
            })
        })
        .collect()
}
