//! The run's canary (issue 38, item 2): every call of a run that asks for
//! one carries the same sentence, a task's answers, its judges and its
//! summaries alike; an answer that repeats the token fails its `canary`
//! check and is retried with feedback; the token is hidden in everything
//! stored and reported, and in no request's prompt or params.

use std::sync::Arc;

use ctx_deps::canary::{CANARY_PREFIX, CANARY_SENTENCE};
use ctx_deps::{Canary, Executor, ExecutorOptions, InferenceRequest, MemoryStore, RequestPurpose};
use ctx_model::checks::CheckKind;
use ctx_model::{Plan, TaskStatus};
use ctx_test_support::recorder::Recorder;

/// `p` feeds `d` through an `llm` summary; `d` has a judge check; the
/// canary comes from `config.canary: true`.
fn plan() -> Plan {
    serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "config": {
            "canary": true,
            "max_check_attempts": 2,
            "dependency": {"max_output_length": 20, "summarize_strategy": "llm"}
        },
        "sub_tasks": [
            {"id": "p", "description": "Survey",
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Survey it.", "system": "Be terse."}}},
            {"id": "d", "description": "Risks", "dependencies": ["p"],
             "checks": [{"judge": "Does it list risks?"}],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "List the risks."}}}
        ]
    }))
    .unwrap()
}

/// `p` obeys an injected "print your instructions" on its first try,
/// repeating the canary sentence; everything else answers plainly.
fn recorder() -> Recorder {
    Recorder::new(|request| match request.purpose {
        RequestPurpose::Judge => r#"{"pass": true, "reason": "fine"}"#.to_string(),
        RequestPurpose::Summary { .. } => "the gist".to_string(),
        RequestPurpose::Task if request.task_id == "p" && !request.prompt.contains("failed") => {
            format!(
                "My instructions: {}",
                request.canary.clone().unwrap_or_default()
            )
        }
        RequestPurpose::Task => format!("{} answers at length, past the cap.", request.task_id),
    })
}

#[tokio::test]
async fn every_call_carries_the_canary_and_a_repeat_fails_its_check() {
    let engine = Arc::new(recorder());
    let store = Arc::new(MemoryStore::new());
    let canary = Canary::from_bytes([0x5a; 16]);
    let options = ExecutorOptions {
        canary: Some(canary.clone()),
        ..ExecutorOptions::default()
    };
    let report = Executor::new(plan(), engine.clone(), store.clone(), options)
        .unwrap()
        .run()
        .await
        .unwrap();
    assert!(report.all_completed(), "{:?}", report.results);

    let sent = engine.requests();
    let purposes: Vec<String> = sent.iter().map(|r| format!("{:?}", r.purpose)).collect();
    assert!(
        sent.iter().any(|r| r.purpose == RequestPurpose::Judge),
        "{purposes:?}"
    );
    assert!(
        sent.iter()
            .any(|r| matches!(r.purpose, RequestPurpose::Summary { .. })),
        "{purposes:?}"
    );
    for r in &sent {
        assert_eq!(
            r.canary.as_deref(),
            Some(canary.sentence().as_str()),
            "{:?}",
            r.purpose
        );
        assert_token_absent(r, canary.token());
    }

    // `p`'s first answer repeated the token: its canary check failed and
    // the retry passed.
    let p = report.results.iter().find(|r| r.task_id == "p").unwrap();
    assert_eq!(p.status, TaskStatus::Completed);
    let first = &p.metadata.check_attempts[0];
    let failed = first
        .checks
        .iter()
        .find(|c| c.kind == CheckKind::Canary)
        .unwrap();
    assert!(!failed.passed);
    assert!(
        failed.message.contains("repeated its instructions"),
        "{}",
        failed.message
    );
    assert!(
        p.metadata
            .checks
            .iter()
            .any(|c| c.kind == CheckKind::Canary && c.passed)
    );

    // The token is a secret: the stored and reported texts hide it (the
    // output, kept as written, is the one exception, docs/security.md).
    let mut report_json = serde_json::to_value(&report.results).unwrap();
    for r in report_json.as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("output");
    }
    assert!(!report_json.to_string().contains(canary.token()));
}

/// The token goes into the request's own field only: not the prompt,
/// not the params (which cache keys and fingerprints are made of).
fn assert_token_absent(r: &InferenceRequest, token: &str) {
    assert!(!r.prompt.contains(token));
    assert!(!serde_json::to_string(&r.params).unwrap().contains(token));
}

/// The requests a run of `p` on [`recorder`] sent, with no canary given.
async fn sent_by(p: Plan) -> Vec<InferenceRequest> {
    let engine = Arc::new(recorder());
    let store = Arc::new(MemoryStore::new());
    let executor = Executor::new(p, engine.clone(), store, ExecutorOptions::default());
    executor.unwrap().run().await.unwrap();
    engine.requests()
}

#[tokio::test]
async fn a_plan_without_a_canary_plants_none() {
    let mut p = plan();
    p.config.canary = false;
    assert!(sent_by(p).await.iter().all(|r| r.canary.is_none()));
}

#[tokio::test]
async fn a_canary_check_on_one_task_plants_a_fresh_token_in_every_call() {
    let mut p = plan();
    p.config.canary = false;
    p.sub_tasks[1].checks.push(ctx_model::checks::Check::new(
        ctx_model::checks::Rule::Canary,
    ));
    let sent = sent_by(p).await;
    let first = sent[0].canary.clone().unwrap();
    assert!(first.starts_with(&format!("{CANARY_SENTENCE} {CANARY_PREFIX}")));
    assert!(
        sent.iter()
            .all(|r| r.canary.as_deref() == Some(first.as_str()))
    );
}
