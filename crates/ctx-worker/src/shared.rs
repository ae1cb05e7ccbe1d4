//! A run in the shared store: registered, or resumed by the rules of a
//! local run (docs/runs.md: changed tasks and their dependents run again,
//! unchanged completed ones are reused, the engine label is compared); and
//! its report read back from the store's rows, in the shape a local run
//! reports.

use std::time::Duration;

use ctx_deps::{CostSummary, GraphError, PlanGraph, RunHistory, RunReport};
use ctx_model::map::parse_item_id;
use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::{RerunReason, ResumePlan};
use ctx_store_postgres::{Error as PgError, PgStore, RegisterRun, Reopen, TaskRow};

/// Why a shared run could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// The store failed or refused (unreachable, a run that does not
    /// exist, a changed plan while workers hold claims).
    #[error(transparent)]
    Store(#[from] PgError),
    /// The plan's graph could not be built (a validated plan's never is).
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The run's history could not be read to decide the resume.
    #[error(transparent)]
    Read(#[from] ctx_deps::StoreError),
    /// A store read on the blocking pool did not return.
    #[error("a store read on the blocking pool did not return: {0}")]
    Blocking(#[from] tokio::task::JoinError),
    /// The run cannot start as a local run could not either: a plan with
    /// `judge` checks on an engine that answers no prompt.
    #[error(transparent)]
    Run(#[from] ctx_run::RunError),
    /// This machine's input-hash cache could not be opened.
    #[error(transparent)]
    Cache(#[from] ctx_store_sqlite::Error),
    /// The run's period budget cannot hold it: some task's cost has no
    /// bound on the tier it starts on.
    #[error("config.budget: {0}")]
    Budget(#[from] ctx_run::run_costs::BudgetError),
}

/// A resume of a shared run: which run, and the tasks asked to run again
/// with everything below them (`ctx run --resume RUN --rerun TASK`; ids of
/// the plan, checked with `ctx_store::check_rerun_ids`).
#[derive(Debug, Clone, Copy)]
pub struct Resume<'a> {
    /// The run's id.
    pub run: &'a str,
    /// The tasks forced to run again, through maps (none: the resume
    /// rule's decisions alone).
    pub rerun: &'a [String],
}

/// A shared run's budget as [`start`] records it: `--max-cost`, and
/// each task's high end under it, which a claim of the task reserves in
/// its own statement ([`RegisterRun::highs`]).
#[derive(Debug, Clone, Copy)]
pub struct StartBudget<'a> {
    /// The most the run may spend.
    pub max_cost: ctx_cost::Usd,
    /// Each task's high end, in plan order ([`high_ends`]).
    pub highs: &'a [Option<ctx_cost::Usd>],
}

/// Each task's high end under a budget, in plan order: what a worker
/// reserves before its engine runs ([`crate::high_end`]), priced here
/// by the session that registers the run. A worker whose prices make a
/// task's high end larger tops its claim's reservation up; a smaller
/// one is settled at the task's cost all the same.
pub fn high_ends(plan: &Plan, model: &dyn ctx_deps::CostModel) -> Vec<Option<ctx_cost::Usd>> {
    plan.sub_tasks
        .iter()
        .map(|t| crate::high_end(model, t))
        .collect()
}

/// A run that was registered, or resumed.
#[derive(Debug, Clone)]
pub struct SharedStart {
    /// The run's id.
    pub run_id: String,
    /// With a resume: what it reuses and what runs again.
    pub resumed: Option<ResumePlan>,
}

/// Registers `plan` as a new run of the shared store, or (with `resume`)
/// reopens that run under `plan` by the resume rules both stores share,
/// with `resume.rerun` forced as a local resume forces them
/// ([`ResumePlan::force`]): those tasks and everything below them,
/// through maps, are reset to pending in the reopen's one transaction, and
/// a map among them takes none of its stored items when it expands again,
/// so that workers on any machine run them all again.
/// `plan` is stored as given: redact it first, workers run exactly what is
/// stored. `label` is the engine label recorded and compared; `inputs`,
/// what the plan was filled from, is recorded with the run; `budget`
/// (`--max-cost`) is the run's from now on, which its workers' claims
/// reserve each task's high end in (a resumed run's covers what it
/// holds from earlier sessions). Refuse a plan whose costs have no bound
/// first (`RunPricing::cost_options`).
pub async fn start(
    store: &PgStore,
    plan: &Plan,
    plan_source: Option<&str>,
    label: &str,
    resume: Option<Resume<'_>>,
    inputs: Option<&ctx_store::RunInputs>,
    budget: Option<StartBudget<'_>>,
) -> Result<SharedStart, SharedError> {
    let priorities = claim_priorities(plan)?;
    let highs = budget.map_or(&[][..], |b| b.highs);
    let budget = budget.map(|b| b.max_cost);
    let Some(Resume { run, rerun: asked }) = resume else {
        let run_id = store
            .register_run(&RegisterRun {
                plan,
                priorities: &priorities,
                engine: label,
                plan_source,
                inputs,
                budget,
                highs,
            })
            .await?;
        return Ok(SharedStart {
            run_id,
            resumed: None,
        });
    };
    // The view reads synchronously (on the store's own runtime): off this
    // one's workers.
    let mut decided = {
        let (store, run, plan, label) = (
            store.clone(),
            run.to_string(),
            plan.clone(),
            label.to_string(),
        );
        tokio::task::spawn_blocking(move || -> Result<ResumePlan, SharedError> {
            Ok(store.view(&run)?.resume_plan(&plan, &label)?)
        })
        .await??
    };
    decided.force(plan, asked);
    let (decided, keep, fresh) = maps_expand_again(plan, decided, asked);
    let rerun: Vec<String> = decided.rerun_ids().into_iter().collect();
    store
        .reopen_run(
            run,
            &Reopen {
                plan,
                priorities: &priorities,
                engine: label,
                plan_source,
                rerun: &rerun,
                keep: &keep,
                fresh: &fresh,
                inputs,
                budget,
                highs,
            },
        )
        .await?;
    Ok(SharedStart {
        run_id: run.to_string(),
        resumed: Some(decided),
    })
}

/// `decided` with every map task of `plan`, and every task below one,
/// running again: a map expands again on every run (its list may have
/// changed; its items are matched by content hash when it expands, and
/// only the new or changed ones run), so what depends on it cannot be
/// taken as stored before then. A map task whose own result would be
/// reused (a list that was empty) is said to have a changed prompt: its
/// list is read again.
///
/// With it, the tasks below a map that run again only because of a map
/// above them, as the local executor decides them
/// (`ResumePlan::forced_ids`): a task with a reason of its own (failed,
/// prompt changed, …) is forced, and so is everything that depends on
/// it, except through a map task, which expands again anyway; a task
/// below a map that is not forced had a completed result and only
/// reused or such tasks above it. The store keeps those results aside,
/// and their claims take them as stored when the items they receive
/// come back unchanged (a kept dependency that runs for real clears its
/// dependents' kept results).
///
/// What `asked` (`--rerun`) reaches is forced through maps too, as the
/// local executor's `rerun_requested` forces it: nothing below an asked
/// task keeps a result aside, and the map tasks among them (the third
/// list) take none of their stored items.
fn maps_expand_again(
    plan: &Plan,
    mut decided: ResumePlan,
    asked: &[String],
) -> (ResumePlan, Vec<String>, Vec<String>) {
    let Ok(graph) = PlanGraph::new(plan) else {
        return (decided, Vec::new(), Vec::new());
    };
    let n = graph.len();
    let is_map = |i: usize| plan.sub_tasks.get(i).is_some_and(|t| t.map.is_some());
    // The first map (in plan order) above each task.
    let mut map_above: Vec<Option<usize>> = vec![None; n];
    for i in (0..n).filter(|&i| is_map(i)) {
        for d in graph.transitive_dependents(i) {
            map_above[d].get_or_insert(i);
        }
    }
    let mut forced = vec![false; n];
    let mut stack: Vec<usize> = decided
        .rerun
        .iter()
        .filter(|(_, why)| !matches!(why, RerunReason::Upstream(_)))
        .filter_map(|(id, _)| graph.index_of(id))
        .collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut forced[i], true) || is_map(i) {
            continue;
        }
        stack.extend(graph.dependents(i));
    }
    let reached = requested_reach(&graph, asked);
    for &i in &reached {
        forced[i] = true;
    }
    let (kept, moved): (Vec<String>, Vec<String>) = decided.reuse.into_iter().partition(|id| {
        graph
            .index_of(id)
            .is_none_or(|i| !is_map(i) && map_above[i].is_none())
    });
    decided.reuse = kept;
    for id in moved {
        let reason = match graph.index_of(&id).and_then(|i| map_above[i]) {
            Some(m) => RerunReason::Upstream(graph.id(m).to_string()),
            None => RerunReason::PromptChanged,
        };
        decided.rerun.push((id, reason));
    }
    let keep = decided
        .rerun
        .iter()
        .filter_map(|(id, _)| graph.index_of(id).map(|i| (id, i)))
        .filter(|&(_, i)| !is_map(i) && map_above[i].is_some() && !forced[i])
        .map(|(id, _)| id.clone())
        .collect();
    let fresh = reached
        .into_iter()
        .filter(|&i| is_map(i))
        .map(|i| graph.id(i).to_string())
        .collect();
    (decided, keep, fresh)
}

/// The tasks `asked` and everything below them, through maps, in plan
/// order.
fn requested_reach(graph: &PlanGraph, asked: &[String]) -> std::collections::BTreeSet<usize> {
    let mut reached = std::collections::BTreeSet::new();
    for i in asked.iter().filter_map(|id| graph.index_of(id)) {
        reached.insert(i);
        reached.extend(graph.transitive_dependents(i));
    }
    reached
}

/// Each task's claim priority, in plan order: claims take the longest
/// remaining path first, as the local executor orders its ready queue.
fn claim_priorities(plan: &Plan) -> Result<Vec<u64>, GraphError> {
    let graph = PlanGraph::new(plan)?;
    Ok((0..graph.len()).map(|i| graph.remaining_path(i)).collect())
}

/// The report of a shared run as a local run gives it, from the store's
/// task rows: the tasks this session started in claim order (`reused`
/// left out), every task's latest result (pending ones as such), and the
/// known costs of the tasks that ran (a budget spans one process, so
/// there is none).
pub fn report(rows: &[TaskRow], mut reused: Vec<String>, interrupted: bool) -> RunReport {
    let rows = &items_after_their_map(rows);
    // An item a resumed map took as stored was never claimed; a task
    // below a map whose items came back unchanged was claimed, and its
    // kept result taken as stored.
    // (A set, not `reused.contains`: a map of 10,000 items would make
    // that 10,000 scans of a list as long.)
    let already: std::collections::HashSet<String> = reused.iter().cloned().collect();
    reused.extend(
        rows.iter()
            .filter(|r| {
                (r.claim_seq.is_none()
                    && r.status == TaskStatus::Completed
                    && parse_item_id(&r.task_id).is_some())
                    || r.taken
            })
            .map(|r| r.task_id.clone())
            .filter(|id| !already.contains(id)),
    );
    let mut started: Vec<(i64, &str)> = rows
        .iter()
        .filter_map(|r| Some((r.claim_seq?, r.task_id.as_str())))
        .collect();
    started.sort_unstable();
    let not_run: std::collections::HashSet<&str> = reused.iter().map(String::as_str).collect();
    RunReport {
        order: started
            .iter()
            .filter(|(_, id)| !not_run.contains(id))
            .map(|(_, id)| id.to_string())
            .collect(),
        results: rows
            .iter()
            .map(|r| {
                r.result
                    .clone()
                    .filter(|_| r.status != TaskStatus::Pending)
                    .unwrap_or_else(|| TaskExecutionResult::new(&r.task_id, r.status))
            })
            .collect(),
        reused,
        interrupted,
        makespan: Duration::ZERO,
        cost: Some(cost(rows.iter().copied())),
        awaiting: Vec::new(),
    }
}

/// `rows` (in stored order: items after every task of the plan as
/// written, in the order their maps expanded) with each map's items right
/// after their map task, in item order, as a local run lists them.
fn items_after_their_map(rows: &[TaskRow]) -> Vec<&TaskRow> {
    let ids: std::collections::HashSet<&str> = rows.iter().map(|r| r.task_id.as_str()).collect();
    let mut items: std::collections::HashMap<&str, Vec<(usize, &TaskRow)>> =
        std::collections::HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        match parse_item_id(&r.task_id) {
            Some((m, k)) if ids.contains(m) => items.entry(m).or_default().push((k, r)),
            _ => out.push(r),
        }
    }
    let mut all = Vec::with_capacity(rows.len());
    for r in out {
        all.push(r);
        if let Some(mut mine) = items.remove(r.task_id.as_str()) {
            mine.sort_unstable_by_key(|(k, _)| *k);
            all.extend(mine.into_iter().map(|(_, r)| r));
        }
    }
    all
}

/// What the tasks that ran have cost, as a local run sums it.
fn cost<'a>(rows: impl Iterator<Item = &'a TaskRow>) -> CostSummary {
    let mut summary = CostSummary {
        spent: ctx_cost::Usd::ZERO,
        earlier: ctx_cost::Usd::ZERO,
        budget: None,
        needed: ctx_cost::Usd::ZERO,
        unknown: 0,
    };
    for row in rows.filter(|r| r.claim_seq.is_some() && !r.taken) {
        match &row.result {
            // Claimed, but skipped by the budget before its engine ran:
            // not executed, as in a local run.
            Some(result) if ctx_deps::is_budget_skip(result) => {}
            Some(result) => summary.add_executed(result),
            None => summary.unknown += 1,
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, status: TaskStatus, seq: Option<i64>, cost: Option<&str>) -> TaskRow {
        let result = seq.map(|_| {
            let mut r = TaskExecutionResult::new(id, status);
            r.metadata.cost_usd = cost.map(|c| ctx_cost::Usd::parse(c).unwrap());
            r
        });
        TaskRow {
            task_id: id.into(),
            status,
            attempt: i32::from(seq.is_some()),
            result,
            started_at: None,
            finished_at: None,
            claim_seq: seq,
            engine: None,
            taken: false,
        }
    }

    /// As a local resume reports it: the order is the claims this session
    /// made (reused tasks left out), every task has a result, the cost is
    /// what the claimed tasks spent, and a task without a price or without
    /// a result is of unknown cost.
    #[test]
    fn a_shared_report_reads_like_a_local_one() {
        let rows = vec![
            row("a", TaskStatus::Completed, Some(1), Some("0.5")),
            row("b", TaskStatus::Completed, Some(3), Some("0.25")),
            row("c", TaskStatus::Completed, Some(2), None),
            row("d", TaskStatus::Pending, None, None),
        ];
        let report = report(&rows, vec!["a".into()], false);
        assert_eq!(report.order, ["c", "b"]);
        assert_eq!(report.results.len(), 4);
        assert_eq!(report.results[3].status, TaskStatus::Pending);
        assert_eq!(report.reused, ["a"]);
        let cost = report.cost.unwrap();
        assert_eq!(cost.spent, ctx_cost::Usd::parse("0.75").unwrap());
        // c ran without a price.
        assert_eq!(cost.unknown, 1);
        let mut interrupted = rows.clone();
        interrupted[3].claim_seq = Some(4);
        let r = super::report(&interrupted, Vec::new(), true);
        assert!(r.interrupted);
        // d was claimed and has no result yet.
        assert_eq!(r.cost.unwrap().unknown, 2);
    }

    /// The head of the longest chain is claimed first, a leaf last; the
    /// priorities are in plan order whatever the order of dependencies.
    #[test]
    fn claims_take_the_longest_remaining_path_first() {
        let plan =
            ctx_test_support::plan(&[("c", &["b"]), ("a", &[]), ("b", &["a"]), ("lone", &[])]);
        let p = claim_priorities(&plan).unwrap();
        let (c, a, b, lone) = (p[0], p[1], p[2], p[3]);
        assert!(a > b && b > c, "{p:?}");
        assert_eq!(c, lone, "two sinks of the same weight");
    }

    /// A map over the output of task `over`.
    fn map_over(over: &str) -> ctx_model::MapSpec {
        ctx_model::MapSpec {
            over: over.into(),
            pointer: None,
            item: "ITEM".into(),
            max_items: Some(3),
            allow_failures: 0,
            variable_value: None,
        }
    }

    /// What a shared resume keeps aside below a map: the tasks that run
    /// again only because of a map above them (as the local executor's
    /// `forced_ids` leaves them), never a map task, never a task with a
    /// reason of its own or below one (except through a map task).
    #[test]
    fn only_what_runs_again_because_of_a_map_above_it_is_kept_aside() {
        // src → scan (a map) → report → final; other → mix ← scan;
        // fix (failed) → m2 (a map over it) → after.
        let mut plan = ctx_test_support::plan(&[
            ("src", &[]),
            ("scan", &["src"]),
            ("report", &["scan"]),
            ("final", &["report"]),
            ("other", &[]),
            ("mix", &["scan", "other"]),
            ("fix", &[]),
            ("m2", &["fix"]),
            ("after", &["m2", "report"]),
        ]);
        for (i, over) in [(1, "src"), (7, "fix")] {
            plan.sub_tasks[i].map = Some(map_over(over));
        }
        let upstream = |id: &str, of: &str| (id.to_string(), RerunReason::Upstream(of.into()));
        let decided = ResumePlan {
            reuse: ["src", "report", "final"].map(String::from).to_vec(),
            rerun: vec![
                ("scan".into(), RerunReason::PromptChanged),
                ("other".into(), RerunReason::Failed),
                upstream("mix", "other"),
                ("fix".into(), RerunReason::Failed),
                upstream("m2", "fix"),
                upstream("after", "m2"),
            ],
            dropped: Vec::new(),
        };
        let (decided, keep, fresh) = maps_expand_again(&plan, decided, &[]);
        assert!(fresh.is_empty());
        assert_eq!(decided.reuse, ["src"]);
        // `after` is below `m2`, whose own source failed: the forcing
        // stops at the map, so it waits on the items too.
        assert_eq!(keep, ["after", "report", "final"]);
        let reasons: Vec<String> = decided
            .rerun
            .iter()
            .map(|(id, why)| format!("{id}: {why}"))
            .collect();
        assert!(reasons.contains(&"report: upstream scan re-runs".to_string()));
        assert!(reasons.contains(&"mix: upstream other re-runs".to_string()));
    }

    /// `--rerun` forces through maps: nothing below the asked task is
    /// kept aside, and a map below it takes none of its stored items,
    /// while a map elsewhere still matches them.
    #[test]
    fn an_asked_rerun_forces_through_maps_and_freshens_them() {
        // src → scan (a map) → report; other → m2 (a map) → after.
        let mut plan = ctx_test_support::plan(&[
            ("src", &[]),
            ("scan", &["src"]),
            ("report", &["scan"]),
            ("other", &[]),
            ("m2", &["other"]),
            ("after", &["m2"]),
        ]);
        for (i, over) in [(1, "src"), (4, "other")] {
            plan.sub_tasks[i].map = Some(map_over(over));
        }
        let mut decided = ResumePlan {
            reuse: ["src", "scan", "report", "other", "m2", "after"]
                .map(String::from)
                .to_vec(),
            rerun: Vec::new(),
            dropped: Vec::new(),
        };
        let asked = ["src".to_string()];
        decided.force(&plan, &asked);
        let (decided, keep, fresh) = maps_expand_again(&plan, decided, &asked);
        assert_eq!(fresh, ["scan"]);
        // `after` waits on m2's items, which may come back unchanged.
        assert_eq!(keep, ["after"]);
        assert_eq!(decided.reuse, ["other"]);
    }

    #[test]
    fn a_plan_with_a_cycle_has_no_priorities() {
        let plan = ctx_test_support::plan(&[("a", &["b"]), ("b", &["a"])]);
        assert!(claim_priorities(&plan).is_err());
    }

    /// A task that was claimed but has no row result yet (it runs, or its
    /// worker died) counts as unknown cost; a pending one that no one
    /// claimed counts as nothing; a failed task's known cost is spent.
    #[test]
    fn only_claimed_tasks_count_toward_the_cost() {
        let mut running = row("r", TaskStatus::InProgress, Some(2), None);
        running.result = None;
        let rows = vec![
            row("f", TaskStatus::Failed, Some(1), Some("0.1")),
            running,
            row("p", TaskStatus::Pending, None, None),
        ];
        let c = cost(rows.iter());
        assert_eq!(c.spent, ctx_cost::Usd::parse("0.1").unwrap());
        assert_eq!(c.unknown, 1);
        assert_eq!(c.budget, None);
        let report = report(&rows, Vec::new(), false);
        // The running task reads as its status, without a stored result.
        assert_eq!(report.results[1].status, TaskStatus::InProgress);
        assert_eq!(report.order, ["f", "r"]);
    }
}
