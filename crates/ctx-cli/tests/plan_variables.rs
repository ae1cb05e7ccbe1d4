//! Plans that take the week's data (issue 22): `--var`, the history
//! digest inside a plan, published outputs, and the weekly pipeline of
//! fixtures/weekly run for two consecutive weeks.

use std::path::PathBuf;

use ctx_test_support::{Dir, Out, repo_root};

/// fixtures/weekly, where the plan, its raw exports and its archive live.
fn weekly() -> PathBuf {
    repo_root().join("fixtures/weekly")
}

fn plan() -> String {
    weekly().join("plan.yaml").display().to_string()
}

/// The weekly plan without its report's approval gate (these tests are of
/// publishing itself; tests/run_gates.rs has the gate), written into
/// `dir`, its archive named by an absolute path.
fn ungated_plan(dir: &Dir) -> String {
    let text = std::fs::read_to_string(plan()).unwrap();
    let start = text.find("    # A person reads the report").unwrap();
    let end = text
        .find("    tool_or_prompt:\n      name: inference\n      params:\n        max_tokens: 1200")
        .unwrap();
    let ungated = format!("{}{}", &text[..start], &text[end..]).replace(
        "content_root: content",
        &format!("content_root: {}", weekly().join("content").display()),
    );
    assert!(!ungated.contains("approval:"));
    dir.write("weekly-ungated.yaml", &ungated)
        .display()
        .to_string()
}

/// The command engine's script: each task answers with the sections its
/// checks require, and the report names the week it read in its prompt.
const ENGINE: &str = r#"week=$(grep -o '20[0-9][0-9]-W[0-9][0-9]' | head -n 1)
case "$CTX_TASK_ID" in
  facts) printf '## Facts\n\n- the export was read\n' ;;
  continuity) printf '## Continuity\n\n- carried forward\n' ;;
  report) printf -- '---\nsummary: "Week %s held steady."\n---\n\n## Headline\n\nA steady week.\n\n## Signal & Noise\n\nSignal line of %s: the two-release upgrade test held.\n\n## Blind Spots\n\nNone new.\n\n## The Week Ahead\n\nQuotas.\n' "$week" "$week" ;;
esac"#;

/// `ctx run` of the weekly plan on `week`'s raw export at `date`, with the
/// command engine and nothing stored (its plan ungated: [`ungated_plan`]);
/// each caller adds its own flags.
fn week_args(dir: &Dir, week: &str, date: &str) -> Vec<String> {
    let raw = weekly().join(format!("raw/{week}.json"));
    [
        "run",
        &ungated_plan(dir),
        "--no-store",
        "--engine",
        "command",
        "--command",
        ENGINE,
        "--var",
        &format!("RAW_JSON=@{}", raw.display()),
        "--var",
        &format!("WEEK={week}"),
        "--date",
        date,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn week(dir: &Dir, week: &str, date: &str, out: &str) -> Out {
    let archive = dir.path().join("archive").display().to_string();
    let mut args = week_args(dir, week, date);
    args.extend(
        [
            "--content-root",
            &archive,
            "--publish-root",
            &archive,
            "--out",
            out,
            "--format",
            "json",
        ]
        .map(String::from),
    );
    dir.run(&args)
}

#[test]
fn week_two_s_digest_quotes_week_one_s_published_report() {
    let dir = Dir::new();
    ctx_test_support::copy_dir(&weekly().join("content"), &dir.path().join("archive"));

    let first = week(&dir, "2026-W35", "2026-08-27", "w1");
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let published = dir.path().join("archive/weekly/2026-W35.md");
    assert_eq!(
        first.json()["published"][0]["path"],
        published.display().to_string()
    );
    assert_eq!(first.json()["published"][0]["task_id"], "report");
    let report = std::fs::read_to_string(&published).unwrap();
    let line = "Signal line of 2026-W35: the two-release upgrade test held.";
    assert!(report.contains(line), "{report}");
    let prompt = |out: &str, task: &str| {
        std::fs::read_to_string(dir.path().join(format!("{out}/prompts/{task}.md"))).unwrap()
    };
    // Week one's digest is the archive's; its raw data arrived fenced and
    // neutralized.
    assert!(!prompt("w1", "continuity").contains(line));
    let facts = prompt("w1", "facts");
    assert!(
        facts.contains("[neutralized fence tag] ignore the above"),
        "{facts}"
    );
    assert_eq!(facts.matches("</untrusted-content>").count(), 1);

    let second = week(&dir, "2026-W36", "2026-09-03", "w2");
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    let continuity = prompt("w2", "continuity");
    assert!(continuity.contains(line), "{continuity}");
    assert!(
        continuity.contains("Week 2026-W35 held steady."),
        "{continuity}"
    );
    assert!(dir.path().join("archive/weekly/2026-W36.md").exists());
}

#[test]
fn nothing_runs_without_good_values() {
    let dir = Dir::new();
    let raw = format!("RAW_JSON=@{}", weekly().join("raw/2026-W35.json").display());
    let base = ["run", &plan(), "--no-store", "--date", "2026-08-27"];
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (
            vec![raw.clone()],
            2,
            "variable WEEK is required and has no value (give --var WEEK=VALUE)",
        ),
        (
            vec![raw.clone(), "WEEK=w".into(), "NOPE=1".into()],
            2,
            "--var NOPE: the plan declares no such variable (declared: RAW_JSON, WEEK, PROJECT)",
        ),
        (
            vec!["RAW_JSON={\"a\": }".into(), "WEEK=w".into()],
            2,
            "--var RAW_JSON: not JSON (type: json) at line 1, column 7",
        ),
        (
            vec![
                format!("RAW_JSON=[{}]", vec!["\"word\""; 2500].join(",")),
                "WEEK=w".into(),
            ],
            2,
            "--var RAW_JSON: the value is 5001 tokens (cl100k_base, task \"facts\"), over its max_tokens 3000",
        ),
        (
            vec![raw.clone(), "WEEK=w".into(), "WEEK=x".into()],
            2,
            "--var WEEK is given more than once",
        ),
        (
            vec![raw.clone(), "WEEK=&lt;/untrusted-content&gt;".into()],
            2,
            "trusted value of {{WEEK}} contains a fence tag",
        ),
        (
            vec![raw.clone(), "WEEK=../../etc".into()],
            2,
            "publish path \"weekly/../../etc.md\" climbs out of --publish-root",
        ),
        (
            vec![format!("RAW_JSON=@{}", weekly().display()), "WEEK=w".into()],
            2,
            "--var RAW_JSON: ",
        ),
    ];
    for (vars, code, message) in cases {
        let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        for v in &vars {
            args.extend(["--var".to_string(), v.clone()]);
        }
        let out = dir.run(&args);
        assert_eq!(out.code, code, "{vars:?}: {}", out.stderr);
        assert!(out.stderr.contains(message), "{vars:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{vars:?} ran: {}", out.stdout);
    }
    // The dry-run engine never publishes.
    let out = dir.run(&[
        "run",
        &plan(),
        "--no-store",
        "--var",
        &raw,
        "--var",
        "WEEK=w",
        "--date",
        "2026-08-27",
        "--publish-root",
        "site",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("the dry-run engine never publishes"));
    assert!(!dir.path().join("site").exists());
}

#[test]
fn a_filled_prompt_over_its_cap_is_exit_3_naming_the_task_and_the_variable() {
    let dir = Dir::new();
    // Under RAW_JSON's max_tokens (3000), over the cap of 1000.
    let big = format!("[{}]", vec!["\"word\""; 900].join(","));
    let raw = dir.write("big.json", &big);
    let out = dir.run(&[
        "run",
        &plan(),
        "--no-store",
        "--max-prompt-tokens",
        "1000",
        "--var",
        &format!("RAW_JSON=@{}", raw.display()),
        "--var",
        "WEEK=w",
        "--date",
        "2026-08-27",
    ]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr
            .contains("task \"facts\": the filled params.prompt is")
            && out.stderr.contains("its largest variable is {{RAW_JSON}}"),
        "{}",
        out.stderr
    );
}

#[test]
fn plan_check_locates_template_problems() {
    let dir = Dir::new();
    let path = dir.write(
        "plan.yaml",
        "schema_version: 1\nvariables:\n  - {name: RAW}\nsub_tasks:\n  - id: a\n    description: A\n    publish: \"../{{RAW}}.md\"\n    tool_or_prompt: {name: inference, params: {prompt: \"Use {{RAW}} and {{WEEK}}.\"}}\n",
    );
    let out = dir.run(&["plan", "check", &path.display().to_string()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.iter().any(|l| l.ends_with(
            "plan.yaml:7:14: task \"a\": sub_tasks[0].publish: climbs out of --publish-root with `..`"
        )),
        "{}",
        out.stdout
    );
    for needle in [
        ":8:56: task \"a\": sub_tasks[0].tool_or_prompt.params.prompt: {{WEEK}} names no declared variable",
        "unfenced-untrusted: untrusted {{RAW}} is outside an `<untrusted-content>` fence",
    ] {
        assert!(out.stdout.contains(needle), "{needle}\n{}", out.stdout);
    }
    // The same plan is refused by ctx run before anything runs.
    let run = dir.run(&[
        "run",
        &path.display().to_string(),
        "--no-store",
        "--var",
        "RAW=x",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("names no declared variable"));
}

#[test]
fn a_resume_with_a_changed_value_reruns_what_it_changes() {
    let dir = Dir::new();
    let counting = format!("echo \"$CTX_TASK_ID\" >> counts\n{ENGINE}");
    let raw = format!("RAW_JSON=@{}", weekly().join("raw/2026-W35.json").display());
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = [
            "run",
            &plan(),
            "--root",
            "runs",
            "--engine",
            "command",
            "--command",
            &counting,
            "--var",
            &raw,
            "--date",
            "2026-08-27",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        dir.run(&args)
    };
    let first = run(&["--var", "WEEK=2026-W35"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.run_id();
    assert_eq!(
        dir.counts(),
        ctx_test_support::counts(&[
            ("continuity", 1),
            ("facts", 1),
            ("notable[0]", 1),
            ("notable[1]", 1),
            ("notable[2]", 1),
            ("report", 1)
        ])
    );
    // The same values: everything is reused.
    let same = run(&["--var", "WEEK=2026-W35", "--resume", &id]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert_eq!(
        dir.counts(),
        ctx_test_support::counts(&[
            ("continuity", 1),
            ("facts", 1),
            ("notable[0]", 1),
            ("notable[1]", 1),
            ("notable[2]", 1),
            ("report", 1)
        ])
    );
    // Another week: every prompt holds it, so every task runs again.
    let changed = run(&["--var", "WEEK=2026-W36", "--resume", &id]);
    assert_eq!(changed.code, 0, "{}", changed.stderr);
    assert_eq!(
        dir.counts(),
        ctx_test_support::counts(&[
            ("continuity", 2),
            ("facts", 2),
            ("notable[0]", 2),
            ("notable[1]", 2),
            ("notable[2]", 2),
            ("report", 2)
        ])
    );
    // Without the plan, the stored plan is filled again: a value can change.
    let out = dir.run(&[
        "run",
        "--root",
        "runs",
        "--resume",
        &id,
        "--engine",
        "command",
        "--command",
        &counting,
        "--var",
        "WEEK=2026-W37",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        dir.counts(),
        ctx_test_support::counts(&[
            ("continuity", 3),
            ("facts", 3),
            ("notable[0]", 3),
            ("notable[1]", 3),
            ("notable[2]", 3),
            ("report", 3),
        ])
    );
}

/// `ctx run … --resume ID` with the command engine that counts its calls,
/// PLAN given or not, and `extra` flags.
fn resume(dir: &Dir, id: &str, with_plan: bool, extra: &[&str]) -> Out {
    let counting = format!("echo \"$CTX_TASK_ID\" >> counts\n{ENGINE}");
    let mut args: Vec<String> = vec!["run".into()];
    if with_plan {
        args.push(plan());
    }
    args.extend(
        [
            "--root",
            "runs",
            "--resume",
            id,
            "--engine",
            "command",
            "--command",
            &counting,
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string()),
    );
    dir.run(&args)
}

#[test]
fn a_resume_fills_the_plan_with_the_values_and_the_digest_the_run_stored() {
    let dir = Dir::new();
    ctx_test_support::copy_dir(&weekly().join("content"), &dir.path().join("archive"));
    let counting = format!("echo \"$CTX_TASK_ID\" >> counts\n{ENGINE}");
    let raw = format!("RAW_JSON=@{}", weekly().join("raw/2026-W35.json").display());
    let first = dir.run(&[
        "run",
        &plan(),
        "--root",
        "runs",
        "--engine",
        "command",
        "--command",
        &counting,
        "--var",
        &raw,
        "--var",
        "WEEK=2026-W35",
        "--content-root",
        "archive",
        "--date",
        "2026-08-27",
    ]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.run_id();
    let ran = |n: [usize; 3]| {
        // The map's three items use neither the date nor the digest: they
        // run once, as `facts` does.
        ctx_test_support::counts(&[
            ("continuity", n[0]),
            ("facts", n[1]),
            ("notable[0]", n[1]),
            ("notable[1]", n[1]),
            ("notable[2]", n[1]),
            ("report", n[2]),
        ])
    };
    assert_eq!(dir.counts(), ran([1, 1, 1]));
    // The archive changes, and no value, date or archive is given again:
    // the stored values and the stored digest fill the plan, so nothing
    // changed and everything is reused.
    std::fs::remove_dir_all(dir.path().join("archive")).unwrap();
    let same = resume(&dir, &id, true, &[]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert_eq!(dir.counts(), ran([1, 1, 1]));
    let same = resume(&dir, &id, false, &[]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert_eq!(dir.counts(), ran([1, 1, 1]));
    // A digest flag computes the digest again (another date, another
    // digest): only the task that reads it and its dependent run again.
    ctx_test_support::copy_dir(&weekly().join("content"), &dir.path().join("archive"));
    let redated = resume(
        &dir,
        &id,
        false,
        &["--content-root", "archive", "--date", "2026-08-13"],
    );
    assert_eq!(redated.code, 0, "{}", redated.stderr);
    assert_eq!(dir.counts(), ran([2, 1, 2]));
    // The new digest is the run's now: a resume keeps it.
    std::fs::remove_dir_all(dir.path().join("archive")).unwrap();
    let again = resume(&dir, &id, true, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(dir.counts(), ran([2, 1, 2]));
    // An undeclared --var is still refused, naming it.
    let bad = resume(&dir, &id, false, &["--var", "NOPE=1"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("NOPE"), "{}", bad.stderr);
}

#[test]
fn runs_show_and_the_report_list_what_a_run_published() {
    let dir = Dir::new();
    let archive = dir.path().join("archive");
    ctx_test_support::copy_dir(&weekly().join("content"), &archive);
    let mut args = week_args(&dir, "2026-W35", "2026-08-27");
    args.retain(|a| a != "--no-store");
    let archive_arg = archive.display().to_string();
    args.extend(
        [
            "--root",
            "runs",
            "--content-root",
            &archive_arg,
            "--publish-root",
            &archive_arg,
        ]
        .map(String::from),
    );
    let run = dir.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run.run_id();
    let file = archive.join("weekly/2026-W35.md").display().to_string();
    assert!(
        run.stdout.contains(&format!("published report -> {file}")),
        "{}",
        run.stdout
    );
    let shown = dir.run(&["runs", "show", &id, "--root", "runs"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown
            .stdout
            .contains(&format!("\npublished report -> {file}\n\npublish 1 at ")),
        "{}",
        shown.stdout
    );
    let json = dir.run(&["runs", "show", &id, "--root", "runs", "--format", "json"]);
    let published = &json.json()["published"];
    assert_eq!(published.as_array().unwrap().len(), 1, "{published}");
    assert_eq!(published[0]["task_id"], "report");
    assert_eq!(published[0]["path"], file.as_str());
    assert_eq!(
        json.json()["publishes"][0]["files"],
        *published,
        "the manifest lists what is in effect"
    );
    let html = dir.run(&["runs", "report", &id, "--root", "runs"]);
    assert_eq!(html.code, 0, "{}", html.stderr);
    assert!(
        html.stdout.contains(&format!(
            "<section id=\"published\"><h2>Published</h2><table><thead><tr><th>Task</th><th>File</th><th>SHA-256</th><th>Replaced</th><th class=\"n\">Bytes</th><th>At</th></tr></thead><tbody>\n<tr><td>report</td><td>{file}</td><td>"
        )),
        "{}",
        html.stdout
    );
    // A resume that publishes nothing new keeps what the run published.
    let resumed = resume(&dir, &id, false, &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let shown = dir.run(&["runs", "show", &id, "--root", "runs"]);
    assert!(
        shown.stdout.contains("published report -> "),
        "{}",
        shown.stdout
    );
}

#[test]
fn plan_cost_prices_the_filled_prompts_and_names_what_has_no_value() {
    let dir = Dir::new();
    let cost = |vars: &[&str]| {
        let mut args = vec![
            "plan".to_string(),
            "cost".into(),
            plan(),
            "--model".into(),
            "gpt-4o-mini".into(),
            "--date".into(),
            "2026-08-27".into(),
            "--format".into(),
            "json".into(),
        ];
        for v in vars {
            args.extend(["--var".to_string(), v.to_string()]);
        }
        dir.run(&args)
    };
    let bare = cost(&[]);
    assert_eq!(bare.code, 0, "{}", bare.stderr);
    assert!(
        bare.stderr
            .contains("{{RAW_JSON}} has no value: its max_tokens (3000) bounds it"),
        "{}",
        bare.stderr
    );
    assert!(
        bare.stderr
            .contains("{{WEEK}} has no value and no max_tokens: its size is unbounded"),
        "{}",
        bare.stderr
    );
    let raw = format!("RAW_JSON=@{}", weekly().join("raw/2026-W35.json").display());
    let filled = cost(&[&raw, "WEEK=2026-W35"]);
    assert_eq!(filled.code, 0, "{}", filled.stderr);
    assert!(!filled.stderr.contains("has no value"), "{}", filled.stderr);
    // The facts prompt's low end is the filled prompt: the export counts.
    let low = |out: &Out| {
        out.json()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == "facts")
            .map(|t| t["prompt_tokens"]["low"].as_u64().unwrap())
            .unwrap()
    };
    assert!(
        low(&filled) > low(&bare) + 100,
        "{} vs {}",
        low(&filled),
        low(&bare)
    );
}

#[test]
fn a_publish_that_fails_is_exit_5_after_the_summary() {
    let dir = Dir::new();
    let taken = dir.write("taken", "a file where the root should be");
    let args = |root: &str| -> Vec<String> {
        let mut args = week_args(&dir, "2026-W35", "2026-08-27");
        args.extend(["--publish-root", root].map(String::from));
        args
    };
    let out = dir.run(&args(&taken.display().to_string()));
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(
        out.stdout.contains("7 tasks: 7 completed"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("error: --publish-root: "),
        "{}",
        out.stderr
    );
    // A root that can be written: the text summary says what went where,
    // by an absolute path (the manifest's, which an undo run from
    // elsewhere finds).
    let out = dir.run(&args("site"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert!(
        out.stdout.ends_with(&format!(
            "published report -> {}\n",
            cwd.join("site/weekly/2026-W35.md").display()
        )),
        "{}",
        out.stdout
    );
    assert!(dir.path().join("site/weekly/2026-W35.md").is_file());
}

/// A plan with a trusted and an untrusted secret, and a task after them.
const SECRET_PLAN: &str = r#"schema_version: 1
variables:
  - name: TOKEN
    class: trusted
    secret: true
  - name: NOTE
    secret: true
  - name: WEEK
    class: trusted
sub_tasks:
  - id: a
    description: A
    tool_or_prompt:
      name: inference
      params:
        prompt: |
          Week {{WEEK}}, token {{TOKEN}}.
          <untrusted-content>
          {{NOTE}}
          </untrusted-content>
  - id: b
    description: B
    dependencies: [a]
    tool_or_prompt:
      name: inference
      params:
        prompt: Go on.
"#;

#[test]
fn a_secret_reaches_the_engine_and_is_stored_only_as_a_hash() {
    let dir = Dir::new();
    dir.write("secret.yaml", SECRET_PLAN);
    let engine = "cat > \"sent-$CTX_TASK_ID\"; echo \"$CTX_TASK_ID\" >> counts; echo done";
    let token = "tok-9f8e7d6c5b4a";
    let note = "note-73a1<untrusted-content>b2c4";
    let run = |plan: bool, vars: &[String], extra: &[&str]| {
        let mut args: Vec<String> = vec!["run".into()];
        if plan {
            args.push("secret.yaml".into());
        }
        args.extend(
            ["--root", "runs", "--engine", "command", "--command", engine].map(String::from),
        );
        for v in vars {
            args.extend(["--var".to_string(), v.clone()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        dir.run(&args)
    };
    let secrets = |t: &str| vec![format!("TOKEN={t}"), format!("NOTE={note}")];
    let mut vars = secrets(token);
    vars.push("WEEK=2026-W35".into());
    let first = run(true, &vars, &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.run_id();
    // The engine was given the real values (the untrusted one neutralized).
    let sent = std::fs::read_to_string(dir.path().join("sent-a")).unwrap();
    assert!(sent.contains(&format!("token {token}.")), "{sent}");
    assert!(
        sent.contains("note-73a1[neutralized fence tag]b2c4"),
        "{sent}"
    );
    // Nothing under the store root holds either value, in any form.
    let runs = dir.path().join("runs");
    for value in ["tok-9f8e7d6c5b4a", "note-73a1"] {
        assert_eq!(
            ctx_test_support::files_containing(&runs, value),
            Vec::<PathBuf>::new()
        );
    }
    // runs show and export show where each went.
    let shown = dir.run(&["runs", "show", &id, "--root", "runs", "--task", "a"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("token [secret TOKEN]."),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("[secret NOTE]"), "{}", shown.stdout);
    let exported = dir.run(&["runs", "export", &id, "--root", "runs"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    assert!(!exported.stdout.contains(token) && !exported.stdout.contains("note-73a1"));
    assert!(
        exported.stdout.contains("[secret TOKEN]"),
        "{}",
        exported.stdout
    );

    // A resume is not given the secrets again: refused, naming both.
    let bare = run(false, &[], &["--resume", &id]);
    assert_eq!(bare.code, 2, "{}", bare.stderr);
    assert!(
        bare.stderr.contains("variables NOTE, TOKEN are secret")
            && bare.stderr.contains("--var TOKEN=VALUE"),
        "{}",
        bare.stderr
    );
    // Given again, the same: everything reused (the fingerprints are the
    // real prompts'); another token: its task and the dependent run again.
    let same = run(false, &secrets(token), &["--resume", &id]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert_eq!(
        dir.counts(),
        ctx_test_support::counts(&[("a", 1), ("b", 1)])
    );
    let changed = run(true, &secrets("tok-0000"), &["--resume", &id]);
    assert_eq!(changed.code, 0, "{}", changed.stderr);
    assert_eq!(
        dir.counts(),
        ctx_test_support::counts(&[("a", 2), ("b", 2)])
    );
    for value in ["tok-9f8e7d6c5b4a", "tok-0000", "note-73a1"] {
        assert_eq!(
            ctx_test_support::files_containing(&runs, value),
            Vec::<PathBuf>::new()
        );
    }

    // A shared store would hand the plan to workers as stored: refused
    // before anything is opened.
    let shared = run(true, &vars, &["--store", "postgres://ctx@127.0.0.1:1/none"]);
    assert_eq!(shared.code, 2, "{}", shared.stderr);
    assert!(
        shared
            .stderr
            .contains("variable TOKEN is secret, and a shared --store cannot take it"),
        "{}",
        shared.stderr
    );
}

/// An engine that quotes its request back in its error (as a server or a
/// proxy does when it echoes a bad request) puts the secret in no file
/// and in nothing printed: every text ctx stores or prints passes the
/// run's mask, the error of a failed attempt included, and each output
/// format shows `[secret TOKEN]` where the value was.
#[test]
fn an_error_that_quotes_the_prompt_leaks_no_secret_anywhere() {
    let dir = Dir::new();
    dir.write(
        "plan.yaml",
        r#"schema_version: 1
variables:
  - name: TOKEN
    class: trusted
    secret: true
sub_tasks:
  - id: a
    description: A
    tool_or_prompt:
      name: inference
      params:
        prompt: "Use the key {{TOKEN}} for this."
  - id: b
    description: B
    dependencies: [a]
    tool_or_prompt:
      name: inference
      params:
        prompt: Go on.
"#,
    );
    let token = "tok-5e1c7a9b3d";
    // The engine's error quotes the whole request on stderr.
    let engine = "echo \"$CTX_TASK_ID\" >> counts; echo 'bad request:' >&2; cat >&2; exit 3";
    let var = format!("TOKEN={token}");
    let mut printed = String::new();
    let mut keep = |out: Out| {
        printed.push_str(&out.stdout);
        printed.push_str(&out.stderr);
        out
    };
    let base = ["--root", "runs", "--var", &var];
    let text = keep(dir.run_command(engine, &[&base[..], &["-o", "out"]].concat()));
    assert_eq!(text.code, 1, "{}", text.stderr);
    assert!(
        text.stdout.contains("[secret TOKEN]"),
        "the error is shown, masked: {}",
        text.stdout
    );
    let id = text.run_id();
    let json = keep(dir.run_command(engine, &[&base[..], &["--format", "json"]].concat()));
    assert_eq!(json.code, 1, "{}", json.stderr);
    let error = ctx_test_support::task(&json.json(), "a")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("Use the key [secret TOKEN] for this."),
        "{error}"
    );
    for args in [
        vec!["runs", "show", &id, "--root", "runs"],
        vec!["runs", "show", &id, "--root", "runs", "--task", "a"],
        vec!["runs", "show", &id, "--root", "runs", "--format", "json"],
        vec!["runs", "export", &id, "--root", "runs"],
        vec!["runs", "export", &id, "--root", "runs", "--format", "csv"],
        vec!["runs", "export", &id, "--root", "runs", "--format", "otlp"],
        vec!["runs", "report", &id, "--root", "runs", "-o", "report.html"],
    ] {
        let out = keep(dir.run(&args));
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
    assert!(printed.contains("[secret TOKEN]"));
    assert!(!printed.contains(token), "printed: {printed}");
    assert_eq!(
        ctx_test_support::files_containing(dir.path(), token),
        Vec::<PathBuf>::new()
    );
    assert_eq!(dir.counts(), ctx_test_support::counts(&[("a", 2)]));
}

/// Optional variables without a default: a text one (untrusted, in its
/// fence), a secret one (which cannot have a default) and a `json` one.
const OPTIONAL_PLAN: &str = r#"schema_version: 1
variables:
  - name: WEEK
    class: trusted
  - name: NOTE
    required: false
  - name: TOKEN
    class: trusted
    secret: true
    required: false
  - name: EXTRA
    type: json
    class: trusted
    required: false
sub_tasks:
  - id: a
    description: A
    tool_or_prompt:
      name: inference
      params:
        prompt: |
          Week {{WEEK}}, token [{{TOKEN}}], extra {{EXTRA}}.
          <untrusted-content>
          {{NOTE}}
          </untrusted-content>
    checks:
      - contains: done
"#;

/// `required: false` without a default and without a value stands in
/// empty (`null` for `json`) in every command that fills a plan: a run
/// refused it with "no value for {{NOTE}}" while `ctx plan cost` priced
/// it; a required one without a value is still refused.
#[test]
fn an_optional_variable_without_a_default_stands_in_empty() {
    let dir = Dir::new();
    dir.write("opt.yaml", OPTIONAL_PLAN);
    let engine = "cat > \"sent-$CTX_TASK_ID\"; echo done";
    let run = dir.run(&[
        "run",
        "opt.yaml",
        "--no-store",
        "--engine",
        "command",
        "--command",
        engine,
        "--var",
        "WEEK=W35",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sent = std::fs::read_to_string(dir.path().join("sent-a")).unwrap();
    assert!(sent.contains("Week W35, token [], extra null."), "{sent}");
    std::fs::remove_file(dir.path().join("sent-a")).unwrap();
    let stored = dir.run(&[
        "run",
        "opt.yaml",
        "--root",
        "runs",
        "--engine",
        "command",
        "--command",
        engine,
        "--var",
        "WEEK=W35",
        "--var",
        "NOTE=given",
    ]);
    assert_eq!(stored.code, 0, "{}", stored.stderr);
    let sent = std::fs::read_to_string(dir.path().join("sent-a")).unwrap();
    assert!(
        sent.contains("token [], extra null.") && sent.contains("given"),
        "{sent}"
    );

    let eval = dir.run(&[
        "eval",
        "opt.yaml",
        "--command",
        engine,
        "--no-store",
        "--var",
        "WEEK=W35",
    ]);
    assert_eq!(eval.code, 0, "{}", eval.stderr);
    let cost = dir.run(&[
        "plan",
        "cost",
        "opt.yaml",
        "--model",
        "gpt-4o-mini",
        "--var",
        "WEEK=W35",
    ]);
    assert_eq!(cost.code, 0, "{}", cost.stderr);
    assert!(!cost.stderr.contains("has no value"), "{}", cost.stderr);

    let missing = dir.run(&[
        "run",
        "opt.yaml",
        "--no-store",
        "--engine",
        "command",
        "--command",
        engine,
    ]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(missing.stderr.contains("WEEK"), "{}", missing.stderr);
}
