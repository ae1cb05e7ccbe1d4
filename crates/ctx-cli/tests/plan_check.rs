//! `ctx plan check`: exit codes, messages that name the file, line, task
//! and field, JSON output, and standard input.

use ctx_test_support::{ctx, repo_root as repo, write_path as write};
use predicates::prelude::*;

const TASK: &str =
    "    description: A\n    tool_or_prompt: {name: inference, params: {prompt: go}}\n";

#[test]
fn the_tetris_plan_is_valid() {
    ctx()
        .args(["plan", "check", "fixtures/tetris/plan.yaml"])
        .assert()
        .code(0)
        .stdout("fixtures/tetris/plan.yaml: ok (9 tasks, 9 entities, 16 dependencies)\n")
        .stderr("");
}

#[test]
fn a_json_plan_is_valid_from_a_file_and_from_stdin() {
    ctx()
        .args(["plan", "check", "fixtures/plans/diamond.json"])
        .assert()
        .code(0)
        .stdout("fixtures/plans/diamond.json: ok (4 tasks, 2 entities, 4 dependencies)\n");
    let text = std::fs::read_to_string(repo().join("fixtures/plans/diamond.json")).unwrap();
    ctx()
        .args(["plan", "check", "-"])
        .write_stdin(text)
        .assert()
        .code(0)
        .stdout("<stdin>: ok (4 tasks, 2 entities, 4 dependencies)\n");
}

#[test]
fn every_problem_is_reported_with_file_task_and_field() {
    let out = ctx()
        .args(["plan", "check", "fixtures/plans/invalid.yaml"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    // In line order, as an editor jumps through them (the config's
    // problems last, where the config is written).
    let expected = [
        "fixtures/plans/invalid.yaml:7:11: entities[1].name: duplicate entity name \"Board\" (first at entities[0])",
        "fixtures/plans/invalid.yaml:9:5: entities[2]: entity \"Palette\" has both grounded_value and grounded_values",
        "fixtures/plans/invalid.yaml:21:20: task \"css\": sub_tasks[1].dependencies[0]: unknown task id \"htm\" (did you mean \"html\"?)",
        "fixtures/plans/invalid.yaml:21:25: task \"css\": sub_tasks[1].dependencies[1]: a task cannot depend on itself",
        "fixtures/plans/invalid.yaml:23:22: task \"css\": sub_tasks[1].entity_context[0].entity_name: unknown entity \"Bord\" (did you mean \"Board\"?)",
        "fixtures/plans/invalid.yaml:28:17: task \"css\": sub_tasks[1].tool_or_prompt.params.prompt: prompt is empty",
        "fixtures/plans/invalid.yaml:29:9: task \"html\": sub_tasks[2].id: duplicate task id \"html\" (first at sub_tasks[0])",
        "fixtures/plans/invalid.yaml:32:13: task \"html\": sub_tasks[2].tool_or_prompt.name: unknown tool \"inferance\"",
        "fixtures/plans/invalid.yaml:35:22: task \"html\": sub_tasks[2].tool_or_prompt.params.temperature: temperature 3 is outside 0..=2",
        "fixtures/plans/invalid.yaml:38:19: task \"loop-a\": sub_tasks[3].dependencies: dependency cycle: \"loop-a\" -> \"loop-b\" -> \"loop-a\"",
        "fixtures/plans/invalid.yaml:51:14: config.tokenizer: unknown tokenizer `gpt2`",
        "fixtures/plans/invalid.yaml:52:22: config.max_prompt_tokens: must be at least 1",
        "fixtures/plans/invalid.yaml: invalid: 12 problems (5 tasks, 3 entities, 5 dependencies)",
    ];
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), expected.len(), "{out}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(want),
            "line {line:?} should start with {want:?}"
        );
    }
}

#[test]
fn json_output_lists_problems_with_stable_codes() {
    let out = ctx()
        .args([
            "plan",
            "check",
            "fixtures/plans/invalid.yaml",
            "--format",
            "json",
        ])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["file"], "fixtures/plans/invalid.yaml");
    assert_eq!(v["valid"], false);
    assert_eq!(v["tasks"], 5);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 12);
    // In line order, then column.
    let at: Vec<(u64, u64)> = problems
        .iter()
        .map(|p| (p["line"].as_u64().unwrap(), p["column"].as_u64().unwrap()))
        .collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    assert_eq!(
        problems[2],
        serde_json::json!({
            "code": "unknown_dependency",
            "task_id": "css",
            "field": "sub_tasks[1].dependencies[0]",
            "line": 21,
            "column": 20,
            "message": "unknown task id \"htm\" (did you mean \"html\"?)"
        })
    );
    // Plan-level problems have a null task id, not a missing one.
    assert_eq!(problems[11]["task_id"], serde_json::Value::Null);
    assert_eq!(problems[9]["code"], "cycle");

    let out = ctx()
        .args([
            "plan",
            "check",
            "fixtures/tetris/plan.yaml",
            "--format",
            "json",
        ])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["problems"], serde_json::json!([]));
    assert_eq!(v["dependencies"], 16);
}

#[test]
fn unknown_fields_are_reported_with_every_other_problem() {
    // A typo in a field name, an unknown key in the config and an unknown
    // dependency: all three at once, exit 1, each located (the unknown
    // fields at their keys).
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "typo.yaml",
        &format!(
            "schema_version: 1\nsub_tasks:\n  - id: a\n{TASK}  - id: b\n    dependancies:\n      - a\n{TASK}  - id: c\n    dependencies: [bb]\n{TASK}config:\n  max_prompt_token: 10\n"
        ),
    );
    let shown = plan.display().to_string();
    ctx()
        .args(["plan", "check"])
        .arg(&plan)
        .assert()
        .code(1)
        .stderr("")
        .stdout(format!(
            "{shown}:7:5: task \"b\": sub_tasks[1].dependancies: unknown field \"dependancies\" (did you mean \"dependencies\"?)\n\
             {shown}:12:20: task \"c\": sub_tasks[2].dependencies[0]: unknown task id \"bb\"\n\
             {shown}:16:3: config.max_prompt_token: unknown field \"max_prompt_token\" (did you mean \"max_prompt_tokens\"?)\n\
             {shown}: invalid: 3 problems (3 tasks, 0 entities, 1 dependency)\n"
        ));

    let out = ctx()
        .args(["plan", "check", "--format", "json"])
        .arg(&plan)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["valid"], false);
    let first = &v["problems"][0];
    assert_eq!(first["code"], "unknown_field");
    assert_eq!(first["task_id"], "b");
    assert_eq!(first["field"], "sub_tasks[1].dependancies");
    assert_eq!(
        (first["line"].as_u64(), first["column"].as_u64()),
        (Some(7), Some(5))
    );
    assert_eq!(v["problems"][1]["code"], "unknown_dependency");
    assert_eq!(v["problems"][2]["code"], "unknown_field");

    // Commands that act on a plan refuse it, listing the same problems.
    for args in [
        &["plan", "graph"][..],
        &["run", "--engine", "dry-run", "--no-store"][..],
    ] {
        ctx()
            .args(args)
            .arg(&plan)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "{shown}:7:5: task \"b\": sub_tasks[1].dependancies: unknown field"
            )));
    }
}

#[test]
fn params_stay_free_form() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "params.yaml",
        "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: go, frequency_penalty: 0.5}}\n",
    );
    ctx().args(["plan", "check"]).arg(&plan).assert().code(0);
}

#[test]
fn schema_version_as_text_is_a_located_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "v.yaml",
        "schema_version: \"1\"\nsub_tasks: []\n",
    );
    let shown = plan.display().to_string();
    ctx()
        .args(["plan", "check"])
        .arg(&plan)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::starts_with(format!(
            "error: {shown}:1:1: schema_version: invalid type: string \"1\", expected a version number"
        )));
}

#[test]
fn json_syntax_errors_from_stdin_give_line_and_column() {
    ctx()
        .args(["plan", "check", "-"])
        .write_stdin("{\"schema_version\": 1,\n \"sub_tasks\": [\n  {\"id\": \"a\",, }]}")
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("error: <stdin>:3:"));
    // Standard input is JSON: YAML there is a JSON syntax error.
    ctx()
        .args(["plan", "check", "-"])
        .write_stdin("schema_version: 1\nsub_tasks: []\n")
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with(
            "error: <stdin>:1:1: expected value",
        ));
}

#[test]
fn a_later_schema_version_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "v2.json",
        r#"{"schema_version": 2, "sub_tasks": [], "workflows": {}}"#,
    );
    ctx()
        .args(["plan", "check"])
        .arg(&plan)
        .assert()
        .code(2)
        .stderr(format!(
            "error: {}: schema_version 2 is not supported (this build reads 1)\n",
            plan.display()
        ));
}

#[test]
fn unreadable_and_odd_files_are_usage_errors() {
    ctx()
        .args(["plan", "check", "no/such/plan.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("error: no/such/plan.yaml: "));
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("plan.yaml");
    std::fs::write(&bin, b"schema_version: 1\n\xff\xfe\n").unwrap();
    ctx()
        .args(["plan", "check"])
        .arg(&bin)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not valid UTF-8"));
    // An unknown extension is sniffed: `{` means JSON.
    let txt = write(
        dir.path(),
        "plan.txt",
        r#"{"schema_version": 1, "sub_tasks": [}"#,
    );
    ctx()
        .args(["plan", "check"])
        .arg(&txt)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("plan.txt:1:"));
}

#[test]
fn problems_in_a_json_plan_are_located_too() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "p.json",
        "{\n  \"schema_version\": 1,\n  \"sub_tasks\": [\n    {\"id\": \"a\", \"description\": \"A\",\n     \"dependencies\": [\"ghost\"],\n     \"tool_or_prompt\": {\"name\": \"inference\", \"params\": {\"prompt\": \"go\"}}}\n  ]\n}\n",
    );
    ctx()
        .args(["plan", "check"])
        .arg(&plan)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "{}:5:23: task \"a\": sub_tasks[0].dependencies[0]: unknown task id \"ghost\"\n",
            plan.display()
        )));
}

#[test]
fn usage_errors_exit_2() {
    ctx().args(["plan", "check"]).assert().code(2);
    ctx()
        .args([
            "plan",
            "check",
            "fixtures/tetris/plan.yaml",
            "--format",
            "xml",
        ])
        .assert()
        .code(2);
}

#[test]
fn a_cycle_in_a_yaml_plan_is_a_path() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "cycle.yml",
        &format!(
            "schema_version: 1\nsub_tasks:\n  - id: a\n    dependencies: [c]\n{TASK}  - id: b\n    dependencies: [a]\n{TASK}  - id: c\n    dependencies: [b]\n{TASK}"
        ),
    );
    ctx()
        .args(["plan", "check"])
        .arg(&plan)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "cycle.yml:4:19: task \"a\": sub_tasks[0].dependencies: dependency cycle: \"a\" -> \"c\" -> \"b\" -> \"a\"\n",
        ));
}

/// Under `layout: cache`, a task prompt that puts its own placeholder
/// before the digest other prompts share gets a hint on stderr; the plan
/// is still valid (exit 0). An unknown layout is a located read error.
#[test]
fn the_cache_layout_hints_an_own_placeholder_before_shared_text() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(
        dir.path(),
        "hint.yaml",
        "schema_version: 1\nconfig:\n  layout: cache\nvariables:\n  - name: ITEM\n    class: trusted\nhistory:\n  content_root: .\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: \"Item {{ITEM}}: <untrusted-content>{{HISTORICAL_CONTEXT}}</untrusted-content>\"}}\n  - id: b\n    description: B\n    tool_or_prompt: {name: inference, params: {prompt: \"<untrusted-content>{{HISTORICAL_CONTEXT}}</untrusted-content> Go.\"}}\n",
    );
    ctx()
        .args(["plan", "check"])
        .arg(&plan)
        .assert()
        .code(0)
        .stderr(predicate::str::starts_with(
            "hint: task \"a\": sub_tasks[0].tool_or_prompt.params.prompt: {{ITEM}}, used by this prompt alone, comes before {{HISTORICAL_CONTEXT}}, which 2 calls share",
        ));
    let bad = write(
        dir.path(),
        "bad.yaml",
        &format!("schema_version: 1\nconfig:\n  layout: cached\nsub_tasks:\n  - id: a\n{TASK}"),
    );
    ctx()
        .args(["plan", "check"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "bad.yaml:3:11: config.layout: unknown variant `cached`, expected one of design, cache",
        ));
}

/// A map's prompt is sent once per item, so the hint counts calls, not
/// prompts: the item placeholder before a variable every item shares is
/// hinted, although no other task prompt uses the variable; with the
/// shared text first there is no hint.
#[test]
fn the_cache_layout_hints_a_map_s_item_before_what_its_items_share() {
    let dir = tempfile::tempdir().unwrap();
    let map_plan = |prompt: &str| {
        format!(
            "schema_version: 1\nconfig:\n  layout: cache\nvariables:\n  - {{name: LIST, type: json}}\n  - {{name: BRIEF, class: trusted}}\nsub_tasks:\n  - id: m\n    description: M\n    map: {{over: LIST, as: ITEM, max_items: 50}}\n    tool_or_prompt: {{name: inference, params: {{prompt: \"{prompt}\"}}}}\n"
        )
    };
    let item_first = write(
        dir.path(),
        "item-first.yaml",
        &map_plan("<untrusted-content>{{ITEM}}</untrusted-content> Follow {{BRIEF}}."),
    );
    ctx()
        .args(["plan", "check"])
        .arg(&item_first)
        .assert()
        .code(0)
        .stderr(predicate::str::starts_with(
            "hint: task \"m\": sub_tasks[0].tool_or_prompt.params.prompt: {{ITEM}}, the map's item, different in each call, comes before {{BRIEF}}, which up to 50 calls share",
        ));
    let brief_first = write(
        dir.path(),
        "brief-first.yaml",
        &map_plan("Follow {{BRIEF}}. <untrusted-content>{{ITEM}}</untrusted-content>"),
    );
    ctx()
        .args(["plan", "check"])
        .arg(&brief_first)
        .assert()
        .code(0)
        .stderr(predicate::str::contains("hint:").not());
}

/// `config.cache_key` takes `auto` or `none`; anything else is a located
/// read error (file, line, column, field). `config.cache_breakpoints`
/// asking for more than 4 breakpoints (Anthropic's limit) is a located
/// plan problem.
#[test]
fn cache_key_and_breakpoint_mistakes_are_located() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.yaml",
        &format!(
            "schema_version: 1\nconfig:\n  cache_key: auto\n  cache_breakpoints:\n    after: [system, dependencies, shared, prompt]\nsub_tasks:\n  - id: a\n{TASK}"
        ),
    );
    ctx().args(["plan", "check"]).arg(&good).assert().code(0);
    let bad = write(
        dir.path(),
        "bad.yaml",
        &format!("schema_version: 1\nconfig:\n  cache_key: always\nsub_tasks:\n  - id: a\n{TASK}"),
    );
    ctx()
        .args(["plan", "check"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "bad.yaml:3:14: config.cache_key: unknown variant `always`, expected one of none, auto",
        ));
    let five = write(
        dir.path(),
        "five.yaml",
        &format!(
            "schema_version: 1\nconfig:\n  cache_breakpoints:\n    models: all\n    after: [system, entities, dependencies, shared, prompt]\nsub_tasks:\n  - id: a\n{TASK}"
        ),
    );
    ctx()
        .args(["plan", "check"])
        .arg(&five)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "five.yaml:5:12: config.cache_breakpoints.after: 5 breakpoints asked for; a request holds at most 4 (Anthropic's limit)",
        ));
}

/// `config.cache_warm_up` is a count of at least 2: 1 is a located plan
/// problem (`ctx plan check` exit 1; `ctx run` refuses the plan, exit 2,
/// with the same line), a word a located read error (exit 2); `ctx run
/// --cache-warm-up` below 2 is a usage error naming the flag, and a good
/// value runs.
#[test]
fn cache_warm_up_mistakes_are_located_in_the_plan_and_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let plan = |name: &str, value: &str| {
        write(
            dir.path(),
            name,
            &format!(
                "schema_version: 1\nconfig:\n  cache_warm_up: {value}\nsub_tasks:\n  - id: a\n{TASK}"
            ),
        )
    };
    let good = plan("good.yaml", "4");
    ctx().args(["plan", "check"]).arg(&good).assert().code(0);
    let one = plan("one.yaml", "1");
    let said = "one.yaml:3:18: config.cache_warm_up: 1 calls: must be at least 2 (the call that warms the cache and one that uses it), or left out for no warm-up";
    ctx()
        .args(["plan", "check"])
        .arg(&one)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(said));
    let root = dir.path().join("runs");
    ctx()
        .arg("run")
        .arg(&one)
        .arg("--root")
        .arg(&root)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(said));
    let word = plan("word.yaml", "lots");
    ctx()
        .args(["plan", "check"])
        .arg(&word)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "word.yaml:3:18: config.cache_warm_up: invalid",
        ));
    ctx()
        .arg("run")
        .arg(&good)
        .args(["--cache-warm-up", "1", "--root"])
        .arg(&root)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--cache-warm-up 1: must be at least 2 (the call that warms the cache and one that uses it)",
        ));
    ctx()
        .arg("run")
        .arg(&good)
        .args(["--cache-warm-up", "2", "--root"])
        .arg(&root)
        .assert()
        .code(0);
}
