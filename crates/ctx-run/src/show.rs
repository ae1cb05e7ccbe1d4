//! `ctx runs show`: one stored run, or one of its tasks, as text or JSON.
//!
//! Both stores are read through the seam they share
//! ([`RunHistory`]), so a run directory and a
//! shared PostgreSQL run show the same table, the same task page (prompt,
//! output, summary, checks, history, engine attempts) and the same JSON
//! keys. What only one kind of store knows comes in as [`StoreFacts`]: a
//! run directory's sessions, a shared run's claims and refused late
//! commits.
//!
//! The text is for people: control characters in ids, goals and errors are
//! escaped, so a stored value cannot move the cursor or clear the screen of
//! whoever reads it.

use std::collections::HashMap;

use ctx_cost::Usd;
use ctx_model::{Plan, ResultMetadata, TaskExecutionResult, TaskStatus};
use ctx_store::{ResultRecord, RunHeader, RunHistory, RunState, StatusCounts, StoreError};
use ctx_store_sqlite::SessionInfo;
use ctx_table::{printable, printable_lines};
use serde::Serialize;

use crate::TaskJson;
use crate::cache_figures::{self, CacheFigures};
use crate::map_counts::MapCounts;

/// What one kind of store knows about a run beyond the shared seam.
#[derive(Debug, Clone)]
pub enum StoreFacts {
    /// A run directory: where it is, when it was created, its sessions
    /// (the first run and each resume).
    Local {
        /// The run directory.
        dir: String,
        /// When the run was created (RFC 3339, UTC).
        created_at: String,
        /// Every session, first to last.
        sessions: Vec<SessionInfo>,
    },
    /// A run of a shared store, executed by workers under claims.
    Shared {
        /// When the run was registered (RFC 3339, UTC).
        created_at: String,
        /// Results refused because their lease had lapsed.
        late_commits: i64,
        /// Claims beyond the first, summed over tasks.
        reclaims: i64,
        /// Each task's claims so far, by task id.
        claims: HashMap<String, i32>,
    },
}

impl StoreFacts {
    fn created_at(&self) -> &str {
        match self {
            StoreFacts::Local { created_at, .. } | StoreFacts::Shared { created_at, .. } => {
                created_at
            }
        }
    }

    fn claims(&self, task_id: &str) -> Option<i32> {
        match self {
            StoreFacts::Local { .. } => None,
            StoreFacts::Shared { claims, .. } => Some(claims.get(task_id).copied().unwrap_or(0)),
        }
    }
}

/// A stored run as `ctx runs show RUN` shows it.
#[derive(Debug, Clone)]
pub struct RunShow {
    header: RunHeader,
    plan: Plan,
    /// The plan's tasks in plan order, each with its latest result.
    tasks: Vec<(String, Option<ResultRecord>)>,
    spent: Usd,
    facts: StoreFacts,
    /// The files the run published (`ctx run --publish-root`).
    published: Vec<ctx_store::Published>,
    /// Every publish and undo of the run, oldest first: the manifest.
    publishes: Vec<ctx_store::PublishEvent>,
    /// The cheaper tier of its period budget the run ran on.
    fallback: Option<ctx_model::FallbackChoice>,
    /// Every decision on its approval gates, oldest first.
    decisions: Vec<ctx_model::approval::Decision>,
    /// The gates that wait for a decision now.
    waiting: Vec<crate::gates::Waiting>,
    /// Its provider batches (`ctx run --batch`), oldest first.
    batches: Vec<ctx_store::RunBatch>,
}

impl RunShow {
    /// Reads the run: its header, plan, every plan task's latest result
    /// (results of tasks no longer in the plan are left out) and what it
    /// spent over its whole history.
    pub fn read(view: &dyn RunHistory, facts: StoreFacts) -> Result<RunShow, StoreError> {
        let header = view.header()?;
        let plan = view.plan()?;
        let mut latest: HashMap<String, ResultRecord> = view
            .latest()?
            .into_iter()
            .map(|r| (r.result.task_id.clone(), r))
            .collect();
        let mut tasks = Vec::with_capacity(plan.sub_tasks.len());
        for t in &plan.sub_tasks {
            let own = latest.remove(&t.id);
            // A map task's items follow it, in item order.
            let items = if t.map.is_some() {
                take_items(&t.id, own.as_ref(), &mut latest)
            } else {
                Vec::new()
            };
            tasks.push((t.id.clone(), own));
            tasks.extend(
                items
                    .into_iter()
                    .map(|r| (r.result.task_id.clone(), Some(r))),
            );
        }
        let spent = crate::spent(view)?;
        let published = view.published()?;
        let publishes = view.publish_events()?;
        let fallback = view.fallback()?;
        let decisions = view.decisions()?;
        let results: Vec<_> = tasks
            .iter()
            .filter_map(|(_, r)| r.as_ref().map(|r| r.result.clone()))
            .collect();
        let waiting = crate::gates::waiting_in(&plan, &results, &decisions, &header.run_id);
        let batches = view.batches()?;
        Ok(RunShow {
            header,
            plan,
            tasks,
            spent,
            facts,
            published,
            publishes,
            fallback,
            decisions,
            waiting,
            batches,
        })
    }

    /// The plan's tasks per status; a task without a stored result is
    /// pending.
    fn counts(&self) -> StatusCounts {
        let mut c = StatusCounts::default();
        for (_, r) in &self.tasks {
            c.add(r.as_ref().map_or(TaskStatus::Pending, |r| r.result.status));
        }
        c
    }

    /// Each map task's items counted, by map task id.
    fn map_counts(&self) -> std::collections::BTreeMap<String, MapCounts> {
        MapCounts::of_run(
            self.tasks
                .iter()
                .filter_map(|(_, r)| r.as_ref().map(|r| &r.result)),
        )
    }

    /// The run's OpenTelemetry trace id: derived from the run id, so a run
    /// made before tracing existed has one too, the same its export gets
    /// (docs/tracing.md).
    fn trace_id(&self) -> String {
        ctx_store::RunTraceIds::of(&self.header.run_id).trace_id_hex()
    }

    /// The stored metadata of every task that has a result.
    fn metadata(&self) -> impl Iterator<Item = &ResultMetadata> {
        self.tasks
            .iter()
            .filter_map(|(_, r)| r.as_ref().map(|r| &r.result.metadata))
    }

    /// The run's prompt-cache figures: its tasks' latest results summed.
    fn cache(&self) -> CacheFigures {
        CacheFigures::total(self.metadata())
    }

    /// The object `ctx runs show RUN --format json` prints, keys in the
    /// order the `RunJson` struct below declares them.
    pub fn json(&self) -> impl Serialize + '_ {
        let maps = self.map_counts();
        let tasks = self
            .tasks
            .iter()
            .map(|(id, r)| {
                let m = r.as_ref().map(|r| &r.result.metadata);
                TaskRowJson {
                    task_id: id,
                    status: r.as_ref().map_or("pending", |r| r.result.status.as_str()),
                    map: maps.get(id.as_str()).copied(),
                    prompt_tokens: m.and_then(|m| m.prompt_tokens),
                    execution_time_ms: m.and_then(|m| m.execution_time_ms),
                    cached: m.is_some_and(|m| m.cached),
                    cost_usd: m.and_then(|m| m.cost_usd),
                    cache: m.map(CacheFigures::of).unwrap_or_default(),
                    recorded_at: r.as_ref().map(|r| r.recorded_at.as_str()),
                    error: r.as_ref().and_then(|r| r.result.error.as_deref()),
                    place: match self.facts.claims(id) {
                        Some(claims) => TaskPlaceJson::Shared { claims },
                        None => TaskPlaceJson::Local {
                            session: r.as_ref().map(|r| r.session),
                        },
                    },
                }
            })
            .collect();
        RunJson {
            id: &self.header.run_id,
            created_at: self.facts.created_at(),
            trace_id: self.trace_id(),
            state: self.header.state.as_str(),
            goal: self.plan.goal.as_deref(),
            counts: self.counts(),
            spent_usd: self.spent,
            cache: self.cache(),
            place: match &self.facts {
                StoreFacts::Local { dir, sessions, .. } => RunPlaceJson::Local { dir, sessions },
                StoreFacts::Shared {
                    late_commits,
                    reclaims,
                    ..
                } => RunPlaceJson::Shared {
                    store: &self.header.location,
                    finished_at: self.header.finished_at.as_deref(),
                    late_commits: *late_commits,
                    reclaims: *reclaims,
                },
            },
            published: &self.published,
            publishes: &self.publishes,
            decisions: &self.decisions,
            waiting: &self.waiting,
            fallback: self
                .fallback
                .as_ref()
                .map(crate::period_budget::FallbackJson::of),
            batches: &self.batches,
            tasks,
        }
    }

    /// The text `ctx runs show RUN` prints: the run, its sessions (or
    /// claims), and one row per plan task. The cost column and the `spent`
    /// line appear once the run has spent anything.
    pub fn text(&self) -> String {
        let c = self.counts();
        let mut out = String::new();
        out.push_str(&format!("run      {}\n", self.header.run_id));
        match &self.facts {
            StoreFacts::Local { dir, .. } => out.push_str(&format!("dir      {dir}\n")),
            StoreFacts::Shared { .. } => {
                out.push_str(&format!("store    {}\n", self.header.location));
            }
        }
        out.push_str(&format!("created  {}\n", self.facts.created_at()));
        out.push_str(&format!("trace    {}\n", self.trace_id()));
        out.push_str(&format!("state    {}\n", self.header.state));
        if let Some(goal) = &self.plan.goal {
            out.push_str(&format!("goal     {}\n", printable(goal)));
        }
        out.push_str(&format!(
            "tasks    {} total: {} completed, {} failed, {} skipped, {} in progress, {} pending\n",
            c.total(),
            c.completed,
            c.failed,
            c.skipped,
            c.in_progress,
            c.pending
        ));
        // A run that spent nothing (a dry run) keeps the table it always had.
        let show_cost = self.spent > Usd::ZERO;
        if show_cost {
            out.push_str(&format!(
                "spent    {} {}\n",
                ctx_deps::dollars(self.spent),
                match self.facts {
                    StoreFacts::Local { .. } => "over all sessions",
                    StoreFacts::Shared { .. } => "over every claim (refused late commits included)",
                }
            ));
        }
        if cache_figures::any_usage(self.metadata()) {
            out.push_str(&format!("cache    {}\n", self.cache().text()));
        }
        match &self.facts {
            StoreFacts::Local { sessions, .. } => {
                out.push_str("\nsessions\n");
                for s in sessions {
                    out.push_str(&session_line(s, self.header.state));
                }
            }
            StoreFacts::Shared {
                late_commits,
                reclaims,
                ..
            } => {
                out.push_str(&format!(
                    "claims   reclaims {reclaims} (lapsed lease or release), late commits refused {late_commits}\n"
                ));
            }
        }
        out.push('\n');
        out.push_str(&self.table(show_cost));
        if !self.published.is_empty() {
            out.push('\n');
            out.push_str(&crate::publish::published_text(&self.published));
        }
        if !self.publishes.is_empty() {
            out.push('\n');
            out.push_str(&crate::publish::manifest_text(&self.publishes));
        }
        if let Some(f) = &self.fallback {
            out.push('\n');
            out.push_str(&crate::period_budget::fallback_text(f));
        }
        out.push_str(&crate::gates::gates_text(&self.decisions, &self.waiting));
        if !self.batches.is_empty() {
            out.push('\n');
            out.push_str(&crate::batches::batches_text(&self.batches));
        }
        out
    }

    /// The status table of [`text`](Self::text): one row per plan task
    /// (a map task's items after it), with the CLAIMS column on a shared
    /// store, ITEMS when the run has a map task and COST when `show_cost`.
    fn table(&self, show_cost: bool) -> String {
        let shared = matches!(self.facts, StoreFacts::Shared { .. });
        // A run with a map task has an ITEMS column: the map's item count
        // and failed items, on its row.
        let maps = self.map_counts();
        let mut header = vec!["TASK", "STATUS"];
        let mut right = vec![false, false];
        if !maps.is_empty() {
            header.push("ITEMS");
            right.push(true);
        }
        if shared {
            header.push("CLAIMS");
            right.push(true);
        }
        header.extend(["PROMPT TOKENS", "TIME"]);
        right.extend([true, true]);
        if show_cost {
            header.push("COST");
            right.push(true);
        }
        header.extend(["CACHED", "ERROR"]);
        right.extend([false, false]);
        let rows: Vec<Vec<String>> = self
            .tasks
            .iter()
            .map(|(id, r)| {
                let meta = r.as_ref().map(|r| &r.result.metadata);
                let mut row = vec![
                    printable(id),
                    r.as_ref()
                        .map_or_else(|| "pending".into(), |r| r.result.status.to_string()),
                ];
                if !maps.is_empty() {
                    row.push(
                        maps.get(id.as_str())
                            .map(MapCounts::text)
                            .unwrap_or_default(),
                    );
                }
                if let Some(n) = self.facts.claims(id) {
                    row.push(n.to_string());
                }
                row.push(
                    meta.and_then(|m| m.prompt_tokens)
                        .map_or_else(|| "-".into(), |t| t.to_string()),
                );
                row.push(
                    meta.and_then(|m| m.execution_time_ms)
                        .map_or_else(|| "-".into(), |ms| format!("{ms} ms")),
                );
                if show_cost {
                    row.push(
                        meta.and_then(|m| m.cost_usd)
                            .map_or_else(|| "-".into(), ctx_deps::dollars),
                    );
                }
                row.push(
                    if meta.is_some_and(|m| m.cached) {
                        "yes"
                    } else {
                        ""
                    }
                    .to_string(),
                );
                row.push(first_line(
                    r.as_ref().and_then(|r| r.result.error.as_deref()),
                ));
                row
            })
            .collect();
        ctx_table::render(&header, &right, &rows)
    }
}

fn session_line(s: &SessionInfo, state: RunState) -> String {
    format!(
        "  #{} {:<6}  {} -> {}  {}  engine {}  ctx {}  pid {}{}\n",
        s.seq,
        s.kind,
        s.started_at,
        s.finished_at.as_deref().unwrap_or("-"),
        s.outcome
            .as_deref()
            .unwrap_or(if state == RunState::Running {
                "running"
            } else {
                "no end recorded"
            }),
        s.engine,
        s.ctx_version,
        s.pid,
        s.plan_source
            .as_ref()
            .map(|p| format!("  plan {}", printable(p)))
            .unwrap_or_default()
    )
}

/// `ctx runs show RUN --format json`. Its keys, in this order: the run's
/// own, what its store knows, then the tasks (the long part) last.
#[derive(Serialize)]
struct RunJson<'a> {
    id: &'a str,
    created_at: &'a str,
    /// The run's OpenTelemetry trace id (32 hex digits).
    trace_id: String,
    state: &'a str,
    goal: Option<&'a str>,
    counts: StatusCounts,
    spent_usd: Usd,
    /// The tasks' prompt-cache figures summed (null: no task reported).
    #[serde(flatten)]
    cache: CacheFigures,
    #[serde(flatten)]
    place: RunPlaceJson<'a>,
    /// What the run published, as `ctx run --format json` lists it; left
    /// out when nothing was.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    published: &'a [ctx_store::Published],
    /// Every publish and undo, oldest first, each with its manifest;
    /// left out when there was none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    publishes: &'a [ctx_store::PublishEvent],
    /// Every decision on the run's approval gates, oldest first; left
    /// out when there was none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    decisions: &'a [ctx_model::approval::Decision],
    /// The gates that wait for a decision now, each with the command
    /// that approves it; left out when none waits.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    waiting: &'a [crate::gates::Waiting],
    /// The cheaper tier the run ran on, as `ctx run --format json` gives
    /// it; left out on the standard tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback: Option<crate::period_budget::FallbackJson>,
    /// The run's provider batches, oldest first; left out when it sent
    /// none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    batches: &'a [ctx_store::RunBatch],
    tasks: Vec<TaskRowJson<'a>>,
}

/// What only one kind of store shows of a run.
#[derive(Serialize)]
#[serde(untagged)]
enum RunPlaceJson<'a> {
    Local {
        dir: &'a str,
        sessions: &'a [SessionInfo],
    },
    Shared {
        store: &'a str,
        finished_at: Option<&'a str>,
        late_commits: i64,
        reclaims: i64,
    },
}

/// One task's row of [`RunJson`].
#[derive(Serialize)]
struct TaskRowJson<'a> {
    task_id: &'a str,
    status: &'a str,
    /// A map task's items counted; left out for any other task.
    #[serde(skip_serializing_if = "Option::is_none")]
    map: Option<MapCounts>,
    prompt_tokens: Option<usize>,
    execution_time_ms: Option<u64>,
    cached: bool,
    cost_usd: Option<Usd>,
    /// `cached_tokens`, `cache_write_tokens`, `cache_saving_usd`: null
    /// when not reported.
    #[serde(flatten)]
    cache: CacheFigures,
    recorded_at: Option<&'a str>,
    error: Option<&'a str>,
    #[serde(flatten)]
    place: TaskPlaceJson,
}

/// A task's session (run directory) or claim count (shared store).
#[derive(Serialize)]
#[serde(untagged)]
enum TaskPlaceJson {
    Local { session: Option<i64> },
    Shared { claims: i32 },
}

/// `ctx runs show RUN --task ID --format json`.
#[derive(Serialize)]
struct TaskPageJson<'a> {
    run: &'a str,
    task_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    claims: Option<i32>,
    prompt_hash: Option<&'a str>,
    result: Option<TaskJson<'a>>,
    /// A map task's items counted; left out for any other task.
    #[serde(skip_serializing_if = "Option::is_none")]
    map: Option<MapCounts>,
    /// A map task's items: id and status, in item order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    items: Vec<ItemJson<'a>>,
    history: Vec<HistoryJson<'a>>,
}

/// One item of a map task's page.
#[derive(Serialize)]
struct ItemJson<'a> {
    task_id: &'a str,
    status: TaskStatus,
}

/// One stored result of [`TaskPageJson`]'s history.
#[derive(Serialize)]
struct HistoryJson<'a> {
    seq: i64,
    recorded_at: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<i64>,
    engine: &'a str,
    prompt_hash: Option<&'a str>,
    result: TaskJson<'a>,
}

/// The run's stored items of map task `map_id` (`TASK[i]`), taken out of
/// `latest`, in item order: those below the count `map_row` (the map
/// task's latest result) records, not those an earlier, longer list left.
fn take_items(
    map_id: &str,
    map_row: Option<&ResultRecord>,
    latest: &mut HashMap<String, ResultRecord>,
) -> Vec<ResultRecord> {
    let map_row = map_row.map(|r| &r.result);
    let mut ids: Vec<(usize, String)> = latest
        .keys()
        .filter_map(|id| {
            let (m, i) = ctx_model::map::parse_item_id(id)?;
            (m == map_id && ctx_model::map::is_current_item(map_row, i)).then(|| (i, id.clone()))
        })
        .collect();
    ids.sort_unstable();
    ids.into_iter()
        .filter_map(|(_, id)| latest.remove(&id))
        .collect()
}

/// One task of a stored run as `ctx runs show RUN --task ID` shows it.
#[derive(Debug, Clone)]
pub struct TaskShow {
    run_id: String,
    task_id: String,
    latest: Option<ResultRecord>,
    history: Vec<ResultRecord>,
    /// The task's claims so far, in a shared store (which has no
    /// sessions).
    claims: Option<i32>,
    /// A map task's items, in item order, with their latest status.
    items: Vec<(String, TaskStatus)>,
    /// A map task's items counted ([`MapCounts`]); `None` for any other
    /// task.
    map: Option<MapCounts>,
}

impl TaskShow {
    /// Reads `task_id` of the run: its latest result and every result
    /// recorded for it. `None` when the task is neither in the plan nor
    /// stored. `claims` is the task's claim count in a shared store
    /// ([`StoreFacts::Shared`]), `None` for a run directory.
    pub fn read(
        view: &dyn RunHistory,
        task_id: &str,
        claims: Option<i32>,
    ) -> Result<Option<TaskShow>, StoreError> {
        let header = view.header()?;
        let mut all: HashMap<String, ResultRecord> = view
            .latest()?
            .into_iter()
            .map(|r| (r.result.task_id.clone(), r))
            .collect();
        let latest = all.remove(task_id);
        let plan = view.plan()?;
        let task = plan.task(task_id);
        if latest.is_none() && task.is_none() {
            return Ok(None);
        }
        let item_records = match task {
            Some(t) if t.map.is_some() => take_items(task_id, latest.as_ref(), &mut all),
            _ => Vec::new(),
        };
        // Counted by the one rule every output of a run uses.
        let map = task.and_then(|t| t.map.as_ref()).and_then(|_| {
            let results = latest.iter().chain(&item_records).map(|r| &r.result);
            MapCounts::of_run(results).remove(task_id)
        });
        let items = item_records
            .into_iter()
            .map(|r| (r.result.task_id, r.result.status))
            .collect();
        Ok(Some(TaskShow {
            items,
            map,
            run_id: header.run_id,
            task_id: task_id.to_string(),
            latest,
            history: view.history(task_id)?,
            claims,
        }))
    }

    /// The object `ctx runs show RUN --task ID --format json` prints. A
    /// shared run's task has `claims`, and its history no `session`.
    pub fn json(&self) -> impl Serialize + '_ {
        let history = self
            .history
            .iter()
            .map(|h| HistoryJson {
                seq: h.seq,
                recorded_at: &h.recorded_at,
                session: self.claims.is_none().then_some(h.session),
                engine: &h.engine,
                prompt_hash: h.prompt_hash.as_deref(),
                result: TaskJson::of(&h.result),
            })
            .collect();
        TaskPageJson {
            run: &self.run_id,
            task_id: &self.task_id,
            claims: self.claims,
            prompt_hash: self.latest.as_ref().and_then(|r| r.prompt_hash.as_deref()),
            result: self.latest.as_ref().map(|r| TaskJson::of(&r.result)),
            map: self.map,
            items: self
                .items
                .iter()
                .map(|(task_id, status)| ItemJson {
                    task_id,
                    status: *status,
                })
                .collect(),
            history,
        }
    }

    /// A map task's "Items" section: the counts, then each item and its
    /// status; empty for any other task.
    fn items_text(&self) -> String {
        if self.map.is_none() && self.items.is_empty() {
            return String::new();
        }
        let mut parts = Vec::new();
        if let Some(map) = &self.map {
            parts.push(format!(
                "{}: {} completed, {} failed",
                ctx_model::display::count(map.items, "item", "items"),
                map.completed,
                map.failed
            ));
        }
        if !self.items.is_empty() {
            let rows: Vec<Vec<String>> = self
                .items
                .iter()
                .map(|(id, status)| vec![printable(id), status.to_string()])
                .collect();
            let table = ctx_table::render(&["TASK", "STATUS"], &[false, false], &rows);
            parts.push(table.trim_end_matches('\n').to_string());
        }
        format!("\n\n## Items\n\n{}", parts.join("\n\n"))
    }

    /// The text `ctx runs show RUN --task ID` prints: status, model,
    /// tokens, time, cost, prompt hash, error, the exact prompt, the
    /// output, the summary, the checks, the store history and the engine's
    /// attempts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!("run      {}\n", self.run_id));
        out.push_str(&format!("task     {}\n", printable(&self.task_id)));
        let Some(rec) = &self.latest else {
            out.push_str("status   pending (never started)\n");
            return out;
        };
        let r = &rec.result;
        let m = &r.metadata;
        out.push_str(&format!(
            "status   {}{}\n",
            r.status,
            if m.cached { " (cached)" } else { "" }
        ));
        match self.claims {
            None => out.push_str(&format!(
                "stored   {} (session {}, engine {})\n",
                rec.recorded_at, rec.session, rec.engine
            )),
            Some(n) => out.push_str(&format!(
                "stored   {} (claim {n}, engine {})\n",
                rec.recorded_at, rec.engine
            )),
        }
        if let Some(model) = &m.model {
            out.push_str(&format!("model    {}\n", printable(model)));
        }
        if let Some(t) = m.prompt_tokens {
            out.push_str(&format!(
                "prompt   {t} tokens{}\n",
                m.tokenizer
                    .as_ref()
                    .map(|k| format!(" ({k})"))
                    .unwrap_or_default()
            ));
        }
        if let Some(u) = &m.tokens_used {
            out.push_str(&format!(
                "usage    {} prompt + {} completion = {} tokens\n",
                u.prompt_tokens, u.completion_tokens, u.total_tokens
            ));
        }
        if m.tokens_used.is_some() || m.cache_saving_usd.is_some() {
            out.push_str(&format!("cache    {}\n", CacheFigures::of(m).text()));
        }
        if let Some(ms) = m.execution_time_ms {
            out.push_str(&format!("time     {ms} ms\n"));
        }
        if let Some(cost) = m.cost_usd {
            out.push_str(&format!("cost     {}\n", ctx_deps::dollars(cost)));
        }
        if let Some(h) = &rec.prompt_hash {
            out.push_str(&format!("sha256   {h}\n"));
        }
        // The error, prompt and output are a server's, a command's and a
        // model's text: escaped for the terminal line by line.
        if let Some(e) = &r.error {
            out.push_str(&format!("\n## Error\n\n{}\n", printable_lines(e)));
        }
        out.push_str("\n## Prompt\n\n");
        out.push_str(&printable_lines(
            r.prompt
                .as_deref()
                .unwrap_or("(none: the task never got one)"),
        ));
        out.push_str("\n\n## Output\n\n");
        out.push_str(&if r.output.is_empty() {
            "(empty)".to_string()
        } else {
            printable_lines(&r.output)
        });
        if let Some(text) = cleaned_section(r) {
            out.push_str(&text);
        }
        if let Some(text) = summary_section(r) {
            out.push_str(&text);
        }
        if !m.checks.is_empty() {
            out.push_str(&checks_text(m));
        }
        out.push_str(&self.items_text());
        out.push_str("\n\n## History\n\n");
        out.push_str(&self.history_table());
        if !m.attempts.is_empty() {
            out.push_str("\n## Engine attempts\n\n");
            let rows: Vec<Vec<String>> = m
                .attempts
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    vec![
                        // Numbered across check attempts: each is a request
                        // whose engine numbers its own calls from 1.
                        (i + 1).to_string(),
                        a.outcome.to_string(),
                        format!("{} ms", a.duration_ms),
                        a.backoff_ms.map_or_else(String::new, |b| format!("{b} ms")),
                        first_line(a.error.as_deref()),
                    ]
                })
                .collect();
            out.push_str(&ctx_table::render(
                &["#", "OUTCOME", "TIME", "BACKOFF", "ERROR"],
                &[true, false, true, true, false],
                &rows,
            ));
        }
        out
    }

    /// Every recorded result, oldest first: a run directory's rows with
    /// their session, a shared run's committed (and refused) results.
    fn history_table(&self) -> String {
        let local = self.claims.is_none();
        let rows: Vec<Vec<String>> = self
            .history
            .iter()
            .map(|h| {
                let mut row = vec![h.seq.to_string()];
                if local {
                    row.push(h.session.to_string());
                }
                row.extend([
                    h.recorded_at.clone(),
                    h.result.status.to_string(),
                    first_line(h.result.error.as_deref()),
                ]);
                row
            })
            .collect();
        if local {
            ctx_table::render(
                &["SEQ", "SESSION", "RECORDED", "STATUS", "ERROR"],
                &[true, true, false, false, false],
                &rows,
            )
        } else {
            ctx_table::render(
                &["SEQ", "RECORDED", "STATUS", "ERROR"],
                &[true, false, false, false],
                &rows,
            )
        }
    }
}

/// A stored result as `ctx run --format json` prints a task.
/// `## Cleaned`: what the task's `output` block removed from the output
/// as the engine wrote it (the count, then each line, escaped for the
/// terminal); `None` when nothing was removed.
fn cleaned_section(r: &TaskExecutionResult) -> Option<String> {
    let raw = r.raw_output.as_deref()?;
    let removed = ctx_model::output_cleaning::removed_lines(raw, &r.output);
    let mut out = format!(
        "\n\n## Cleaned\n\nthe output block removed {} from the raw output:\n",
        ctx_model::display::count(removed.len(), "line", "lines")
    );
    for line in removed {
        out.push_str(&format!("- {}\n", printable(line)));
    }
    Some(out.trim_end_matches('\n').to_string())
}

/// `## Summary`: the `llm` summary (or summaries, one per dependent) of a
/// task's output, each with its call's model, usage, time and whether it
/// fell back to `truncate`. `None` when no summary was made.
fn summary_section(r: &TaskExecutionResult) -> Option<String> {
    let record = r.metadata.summary.as_ref();
    if record.is_none() && r.summary.is_none() {
        return None;
    }
    let mut out = String::from("\n\n## Summary\n");
    let Some(record) = record else {
        out.push('\n');
        out.push_str(r.summary.as_deref().unwrap_or_default());
        return Some(out);
    };
    for c in &record.calls {
        out.push('\n');
        let whom = c.dependent.as_deref().map_or_else(
            || "every dependent".to_string(),
            |d| format!("task {}", printable(d)),
        );
        let usage = c.tokens_used.map_or_else(String::new, |u| {
            format!(
                ", {} prompt + {} completion tokens",
                u.prompt_tokens, u.completion_tokens
            )
        });
        out.push_str(&format!(
            "for {whom}: model {}, {} ms{usage}{}{}\n",
            c.model.as_deref().unwrap_or("(engine default)"),
            c.execution_time_ms,
            if c.cached { ", cached" } else { "" },
            if c.cut {
                ", cut at summary_max_tokens"
            } else {
                ""
            },
        ));
        if c.fallback {
            out.push_str(&format!(
                "fell back to truncate: {}\n",
                printable_lines(c.error.as_deref().unwrap_or("the call failed"))
            ));
        } else {
            let text = c
                .text
                .as_deref()
                .or(r.summary.as_deref())
                .unwrap_or("(empty)");
            out.push('\n');
            out.push_str(&printable_lines(text));
            out.push('\n');
        }
    }
    Some(out.trim_end().to_string())
}

/// The `## Checks` section: the final attempt's results, then one line per
/// attempt.
fn checks_text(m: &ResultMetadata) -> String {
    let mut out = format!(
        "\n\n## Checks (attempt {} of the task)\n\n",
        m.check_attempts.len().max(1)
    );
    for r in &m.checks {
        out.push_str(&check_line(r));
        out.push('\n');
    }
    if m.check_attempts.len() > 1 {
        out.push_str("\n## Check attempts\n\n");
        let rows: Vec<Vec<String>> = m
            .check_attempts
            .iter()
            .map(|a| {
                let passed = a.checks.iter().filter(|r| r.passed).count();
                let failed: Vec<&str> = a
                    .checks
                    .iter()
                    .filter(|r| !r.passed)
                    .map(|r| r.kind.as_str())
                    .collect();
                vec![
                    a.number.to_string(),
                    a.prompt_tokens.to_string(),
                    format!("{passed}/{}", a.checks.len()),
                    a.error
                        .as_deref()
                        .map(|e| printable(e.lines().next().unwrap_or_default()))
                        .unwrap_or_else(|| failed.join(", ")),
                ]
            })
            .collect();
        out.push_str(&ctx_table::render(
            &["#", "PROMPT TOKENS", "PASSED", "FAILED"],
            &[true, true, true, false],
            &rows,
        ));
        // What each attempt's failed checks found missing: the feedback
        // the next attempt was given, and for the last the task's failure.
        for a in &m.check_attempts {
            for r in a.checks.iter().filter(|r| !r.passed) {
                out.push_str(&format!("\nattempt {}: {}", a.number, check_line(r)));
            }
        }
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// `pass KIND: MESSAGE` or `FAIL KIND: MESSAGE (DETAIL)`: a failed check's
/// detail is what it found missing when its message is the plan's own.
fn check_line(r: &ctx_checks::CheckResult) -> String {
    let mut line = format!(
        "{} {}: {}",
        if r.passed { "pass" } else { "FAIL" },
        r.kind,
        printable(&r.message)
    );
    if let Some(detail) = r.detail.as_deref().filter(|_| !r.passed) {
        line.push_str(&format!(" ({})", printable(detail)));
    }
    line
}

/// The first line of an error, escaped; empty without one.
fn first_line(error: Option<&str>) -> String {
    error
        .and_then(|e| e.lines().next())
        .map(printable)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A stored run held in memory: what either store would answer.
    struct Stored {
        header: RunHeader,
        plan: Plan,
        latest: Vec<ResultRecord>,
        history: Vec<ResultRecord>,
    }

    impl RunHistory for Stored {
        fn header(&self) -> Result<RunHeader, StoreError> {
            Ok(self.header.clone())
        }
        fn plan(&self) -> Result<Plan, StoreError> {
            Ok(self.plan.clone())
        }
        fn latest(&self) -> Result<Vec<ResultRecord>, StoreError> {
            Ok(self.latest.clone())
        }
        fn history(&self, task_id: &str) -> Result<Vec<ResultRecord>, StoreError> {
            Ok(self
                .history
                .iter()
                .filter(|r| r.result.task_id == task_id)
                .cloned()
                .collect())
        }
    }

    fn record(seq: i64, result: serde_json::Value) -> ResultRecord {
        let result: TaskExecutionResult = serde_json::from_value(result).unwrap();
        ResultRecord {
            prompt_hash: result.prompt.as_ref().map(|_| "ab".repeat(32)),
            engine: "openai gpt-4o".into(),
            fingerprint: None,
            session: 1,
            recorded_at: format!("2026-12-01T10:00:0{seq}.000Z"),
            seq,
            started_seq: None,
            started_at: None,
            result,
        }
    }

    /// A run of three plan tasks: `a` completed (with a cost), `b` failed
    /// after a retried engine call, `c` never started; plus a result of a
    /// task the plan no longer has, which the page leaves out.
    fn stored(location: &str) -> Stored {
        let step = |id: &str, deps: &str| {
            format!(
                "  - id: {id}\n    description: step {id}\n    dependencies: [{deps}]\n    tool_or_prompt: {{name: inference, params: {{prompt: p}}}}\n"
            )
        };
        let yaml = format!(
            "schema_version: 1\ngoal: \"a goal\\e[2J\"\nsub_tasks:\n{}{}{}",
            step("a", ""),
            step("b", "a"),
            step("c", "b")
        );
        let plan = ctx_model::parse_plan(&yaml, "plan.yaml", ctx_model::PlanFormat::Yaml).unwrap();
        let a = record(
            1,
            json!({"task_id": "a", "status": "completed", "output": "A's output",
                "prompt": "the prompt of a",
                "metadata": {"prompt_tokens": 120, "execution_time_ms": 5, "cost_usd": 0.0125,
                    "model": "gpt-4o"}}),
        );
        let b_first = record(
            2,
            json!({"task_id": "b", "status": "in_progress", "prompt": "the prompt of b"}),
        );
        let b = record(
            3,
            json!({"task_id": "b", "status": "failed", "prompt": "the prompt of b",
                "error": "engine: HTTP 500\nsecond line",
                "metadata": {"prompt_tokens": 30, "execution_time_ms": 900,
                    "attempts": [
                        {"number": 1, "outcome": "http_error", "duration_ms": 400,
                         "backoff_ms": 250, "error": "HTTP 500"},
                        {"number": 2, "outcome": "http_error", "duration_ms": 250,
                         "error": "HTTP 500"}]}}),
        );
        let gone = record(
            4,
            json!({"task_id": "gone", "status": "completed", "output": "x"}),
        );
        Stored {
            header: RunHeader {
                run_id: "20261201T100000.000Z-0000abcd".into(),
                state: RunState::Failed,
                started_at: Some("2026-12-01T10:00:00.000Z".into()),
                finished_at: Some("2026-12-01T10:00:09.000Z".into()),
                plan_source: Some("plan.yaml".into()),
                location: location.into(),
            },
            plan,
            latest: vec![a.clone(), b.clone(), gone.clone()],
            history: vec![a, b_first, b, gone],
        }
    }

    fn local() -> StoreFacts {
        StoreFacts::Local {
            dir: ".ctx/runs/20261201T100000.000Z-0000abcd".into(),
            created_at: "2026-12-01T10:00:00.000Z".into(),
            sessions: vec![SessionInfo {
                seq: 1,
                kind: "run".into(),
                started_at: "2026-12-01T10:00:00.000Z".into(),
                finished_at: Some("2026-12-01T10:00:09.000Z".into()),
                outcome: Some("finished".into()),
                pid: 4242,
                ctx_version: "0.1.0".into(),
                engine: "openai gpt-4o".into(),
                plan_source: Some("plan.yaml".into()),
                plan_hash: "cd".repeat(32),
            }],
        }
    }

    fn shared() -> StoreFacts {
        StoreFacts::Shared {
            created_at: "2026-12-01T10:00:00.000Z".into(),
            late_commits: 1,
            reclaims: 2,
            claims: [("a".to_string(), 1), ("b".to_string(), 3)].into(),
        }
    }

    #[test]
    fn a_local_run() {
        let s = stored(".ctx/runs/20261201T100000.000Z-0000abcd/run.sqlite");
        let show = RunShow::read(&s, local()).unwrap();
        insta::assert_snapshot!(show.text());
        insta::assert_snapshot!(json_text(&show.json()));
    }

    /// The same facts in a shared store: the same table with a CLAIMS
    /// column, the claims line in place of sessions.
    #[test]
    fn a_shared_run() {
        let s = stored("postgres://ci@db:5432/ctx");
        let show = RunShow::read(&s, shared()).unwrap();
        insta::assert_snapshot!(show.text());
        insta::assert_snapshot!(json_text(&show.json()));
    }

    #[test]
    fn a_task_of_a_local_run() {
        let s = stored("run.sqlite");
        let show = TaskShow::read(&s, "b", None).unwrap().unwrap();
        insta::assert_snapshot!(show.text());
        insta::assert_snapshot!(json_text(&show.json()));
    }

    #[test]
    fn a_task_of_a_shared_run_names_its_claims_not_sessions() {
        let s = stored("postgres://ci@db:5432/ctx");
        let show = TaskShow::read(&s, "b", Some(3)).unwrap().unwrap();
        let text = show.text();
        assert!(text.contains("(claim 3, engine openai gpt-4o)"), "{text}");
        assert!(!text.contains("SESSION"), "{text}");
        assert!(text.contains("## Engine attempts"), "{text}");
        let v = value(&show.json());
        assert_eq!(v["claims"], 3);
        assert!(v["history"][0].get("session").is_none(), "{v}");
    }

    #[test]
    fn a_task_never_started_and_an_unknown_task() {
        let s = stored("run.sqlite");
        let c = TaskShow::read(&s, "c", None).unwrap().unwrap();
        assert!(c.text().ends_with("status   pending (never started)\n"));
        assert!(value(&c.json())["result"].is_null());
        assert!(TaskShow::read(&s, "zz", None).unwrap().is_none());
        // A task dropped from the plan still has its stored result.
        assert!(TaskShow::read(&s, "gone", None).unwrap().is_some());
    }

    fn value(v: &impl Serialize) -> Value {
        serde_json::to_value(v).unwrap()
    }

    fn json_text(v: &impl Serialize) -> String {
        crate::json_text(v).unwrap()
    }
}
