//! Comparisons of runs built in memory: the causes, the summary, the gate.

use std::collections::BTreeMap;

use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::{ResultRecord, RunHeader, RunInputs, RunState, fingerprint_all};
use serde_json::json;

use super::*;
use crate::gate::{Condition, judge};

/// A stored result of `id` in `status` with `output` (no fingerprint:
/// [`side`] adds the plan's).
pub(crate) fn record(id: &str, status: &str, output: &str) -> ResultRecord {
    let mut result: TaskExecutionResult =
        serde_json::from_value(json!({"task_id": id, "status": status})).unwrap();
    result.output = output.into();
    ResultRecord {
        result,
        prompt_hash: None,
        engine: "command".into(),
        fingerprint: None,
        session: 1,
        recorded_at: "2026-01-01T00:00:00Z".into(),
        seq: 1,
        started_seq: None,
        started_at: None,
    }
}

/// A plan of plain tasks `ids` and a map task `m` over a variable.
pub(crate) fn map_plan(ids: &[&str]) -> Plan {
    let mut tasks: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "description": id,
            "tool_or_prompt": {"name": "inference", "params": {"prompt": format!("do {id}")}}})
        })
        .collect();
    tasks.push(json!({"id": "m", "description": "m",
        "map": {"over": "LIST", "as": "ITEM"},
        "tool_or_prompt": {"name": "inference", "params": {"prompt": "<untrusted-content>\n{{ITEM}}\n</untrusted-content>"}}}));
    serde_json::from_value(json!({"schema_version": 1,
        "variables": [{"name": "LIST", "type": "json"}], "sub_tasks": tasks}))
    .unwrap()
}

/// A completed run `id` of `plan` with `records`, each given the plan's
/// fingerprint.
pub(crate) fn side(id: &str, plan: &Plan, records: Vec<ResultRecord>) -> RunSide {
    side_with(id, plan, None, records)
}

fn side_with(
    id: &str,
    plan: &Plan,
    inputs: Option<RunInputs>,
    records: Vec<ResultRecord>,
) -> RunSide {
    let fps = fingerprint_all(plan);
    let stored: BTreeMap<String, ResultRecord> = records
        .into_iter()
        .map(|mut r| {
            r.fingerprint = fps.get(&r.result.task_id).cloned();
            (r.result.task_id.clone(), r)
        })
        .collect();
    let header = RunHeader {
        run_id: id.into(),
        state: RunState::Completed,
        started_at: None,
        finished_at: None,
        plan_source: None,
        location: format!("/runs/{id}"),
    };
    RunSide::new(header, plan.clone(), inputs, stored)
}

/// The template plan: `facts` reads `{{WEEK}}`, `tone` reads `{{TONE}}`,
/// `report` depends on both.
fn template_plan() -> Plan {
    serde_json::from_value(json!({"schema_version": 1,
        "variables": [{"name": "WEEK", "class": "trusted"}, {"name": "TONE", "class": "trusted", "default": "plain"}],
        "sub_tasks": [
            {"id": "facts", "description": "F", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Facts of {{WEEK}}"}}},
            {"id": "tone", "description": "T", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Be {{TONE}}"}}},
            {"id": "report", "description": "R", "dependencies": ["facts", "tone"],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Report"}}}
        ]}))
    .unwrap()
}

/// `template_plan` filled with `week` (as `ctx_prompt::plan_fill` would
/// for these trusted texts), and the inputs a run would store.
fn filled(week: &str) -> (Plan, RunInputs) {
    let written = template_plan();
    let mut plan = written.clone();
    plan.sub_tasks[0].tool_or_prompt.params.prompt = format!("Facts of {week}");
    plan.sub_tasks[1].tool_or_prompt.params.prompt = "Be plain".into();
    let values = BTreeMap::from([("WEEK".to_string(), week.to_string())]);
    (plan, RunInputs::new(&written, &values, None))
}

fn run(id: &str, week: &str, outputs: [(&str, &str, &str); 3]) -> RunSide {
    let (plan, inputs) = filled(week);
    let records = outputs.iter().map(|(t, s, o)| record(t, s, o)).collect();
    side_with(id, &plan, Some(inputs), records)
}

fn find<'d>(d: &'d RunDiff, id: &str) -> &'d TaskDiff {
    d.tasks.iter().find(|t| t.id == id).unwrap()
}

#[test]
fn a_changed_variable_is_named_for_the_tasks_that_read_it_and_its_output_downstream() {
    let a = run(
        "A",
        "W1",
        [
            ("facts", "completed", "one"),
            ("tone", "completed", "calm"),
            ("report", "completed", "r1"),
        ],
    );
    let b = run(
        "B",
        "W2",
        [
            ("facts", "completed", "two"),
            ("tone", "completed", "calm, again"),
            ("report", "completed", "r2"),
        ],
    );
    let d = compare(&a, &b, &DiffOptions::default()).unwrap();
    assert_eq!(
        find(&d, "facts").causes,
        [Cause::Variable {
            name: "WEEK".into()
        }]
    );
    // `tone` reads TONE only, which did not change: the model's variance.
    assert_eq!(find(&d, "tone").causes, [Cause::SameInputs]);
    // `report` reads neither; two of its dependencies' outputs changed.
    assert_eq!(
        find(&d, "report").causes,
        [
            Cause::Dependency {
                name: "facts".into()
            },
            Cause::Dependency {
                name: "tone".into()
            }
        ]
    );
    assert_eq!((d.summary.output, d.summary.same), (3, 0));
}

#[test]
fn an_edited_prompt_an_engine_and_an_unrecorded_fingerprint_are_told_apart() {
    let outputs = [
        ("facts", "completed", "one"),
        ("tone", "completed", "calm"),
        ("report", "completed", "r"),
    ];
    let a = run("A", "W1", outputs);
    let mut b = run("B", "W1", outputs);
    // `tone`'s prompt edited as written (the filled plan and the template).
    for plan in [&mut b.plan, &mut b.inputs.as_mut().unwrap().plan] {
        plan.sub_tasks[1].tool_or_prompt.params.prompt = "Be {{TONE}}, briefly".into();
    }
    let fps = fingerprint_all(&b.plan);
    b.latest.get_mut("tone").unwrap().fingerprint = fps.get("tone").cloned();
    b.latest.get_mut("report").unwrap().engine = "openai".into();
    b.latest.get_mut("facts").unwrap().fingerprint = None;
    b.latest.get_mut("facts").unwrap().result.output = "uno".into();
    let d = compare(&a, &b, &DiffOptions::default()).unwrap();
    assert_eq!(find(&d, "tone").causes, [Cause::Prompt]);
    assert_eq!(
        find(&d, "report").causes,
        [
            Cause::Engine {
                a: "command".into(),
                b: "openai".into()
            },
            Cause::Dependency {
                name: "facts".into()
            }
        ]
    );
    assert_eq!(find(&d, "facts").causes, [Cause::NotRecorded]);
    assert_eq!(find(&d, "tone").change, Change::Same);
}

#[test]
fn status_check_regressions_and_missing_tasks_count_against_b() {
    let plan = map_plan(&["a", "b", "c"]);
    let mut checked = record("a", "completed", "x");
    checked.result.metadata.checks =
        serde_json::from_value(json!([{"kind": "contains", "passed": true, "message": "ok"}]))
            .unwrap();
    let a = side(
        "A",
        &plan,
        vec![
            checked.clone(),
            record("b", "completed", "y"),
            record("c", "completed", "z"),
        ],
    );
    let mut failing = checked.clone();
    failing.result.metadata.checks[0].passed = false;
    let plan_b = map_plan(&["a", "b"]);
    let b = side("B", &plan_b, vec![failing, record("b", "failed", "")]);
    let d = compare(&a, &b, &DiffOptions::default()).unwrap();
    assert_eq!(d.summary.check_regressions, ["a"]);
    // `c` is gone: it did not complete in B.
    assert_eq!(d.summary.status_regressions, ["b", "c"]);
    assert_eq!(find(&d, "c").change, Change::Removed);
    assert_eq!(find(&d, "a").change, Change::Checks);
    // Changed tasks first.
    let order: Vec<&str> = d.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(order, ["b", "c", "a", "m"]);
    // With one task kept (`--task`), the gate still judges them all.
    let kept = DiffOptions {
        task: Some("m".into()),
        ..DiffOptions::default()
    };
    let d = compare(&a, &b, &kept).unwrap();
    assert_eq!(d.tasks.len(), 1);
    let tripped = judge(
        &d,
        &[
            Condition::CheckRegression,
            Condition::Status,
            Condition::Output,
        ],
    );
    let names: Vec<String> = tripped.iter().map(|t| t.condition.to_string()).collect();
    assert_eq!(names, ["check-regression", "status", "output"]);
    assert_eq!(tripped[1].detail, "b, c");
    // A gone task with passing checks is a check regression too.
    let b2 = side("B", &plan_b, vec![record("b", "completed", "y")]);
    let a2 = side("A", &plan, vec![checked, record("b", "completed", "y")]);
    let d = compare(&a2, &b2, &DiffOptions::default()).unwrap();
    assert_eq!(d.summary.check_regressions, ["a"]);
}

#[test]
fn runs_with_no_task_in_common_are_refused_unless_allowed() {
    let a = side("A", &map_plan(&["x"]), vec![]);
    let mut other = map_plan(&["y"]);
    other.sub_tasks.pop();
    let b = side("B", &other, vec![]);
    // `m` is in A only; `x` and `y` are not shared.
    let mut a_only = a.clone();
    a_only.plan.sub_tasks.pop();
    a_only.tasks.pop();
    let e = compare(&a_only, &b, &DiffOptions::default()).unwrap_err();
    assert!(matches!(e, DiffError::Disjoint { .. }), "{e}");
    assert!(e.to_string().contains("--allow-disjoint"), "{e}");
    let allowed = DiffOptions {
        allow_disjoint: true,
        ..DiffOptions::default()
    };
    let d = compare(&a_only, &b, &allowed).unwrap();
    assert_eq!((d.summary.new, d.summary.removed), (1, 1));
}

#[test]
fn totals_and_the_cost_gate() {
    let plan = map_plan(&["a"]);
    let with = |cost: &str, ms: u64| {
        let mut r = record("a", "completed", "x");
        r.result.metadata.cost_usd = Some(Usd::parse(cost).unwrap());
        r.result.metadata.execution_time_ms = Some(ms);
        r
    };
    let a = side("A", &plan, vec![with("0.010", 1000)]);
    let b = side("B", &plan, vec![with("0.0125", 1400)]);
    let d = compare(&a, &b, &DiffOptions::default()).unwrap();
    assert_eq!(d.summary.time_ms.delta, Some(400));
    let cost = |p: f64| Condition::Cost(gate::Threshold { percent: p });
    let time = |p: f64| Condition::Time(gate::Threshold { percent: p });
    assert_eq!(judge(&d, &[cost(25.0), time(40.0)]), []);
    let names: Vec<String> = judge(&d, &[cost(20.0), time(30.0)])
        .iter()
        .map(|t| t.condition.to_string())
        .collect();
    assert_eq!(names, ["cost:+20%", "time:+30%"]);
    assert_eq!(find(&d, "a").change, Change::Same);
    assert_eq!(
        d.tasks[0].status.b,
        Some(TaskStatus::Completed),
        "{:?}",
        d.tasks
    );
}

/// The JSON (`ctx runs diff --format json`) and the text of one
/// comparison, byte for byte: its keys, their order and the figures'
/// forms are documented (docs/runs.md) and tools read them.
#[test]
fn the_json_and_the_text_are_golden() {
    let mut a = run(
        "A",
        "W1",
        [
            ("facts", "completed", "Facts of W1\nline two\n"),
            ("tone", "completed", "calm"),
            ("report", "completed", "r"),
        ],
    );
    let mut b = run(
        "B",
        "W2",
        [
            ("facts", "completed", "Facts of W2\nline two\n"),
            ("tone", "completed", "calm"),
            ("report", "failed", ""),
        ],
    );
    b.header.state = RunState::Running;
    let figures = |r: &mut ResultRecord, tokens: u64, cost: &str, ms: u64| {
        let m = &mut r.result.metadata;
        m.tokens_used = Some(
            serde_json::from_value(
                json!({"prompt_tokens": tokens - 10, "completion_tokens": 10,
                "total_tokens": tokens, "cached_tokens": tokens / 2}),
            )
            .unwrap(),
        );
        m.cost_usd = Some(Usd::parse(cost).unwrap());
        m.execution_time_ms = Some(ms);
        m.attempts = vec![ctx_model::Attempt::default()];
    };
    figures(a.latest.get_mut("facts").unwrap(), 100, "0.001", 900);
    figures(b.latest.get_mut("facts").unwrap(), 120, "0.0012", 1200);
    figures(a.latest.get_mut("report").unwrap(), 50, "0.0005", 300);
    let d = compare(&a, &b, &DiffOptions::default()).unwrap();
    let mut json = serde_json::to_string_pretty(&d).unwrap();
    json.push('\n');
    insta::assert_snapshot!("diff_json", json);
    insta::assert_snapshot!("diff_text", d.text());
    let one = DiffOptions {
        task: Some("facts".into()),
        ..DiffOptions::default()
    };
    insta::assert_snapshot!("diff_task_text", compare(&a, &b, &one).unwrap().task_text());
}

/// The HTML page: self-contained, every stored string escaped, no
/// script allowed to run, each changed task linked to its section with
/// its diff.
#[test]
fn the_html_page_escapes_what_runs_stored_and_runs_no_script() {
    let a = run(
        "A",
        "W1",
        [
            ("facts", "completed", "<b>one</b>\n"),
            ("tone", "completed", "calm"),
            ("report", "completed", "r"),
        ],
    );
    let b = run(
        "B",
        "W2",
        [
            ("facts", "completed", "<script>alert(1)</script>\n"),
            ("tone", "completed", "calm"),
            ("report", "completed", "r"),
        ],
    );
    let options = DiffOptions {
        diffs: true,
        ..DiffOptions::default()
    };
    let html = compare(&a, &b, &options).unwrap().html();
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<b>"), "{html}");
    assert!(
        html.contains("<span class=\"add\">+&lt;script&gt;alert(1)&lt;/script&gt;</span>"),
        "{html}"
    );
    assert!(html.contains("content=\"default-src 'none'; style-src 'unsafe-inline';"));
    // `facts` is the first row (output), linked to its section.
    assert!(html.contains("<a href=\"#task-0\">facts</a>"), "{html}");
    assert!(
        html.contains("<section class=\"task\" id=\"task-0\">"),
        "{html}"
    );
    assert!(html.contains("cause    variable WEEK"), "{html}");
    // `tone` is the same: a row, no section.
    assert!(!html.contains("id=\"task-2\""), "{html}");
    insta::assert_snapshot!("diff_html", html);
}

/// Each part of a task's own inputs is named when it alone changed (the
/// plans as run, no inputs stored: a plan without templates).
#[test]
fn each_own_input_is_named_when_it_changed() {
    let base: Plan = serde_json::from_value(json!({"schema_version": 1,
        "entities": [{"name": "Board", "grounded_value": "10 x 20"}],
        "sub_tasks": [
            {"id": "up", "description": "U", "tool_or_prompt": {"name": "inference", "params": {"prompt": "u"}}},
            {"id": "t", "description": "T", "dependencies": ["up"],
             "entity_context": [{"entity_name": "Board", "intent_relevance": "constraint"}],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "model": "m1", "temperature": 0.0}}}
        ]}))
    .unwrap();
    let records = || {
        vec![
            record("up", "completed", "u"),
            record("t", "completed", "x"),
        ]
    };
    let a = side("A", &base, records());
    let causes_with = |edit: &dyn Fn(&mut Plan)| {
        let mut plan = base.clone();
        edit(&mut plan);
        let b = side("B", &plan, records());
        let d = compare(&a, &b, &DiffOptions::default()).unwrap();
        find(&d, "t").causes.clone()
    };
    fn params(p: &mut Plan) -> &mut ctx_model::Params {
        &mut p.sub_tasks[1].tool_or_prompt.params
    }
    assert_eq!(
        causes_with(&|p| params(p).prompt = "q".into()),
        [Cause::Prompt]
    );
    assert_eq!(
        causes_with(&|p| p.entities[0].grounded_value = Some("12 x 24".into())),
        [Cause::Entity {
            name: "Board".into()
        }]
    );
    assert_eq!(
        causes_with(&|p| params(p).model = Some("m2".into())),
        [Cause::Model {
            a: Some("m1".into()),
            b: Some("m2".into())
        }]
    );
    assert_eq!(
        causes_with(&|p| params(p).temperature = Some(0.7)),
        [Cause::Params]
    );
    assert_eq!(
        causes_with(&|p| p.sub_tasks[0].description = "U, renamed".into()),
        [Cause::Dependencies]
    );
    assert_eq!(
        causes_with(&|p| p.config.max_prompt_tokens = 1234),
        [Cause::Config]
    );
    assert_eq!(
        causes_with(&|p| p.sub_tasks[1]
            .checks
            .push(serde_json::from_value(json!({"contains": "x"})).unwrap())),
        [Cause::Checks]
    );
    // Nothing changed and the same output: no cause at all.
    assert_eq!(causes_with(&|_| {}), []);
}

/// A map run with the list `list` and the map's prompt `prompt`: the map
/// task and one item per entry (their hashes as an expansion gives them:
/// the prompt and the item).
fn map_run(id: &str, prompt: &str, list: &[&str]) -> RunSide {
    let mut written = map_plan(&[]);
    written.sub_tasks[0].tool_or_prompt.params.prompt = prompt.into();
    let text = serde_json::to_string(list).unwrap();
    let values = BTreeMap::from([("LIST".to_string(), text)]);
    let inputs = RunInputs::new(&written, &values, None);
    let mut m = record("m", "completed", &list.join(","));
    m.result.metadata.map_items = Some(list.len());
    let mut records = vec![m];
    for (k, item) in list.iter().enumerate() {
        let mut r = record(&format!("m[{k}]"), "completed", &format!("{prompt} {item}"));
        r.result.metadata.map_item_hash = Some(format!("{prompt} {item}"));
        records.push(r);
    }
    side_with(id, &written, Some(inputs), records)
}

/// An item whose own entry changed is named `item` beside a change of its
/// map task's prompt, which changes every item's hash; an item whose entry
/// stayed is not. The map task names the list's variable.
#[test]
fn an_items_own_change_is_named_beside_its_map_tasks() {
    let a = map_run("A", "weigh it", &["x", "y"]);
    let b = map_run("B", "weigh it again", &["x", "z"]);
    let d = compare(&a, &b, &DiffOptions::default()).unwrap();
    let names = |id: &str| -> Vec<String> {
        find(&d, id)
            .causes
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(names("m[0]"), ["prompt"]);
    assert_eq!(names("m[1]"), ["prompt", "item"]);
    assert_eq!(names("m"), ["prompt", "variable LIST"]);
    // With the prompt unchanged, the list alone.
    let c = map_run("C", "weigh it", &["x", "z"]);
    let d = compare(&a, &c, &DiffOptions::default()).unwrap();
    assert_eq!(find(&d, "m[1]").causes, [Cause::Item]);
    assert_eq!(
        find(&d, "m").causes,
        [Cause::Variable {
            name: "LIST".into()
        }]
    );
    assert_eq!(find(&d, "m[0]").change, Change::Same);
}
