//! What a task's result depends on, hashed: the basis of resume decisions.
//!
//! A task's final prompt is a function of two things: the task's *own
//! inputs* (its prompt template, system prompt, the entity values it is
//! given, the ids and descriptions of its dependencies, the plan's
//! assembly config) and its *upstream outputs*. Its result further depends
//! on the model and the other sampling parameters. A [`TaskFingerprint`]
//! captures the first part and the model and parameters, each hashed
//! separately so a resume can say *which* changed. Upstream outputs are
//! not hashed: they are covered by the upstream tasks' own decisions (see
//! [`crate::ResumePlan`]).
//!
//! Secrets: keys of `params` that name credentials ([`is_secret_key`]) are
//! left out of every hash and replaced by `"[redacted]"` in the plan the
//! store keeps, so a plan that carries an API key by mistake does not put it
//! on disk.

use std::collections::HashMap;

use ctx_model::{Params, Plan, SubTask};
use serde_json::{Map, Value, json};

/// The hashed inputs of one task, as recorded with each stored result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFingerprint {
    /// SHA-256 of the inputs that shape the final prompt, apart from
    /// upstream outputs: tool name, `params.prompt`, `params.system`, the
    /// resolved entity values, the dependency ids and descriptions, the
    /// plan's `config`, and, for a task with checks only, its checks
    /// (`config.checks` then its own) and `config.max_check_attempts`.
    pub inputs_hash: String,
    /// `params.model`.
    pub model: Option<String>,
    /// SHA-256 of the remaining parameters (temperature, max_tokens, top_p,
    /// stop, seed, passthrough keys), without `prompt`, `model`, `system`,
    /// `estimated_ms` (scheduling only) and secret keys.
    pub params_hash: String,
}

/// Computes `task`'s fingerprint within `plan`.
pub fn fingerprint(plan: &Plan, task: &SubTask) -> TaskFingerprint {
    fingerprint_with(plan, task, &|id| {
        plan.task(id).map(|t| t.description.as_str())
    })
}

/// Every task's fingerprint, by id (one pass; dependency descriptions are
/// looked up in a map, not by scanning the plan).
pub fn fingerprint_all(plan: &Plan) -> HashMap<String, TaskFingerprint> {
    let index = plan.task_index();
    let lookup = |id: &str| index.get(id).map(|t| t.description.as_str());
    plan.sub_tasks
        .iter()
        .map(|t| (t.id.clone(), fingerprint_with(plan, t, &lookup)))
        .collect()
}

fn fingerprint_with<'p>(
    plan: &'p Plan,
    task: &SubTask,
    description: &dyn Fn(&str) -> Option<&'p str>,
) -> TaskFingerprint {
    let params = &task.tool_or_prompt.params;
    let entities: Vec<Value> = plan
        .resolve_entity_context(task)
        .into_iter()
        .map(|e| {
            json!({
                "name": e.name,
                "type": e.entity_type,
                "value": e.grounded_value,
                "intent_relevance": e.intent_relevance,
            })
        })
        .collect();
    let dependencies: Vec<Value> = task
        .dependencies
        .iter()
        .map(|d| json!({"id": d, "description": description(d)}))
        .collect();
    // The checks are hashed apart from the rest of the config, and only
    // for a task that has some: a task's checks decide whether its output
    // is accepted and what its retried prompts say, so editing them (or
    // `max_check_attempts`) must re-run it, while a task without checks
    // keeps the fingerprint it had before checks existed, so runs stored
    // by older versions resume with everything reused.
    // `cache_warm_up` decides only when a call is sent, never what it
    // sends: turning it on or off must not run anything again. Nor does
    // `budget` (a period budget, `--budget`) change what a call sends: its
    // amount changed mid-month must not run a resumed run's finished tasks
    // again. A fallback tier changes each moved task's model, which is in
    // the fingerprint on its own.
    let mut config = serde_json::to_value(&plan.config).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut config {
        map.remove("checks");
        map.remove("max_check_attempts");
        map.remove("cache_warm_up");
        map.remove("budget");
    }
    let mut inputs = json!({
        "tool": task.tool_or_prompt.name,
        "prompt": params.prompt,
        "system": params.system,
        "entities": entities,
        "dependencies": dependencies,
        "config": config,
    });
    // A task's own `output` block changes what its checks and dependents
    // see, as `config.output` does (hashed with the config); hashed only
    // when present, so other tasks keep their fingerprints.
    if let (Some(block), Value::Object(map)) = (&task.output, &mut inputs) {
        map.insert(
            "output".into(),
            serde_json::to_value(block).unwrap_or(Value::Null),
        );
    }
    let checks = ctx_model::task_checks(plan, task);
    if !checks.is_empty()
        && let Value::Object(map) = &mut inputs
    {
        map.insert(
            "checks".into(),
            json!({
                "checks": serde_json::to_value(&checks).unwrap_or(Value::Null),
                "max_check_attempts": plan.config.max_check_attempts,
            }),
        );
    }
    TaskFingerprint {
        inputs_hash: sha256_hex(canonical_json(&inputs).as_bytes()),
        model: params.model.clone(),
        params_hash: sha256_hex(canonical_json(&sampling_params(params)).as_bytes()),
    }
}

/// The parameters that influence sampling, as canonical JSON input: every
/// key but `prompt`, `model`, `system`, `estimated_ms` and secret keys.
pub fn sampling_params(params: &Params) -> Value {
    let mut v = serde_json::to_value(params).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        for k in ["prompt", "model", "system", "estimated_ms"] {
            map.remove(k);
        }
        map.retain(|k, _| !is_secret_key(k));
        for val in map.values_mut() {
            strip_secrets(val, false);
        }
    }
    v
}

/// Whether a parameter key names a credential: `api_key`, `apikey`,
/// `authorization`, `password`, `secret`, `token`, `access_token`, or any
/// key ending in `_key`, `_secret`, `_password`, `_token` (case-insensitive,
/// `-` treated as `_`). `max_tokens` and `stop` are not secrets.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    matches!(
        k.as_str(),
        "api_key"
            | "apikey"
            | "authorization"
            | "auth"
            | "password"
            | "passwd"
            | "secret"
            | "token"
            | "bearer"
    ) || ["_key", "_secret", "_password", "_token", "_apikey"]
        .iter()
        .any(|s| k.ends_with(s))
}

/// Replaces (with `redact`) or removes every secret key inside `v`,
/// recursively.
fn strip_secrets(v: &mut Value, redact: bool) {
    match v {
        Value::Object(map) => {
            if redact {
                for (k, val) in map.iter_mut() {
                    if is_secret_key(k) {
                        *val = Value::String("[redacted]".into());
                    } else {
                        strip_secrets(val, redact);
                    }
                }
            } else {
                map.retain(|k, _| !is_secret_key(k));
                for val in map.values_mut() {
                    strip_secrets(val, redact);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| strip_secrets(x, redact)),
        _ => {}
    }
}

/// `plan` with every secret key in `params` (at any depth) replaced by
/// `"[redacted]"`: the form the store writes to disk.
pub fn redact_plan(plan: &Plan) -> Plan {
    let mut plan = plan.clone();
    for task in &mut plan.sub_tasks {
        let extra = &mut task.tool_or_prompt.params.extra;
        for (k, v) in extra.iter_mut() {
            if is_secret_key(k) {
                *v = Value::String("[redacted]".into());
            } else {
                strip_secrets(v, true);
            }
        }
    }
    plan
}

/// JSON with object keys sorted at every depth and no whitespace: equal
/// values give equal bytes whatever map order serde_json was built with.
pub fn canonical_json(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    if let Some(x) = m.get(k) {
                        out.insert(k.clone(), sort(x));
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// The one hex digest ([`ctx_model::digest`]), named here too because
/// every durable store hashes with it.
pub use ctx_model::digest::{sha256_fields, sha256_hex};

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        serde_json::from_value(json!({
            "schema_version": 1,
            "entities": [{"name": "Board", "type": "constraint", "grounded_value": "10 x 20"}],
            "sub_tasks": [
                {"id": "a", "description": "first",
                 "entity_context": [{"entity_name": "Board", "intent_relevance": "constraint"}],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "P", "model": "m", "temperature": 0.0, "api_key": "sk-1"}}},
                {"id": "b", "description": "second", "dependencies": ["a"],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "Q"}}}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn each_part_changes_with_its_input_only() {
        let p = plan();
        let base_a = fingerprint(&p, &p.sub_tasks[0]);
        let base_b = fingerprint(&p, &p.sub_tasks[1]);

        let mut q = p.clone();
        q.sub_tasks[0].tool_or_prompt.params.temperature = Some(0.7);
        let f = fingerprint(&q, &q.sub_tasks[0]);
        assert_eq!(f.inputs_hash, base_a.inputs_hash);
        assert_ne!(f.params_hash, base_a.params_hash);

        let mut q = p.clone();
        q.entities[0].grounded_value = Some("12 x 24".into());
        let f = fingerprint(&q, &q.sub_tasks[0]);
        assert_ne!(f.inputs_hash, base_a.inputs_hash);
        assert_eq!(f.params_hash, base_a.params_hash);

        // A dependency's description appears in the dependent's prompt only.
        let mut q = p.clone();
        q.sub_tasks[0].description = "first, renamed".into();
        assert_eq!(fingerprint(&q, &q.sub_tasks[0]), base_a);
        assert_ne!(
            fingerprint(&q, &q.sub_tasks[1]).inputs_hash,
            base_b.inputs_hash
        );

        // Scheduling hints and secrets change nothing.
        let mut q = p.clone();
        q.sub_tasks[0].tool_or_prompt.params.estimated_ms = Some(5);
        q.sub_tasks[0]
            .tool_or_prompt
            .params
            .extra
            .insert("api_key".into(), json!("sk-2"));
        assert_eq!(fingerprint(&q, &q.sub_tasks[0]), base_a);
    }

    #[test]
    fn checks_change_the_fingerprint_of_tasks_that_have_them_only() {
        let p = plan();
        let base_a = fingerprint(&p, &p.sub_tasks[0]);
        let base_b = fingerprint(&p, &p.sub_tasks[1]);
        let check = |text: &str| serde_json::from_value(json!({"contains": text})).unwrap();

        // A task's own check: that task re-runs, the other does not.
        let mut q = p.clone();
        q.sub_tasks[0].checks.push(check("10 x 20"));
        let with_check = fingerprint(&q, &q.sub_tasks[0]);
        assert_ne!(with_check.inputs_hash, base_a.inputs_hash);
        assert_eq!(fingerprint(&q, &q.sub_tasks[1]), base_b);
        // Editing it, or the attempts, changes it again.
        let mut r = q.clone();
        r.sub_tasks[0].checks[0] = check("12 x 24");
        assert_ne!(fingerprint(&r, &r.sub_tasks[0]), with_check);
        let mut r = q.clone();
        r.config.max_check_attempts = 3;
        assert_ne!(fingerprint(&r, &r.sub_tasks[0]), with_check);
        // ... which leaves a task without checks alone.
        assert_eq!(fingerprint(&r, &r.sub_tasks[1]), base_b);

        // `config.checks` applies to every task.
        let mut q = p.clone();
        q.config.checks.push(check("x"));
        assert_ne!(fingerprint(&q, &q.sub_tasks[0]), base_a);
        assert_ne!(fingerprint(&q, &q.sub_tasks[1]), base_b);
    }

    #[test]
    fn a_task_without_checks_keeps_its_pre_checks_fingerprint() {
        // The inputs exactly as they were hashed before checks existed:
        // the config without `checks` and `max_check_attempts`.
        let p = plan();
        let mut config = serde_json::to_value(&p.config).unwrap();
        let map = config.as_object_mut().unwrap();
        map.remove("checks");
        map.remove("max_check_attempts");
        let old = json!({
            "tool": "inference",
            "prompt": "Q",
            "system": null,
            "entities": [],
            "dependencies": [{"id": "a", "description": "first"}],
            "config": config,
        });
        assert_eq!(
            fingerprint(&p, &p.sub_tasks[1]).inputs_hash,
            sha256_hex(canonical_json(&old).as_bytes())
        );
        // Whatever max_check_attempts says when there are no checks.
        let mut q = p.clone();
        q.config.max_check_attempts = 5;
        assert_eq!(
            fingerprint(&q, &q.sub_tasks[1]),
            fingerprint(&p, &p.sub_tasks[1])
        );
        // Nor does the cache warm-up, which only times the calls.
        q.config.cache_warm_up = Some(4);
        assert_eq!(
            fingerprint(&q, &q.sub_tasks[1]),
            fingerprint(&p, &p.sub_tasks[1])
        );
        // Nor a period budget, which bounds spending and sends nothing.
        q.config.budget = Some("team=5/month".parse().unwrap());
        assert_eq!(
            fingerprint(&q, &q.sub_tasks[1]),
            fingerprint(&p, &p.sub_tasks[1])
        );
    }

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let mut p = plan();
        p.sub_tasks[0].tool_or_prompt.params.extra.insert(
            "headers".into(),
            json!({"Authorization": "Bearer x", "X-Trace": "1"}),
        );
        let r = redact_plan(&p);
        let s = serde_json::to_string(&r).unwrap();
        assert!(!s.contains("sk-1"), "{s}");
        assert!(!s.contains("Bearer x"), "{s}");
        assert!(s.contains("X-Trace"));
        assert!(s.contains("temperature"));
        assert!(is_secret_key("OPENAI_API_KEY"));
        assert!(is_secret_key("x-api-key"));
        assert!(!is_secret_key("max_tokens"));
        assert!(!is_secret_key("stop"));
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"d":2,"c":3}}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":{"c":3,"d":2},"b":1}"#);
        assert_ne!(sha256_fields(&[b"ab", b"c"]), sha256_fields(&[b"a", b"bc"]));
    }
}
