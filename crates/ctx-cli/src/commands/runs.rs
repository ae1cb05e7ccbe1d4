//! `ctx runs`: inspect, export and prune the runs stored under a store root
//! (`.ctx/runs` by default, `--root DIR` to change it).
//!
//! `RUN` is a run id (a directory under the root) or a run directory path,
//! in every subcommand. Nothing here takes a run's lock except `gc`, and
//! only for the moment it removes a run, so every command works on a run
//! that another `ctx run` is executing (it shows the last committed state).
//!
//! With `--store postgres://...` (or `CTX_STORE`) the runs are those of a
//! shared store. `report`, `export` (JSON and CSV) and what a run spent are
//! read through the shared [`RunHistory`] seam, so both stores give the
//! same page and the same bytes for the same stored facts; `gc` removes a
//! shared store's closed runs, and its open ones only with `--force`.
//!
//! Exit codes: 0 ok, 2 usage error or a `RUN`/`--task` that does not exist
//! (or a `report -o FILE` that cannot be written), 4 a store that cannot be
//! read (foreign, corrupt, newer schema); `list` prints every readable run
//! and exits 4 if any run under the root was not readable.

use std::path::PathBuf;

use ctx_deps::{RunHistory, StoreError};
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store_sqlite::{ResultRecord, RunRoot, RunSummary, RunView, SessionInfo, StatusCounts};
use serde_json::{Value, json};

use crate::exit::{CliError, CliResult, Exit};
use crate::io::{json_text, print_stdout};
use ctx_run::TaskJson;

mod csv_export;
pub mod report;

/// The `ctx runs` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RunsCommand {
    /// List stored runs: id, state, start time, status counts, plan.
    List(ListArgs),
    /// Show a run's tasks, or one task's prompt, output, history and error.
    Show(ShowArgs),
    /// Print a run's results (JSON, with task times) or its timeline (CSV,
    /// one row per engine call).
    Export(ExportArgs),
    /// Write a run's self-contained HTML report: timeline, dependency
    /// graph, totals, and each task's tokens, prompt and output.
    Report(report::ReportArgs),
    /// Remove all but the newest N runs (never a running one; in a shared
    /// store, never an open one without --force).
    Gc(GcArgs),
}

/// Where runs are stored.
#[derive(Debug, Clone, clap::Args)]
pub struct RootArg {
    /// The store root holding run directories and cache.sqlite.
    #[arg(long, value_name = "DIR", default_value = ctx_store_sqlite::DEFAULT_ROOT)]
    pub root: PathBuf,
    /// `sqlite` (the run directories under --root, the default) or a
    /// shared store's postgres:// URL. Default: $CTX_STORE.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

impl RootArg {
    /// The postgres:// URL when the runs are in a shared store.
    fn shared(&self) -> Result<Option<String>, CliError> {
        super::worker::shared_store_url(self.store.as_deref())
    }
}

pub use crate::format::Format;

/// `ctx runs list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    root: RootArg,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// `ctx runs show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// Show this task in full instead of the status table.
    #[arg(long, value_name = "ID")]
    task: Option<String>,
    #[command(flatten)]
    root: RootArg,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// The formats `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The object `ctx run --format json` prints, each task with its start,
    /// end and cost.
    Json,
    /// One row per engine call of each task, for spreadsheets.
    Csv,
}

/// `ctx runs export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: ExportFormat,
    #[command(flatten)]
    root: RootArg,
}

/// `ctx runs gc`.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// How many of the newest runs to keep.
    #[arg(long, value_name = "N")]
    keep: usize,
    /// Also remove old runs whose store cannot be read (corrupt, foreign,
    /// from a newer ctx); without it they are kept and named. With a
    /// shared store: also remove old runs that are still open (tasks left
    /// for workers).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    root: RootArg,
}

/// Runs the command.
pub fn run(cmd: RunsCommand) -> CliResult {
    match &cmd {
        RunsCommand::List(a) => {
            if let Some(url) = a.root.shared()? {
                return super::worker::runs_list(&url, a.format);
            }
        }
        RunsCommand::Show(a) => {
            if let Some(url) = a.root.shared()? {
                return super::worker::runs_show(&url, &a.run, a.task.as_deref(), a.format);
            }
        }
        RunsCommand::Export(a) => {
            if let Some(url) = a.root.shared()? {
                let view = super::worker::open_view(&url, &a.run)?;
                return export_from(&view, a.format);
            }
        }
        RunsCommand::Gc(a) => {
            if let Some(url) = a.root.shared()? {
                return super::worker::runs_gc(&url, a.keep, a.force);
            }
        }
        RunsCommand::Report(a) => {
            if let Some(url) = a.root.shared()? {
                let view = super::worker::open_view(&url, &a.run)?;
                return report::render(&view, a.output.as_deref());
            }
        }
    }
    match cmd {
        RunsCommand::List(a) => list(a),
        RunsCommand::Show(a) => show(a),
        RunsCommand::Export(a) => export(a),
        RunsCommand::Report(a) => report::run(a),
        RunsCommand::Gc(a) => gc(a),
    }
}

/// Maps a store error onto an exit code: naming a run that does not exist
/// is a usage error (2), anything else a store error (4).
pub fn store_error(e: ctx_store_sqlite::Error) -> CliError {
    if e.is_not_found() {
        CliError::usage(e)
    } else {
        CliError::with(Exit::Store, e)
    }
}

/// A read of a stored run that failed after it was opened: exit 4.
pub(crate) fn read_error(e: StoreError) -> CliError {
    CliError::with(Exit::Store, e)
}

fn print_json(v: &Value) -> Result<(), CliError> {
    print_stdout(&json_text(v)?)
}

fn list(a: ListArgs) -> CliResult {
    let root = RunRoot::new(&a.root.root);
    let (runs, bad) = root.list().map_err(store_error)?;
    for b in &bad {
        eprintln!("warning: {}", b.error);
    }
    match a.format {
        Format::Json => print_json(&Value::Array(runs.iter().map(summary_json).collect()))?,
        Format::Text if runs.is_empty() => {
            print_stdout(&format!("no runs under {}\n", root.path().display()))?;
        }
        Format::Text => {
            let rows: Vec<Vec<String>> = runs
                .iter()
                .map(|r| {
                    vec![
                        r.id.clone(),
                        r.state.to_string(),
                        r.created_at.clone(),
                        r.counts.total().to_string(),
                        r.counts.completed.to_string(),
                        r.counts.failed.to_string(),
                        r.counts.skipped.to_string(),
                        (r.counts.pending + r.counts.in_progress).to_string(),
                        r.plan.clone().map_or_else(|| "-".into(), |p| printable(&p)),
                    ]
                })
                .collect();
            print_stdout(&table(
                &[
                    "RUN",
                    "STATE",
                    "STARTED",
                    "TASKS",
                    "COMPLETED",
                    "FAILED",
                    "SKIPPED",
                    "NOT RUN",
                    "PLAN",
                ],
                &[false, false, false, true, true, true, true, true, false],
                &rows,
            ))?;
        }
    }
    Ok(if bad.is_empty() {
        Exit::Ok
    } else {
        Exit::Store
    })
}

fn summary_json(r: &RunSummary) -> Value {
    json!({
        "id": r.id,
        "dir": r.dir.display().to_string(),
        "state": r.state.as_str(),
        "created_at": r.created_at,
        "sessions": r.sessions,
        "plan": r.plan,
        "counts": counts_json(&r.counts),
    })
}

fn counts_json(c: &StatusCounts) -> Value {
    json!({
        "total": c.total(),
        "completed": c.completed,
        "failed": c.failed,
        "skipped": c.skipped,
        "in_progress": c.in_progress,
        "pending": c.pending,
    })
}

fn open(root: &RootArg, run: &str) -> Result<RunView, CliError> {
    RunRoot::new(&root.root).open(run).map_err(store_error)
}

/// The plan's tasks with their latest results, in plan order; a task with
/// no result is `pending`. Results of tasks no longer in the plan are left
/// out.
fn plan_results(
    plan: &Plan,
    view: &RunView,
) -> Result<Vec<(String, Option<ResultRecord>)>, CliError> {
    let mut stored: std::collections::HashMap<String, ResultRecord> = view
        .results()
        .map_err(store_error)?
        .into_iter()
        .map(|r| (r.result.task_id.clone(), r))
        .collect();
    Ok(plan
        .sub_tasks
        .iter()
        .map(|t| (t.id.clone(), stored.remove(&t.id)))
        .collect())
}

fn show(a: ShowArgs) -> CliResult {
    let view = open(&a.root, &a.run)?;
    match &a.task {
        Some(task) => show_task(&view, task, a.format),
        None => show_run(&view, a.format),
    }
}

fn show_run(view: &RunView, format: Format) -> CliResult {
    let plan = view.plan().map_err(store_error)?;
    let sessions = view.sessions().map_err(store_error)?;
    let state = view.state().map_err(store_error)?;
    let counts = view.status_counts().map_err(store_error)?;
    let created = view.created_at().map_err(store_error)?;
    let tasks = plan_results(&plan, view)?;
    let spent_usd = ctx_run::spent(view).map_err(read_error)?;
    if format == Format::Json {
        let tasks: Vec<Value> = tasks
            .iter()
            .map(|(id, r)| {
                json!({
                    "task_id": id,
                    "status": r.as_ref().map_or("pending", |r| r.result.status.as_str()),
                    "prompt_tokens": r.as_ref().and_then(|r| r.result.metadata.prompt_tokens),
                    "execution_time_ms": r.as_ref().and_then(|r| r.result.metadata.execution_time_ms),
                    "cached": r.as_ref().is_some_and(|r| r.result.metadata.cached),
                    "cost_usd": r.as_ref().and_then(|r| r.result.metadata.cost_usd),
                    "session": r.as_ref().map(|r| r.session),
                    "recorded_at": r.as_ref().map(|r| r.recorded_at.clone()),
                    "error": r.as_ref().and_then(|r| r.result.error.clone()),
                })
            })
            .collect();
        print_json(&json!({
            "id": view.run_id(),
            "dir": view.dir().display().to_string(),
            "created_at": created,
            "state": state.as_str(),
            "goal": plan.goal,
            "counts": counts_json(&counts),
            "sessions": sessions.iter().map(session_json).collect::<Vec<_>>(),
            "tasks": tasks,
            "spent_usd": spent_usd,
        }))?;
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    out.push_str(&format!("run      {}\n", view.run_id()));
    out.push_str(&format!("dir      {}\n", view.dir().display()));
    out.push_str(&format!("created  {created}\n"));
    out.push_str(&format!("state    {state}\n"));
    if let Some(goal) = &plan.goal {
        out.push_str(&format!("goal     {}\n", printable(goal)));
    }
    out.push_str(&format!(
        "tasks    {} total: {} completed, {} failed, {} skipped, {} in progress, {} pending\n",
        counts.total(),
        counts.completed,
        counts.failed,
        counts.skipped,
        counts.in_progress,
        counts.pending
    ));
    // A run that spent nothing (a dry run) keeps the table it always had.
    let show_cost = spent_usd > ctx_cost::Usd::ZERO;
    if show_cost {
        out.push_str(&format!(
            "spent    {} over all sessions\n",
            ctx_deps::dollars(spent_usd)
        ));
    }
    out.push_str("\nsessions\n");
    for s in &sessions {
        out.push_str(&format!(
            "  #{} {:<6}  {} -> {}  {}  engine {}  ctx {}  pid {}{}\n",
            s.seq,
            s.kind,
            s.started_at,
            s.finished_at.as_deref().unwrap_or("-"),
            s.outcome
                .as_deref()
                .unwrap_or(if state == ctx_store_sqlite::RunState::Running {
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
        ));
    }
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|(id, r)| {
            let meta = r.as_ref().map(|r| &r.result.metadata);
            vec![
                printable(id),
                r.as_ref()
                    .map_or_else(|| "pending".into(), |r| r.result.status.to_string()),
                meta.and_then(|m| m.prompt_tokens)
                    .map_or_else(|| "-".into(), |t| t.to_string()),
                meta.and_then(|m| m.execution_time_ms)
                    .map_or_else(|| "-".into(), |ms| format!("{ms} ms")),
                meta.and_then(|m| m.cost_usd)
                    .map_or_else(|| "-".into(), ctx_deps::dollars),
                if meta.is_some_and(|m| m.cached) {
                    "yes"
                } else {
                    ""
                }
                .to_string(),
                r.as_ref()
                    .and_then(|r| r.result.error.as_deref())
                    .and_then(|e| e.lines().next())
                    .map(printable)
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let rows: Vec<Vec<String>> = if show_cost {
        rows
    } else {
        rows.into_iter()
            .map(|mut row| {
                row.remove(4);
                row
            })
            .collect()
    };
    out.push('\n');
    if show_cost {
        out.push_str(&table(
            &[
                "TASK",
                "STATUS",
                "PROMPT TOKENS",
                "TIME",
                "COST",
                "CACHED",
                "ERROR",
            ],
            &[false, false, true, true, true, false, false],
            &rows,
        ));
    } else {
        out.push_str(&table(
            &["TASK", "STATUS", "PROMPT TOKENS", "TIME", "CACHED", "ERROR"],
            &[false, false, true, true, false, false],
            &rows,
        ));
    }
    print_stdout(&out)?;
    Ok(Exit::Ok)
}

fn session_json(s: &SessionInfo) -> Value {
    json!({
        "seq": s.seq,
        "kind": s.kind,
        "started_at": s.started_at,
        "finished_at": s.finished_at,
        "outcome": s.outcome,
        "pid": s.pid,
        "ctx_version": s.ctx_version,
        "engine": s.engine,
        "plan_source": s.plan_source,
        "plan_hash": s.plan_hash,
    })
}

fn show_task(view: &RunView, task: &str, format: Format) -> CliResult {
    let plan = view.plan().map_err(store_error)?;
    let latest = view.result(task).map_err(store_error)?;
    if latest.is_none() && plan.task(task).is_none() {
        return Err(CliError::usage(format!(
            "run {}: no task `{}` (not in its plan and no stored result)",
            view.run_id(),
            task
        )));
    }
    let history = view.history(task).map_err(store_error)?;
    if format == Format::Json {
        let history: Vec<Value> = history
            .iter()
            .map(|h| {
                json!({
                    "seq": h.seq,
                    "session": h.session,
                    "recorded_at": h.recorded_at,
                    "engine": h.engine,
                    "prompt_hash": h.prompt_hash,
                    "result": task_json(&h.result),
                })
            })
            .collect();
        print_json(&json!({
            "run": view.run_id(),
            "task_id": task,
            "result": latest.as_ref().map(|r| task_json(&r.result)),
            "prompt_hash": latest.as_ref().and_then(|r| r.prompt_hash.clone()),
            "history": history,
        }))?;
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    out.push_str(&format!("run      {}\n", view.run_id()));
    out.push_str(&format!("task     {}\n", printable(task)));
    let Some(rec) = latest else {
        out.push_str("status   pending (never started)\n");
        print_stdout(&out)?;
        return Ok(Exit::Ok);
    };
    let r = &rec.result;
    let m = &r.metadata;
    out.push_str(&format!(
        "status   {}{}\n",
        r.status,
        if m.cached { " (cached)" } else { "" }
    ));
    out.push_str(&format!(
        "stored   {} (session {}, engine {})\n",
        rec.recorded_at, rec.session, rec.engine
    ));
    if let Some(model) = &m.model {
        out.push_str(&format!("model    {model}\n"));
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
    if let Some(ms) = m.execution_time_ms {
        out.push_str(&format!("time     {ms} ms\n"));
    }
    if let Some(cost) = m.cost_usd {
        out.push_str(&format!("cost     {}\n", ctx_deps::dollars(cost)));
    }
    if let Some(h) = &rec.prompt_hash {
        out.push_str(&format!("sha256   {h}\n"));
    }
    if let Some(e) = &r.error {
        out.push_str(&format!("\n## Error\n\n{e}\n"));
    }
    out.push_str("\n## Prompt\n\n");
    out.push_str(
        r.prompt
            .as_deref()
            .unwrap_or("(none: the task never got one)"),
    );
    out.push_str("\n\n## Output\n\n");
    out.push_str(if r.output.is_empty() {
        "(empty)"
    } else {
        &r.output
    });
    if let Some(text) = summary_section(r) {
        out.push_str(&text);
    }
    if !m.checks.is_empty() {
        out.push_str(&checks_text(m));
    }
    out.push_str("\n\n## History\n\n");
    let rows: Vec<Vec<String>> = history
        .iter()
        .map(|h| {
            vec![
                h.seq.to_string(),
                h.session.to_string(),
                h.recorded_at.clone(),
                h.result.status.to_string(),
                h.result
                    .error
                    .as_deref()
                    .and_then(|e| e.lines().next())
                    .map(printable)
                    .unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["SEQ", "SESSION", "RECORDED", "STATUS", "ERROR"],
        &[true, true, false, false, false],
        &rows,
    ));
    if !m.attempts.is_empty() {
        out.push_str("\n## Engine attempts\n\n");
        let rows: Vec<Vec<String>> = m
            .attempts
            .iter()
            .map(|a| {
                vec![
                    a.number.to_string(),
                    a.outcome.to_string(),
                    format!("{} ms", a.duration_ms),
                    a.backoff_ms.map_or_else(String::new, |b| format!("{b} ms")),
                    a.error
                        .as_deref()
                        .and_then(|e| e.lines().next())
                        .map(printable)
                        .unwrap_or_default(),
                ]
            })
            .collect();
        out.push_str(&table(
            &["#", "OUTCOME", "TIME", "BACKOFF", "ERROR"],
            &[true, false, true, true, false],
            &rows,
        ));
    }
    print_stdout(&out)?;
    Ok(Exit::Ok)
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
                c.error.as_deref().unwrap_or("the call failed")
            ));
        } else {
            let text = c
                .text
                .as_deref()
                .or(r.summary.as_deref())
                .unwrap_or("(empty)");
            out.push('\n');
            out.push_str(text);
            out.push('\n');
        }
    }
    Some(out.trim_end().to_string())
}

/// The `## Checks` section of `ctx runs show RUN --task ID`: the final
/// attempt's results, then one line per attempt.
fn checks_text(m: &ctx_model::ResultMetadata) -> String {
    let mut out = format!(
        "\n\n## Checks (attempt {} of the task)\n\n",
        m.check_attempts.len().max(1)
    );
    for r in &m.checks {
        out.push_str(&format!(
            "{} {}: {}\n",
            if r.passed { "pass" } else { "FAIL" },
            r.kind,
            printable(&r.message)
        ));
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
        out.push_str(&table(
            &["#", "PROMPT TOKENS", "PASSED", "FAILED"],
            &[true, true, true, false],
            &rows,
        ));
    }
    out.trim_end().to_string()
}

/// The object `ctx run --format json` prints, rebuilt from the store and
/// encoded the same way (pretty, keys in the same order), with two keys
/// added to each task after `cost_usd`: `started_at` and `ended_at` (RFC
/// 3339, null when the task never started or has not ended; the same times
/// `ctx runs report` draws), and `spent_usd` at the end: what the run spent
/// over all its sessions. `tasks` are in plan order (a task with no result appears as
/// `pending`), `order` the ids of the started tasks by the start of the
/// execution that produced their current result (a resumed run lists the
/// reused tasks first, as they started in an earlier session).
fn export_json(run: &report::StoredRun, spent: ctx_cost::Usd) -> Result<String, CliError> {
    use std::borrow::Cow;
    let results: Vec<Cow<'_, TaskExecutionResult>> = run
        .input
        .tasks
        .iter()
        .zip(&run.records)
        .map(|(t, r)| match r {
            Some(r) => Cow::Borrowed(&r.result),
            None => Cow::Owned(TaskExecutionResult::new(t.id.clone(), TaskStatus::Pending)),
        })
        .collect();
    let mut started: Vec<(i64, &str)> = run
        .records
        .iter()
        .zip(&run.input.tasks)
        .filter_map(|(r, t)| Some((r.as_ref()?.started_seq?, t.id.as_str())))
        .collect();
    started.sort();
    let json = ExportJson {
        order: started.into_iter().map(|(_, id)| id).collect(),
        tasks: results
            .iter()
            .zip(&run.input.tasks)
            .map(|(r, t)| ExportTask {
                task: TaskJson::of(r),
                started_at: t.started_at.map(ctx_report::Timestamp::to_rfc3339),
                ended_at: t.ended_at.map(ctx_report::Timestamp::to_rfc3339),
            })
            .collect(),
        spent_usd: spent,
        summaries: ctx_run::SummariesJson::of(ctx_deps::SummaryTotals::of(
            results.iter().map(|r| r.as_ref()),
        )),
    };
    json_text(&json)
}

/// [`super::run::RunJson`] with each task's times, and what the run spent
/// over all its sessions ([`spent`]).
#[derive(serde::Serialize)]
struct ExportJson<'a> {
    order: Vec<&'a str>,
    tasks: Vec<ExportTask<'a>>,
    spent_usd: ctx_cost::Usd,
    /// As in `ctx run --format json`: the llm summary calls, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    summaries: Option<ctx_run::SummariesJson>,
}

/// One task of [`ExportJson`]: `ctx run`'s task object, then the times.
#[derive(serde::Serialize)]
struct ExportTask<'a> {
    #[serde(flatten)]
    task: TaskJson<'a>,
    started_at: Option<String>,
    ended_at: Option<String>,
}

fn export(a: ExportArgs) -> CliResult {
    let view = open(&a.root, &a.run)?;
    export_from(&view, a.format)
}

/// `ctx runs export` of a run read from either store.
fn export_from(view: &dyn RunHistory, format: ExportFormat) -> CliResult {
    let run = report::read_run(view, report::now())?;
    match format {
        ExportFormat::Json => {
            print_stdout(&export_json(
                &run,
                ctx_run::spent(view).map_err(read_error)?,
            )?)?;
        }
        ExportFormat::Csv => print_stdout(&csv_export::export_csv(&run)?)?,
    }
    Ok(Exit::Ok)
}

/// A task as JSON inside `show --format json` (same fields as export).
fn task_json(r: &TaskExecutionResult) -> Value {
    serde_json::to_value(TaskJson::of(r)).unwrap_or(Value::Null)
}

fn gc(a: GcArgs) -> CliResult {
    let root = RunRoot::new(&a.root.root);
    let report = root.gc(a.keep, a.force).map_err(store_error)?;
    let mut out = String::new();
    for id in &report.removed {
        out.push_str(&format!("removed {id}\n"));
    }
    for id in &report.running {
        out.push_str(&format!("kept {id} (running)\n"));
    }
    for (id, why) in &report.unreadable {
        out.push_str(&format!(
            "kept {id} (unreadable, --force removes it): {}\n",
            why.lines().next().unwrap_or_default()
        ));
    }
    let notes: Vec<String> = [
        (report.running.len(), "running"),
        (report.unreadable.len(), "unreadable"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    out.push_str(&format!(
        "{} removed, {} kept{}\n",
        report.removed.len(),
        report.kept.len() + report.running.len() + report.unreadable.len(),
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join(", "))
        }
    ));
    print_stdout(&out)?;
    Ok(Exit::Ok)
}

/// The `ctx run --resume RUN --dry-run` listing: the reused tasks, then the
/// tasks that would run with their reasons (each group in topological
/// order), a count line, and a note for stored tasks no longer in the plan.
pub fn resume_listing(run_id: &str, plan: &ctx_store_sqlite::ResumePlan) -> String {
    let mut rows: Vec<Vec<String>> = plan
        .reuse
        .iter()
        .map(|id| vec!["reuse".into(), printable(id), String::new()])
        .collect();
    rows.extend(
        plan.rerun
            .iter()
            .map(|(id, why)| vec!["rerun".into(), printable(id), why.to_string()]),
    );
    let mut out = format!("resume plan for run {run_id}\n\n");
    out.push_str(&table(
        &["ACTION", "TASK", "REASON"],
        &[false, false, false],
        &rows,
    ));
    out.push_str(&format!(
        "\n{}: {} reused, {} to run\n",
        super::run::tasks(plan.reuse.len() + plan.rerun.len()),
        plan.reuse.len(),
        plan.rerun.len()
    ));
    if !plan.dropped.is_empty() {
        let dropped: Vec<String> = plan.dropped.iter().map(|d| printable(d)).collect();
        out.push_str(&format!(
            "stored but no longer in the plan (kept, ignored): {}\n",
            dropped.join(", ")
        ));
    }
    out
}

/// Text with control characters escaped, for tables.
fn printable(s: &str) -> String {
    if s.chars().any(char::is_control) {
        format!("{s:?}")
    } else {
        s.to_string()
    }
}

/// An aligned table; `right[i]` right-aligns column `i`. The last column is
/// not padded.
pub(crate) fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    ctx_table::render(header, right, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_store_sqlite::{RerunReason, ResumePlan};

    #[test]
    fn resume_listing_shows_reasons() {
        let plan = ResumePlan {
            reuse: vec!["a".into(), "b".into()],
            rerun: vec![
                ("c".into(), RerunReason::Failed),
                ("d".into(), RerunReason::Upstream("c".into())),
            ],
            dropped: vec!["old".into()],
        };
        assert_eq!(
            resume_listing("R1", &plan),
            "resume plan for run R1\n\n\
             ACTION  TASK  REASON\n\
             reuse   a\n\
             reuse   b\n\
             rerun   c     failed\n\
             rerun   d     upstream c re-runs\n\
             \n4 tasks: 2 reused, 2 to run\n\
             stored but no longer in the plan (kept, ignored): old\n"
        );
    }

    #[test]
    fn table_aligns_and_trims() {
        let t = table(
            &["A", "NUM", "LAST"],
            &[false, true, false],
            &[vec!["long-id".into(), "5".into(), String::new()]],
        );
        assert_eq!(t, "A        NUM  LAST\nlong-id    5\n");
    }
}
