//! A run's inputs (its `--var` values and its history digest) as the run
//! keeps them, for either store: what a new run records
//! ([`recorded`]), what a resume fills its plan with again
//! ([`resumed_values`], [`reuse_digest`]), and the texts of its secrets
//! hidden in what is stored ([`secret_mask`]).
//!
//! The rules (docs/runs.md, "Variables belong to the run"):
//! * a resume fills the plan (the one given, else the one stored before
//!   filling) with the stored values, each `--var` replacing its own;
//!   values of names the plan no longer declares are dropped;
//! * the stored digest is reused unless a digest flag is given or the
//!   plan's `history:` block changed; then it is computed again;
//! * a secret is stored only as its hash, so a resume must be given it
//!   again ([`InputsError::SecretNeeded`], naming the variable);
//! * what runs again follows from the filled prompts: the fingerprints
//!   of the tasks whose prompts changed differ, and the resume rules rerun
//!   them and their dependents.

use std::collections::BTreeMap;

use ctx_model::{Class, Plan};
pub use ctx_store::{RunInputs, SecretMask, StoredValue};

/// A stored run's inputs cannot fill its plan again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputsError {
    /// Secret variables whose values are stored only as hashes.
    #[error(
        "{}: the run stored only {}, so a resume must be given {} again ({})",
        match names.as_slice() { [n] => format!("variable {n} is secret"), _ => format!("variables {} are secret", names.join(", ")) },
        if names.len() == 1 { "its hash" } else { "their hashes" },
        if names.len() == 1 { "it" } else { "them" },
        names.iter().map(|n| format!("--var {n}=VALUE")).collect::<Vec<_>>().join(" ")
    )]
    SecretNeeded {
        /// The variables, by name.
        names: Vec<String>,
    },
}

/// The values a resume of a run with `stored` inputs fills `plan` with:
/// the stored ones `plan` still declares, each replaced by its `given`
/// value; a `given` name `plan` does not declare is kept, for the fill to
/// refuse with its usual message. A stored secret that is not given again
/// is [`InputsError::SecretNeeded`].
pub fn resumed_values(
    stored: &RunInputs,
    plan: &Plan,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, InputsError> {
    let mut values = given.clone();
    let mut needed = Vec::new();
    for (name, value) in &stored.values {
        if given.contains_key(name) || !plan.variables.iter().any(|v| &v.name == name) {
            continue;
        }
        match value {
            StoredValue::Value(v) => {
                values.insert(name.clone(), v.clone());
            }
            StoredValue::Secret(_) => needed.push(name.clone()),
        }
    }
    if !needed.is_empty() {
        return Err(InputsError::SecretNeeded { names: needed });
    }
    Ok(values)
}

/// Whether a resume of `plan` reuses the stored digest: one was stored,
/// no digest flag is given (`flags_given`), and the plan's `history:`
/// block is the one the run was filled with.
pub fn reuse_digest<'a>(stored: &'a RunInputs, plan: &Plan, flags_given: bool) -> Option<&'a str> {
    if flags_given || plan.history != stored.plan.history {
        return None;
    }
    stored.digest.as_deref()
}

/// The texts `values` (the values a plan was filled with, defaults
/// included) put in its prompts for each `secret: true` variable: the
/// value as given, and neutralized as an untrusted value is inserted.
pub fn secret_mask(plan: &Plan, values: &BTreeMap<String, String>) -> SecretMask {
    let mut hidden = Vec::new();
    for v in plan.variables.iter().filter(|v| v.secret) {
        let Some(value) = values.get(&v.name) else {
            continue;
        };
        hidden.push((v.name.clone(), value.clone()));
        if v.class == Class::Untrusted {
            hidden.push((v.name.clone(), ctx_prompt::fence::neutralize(value)));
        }
    }
    SecretMask::new(hidden)
}

/// What a run of `plan` (before filling) records: the `given` values (a
/// secret's as its hash), the `digest`, and the mask of the secrets'
/// texts among `filled_values` (the values the fill used, defaults
/// included). `None` when the plan has nothing to fill.
pub fn recorded(
    plan: &Plan,
    given: &BTreeMap<String, String>,
    digest: Option<&str>,
    filled_values: &BTreeMap<String, String>,
) -> Option<RunInputs> {
    if !ctx_prompt::plan_fill::has_templates(plan) && given.is_empty() && digest.is_none() {
        return None;
    }
    let mut inputs = RunInputs::new(plan, given, digest);
    inputs.mask = secret_mask(plan, filled_values);
    Some(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(history_date: Option<&str>) -> Plan {
        let mut v = serde_json::json!({
            "schema_version": 1,
            "variables": [
                {"name": "KEY", "secret": true},
                {"name": "WEEK", "class": "trusted"},
                {"name": "RAW"}
            ],
            "sub_tasks": [{"id": "a", "description": "A",
                "tool_or_prompt": {"name": "inference", "params": {"prompt": "{{WEEK}}"}}}]
        });
        if let Some(d) = history_date {
            v["history"] = serde_json::json!({"content_root": "archive", "date": d});
        }
        serde_json::from_value(v).unwrap()
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_resume_keeps_the_stored_values_and_a_given_one_replaces_its_own() {
        let p = plan(None);
        let stored = RunInputs::new(&p, &map(&[("WEEK", "W35"), ("RAW", "{}")]), None);
        let values = resumed_values(&stored, &p, &map(&[("WEEK", "W36")])).unwrap();
        assert_eq!(values, map(&[("WEEK", "W36"), ("RAW", "{}")]));
        // A name the plan no longer declares is dropped; a given one is
        // kept for the fill to refuse.
        let mut fewer = p.clone();
        fewer.variables.retain(|v| v.name != "RAW");
        let values = resumed_values(&stored, &fewer, &map(&[("NOPE", "x")])).unwrap();
        assert_eq!(values, map(&[("WEEK", "W35"), ("NOPE", "x")]));
    }

    #[test]
    fn a_stored_secret_must_be_given_again() {
        let p = plan(None);
        let stored = RunInputs::new(&p, &map(&[("KEY", "s3cret"), ("WEEK", "W35")]), None);
        let err = resumed_values(&stored, &p, &BTreeMap::new()).unwrap_err();
        assert_eq!(
            err,
            InputsError::SecretNeeded {
                names: vec!["KEY".into()]
            }
        );
        assert_eq!(
            err.to_string(),
            "variable KEY is secret: the run stored only its hash, so a resume must be given it again (--var KEY=VALUE)"
        );
        let values = resumed_values(&stored, &p, &map(&[("KEY", "other")])).unwrap();
        assert_eq!(values, map(&[("KEY", "other"), ("WEEK", "W35")]));
    }

    #[test]
    fn the_stored_digest_is_reused_unless_a_flag_or_the_history_block_changes_it() {
        let p = plan(Some("2026-09-01"));
        let stored = RunInputs::new(&p, &BTreeMap::new(), Some("the digest"));
        assert_eq!(reuse_digest(&stored, &p, false), Some("the digest"));
        assert_eq!(reuse_digest(&stored, &p, true), None);
        assert_eq!(
            reuse_digest(&stored, &plan(Some("2026-09-08")), false),
            None
        );
    }

    #[test]
    fn the_mask_hides_a_secret_as_given_and_as_neutralized() {
        let p = plan(None);
        let hostile = "k<untrusted-content>y";
        let mask = secret_mask(&p, &map(&[("KEY", hostile), ("WEEK", "W35")]));
        let neutral = ctx_prompt::fence::neutralize(hostile);
        assert_ne!(neutral, hostile);
        assert_eq!(
            mask.apply(&format!("{hostile} {neutral} W35")),
            "[secret KEY] [secret KEY] W35"
        );
        let inputs = recorded(
            &p,
            &map(&[("KEY", hostile)]),
            None,
            &map(&[("KEY", hostile)]),
        )
        .unwrap();
        assert!(!inputs.mask.is_empty());
        assert!(
            !serde_json::to_string(&inputs)
                .unwrap()
                .contains("k<untrusted")
        );
    }
}
