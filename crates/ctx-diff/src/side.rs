//! One side of a comparison: a stored run read once through the seam both
//! durable stores offer ([`RunHistory`]), so a run directory and a shared
//! run are compared by the same code.

use std::collections::{BTreeMap, BTreeSet};

use ctx_model::digest::sha256_hex;
use ctx_model::map::{is_current_item, parse_item_id, resolve_items};
use ctx_model::{Plan, SubTask};
use ctx_store::{ResultRecord, RunHeader, RunHistory, RunInputs, RunState};

use crate::DiffError;

/// Each map task's item digests (see [`RunSide::item_digests`]): the list
/// is resolved once per map, as its expansion resolved it, so that a map
/// of 10,000 items costs one read of its source, not one per item.
fn item_digests(
    plan: &Plan,
    inputs: Option<&RunInputs>,
    latest: &BTreeMap<String, ResultRecord>,
) -> BTreeMap<String, Vec<String>> {
    plan.sub_tasks
        .iter()
        .filter_map(|t| {
            let spec = t.map.as_ref()?;
            let source = match plan.task(&spec.over) {
                Some(_) => latest.get(&spec.over).map(|r| r.result.output.clone()),
                None => crate::cause::variable_value(inputs?, &spec.over),
            }?;
            let items = resolve_items(&source, spec.pointer.as_deref(), usize::MAX).ok()?;
            let digests = items.iter().map(|i| sha256_hex(i.text.as_bytes()));
            Some((t.id.clone(), digests.collect()))
        })
        .collect()
}

/// A stored run as a comparison reads it.
#[derive(Debug, Clone)]
pub struct RunSide {
    /// The run as a whole.
    pub header: RunHeader,
    /// The plan as last run (filled, secrets masked, without map items).
    pub plan: Plan,
    /// What the plan was filled from; `None` for a plan with nothing to
    /// fill, or a run stored before inputs were kept.
    pub inputs: Option<RunInputs>,
    /// The latest result of each of the run's tasks, by id: the plan's
    /// tasks and the current items of its maps (results of tasks a resume
    /// dropped are not the run's and are left out).
    pub latest: BTreeMap<String, ResultRecord>,
    /// The run's task ids: the plan's, in plan order, then its map items
    /// by map and index.
    pub tasks: Vec<String>,
    /// Each map task's list as the run had it, by map task id: the
    /// SHA-256 of each item's text (what fills its placeholder; a digest,
    /// so that a list of large items is not held twice), in item order,
    /// read once from the map's source (its variable's value, or its
    /// source task's output). A map whose source cannot be read again (a
    /// source task without a result, a value not recorded) has none.
    pub item_digests: BTreeMap<String, Vec<String>>,
}

impl RunSide {
    /// Reads `view` (a label for errors is its run id).
    pub fn read(view: &dyn RunHistory) -> Result<RunSide, DiffError> {
        let header = view
            .header()
            .map_err(DiffError::read("(its header unreadable)"))?;
        let run = header.run_id.clone();
        let plan = view.plan().map_err(DiffError::read(&run))?;
        let inputs = view.inputs().map_err(DiffError::read(&run))?;
        let stored: BTreeMap<String, ResultRecord> = view
            .latest()
            .map_err(DiffError::read(&run))?
            .into_iter()
            .map(|r| (r.result.task_id.clone(), r))
            .collect();
        Ok(RunSide::new(header, plan, inputs, stored))
    }

    /// A side from what a store gave (see [`read`](Self::read)).
    pub fn new(
        header: RunHeader,
        plan: Plan,
        inputs: Option<RunInputs>,
        stored: BTreeMap<String, ResultRecord>,
    ) -> RunSide {
        let index = plan.task_index();
        let mut tasks: Vec<String> = plan.sub_tasks.iter().map(|t| t.id.clone()).collect();
        let is_item = |id: &str| {
            parse_item_id(id).is_some_and(|(m, k)| {
                index.get(m).is_some_and(|t| t.map.is_some())
                    && is_current_item(stored.get(m).map(|r| &r.result), k)
            })
        };
        let items: BTreeSet<String> = stored
            .keys()
            .filter(|id| !index.contains(id) && is_item(id))
            .cloned()
            .collect();
        let latest = stored
            .into_iter()
            .filter(|(id, _)| index.contains(id) || items.contains(id))
            .collect();
        // Items by map, then index: `m[2]` before `m[10]`.
        let mut items: Vec<String> = items.into_iter().collect();
        items.sort_by_cached_key(|id| parse_item_id(id).map(|(m, k)| (m.to_string(), k)));
        tasks.extend(items);
        let item_digests = item_digests(&plan, inputs.as_ref(), &latest);
        RunSide {
            header,
            plan,
            inputs,
            latest,
            tasks,
            item_digests,
        }
    }

    /// The digest of map item `id`'s (`MAP[k]`) text in this run's list,
    /// if the run's list can be read.
    pub fn item_digest(&self, id: &str) -> Option<&str> {
        let (map, k) = parse_item_id(id)?;
        self.item_digests.get(map)?.get(k).map(String::as_str)
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.header.run_id
    }

    /// Whether the run was still being executed when it was read: it is
    /// compared as it stands, and marked.
    pub fn in_progress(&self) -> bool {
        self.header.state == RunState::Running
    }

    /// The plan task that stands for `id`: the task itself, or for a map
    /// item the map task it was expanded from.
    pub fn plan_task(&self, id: &str) -> Option<&SubTask> {
        self.plan.task(id).or_else(|| {
            let (map, _) = parse_item_id(id)?;
            self.plan.task(map).filter(|t| t.map.is_some())
        })
    }

    /// The dependencies whose outputs `id`'s prompt receives: a task's
    /// own, an item's those of its map task but the map's source.
    pub fn dependencies(&self, id: &str) -> Vec<String> {
        let Some(task) = self.plan_task(id) else {
            return Vec::new();
        };
        let source = (task.id != id)
            .then(|| task.map.as_ref().map(|m| m.over.as_str()))
            .flatten();
        task.dependencies
            .iter()
            .filter(|d| Some(d.as_str()) != source)
            .cloned()
            .collect()
    }
}
