//! The plan both `ctx eval` test files score: `board` is checked for the
//! Board entity's value, `script` for "uses" and that value, which it can
//! only know from `board`'s output (tests/eval.rs, tests/eval_baseline.rs).

pub const PLAN: &str = r#"schema_version: 1
entities:
  - name: Board
    grounded_value: 10 x 20
sub_tasks:
  - id: board
    description: Board
    entity_context:
      - {entity_name: Board, intent_relevance: constraint}
    checks:
      - entities: true
    tool_or_prompt: {name: inference, params: {prompt: Describe the board.}}
  - id: script
    description: Script
    dependencies: [board]
    checks:
      - contains: uses
      - contains: "10 x 20"
    tool_or_prompt: {name: inference, params: {prompt: Write the script.}}
config:
  max_check_attempts: 1
"#;
