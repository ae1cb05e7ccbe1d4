//! Which task of one run is which task of the other.
//!
//! Tasks match by id. A map's items match as a resume matches them: by
//! their content hash (`metadata.map_item_hash`: the filled item task,
//! its dependencies' outputs and the engine), the item stored under the
//! same id first, so an item that only moved in its list is compared with
//! itself; an item whose content changed matches the item of its id, if
//! that one was not taken by its own content elsewhere.

use std::collections::{BTreeMap, BTreeSet};

use ctx_model::map::parse_item_id;

use crate::side::RunSide;

/// One task of the comparison: its id in A, in B, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// Its id in run A (`None`: new in B).
    pub a: Option<String>,
    /// Its id in run B (`None`: removed in B).
    pub b: Option<String>,
}

impl Pair {
    /// The id it is shown under: B's, else A's.
    pub fn id(&self) -> &str {
        self.b.as_deref().or(self.a.as_deref()).unwrap_or_default()
    }
}

/// Every task of either run, paired: B's tasks in order (each with its
/// match in A, if any), then A's unmatched tasks in order.
pub fn pair_tasks(a: &RunSide, b: &RunSide) -> Vec<Pair> {
    let a_ids: BTreeSet<&str> = a.tasks.iter().map(String::as_str).collect();
    let hash_of = |side: &RunSide, id: &str| -> Option<String> {
        side.latest
            .get(id)
            .and_then(|r| r.result.metadata.map_item_hash.clone())
    };
    // A's items by (map, hash), each list in id order.
    let mut by_hash: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for id in &a.tasks {
        if let (Some((map, _)), Some(h)) = (parse_item_id(id), hash_of(a, id)) {
            by_hash
                .entry((map.to_string(), h))
                .or_default()
                .push(id.clone());
        }
    }
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut pending: Vec<(usize, String)> = Vec::new();
    let mut out: Vec<Pair> = Vec::new();
    for id in &b.tasks {
        let item = parse_item_id(id).map(|(m, _)| m.to_string());
        let found = item.zip(hash_of(b, id)).and_then(|key| {
            let list = by_hash.get_mut(&key)?;
            let at = list.iter().position(|x| x == id).unwrap_or(0);
            (!list.is_empty()).then(|| list.remove(at))
        });
        match found {
            Some(x) => {
                taken.insert(x.clone());
                out.push(Pair {
                    a: Some(x),
                    b: Some(id.clone()),
                });
            }
            None => {
                pending.push((out.len(), id.clone()));
                out.push(Pair {
                    a: None,
                    b: Some(id.clone()),
                });
            }
        }
    }
    // By id, for what content did not match.
    for (at, id) in pending {
        if a_ids.contains(id.as_str()) && taken.insert(id.clone()) {
            out[at].a = Some(id);
        }
    }
    out.extend(
        a.tasks
            .iter()
            .filter(|id| !taken.contains(*id))
            .map(|id| Pair {
                a: Some(id.clone()),
                b: None,
            }),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{record, side};

    fn item(id: &str, hash: &str) -> ctx_store::ResultRecord {
        let mut r = record(id, "completed", "out");
        r.result.metadata.map_item_hash = Some(hash.into());
        r
    }

    #[test]
    fn tasks_match_by_id_and_items_by_content() {
        let plan = crate::tests::map_plan(&["a", "gone"]);
        let mut m = record("m", "completed", "");
        m.result.metadata.map_items = Some(3);
        let a = side(
            "A",
            &plan,
            vec![
                record("a", "completed", "x"),
                record("gone", "completed", "x"),
                m.clone(),
                item("m[0]", "h0"),
                item("m[1]", "h1"),
                item("m[2]", "h2"),
            ],
        );
        let plan_b = crate::tests::map_plan(&["a", "new"]);
        // The list gained an item in front: h0 and h1 moved down by one;
        // h2 is gone and the last item (h9) is new.
        let b = side(
            "B",
            &plan_b,
            vec![
                record("a", "completed", "x"),
                record("new", "completed", "x"),
                m,
                item("m[0]", "h7"),
                item("m[1]", "h0"),
                item("m[2]", "h1"),
            ],
        );
        let got: Vec<(Option<String>, Option<String>)> =
            pair_tasks(&a, &b).into_iter().map(|p| (p.a, p.b)).collect();
        let s = |x: &str| Some(x.to_string());
        assert_eq!(
            got,
            vec![
                (s("a"), s("a")),
                (None, s("new")),
                (s("m"), s("m")),
                // B's m[0] has new content, and A's m[0] was taken by
                // its content (now m[1]): B's m[0] is new, A's m[2] gone.
                (None, s("m[0]")),
                (s("m[0]"), s("m[1]")),
                (s("m[1]"), s("m[2]")),
                (s("gone"), None),
                (s("m[2]"), None),
            ]
        );
    }
}
