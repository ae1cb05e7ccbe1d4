//! The plan a run stored, for a resume that names no plan file.

use ctx_model::Plan;
use ctx_store_sqlite::RunRoot;

use crate::RunError;

/// A run's stored plan and where it came from.
#[derive(Debug, Clone)]
pub struct StoredPlan {
    /// The plan as the run's last session ran it.
    pub plan: Plan,
    /// The run's id.
    pub run_id: String,
    /// The plan's path as the last session was given it, if recorded.
    pub source: Option<String>,
    /// What the plan was filled from, when it had variables or the
    /// digest: a resume fills `inputs.plan` again ([`crate::inputs`]).
    pub inputs: Option<ctx_store::RunInputs>,
}

/// Reads the plan stored in `run` (a run id under `root` or a run
/// directory), so that a resume needs no plan file. For a run whose plan
/// was filled, `plan` is the plan *before* filling (its inputs'), which
/// the resume fills again: the filled plan stored hides its secrets.
///
/// The store writes plans with secret-looking `params` keys redacted; a
/// plan holding such a key cannot be resumed from the store (the task
/// would be sent `[redacted]`), so this refuses it with
/// [`RunError::RedactedPlan`] and the plan file must be given again.
pub fn stored_plan(root: &RunRoot, run: &str) -> Result<StoredPlan, RunError> {
    let view = root.open(run)?;
    let inputs = view.inputs()?;
    let plan = match &inputs {
        Some(i) => i.plan.clone(),
        None => view.plan()?,
    };
    let source = view.sessions()?.last().and_then(|s| s.plan_source.clone());
    let keys = redacted_params(&plan);
    if !keys.is_empty() {
        return Err(RunError::RedactedPlan {
            run: view.run_id().to_string(),
            keys,
        });
    }
    Ok(StoredPlan {
        plan,
        run_id: view.run_id().to_string(),
        source,
        inputs,
    })
}

/// What `run`'s last session filled its plan from, for a resume given the
/// plan file: `None` for a plan with nothing to fill.
pub fn stored_inputs(root: &RunRoot, run: &str) -> Result<Option<ctx_store::RunInputs>, RunError> {
    Ok(root.open(run)?.inputs()?)
}

/// `task.params.KEY` for every secret-looking key in the tasks' params,
/// at any depth (what the store redacts).
pub fn redacted_params(plan: &Plan) -> Vec<String> {
    fn walk(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, val) in map {
                    let here = format!("{path}.{k}");
                    if ctx_store::is_secret_key(k) {
                        out.push(here);
                    } else {
                        walk(val, &here, out);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|x| walk(x, path, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for task in &plan.sub_tasks {
        for (k, v) in &task.tool_or_prompt.params.extra {
            let here = format!("{}.params.{k}", task.id);
            if ctx_store::is_secret_key(k) {
                out.push(here);
            } else {
                walk(v, &here, &mut out);
            }
        }
    }
    out
}
