//! What a run was given besides its plan file, kept with the run by every
//! durable store: the plan's templates before they were filled, each
//! `--var` value, and the history digest that filled
//! `{{HISTORICAL_CONTEXT}}` (issue 22, "variables belong to the run").
//!
//! A run's tasks execute a *filled* plan (`ctx_prompt::plan_fill`); what
//! it was filled from is recorded here so that `ctx run --resume RUN`
//! can fill it again without being given the values again, and with the
//! same digest (an archive read on another day would give another one).
//! A resume given `--var NAME=…` changes that one value, and the changed
//! filled prompts decide what runs again, by the fingerprints as always.
//!
//! A variable declared `secret: true` is never written: its value is
//! kept as its SHA-256 ([`StoredValue::Secret`]), and the text it filled
//! is replaced by `[secret NAME]` in every prompt a store writes
//! ([`SecretMask`]). The fingerprints are taken from the real filled plan,
//! so they still tell a changed value. Since the store cannot give the
//! value back, a resume must be given it again with `--var`.
//!
//! Plain data and string rules, in the seam crate, so that the SQLite
//! store, the PostgreSQL store and ctx-run read and write them alike.

use std::collections::BTreeMap;

use ctx_model::Plan;
use serde::{Deserialize, Serialize};

use crate::fingerprint::sha256_hex;
pub use crate::secret_mask::SecretMask;

/// A run's inputs as its store keeps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInputs {
    /// The plan before its templates were filled (overrides applied,
    /// secret-looking `params` keys redacted as in the stored plan): what
    /// a resume without a plan file fills again.
    pub plan: Plan,
    /// Each value given with `--var`, by name (a default is not stored:
    /// it is the plan's). A secret one as its hash.
    #[serde(default)]
    pub values: BTreeMap<String, StoredValue>,
    /// The neutralized digest that filled `{{HISTORICAL_CONTEXT}}`, when
    /// a task used it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The texts the secrets filled, hidden in whatever a store writes
    /// (never itself written: a store read back has an empty mask).
    #[serde(skip)]
    pub mask: SecretMask,
}

/// One stored variable value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredValue {
    /// The value as given.
    Value(String),
    /// A `secret: true` variable: only `sha256:` and the hex digest of its
    /// value.
    Secret(String),
}

impl StoredValue {
    /// The stored form of `value`: the value itself, or for a secret its
    /// hash.
    pub fn of(value: &str, secret: bool) -> StoredValue {
        if secret {
            StoredValue::Secret(secret_hash(value))
        } else {
            StoredValue::Value(value.to_string())
        }
    }

    /// The value, unless it is a secret's hash.
    pub fn value(&self) -> Option<&str> {
        match self {
            StoredValue::Value(v) => Some(v),
            StoredValue::Secret(_) => None,
        }
    }
}

/// `sha256:` and the hex digest of `value`: what a store keeps of a
/// secret.
pub fn secret_hash(value: &str) -> String {
    format!("sha256:{}", sha256_hex(value.as_bytes()))
}

impl RunInputs {
    /// The inputs of a run of `plan` (the plan before filling) given
    /// `values` (`--var`, by name) and `digest`; each value of a variable
    /// `plan` declares `secret: true` is kept as its hash. Secret-looking
    /// `params` keys are redacted as in the stored plan.
    pub fn new(plan: &Plan, values: &BTreeMap<String, String>, digest: Option<&str>) -> RunInputs {
        let secret = |name: &str| plan.variables.iter().any(|v| v.name == name && v.secret);
        RunInputs {
            plan: crate::fingerprint::redact_plan(plan),
            values: values
                .iter()
                .map(|(k, v)| (k.clone(), StoredValue::of(v, secret(k))))
                .collect(),
            digest: digest.map(str::to_string),
            mask: SecretMask::default(),
        }
    }

    /// The names of the secret values stored (as hashes).
    pub fn secret_names(&self) -> Vec<&str> {
        self.values
            .iter()
            .filter(|(_, v)| matches!(v, StoredValue::Secret(_)))
            .map(|(k, _)| k.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(secret: bool) -> Plan {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "variables": [{"name": "KEY", "secret": secret}, {"name": "WEEK"}],
            "sub_tasks": [{"id": "a", "description": "A",
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "{{KEY}} {{WEEK}}"}}}]
        }))
        .unwrap()
    }

    #[test]
    fn a_secret_value_is_stored_as_its_hash_and_the_others_as_given() {
        let values = BTreeMap::from([
            ("KEY".to_string(), "hunter2".to_string()),
            ("WEEK".to_string(), "W35".to_string()),
        ]);
        let inputs = RunInputs::new(&plan(true), &values, Some("digest"));
        let json = serde_json::to_string(&inputs).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(json.contains(&secret_hash("hunter2")), "{json}");
        assert_eq!(inputs.values["WEEK"].value(), Some("W35"));
        assert_eq!(inputs.secret_names(), ["KEY"]);
        let back: RunInputs = serde_json::from_str(&json).unwrap();
        assert_eq!(back, inputs);
        let masked = RunInputs {
            mask: SecretMask::new([("KEY".into(), "hunter2".into())]),
            ..inputs.clone()
        };
        assert_eq!(serde_json::to_string(&masked).unwrap(), json);
        let open = RunInputs::new(&plan(false), &values, None);
        assert_eq!(open.values["KEY"].value(), Some("hunter2"));
        assert!(open.secret_names().is_empty());
    }
}
