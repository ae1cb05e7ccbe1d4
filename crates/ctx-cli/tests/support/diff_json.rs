//! Reading `ctx runs diff --format json` in tests: a task's causes in
//! words, the way the runs_diff, run_rerun and weekly-figure tests assert
//! them.

use serde_json::Value;

/// `task`'s causes (an entry of the diff's `tasks`), each as `KIND NAME`
/// or `KIND` when the cause names nothing (`same_inputs`, `prompt`).
pub fn causes_of(task: &Value) -> Vec<String> {
    task["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| match c.get("name") {
            Some(n) => format!("{} {}", c["kind"].as_str().unwrap(), n.as_str().unwrap()),
            None => c["kind"].as_str().unwrap().to_string(),
        })
        .collect()
}
