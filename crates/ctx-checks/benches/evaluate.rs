//! Evaluation throughput per check kind on a 1 MB output, compilation of a
//! typical task's checks, and the feedback section. Run with
//! `cargo bench -p ctx-checks`.

use std::path::Path;

use ctx_checks::{Check, CheckSet, EvalContext, ExpectedEntity, Feedback};
use ctx_tokens::TokenizerExt;
use divan::{Bencher, black_box};

fn main() {
    divan::main();
}

/// About 1 MB of HTML-ish text with the phrases the checks look for near
/// the end, so every search scans nearly all of it.
fn output() -> Vec<u8> {
    let line = "function drawBoard(ctx) { ctx.fillRect(0, 0, 300, 600); } // draws the grid\n";
    let mut out = line.repeat((1 << 20) / line.len()).into_bytes();
    out.extend_from_slice(
        b"<canvas id=\"board\" width=\"300\"></canvas> a 10 X 20 board, scores 40 100 300 1200\n",
    );
    out
}

fn json_output() -> Vec<u8> {
    let items: Vec<serde_json::Value> = (0..20_000)
        .map(|i| serde_json::json!({"score": i, "name": format!("player {i}"), "tags": ["a", "b"]}))
        .collect();
    serde_json::to_vec(&serde_json::json!({"scores": items})).expect("bench JSON")
}

fn set(json: &str) -> CheckSet {
    let checks: Vec<Check> = serde_json::from_str(json).expect("bench checks");
    CheckSet::compile(&checks, Path::new(".")).expect("bench checks compile")
}

const KINDS: [&str; 7] = [
    r#"{"contains": "10 X 20"}"#,
    r#"{"contains": "10 x 20", "case_sensitive": false}"#,
    r#"{"regex": "<canvas[^>]*>"}"#,
    r#"{"max_words": 600}"#,
    r#"{"max_chars": 4000}"#,
    r#"{"entities": true}"#,
    r#"{"judge": "Is the board 10 wide?"}"#,
];

#[divan::bench(args = KINDS)]
fn text_check_1mb(bencher: Bencher<'_, '_>, check: &str) {
    let set = set(&format!("[{check}]"));
    let output = output();
    let entities = [
        ExpectedEntity::new("Board", &["10 x 20".to_string()], None).expect("entity"),
        ExpectedEntity::new(
            "Scoring",
            &["40".into(), "100".into(), "300".into(), "1200".into()],
            None,
        )
        .expect("entity"),
    ];
    let context = EvalContext {
        entities: &entities,
        canary: None,
    };
    bencher
        .counter(divan::counter::BytesCount::new(output.len()))
        .bench_local(|| set.evaluate(black_box(&output), &context).finish());
}

#[divan::bench(args = [r#"{"json": true}"#, r#"{"json_schema": {"type": "object", "required": ["scores"], "properties": {"scores": {"type": "array", "items": {"type": "object", "required": ["score", "name"], "properties": {"score": {"type": "integer"}, "name": {"type": "string"}}}}}}}"#])]
fn json_check_1mb(bencher: Bencher<'_, '_>, check: &str) {
    let set = set(&format!("[{check}]"));
    let output = json_output();
    let context = EvalContext {
        entities: &[],
        canary: None,
    };
    bencher
        .counter(divan::counter::BytesCount::new(output.len()))
        .bench_local(|| set.evaluate(black_box(&output), &context).finish());
}

#[divan::bench]
fn compile_typical_task_checks(bencher: Bencher<'_, '_>) {
    let checks: Vec<Check> = serde_json::from_str(
        r#"[{"contains": "10 x 20"}, {"regex": "<canvas[^>]*>"}, {"max_words": 600},
            {"json_schema": {"type": "object", "required": ["score"], "properties": {"score": {"type": "number"}}}},
            {"entities": true}]"#,
    )
    .expect("bench checks");
    bencher
        .bench_local(|| CheckSet::compile(black_box(&checks), Path::new(".")).expect("compiles"));
}

#[divan::bench]
fn feedback_of_ten_failures(bencher: Bencher<'_, '_>) {
    let results: Vec<ctx_checks::CheckResult> = (0..10)
        .map(|i| ctx_checks::CheckResult {
            kind: ctx_checks::CheckKind::Contains,
            passed: false,
            message: format!("does not contain \"phrase number {i}\""),
            detail: None,
        })
        .collect();
    let counter = ctx_tokens::Tokenizer::Cl100kBase.counter();
    counter.count("warm the tokenizer up");
    bencher.bench_local(|| Feedback::fit(black_box(&results), &*counter, 60));
}
