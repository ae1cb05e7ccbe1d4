//! A task mapped over a JSON list: the `map:` block of a sub-task, the
//! item id rule, and the one resolution of a source text into its items.
//!
//! A map task runs once per item of a JSON array. The array is read from
//! `over` (a `json` plan variable, or a dependency whose output is JSON)
//! at the RFC 6901 JSON Pointer `pointer` (the whole value without one),
//! and each item fills the `{{AS}}` placeholder of the task's prompt. The
//! list is never cut: longer than `max_items` is an error naming its
//! length.
//!
//! ## Item ids
//!
//! Item `i` (from 0, in list order) of map task `TASK` has the id
//! `TASK[i]` ([`item_id`]), `i` in decimal without leading zeros. The rule
//! is injective: two items of one map differ in `i`, items of two maps
//! differ in the prefix (task ids are unique), and no plan task may be
//! named like an item of a map of the plan (`ctx plan check` refuses
//! `TASK[3]` beside a map task `TASK`), so each item's `--out` files
//! (`prompts/TASK[3].md`) are its own. A map task's id leaves room for
//! the suffix: `TASK[max_items-1]` must fit
//! [`MAX_ID_BYTES`](crate::MAX_ID_BYTES).
//!
//! ## Why here
//!
//! The resolution ([`resolve_items`]) is plain data over serde_json, so
//! it lives in the vocabulary crate: `ctx plan check`/`plan_fill` use it
//! to check a map over a variable before anything runs, the local
//! executor (ctx-deps' `map` module) to expand a map when its source is
//! ready, and the shared store's session can call the same function.
//!
//! ## Items as written
//!
//! The source is checked to parse as a `type: json` variable's value is
//! (`serde::de::IgnoredAny`), and each item is then cut from the source
//! text (module `text`: the RFC 6901 pointer, `~0`, `~1` and array
//! indices as `serde_json::Value::pointer` reads them, walked over the
//! text's spans), so a number keeps its digits and an object its keys'
//! order: the text is never parsed into a value and printed again.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod text;

use text::Kind;

/// A sub-task's `map:` block: run the task once per item of a JSON list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct MapSpec {
    /// A `json` plan variable, or one of the task's dependencies whose
    /// output is JSON.
    pub over: String,
    /// An RFC 6901 JSON Pointer to the array inside the source (`/items`);
    /// the whole value when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// The placeholder each item fills (`[A-Z][A-Z0-9_]*`): `{{AS}}` in
    /// the task's prompt, inside an `<untrusted-content>` fence.
    #[serde(rename = "as")]
    pub item: String,
    /// The longest list accepted; required. A longer list fails the task
    /// with its length, and is never cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<usize>,
    /// How many items may fail with the map still completing (default 0:
    /// any failed item fails the map and skips its dependents).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub allow_failures: usize,
    /// The source text when `over` names a variable, set when the plan is
    /// filled with its values (`ctx_prompt::plan_fill`); never written in
    /// a plan file.
    ///
    /// Shared, not owned: the text is the whole list, and every clone of
    /// the task (each item starts as one, `ctx_deps::map::item_task`) or
    /// of the plan (each map's expansion) would otherwise copy it, which
    /// made a map over a variable quadratic in the list's size (issue 35).
    #[serde(skip)]
    #[schemars(skip)]
    pub variable_value: Option<std::sync::Arc<str>>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The id of item `index` of map task `task_id`: `TASK[index]`.
pub fn item_id(task_id: &str, index: usize) -> String {
    format!("{task_id}[{index}]")
}

/// The map task and index of an item id written by [`item_id`]
/// (`TASK[3]` → `("TASK", 3)`), or `None`.
pub fn parse_item_id(id: &str) -> Option<(&str, usize)> {
    let inner = id.strip_suffix(']')?;
    let open = inner.rfind('[')?;
    let digits = &inner[open + 1..];
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical || open == 0 {
        return None;
    }
    Some((&inner[..open], digits.parse().ok()?))
}

/// `plan` without the items of its map tasks: each task that is an item
/// of a map task of the plan (`TASK[i]` beside a map task `TASK`, a name
/// no plan task may take) is left out, and so are the map tasks'
/// dependencies on them. The inverse of appending a map's items
/// (ctx-deps' `plan_with_items`): the shared store keeps the plan its
/// workers run, items appended as maps expand, and a report or a resume
/// starts from the plan as written, whose maps expand again.
pub fn without_items(plan: &crate::Plan) -> crate::Plan {
    let maps: std::collections::HashSet<&str> = plan
        .sub_tasks
        .iter()
        .filter(|t| t.map.is_some())
        .map(|t| t.id.as_str())
        .collect();
    let is_item = |id: &str| parse_item_id(id).is_some_and(|(m, _)| maps.contains(m));
    let mut out = plan.clone();
    out.sub_tasks.retain(|t| !is_item(&t.id));
    for t in out.sub_tasks.iter_mut().filter(|t| t.map.is_some()) {
        t.dependencies.retain(|d| !is_item(d));
    }
    out
}

/// Whether stored item `index` of a map task is one of the run's items,
/// given the map task's latest stored result: it is when that result
/// records no item count (a row stored before ctx recorded one), or
/// `index` is below the count ([`ResultMetadata::map_items`]). An item at
/// or beyond it was left in the store by an earlier, longer list: kept,
/// not the run's.
///
/// [`ResultMetadata::map_items`]: crate::ResultMetadata::map_items
pub fn is_current_item(map_result: Option<&crate::TaskExecutionResult>, index: usize) -> bool {
    map_result
        .and_then(|r| r.metadata.map_items)
        .is_none_or(|n| index < n)
}

/// One item of a resolved list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapItem {
    /// Its position in the list.
    pub index: usize,
    /// What fills the item placeholder: a string decoded (its escapes
    /// read), a number as written in the source (`1.50`, `1e3`, an id of
    /// 24 digits: never through an `f64`), an object as written with the
    /// space between its tokens left out (its keys in their order, its
    /// numbers and escapes as written).
    pub text: String,
}

/// Why a source text gives no list of items. Each message names what was
/// found, for the map task's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapSourceError {
    /// The source is not JSON.
    #[error("is not JSON: {message}")]
    NotJson {
        /// serde_json's message, with its line and column.
        message: String,
    },
    /// The pointer is not a JSON Pointer (it must be empty or start with
    /// `/`).
    #[error("pointer {pointer:?} is not an RFC 6901 JSON Pointer (it must start with `/`)")]
    BadPointer {
        /// The pointer.
        pointer: String,
    },
    /// The pointer reaches nothing.
    #[error("pointer {pointer:?} reaches nothing")]
    Missing {
        /// The pointer.
        pointer: String,
    },
    /// The pointer reaches a value that is not an array.
    #[error("pointer {pointer:?} reaches {found}, not an array")]
    NotArray {
        /// The pointer.
        pointer: String,
        /// What it reaches (`an object`, `a string`, …).
        found: &'static str,
    },
    /// The list is longer than `max_items`.
    #[error("the list has {len} items, more than max_items ({max_items}); it is never cut")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max_items: usize,
    },
    /// An item is neither a string, a number nor an object.
    #[error("item {index} is {found}; items must be strings, numbers or objects")]
    BadItem {
        /// Its position.
        index: usize,
        /// What it is.
        found: &'static str,
    },
}

/// The items of `source` (JSON text) at `pointer`, at most `max_items`,
/// each as written in `source` (see [`MapItem::text`]).
///
/// ```
/// use ctx_model::map::{resolve_items, MapSourceError};
///
/// let items = resolve_items(r#"{"repos": ["a/b", {"n": 1.50}, 1e3]}"#, Some("/repos"), 10).unwrap();
/// let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
/// assert_eq!(texts, ["a/b", r#"{"n":1.50}"#, "1e3"]);
/// assert!(matches!(resolve_items("[1, 2]", None, 1), Err(MapSourceError::TooLong { len: 2, .. })));
/// ```
pub fn resolve_items(
    source: &str,
    pointer: Option<&str>,
    max_items: usize,
) -> Result<Vec<MapItem>, MapSourceError> {
    // Checked as a `json` variable's value is: it parses, and nothing is
    // kept of the parse (the items are cut from the text, module `text`).
    serde_json::from_str::<serde::de::IgnoredAny>(source).map_err(|e| MapSourceError::NotJson {
        message: e.to_string(),
    })?;
    let pointer = pointer.unwrap_or("");
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(MapSourceError::BadPointer {
            pointer: pointer.into(),
        });
    }
    let list = text::pointer(source, text::root(source), pointer).ok_or_else(|| {
        MapSourceError::Missing {
            pointer: pointer.into(),
        }
    })?;
    let found = Kind::of(list.of(source));
    if found != Kind::Array {
        return Err(MapSourceError::NotArray {
            pointer: pointer.into(),
            found: found.name(),
        });
    }
    let list = text::children(source, list);
    if list.len() > max_items {
        return Err(MapSourceError::TooLong {
            len: list.len(),
            max_items,
        });
    }
    list.iter()
        .enumerate()
        .map(|(index, (_, span))| {
            let written = span.of(source);
            let text = match Kind::of(written) {
                // Checked above: a JSON string decodes.
                Kind::String => serde_json::from_str::<String>(written).map_err(|e| {
                    MapSourceError::NotJson {
                        message: e.to_string(),
                    }
                })?,
                Kind::Number => written.to_string(),
                Kind::Object => text::compact(written),
                found => {
                    return Err(MapSourceError::BadItem {
                        index,
                        found: found.name(),
                    });
                }
            };
            Ok(MapItem { index, text })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_ids_round_trip_and_only_canonical_ones_parse() {
        assert_eq!(item_id("scan", 12), "scan[12]");
        assert_eq!(parse_item_id("scan[12]"), Some(("scan", 12)));
        assert_eq!(parse_item_id("a[b][0]"), Some(("a[b]", 0)));
        for not in ["scan", "scan[]", "scan[01]", "[3]", "scan[x]", "scan[1"] {
            assert_eq!(parse_item_id(not), None, "{not}");
        }
    }

    #[test]
    fn a_plan_without_items_is_the_plan_before_its_maps_expanded() {
        let mut plan: crate::Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [
                {"id": "m", "description": "", "dependencies": ["src"],
                 "map": {"over": "src", "as": "X", "max_items": 2},
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}},
                {"id": "src", "description": "", "dependencies": [],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}},
                {"id": "r", "description": "", "dependencies": ["m"],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}}
            ]
        }))
        .unwrap();
        let written = plan.clone();
        let mut item = plan.sub_tasks[0].clone();
        item.map = None;
        for i in 0..2 {
            item.id = item_id("m", i);
            plan.sub_tasks.push(item.clone());
            plan.sub_tasks[0].dependencies.push(item.id.clone());
        }
        // `src[0]` looks like an item, but `src` maps over nothing.
        let mut lookalike = plan.sub_tasks[1].clone();
        lookalike.id = "src[0]".into();
        plan.sub_tasks.push(lookalike.clone());
        let mut expected = written;
        expected.sub_tasks.push(lookalike);
        assert_eq!(without_items(&plan), expected);
    }

    #[test]
    fn every_bad_source_is_named() {
        let err = |s, p| resolve_items(s, p, 5).unwrap_err().to_string();
        assert!(err("{", None).starts_with("is not JSON"));
        assert_eq!(
            err(r#"{"a": 1}"#, Some("/a")),
            r#"pointer "/a" reaches a number, not an array"#
        );
        assert_eq!(err("{}", Some("/b")), r#"pointer "/b" reaches nothing"#);
        assert!(err("[]", Some("b")).contains("must start with `/`"));
        assert_eq!(
            err("[1,2,3,4,5,6]", None),
            "the list has 6 items, more than max_items (5); it is never cut"
        );
        assert_eq!(
            err(r#"["a", [1]]"#, None),
            "item 1 is an array; items must be strings, numbers or objects"
        );
        assert!(err("[null]", None).contains("null"));
    }

    #[test]
    fn numbers_and_objects_are_filled_as_written() {
        let src = r#"[1.50, 1e3, 100000000000000000000001, -0.0,
            { "id" : 100000000000000000000001, "x": 1.50 },
            {"b": [1E+2, "a b\u00e9\"}"], "a": {}}, "t\u00e9"]"#;
        let texts: Vec<String> = resolve_items(src, None, 10)
            .unwrap()
            .into_iter()
            .map(|i| i.text)
            .collect();
        assert_eq!(
            texts,
            [
                "1.50",
                "1e3",
                "100000000000000000000001",
                "-0.0",
                r#"{"id":100000000000000000000001,"x":1.50}"#,
                // Keys in their order, escapes and the space inside a
                // string as written.
                r#"{"b":[1E+2,"a b\u00e9\"}"],"a":{}}"#,
                // A string item is its value: its escapes read.
                "té",
            ]
        );
    }

    #[test]
    fn the_pointer_reads_as_a_parsed_value_would() {
        let src = r#"{"k": [0], "k": {"0": [7], "a/b": ["s"], "~": [8]}, "n": [[1, 2], [3]]}"#;
        let at = |p: &str| resolve_items(src, Some(p), 9).map(|v| v.len());
        let value: serde_json::Value = serde_json::from_str(src).unwrap();
        for p in [
            "/k/0", "/k/a~1b", "/k/~0", "/n/0", "/n/1", "/n/01", "/n/+1", "/n/2", "/k/x", "",
            "/n/-",
        ] {
            let expected = match value.pointer(p) {
                Some(serde_json::Value::Array(a)) => Ok(a.len()),
                Some(_) => Err("not an array"),
                None => Err("missing"),
            };
            let got = at(p).map_err(|e| match e {
                MapSourceError::NotArray { .. } => "not an array",
                MapSourceError::Missing { .. } => "missing",
                other => panic!("{p}: {other}"),
            });
            assert_eq!(got, expected, "{p:?}");
        }
    }

    #[test]
    fn pointers_follow_rfc_6901_escapes_and_an_empty_list_is_fine() {
        let src = r#"{"a/b": {"c~d": [{"x": [1, 2]}]}}"#;
        let items = resolve_items(src, Some("/a~1b/c~0d"), 3).unwrap();
        assert_eq!(items[0].text, r#"{"x":[1,2]}"#);
        assert_eq!(resolve_items("[]", None, 0).unwrap(), []);
        assert_eq!(
            resolve_items(src, Some("/a~1b/c~0d/0/x"), 2).unwrap().len(),
            2
        );
    }
}
