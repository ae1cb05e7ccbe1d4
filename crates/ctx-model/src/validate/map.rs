//! The rules of a sub-task's `map:` block that need no template language:
//! its source, pointer, placeholder name and limits, the item ids it will
//! make, and a map over another map's items (refused).
//!
//! A bare item placeholder outside a fence is a template rule, judged by
//! ctx-prompt's `plan_fill::template_problems` beside these.

use std::collections::HashMap;

use super::rules::TaskReport;
use super::{Problem, ProblemCode, quoted};
use crate::map::{MapSpec, parse_item_id};
use crate::plan::{Plan, SubTask};
use crate::variables::{HISTORICAL_CONTEXT, VariableType, is_valid_name};

/// The problems of every task's `map:` block, in file order.
pub(super) fn check_maps(plan: &Plan, out: &mut Vec<Problem>) {
    let maps: HashMap<&str, usize> = plan
        .sub_tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.map.is_some())
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    for (i, task) in plan.sub_tasks.iter().enumerate() {
        let mut report = TaskReport {
            i,
            task_id: Some(task.id.clone()),
            out: &mut *out,
        };
        if let Some((map_task, _)) = parse_item_id(&task.id)
            && maps.contains_key(map_task)
        {
            report.push(
                ProblemCode::ItemIdClash,
                "id",
                format!(
                    "{} is the id of an item of map task {}; rename the task",
                    quoted(&task.id),
                    quoted(map_task)
                ),
            );
        }
        let Some(m) = &task.map else { continue };
        check_source(plan, task, m, &maps, &mut report);
        check_item(plan, task, m, &mut report);
        check_max_items(task, m, &mut report);
        if task.publish.is_some() {
            report.push(
                ProblemCode::InvalidMap,
                "publish",
                "a map task has one output per item; publish the reduce instead".into(),
            );
        }
    }
}

/// Where a map's items come from: `over` names a `json` variable that is
/// not secret, or a dependency that is not itself a map (`maps`: the map
/// tasks by id), and not both; `pointer` is a JSON Pointer.
fn check_source(
    plan: &Plan,
    task: &SubTask,
    m: &MapSpec,
    maps: &HashMap<&str, usize>,
    report: &mut TaskReport<'_>,
) {
    let variable = plan.variables.iter().find(|v| v.name == m.over);
    let is_dependency = task.dependencies.contains(&m.over);
    match (variable, is_dependency) {
        (Some(_), true) => report.push(
            ProblemCode::InvalidMap,
            "map.over",
            format!(
                "{} names both a variable and a dependency; rename one",
                quoted(&m.over)
            ),
        ),
        // A store hides a secret by its whole text; an item is a part
        // of it (an object re-serialized), which no mask would find.
        (Some(v), false) if v.secret => report.push(
            ProblemCode::InvalidMap,
            "map.over",
            format!(
                "variable {} is secret: a map may not read a secret variable (its items would be stored in clear)",
                quoted(&m.over)
            ),
        ),
        (Some(v), false) if v.value_type != VariableType::Json => report.push(
            ProblemCode::MapSourceNotJson,
            "map.over",
            format!(
                "variable {} is `type: text`; a map reads a `type: json` variable",
                quoted(&m.over)
            ),
        ),
        (None, false) => report.push(
            ProblemCode::UnknownMapSource,
            "map.over",
            format!(
                "{} is neither a declared variable nor a dependency of this task",
                quoted(&m.over)
            ),
        ),
        (None, true) if maps.contains_key(m.over.as_str()) => report.push(
            ProblemCode::MapOverMap,
            "map.over",
            format!(
                "{} is a map task: a map over another map's items is not supported",
                quoted(&m.over)
            ),
        ),
        _ => {}
    }
    if let Some(p) = &m.pointer
        && !p.is_empty()
        && !p.starts_with('/')
    {
        report.push(
            ProblemCode::InvalidMap,
            "map.pointer",
            format!(
                "{} is not an RFC 6901 JSON Pointer: it must be empty or start with `/`",
                quoted(p)
            ),
        );
    }
}

/// The item's placeholder: a valid name of its own (not a variable's,
/// nor the digest's), and never in the system prompt.
fn check_item(plan: &Plan, task: &SubTask, m: &MapSpec, report: &mut TaskReport<'_>) {
    // The item is data: it goes in the task's prompt, inside a fence.
    // In the system prompt it would sit among the instructions, and
    // `--max-cost` bounds an item's call by the template's system
    // prompt, which an item there would outgrow.
    if task
        .tool_or_prompt
        .params
        .system
        .as_deref()
        .is_some_and(|s| s.contains(&format!("{{{{{}}}}}", m.item)))
    {
        report.push(
            ProblemCode::InvalidMap,
            "tool_or_prompt.params.system",
            format!(
                "holds the item placeholder {}: an item goes in the prompt, inside a fence, never in the system prompt",
                quoted(&format!("{{{{{}}}}}", m.item))
            ),
        );
    }
    if !is_valid_name(&m.item) {
        report.push(
            ProblemCode::InvalidMap,
            "map.as",
            format!(
                "{} is not a placeholder name ([A-Z][A-Z0-9_]*)",
                quoted(&m.item)
            ),
        );
    } else if m.item == HISTORICAL_CONTEXT || plan.variables.iter().any(|v| v.name == m.item) {
        report.push(
            ProblemCode::MapItemClash,
            "map.as",
            format!(
                "{} is already a variable; the item needs a name of its own",
                quoted(&m.item)
            ),
        );
    }
}

/// The map's `max_items`: given, at least 1, and small enough that the
/// last item's id is within the id limit.
fn check_max_items(task: &SubTask, m: &MapSpec, report: &mut TaskReport<'_>) {
    match m.max_items {
        None => report.push(
            ProblemCode::MissingMaxItems,
            "map.max_items",
            "is required: the longest list the map accepts (a longer one fails the task, and is never cut)".into(),
        ),
        Some(0) => report.push(
            ProblemCode::InvalidMap,
            "map.max_items",
            "must be at least 1".into(),
        ),
        Some(n) => {
            let longest = crate::map::item_id(&task.id, n - 1).len();
            if longest > crate::MAX_ID_BYTES {
                report.push(
                    ProblemCode::InvalidId,
                    "id",
                    format!(
                        "its item ids reach {longest} bytes (at most {}); shorten the id",
                        crate::MAX_ID_BYTES
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{plan, task};
    use super::*;
    use crate::map::MapSpec;
    use crate::variables::Variable;

    fn spec(over: &str, item: &str, max: Option<usize>) -> MapSpec {
        MapSpec {
            over: over.into(),
            pointer: None,
            item: item.into(),
            max_items: max,
            allow_failures: 0,
            variable_value: None,
        }
    }

    fn var(name: &str, json: bool) -> Variable {
        let mut v: Variable = serde_json::from_value(serde_json::json!({ "name": name })).unwrap();
        if json {
            v.value_type = VariableType::Json;
        }
        v
    }

    fn found(p: &Plan) -> Vec<(ProblemCode, String)> {
        super::super::validate(p)
            .into_iter()
            .map(|p| (p.code, p.field))
            .collect()
    }

    #[test]
    fn a_map_over_a_json_variable_or_a_dependency_is_valid() {
        let mut a = task("a", &[]);
        a.map = Some(spec("RAW", "REPO", Some(10)));
        let mut b = task("b", &["src"]);
        b.map = Some(spec("src", "ITEM", Some(3)));
        let mut p = plan(vec![task("src", &[]), a, b, task("reduce", &["a", "b"])]);
        p.variables = vec![var("RAW", true)];
        assert_eq!(found(&p), []);
    }

    #[test]
    fn every_rule_of_the_block_is_located() {
        let mut p = plan(vec![task("src", &[]), task("m", &["src"])]);
        p.variables = vec![var("TEXT", false), var("ITEM", true)];
        let mut bad = |m: MapSpec| {
            p.sub_tasks[1].map = Some(m);
            found(&p)
        };
        let f = |code: ProblemCode, field: &str| vec![(code, format!("sub_tasks[1].{field}"))];
        assert_eq!(
            bad(spec("nope", "X", Some(1))),
            f(ProblemCode::UnknownMapSource, "map.over")
        );
        assert_eq!(
            bad(spec("TEXT", "X", Some(1))),
            [(
                ProblemCode::MapSourceNotJson,
                "sub_tasks[1].map.over".into()
            ),]
        );
        assert_eq!(
            bad(spec("src", "ITEM", Some(1))),
            f(ProblemCode::MapItemClash, "map.as")
        );
        assert_eq!(
            bad(spec("src", "X", None)),
            f(ProblemCode::MissingMaxItems, "map.max_items")
        );
        let mut pointer = spec("src", "X", Some(1));
        pointer.pointer = Some("items".into());
        assert_eq!(bad(pointer), f(ProblemCode::InvalidMap, "map.pointer"));
        assert_eq!(
            bad(spec("src", "x", Some(1))),
            f(ProblemCode::InvalidMap, "map.as")
        );
        // A secret source, and the item in the system prompt.
        p.variables.push(var("KEY", true));
        p.variables[2].secret = true;
        let mut bad = |m: MapSpec| {
            p.sub_tasks[1].dependencies.clear();
            p.sub_tasks[1].map = Some(m);
            found(&p)
        };
        assert_eq!(
            bad(spec("KEY", "X", Some(1))),
            f(ProblemCode::InvalidMap, "map.over")
        );
        p.sub_tasks[1].dependencies = vec!["src".into()];
        p.sub_tasks[1].tool_or_prompt.params.system = Some("Judge {{X}}.".into());
        p.sub_tasks[1].map = Some(spec("src", "X", Some(1)));
        assert_eq!(
            found(&p),
            f(ProblemCode::InvalidMap, "tool_or_prompt.params.system")
        );
    }

    #[test]
    fn a_map_over_a_map_and_a_task_named_like_an_item_are_refused() {
        let mut first = task("m", &[]);
        first.map = Some(spec("src", "X", Some(2)));
        first.dependencies = vec!["src".into()];
        let mut second = task("n", &["m"]);
        second.map = Some(spec("m", "Y", Some(2)));
        let p = plan(vec![task("src", &[]), first, second, task("m[1]", &[])]);
        assert_eq!(
            found(&p),
            [
                (ProblemCode::MapOverMap, "sub_tasks[2].map.over".into()),
                (ProblemCode::ItemIdClash, "sub_tasks[3].id".into()),
            ]
        );
    }
}
