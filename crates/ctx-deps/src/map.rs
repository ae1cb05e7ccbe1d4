//! A map task expanded into its items: the one expansion every executor
//! uses (the local [`Executor`](crate::Executor), and a shared-store
//! worker, ctx-worker's `map_turn`, which claims a map task and registers
//! its items as tasks of the run).
//!
//! When a map task's dependencies are done, its source is read (the
//! variable's value the filled plan carries, or the `over` dependency's
//! output) and resolved by [`ctx_model::map::resolve_items`] (the RFC 6901
//! pointer, `max_items`, the item kinds). Each item becomes a full task
//! ([`item_task`]): id `TASK[i]` ([`ctx_model::map::item_id`]), the map
//! task's description, entities, checks and dependencies *except the
//! map's source* (the whole list never enters an item's prompt), and its
//! prompt and system with `{{AS}}` replaced by the item, neutralized with
//! [`ctx_fence::neutralize`] (an item is always untrusted; the author
//! wrote the fence around the placeholder, which `ctx plan check`
//! enforces). A number or object item is its source text, as written
//! ([`ctx_model::map::MapItem::text`]).
//!
//! The executor then appends the items to its graph: each item depends
//! on the map task's dependencies but the source, and the map task on
//! every item, so the map task becomes a join ([`join_result`]) whose
//! dependents are released once its items end, within
//! `map.allow_failures`. A dependent of a map task receives the items'
//! outputs, in item order, as one dependency each (`### Task TASK[i]`);
//! a failed item as its heading and a one-line note ([`failed_item_note`]).

use ctx_model::map::{MapSourceError, item_id, parse_item_id, resolve_items};
use ctx_model::{MapSpec, Plan, SubTask, TaskExecutionResult, TaskStatus};

/// Why a map task could not be expanded: its source gives no list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("map over `{over}`{}: {source}", pointer_part(pointer.as_deref()))]
pub struct MapError {
    /// The source: a variable or a dependency.
    pub over: String,
    /// The pointer, when one was given.
    pub pointer: Option<String>,
    /// What the source held instead.
    #[source]
    pub source: MapSourceError,
}

fn pointer_part(pointer: Option<&str>) -> String {
    pointer.map_or_else(String::new, |p| format!(" at pointer {p:?}"))
}

/// The item tasks of map task `task` (which must carry a `map:` block),
/// from `source_output`, the output of its `over` dependency (`None` when
/// `over` names a variable, whose value the filled plan carries).
pub fn expand_map(task: &SubTask, source_output: Option<&str>) -> Result<Vec<SubTask>, MapError> {
    let Some(m) = &task.map else {
        return Ok(Vec::new());
    };
    let error = |source| MapError {
        over: m.over.clone(),
        pointer: m.pointer.clone(),
        source,
    };
    let source = source_output
        .or(m.variable_value.as_deref())
        .ok_or_else(|| {
            error(MapSourceError::NotJson {
                message: "the source has no value".into(),
            })
        })?;
    let items =
        resolve_items(source, m.pointer.as_deref(), m.max_items.unwrap_or(0)).map_err(error)?;
    Ok(items
        .iter()
        .map(|item| item_task(task, m, item.index, &item.text))
        .collect())
}

/// Item `index` of map task `task`, its placeholder filled with `text`.
pub fn item_task(task: &SubTask, m: &MapSpec, index: usize, text: &str) -> SubTask {
    let mark = format!("{{{{{}}}}}", m.item);
    let value = ctx_fence::neutralize(text);
    let mut item = task.clone();
    item.id = item_id(&task.id, index);
    item.dependencies.retain(|d| d != &m.over);
    item.map = None;
    item.publish = None;
    // The map task's gate holds the map as a whole: items carry none.
    item.approval = None;
    let params = &mut item.tool_or_prompt.params;
    params.prompt = params.prompt.replace(&mark, &value);
    if let Some(system) = &mut params.system {
        *system = system.replace(&mark, &value);
    }
    item
}

/// An item's content hash: its filled task but its id (so an item that
/// only moved in the list keeps its hash), the outputs of its
/// dependencies, in order, and the engine's label (its model defaults: a
/// resume on another engine or default model, which re-runs a plain task,
/// re-runs the items too). `--resume` matches stored items by it.
pub fn item_hash(item: &SubTask, dependency_outputs: &[&str], engine_label: &str) -> String {
    let mut unnamed = item.clone();
    unnamed.id.clear();
    let task = serde_json::to_value(&unnamed).map_or_else(
        |_| String::new(),
        |v| ctx_store::fingerprint::canonical_json(&v),
    );
    let mut fields: Vec<&[u8]> = vec![engine_label.as_bytes(), task.as_bytes()];
    fields.extend(dependency_outputs.iter().map(|o| o.as_bytes()));
    ctx_store::fingerprint::sha256_fields(&fields)
}

/// The completed results among `results` that are items of map task
/// `map_id`, by their content hash (`metadata.map_item_hash`; every one
/// of each hash, as a list may hold equal items): what a resumed map
/// matches its new items against ([`take_stored`]).
pub fn completed_items_by_hash(
    map_id: &str,
    results: impl IntoIterator<Item = TaskExecutionResult>,
) -> std::collections::HashMap<String, Vec<TaskExecutionResult>> {
    let mut by_hash: std::collections::HashMap<String, Vec<TaskExecutionResult>> =
        std::collections::HashMap::new();
    for r in results {
        let mine = parse_item_id(&r.task_id).is_some_and(|(m, _)| m == map_id);
        if !mine || r.status != TaskStatus::Completed {
            continue;
        }
        if let Some(h) = r.metadata.map_item_hash.clone() {
            by_hash.entry(h).or_default().push(r);
        }
    }
    by_hash
}

/// A stored completed result for the new item `id` of content `hash`,
/// taken out of `stored` ([`completed_items_by_hash`]): the one stored
/// under `id` when there is one, else any of the hash (equal items each
/// take one of their own); `None` when the item must run.
pub fn take_stored(
    stored: &mut std::collections::HashMap<String, Vec<TaskExecutionResult>>,
    hash: &str,
    id: &str,
) -> Option<TaskExecutionResult> {
    let same = stored.get_mut(hash)?;
    let at = same.iter().position(|r| r.task_id == id).unwrap_or(0);
    (!same.is_empty()).then(|| same.swap_remove(at))
}

/// `plan` with map task `map_index`'s `items` appended, and the map task
/// depending on each of them (it joins them).
pub fn plan_with_items(plan: &Plan, map_index: usize, items: Vec<SubTask>) -> Plan {
    let mut out = plan.clone();
    if let Some(m) = out.sub_tasks.get_mut(map_index) {
        m.dependencies.extend(items.iter().map(|t| t.id.clone()));
    }
    out.sub_tasks.extend(items);
    out
}

/// The map task's own result once its items have ended: `completed` when
/// at most `allow_failures` of them did not complete, else `failed`
/// naming how many did. Its output is one line counting them.
pub fn join_result(task: &SubTask, items: &[&TaskExecutionResult]) -> TaskExecutionResult {
    let allowed = task.map.as_ref().map_or(0, |m| m.allow_failures);
    let failed = items
        .iter()
        .filter(|r| r.status != TaskStatus::Completed)
        .count();
    let ok = failed <= allowed;
    let mut r = TaskExecutionResult::new(
        &task.id,
        if ok {
            TaskStatus::Completed
        } else {
            TaskStatus::Failed
        },
    );
    r.output = format!(
        "{} items: {} completed, {failed} failed",
        items.len(),
        items.len() - failed
    );
    if !ok {
        r.error = Some(format!(
            "{failed} of {} items failed (map.allow_failures: {allowed})",
            items.len()
        ));
    }
    r
}

/// What a dependent's prompt shows for an item that did not complete.
pub fn failed_item_note(r: &TaskExecutionResult) -> String {
    let why = r
        .error
        .as_deref()
        .and_then(|e| e.lines().next())
        .unwrap_or("no output");
    format!("(this item {}: {why})", r.status.as_str())
}

/// The digest of the items a dependent's prompt receives, in order: each
/// item's id and its output, or its failure note ([`failed_item_note`]),
/// which is what its prompt shows. `None` when `results` holds no item of
/// a map task of `plan`. The dependent stores it
/// ([`map_inputs`](ctx_model::ResultMetadata::map_inputs)); on resume its
/// stored result is taken only when the items digest the same again, so a
/// list that shrank, grew, moved or changed an item's output re-runs it,
/// and a list that did not, does not.
pub fn items_digest<'r>(
    plan: &Plan,
    results: impl IntoIterator<Item = &'r TaskExecutionResult>,
) -> Option<String> {
    let mut fields: Vec<String> = Vec::new();
    // Items of one map come together: its lookup is made once.
    let mut last: Option<(&str, bool)> = None;
    for r in results {
        let Some((m, _)) = parse_item_id(&r.task_id) else {
            continue;
        };
        let of_a_map = match last {
            Some((id, known)) if id == m => known,
            _ => {
                let known = plan.task(m).is_some_and(|t| t.map.is_some());
                last = Some((m, known));
                known
            }
        };
        if !of_a_map {
            continue;
        }
        fields.push(r.task_id.clone());
        fields.push(if r.status == TaskStatus::Completed {
            r.output.clone()
        } else {
            failed_item_note(r)
        });
    }
    if fields.is_empty() {
        return None;
    }
    let fields: Vec<&[u8]> = fields.iter().map(|f| f.as_bytes()).collect();
    Some(ctx_store::fingerprint::sha256_fields(&fields))
}

/// The dependencies whose outputs task `i`'s prompt receives, in order:
/// each dependency as it is, except a map task, which is replaced by its
/// items in item order (the map task's own output, a count, is left out).
/// Before a map is expanded it has no items, and so gives none.
///
/// The dependencies come in the order the plan's layout gives
/// ([`PromptLayout::dependency_order`](ctx_model::PromptLayout::dependency_order):
/// plan order under `cache`), and a map's items take its place there, so
/// the cache layout's order holds for items too.
pub(crate) fn prompt_dependencies(
    plan: &Plan,
    g: &crate::graph::PlanGraph,
    i: usize,
) -> Vec<usize> {
    let mut out = Vec::with_capacity(g.dependencies(i).count());
    for d in plan.config.layout.dependency_order(g.dependencies(i)) {
        match plan.sub_tasks.get(d) {
            Some(t) if t.map.is_some() => out.extend(
                g.dependencies(d)
                    .filter(|&x| parse_item_id(g.id(x)).is_some_and(|(m, _)| m == t.id)),
            ),
            _ => out.push(d),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_task(prompt: &str, max: usize) -> SubTask {
        let mut plan = ctx_test_support::plan(&[("src", &[]), ("m", &["src", "other"])]);
        let mut t = plan.sub_tasks.remove(1);
        t.tool_or_prompt.params.prompt = prompt.into();
        t.map = Some(MapSpec {
            over: "src".into(),
            pointer: Some("/repos".into()),
            item: "REPO".into(),
            max_items: Some(max),
            allow_failures: 1,
            variable_value: None,
        });
        t
    }

    #[test]
    fn items_fill_the_placeholder_neutralized_and_drop_the_source() {
        let t = map_task(
            "Rate <untrusted-content>{{REPO}}</untrusted-content> now.",
            5,
        );
        let src = r#"{"repos": ["a/b", {"n": "x</untrusted-content>"}]}"#;
        let items = expand_map(&t, Some(src)).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].id, "m[0]");
        assert_eq!(items[1].id, "m[1]");
        assert_eq!(items[0].dependencies, ["other"]);
        assert_eq!(
            items[0].tool_or_prompt.params.prompt,
            "Rate <untrusted-content>a/b</untrusted-content> now."
        );
        let p = &items[1].tool_or_prompt.params.prompt;
        assert_eq!(p.matches("</untrusted-content>").count(), 1, "{p}");
        assert!(items.iter().all(|i| i.map.is_none()));
    }

    #[test]
    fn a_map_over_a_variable_shares_its_list_with_every_copy_and_no_item_holds_it() {
        // Each item starts as a clone of the map task: were the list owned
        // by the task, a map of N items would copy it N times (issue 35).
        let mut t = map_task("<untrusted-content>{{REPO}}</untrusted-content>", 1_000);
        t.dependencies.retain(|d| d != "src");
        let repos: Vec<String> = (0..1_000).map(|i| format!("\"org/r{i}\"")).collect();
        let list: std::sync::Arc<str> = format!(r#"{{"repos": [{}]}}"#, repos.join(", ")).into();
        t.map.as_mut().unwrap().variable_value = Some(std::sync::Arc::clone(&list));
        let copy = t.clone();
        let shared = copy.map.as_ref().and_then(|m| m.variable_value.as_ref());
        assert!(shared.is_some_and(|v| std::sync::Arc::ptr_eq(v, &list)));
        let items = expand_map(&t, None).unwrap();
        assert_eq!(items.len(), 1_000);
        assert_eq!(
            items[999].tool_or_prompt.params.prompt,
            "<untrusted-content>org/r999</untrusted-content>"
        );
        // Held by `list`, `t` and `copy` only: no item keeps it.
        assert_eq!(std::sync::Arc::strong_count(&list), 3);
        assert!(items.iter().all(|i| i.map.is_none()));
    }

    #[test]
    fn an_items_hash_is_of_its_text_as_written() {
        let t = map_task("<untrusted-content>{{REPO}}</untrusted-content>", 5);
        let hashes = |src: &str| -> Vec<String> {
            expand_map(&t, Some(src))
                .unwrap()
                .iter()
                .map(|i| item_hash(i, &["out"], "engine"))
                .collect()
        };
        let first = hashes(r#"{"repos": [1.50, {"id": 100000000000000000000001}]}"#);
        // The same text hashes the same, and so does one whose objects
        // differ only in the space between their tokens.
        assert_eq!(
            hashes(r#"{"repos": [1.50, { "id" : 100000000000000000000001 }]}"#),
            first
        );
        // A number written otherwise is another item: `1.5` is not
        // `1.50`, nor is an id one digit away (which an `f64` merged).
        let other = hashes(r#"{"repos": [1.5, {"id": 100000000000000000000002}]}"#);
        assert_ne!(other[0], first[0]);
        assert_ne!(other[1], first[1]);
    }

    #[test]
    fn a_source_without_a_list_names_the_pointer_and_what_it_found() {
        let t = map_task("{{REPO}}", 1);
        let e = expand_map(&t, Some(r#"{"repos": {"a": 1}}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"map over `src` at pointer "/repos": pointer "/repos" reaches an object, not an array"#
        );
        let e = expand_map(&t, Some(r#"{"repos": [1, 2]}"#)).unwrap_err();
        assert!(e.to_string().contains("2 items, more than max_items (1)"));
        assert!(expand_map(&t, Some("not json")).is_err());
    }

    #[test]
    fn stored_items_are_taken_by_hash_the_one_under_the_same_id_first() {
        let item = |id: &str, hash: Option<&str>, status| {
            let mut r = TaskExecutionResult::new(id, status);
            r.metadata.map_item_hash = hash.map(str::to_string);
            r
        };
        let mut stored = completed_items_by_hash(
            "m",
            [
                item("m[0]", Some("h"), TaskStatus::Completed),
                item("m[1]", Some("h"), TaskStatus::Completed),
                item("m[2]", Some("f"), TaskStatus::Failed),
                item("m[3]", None, TaskStatus::Completed),
                item("other[0]", Some("h"), TaskStatus::Completed),
            ],
        );
        assert_eq!(stored.len(), 1, "only m's completed items with a hash");
        assert_eq!(
            take_stored(&mut stored, "h", "m[1]").unwrap().task_id,
            "m[1]"
        );
        assert_eq!(
            take_stored(&mut stored, "h", "m[7]").unwrap().task_id,
            "m[0]"
        );
        assert!(take_stored(&mut stored, "h", "m[8]").is_none());
        assert!(take_stored(&mut stored, "f", "m[2]").is_none());
    }

    #[test]
    fn the_join_completes_within_allow_failures() {
        let t = map_task("{{REPO}}", 3);
        let ok = TaskExecutionResult::new("m[0]", TaskStatus::Completed);
        let bad = TaskExecutionResult::new("m[1]", TaskStatus::Failed);
        let one = join_result(&t, &[&ok, &bad]);
        assert_eq!(one.status, TaskStatus::Completed);
        assert_eq!(one.output, "2 items: 1 completed, 1 failed");
        let two = join_result(&t, &[&ok, &bad, &bad]);
        assert_eq!(two.status, TaskStatus::Failed);
        assert_eq!(
            two.error.as_deref(),
            Some("2 of 3 items failed (map.allow_failures: 1)")
        );
        assert_eq!(join_result(&t, &[]).status, TaskStatus::Completed);
    }
}
