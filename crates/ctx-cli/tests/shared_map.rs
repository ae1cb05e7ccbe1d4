//! Map over a list (issue 23) on the shared PostgreSQL store: workers
//! claim a map's items like any task, two workers drain one map, the
//! reduce receives every item in order, `map.allow_failures`, a resume
//! that runs only the missing, failed or changed items, and a worker
//! SIGKILLed mid-map. Against a real server (scripts/postgres.sh); each
//! test skips without `CTX_TEST_POSTGRES_URL`, and fails in CI.

#![cfg(unix)]

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

#[path = "support/shared_cli.rs"]
mod shared_cli;

#[path = "support/map_counts.rs"]
mod map_counts;

use std::path::Path;
use std::time::Duration;

use ctx_test_support::{Dir, counts, counts_in, task};
use shared_cli::*;

/// `src` prints the JSON in the file `list`, `scan` maps over it at
/// `/repos`, `report` reduces. `extra_map` is the rest of the map block.
fn plan(dir: &Dir, extra_map: &str) -> std::path::PathBuf {
    dir.write(
        "plan.yaml",
        &format!(
            r#"schema_version: 1
sub_tasks:
  - id: src
    description: The list
    tool_or_prompt: {{name: inference, params: {{prompt: "List them."}}}}
  - id: scan
    description: One repository
    dependencies: [src]
    map: {{over: src, pointer: /repos, as: REPO, max_items: 20{extra_map}}}
    tool_or_prompt:
      name: inference
      params:
        prompt: "Rate <untrusted-content>{{{{REPO}}}}</untrusted-content>."
  - id: report
    description: The report
    dependencies: [scan]
    tool_or_prompt: {{name: inference, params: {{prompt: "Sum up."}}}}
"#
        ),
    )
}

/// The engine flags: each call's task id appended to `counts`; `src`
/// answers with the file `list`; an item named in the file `fail` fails;
/// every other item sleeps `secs` and echoes its prompt; the report's
/// prompt is written to `report.prompt`.
fn engine(dir: &Path, secs: f64) -> Vec<String> {
    let d = dir.display();
    let script = format!(
        r#"echo "$CTX_TASK_ID" >> '{d}/counts'
case "$CTX_TASK_ID" in
  src) cat '{d}/list' ;;
  report) cat > '{d}/report.prompt'; echo done ;;
  *) if grep -qxF "$CTX_TASK_ID" '{d}/fail' 2>/dev/null; then echo broke >&2; exit 3; fi
     sleep {secs}; echo "seen $(cat)" ;;
esac"#
    );
    vec![
        "--engine".into(),
        "command".into(),
        "--command".into(),
        script,
    ]
}

/// `{"repos": ["r0", …]}` of `n` items, written to `list`.
fn write_list(dir: &Dir, items: &[&str]) {
    let v = serde_json::json!({ "repos": items });
    dir.write("list", &v.to_string());
}

/// `ctx run ARGS --store URL` with the engine, from `dir`, to the end.
fn run_here(dir: &Dir, url: &str, args: &[&str], secs: f64) -> ctx_test_support::Out {
    ctx_test_support::Out::of(
        dir.ctx()
            .arg("run")
            .args(args)
            .args(["--store", url, "--format", "json"])
            .args(engine(dir.path(), secs)),
    )
}

/// The ids `scan[0]` … `scan[n-1]`.
fn items(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("scan[{i}]")).collect()
}

/// The reduce's prompt has one `### Task scan[i]` block per item, in
/// item order, each with the item's output.
fn assert_reduce_in_order(dir: &Dir, list: &[&str]) {
    let reduce = std::fs::read_to_string(dir.path().join("report.prompt")).unwrap();
    let mut last = 0;
    for (i, item) in list.iter().enumerate() {
        let heading = format!("### Task scan[{i}]");
        let at = reduce[last..]
            .find(&heading)
            .unwrap_or_else(|| panic!("{heading} after {last} in {reduce}"))
            + last;
        let output = format!("<untrusted-content>{item}</untrusted-content>");
        assert!(reduce[at..].contains(&output), "{output} in {reduce}");
        last = at + heading.len();
    }
    assert!(!reduce.contains(&format!("### Task scan[{}]", list.len())));
}

/// A worker's stderr lines that say it committed one of `ids` completed.
fn committed_by(stderr: &str, ids: &[String]) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.ends_with(": completed"))
        .filter_map(|l| ids.iter().find(|id| l.contains(&format!("task `{id}`"))))
        .cloned()
        .collect()
}

#[test]
fn two_workers_drain_one_map_and_the_reduce_gets_every_item_in_order() {
    let Some(url) = pg::fresh_db("map_two_workers") else {
        return;
    };
    let dir = Dir::new();
    let list = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"];
    write_list(&dir, &list);
    let plan = plan(&dir, "");
    let (follower, run) = register(&url, &plan, &dir.path().join("follow.err"));
    let workers: Vec<_> = ["a", "b"]
        .iter()
        .map(|w| {
            spawn(
                ctx()
                    .args([
                        "worker",
                        "--store",
                        &url,
                        "--until-idle",
                        "--concurrency",
                        "2",
                    ])
                    .args(engine(dir.path(), 0.4)),
                &dir.path().join(format!("{w}.err")),
            )
        })
        .collect();
    let mut logs = Vec::new();
    for (w, child) in ["a", "b"].iter().zip(workers) {
        let out = finish(child, Duration::from_secs(120));
        let err = std::fs::read_to_string(dir.path().join(format!("{w}.err"))).unwrap();
        assert!(out.status.success(), "worker {w}: {err}");
        logs.push(err);
    }
    let follower = finish(follower, Duration::from_secs(30));
    assert!(
        follower.status.success(),
        "{}",
        std::fs::read_to_string(dir.path().join("follow.err")).unwrap()
    );
    let ids = items(list.len());
    let (a, b) = (committed_by(&logs[0], &ids), committed_by(&logs[1], &ids));
    assert!(
        !a.is_empty() && !b.is_empty(),
        "both workers commit items: {a:?} {b:?}"
    );
    let mut all: Vec<String> = a.into_iter().chain(b).collect();
    all.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(all, want, "every item committed once");
    // One expansion, by whichever worker claimed the map first.
    let expansions = logs
        .iter()
        .flat_map(|l| l.lines())
        .filter(|l| l.contains("task `scan`") && l.contains("expanded, 8 item(s) to run"))
        .count();
    assert_eq!(expansions, 1, "{logs:?}");
    // Each item ran once, the map task called nothing.
    let mut want = counts(&[("src", 1), ("report", 1)]);
    want.extend(ids.iter().map(|i| (i.clone(), 1)));
    assert_eq!(dir.counts(), want);
    assert_reduce_in_order(&dir, &list);
    let v = export(&url, &run);
    let s = statuses(&v);
    assert!(s.iter().all(|(_, st)| st == "completed"), "{s:?}");
    assert_eq!(s.len(), 3 + list.len(), "{s:?}");
    assert_eq!(task(&v, "scan")["output"], "8 items: 8 completed, 0 failed");
}

#[test]
fn a_failed_item_fails_the_shared_map_unless_allow_failures_admits_it() {
    let Some(url) = pg::fresh_db("map_allow_failures") else {
        return;
    };
    let dir = Dir::new();
    write_list(&dir, &["a", "b", "c"]);
    dir.write("fail", "scan[1]\n");
    plan(&dir, ", allow_failures: 1");
    let out = run_here(&dir, &url, &["plan.yaml"], 0.05);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    assert_eq!(
        task(&json, "scan")["output"],
        "3 items: 2 completed, 1 failed"
    );
    assert_eq!(task(&json, "scan[1]")["status"], "failed");
    assert_eq!(task(&json, "report")["status"], "completed");
    let reduce = std::fs::read_to_string(dir.path().join("report.prompt")).unwrap();
    assert!(reduce.contains("### Task scan[1]"), "{reduce}");
    assert!(reduce.contains("(this item failed:"), "{reduce}");
    assert!(
        reduce.contains("<untrusted-content>c</untrusted-content>"),
        "{reduce}"
    );
    // The map's items counted, as fields, in every output of the run.
    let counts = serde_json::json!({"items": 3, "completed": 2, "failed": 1});
    assert_eq!(task(&json, "scan")["map"], counts);
    map_counts::assert_shown(&dir, &out.run_id(), &["--store", &url], (3, 2, 1));

    // Without allow_failures the map fails and the reduce is skipped.
    let Some(url) = pg::fresh_db("map_no_failures") else {
        return;
    };
    std::fs::remove_file(dir.path().join("counts")).unwrap();
    plan(&dir, "");
    let out = run_here(&dir, &url, &["plan.yaml"], 0.05);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let json = out.json();
    assert_eq!(task(&json, "scan")["status"], "failed");
    assert_eq!(
        task(&json, "scan")["error"],
        "1 of 3 items failed (map.allow_failures: 0)"
    );
    assert_eq!(task(&json, "report")["status"], "skipped");
    assert_eq!(counts_in(dir.path()).get("report"), None);
}

/// A map over a `json` variable, and its reduce.
const OVER_VARIABLE: &str = r#"schema_version: 1
variables:
  - {name: LIST, type: json, class: untrusted}
sub_tasks:
  - id: scan
    description: One item
    map: {over: LIST, pointer: /items, as: ITEM, max_items: 5}
    tool_or_prompt:
      name: inference
      params:
        prompt: "Rate <untrusted-content>{{ITEM}}</untrusted-content>."
  - id: report
    description: The report
    dependencies: [scan]
    tool_or_prompt: {name: inference, params: {prompt: "Sum up."}}
"#;

#[test]
fn a_resumed_shared_map_runs_only_the_items_whose_value_changed() {
    let Some(url) = pg::fresh_db("map_resume_changed") else {
        return;
    };
    let dir = Dir::new();
    dir.write("plan.yaml", OVER_VARIABLE);
    let first = run_here(
        &dir,
        &url,
        &["plan.yaml", "--var", r#"LIST={"items": ["a", "b"]}"#],
        0.05,
    );
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let run = run_id_from_text(&first.stderr);
    std::fs::remove_file(dir.path().join("counts")).unwrap();
    // `b` moved to the front, `a` is gone, `x` is new: only `x` runs, and
    // the reduce after it.
    let second = run_here(
        &dir,
        &url,
        &[
            "plan.yaml",
            "--resume",
            &run,
            "--var",
            r#"LIST={"items": ["b", "x"]}"#,
        ],
        0.05,
    );
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    assert_eq!(dir.counts(), counts(&[("scan[1]", 1), ("report", 1)]));
    // The moved item keeps its result under its new id.
    let json = second.json();
    assert_eq!(
        task(&json, "scan[0]")["output"],
        "seen Rate <untrusted-content>b</untrusted-content>.\n"
    );
    assert_reduce_in_order(&dir, &["b", "x"]);
}

#[test]
fn a_resumed_shared_map_runs_only_its_failed_items() {
    let Some(url) = pg::fresh_db("map_resume_failed") else {
        return;
    };
    let dir = Dir::new();
    write_list(&dir, &["a", "b", "c"]);
    dir.write("fail", "scan[1]\n");
    plan(&dir, "");
    let first = run_here(&dir, &url, &["plan.yaml"], 0.05);
    assert_eq!(first.code, 1, "{}\n{}", first.stdout, first.stderr);
    let run = run_id_from_text(&first.stderr);
    std::fs::remove_file(dir.path().join("fail")).unwrap();
    std::fs::remove_file(dir.path().join("counts")).unwrap();
    // The stored plan is resumed (no plan file): only the failed item
    // runs again, then the reduce it skipped.
    let second = run_here(&dir, &url, &["--resume", &run], 0.05);
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    assert_eq!(dir.counts(), counts(&[("scan[1]", 1), ("report", 1)]));
    assert_reduce_in_order(&dir, &["a", "b", "c"]);
}

#[test]
fn a_worker_sigkilled_mid_map_loses_no_committed_item_and_repeats_none() {
    let Some(url) = pg::fresh_db("map_sigkill") else {
        return;
    };
    let dir = Dir::new();
    let list = ["k0", "k1", "k2", "k3", "k4", "k5"];
    write_list(&dir, &list);
    let plan = plan(&dir, "");
    let (follower, run) = register(&url, &plan, &dir.path().join("follow.err"));
    let a = spawn(
        ctx()
            .args([
                "worker",
                "--store",
                &url,
                "--concurrency",
                "1",
                "--lease",
                "1",
            ])
            .args(engine(dir.path(), 0.5)),
        &dir.path().join("a.err"),
    );
    let ids = items(list.len());
    let completed = |v: &serde_json::Value| -> Vec<String> {
        statuses(v)
            .into_iter()
            .filter(|(id, s)| s == "completed" && ids.contains(id))
            .map(|(id, _)| id)
            .collect()
    };
    wait_for("two items committed", Duration::from_secs(60), || {
        completed(&export(&url, &run)).len() >= 2
    });
    signal(&a, "KILL");
    let a = finish(a, Duration::from_secs(10));
    assert!(!a.status.success());
    // What the store holds after the kill is what was committed.
    let committed = completed(&export(&url, &run));
    assert!(committed.len() < list.len(), "{committed:?}");
    // The killed worker's claim lapses (a 1 s lease); the run is resumed.
    std::thread::sleep(Duration::from_millis(1500));
    let out = run_here(&dir, &url, &["--resume", &run], 0.05);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let follower = finish(follower, Duration::from_secs(30));
    assert!(follower.status.success());
    let runs = dir.counts();
    for id in &committed {
        assert_eq!(runs.get(id), Some(&1), "{id} was committed: {runs:?}");
    }
    // The item in flight at the kill may run twice; none more.
    for id in &ids {
        let n = runs.get(id).copied().unwrap_or(0);
        assert!((1..=2).contains(&n), "{id}: {runs:?}");
    }
    let twice = ids.iter().filter(|id| runs.get(*id) == Some(&2)).count();
    assert!(twice <= 1, "{runs:?}");
    assert_eq!(runs.get("report"), Some(&1));
    let v = export(&url, &run);
    assert!(statuses(&v).iter().all(|(_, s)| s == "completed"), "{v}");
    assert_reduce_in_order(&dir, &list);
}

/// The bug: a shared resume ran the reduce again even when every item
/// came back unchanged. Now an unchanged resume calls no engine: the
/// items are taken by content hash, the map joins them, and the reduce
/// takes the result its resume kept aside, listed `completed (reused)`
/// as a local resume lists it.
#[test]
fn an_unchanged_shared_resume_calls_no_engine_and_reuses_the_reduce() {
    let Some(url) = pg::fresh_db("map_resume_unchanged") else {
        return;
    };
    let dir = Dir::new();
    write_list(&dir, &["a", "b", "c"]);
    plan(&dir, "");
    let first = run_here(&dir, &url, &["plan.yaml"], 0.05);
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let run = run_id_from_text(&first.stderr);
    std::fs::remove_file(dir.path().join("counts")).unwrap();
    let second = ctx_test_support::Out::of(
        dir.ctx()
            .args(["run", "--resume", &run, "--store", &url])
            .args(engine(dir.path(), 0.05)),
    );
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    assert_eq!(dir.counts(), counts(&[]), "{}", second.stdout);
    let line = |id: &str| {
        second
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("{id} in {}", second.stdout))
            .to_string()
    };
    for id in ["report", "scan[0]", "scan[1]", "scan[2]"] {
        assert!(line(id).contains("completed (reused)"), "{}", second.stdout);
    }
}

/// `plan` with a task `side` that depends on nothing.
fn plan_with_side(dir: &Dir) -> std::path::PathBuf {
    let p = plan(dir, "");
    let text = std::fs::read_to_string(&p).unwrap();
    dir.write(
        "plan.yaml",
        &format!(
            "{text}  - id: side\n    description: Apart\n    tool_or_prompt: {{name: inference, params: {{prompt: \"Aside.\"}}}}\n"
        ),
    )
}

/// A resume SIGKILLed mid-run (here its worker and its follower, while
/// `side`, which failed before, runs again) loses no result its resume
/// kept: the next resume runs `side` again and still takes the reduce as
/// stored, whether the killed one had taken it or left it waiting.
#[test]
fn a_resume_sigkilled_mid_run_keeps_the_reduce_it_would_take() {
    let Some(url) = pg::fresh_db("map_resume_sigkill") else {
        return;
    };
    let dir = Dir::new();
    write_list(&dir, &["a", "b"]);
    dir.write("fail", "side\n");
    let plan = plan_with_side(&dir);
    let first = run_here(&dir, &url, &["plan.yaml"], 0.05);
    assert_eq!(first.code, 1, "{}\n{}", first.stdout, first.stderr);
    let run = run_id_from_text(&first.stderr);
    assert_eq!(dir.counts().get("report"), Some(&1));
    std::fs::remove_file(dir.path().join("fail")).unwrap();
    std::fs::remove_file(dir.path().join("counts")).unwrap();
    // The resume reopens the run and a worker (a 1 s lease) takes `side`,
    // which sleeps: both are killed once its call started.
    let follower = spawn(
        ctx()
            .arg("run")
            .arg(&plan)
            .args(["--resume", &run, "--store", &url, "--no-local"])
            .args(engine(dir.path(), 20.0)),
        &dir.path().join("follow.err"),
    );
    let worker = spawn(
        ctx()
            .args([
                "worker",
                "--store",
                &url,
                "--concurrency",
                "2",
                "--lease",
                "1",
            ])
            .args(engine(dir.path(), 20.0)),
        &dir.path().join("worker.err"),
    );
    wait_for("side's call", Duration::from_secs(60), || {
        dir.counts().contains_key("side")
    });
    signal(&worker, "KILL");
    signal(&follower, "KILL");
    assert!(!finish(worker, Duration::from_secs(10)).status.success());
    assert!(!finish(follower, Duration::from_secs(10)).status.success());
    std::thread::sleep(Duration::from_millis(1500));
    let third = run_here(&dir, &url, &["--resume", &run], 0.05);
    assert_eq!(third.code, 0, "{}\n{}", third.stdout, third.stderr);
    // `side` ran in both resumes; nothing below the map ran in either.
    assert_eq!(dir.counts(), counts(&[("side", 2)]));
    let v = third.json();
    assert_eq!(task(&v, "report")["status"], "completed");
    assert_eq!(task(&v, "report")["output"], "done\n");
}
