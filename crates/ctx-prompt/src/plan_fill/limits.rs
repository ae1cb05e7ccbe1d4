//! The token limits of a filled plan: each variable's `max_tokens` under
//! the tokenizers of the tasks that use it, then each task's own prompt
//! against its cap.

use std::collections::{BTreeMap, BTreeSet};

use ctx_model::{Plan, SubTask};
use ctx_tokens::{TokenCounter, TokenizerExt};

use super::FillError;
use crate::template::Template;

/// The token limits, counted with each task's tokenizer: first each
/// variable's `max_tokens`, over every task that uses it (the largest
/// count decides, and the error names it), then each task's filled own
/// prompt against its cap.
pub(super) fn check_limits(
    plan: &Plan,
    filled: &Plan,
    values: &BTreeMap<String, String>,
    all: &BTreeMap<String, String>,
    names_by_task: &[BTreeSet<String>],
) -> Result<(), FillError> {
    let mut counters = Vec::with_capacity(filled.sub_tasks.len());
    for task in &filled.sub_tasks {
        counters.push(crate::tokenizer_for_task(plan, task)?.counter());
    }
    for v in &plan.variables {
        let (Some(max), Some(value)) = (v.max_tokens, values.get(&v.name)) else {
            continue;
        };
        let mut largest: Option<(usize, usize)> = None; // (tokens, task)
        let mut counted: Vec<&str> = Vec::new();
        for (i, counter) in counters.iter().enumerate() {
            if !names_by_task[i].contains(&v.name) || counted.contains(&counter.name()) {
                continue;
            }
            counted.push(counter.name());
            if counter.fits(value, max) {
                continue;
            }
            let tokens = counter.count(value);
            if largest.is_none_or(|(t, _)| tokens > t) {
                largest = Some((tokens, i));
            }
        }
        if let Some((tokens, i)) = largest {
            return Err(FillError::TooManyTokens {
                name: v.name.clone(),
                tokens,
                max,
                tokenizer: counters[i].name().to_string(),
                task_id: filled.sub_tasks[i].id.clone(),
            });
        }
    }
    let cap = plan.config.max_prompt_tokens;
    for (i, task) in filled.sub_tasks.iter().enumerate() {
        if !names_by_task[i].is_empty() {
            check_cap(&plan.sub_tasks[i], task, all, &*counters[i], cap)?;
        }
    }
    Ok(())
}

/// `task` (as filled) against `cap`, naming the largest variable of its
/// original prompt when over.
fn check_cap(
    original: &SubTask,
    task: &SubTask,
    values: &BTreeMap<String, String>,
    counter: &dyn TokenCounter,
    cap: usize,
) -> Result<(), FillError> {
    let prompt = &task.tool_or_prompt.params.prompt;
    if counter.fits(prompt, cap) {
        return Ok(());
    }
    let template = Template::parse_body(&original.tool_or_prompt.params.prompt, "");
    let largest = template
        .names()
        .into_iter()
        .filter_map(|n| Some((n.to_string(), counter.count(values.get(n)?))))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
    Err(FillError::OverCap {
        task_id: task.id.clone(),
        tokens: counter.count(prompt),
        cap,
        largest,
    })
}
