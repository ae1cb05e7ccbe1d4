//! Map over a list (issue 23), end to end with the command engine: items
//! as tasks of their own (`CTX_TASK_ID`, `--out` files, JSON entries), the
//! reduce's one block of items, `allow_failures` and the exit codes, a
//! bad source before the run (exit 2) and when it arrives (exit 1), the
//! `ctx plan check` findings, and a resumed map that re-runs only what
//! changed.

#[path = "support/map_counts.rs"]
mod map_counts;

use ctx_test_support::{Dir, counts, task};

/// `src` prints a JSON list (its script below), `scan` maps over it at
/// `/repos`, `report` reduces. `{map}` is the rest of the map block.
fn plan(extra_map: &str) -> String {
    format!(
        r#"schema_version: 1
sub_tasks:
  - id: src
    description: The list
    tool_or_prompt: {{name: inference, params: {{prompt: "List them."}}}}
  - id: scan
    description: One repository
    dependencies: [src]
    map: {{over: src, pointer: /repos, as: REPO, max_items: 3{extra_map}}}
    tool_or_prompt:
      name: inference
      params:
        prompt: "Rate <untrusted-content>{{{{REPO}}}}</untrusted-content>."
  - id: report
    description: The report
    dependencies: [scan]
    tool_or_prompt: {{name: inference, params: {{prompt: "Sum up."}}}}
"#
    )
}

/// The engine: counts each call, answers `src` with `list`, fails the item
/// `fail` (if any), and echoes each item's prompt; the report's prompt is
/// written to `report.prompt`.
fn engine(dir: &Dir, list: &str, fail: &str) -> String {
    let d = dir.path().display();
    format!(
        r#"echo "$CTX_TASK_ID" >> '{d}/counts'
case "$CTX_TASK_ID" in
  src) printf '%s' '{list}' ;;
  '{fail}') echo broke >&2; exit 3 ;;
  report) cat > '{d}/report.prompt'; echo done ;;
  *) echo "seen $(cat)" ;;
esac"#
    )
}

fn run(dir: &Dir, extra_map: &str, list: &str, fail: &str, more: &[&str]) -> ctx_test_support::Out {
    dir.write("plan.yaml", &plan(extra_map));
    let mut args = vec!["--format", "json"];
    args.extend_from_slice(more);
    dir.run_command(&engine(dir, list, fail), &args)
}

#[test]
fn items_are_tasks_of_their_own_and_the_reduce_gets_them_in_order() {
    let dir = Dir::new();
    let out = run(
        &dir,
        "",
        r#"{"repos": ["a/b", {"name": "c"}, 7]}"#,
        "-",
        &["--no-store", "--out", "out"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    let ids: Vec<&str> = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["src", "scan", "scan[0]", "scan[1]", "scan[2]", "report"]
    );
    assert_eq!(
        task(&json, "scan")["output"],
        "3 items: 3 completed, 0 failed"
    );
    // The command engine saw each item's id; the map task called nothing.
    assert_eq!(
        dir.counts(),
        counts(&[
            ("src", 1),
            ("scan[0]", 1),
            ("scan[1]", 1),
            ("scan[2]", 1),
            ("report", 1)
        ])
    );
    // A JSON item is compact JSON, fenced where the author wrote the fence.
    assert_eq!(
        task(&json, "scan[1]")["output"],
        "seen Rate <untrusted-content>{\"name\":\"c\"}</untrusted-content>.\n"
    );
    let reduce = std::fs::read_to_string(dir.path().join("report.prompt")).unwrap();
    let at = |s: &str| reduce.find(s).unwrap_or_else(|| panic!("{s} in {reduce}"));
    assert!(at("### Task scan[0]") < at("### Task scan[1]"));
    assert!(at("### Task scan[1]") < at("### Task scan[2]"));
    // Each item has its own --out files.
    for id in ["scan%5B0%5D", "scan%5B2%5D"] {
        assert!(
            dir.path().join(format!("out/prompts/{id}.md")).is_file(),
            "{id}"
        );
    }
}

#[test]
fn under_max_cost_each_item_reserves_one_items_bound_and_the_map_runs() {
    // Every task on model `m`: at most 50 tokens out at $2/M and a prompt
    // of a few hundred tokens in at $1/M make one call's high end well
    // under $0.001, so $0.01 admits every call of the run. Before items
    // had a bound of their own, every item was skipped as over budget.
    let dir = Dir::new();
    dir.write(
        "plan.yaml",
        &plan("")
            .replace(
                "{prompt: \"List them.\"}",
                "{prompt: \"List them.\", model: m}",
            )
            .replace("{prompt: \"Sum up.\"}", "{prompt: \"Sum up.\", model: m}")
            .replace(
                "      params:\n        prompt:",
                "      params:\n        model: m\n        prompt:",
            ),
    );
    let command = engine(&dir, r#"{"repos": ["a", "b", "c"]}"#, "-");
    let run = |budget: &str| {
        dir.run_command(
            &command,
            &[
                "--format",
                "json",
                "--no-store",
                "--price",
                "m=1,2",
                "--max-tokens",
                "50",
                "--concurrency",
                "1",
                "--max-cost",
                budget,
            ],
        )
    };
    let out = run("0.01");
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    for id in ["scan[0]", "scan[1]", "scan[2]", "report"] {
        assert_eq!(task(&json, id)["status"], "completed", "{id}: {json}");
    }
    let spent = json["spent_usd"].as_f64().unwrap();
    assert!(spent > 0.0 && spent <= 0.01, "{spent}");
    // A budget that admits `src` and not all of the items: the rest are
    // skipped as over budget, each naming a bound of one call, and the
    // run never spends more than the budget.
    let one_item = json["tasks"][2]["cost_usd"].as_f64().unwrap();
    let tight = format!("{:.6}", spent - 2.0 * one_item);
    let out = run(&tight);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    let spent = json["spent_usd"].as_f64().unwrap();
    assert!(spent <= tight.parse::<f64>().unwrap(), "{spent} > {tight}");
    let skipped: Vec<&str> = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "skipped")
        .filter_map(|t| t["error"].as_str())
        .collect();
    assert!(!skipped.is_empty(), "{json}");
    assert!(
        skipped
            .iter()
            .all(|e| e.starts_with("budget") || e.contains("scan")),
        "{skipped:?}"
    );
    assert!(skipped.iter().all(|e| !e.contains("e20")), "{skipped:?}");
}

#[test]
fn a_failed_item_fails_the_map_unless_allow_failures_admits_it() {
    let dir = Dir::new();
    let list = r#"{"repos": ["a", "b", "c"]}"#;
    let out = run(&dir, "", list, "scan[1]", &["--no-store"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let json = out.json();
    assert_eq!(task(&json, "scan")["status"], "failed");
    assert_eq!(
        task(&json, "scan")["error"],
        "1 of 3 items failed (map.allow_failures: 0)"
    );
    assert_eq!(task(&json, "report")["status"], "skipped");

    let out = run(
        &dir,
        ", allow_failures: 1",
        list,
        "scan[1]",
        &["--no-store"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    assert_eq!(task(&json, "scan[1]")["status"], "failed");
    assert_eq!(task(&json, "report")["status"], "completed");
    let reduce = std::fs::read_to_string(dir.path().join("report.prompt")).unwrap();
    assert!(reduce.contains("### Task scan[1]"), "{reduce}");
    assert!(reduce.contains("(this item failed: "), "{reduce}");
}

#[test]
fn a_source_without_a_list_fails_the_map_and_skips_its_dependents() {
    for (list, found) in [
        (r#"{"repos": {"a": 1}}"#, "reaches an object, not an array"),
        ("plain words", "is not JSON"),
        (
            r#"{"repos": [1, 2, 3, 4]}"#,
            "the list has 4 items, more than max_items (3)",
        ),
        (r#"{"repos": [[1]]}"#, "item 0 is an array"),
    ] {
        let dir = Dir::new();
        let out = run(&dir, "", list, "-", &["--no-store"]);
        assert_eq!(out.code, 1, "{list}: {}", out.stderr);
        let json = out.json();
        let error = task(&json, "scan")["error"].as_str().unwrap().to_string();
        assert!(
            error.starts_with(r#"map task `scan`: map over `src` at pointer "/repos": "#)
                && error.contains(found),
            "{error}"
        );
        assert_eq!(task(&json, "report")["status"], "skipped");
    }
}

#[test]
fn an_empty_list_completes_and_the_reduce_runs_with_no_items() {
    let dir = Dir::new();
    let out = run(&dir, "", r#"{"repos": []}"#, "-", &["--no-store"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        task(&out.json(), "scan")["output"],
        "0 items: 0 completed, 0 failed"
    );
    assert_eq!(dir.counts(), counts(&[("src", 1), ("report", 1)]));
}

const OVER_VARIABLE: &str = r#"schema_version: 1
variables:
  - {name: LIST, type: json}
sub_tasks:
  - id: scan
    description: One item
    map: {over: LIST, pointer: /items, as: ITEM, max_items: 2}
    tool_or_prompt:
      name: inference
      params: {prompt: "Rate <untrusted-content>{{ITEM}}</untrusted-content>."}
"#;

#[test]
fn a_map_over_a_variable_is_checked_before_anything_runs() {
    let dir = Dir::new();
    dir.write("plan.yaml", OVER_VARIABLE);
    let command = format!("echo \"$CTX_TASK_ID\" >> '{}/counts'", dir.path().display());
    for (value, found) in [
        (
            r#"{"items": "x"}"#,
            r#"pointer "/items" reaches a string, not an array"#,
        ),
        (
            r#"{"items": [1, 2, 3]}"#,
            "the list has 3 items, more than max_items (2)",
        ),
    ] {
        let var = format!("LIST={value}");
        let out = dir.run_command(&command, &["--no-store", "--var", &var]);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(
            out.stderr.contains(r#"task "scan": map over LIST: "#) && out.stderr.contains(found),
            "{}",
            out.stderr
        );
        assert_eq!(dir.counts(), counts(&[]));
    }
    let out = dir.run_command(
        &command,
        &["--no-store", "--var", r#"LIST={"items": ["x", "y"]}"#],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(dir.counts(), counts(&[("scan[0]", 1), ("scan[1]", 1)]));
}

#[test]
fn numbers_and_objects_fill_an_items_prompt_as_written() {
    // A dry run over numbers an `f64` would change (`1.50` → `1.5`,
    // `1e3` → `1000.0`, an id of 24 digits → `1.0000000000000001e+23`)
    // and an object holding them: each prompt holds the source's text.
    let dir = Dir::new();
    dir.write(
        "plan.yaml",
        &OVER_VARIABLE.replace("max_items: 2", "max_items: 4"),
    );
    let list = r#"LIST={"items": [1.50, 1e3, 100000000000000000000001,
        {"id": 100000000000000000000001, "x": 1.50}]}"#;
    let out = dir.run(&[
        "run",
        "plan.yaml",
        "--no-store",
        "--format",
        "json",
        "--var",
        list,
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    for (i, item) in [
        "1.50",
        "1e3",
        "100000000000000000000001",
        r#"{"id":100000000000000000000001,"x":1.50}"#,
    ]
    .iter()
    .enumerate()
    {
        let prompt = task(&json, &format!("scan[{i}]"))["prompt"]
            .as_str()
            .unwrap();
        let fenced = format!("<untrusted-content>{item}</untrusted-content>");
        assert!(prompt.contains(&fenced), "{item} in {prompt}");
    }
}

#[test]
fn plan_check_locates_every_map_finding() {
    let dir = Dir::new();
    dir.write(
        "plan.yaml",
        r#"schema_version: 1
variables:
  - {name: TEXT}
  - {name: ITEM, type: json}
sub_tasks:
  - id: src
    description: Source
    tool_or_prompt: {name: inference, params: {prompt: "go"}}
  - id: a
    description: Unknown source
    map: {over: nope, as: X, max_items: 2}
    tool_or_prompt: {name: inference, params: {prompt: "<untrusted-content>{{X}}</untrusted-content>"}}
  - id: b
    description: Text variable, no max_items
    map: {over: TEXT, as: Y}
    tool_or_prompt: {name: inference, params: {prompt: "<untrusted-content>{{Y}}</untrusted-content>"}}
  - id: c
    description: The item clashes, and is bare
    dependencies: [src]
    map: {over: src, as: ITEM, max_items: 2}
    tool_or_prompt: {name: inference, params: {prompt: "go {{ITEM}}"}}
  - id: d
    description: Bare item
    dependencies: [src]
    map: {over: src, as: Z, max_items: 2}
    tool_or_prompt: {name: inference, params: {prompt: "go {{Z}}"}}
  - id: e
    description: A map over a map
    dependencies: [d]
    map: {over: d, as: W, max_items: 2}
    tool_or_prompt: {name: inference, params: {prompt: "<untrusted-content>{{W}}</untrusted-content>"}}
  - id: "d[0]"
    description: Named like an item
    tool_or_prompt: {name: inference, params: {prompt: "go"}}
"#,
    );
    let out = dir.run(&["plan", "check", "plan.yaml", "--format", "json"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    let found: Vec<(String, String)> = json["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["code"].as_str().unwrap().to_string(),
                p["field"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (code, field) in [
        ("unknown_map_source", "sub_tasks[1].map.over"),
        ("map_source_not_json", "sub_tasks[2].map.over"),
        ("missing_max_items", "sub_tasks[2].map.max_items"),
        ("map_item_clash", "sub_tasks[3].map.as"),
        (
            "bare_item_placeholder",
            "sub_tasks[4].tool_or_prompt.params.prompt",
        ),
        ("map_over_map", "sub_tasks[5].map.over"),
        ("item_id_clash", "sub_tasks[6].id"),
    ] {
        assert!(
            found.contains(&(code.to_string(), field.to_string())),
            "{code} at {field} in {found:#?}"
        );
    }
}

/// The map over `LIST` and a reduce `report` after it, written in `dir`.
fn write_reduce_plan(dir: &Dir) {
    dir.write(
        "plan.yaml",
        &format!(
            "{OVER_VARIABLE}  - id: report\n    description: The report\n    dependencies: [scan]\n    tool_or_prompt: {{name: inference, params: {{prompt: \"Sum up.\"}}}}\n"
        ),
    );
}

/// Runs the plan of [`write_reduce_plan`] under `runs` with `LIST` set to
/// `value`, counting calls, in JSON; `more` adds flags (`--resume RUN`).
fn run_over(dir: &Dir, value: &str, more: &[&str]) -> ctx_test_support::Out {
    let var = format!("LIST={value}");
    let mut args = vec!["--root", "runs", "--format", "json", "--var", &var];
    args.extend_from_slice(more);
    let out = dir.run_command(&engine(dir, "-", "-"), &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out
}

/// The calls counted since the last time this was asked.
fn calls_since(dir: &Dir) -> std::collections::BTreeMap<String, usize> {
    let calls = dir.counts();
    let _ = std::fs::remove_file(dir.path().join("counts"));
    calls
}

#[test]
fn a_resumed_map_reruns_only_the_items_whose_value_changed() {
    let dir = Dir::new();
    write_reduce_plan(&dir);
    let id = run_over(&dir, r#"{"items": ["a", "b"]}"#, &[]).run_id();
    calls_since(&dir);
    // `b` moved to the front, `a` is gone, `x` is new: only `x` runs, and
    // the reduce after it.
    let second = run_over(&dir, r#"{"items": ["b", "x"]}"#, &["--resume", &id]);
    assert_eq!(calls_since(&dir), counts(&[("scan[1]", 1), ("report", 1)]));
    // The moved item keeps its result under its new id.
    assert_eq!(
        task(&second.json(), "scan[0]")["output"],
        "seen Rate <untrusted-content>b</untrusted-content>.\n"
    );
    // Nothing changed: nothing runs again, the reduce included.
    let third = run_over(&dir, r#"{"items": ["b", "x"]}"#, &["--resume", &id]);
    assert_eq!(calls_since(&dir), counts(&[]));
    assert_eq!(task(&third.json(), "report")["output"], "done\n");
}

#[test]
fn items_a_longer_list_left_are_kept_but_not_the_runs() {
    let dir = Dir::new();
    write_reduce_plan(&dir);
    let id = run_over(&dir, r#"{"items": ["a", "b"]}"#, &[]).run_id();
    run_over(&dir, r#"{"items": ["a"]}"#, &["--resume", &id]);
    calls_since(&dir);
    // The same shorter list again: `scan[1]`, stored by the longer list,
    // neither counts as a changed item nor makes the reduce run again.
    let again = run_over(&dir, r#"{"items": ["a"]}"#, &["--resume", &id]);
    assert_eq!(calls_since(&dir), counts(&[]));
    let listed = |json: &serde_json::Value| -> Vec<String> {
        json["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed(&again.json()), ["scan", "scan[0]", "report"]);
    // Nor is it listed as the run's by `ctx runs export` or `runs show`.
    let export = dir.run(&["runs", "export", &id, "--root", "runs", "--format", "json"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert_eq!(listed(&export.json()), ["scan", "scan[0]", "report"]);
    let show = dir.run(&[
        "runs", "show", &id, "--root", "runs", "--task", "scan", "--format", "json",
    ]);
    assert_eq!(
        show.json()["items"].as_array().unwrap().len(),
        1,
        "{}",
        show.stdout
    );
    // Counted as every output of the run counts it, by the same rule.
    assert_eq!(
        show.json()["map"],
        serde_json::json!({"items": 1, "completed": 1, "failed": 0}),
        "{}",
        show.stdout
    );
    let text = dir.run(&["runs", "show", &id, "--root", "runs", "--task", "scan"]);
    assert!(
        text.stdout
            .contains("## Items\n\n1 item: 1 completed, 0 failed\n\nTASK"),
        "{}",
        text.stdout
    );
    // The resume listing counts `scan[0]` as the run's and names
    // `scan[1]` as stored, kept and ignored.
    let command = engine(&dir, "-", "-");
    let listing = dir.run_command(
        &command,
        &[
            "--root",
            "runs",
            "--var",
            r#"LIST={"items": ["a"]}"#,
            "--resume",
            &id,
            "--dry-run",
        ],
    );
    assert_eq!(listing.code, 0, "{}", listing.stderr);
    assert!(
        listing
            .stdout
            .contains("stored but no longer in the plan (kept, ignored): scan[1]\n"),
        "{}",
        listing.stdout
    );
    // Kept: the longer list back reuses `b` where it was stored.
    run_over(&dir, r#"{"items": ["a", "b"]}"#, &["--resume", &id]);
    assert_eq!(calls_since(&dir), counts(&[("report", 1)]));
}

#[test]
fn a_changed_map_prompt_reruns_every_item_and_the_reduce() {
    // ctx has no `--rerun TASK`: a task runs again on resume when its
    // prompt, model or params changed. For a map task that means every
    // item (each item's content hash covers its filled task), none taken
    // as stored under a hash of the old prompt.
    let dir = Dir::new();
    write_reduce_plan(&dir);
    let id = run_over(&dir, r#"{"items": ["a", "b"]}"#, &[]).run_id();
    calls_since(&dir);
    let plan = std::fs::read_to_string(dir.path().join("plan.yaml")).unwrap();
    dir.write(
        "plan.yaml",
        &plan.replace("Rate <untrusted", "Grade <untrusted"),
    );
    let again = run_over(&dir, r#"{"items": ["a", "b"]}"#, &["--resume", &id]);
    assert_eq!(
        calls_since(&dir),
        counts(&[("scan[0]", 1), ("scan[1]", 1), ("report", 1)])
    );
    assert_eq!(
        task(&again.json(), "scan[1]")["output"],
        "seen Grade <untrusted-content>b</untrusted-content>.\n"
    );
}

#[test]
fn eval_counts_the_checks_of_every_item() {
    let dir = Dir::new();
    dir.write(
        "plan.yaml",
        r#"schema_version: 1
variables:
  - {name: LIST, type: json, default: '["a", "b", "c"]'}
sub_tasks:
  - id: scan
    description: One item
    map: {over: LIST, as: ITEM, max_items: 5}
    checks: [{regex: "^ok"}]
    tool_or_prompt:
      name: inference
      params: {prompt: "Item <untrusted-content>{{ITEM}}</untrusted-content>"}
"#,
    );
    let out = dir.run(&[
        "eval",
        "plan.yaml",
        "--engine",
        "command",
        "--command",
        r#"case "$CTX_TASK_ID" in "scan[1]") echo no;; *) echo ok;; esac"#,
        "--no-store",
        "--ablate",
        "full",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let full = &out.json()["variants"][0];
    assert_eq!(full["checks_total"], 3, "{full}");
    assert_eq!(full["checks_passed"], 2, "{full}");
    assert_eq!(full["tasks_checked"], 1, "{full}");
    assert_eq!(full["tasks_passing"], 0, "{full}");
}

/// A map task's items counted, as structured fields (`map: {items,
/// completed, failed}`) wherever the run is shown: `ctx run --format
/// json`, `--out`'s results.json, `ctx runs show` (its ITEMS column and
/// its JSON) and `ctx runs export` (JSON and CSV). The map task's row had
/// no item count; the counts were only inside its output text.
#[test]
fn a_map_s_item_counts_are_fields_in_every_output() {
    let dir = Dir::new();
    let list = r#"{"repos": ["a", "b", "c"]}"#;
    let out = run(
        &dir,
        ", allow_failures: 1",
        list,
        "scan[1]",
        &["--root", "runs", "--out", "out"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let counts = serde_json::json!({"items": 3, "completed": 2, "failed": 1});
    assert_eq!(task(&out.json(), "scan")["map"], counts);
    let results = std::fs::read_to_string(dir.path().join("out/results.json")).unwrap();
    let results: serde_json::Value = serde_json::from_str(&results).unwrap();
    assert_eq!(task(&results, "scan")["map"], counts);
    map_counts::assert_shown(&dir, &out.run_id(), &["--root", "runs"], (3, 2, 1));
}
