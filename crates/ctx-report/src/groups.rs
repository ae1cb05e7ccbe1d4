//! A map task's items grouped under it: the order of the timeline's rows
//! and of the task table's rows.
//!
//! An item (`TaskReport::item_of` naming its map task) is drawn right after
//! its map task, indented, and the items of one map in the order the view
//! asks (by start in the timeline, as listed in the table). A run of 190
//! items otherwise interleaves with every other task by start time, and the
//! map task that joined them is lost among them. The input may be
//! hand-written, so nothing here trusts it: an item whose map task is not
//! in the input, or is itself an item, stays a task of its own.

use std::collections::HashMap;

use crate::input::RunReportInput;

/// Per task (input order): the index of the map task it is an item of,
/// when that task is in the input and is not itself an item.
pub fn parents(input: &RunReportInput) -> Vec<Option<usize>> {
    let mut first: HashMap<&str, usize> = HashMap::with_capacity(input.tasks.len());
    for (i, t) in input.tasks.iter().enumerate() {
        first.entry(t.id.as_str()).or_insert(i);
    }
    input
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let m = *first.get(t.item_of.as_deref()?)?;
            (m != i && input.tasks[m].item_of.is_none()).then_some(m)
        })
        .collect()
}

/// Every task once: the tasks that are no item ordered by `key`, each
/// followed by its items ordered by `key`.
pub fn grouped_order<K: Ord>(parents: &[Option<usize>], key: impl Fn(usize) -> K) -> Vec<usize> {
    let mut top: Vec<usize> = (0..parents.len())
        .filter(|&i| parents[i].is_none())
        .collect();
    top.sort_by_key(|&i| (key(i), i));
    let mut items: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, p) in parents.iter().enumerate() {
        if let Some(m) = p {
            items.entry(*m).or_default().push(i);
        }
    }
    let mut out = Vec::with_capacity(parents.len());
    for m in top {
        out.push(m);
        if let Some(mut mine) = items.remove(&m) {
            mine.sort_by_key(|&i| (key(i), i));
            out.extend(mine);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{RunStatus, TaskReport, TaskState};

    fn run(tasks: &[(&str, Option<&str>)]) -> RunReportInput {
        RunReportInput {
            run_id: "r".into(),
            plan: "p".into(),
            status: RunStatus::Completed,
            started_at: None,
            ended_at: None,
            as_of: None,
            tasks: tasks
                .iter()
                .map(|(id, of)| {
                    let mut t = TaskReport::new(*id, TaskState::Completed);
                    t.item_of = of.map(str::to_string);
                    t
                })
                .collect(),
            published: Vec::new(),
            fallback: None,
            decisions: Vec::new(),
        }
    }

    #[test]
    fn items_follow_their_map_task_in_key_order() {
        let input = run(&[
            ("m[1]", Some("m")),
            ("a", None),
            ("m", None),
            ("m[0]", Some("m")),
            ("b", None),
        ]);
        let parents = parents(&input);
        assert_eq!(parents, [Some(2), None, None, Some(2), None]);
        assert_eq!(grouped_order(&parents, |i| i), [1, 2, 0, 3, 4]);
        // By a key that puts `m[0]` first and `b` before `a`.
        let key = [1, 9, 5, 0, 2];
        assert_eq!(grouped_order(&parents, |i| key[i]), [4, 2, 3, 0, 1]);
    }

    #[test]
    fn an_item_of_no_task_or_of_an_item_stays_a_task_of_its_own() {
        let input = run(&[
            ("x[0]", Some("x")),
            ("p", Some("q")),
            ("q", Some("p")),
            ("self", Some("self")),
        ]);
        let parents = parents(&input);
        assert_eq!(parents, [None, None, None, None]);
        assert_eq!(grouped_order(&parents, |i| i), [0, 1, 2, 3]);
    }
}
