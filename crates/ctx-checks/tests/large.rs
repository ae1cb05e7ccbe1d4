//! A 100 MB output, invalid UTF-8 in the middle and a deep JSON document:
//! every check answers, none panics or runs out of stack. (How fast is a
//! benchmark's business, not this test's.)

use std::path::Path;

use ctx_checks::{Check, CheckSet, EvalContext, ExpectedEntity};

#[test]
fn a_100_mb_output_is_checked_by_every_kind() {
    let mut output = Vec::with_capacity(100 << 20);
    while output.len() < 100 << 20 {
        output.extend_from_slice(b"the quick brown fox jumps over the lazy dog\n");
    }
    output.extend_from_slice(b"\xff\xfe a 10 X 20 board <canvas id=\"b\">");
    let checks: Vec<Check> = serde_json::from_str(
        r#"[{"contains": "10 X 20"}, {"not_contains": "cat", "case_sensitive": false},
            {"regex": "<canvas[^>]*>"}, {"max_words": 1000}, {"max_chars": 1000},
            {"json": true}, {"json_schema": {"type": "object"}}, {"entities": true},
            {"judge": "Is it a fox?"}]"#,
    )
    .unwrap();
    let set = CheckSet::compile(&checks, Path::new(".")).unwrap();
    let board = ExpectedEntity::new("Board", &["10 x 20".to_string()], None).unwrap();
    let context = EvalContext {
        entities: std::slice::from_ref(&board),
        canary: None,
    };
    let mut evaluation = set.evaluate(&output, &context);
    // Too large to judge (JUDGE_MAX_OUTPUT_BYTES): no judge is asked.
    assert!(evaluation.take_judge_requests().is_empty());
    let results = evaluation.finish();
    let passed: Vec<bool> = results.iter().map(|r| r.passed).collect();
    assert_eq!(
        passed,
        [true, true, true, false, false, false, false, true, false]
    );
    assert!(
        results[3].message.starts_with("has 21"),
        "{}",
        results[3].message
    );
    assert!(
        results[8].message.contains("too large to judge"),
        "{}",
        results[8].message
    );
}

#[test]
fn deeply_nested_json_fails_without_overflowing_the_stack() {
    let checks: Vec<Check> =
        serde_json::from_str(r##"[{"json": true}, {"json_schema": {"items": {"$ref": "#"}}}]"##)
            .unwrap();
    let set = CheckSet::compile(&checks, Path::new(".")).unwrap();
    let context = EvalContext {
        entities: &[],
        canary: None,
    };
    for depth in [1, 127, 128, 10_000, 1_000_000] {
        let doc = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let results = set.evaluate(doc.as_bytes(), &context).finish();
        let parses = depth < 128;
        assert_eq!(
            results[0].passed, parses,
            "depth {depth}: {}",
            results[0].message
        );
        assert_eq!(
            results[1].passed, parses,
            "depth {depth}: {}",
            results[1].message
        );
    }
}

#[test]
fn a_huge_document_with_millions_of_schema_errors_reports_the_first() {
    // 20 MB: ten million wrong items, which collected as errors would take
    // gigabytes.
    let mut doc = String::with_capacity(20 << 20);
    doc.push('[');
    while doc.len() < 20 << 20 {
        doc.push_str("1,");
    }
    doc.push_str("1]");
    let checks: Vec<Check> = serde_json::from_str(
        r#"[{"json_schema": {"type": "array", "items": {"type": "string"}}}]"#,
    )
    .unwrap();
    let set = CheckSet::compile(&checks, Path::new(".")).unwrap();
    let context = EvalContext {
        entities: &[],
        canary: None,
    };
    let results = set.evaluate(doc.as_bytes(), &context).finish();
    assert_eq!(
        results[0].message,
        "does not match the JSON Schema: at \"/0\": the value is not of type \"string\" \
         (the first error; the output is too large to list them all)"
    );
}
