//! The plan format's JSON Schema, for editors and other tools.
//!
//! Generated from the same types the parser reads, by schemars (JSON Schema
//! draft 2020-12), so it cannot drift from what `ctx` accepts: fields,
//! types, enum spellings, defaults and `additionalProperties: false`
//! everywhere except `params`. It states the shape only; the cross-field
//! rules (unique ids, known dependencies, no cycles) are
//! [`validate`](crate::validate())'s.

use schemars::generate::SchemaSettings;

use crate::plan::Plan;

/// The plan's JSON Schema as a JSON value.
///
/// Deterministic: the same build always gives the same value (object keys
/// are sorted when serialized by serde_json's default map).
///
/// ```
/// let schema = ctx_model::plan_json_schema();
/// assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
/// assert_eq!(schema["required"], serde_json::json!(["schema_version", "sub_tasks"]));
/// ```
pub fn plan_json_schema() -> serde_json::Value {
    let schema = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<Plan>();
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.insert("title".into(), "ctx plan (schema_version 1)".into());
    }
    value
}
