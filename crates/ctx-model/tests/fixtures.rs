//! The plan fixtures under `fixtures/` parse and validate as intended.

use std::path::PathBuf;

use ctx_model::{PlanFormat, ProblemCode, load_plan, parse_plan, validate};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn tetris_plan_is_valid() {
    let plan = load_plan(&repo().join("fixtures/tetris/plan.yaml")).unwrap();
    let problems = validate(&plan);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(plan.sub_tasks.len(), 9);
    // At least one task with two or more dependencies, and a diamond:
    // 3 -> {4, 5} -> 7.
    assert!(plan.sub_tasks.iter().any(|t| t.dependencies.len() >= 2));
    for (a, b) in [("4", "3"), ("5", "3"), ("7", "4"), ("7", "5")] {
        assert!(
            plan.task(a).unwrap().dependencies.iter().any(|d| d == b),
            "{a} -> {b}"
        );
    }
    // The seed's entities, with the seed's values.
    assert_eq!(
        plan.entity("Game Area Dimensions")
            .unwrap()
            .grounded_value
            .as_deref(),
        Some("10 wide x 20 high")
    );
    assert_eq!(
        plan.entity("Output Format")
            .unwrap()
            .grounded_value
            .as_deref(),
        Some("Single standalone HTML file, vanilla JS/Canvas only")
    );
    assert_eq!(
        plan.entity("Required Features")
            .unwrap()
            .grounded_value
            .as_deref(),
        Some(
            "7 shapes, SRS rotation, wall kicks, hard/soft drop, hold, preview (5-6), \
             Nintendo scoring, level progression, pause, game over, input display"
        )
    );
    // The config block spells out the defaults.
    assert_eq!(plan.config, ctx_model::PlanConfig::default());
}

#[test]
fn tetris_round_trips_through_json_and_yaml() {
    let yaml = load_plan(&repo().join("fixtures/tetris/plan.yaml")).unwrap();
    let json = serde_json::to_string_pretty(&yaml).unwrap();
    assert_eq!(
        parse_plan(&json, "tetris.json", PlanFormat::Json).unwrap(),
        yaml
    );
}

#[test]
fn diamond_json_is_valid() {
    let plan = load_plan(&repo().join("fixtures/plans/diamond.json")).unwrap();
    assert_eq!(validate(&plan), []);
    assert_eq!(
        plan.task("page").unwrap().dependencies,
        ["origin", "examples"]
    );
}

#[test]
fn invalid_fixture_reports_every_problem() {
    let plan = load_plan(&repo().join("fixtures/plans/invalid.yaml")).unwrap();
    let codes: Vec<ProblemCode> = validate(&plan).iter().map(|p| p.code).collect();
    for code in [
        ProblemCode::DuplicateId,
        ProblemCode::UnknownDependency,
        ProblemCode::Cycle,
        ProblemCode::UnknownEntity,
        ProblemCode::EmptyPrompt,
        ProblemCode::UnknownTool,
    ] {
        assert!(codes.contains(&code), "{code} missing from {codes:?}");
    }
}

#[test]
fn json_and_yaml_parse_the_same_small_plan() {
    let y = parse_plan(
        "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n",
        "a.yaml",
        PlanFormat::Yaml,
    )
    .unwrap();
    let j = parse_plan(
        r#"{"schema_version":1,"sub_tasks":[{"id":"a","description":"A","tool_or_prompt":{"name":"inference","params":{"prompt":"go"}}}]}"#,
        "a.json",
        PlanFormat::Json,
    )
    .unwrap();
    assert_eq!(y, j);
}

/// The whole example in docs/plan-format.md parses, validates, and uses
/// every field of the format.
#[test]
fn the_documented_example_is_a_valid_plan() {
    let doc = std::fs::read_to_string(repo().join("docs/plan-format.md")).unwrap();
    let start = doc.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let len = doc[start..].find("```").unwrap();
    let text = &doc[start..start + len];
    let plan = parse_plan(text, "docs/plan-format.md", PlanFormat::Yaml).unwrap();
    assert_eq!(validate(&plan), []);
    assert_eq!(plan.config, ctx_model::PlanConfig::default());
    let json = serde_json::to_value(&plan).unwrap();
    for key in ["goal", "entities", "sub_tasks", "config"] {
        assert!(json.get(key).is_some(), "{key}");
    }
    let e = &json["entities"];
    for key in ["name", "type", "intent", "grounded_value"] {
        assert!(e[0].get(key).is_some(), "entities[0].{key}");
    }
    assert!(e[1].get("grounded_values").is_some());
    let ec = &plan.sub_tasks[0].entity_context[1];
    assert!(ec.usage_note.is_some() && ec.intent_relevance.is_some());
    assert!(plan.sub_tasks[1].entity_context[0].grounded_value.is_some());
    let params: Vec<_> = plan
        .sub_tasks
        .iter()
        .map(|t| &t.tool_or_prompt.params)
        .collect();
    assert!(params.iter().any(|p| p.estimated_ms.is_some()));
    assert!(params.iter().any(|p| p.max_tokens.is_some()));
    assert!(params.iter().any(|p| !p.extra.is_empty()));
}
