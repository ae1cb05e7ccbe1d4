//! [`MemoryStore`]: the in-memory [`ExecutionStore`], for library users,
//! tests and `ctx run` without a durable store.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use ctx_model::TaskExecutionResult;

use crate::{ExecutionStore, StoreError};

/// Results in a `BTreeMap` behind a mutex; the latest result per task wins.
///
/// Nothing is lost or reordered: `all_results` is ordered by task id, as the
/// trait asks. A poisoned mutex (a panic while a result was being written,
/// which the map insert cannot cause) is recovered rather than propagated,
/// since the map is never left half-updated.
#[derive(Debug, Default)]
pub struct MemoryStore {
    results: Mutex<BTreeMap<String, TaskExecutionResult>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// A store holding `results` already, as a resumed run would find them.
    pub fn with_results(results: impl IntoIterator<Item = TaskExecutionResult>) -> MemoryStore {
        MemoryStore {
            results: Mutex::new(
                results
                    .into_iter()
                    .map(|r| (r.task_id.clone(), r))
                    .collect(),
            ),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, TaskExecutionResult>> {
        self.results.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ExecutionStore for MemoryStore {
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        Ok(self.map().get(task_id).cloned())
    }

    fn get_by_dependency_ids(
        &self,
        ids: &[String],
    ) -> Result<Vec<TaskExecutionResult>, StoreError> {
        // One lock for the whole batch.
        let map = self.map();
        Ok(ids.iter().filter_map(|id| map.get(id).cloned()).collect())
    }

    fn store(&self, result: TaskExecutionResult) -> Result<(), StoreError> {
        self.map().insert(result.task_id.clone(), result);
        Ok(())
    }

    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        Ok(self.map().values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::TaskStatus;

    #[test]
    fn latest_wins_and_order_follows_ids() {
        let s = MemoryStore::new();
        s.store(TaskExecutionResult::new("b", TaskStatus::InProgress))
            .unwrap();
        s.store(TaskExecutionResult::new("a", TaskStatus::Completed))
            .unwrap();
        let mut done = TaskExecutionResult::new("b", TaskStatus::Completed);
        done.output = "out".into();
        s.store(done).unwrap();
        assert_eq!(s.get_by_task_id("b").unwrap().unwrap().output, "out");
        assert!(s.get_by_task_id("zz").unwrap().is_none());
        let ids: Vec<String> = s
            .all_results()
            .unwrap()
            .into_iter()
            .map(|r| r.task_id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
        let deps = s
            .get_by_dependency_ids(&["b".into(), "missing".into(), "a".into()])
            .unwrap();
        assert_eq!(deps.len(), 2);
        assert_eq!(deps[0].task_id, "b");
        assert_eq!(deps[1].task_id, "a");
    }
}
