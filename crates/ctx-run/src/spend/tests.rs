use ctx_model::Plan;
use ctx_store::{ResultRecord, RunHeader, RunHistory, RunState, StoreError};
use serde_json::json;

use super::*;

/// A stored run held in memory: what either store would answer.
struct Stored {
    header: RunHeader,
    plan: Plan,
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
        Ok(Vec::new())
    }
    fn history(&self, _: &str) -> Result<Vec<ResultRecord>, StoreError> {
        Ok(Vec::new())
    }
    fn every_history(&self) -> Result<Vec<ResultRecord>, StoreError> {
        Ok(self.history.clone())
    }
}

/// Task `a` (model `m`) and `b` (no model), and a map task `each`
/// (model `mapped`).
fn plan() -> Plan {
    let yaml = "schema_version: 1\ngoal: weekly report\nsub_tasks:\n\
        - {id: a, description: A, tool_or_prompt: {name: inference, params: {prompt: p, model: m}}}\n\
        - {id: b, description: B, tool_or_prompt: {name: inference, params: {prompt: p}}}\n\
        - {id: each, description: E, tool_or_prompt: {name: inference, params: {prompt: p, model: mapped}}}\n";
    ctx_model::parse_plan(yaml, "plan.yaml", ctx_model::PlanFormat::Yaml).unwrap()
}

/// A row recorded at `at`, `metadata` as stored.
fn row(seq: i64, task: &str, status: &str, at: &str, metadata: serde_json::Value) -> ResultRecord {
    let result = serde_json::from_value(json!({
        "task_id": task, "status": status, "metadata": metadata
    }))
    .unwrap();
    ResultRecord {
        prompt_hash: None,
        engine: "command".into(),
        fingerprint: None,
        session: 1,
        recorded_at: at.into(),
        seq,
        started_seq: None,
        started_at: None,
        result,
    }
}

fn run(id: &str, source: Option<&str>, history: Vec<ResultRecord>) -> Stored {
    Stored {
        header: RunHeader {
            run_id: id.into(),
            state: RunState::Completed,
            started_at: None,
            finished_at: None,
            plan_source: source.map(str::to_string),
            location: format!("runs/{id}/store.sqlite"),
        },
        plan: plan(),
        history,
    }
}

/// Run `r1` (plan `p1.yaml`) on 2026-12-01: `a` on `m` twice (a failed
/// execution, then one with a retry), $0.25 and $0.50; an `in_progress`
/// and a `skipped` row that record no attempt. Run `r2` (no plan path: its
/// goal) on 2026-12-02: `a` on `m` $1, `b` on `x` unpriced with a judge on
/// `judge-x`, a map item on its map's model $0.125.
fn two_runs() -> Vec<Stored> {
    let r1 = run(
        "r1",
        Some("p1.yaml"),
        vec![
            row(1, "a", "in_progress", "2026-12-01T10:00:00.000Z", json!({})),
            row(
                2,
                "a",
                "failed",
                "2026-12-01T10:00:02.000Z",
                json!({"model": "m", "cost_usd": 0.25, "execution_time_ms": 2000}),
            ),
            row(
                3,
                "a",
                "completed",
                "2026-12-01T11:00:00.000Z",
                json!({"model": "m", "cost_usd": 0.5, "execution_time_ms": 10}),
            ),
            row(
                4,
                "b",
                "skipped",
                "2026-12-01T11:00:01.000Z",
                json!({"cost_usd": 0}),
            ),
        ],
    );
    let r2 = run(
        "r2",
        None,
        vec![
            row(
                1,
                "a",
                "completed",
                "2026-12-02T09:00:00.000Z",
                json!({"model": "m", "cost_usd": 1}),
            ),
            row(
                2,
                "b",
                "completed",
                "2026-12-02T09:30:00.000Z",
                json!({"model": "x", "check_attempts": [{"number": 1, "prompt": "p",
                    "prompt_tokens": 1, "output": "o",
                    "judge_calls": [{"model": "judge-x", "prompt_tokens": 3,
                        "max_tokens": 8, "requests": 1}]}]}),
            ),
            row(
                3,
                "each[0]",
                "completed",
                "2026-12-02T10:00:00.000Z",
                json!({"cost_usd": 0.125}),
            ),
        ],
    );
    vec![r1, r2]
}

fn sum(runs: &[Stored], by: GroupBy, period: Period) -> Spend {
    spend(runs.iter().map(|r| r as &dyn RunHistory), by, period).unwrap()
}

fn usd(text: &str) -> Usd {
    Usd::parse(text).unwrap()
}

/// `(key, runs, attempts, spent, unpriced attempts, unpriced models)`.
fn rows(s: &Spend) -> Vec<(String, usize, usize, Usd, usize, Vec<String>)> {
    s.groups
        .iter()
        .chain([&s.total])
        .map(|r| {
            (
                r.key.clone(),
                r.runs,
                r.attempts,
                r.spent_usd,
                r.unpriced_attempts,
                r.unpriced_models.clone(),
            )
        })
        .collect()
}

fn names(models: &[&str]) -> Vec<String> {
    models.iter().map(|m| m.to_string()).collect()
}

#[test]
fn two_runs_sum_by_plan_model_day_and_run() {
    let runs = two_runs();
    let judged = names(&["judge-x", "x"]);
    let by_plan = sum(&runs, GroupBy::Plan, Period::ALL);
    assert_eq!(
        rows(&by_plan),
        [
            ("p1.yaml".into(), 1, 2, usd("0.75"), 0, vec![]),
            (
                "weekly report".into(),
                1,
                3,
                usd("1.125"),
                1,
                judged.clone()
            ),
            ("total".into(), 2, 5, usd("1.875"), 1, judged.clone()),
        ]
    );
    let by_model = sum(&runs, GroupBy::Model, Period::ALL);
    assert_eq!(
        rows(&by_model),
        [
            ("m".into(), 2, 3, usd("1.75"), 0, vec![]),
            ("mapped".into(), 1, 1, usd("0.125"), 0, vec![]),
            ("x".into(), 1, 1, Usd::ZERO, 1, judged.clone()),
            ("total".into(), 2, 5, usd("1.875"), 1, judged.clone()),
        ]
    );
    let by_day = sum(&runs, GroupBy::Day, Period::ALL);
    assert_eq!(
        rows(&by_day),
        [
            ("2026-12-01".into(), 1, 2, usd("0.75"), 0, vec![]),
            ("2026-12-02".into(), 1, 3, usd("1.125"), 1, judged.clone()),
            ("total".into(), 2, 5, usd("1.875"), 1, judged.clone()),
        ]
    );
    let by_run = sum(&runs, GroupBy::Run, Period::ALL);
    assert_eq!(
        rows(&by_run),
        [
            ("r1".into(), 1, 2, usd("0.75"), 0, vec![]),
            ("r2".into(), 1, 3, usd("1.125"), 1, judged.clone()),
            ("total".into(), 2, 5, usd("1.875"), 1, judged),
        ]
    );
    assert_eq!(by_run.runs_read, 2);
}

/// One rule: a run's spend over every instant is its `spent_usd`.
#[test]
fn a_runs_spend_is_what_the_run_says_it_spent() {
    for r in two_runs() {
        let s = sum(std::slice::from_ref(&r), GroupBy::Run, Period::ALL);
        assert_eq!(
            s.total.spent_usd,
            crate::spent(&r).unwrap(),
            "{}",
            r.header.run_id
        );
    }
}

#[test]
fn the_period_filters_each_attempt_by_its_start() {
    let runs = two_runs();
    // r1's failed attempt was recorded at 10:00:02 after 2 s: it started
    // at 10:00:00, the period's first instant.
    let p = Period::parse(Some("2026-12-01T10:00:00Z"), Some("2026-12-02T09:00:00Z")).unwrap();
    let s = sum(&runs, GroupBy::Run, p);
    assert_eq!(
        rows(&s),
        [
            ("r1".into(), 1, 2, usd("0.75"), 0, vec![]),
            ("r2".into(), 1, 1, usd("1"), 0, vec![]),
            ("total".into(), 2, 3, usd("1.75"), 0, vec![]),
        ]
    );
    let p = Period::parse(Some("2026-12-01T10:00:00.001Z"), Some("2026-12-01")).unwrap();
    assert_eq!(sum(&runs, GroupBy::Run, p).total.attempts, 1);
}

#[test]
fn a_period_with_no_runs_is_an_empty_table_that_says_so() {
    let runs = two_runs();
    let p = Period::parse(Some("2027-01-01"), None).unwrap();
    let s = sum(&runs, GroupBy::Model, p);
    assert!(s.groups.is_empty());
    assert_eq!(s.total.attempts, 0);
    assert_eq!(
        s.text(".ctx/runs"),
        "no attempts recorded since 2027-01-01T00:00:00.000Z: 2 runs read from .ctx/runs\n"
    );
    assert_eq!(
        s.csv(),
        "model,runs,attempts,spent_usd,unpriced_attempts,unpriced_models\r\n"
    );
    let none = spend(std::iter::empty(), GroupBy::Day, Period::ALL).unwrap();
    assert_eq!(
        none.text("db"),
        "no attempts recorded: 0 runs read from db\n"
    );
}

/// A clock stepped back across midnight: each attempt is counted in the
/// day its own start says, none twice and none lost.
#[test]
fn a_clock_moving_backwards_across_a_day_boundary_loses_nothing() {
    let stepped = run(
        "r",
        Some("p.yaml"),
        vec![
            row(
                1,
                "a",
                "completed",
                "2026-12-02T00:00:05.000Z",
                json!({"model": "m", "cost_usd": 1}),
            ),
            row(
                2,
                "b",
                "completed",
                "2026-12-01T23:59:58.000Z",
                json!({"model": "m", "cost_usd": 2}),
            ),
            row(
                3,
                "a",
                "completed",
                "2026-12-02T00:00:01.000Z",
                json!({"model": "m", "cost_usd": 4}),
            ),
        ],
    );
    let runs = [stepped];
    let by_day = sum(&runs, GroupBy::Day, Period::ALL);
    assert_eq!(
        rows(&by_day),
        [
            ("2026-12-01".into(), 1, 1, usd("2"), 0, vec![]),
            ("2026-12-02".into(), 1, 2, usd("5"), 0, vec![]),
            ("total".into(), 1, 3, usd("7"), 0, vec![]),
        ]
    );
    let first = sum(
        &runs,
        GroupBy::Day,
        Period::parse(None, Some("2026-12-01")).unwrap(),
    );
    let second = sum(
        &runs,
        GroupBy::Day,
        Period::parse(Some("2026-12-02"), None).unwrap(),
    );
    assert_eq!(
        first.total.spent_usd.saturating_add(second.total.spent_usd),
        usd("7")
    );
}

#[test]
fn a_model_is_the_engines_else_the_plans_else_the_engine_default() {
    let r = run(
        "r",
        None,
        vec![
            row(1, "b", "failed", "2026-12-01T10:00:00.000Z", json!({})),
            row(2, "a", "failed", "2026-12-01T10:00:00.000Z", json!({})),
        ],
    );
    let s = sum(&[r], GroupBy::Model, Period::ALL);
    assert_eq!(
        rows(&s),
        [
            (
                "(engine default)".into(),
                1,
                1,
                Usd::ZERO,
                1,
                names(&["(engine default)"])
            ),
            ("m".into(), 1, 1, Usd::ZERO, 1, names(&["m"])),
            (
                "total".into(),
                1,
                2,
                Usd::ZERO,
                2,
                names(&["(engine default)", "m"])
            ),
        ]
    );
}

#[test]
fn the_table_never_shows_an_unpriced_group_as_zero_dollars() {
    let s = sum(&two_runs(), GroupBy::Model, Period::ALL);
    assert_eq!(
        s.text(".ctx/runs"),
        "MODEL   RUNS  ATTEMPTS                SPENT  UNPRICED\n\
         m          2         3            $1.750000         0\n\
         mapped     1         1            $0.125000         0\n\
         x          1         1              unknown         1\n\
         total      2         5  $1.875000 + unknown         1\n\
         unpriced: 1 attempt on judge-x, x: no price was known when it ran, so its cost is \
         unknown and not in SPENT\n"
    );
}

#[test]
fn csv_and_json_have_the_documented_shape() {
    let s = sum(
        &two_runs(),
        GroupBy::Day,
        Period::parse(Some("2026-12-01"), None).unwrap(),
    );
    assert_eq!(
        s.csv(),
        "day,runs,attempts,spent_usd,unpriced_attempts,unpriced_models\r\n\
         2026-12-01,1,2,0.75,0,\r\n\
         2026-12-02,1,3,1.125,1,judge-x x\r\n"
    );
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(
        json,
        json!({
            "by": "day",
            "since": "2026-12-01T00:00:00.000Z",
            "before": null,
            "runs_read": 2,
            "groups": [
                {"key": "2026-12-01", "runs": 1, "attempts": 2, "spent_usd": 0.75,
                 "unpriced_attempts": 0, "unpriced_models": []},
                {"key": "2026-12-02", "runs": 1, "attempts": 3, "spent_usd": 1.125,
                 "unpriced_attempts": 1, "unpriced_models": ["judge-x", "x"]}
            ],
            "total": {"key": "total", "runs": 2, "attempts": 5, "spent_usd": 1.875,
                 "unpriced_attempts": 1, "unpriced_models": ["judge-x", "x"]}
        })
    );
}

#[test]
fn a_csv_cell_from_a_plan_cannot_start_a_formula() {
    let r = run(
        "r",
        Some("=HYPERLINK(1)"),
        vec![row(
            1,
            "a",
            "completed",
            "2026-12-01T10:00:00.000Z",
            json!({"cost_usd": 1}),
        )],
    );
    let s = sum(&[r], GroupBy::Plan, Period::ALL);
    assert!(
        s.csv().contains("\r\n'=HYPERLINK(1),1,1,1,0,\r\n"),
        "{}",
        s.csv()
    );
}

#[test]
fn a_damaged_time_names_the_store_run_and_task() {
    let r = run(
        "r9",
        None,
        vec![row(
            1,
            "a",
            "completed",
            "yesterday",
            json!({"cost_usd": 1}),
        )],
    );
    let e = spend([&r as &dyn RunHistory], GroupBy::Day, Period::ALL).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("runs/r9/store.sqlite: run r9, task `a`: recorded_at: `yesterday`"),
        "{text}"
    );
}

/// A row restating its task's previous one (`llm` summaries added) counts
/// what it added, never the whole cost again, and is not an attempt.
#[test]
fn a_restating_row_adds_only_its_summary_cost() {
    use ctx_model::{Restatement, TaskExecutionResult};
    let usd = |s: &str| Usd::parse(s).unwrap();
    let mut row = TaskExecutionResult::new("a", TaskStatus::Completed);
    row.metadata.cost_usd = Some(usd("0.5"));
    row.metadata.restated = Some(Restatement {
        restated_usd: Some(usd("0.375")),
        added_usd: Some(usd("0.125")),
    });
    assert_eq!(ResultCost::of(&row), ResultCost::Added(usd("0.125")));
    row.metadata.restated = Some(Restatement {
        restated_usd: Some(usd("0.375")),
        added_usd: None,
    });
    assert_eq!(ResultCost::of(&row), ResultCost::AddedUnpriced);
    row.metadata.restated = Some(Restatement::default());
    assert_eq!(ResultCost::of(&row), ResultCost::NoCost);
    let mut acc = Acc::default();
    acc.add(0, &ResultCost::Priced(usd("0.375")), &BTreeSet::new());
    acc.add(0, &ResultCost::Added(usd("0.125")), &BTreeSet::new());
    let r = acc.row("k".into());
    assert_eq!((r.attempts, r.spent_usd), (1, usd("0.5")));
}
