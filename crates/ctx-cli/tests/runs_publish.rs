//! `ctx runs publish` and `ctx runs unpublish`, and the manifest and
//! backups every publish keeps (docs/runs.md, "Publishing later and
//! undoing"), from the CLI on the command engine.

use std::path::{Path, PathBuf};

use ctx_model::digest::sha256_hex;
use ctx_test_support::{Dir, Out};

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

/// Two tasks, each published to its own path.
const PLAN: &str = "schema_version: 1
sub_tasks:
  - id: a
    description: A
    publish: a.md
    tool_or_prompt: {name: inference, params: {prompt: do a}}
  - id: b
    description: B
    publish: deep/b.md
    tool_or_prompt: {name: inference, params: {prompt: do b}}
";

/// A run stored under `runs`, published nowhere, whose outputs say
/// `TASK one`; `site/a.md` already holds `original`.
fn stored_run(dir: &Dir) -> String {
    dir.write("plan.yaml", PLAN);
    std::fs::create_dir(dir.path().join("site")).unwrap();
    dir.write("site/a.md", "original");
    let run = dir.run_command("echo \"$CTX_TASK_ID one\"", &["--root", "runs"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.run_id()
}

fn runs(dir: &Dir, args: &[&str]) -> Out {
    let mut all = vec!["runs"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--root", "runs"]);
    dir.run(&all)
}

fn read(path: PathBuf) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn backups(dir: &Dir, id: &str) -> PathBuf {
    dir.path().join("runs").join(id).join("published/backup")
}

#[test]
fn a_stored_run_is_published_later_and_unpublished_back() {
    let dir = Dir::new();
    let id = stored_run(&dir);
    let site = dir.path().join("site");
    let out = runs(&dir, &["publish", &id, "--publish-root", "site"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("published a -> "), "{}", out.stdout);
    assert_eq!(read(site.join("a.md")).as_deref(), Some("a one\n"));
    assert_eq!(read(site.join("deep/b.md")).as_deref(), Some("b one\n"));
    // The replaced bytes are kept, named by their digest.
    let original = sha256_hex(b"original");
    assert_eq!(
        read(backups(&dir, &id).join(&original)).as_deref(),
        Some("original")
    );
    // The manifest: new and old digests, size, time.
    let shown = runs(&dir, &["show", &id, "--format", "json"]);
    let files = &shown.json()["publishes"][0]["files"];
    assert_eq!(files[0]["sha256"], sha256_hex(b"a one\n"));
    assert_eq!(files[0]["old_sha256"], original.as_str());
    assert_eq!(files[0]["size"], 6);
    assert!(files[0]["published_at"].is_string());
    assert!(files[1].get("old_sha256").is_none(), "{files}");
    let text = runs(&dir, &["show", &id]);
    assert!(
        text.stdout.contains(&format!(
            "publish 1 at {}",
            shown.json()["publishes"][0]["at"].as_str().unwrap()
        )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains(&format!("replaced {}  6 bytes", &original[..12])),
        "{}",
        text.stdout
    );

    // The report lists the manifest of what is published.
    let html = runs(&dir, &["report", &id]);
    assert!(
        html.stdout.contains(&format!(
            "<td>{}</td><td>{}</td><td>{}</td><td class=\"n\">6</td>",
            site.join("a.md").display(),
            &sha256_hex(b"a one\n")[..12],
            &original[..12]
        )),
        "{}",
        html.stdout
    );

    let undo = runs(&dir, &["unpublish", &id]);
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    assert!(undo.stdout.contains("restored a -> "), "{}", undo.stdout);
    assert!(undo.stdout.contains("removed b -> "), "{}", undo.stdout);
    assert_eq!(read(site.join("a.md")).as_deref(), Some("original"));
    assert!(!site.join("deep/b.md").exists());
    // Recorded: a second undo finds nothing, and touches nothing.
    std::fs::write(site.join("a.md"), "someone else's").unwrap();
    let again = runs(&dir, &["unpublish", &id]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("nothing to undo"), "{}", again.stderr);
    assert_eq!(read(site.join("a.md")).as_deref(), Some("someone else's"));
    let shown = runs(&dir, &["show", &id]);
    assert!(shown.stdout.contains("undone by 2"), "{}", shown.stdout);
    assert!(
        !shown.stdout.contains("\npublished a -> "),
        "{}",
        shown.stdout
    );
}

/// `ctx run --publish-root` keeps the same manifest and backups, and a
/// later publish of the same run stacks on it: undone newest first, the
/// files end as they were before either.
#[test]
fn a_run_s_own_publish_and_a_later_one_are_undone_newest_first() {
    let dir = Dir::new();
    dir.write("plan.yaml", PLAN);
    std::fs::create_dir(dir.path().join("site")).unwrap();
    dir.write("site/a.md", "original");
    let run = dir.run_command(
        "echo \"$CTX_TASK_ID one\"",
        &[
            "--root",
            "runs",
            "--publish-root",
            "site",
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run.run_id();
    assert_eq!(
        run.json()["published"][0]["old_sha256"],
        sha256_hex(b"original")
    );
    std::fs::write(dir.path().join("site/a.md"), "a one\n").unwrap();
    let again = runs(&dir, &["publish", &id, "--publish-root", "site"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let undo = runs(&dir, &["unpublish", &id]);
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    assert_eq!(
        read(dir.path().join("site/a.md")).as_deref(),
        Some("original")
    );
    assert!(!dir.path().join("site/deep/b.md").exists());
}

#[test]
fn a_file_changed_since_is_refused_by_name_unless_forced() {
    let dir = Dir::new();
    let id = stored_run(&dir);
    let site = dir.path().join("site");
    assert_eq!(
        runs(&dir, &["publish", &id, "--publish-root", "site"]).code,
        0
    );
    std::fs::write(site.join("deep/b.md"), "edited by hand").unwrap();
    let refused = runs(&dir, &["unpublish", &id]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "{}: changed since run {id} published it",
            site.join("deep/b.md").display()
        )),
        "{}",
        refused.stderr
    );
    // Nothing was touched: the other file still holds the run's output.
    assert_eq!(read(site.join("a.md")).as_deref(), Some("a one\n"));
    let forced = runs(&dir, &["unpublish", &id, "--force"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert_eq!(read(site.join("a.md")).as_deref(), Some("original"));
    assert!(!site.join("deep/b.md").exists());
}

#[test]
fn a_missing_backup_is_named_and_nothing_is_touched() {
    let dir = Dir::new();
    let id = stored_run(&dir);
    let site = dir.path().join("site");
    assert_eq!(
        runs(&dir, &["publish", &id, "--publish-root", "site"]).code,
        0
    );
    let backup = backups(&dir, &id).join(sha256_hex(b"original"));
    std::fs::remove_file(&backup).unwrap();
    let out = runs(&dir, &["unpublish", &id]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{}: its backup runs/{id}/published/backup/{} is missing",
            site.join("a.md").display(),
            sha256_hex(b"original")
        )),
        "{}",
        out.stderr
    );
    // b.md, the later line, was checked first but not removed.
    assert_eq!(read(site.join("deep/b.md")).as_deref(), Some("b one\n"));
    assert_eq!(read(site.join("a.md")).as_deref(), Some("a one\n"));
}

#[test]
fn bad_requests_are_refused_with_their_exit_codes() {
    let dir = Dir::new();
    let id = stored_run(&dir);
    // An unknown run.
    let out = runs(&dir, &["unpublish", "20990101T000000.000Z-00000000"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let _ = id;
    // A plan with nothing to publish.
    dir.write(
        "plan.yaml",
        "schema_version: 1\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: do a}}\n",
    );
    let run = dir.run_command("cat", &["--root", "runs"]);
    let out = runs(&dir, &["publish", &run.run_id(), "--publish-root", "site"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("no task with a publish: path"),
        "{}",
        out.stderr
    );
    assert!(Path::new(&dir.path().join("site/a.md")).is_file());
}

/// `--format json` prints the manifest lines of a publish and of its undo:
/// the undo's say what each file holds after it.
#[test]
fn publish_and_unpublish_print_their_lines_as_json() {
    let dir = Dir::new();
    let id = stored_run(&dir);
    let out = runs(
        &dir,
        &["publish", &id, "--publish-root", "site", "--format", "json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = out.json();
    assert_eq!(lines[0]["task_id"], "a");
    assert_eq!(lines[0]["old_sha256"], sha256_hex(b"original"));
    assert_eq!(lines[1]["size"], 6);
    let undo = runs(&dir, &["unpublish", &id, "--format", "json"]);
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    let lines = undo.json();
    // Newest line first: b was created, so it is removed (no digest).
    assert_eq!(lines[0]["task_id"], "b");
    assert!(lines[0].get("sha256").is_none(), "{lines}");
    assert_eq!(lines[1]["sha256"], sha256_hex(b"original"));
    assert_eq!(lines[1]["old_sha256"], sha256_hex(b"a one\n"));
}

/// The same on a shared store: a run's own publish keeps what it replaces
/// in the database, a later publish stacks on it, a file changed since
/// is refused, a missing backup is named, and the undo is recorded.
#[test]
fn a_shared_run_is_published_later_and_unpublished_back() {
    let Some(url) = pg::fresh_db("runs_publish") else {
        return;
    };
    let dir = Dir::new();
    dir.write("plan.yaml", PLAN);
    std::fs::create_dir(dir.path().join("site")).unwrap();
    dir.write("site/a.md", "original");
    let site = dir.path().join("site");
    let run = dir.run_command(
        "echo \"$CTX_TASK_ID one\"",
        &["--store", &url, "--publish-root", "site"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = ctx_test_support::run_id(&run.stderr);
    let shared = |args: &[&str]| {
        let mut all = vec!["runs"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--store", &url]);
        dir.run(&all)
    };
    // A run still open (tasks left for workers) is not final.
    let open = |yes: bool| {
        pg::sql(
            &url,
            &[&format!(
                "UPDATE ctx_runs SET open = {yes} WHERE run_id = '{id}'"
            )],
        )
    };
    open(true);
    let refused = shared(&["publish", &id, "--publish-root", "site"]);
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert!(refused.stderr.contains("still open"), "{}", refused.stderr);
    open(false);
    // A later publish of the same outputs: each file holds what both wrote.
    let again = shared(&["publish", &id, "--publish-root", "site"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let shown = shared(&["show", &id, "--format", "json"]);
    let events = shown.json()["publishes"].clone();
    assert_eq!(events.as_array().unwrap().len(), 2, "{events}");
    assert_eq!(events[0]["files"][0]["old_sha256"], sha256_hex(b"original"));

    std::fs::write(site.join("a.md"), "edited").unwrap();
    let refused = shared(&["unpublish", &id]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("a.md: changed since run"),
        "{}",
        refused.stderr
    );
    assert_eq!(read(site.join("deep/b.md")).as_deref(), Some("b one\n"));
    std::fs::write(site.join("a.md"), "a one\n").unwrap();

    // The backups are rows: one gone is named, and nothing is touched.
    let original = sha256_hex(b"original");
    pg::sql(
        &url,
        &[&format!(
            "DELETE FROM ctx_publish_backups WHERE sha256 = '{original}'"
        )],
    );
    let missing = shared(&["unpublish", &id]);
    assert_eq!(missing.code, 4, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("ctx_publish_backups") && missing.stderr.contains("is missing"),
        "{}",
        missing.stderr
    );
    assert_eq!(read(site.join("deep/b.md")).as_deref(), Some("b one\n"));
    pg::sql(
        &url,
        &[&format!(
            "INSERT INTO ctx_publish_backups VALUES ('{id}', '{original}', 'original'::bytea)"
        )],
    );
    let undo = shared(&["unpublish", &id]);
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    assert_eq!(read(site.join("a.md")).as_deref(), Some("original"));
    assert!(!site.join("deep/b.md").exists());
    let again = shared(&["unpublish", &id]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("nothing to undo"), "{}", again.stderr);
    let shown = shared(&["show", &id]);
    assert!(shown.stdout.contains("unpublish 3 at "), "{}", shown.stdout);
}
