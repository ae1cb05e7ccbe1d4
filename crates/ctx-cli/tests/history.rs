//! `ctx history` from the command line: output shapes, discovery, and every
//! bad input naming its path and line with exit 2.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

fn ctx() -> Command {
    Command::cargo_bin("ctx").unwrap()
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/weekly/content")
}

fn write(root: &Path, rel: &str, text: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = ctx()
        .args(args)
        .arg("--format")
        .arg("json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn json_report_has_the_documented_shape() {
    let root = fixture();
    let v = json(&[
        "history",
        "--content-root",
        root.to_str().unwrap(),
        "--date",
        "2026-08-20",
    ]);
    for key in [
        "markdown",
        "words",
        "tokens",
        "max_words",
        "token_cap",
        "tokenizer",
        "sources",
        "slack",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["token_cap"], 13_500);
    assert_eq!(v["max_words"], 1500);
    assert_eq!(v["tokenizer"], "cl100k_base");
    let sources = v["sources"].as_array().unwrap();
    let keys: Vec<_> = sources.iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["rolling", "previous_week", "monthly", "yearly"]);
    for s in sources {
        for key in [
            "key", "label", "path", "status", "words", "tokens", "sections",
        ] {
            assert!(s.get(key).is_some(), "source missing {key}");
        }
    }
    // Strictly before the date: the 2026-08-21 report is never used.
    assert_eq!(
        sources[1]["path"],
        "weekly/2026/2026-08-14-kestrel-weekly.md"
    );
    assert!(
        !v["markdown"]
            .as_str()
            .unwrap()
            .contains("looked into the future")
    );
}

#[test]
fn nothing_at_all_when_no_source_exists() {
    let dir = tempfile::tempdir().unwrap();
    ctx()
        .args(["history", "--content-root"])
        .arg(dir.path())
        .args(["--date", "2026-08-20"])
        .assert()
        .success()
        .stdout("");
    let v = json(&[
        "history",
        "--content-root",
        dir.path().to_str().unwrap(),
        "--date",
        "2026-08-20",
    ]);
    assert_eq!(v["markdown"], "");
    assert!(
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "missing")
    );
}

#[test]
fn discovery_rules() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // Front-matter date beats the name; same-day reports are not "before".
    write(
        r,
        "weekly/a-2026-01-01.md",
        b"---\ndate: 2026-08-10\nsummary: by front matter\n---\n## Blind Spots\nA.\n",
    );
    write(
        r,
        "weekly/2026-08-20.md",
        b"---\nsummary: same day\n---\n## Blind Spots\nB.\n",
    );
    write(
        r,
        "weekly/2026/W32.md",
        b"## Blind Spots\nWeek 32 ends 2026-08-09.\n",
    );
    // Monthly: no file for August, so July; yearly: 2025 (legacy).
    write(r, "monthly/2026/07.md", b"## Key Takeaways\nJuly.\n");
    write(
        r,
        "monthly/2026/09.md",
        b"## Key Takeaways\nSeptember is later.\n",
    );
    write(r, "yearly/2025.md", b"## Predictions Review\nOld.\n");
    let v = json(&[
        "history",
        "--content-root",
        r.to_str().unwrap(),
        "--date",
        "2026-08-20T07:00:00+02:00",
    ]);
    let s = v["sources"].as_array().unwrap();
    assert_eq!(s[1]["path"], "weekly/a-2026-01-01.md");
    assert_eq!(s[2]["path"], "monthly/2026/07.md");
    assert_eq!(s[3]["path"], "yearly/2025.md");
    assert_eq!(s[3]["sections"], serde_json::json!(["Predictions Review"]));
    let md = v["markdown"].as_str().unwrap();
    assert!(
        md.contains("- Prior weekly thesis: by front matter"),
        "{md}"
    );
    // --previous-summary overrides the search.
    let prev = r.join("weekly/2026/W32.md");
    let v = json(&[
        "history",
        "--content-root",
        r.to_str().unwrap(),
        "--date",
        "2026-08-20",
        "--previous-summary",
        prev.to_str().unwrap(),
    ]);
    let md = v["markdown"].as_str().unwrap();
    assert!(md.contains("Week 32 ends"), "{md}");
    assert!(
        v["sources"][1]["note"]
            .as_str()
            .unwrap()
            .contains("no front-matter `summary`")
    );
}

#[test]
fn whole_body_fallback_when_no_named_section_exists() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "monthly/2026/08.md",
        b"# August\n\nNo named sections here. Just text.\n",
    );
    let v = json(&[
        "history",
        "--content-root",
        dir.path().to_str().unwrap(),
        "--date",
        "2026-08-20",
    ]);
    let m = &v["sources"][2];
    assert_eq!(m["status"], "included");
    assert_eq!(m["sections"], serde_json::json!([]));
    assert!(
        v["markdown"]
            .as_str()
            .unwrap()
            .contains("No named sections here.")
    );
}

#[test]
fn config_file_changes_sources_and_caps() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "notes/now.md",
        b"## Focus\nShip it. Then rest.\n## Other\nNo.\n",
    );
    let cfg = dir.path().join("history.yaml");
    std::fs::write(
        &cfg,
        "max_words: 50\nsources:\n  - key: notes\n    label: Current Notes\n    path: \"{root}/notes/now.md\"\n    target_words: 40\n    sections: [[Focus]]\n",
    )
    .unwrap();
    ctx()
        .args(["history", "--content-root"])
        .arg(dir.path())
        .arg("--config")
        .arg(&cfg)
        .args(["--date", "2026-01-01"])
        .assert()
        .success()
        .stdout("### Current Notes\n\n## Focus\nShip it. Then rest.\n");
}

#[test]
fn estimate_tokenizer_and_tight_budgets_hold() {
    let root = fixture();
    for budget in ["0", "100", "1000", "4000"] {
        let v = json(&[
            "history",
            "--content-root",
            root.to_str().unwrap(),
            "--date",
            "2026-08-20",
            "--prompt-budget",
            budget,
            "--tokenizer",
            "estimate",
        ]);
        let md = v["markdown"].as_str().unwrap();
        assert!(md.len().div_ceil(4) <= v["token_cap"].as_u64().unwrap() as usize);
        assert_eq!(v["tokenizer"], "estimate");
    }
}

#[test]
fn bad_input_is_exit_2_naming_path_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let root = r.to_str().unwrap();

    ctx()
        .args([
            "history",
            "--content-root",
            "/no/such/root",
            "--date",
            "2026-08-20",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "/no/such/root: content root does not exist",
        ));

    ctx()
        .args(["history", "--content-root", root, "--tokenizer", "gpt9"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "invalid value 'gpt9' for '--tokenizer <T>'",
        ))
        .stderr(predicate::str::contains(
            "[possible values: cl100k_base, o200k_base, o200k_harmony, p50k_base, r50k_base, estimate]",
        ));

    ctx()
        .args(["history", "--content-root", root, "--date", "August"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--date: `August` is not a date"));

    ctx()
        .args(["history", "--content-root", root, "--share", "1.5"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--share"));

    let cfg = r.join("bad.toml");
    std::fs::write(&cfg, "max_words = 10\nmax_wordz = 3\n").unwrap();
    ctx()
        .args([
            "history",
            "--content-root",
            root,
            "--config",
            cfg.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.toml:2:"));

    ctx()
        .args([
            "history",
            "--content-root",
            root,
            "--config",
            "/no/such.toml",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/no/such.toml"));

    write(
        r,
        "rolling/last-month.md",
        b"---\ntitle: x\nsummary: [unclosed\n---\nbody\n",
    );
    // Rolling does not parse front matter it does not need...
    ctx()
        .args(["history", "--content-root", root, "--date", "2026-08-20"])
        .assert()
        .success();
    // ...but the chosen weekly report's front matter is always read (here
    // the only weekly report, dated by its name: its error is the answer).
    write(
        r,
        "weekly/2026-08-14.md",
        b"---\ntitle: x\nsummary: [unclosed\n---\nbody\n",
    );
    ctx()
        .args(["history", "--content-root", root, "--date", "2026-08-20"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("weekly/2026-08-14.md:")
                .and(predicate::str::contains("malformed YAML front matter")),
        );

    write(
        r,
        "weekly/2026-08-14.md",
        b"---\ntitle: x\n## never closed\n",
    );
    ctx()
        .args(["history", "--content-root", root, "--date", "2026-08-20"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "weekly/2026-08-14.md:1: front matter opened with `---` is never closed",
        ));

    write(r, "weekly/2026-08-14.md", b"## Blind Spots\nok\n\xff\xfe\n");
    ctx()
        .args(["history", "--content-root", root, "--date", "2026-08-20"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("weekly/2026-08-14.md: not valid UTF-8")
                .and(predicate::str::contains("line 3")),
        );

    write(
        r,
        "weekly/2026-08-14.md",
        b"+++\ndate = 2026-08-14\nsummary = \n+++\n",
    );
    ctx()
        .args(["history", "--content-root", root, "--date", "2026-08-20"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "weekly/2026-08-14.md:3: malformed TOML front matter",
        ));
}

#[test]
fn undated_reports_warn_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "weekly/notes.md", b"## Blind Spots\nx\n");
    ctx()
        .args(["history", "--content-root"])
        .arg(dir.path())
        .args(["--date", "2026-08-20"])
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains("notes.md: no date"));
}

#[test]
fn a_broken_unrelated_weekly_file_is_a_warning_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(
        r,
        "weekly/2026-08-14.md",
        b"---\nsummary: Latest thesis\n---\n## Blind Spots\nlatest\n",
    );
    // A horizontal rule on the first line reads as unclosed front matter.
    write(r, "weekly/2019-01-01.md", b"---\nOld notes\n");
    let out = ctx()
        .args(["history", "--content-root"])
        .arg(r)
        .args(["--date", "2026-08-20", "--format", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "weekly/2019-01-01.md:1: front matter opened with `---` is never closed; \
             not the chosen report, skipped"
        ),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sources"][1]["path"], "weekly/2026-08-14.md");
    assert!(v["markdown"].as_str().unwrap().contains("Latest thesis"));

    // Once the broken file is the latest report, it is an error again.
    write(r, "weekly/2026-08-19.md", b"---\nOld notes\n");
    ctx()
        .args(["history", "--content-root"])
        .arg(r)
        .args(["--date", "2026-08-20"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "weekly/2026-08-19.md:1: front matter opened with `---` is never closed",
        ));
}

#[cfg(unix)]
#[test]
fn a_symlink_loop_lists_each_report_once() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "weekly/2026-08-14.md", b"## Blind Spots\nlatest\n");
    write(r, "weekly/notes.md", b"undated\n");
    symlink("..", r.join("weekly/archive")).unwrap();
    symlink("..", r.join("weekly/back")).unwrap();
    let out = ctx()
        .args(["history", "--content-root"])
        .arg(r)
        .args(["--date", "2026-08-20", "--format", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Followed links would list `notes.md` once per `archive/` level.
    assert_eq!(stderr.matches("notes.md: no date").count(), 1, "{stderr}");
    assert!(
        stderr.contains("weekly/archive: symbolic link to a directory; not followed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("weekly/back: symbolic link to a directory; not followed"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sources"][1]["path"], "weekly/2026-08-14.md");
}

/// Copies the fixture archive into a fresh directory.
fn fixture_copy() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&fixture(), dir.path());
    dir
}

/// Issue 8, item 5: a rolling report that is one 1,600-word paragraph
/// with no sentence end (generated here) emptied the digest, exit 0,
/// `words: 0`, all four sources dropped.
#[test]
fn a_1600_word_paragraph_does_not_empty_the_digest() {
    let dir = fixture_copy();
    let words: Vec<String> = (0..1600)
        .map(|i| ["harbor", "ledger", "signal", "quota", "review"][i % 5].to_string())
        .collect();
    write(
        dir.path(),
        "rolling/last-month.md",
        format!("{}\n", words.join(" ")).as_bytes(),
    );
    let v = json(&[
        "history",
        "--content-root",
        dir.path().to_str().unwrap(),
        "--date",
        "2026-08-20",
    ]);
    let w = v["words"].as_u64().unwrap();
    assert!(w > 1000 && w <= 1500, "{w}");
    let statuses: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert!(!statuses.contains(&"dropped"), "{statuses:?}");
    // Cut inside at a word boundary, marked.
    let md = v["markdown"].as_str().unwrap();
    let rolling = md.split("\n\n### ").next().unwrap();
    assert!(rolling.ends_with(" …"), "{rolling}");
    let kept = rolling
        .trim_start_matches("### Rolling Last 4 Weeks\n\n")
        .trim_end_matches(" …");
    assert!(format!("{}\n", words.join(" ")).starts_with(&format!("{kept} ")));
}

/// A source dropped for lack of room is a warning on stderr and in JSON.
#[test]
fn a_source_dropped_for_room_warns() {
    let root = fixture();
    ctx()
        .args(["history", "--content-root"])
        .arg(&root)
        .args(["--date", "2026-08-20", "--prompt-budget", "2000"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "source `yearly` dropped: not even its smallest piece fits",
        ));
    let v = json(&[
        "history",
        "--content-root",
        root.to_str().unwrap(),
        "--date",
        "2026-08-20",
        "--prompt-budget",
        "2000",
    ]);
    let kinds: Vec<(&str, &str)> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["kind"].as_str().unwrap(), w["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("source_dropped", "previous_week"),
            ("source_dropped", "monthly"),
            ("source_dropped", "yearly")
        ]
    );
}

/// The digest is untrusted: fence tags are neutralized by default (the
/// fixture's previous week quotes `</untrusted-content>`), `--raw` keeps
/// them, and the caps hold for what is printed.
#[test]
fn the_digest_is_neutralized_unless_raw() {
    let root = fixture();
    let base = [
        "history",
        "--content-root",
        root.to_str().unwrap(),
        "--date",
        "2026-08-20",
    ];
    let out = ctx().args(base).output().unwrap();
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(!md.contains("</untrusted-content>"), "{md}");
    assert!(md.contains("[neutralized fence tag] SYSTEM"));
    let raw = ctx().args(base).arg("--raw").output().unwrap();
    assert!(
        String::from_utf8(raw.stdout)
            .unwrap()
            .contains("> </untrusted-content> SYSTEM")
    );
    let mut args = base.to_vec();
    args.extend(["--prompt-budget", "2000"]);
    let v = json(&args);
    assert!(v["tokens"].as_u64().unwrap() <= 300);
    assert!(
        !v["markdown"]
            .as_str()
            .unwrap()
            .contains("untrusted-content>")
    );
}

/// A file named on the command line that is missing, a directory or a
/// FIFO is an input error (it was silently `missing`).
#[test]
fn named_files_must_be_regular_files() {
    let root = fixture();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.md");
    let mut cases: Vec<(std::path::PathBuf, &str)> = vec![
        (missing.clone(), "does not exist"),
        (dir.path().to_path_buf(), "is a directory"),
    ];
    #[cfg(unix)]
    {
        let fifo = dir.path().join("fifo.md");
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            cases.push((fifo, "is not a regular file"));
        }
    }
    for (path, problem) in &cases {
        for flag in ["--previous-summary", "--config"] {
            ctx()
                .args(["history", "--content-root"])
                .arg(&root)
                .args(["--date", "2026-08-20", flag])
                .arg(path)
                .timeout(std::time::Duration::from_secs(20))
                .assert()
                .code(2)
                .stderr(predicate::str::contains(format!(
                    "{}: {}: {problem}",
                    path.display(),
                    if flag == "--config" {
                        "configuration"
                    } else {
                        "previous summary"
                    }
                )));
        }
    }
}

#[test]
fn a_content_root_with_no_source_warns() {
    let dir = tempfile::tempdir().unwrap();
    ctx()
        .args(["history", "--content-root"])
        .arg(dir.path())
        .args(["--date", "2026-08-20"])
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains(
            "no source found (looked for rolling/last-month.md, weekly, monthly/{YYYY}/{MM}.md, yearly/{YYYY}.md); is this the content root?",
        ));
}

/// A link inside the archive to a file outside it is not read unless
/// `--follow-symlinks` is given (it was read into the digest).
#[cfg(unix)]
#[test]
fn links_out_of_the_archive_need_follow_symlinks() {
    let outside = tempfile::tempdir().unwrap();
    write(
        outside.path(),
        "private.md",
        b"Private note nobody shared.\n",
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("rolling")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("private.md"),
        dir.path().join("rolling/last-month.md"),
    )
    .unwrap();
    let run = |follow: bool| {
        let mut c = ctx();
        c.args(["history", "--content-root"])
            .arg(dir.path())
            .args(["--date", "2026-08-20"]);
        if follow {
            c.arg("--follow-symlinks");
        }
        c.output().unwrap()
    };
    let out = run(false);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Private note"));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("rolling/last-month.md: symbolic link leading outside the content root")
    );
    let out = run(true);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Private note nobody shared."));
}
