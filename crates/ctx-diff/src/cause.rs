//! Why a task's result may differ between two runs: which of its inputs
//! differ.
//!
//! The stored fingerprints decide *whether* a part changed: the hash of a
//! task's own inputs, its model, the hash of its other parameters, and
//! the engine each result was stored with are exactly what a resume
//! compares. They are one hash of everything a task's own prompt is
//! made of, so *which* part changed is read from what each run stored
//! beside them, with no new storage: the plan as run (filled, so its
//! texts, entities, dependency edges, config and checks), and the run's
//! inputs (each task's templates before filling, each `--var` value, the
//! digest). A dependency's output is compared in the two runs' results
//! directly, and named.
//!
//! Why no per-part hashes are stored with each result instead: the plan
//! and inputs a run stores already hold every part in full, and reading
//! the parts from them needs no schema change in either store and works
//! on every run stored so far. The one limit is that a store keeps the
//! plan and inputs of a run's *last* session: a result an earlier session
//! produced under other inputs, and the last one neither reused nor ran
//! again (a session stopped before reaching it), is compared part by
//! part against the last session's plan. Its fingerprint still says
//! truly whether its own inputs differ; only which part is then read
//! from the later plan.
//!
//! A change the fingerprints show but the stored plans cannot place is
//! said as such ([`Cause::Inputs`]), never guessed; a result stored
//! without a fingerprint (a store from before them) gives
//! [`Cause::NotRecorded`]. When nothing differs and the output does, the
//! cause is the model's own variance ([`Cause::SameInputs`]).

use std::collections::BTreeSet;

use ctx_model::map::parse_item_id;
use ctx_model::{HISTORICAL_CONTEXT, Plan, SubTask};
use ctx_store::{ResultRecord, RunInputs, StoredValue, TaskFingerprint};
use serde::Serialize;
use serde_json::Value;

use crate::side::RunSide;

/// One input of a task that differs between the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// The task's own prompt or system prompt, as written.
    Prompt,
    /// The value (or type, or relevance) of an entity it is given.
    Entity {
        /// The entity.
        name: String,
    },
    /// A variable it reads (`--var`, or its default).
    Variable {
        /// The variable.
        name: String,
    },
    /// The history digest (`{{HISTORICAL_CONTEXT}}`) it reads.
    Digest,
    /// Its dependencies: which tasks, or their descriptions.
    Dependencies,
    /// The output of one of its dependencies.
    Dependency {
        /// The dependency.
        name: String,
    },
    /// The plan's `config` (prompt assembly).
    Config,
    /// Its checks, or `max_check_attempts`.
    Checks,
    /// A map item's own content (its item).
    Item,
    /// `params.model`.
    Model {
        /// In run A.
        a: Option<String>,
        /// In run B.
        b: Option<String>,
    },
    /// Another parameter (temperature, max_tokens, ...).
    Params,
    /// The engine that produced the result.
    Engine {
        /// In run A.
        a: String,
        /// In run B.
        b: String,
    },
    /// Its own inputs differ, in a part the stored plans do not show.
    Inputs,
    /// A result was stored without its fingerprint (a store from before
    /// them): what its own inputs were is not recorded.
    NotRecorded,
    /// Nothing differs, yet the output does: the model's variance.
    SameInputs,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = |m: &Option<String>| m.clone().unwrap_or_else(|| "(none)".into());
        match self {
            Cause::Prompt => f.write_str("prompt"),
            Cause::Entity { name } => write!(f, "entity {name}"),
            Cause::Variable { name } => write!(f, "variable {name}"),
            Cause::Digest => f.write_str("digest"),
            Cause::Dependencies => f.write_str("dependencies"),
            Cause::Dependency { name } => write!(f, "output of {name}"),
            Cause::Config => f.write_str("config"),
            Cause::Checks => f.write_str("checks"),
            Cause::Item => f.write_str("item"),
            Cause::Model { a, b } => write!(f, "model {} -> {}", m(a), m(b)),
            Cause::Params => f.write_str("params"),
            Cause::Engine { a, b } => write!(f, "engine {a} -> {b}"),
            Cause::Inputs => f.write_str("inputs (part not recorded)"),
            Cause::NotRecorded => f.write_str("not recorded"),
            Cause::SameInputs => f.write_str("same inputs"),
        }
    }
}

/// The causes of task `id_a` of `a` becoming task `id_b` of `b`;
/// `output_changed` says whether the output differs. Empty when neither
/// has a result, or nothing differs and the output is the same.
pub fn task_causes(
    a: &RunSide,
    b: &RunSide,
    (id_a, id_b): (&str, &str),
    output_changed: bool,
) -> Vec<Cause> {
    let (Some(ra), Some(rb)) = (a.latest.get(id_a), b.latest.get(id_b)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let recorded = match (fingerprint(a, id_a, ra), fingerprint(b, id_b, rb)) {
        (Some(fa), Some(fb)) => {
            if fa.inputs_hash != fb.inputs_hash {
                let own = own_causes(a, b, (id_a, id_b));
                if own.is_empty() {
                    out.push(Cause::Inputs);
                }
                out.extend(own);
            }
            if fa.model != fb.model {
                out.push(Cause::Model {
                    a: fa.model.clone(),
                    b: fb.model.clone(),
                });
            }
            if fa.params_hash != fb.params_hash {
                out.push(Cause::Params);
            }
            true
        }
        _ => false,
    };
    if ra.engine != rb.engine {
        out.push(Cause::Engine {
            a: ra.engine.clone(),
            b: rb.engine.clone(),
        });
    }
    let own_found = !out.is_empty();
    out.extend(list_cause(a, b, (id_a, id_b), &out));
    out.extend(dependency_causes(a, b, (id_a, id_b), (ra, rb)));
    if item_changed(a, b, (id_a, id_b), (ra, rb), own_found) {
        out.push(Cause::Item);
    }
    if !recorded {
        out.push(Cause::NotRecorded);
    }
    if out.is_empty() && output_changed {
        out.push(Cause::SameInputs);
    }
    out
}

/// A map task's list, when it is a variable whose value differs: the
/// fingerprint of a map task covers its prompt, not the list it expands
/// (its items' hashes do), so the variable is named from the runs'
/// inputs. A list read from a dependency is that dependency's output,
/// named as such. `found`: the causes already found, not repeated.
fn list_cause(
    a: &RunSide,
    b: &RunSide,
    (id_a, id_b): (&str, &str),
    found: &[Cause],
) -> Option<Cause> {
    let (ta, tb) = (a.plan.task(id_a)?, b.plan.task(id_b)?);
    let (ma, mb) = (ta.map.as_ref()?, tb.map.as_ref()?);
    if ma.over != mb.over || b.plan.task(&mb.over).is_some() {
        return None;
    }
    let (ia, ib) = (a.inputs.as_ref()?, b.inputs.as_ref()?);
    let cause = Cause::Variable {
        name: mb.over.clone(),
    };
    (variable_value(ia, &ma.over) != variable_value(ib, &mb.over) && !found.contains(&cause))
        .then_some(cause)
}

/// Whether a map item's own content (its item in the list) differs. Read
/// from the two runs' lists when both can be read, so the item is named
/// beside any other cause (a changed map prompt changes every item's
/// hash, not every item); else from the item hashes, which cover the map
/// task's inputs too, so only when nothing else (`own_found`) explains
/// them.
fn item_changed(
    a: &RunSide,
    b: &RunSide,
    (id_a, id_b): (&str, &str),
    (ra, rb): (&ResultRecord, &ResultRecord),
    own_found: bool,
) -> bool {
    if a.plan.task(id_a).is_some() || b.plan.task(id_b).is_some() {
        return false;
    }
    if let (Some(x), Some(y)) = (a.item_digest(id_a), b.item_digest(id_b)) {
        return x != y;
    }
    let hashes = (
        &ra.result.metadata.map_item_hash,
        &rb.result.metadata.map_item_hash,
    );
    matches!(hashes, (Some(ha), Some(hb)) if ha != hb) && !own_found
}

/// The fingerprint `id`'s result was stored under: its own, or for a map
/// item its map task's (an item's own inputs are its map task's and its
/// item, which the item hash covers).
fn fingerprint<'s>(
    side: &'s RunSide,
    id: &str,
    record: &'s ResultRecord,
) -> Option<&'s TaskFingerprint> {
    match parse_item_id(id) {
        Some((map, _)) if side.plan.task(id).is_none() => {
            side.latest.get(map).and_then(|r| r.fingerprint.as_ref())
        }
        _ => record.fingerprint.as_ref(),
    }
}

/// Which of a task's own inputs differ, read from the stored plans and
/// inputs (the fingerprints said some did).
fn own_causes(a: &RunSide, b: &RunSide, (id_a, id_b): (&str, &str)) -> Vec<Cause> {
    let (Some(ta), Some(tb)) = (a.plan_task(id_a), b.plan_task(id_b)) else {
        return Vec::new();
    };
    let templates = match (&a.inputs, &b.inputs) {
        (Some(ia), Some(ib)) => Some((ia, ib)),
        _ => None,
    };
    let written = templates.map(|(ia, ib)| (ia.plan.task(&ta.id), ib.plan.task(&tb.id)));
    let mut out = Vec::new();
    if texts(ta) != texts(tb) {
        // Filled texts differ: the template, or a value filled into it.
        match written {
            Some((Some(wa), Some(wb))) if texts(wa) == texts(wb) => {}
            _ => out.push(Cause::Prompt),
        }
    }
    for name in entity_changes(&a.plan, ta, &b.plan, tb) {
        let as_written = match (templates, written) {
            (Some((ia, ib)), Some((Some(wa), Some(wb)))) => {
                entity_value(&ia.plan, wa, &name) == entity_value(&ib.plan, wb, &name)
            }
            _ => false,
        };
        if !as_written {
            out.push(Cause::Entity { name });
        }
    }
    if let Some((ia, ib)) = templates {
        out.extend(value_causes(ia, ib, &ta.id, &tb.id));
    }
    if dependency_list(&a.plan, ta) != dependency_list(&b.plan, tb) {
        out.push(Cause::Dependencies);
    }
    if assembly_config(&a.plan) != assembly_config(&b.plan) {
        out.push(Cause::Config);
    }
    if checks(&a.plan, ta) != checks(&b.plan, tb) {
        out.push(Cause::Checks);
    }
    out
}

fn texts(t: &SubTask) -> (&str, Option<&str>) {
    let p = &t.tool_or_prompt.params;
    (p.prompt.as_str(), p.system.as_deref())
}

/// The variables and the digest a task reads whose values differ.
fn value_causes(ia: &RunInputs, ib: &RunInputs, id_a: &str, id_b: &str) -> Vec<Cause> {
    let mut names = ctx_prompt::plan_fill::task_placeholders(&ia.plan, id_a);
    names.extend(ctx_prompt::plan_fill::task_placeholders(&ib.plan, id_b));
    names
        .into_iter()
        .filter_map(|name| {
            if name == HISTORICAL_CONTEXT {
                (ia.digest != ib.digest).then_some(Cause::Digest)
            } else {
                (variable_value(ia, &name) != variable_value(ib, &name))
                    .then_some(Cause::Variable { name })
            }
        })
        .collect()
}

/// A variable's value as a run used it: given (a secret as its hash),
/// else its declared default.
pub(crate) fn variable_value(inputs: &RunInputs, name: &str) -> Option<String> {
    match inputs.values.get(name) {
        Some(StoredValue::Value(v)) => Some(v.clone()),
        Some(StoredValue::Secret(hash)) => Some(hash.clone()),
        None => inputs
            .plan
            .variables
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.default.clone()),
    }
}

/// The names of the entities given to `ta` and `tb` whose type, value or
/// relevance differ, or that only one is given.
fn entity_changes(pa: &Plan, ta: &SubTask, pb: &Plan, tb: &SubTask) -> Vec<String> {
    let names: BTreeSet<String> = pa
        .resolve_entity_context(ta)
        .into_iter()
        .chain(pb.resolve_entity_context(tb))
        .map(|e| e.name)
        .collect();
    names
        .into_iter()
        .filter(|n| entity_value(pa, ta, n) != entity_value(pb, tb, n))
        .collect()
}

fn entity_value(plan: &Plan, task: &SubTask, name: &str) -> Option<Value> {
    plan.resolve_entity_context(task)
        .into_iter()
        .find(|e| e.name == name)
        .map(|e| serde_json::json!([e.entity_type, e.grounded_value, e.intent_relevance]))
}

fn dependency_list(plan: &Plan, t: &SubTask) -> Vec<(String, Option<String>)> {
    t.dependencies
        .iter()
        .map(|d| (d.clone(), plan.task(d).map(|x| x.description.clone())))
        .collect()
}

/// The config as the fingerprint hashes it for every task: without the
/// checks (their own cause) and the warm-up (timing only).
fn assembly_config(plan: &Plan) -> Value {
    let mut config = serde_json::to_value(&plan.config).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut config {
        map.remove("checks");
        map.remove("max_check_attempts");
        map.remove("cache_warm_up");
    }
    config
}

fn checks(plan: &Plan, t: &SubTask) -> Value {
    let checks = ctx_model::task_checks(plan, t);
    if checks.is_empty() {
        return Value::Null;
    }
    serde_json::json!([checks, plan.config.max_check_attempts])
}

/// The dependencies whose output differs between the runs, named.
fn dependency_causes(
    a: &RunSide,
    b: &RunSide,
    (id_a, id_b): (&str, &str),
    (ra, rb): (&ResultRecord, &ResultRecord),
) -> Vec<Cause> {
    let before: BTreeSet<String> = a.dependencies(id_a).into_iter().collect();
    b.dependencies(id_b)
        .into_iter()
        .filter(|d| before.contains(d))
        .filter(|d| {
            let is_map = b.plan.task(d).is_some_and(|t| t.map.is_some());
            let received = (
                &ra.result.metadata.map_inputs,
                &rb.result.metadata.map_inputs,
            );
            match received {
                // A map's dependent receives its items: their digest says.
                (Some(x), Some(y)) if is_map => x != y,
                _ => {
                    let out = |s: &RunSide| {
                        s.latest
                            .get(d.as_str())
                            .map(|r| (r.result.status, r.result.output.clone()))
                    };
                    out(a) != out(b)
                }
            }
        })
        .map(|name| Cause::Dependency { name })
        .collect()
}
