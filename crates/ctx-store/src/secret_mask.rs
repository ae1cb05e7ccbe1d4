//! The one mask of a run's secrets, and the store's door it is applied at.
//!
//! A `secret: true` variable's value reaches the engine, and nothing else
//! of ctx may keep or show it. Its text can come back from anywhere the
//! request is quoted: an HTTP 400 that echoes the prompt, a proxy's error
//! page, a command's stderr, a check's detail or a judge's reason that
//! quotes an output, a summary, a panic message. Masking each of those
//! where it is written would leave the next new path unmasked, so the
//! mask is applied at doors every text passes instead:
//!
//! - **the store's door**: [`MaskedStore`] wraps whatever store a run
//!   writes to (the executor installs it with [`masked_store`]), and
//!   every result is masked whole ([`SecretMask::apply_result`]) before
//!   the store sees it;
//! - **the report's door**: the executor masks its final report the same
//!   way, so everything printed or written from it (the summary, JSON,
//!   results.json, `--out`, the HTML report) is masked;
//! - **the printer's door**: the CLI masks the live lines it prints of an
//!   engine's events with the same mask.
//!
//! The one exception is a task's `output`, kept as the model wrote it:
//! it is the product the run exists for, its dependents are given it as
//! written, and a mask that rewrote it would change what they receive.
//! docs/security.md says where the mask is applied.

use std::borrow::Cow;
use std::sync::Arc;

use ctx_model::{Plan, TaskExecutionResult};

use crate::{ExecutionStore, StoreError};

/// The texts a run's secrets filled, each shown as `[secret NAME]` in what
/// a store writes. Built by the caller that filled the plan (which knows
/// each value's form in a prompt: as given when trusted, neutralized when
/// untrusted); never serialized.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretMask {
    /// `(name, text)`, longest text first, so a secret that contains
    /// another is hidden whole.
    hidden: Vec<(String, String)>,
}

impl SecretMask {
    /// A mask hiding each `(name, text)`; empty texts hide nothing.
    pub fn new(hidden: impl IntoIterator<Item = (String, String)>) -> SecretMask {
        let mut hidden: Vec<(String, String)> =
            hidden.into_iter().filter(|(_, t)| !t.is_empty()).collect();
        hidden.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.cmp(b)));
        hidden.dedup();
        SecretMask { hidden }
    }

    /// This mask hiding `text` too, as `[secret NAME]` (a run's canary
    /// token joins the secrets so); hiding a text twice changes nothing.
    #[must_use]
    pub fn with(self, name: &str, text: &str) -> SecretMask {
        SecretMask::new(
            self.hidden
                .into_iter()
                .chain([(name.to_string(), text.to_string())]),
        )
    }

    /// The texts it hides, longest first (a tracer redacts the same ones).
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.hidden.iter().map(|(_, t)| t.as_str())
    }

    /// Whether the mask hides nothing.
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty()
    }

    /// `text` with every occurrence of a hidden text replaced by `[secret
    /// NAME]`.
    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (name, hidden) in &self.hidden {
            if out.contains(hidden.as_str()) {
                out = Cow::Owned(out.replace(hidden.as_str(), &format!("[secret {name}]")));
            }
        }
        out
    }

    /// [`apply`](Self::apply) to every string of a JSON value.
    pub fn apply_json(&self, value: &mut serde_json::Value) {
        if self.is_empty() {
            return;
        }
        match value {
            serde_json::Value::String(s) => {
                if let Cow::Owned(masked) = self.apply(s) {
                    *s = masked;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.apply_json(v)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| self.apply_json(v)),
            _ => {}
        }
    }

    /// `plan` with every hidden text in its strings replaced.
    pub fn apply_plan(&self, plan: &Plan) -> Plan {
        if self.is_empty() {
            return plan.clone();
        }
        let Ok(mut value) = serde_json::to_value(plan) else {
            return plan.clone();
        };
        self.apply_json(&mut value);
        serde_json::from_value(value).unwrap_or_else(|_| plan.clone())
    }

    /// Masks every text of `result` but its `output`: the prompt, the
    /// error, the summaries, each attempt's error and each check's detail
    /// and reason, and whatever text field a result gains later (the
    /// result is masked as the JSON it is stored as, so no field can be
    /// forgotten). The output is kept as written (see the module docs),
    /// and so is the raw output an `output` block cleaned it from.
    pub fn apply_result(&self, result: &mut TaskExecutionResult) {
        if self.is_empty() {
            return;
        }
        let output = std::mem::take(&mut result.output);
        let raw_output = result.raw_output.take();
        match serde_json::to_value(&*result) {
            Ok(mut value) => {
                self.apply_json(&mut value);
                match serde_json::from_value::<TaskExecutionResult>(value) {
                    Ok(masked) => *result = masked,
                    // Unreachable for a result that serialized; never
                    // leave the texts in clear if it happened.
                    Err(_) => self.apply_known_fields(result),
                }
            }
            Err(_) => self.apply_known_fields(result),
        }
        result.output = output;
        result.raw_output = raw_output;
    }

    /// The fallback of [`apply_result`](Self::apply_result): the texts a
    /// result carries at its top level.
    fn apply_known_fields(&self, result: &mut TaskExecutionResult) {
        for text in [&mut result.prompt, &mut result.error, &mut result.summary]
            .into_iter()
            .flatten()
        {
            if let Cow::Owned(masked) = self.apply(text) {
                *text = masked;
            }
        }
    }
}

/// A store behind the mask: every result is masked
/// ([`SecretMask::apply_result`]) before `inner` stores it. Reads pass
/// through unchanged (what was stored is masked already).
pub struct MaskedStore {
    inner: Arc<dyn ExecutionStore>,
    mask: SecretMask,
}

impl std::fmt::Debug for MaskedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The mask's texts are the secrets: never in a debug print.
        f.debug_struct("MaskedStore").finish_non_exhaustive()
    }
}

impl ExecutionStore for MaskedStore {
    fn get_by_task_id(&self, task_id: &str) -> Result<Option<TaskExecutionResult>, StoreError> {
        self.inner.get_by_task_id(task_id)
    }

    fn get_by_dependency_ids(
        &self,
        ids: &[String],
    ) -> Result<Vec<TaskExecutionResult>, StoreError> {
        self.inner.get_by_dependency_ids(ids)
    }

    fn store(&self, mut result: TaskExecutionResult) -> Result<(), StoreError> {
        self.mask.apply_result(&mut result);
        self.inner.store(result)
    }

    fn all_results(&self) -> Result<Vec<TaskExecutionResult>, StoreError> {
        self.inner.all_results()
    }

    fn decisions(&self) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
        self.inner.decisions()
    }
}

/// `store` behind `mask` (the store's door), or `store` itself when the
/// mask hides nothing.
pub fn masked_store(store: Arc<dyn ExecutionStore>, mask: &SecretMask) -> Arc<dyn ExecutionStore> {
    if mask.is_empty() {
        store
    } else {
        Arc::new(MaskedStore {
            inner: store,
            mask: mask.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;
    use ctx_model::TaskStatus;

    fn plan() -> Plan {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "variables": [{"name": "KEY", "secret": true}],
            "sub_tasks": [{"id": "a", "description": "A",
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "{{KEY}}"}}}]
        }))
        .unwrap()
    }

    #[test]
    fn the_mask_hides_every_occurrence_and_the_longest_text_first() {
        let mask = SecretMask::new([
            ("A".to_string(), "abc".to_string()),
            ("B".to_string(), "abcdef".to_string()),
            ("E".to_string(), String::new()),
        ]);
        assert_eq!(
            mask.apply("x abcdef y abc z"),
            "x [secret B] y [secret A] z"
        );
        assert!(matches!(mask.apply("nothing here"), Cow::Borrowed(_)));
        let p = mask.apply_plan(&{
            let mut p = plan();
            p.sub_tasks[0].tool_or_prompt.params.prompt = "key abc".into();
            p
        });
        assert_eq!(
            p.sub_tasks[0].tool_or_prompt.params.prompt,
            "key [secret A]"
        );
    }

    /// A result whose every text quotes the secret: everything but the
    /// output is masked, at the store's door as by `apply_result`.
    #[test]
    fn every_text_of_a_result_but_its_output_is_masked_at_the_stores_door() {
        let mask = SecretMask::new([("KEY".to_string(), "hunter2".to_string())]);
        let mut result = TaskExecutionResult::new("a", TaskStatus::Failed);
        result.output = "the model said hunter2".into();
        result.prompt = Some("use hunter2".into());
        result.error = Some("400: bad request: use hunter2".into());
        result.summary = Some("about hunter2".into());
        result.metadata.attempts.push(ctx_model::Attempt {
            error: Some("echo: hunter2".into()),
            ..ctx_model::Attempt::ok(1, 5)
        });
        let inner = Arc::new(MemoryStore::new());
        let store = masked_store(Arc::clone(&inner) as Arc<dyn ExecutionStore>, &mask);
        store.store(result.clone()).unwrap();
        let stored = inner.get_by_task_id("a").unwrap().unwrap();
        let json = serde_json::to_string(&stored).unwrap();
        assert_eq!(json.matches("hunter2").count(), 1, "{json}");
        assert_eq!(stored.output, "the model said hunter2");
        assert_eq!(
            stored.error.as_deref(),
            Some("400: bad request: use [secret KEY]")
        );
        assert_eq!(
            stored.metadata.attempts[0].error.as_deref(),
            Some("echo: [secret KEY]")
        );
        let mut direct = result;
        mask.apply_result(&mut direct);
        assert_eq!(direct, stored);
        // No secret, no wrapper.
        let plain = masked_store(
            Arc::clone(&inner) as Arc<dyn ExecutionStore>,
            &SecretMask::default(),
        );
        assert!(Arc::ptr_eq(
            &plain,
            &(Arc::clone(&inner) as Arc<dyn ExecutionStore>)
        ));
    }
}
