//! Judge and summary calls under `config.cache_breakpoints` (issue 24):
//! each carries a breakpoint after the part it shares with other calls of
//! its kind — a judge's rubric up to the answer it judges, a summary's
//! instructions, and under `summary_focus: dependent` the output every
//! dependent's summary quotes — never more than four per request, and
//! none without the setting.

use std::sync::Arc;

use ctx_deps::{Executor, ExecutorOptions, InferenceRequest, MemoryStore, RequestPurpose};
use ctx_model::Plan;
use ctx_model::prompt_cache::{BreakpointModels, MAX_BREAKPOINTS};
use ctx_test_support::recorder::Recorder;

/// Answers a judge with a pass, a summary with its gist, and a task at
/// length.
fn recorder() -> Recorder {
    Recorder::new(|request| match request.purpose {
        RequestPurpose::Judge => r#"{"pass": true, "reason": "fine"}"#.to_string(),
        RequestPurpose::Summary { .. } => "the gist".to_string(),
        RequestPurpose::Task => format!("{} answers at length. ", request.task_id).repeat(20),
    })
}

const RUBRIC: &str = "Does the answer name the region?";

/// `p` feeds `d1` and `d2` under `llm` summaries; every task has the
/// plan-wide judge check; breakpoints after the system message and the
/// shared prefix when `breakpoints`.
fn plan(breakpoints: bool, focus: &str, summary_prompt: Option<&str>) -> Plan {
    let mut config = serde_json::json!({
        "checks": [{"judge": RUBRIC}],
        "dependency": {"max_output_length": 50, "summarize_strategy": "llm", "summary_focus": focus}
    });
    if breakpoints {
        config["cache_breakpoints"] = serde_json::json!({"after": ["system", "shared"]});
    }
    if let Some(t) = summary_prompt {
        config["dependency"]["summary_prompt"] = t.into();
    }
    serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "config": config,
        "sub_tasks": [
            {"id": "p", "description": "Survey the region",
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "Survey it.", "model": "anthropic/claude-sonnet-4-5"}}},
            {"id": "d1", "description": "Risks", "dependencies": ["p"],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "List the risks.", "model": "anthropic/claude-sonnet-4-5"}}},
            {"id": "d2", "description": "Costs", "dependencies": ["p"],
             "tool_or_prompt": {"name": "inference", "params": {"prompt": "List the costs.", "model": "anthropic/claude-sonnet-4-5"}}}
        ]
    }))
    .unwrap()
}

async fn requests(plan: &Plan) -> Vec<InferenceRequest> {
    let engine = Arc::new(recorder());
    let report = Executor::new(
        plan.clone(),
        engine.clone(),
        Arc::new(MemoryStore::new()),
        ExecutorOptions::default(),
    )
    .unwrap()
    .run()
    .await
    .unwrap();
    assert!(report.all_completed());
    engine.requests()
}

fn of(sent: &[InferenceRequest], judge: bool) -> Vec<&InferenceRequest> {
    sent.iter()
        .filter(|r| match r.purpose {
            RequestPurpose::Judge => judge,
            RequestPurpose::Summary { .. } => !judge,
            RequestPurpose::Task => false,
        })
        .collect()
}

/// Never more than four breakpoints in a request, the system message's
/// included, each offset inside the prompt on a character boundary.
fn within_limits(r: &InferenceRequest) {
    let b = r.cache_breakpoints.as_ref().expect("breakpoints");
    assert!(
        b.prompt_offsets.len() + usize::from(b.system) <= MAX_BREAKPOINTS,
        "{b:?}"
    );
    assert!(b.prompt_offsets.windows(2).all(|w| w[0] < w[1]), "{b:?}");
    for &o in &b.prompt_offsets {
        assert!(o > 0 && o <= r.prompt.len() && r.prompt.is_char_boundary(o));
    }
}

#[tokio::test]
async fn a_judge_call_breaks_after_its_rubric() {
    let sent = requests(&plan(true, "dependent", None)).await;
    let judges = of(&sent, true);
    assert_eq!(judges.len(), 3, "one judge call per task");
    let mut shared = Vec::new();
    for r in &judges {
        within_limits(r);
        let b = r.cache_breakpoints.as_ref().unwrap();
        assert!(b.system, "after: [system] marks the system message");
        assert_eq!(b.models, BreakpointModels::Anthropic);
        let [end] = b.prompt_offsets[..] else {
            panic!("{b:?}")
        };
        let prefix = &r.prompt[..end];
        assert!(prefix.contains(RUBRIC), "{prefix}");
        assert!(prefix.ends_with("<untrusted-content>\n"), "{prefix}");
        // What follows is the answer judged, this task's own.
        assert!(r.prompt[end..].starts_with(&format!("{} answers", r.task_id)));
        shared.push(prefix.to_string());
    }
    // The three tasks' judge calls send the same bytes up to the break.
    assert!(shared.iter().all(|s| s == &shared[0]));
}

#[tokio::test]
async fn focused_summaries_break_after_the_instructions_and_the_output() {
    let sent = requests(&plan(true, "dependent", None)).await;
    let summaries = of(&sent, false);
    assert_eq!(summaries.len(), 2, "one summary of p per dependent");
    let mut parts = Vec::new();
    for r in &summaries {
        within_limits(r);
        let b = r.cache_breakpoints.as_ref().unwrap();
        let [instructions, output] = b.prompt_offsets[..] else {
            panic!("{b:?}")
        };
        assert!(
            r.prompt[..instructions].ends_with("## The step\n\n"),
            "{:?}",
            &r.prompt[..instructions]
        );
        // The output and its fence are before the second break, the
        // dependent's own prompt right after it.
        assert!(r.prompt[instructions..output].contains("p answers at length."));
        assert!(r.prompt[instructions..output].contains("</untrusted-content>"));
        let RequestPurpose::Summary {
            dependent: Some(d), ..
        } = &r.purpose
        else {
            panic!("{:?}", r.purpose)
        };
        let focus = if d == "d1" {
            "List the risks."
        } else {
            "List the costs."
        };
        assert!(
            r.prompt[output..].starts_with(focus),
            "{}",
            &r.prompt[output..]
        );
        parts.push(r.prompt[..output].to_string());
    }
    assert_eq!(
        parts[0], parts[1],
        "both calls send the same bytes up to the focus"
    );
}

#[tokio::test]
async fn a_shared_summary_breaks_only_after_its_instructions() {
    let sent = requests(&plan(true, "output", None)).await;
    let summaries = of(&sent, false);
    assert_eq!(summaries.len(), 1);
    within_limits(summaries[0]);
    let b = summaries[0].cache_breakpoints.as_ref().unwrap();
    // Nothing else sends this output: a break after it would only be a
    // cache write.
    let [instructions] = b.prompt_offsets[..] else {
        panic!("{b:?}")
    };
    assert!(summaries[0].prompt[..instructions].ends_with("## The step\n\n"));
}

/// A `summary_prompt` template: the instructions end at its first
/// placeholder, the producer's part at its first `{{FOCUS}}`; a focus
/// first makes the two the same break, sent once.
#[tokio::test]
async fn a_summary_templates_breaks_follow_its_placeholders() {
    let template = "Keep what matters for the next step.\n{{DESCRIPTION}}\n{{OUTPUT}}\nNext: {{FOCUS}}\nBe brief.";
    let sent = requests(&plan(true, "dependent", Some(template))).await;
    for r in of(&sent, false) {
        within_limits(r);
        let b = r.cache_breakpoints.as_ref().unwrap();
        let [instructions, output] = b.prompt_offsets[..] else {
            panic!("{b:?}")
        };
        assert_eq!(
            &r.prompt[..instructions],
            "Keep what matters for the next step.\n"
        );
        assert!(r.prompt[..output].ends_with("</untrusted-content>\n\nNext: "));
    }
    let focus_first = "{{FOCUS}} then {{OUTPUT}}";
    let sent = requests(&plan(true, "dependent", Some(focus_first))).await;
    for r in of(&sent, false) {
        // Nothing precedes the focus: no break at 0, none after it.
        assert_eq!(
            r.cache_breakpoints.as_ref().unwrap().prompt_offsets,
            Vec::<usize>::new()
        );
    }
}

#[tokio::test]
async fn without_the_setting_no_call_carries_breakpoints() {
    let sent = requests(&plan(false, "dependent", None)).await;
    assert_eq!((of(&sent, true).len(), of(&sent, false).len()), (3, 2));
    assert!(sent.iter().all(|r| r.cache_breakpoints.is_none()));
}
