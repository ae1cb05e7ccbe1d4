//! A task's `output` block: the cleaning applied to what the engine
//! answered before checks, dependents and publishing see it
//! (docs/plan-format.md, "Cleaned outputs").
//!
//! Models add lines nobody asked for ("✅ The report is done.", "Quality
//! score: 9/10") and wrap markdown in a code fence. Each operator used to
//! strip them with a script after the run; here the plan says what to
//! remove, the store keeps the answer as written beside the cleaned one,
//! and `ctx runs show` lists what was removed.
//!
//! The block is data here; its patterns are compiled (and a bad one
//! located by `ctx plan check`) by ctx-checks, since this crate compiles
//! no regex. Cleaning only ever removes whole lines, so what it removed
//! is read back from the two texts ([`removed_lines`]) and never needs
//! storing apart.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::plan::{Plan, SubTask};

/// What to remove from a task's output. Strip first, then unwrap: a
/// status line after the closing fence would otherwise keep the fence
/// from wrapping the whole output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(deny_unknown_fields)]
pub struct OutputCleaning {
    /// Patterns (Rust regex syntax): every line one of them matches
    /// somewhere is removed, whole (anchor with `^` and `$` to match a
    /// whole line). Lines are matched without their line break.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strip_lines: Vec<String>,
    /// `true`: one code fence (three or more backticks or tildes) that
    /// wraps the whole output, surrounding blank lines aside, is removed
    /// with those blank lines; the text inside is kept as it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unwrap_fence: bool,
}

impl OutputCleaning {
    /// Whether the block removes nothing.
    pub fn is_empty(&self) -> bool {
        self.strip_lines.is_empty() && !self.unwrap_fence
    }
}

/// The cleaning of `task`'s output: the task's own block when it has one
/// (it wins whole over `config.output`), else `config.output`; `None`
/// when neither says anything to remove.
pub fn task_output_cleaning<'a>(plan: &'a Plan, task: &'a SubTask) -> Option<&'a OutputCleaning> {
    task.output
        .as_ref()
        .or(plan.config.output.as_ref())
        .filter(|c| !c.is_empty())
}

/// The lines of `raw` that cleaning removed to give `cleaned`, in order,
/// each without its line break: `raw`'s lines less the longest run of
/// `cleaned`'s lines matched from the top. Since cleaning only removes
/// whole lines, `cleaned`'s lines are a subsequence of `raw`'s and every
/// line not matched was removed.
pub fn removed_lines<'a>(raw: &'a str, cleaned: &str) -> Vec<&'a str> {
    let mut kept = cleaned.lines().peekable();
    let mut removed = Vec::new();
    for line in raw.lines() {
        if kept.peek() == Some(&line) {
            kept.next();
        } else {
            removed.push(line);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_lines_are_the_lines_cleaning_took_out() {
        let raw = "```markdown\n# Report\n✅ done\nbody\n```\n";
        let cleaned = "# Report\nbody\n";
        assert_eq!(
            removed_lines(raw, cleaned),
            ["```markdown", "✅ done", "```"]
        );
        assert!(removed_lines(cleaned, cleaned).is_empty());
    }

    #[test]
    fn the_tasks_block_wins_whole_and_an_empty_one_cleans_nothing() {
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "config": {"output": {"strip_lines": ["^Score:"]}},
            "sub_tasks": [{"id": "a", "description": "A",
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}}]
        }))
        .unwrap();
        let task = plan.sub_tasks[0].clone();
        assert_eq!(
            task_output_cleaning(&plan, &task).unwrap().strip_lines,
            ["^Score:"]
        );
        let mut own = task.clone();
        own.output = Some(OutputCleaning {
            unwrap_fence: true,
            ..OutputCleaning::default()
        });
        let chosen = task_output_cleaning(&plan, &own).unwrap();
        assert!(chosen.unwrap_fence && chosen.strip_lines.is_empty());
        own.output = Some(OutputCleaning::default());
        assert_eq!(task_output_cleaning(&plan, &own), None);
        plan.config.output = None;
        assert_eq!(task_output_cleaning(&plan, &task), None);
    }
}
