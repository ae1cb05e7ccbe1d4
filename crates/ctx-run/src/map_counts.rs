//! A map task's items counted, defined once for every output that shows a
//! run: `ctx runs show` (its table and JSON), results.json (`ctx run
//! --format json`, `--out`), and `ctx runs export` (JSON and CSV), for a
//! run directory and a shared store alike.
//!
//! The counts are read from the results themselves, not from the plan,
//! because results.json is written from the executor's report, which has
//! no plan, and `ctx runs export` must give results.json's bytes: a task
//! is a map task when its result records an item count
//! (`metadata.map_items`, stamped by the local executor on every result
//! of a map task) or when an item of it (`TASK[i]`) has a result (a shared
//! store's rows, and rows stored before the count was recorded). Only the
//! run's items count: an item beyond the count recorded was left by an
//! earlier, longer list ([`ctx_model::map::is_current_item`]).

use std::collections::BTreeMap;

use ctx_model::{TaskExecutionResult, TaskStatus};
use serde::Serialize;

/// A map task's items: how many the run has, and how many of them
/// completed and failed (the others are pending, in progress or skipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MapCounts {
    /// The items the map expanded to: the count its result records, else
    /// the number of its items stored.
    pub items: usize,
    /// Items whose latest result completed.
    pub completed: usize,
    /// Items whose latest result failed.
    pub failed: usize,
}

impl MapCounts {
    /// The counts of every map task among `results` (each task's latest
    /// result, items included), by map task id.
    pub fn of_run<'a>(
        results: impl IntoIterator<Item = &'a TaskExecutionResult>,
    ) -> BTreeMap<String, MapCounts> {
        let results: Vec<&TaskExecutionResult> = results.into_iter().collect();
        let recorded: BTreeMap<&str, &TaskExecutionResult> = results
            .iter()
            .filter(|r| r.metadata.map_items.is_some())
            .map(|r| (r.task_id.as_str(), *r))
            .collect();
        let mut counts: BTreeMap<String, MapCounts> = recorded
            .keys()
            .map(|id| (id.to_string(), MapCounts::default()))
            .collect();
        for r in &results {
            let Some((map_id, index)) = ctx_model::map::parse_item_id(&r.task_id) else {
                continue;
            };
            let map = recorded.get(map_id).copied();
            if !ctx_model::map::is_current_item(map, index) {
                continue;
            }
            let c = counts.entry(map_id.to_string()).or_default();
            c.items += 1;
            match r.status {
                TaskStatus::Completed => c.completed += 1,
                TaskStatus::Failed => c.failed += 1,
                _ => {}
            }
        }
        for (id, c) in &mut counts {
            if let Some(n) = recorded.get(id.as_str()).and_then(|r| r.metadata.map_items) {
                c.items = n;
            }
        }
        counts
    }

    /// The cell `ctx runs show` prints in its ITEMS column: `N`, and
    /// `(F failed)` when any failed.
    pub fn text(&self) -> String {
        match self.failed {
            0 => self.items.to_string(),
            f => format!("{} ({f} failed)", self.items),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, status: TaskStatus, map_items: Option<usize>) -> TaskExecutionResult {
        let mut r = TaskExecutionResult::new(id.to_string(), status);
        r.metadata.map_items = map_items;
        r
    }

    #[test]
    fn a_map_s_items_are_counted_by_status_and_only_the_run_s() {
        let results = [
            result("a", TaskStatus::Completed, None),
            result("m", TaskStatus::Completed, Some(3)),
            result("m[0]", TaskStatus::Completed, None),
            result("m[1]", TaskStatus::Failed, None),
            result("m[2]", TaskStatus::Skipped, None),
            // Left by an earlier, longer list: not the run's.
            result("m[3]", TaskStatus::Failed, None),
            // A map whose result records no count: its stored items count.
            result("old", TaskStatus::Failed, None),
            result("old[0]", TaskStatus::Failed, None),
            result("old[1]", TaskStatus::Completed, None),
            // A map that expanded to nothing.
            result("empty", TaskStatus::Completed, Some(0)),
        ];
        let counts = MapCounts::of_run(&results);
        let c = |items, completed, failed| MapCounts {
            items,
            completed,
            failed,
        };
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            [
                ("empty".to_string(), c(0, 0, 0)),
                ("m".to_string(), c(3, 1, 1)),
                ("old".to_string(), c(2, 1, 1)),
            ]
        );
        assert_eq!(c(3, 1, 1).text(), "3 (1 failed)");
        assert_eq!(c(3, 3, 0).text(), "3");
    }
}
