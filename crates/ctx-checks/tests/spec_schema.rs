//! The check types' hand-written JSON Schema (ctx_model::checks) accepts
//! exactly what their deserialization accepts. Here and not beside the
//! types because it validates with `jsonschema`, which this crate compiles
//! and the plan model does not depend on.

use ctx_checks::Check;

fn parse(json: &str) -> Result<Vec<Check>, String> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize::<_, Vec<Check>>(de)
        .map_err(|e| format!("checks{}: {}", bracket(&e.path().to_string()), e.inner()))
}

/// serde_path_to_error prints `[2].regex`; a plan parser prefixes the
/// field name, so `checks[2].regex`.
fn bracket(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        path.to_string()
    }
}

#[test]
fn schema_accepts_exactly_what_deserialization_accepts() {
    let schema = serde_json::to_value(schemars::schema_for!(Vec<Check>)).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let samples = [
        r#"{"contains": "a"}"#,
        r#"{"contains": "a", "case_sensitive": false, "message": "m"}"#,
        r#"{"not_contains": "a"}"#,
        r#"{"regex": "a+"}"#,
        r#"{"max_words": 0}"#,
        r#"{"max_chars": 10}"#,
        r#"{"json": true}"#,
        r#"{"json": false}"#,
        r#"{"json_schema": {"type": "object"}}"#,
        r#"{"json_schema": "s.json"}"#,
        r#"{"json_schema": true}"#,
        r#"{"entities": true}"#,
        r#"{"entities": false}"#,
        r#"{"judge": "ok?", "judge_model": "m", "max_tokens": 5}"#,
        r#"{"message": "only"}"#,
        r#"{"contains": "a", "regex": "b"}"#,
        r#"{"max_words": 3, "case_sensitive": true}"#,
        r#"{"regex": "a", "judge_model": "m"}"#,
        r#"{"contains": "a", "extra": 1}"#,
        r#"{"max_words": -1}"#,
        r#"{"max_words": "3"}"#,
        r#"{"contains": 3}"#,
        r#"{"contains": ""}"#,
        r#"{"json_schema": ""}"#,
        r#"{"judge": "ok?", "judge_model": ""}"#,
        r#"{"judge": "ok?", "max_tokens": 0}"#,
        r#"{}"#,
    ];
    for sample in samples {
        let value: serde_json::Value = serde_json::from_str(sample).unwrap();
        let by_schema = validator.is_valid(&serde_json::json!([value]));
        let by_serde = parse(&format!("[{sample}]")).is_ok();
        assert_eq!(by_schema, by_serde, "{sample}");
    }
}
