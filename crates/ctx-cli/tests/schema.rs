//! `ctx schema`: the plan's JSON Schema is deterministic, matches the
//! checked-in copy, and accepts the real fixtures while rejecting what the
//! parser rejects.
//!
//! The check below is a small JSON Schema evaluator covering exactly the
//! keywords schemars emits for our types (`type`, `properties`,
//! `required`, `additionalProperties`, `items`, `$ref`, `enum`, `const`,
//! `oneOf`/`anyOf`, `minimum`/`maximum`, `minLength`/`maxLength`); it
//! fails on any keyword it does not know, so a schema change that needs
//! more cannot pass silently.

use ctx_test_support::{ctx, repo_root as repo};
use serde_json::{Value, json};

fn schema_text() -> String {
    let out = ctx()
        .arg("schema")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

fn schema() -> Value {
    serde_json::from_str(&schema_text()).unwrap()
}

#[test]
fn schema_is_draft_2020_12_and_deterministic() {
    let a = schema_text();
    assert_eq!(a, schema_text());
    assert!(a.ends_with("}\n"));
    let v: Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(v["type"], "object");
    assert_eq!(v["additionalProperties"], false);
    assert_eq!(v["required"], json!(["schema_version", "sub_tasks"]));
    let props: Vec<&str> = v["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        props,
        [
            "config",
            "entities",
            "goal",
            "history",
            "schema_version",
            "sub_tasks",
            "variables"
        ]
    );
    assert_eq!(v["properties"]["schema_version"]["const"], 1);
}

/// `fixtures/plans/plan.schema.json` is what editors point at; it must be
/// exactly `ctx schema`'s output. Regenerate it with
/// `cargo run -p ctx-cli -- schema --out fixtures/plans/plan.schema.json`.
#[test]
fn checked_in_schema_matches() {
    let file = std::fs::read_to_string(repo().join("fixtures/plans/plan.schema.json"))
        .expect("fixtures/plans/plan.schema.json");
    assert!(
        file == schema_text(),
        "fixtures/plans/plan.schema.json is stale: run `cargo run -p ctx-cli -- schema --out fixtures/plans/plan.schema.json`"
    );
}

#[test]
fn out_writes_the_same_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/plan.schema.json");
    ctx()
        .args(["schema", "--out"])
        .arg(&path)
        .assert()
        .code(0)
        .stdout("");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), schema_text());
}

/// `--out` onto a FIFO writes into it (its reader gets the schema) and
/// leaves it a FIFO; `--out /dev/null` leaves the device a device.
#[cfg(unix)]
#[test]
fn out_onto_a_fifo_or_device_writes_into_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("schema.pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    ctx().args(["schema", "--out"]).arg(&fifo).assert().code(0);
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "{kind:?}");
    assert_eq!(reader.join().unwrap(), schema_text());
    ctx()
        .args(["schema", "--out", "/dev/null"])
        .assert()
        .code(0);
    let kind = std::fs::symlink_metadata("/dev/null").unwrap().file_type();
    assert!(kind.is_char_device(), "{kind:?}");
}

#[test]
fn fixtures_validate_against_the_schema() {
    let schema = schema();
    for path in ["fixtures/tetris/plan.yaml", "fixtures/plans/diamond.json"] {
        let plan = ctx_model::load_plan(&repo().join(path)).unwrap();
        // As written (JSON) and as the parser sees it (YAML through serde).
        let value = if path.ends_with(".json") {
            serde_json::from_str(&std::fs::read_to_string(repo().join(path)).unwrap()).unwrap()
        } else {
            serde_json::to_value(&plan).unwrap()
        };
        let errors = check(&schema, &schema, &value, "");
        assert!(errors.is_empty(), "{path}: {errors:#?}");
    }
}

#[test]
fn the_schema_rejects_what_the_parser_rejects() {
    let schema = schema();
    let base = json!({
        "schema_version": 1,
        "sub_tasks": [{"id": "a", "description": "A",
                       "tool_or_prompt": {"name": "inference", "params": {"prompt": "go"}}}]
    });
    assert_eq!(check(&schema, &schema, &base, ""), Vec::<String>::new());

    let mutate = |f: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        f(&mut v);
        v
    };
    let bad = [
        (
            "typo",
            mutate(&|v| v["sub_tasks"][0]["dependancies"] = json!(["b"])),
        ),
        ("version", mutate(&|v| v["schema_version"] = json!(2))),
        (
            "missing",
            mutate(&|v| {
                v.as_object_mut().unwrap().remove("sub_tasks");
            }),
        ),
        (
            "strategy",
            mutate(&|v| v["config"] = json!({"dependency": {"summarize_strategy": "trunc"}})),
        ),
        (
            "filter",
            mutate(&|v| v["config"] = json!({"entities": {"filter_by_relevance": "none"}})),
        ),
        ("id type", mutate(&|v| v["sub_tasks"][0]["id"] = json!(1))),
        (
            "temperature",
            mutate(&|v| v["sub_tasks"][0]["tool_or_prompt"]["params"]["temperature"] = json!(5)),
        ),
        (
            "entity",
            mutate(&|v| v["entities"] = json!([{"name": "E", "value": "x"}])),
        ),
    ];
    for (what, value) in bad {
        assert!(
            !check(&schema, &schema, &value, "").is_empty(),
            "{what} should fail"
        );
        // The parser agrees, or (temperature) validation does.
        let text = value.to_string();
        let parsed = ctx_model::parse_plan(&text, "t.json", ctx_model::PlanFormat::Json);
        match parsed {
            Err(_) => {}
            Ok(plan) => assert!(!ctx_model::validate(&plan).is_empty(), "{what}"),
        }
    }
    // Extra keys in params pass, as in the parser.
    let ok = mutate(&|v| {
        v["sub_tasks"][0]["tool_or_prompt"]["params"]["frequency_penalty"] = json!(0.1)
    });
    assert_eq!(check(&schema, &schema, &ok, ""), Vec::<String>::new());
}

/// Evaluates `value` against `node`; returns every failure as
/// `path: reason`.
fn check(root: &Value, node: &Value, value: &Value, at: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(obj) = node.as_object() else {
        if node == &Value::Bool(false) {
            errors.push(format!("{at}: not allowed"));
        }
        return errors;
    };
    for (key, want) in obj {
        match key.as_str() {
            "$schema" | "$defs" | "title" | "description" | "default" | "format" | "examples" => {}
            "$ref" => {
                let name = want
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .unwrap_or_else(|| panic!("unsupported $ref {want}"));
                errors.extend(check(root, &root["$defs"][name], value, at));
            }
            "type" => {
                let types: Vec<&str> = match want {
                    Value::String(s) => vec![s.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type {want}"),
                };
                if !types.iter().any(|t| has_type(value, t)) {
                    errors.push(format!("{at}: expected {types:?}, got {value}"));
                }
            }
            "const" => {
                if value != want {
                    errors.push(format!("{at}: expected {want}"));
                }
            }
            "enum" => {
                if !want.as_array().unwrap().contains(value) {
                    errors.push(format!("{at}: {value} not in {want}"));
                }
            }
            "minimum" => {
                if value.as_f64().is_some_and(|x| x < want.as_f64().unwrap()) {
                    errors.push(format!("{at}: below {want}"));
                }
            }
            "maximum" => {
                if value.as_f64().is_some_and(|x| x > want.as_f64().unwrap()) {
                    errors.push(format!("{at}: above {want}"));
                }
            }
            "minLength" => {
                if value
                    .as_str()
                    .is_some_and(|s| (s.chars().count() as u64) < want.as_u64().unwrap())
                {
                    errors.push(format!("{at}: shorter than {want}"));
                }
            }
            "maxLength" => {
                if value
                    .as_str()
                    .is_some_and(|s| (s.chars().count() as u64) > want.as_u64().unwrap())
                {
                    errors.push(format!("{at}: longer than {want}"));
                }
            }
            "required" => {
                if let Some(o) = value.as_object() {
                    for r in want.as_array().unwrap() {
                        if !o.contains_key(r.as_str().unwrap()) {
                            errors.push(format!("{at}: missing {r}"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(o) = value.as_object() {
                    for (k, v) in o {
                        if let Some(sub) = want.get(k) {
                            errors.extend(check(root, sub, v, &format!("{at}.{k}")));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(o) = value.as_object() {
                    let props = obj.get("properties").and_then(Value::as_object);
                    for (k, v) in o {
                        if props.is_some_and(|p| p.contains_key(k)) {
                            continue;
                        }
                        errors.extend(check(root, want, v, &format!("{at}.{k}")));
                    }
                }
            }
            "items" => {
                if let Some(a) = value.as_array() {
                    for (i, v) in a.iter().enumerate() {
                        errors.extend(check(root, want, v, &format!("{at}[{i}]")));
                    }
                }
            }
            "oneOf" => {
                let passing = want
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|s| check(root, s, value, at).is_empty())
                    .count();
                if passing != 1 {
                    errors.push(format!("{at}: {passing} oneOf branches match"));
                }
            }
            "anyOf" => {
                if !want
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|s| check(root, s, value, at).is_empty())
                {
                    errors.push(format!("{at}: no anyOf branch matches"));
                }
            }
            other => panic!("the test evaluator does not know the keyword {other:?}"),
        }
    }
    errors
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        other => panic!("unknown type {other}"),
    }
}

/// Every command that writes a file spells it `-o/--out` (issue 26):
/// `ctx schema -o FILE` and `--out FILE` write the same schema, and `ctx
/// runs report` still takes its old `--output` spelling.
#[test]
fn one_output_flag_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["-o", "--out"] {
        let path = dir.path().join(format!("schema{flag}.json"));
        ctx().args(["schema", flag]).arg(&path).assert().code(0);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), schema_text());
    }
    for flag in ["-o", "--out", "--output"] {
        // No such run: the flag itself is accepted (exit 2 names the run,
        // not the flag).
        let out = ctx()
            .args(["runs", "report", "nope", flag, "x.html", "--root"])
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("unexpected argument"), "{flag}: {stderr}");
    }
    let help = ctx().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("-o, --out <DIR>"), "{help}");
}

/// `ctx run --help` groups its options under headings instead of one flat
/// list of forty; the flags `ctx run`, `ctx eval` and `ctx worker` share
/// sit under the same heading in each.
#[test]
fn run_eval_and_worker_group_their_options() {
    let help = |cmd: &str| {
        let out = ctx().args([cmd, "--help"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let run = help("run");
    for heading in [
        "Engine:",
        "Output:",
        "Bounds:",
        "Checks:",
        "Store and resume:",
        "Cache:",
        "Cost:",
        "Shared store:",
        "OpenAI-compatible engine (--engine openai):",
    ] {
        assert!(
            run.contains(&format!("\n{heading}\n")),
            "no {heading}:\n{run}"
        );
    }
    // Under Options only the help and version flags are left.
    let options = run.split("\nOptions:\n").nth(1).unwrap();
    let options = options.split("\nEngine:\n").next().unwrap_or(options);
    assert!(options.contains("--help"), "{options}");
    assert!(!options.contains("--concurrency"), "{options}");
    for cmd in ["eval", "worker"] {
        let text = help(cmd);
        let bounds = text.split("\nBounds:\n").nth(1).unwrap_or_default();
        assert!(bounds.contains("--task-timeout"), "{cmd}:\n{text}");
    }
}
