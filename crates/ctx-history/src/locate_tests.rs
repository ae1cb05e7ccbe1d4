//! Tests of source location: dates in names and front matter, periods,
//! the previous report, the links and sizes the scope allows.

use super::*;
use crate::markdown::DEFAULT_MAX_FILE_BYTES;

#[test]
fn names_give_dates() {
    let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    assert_eq!(date_in_name("2026-08-14-weekly"), Some(d("2026-08-14")));
    assert_eq!(date_in_name("x12026-08-14"), None);
    assert_eq!(iso_week_in_name("2026-W33", None), Some(d("2026-08-16")));
    assert_eq!(iso_week_in_name("W33", Some("2026")), Some(d("2026-08-16")));
    assert_eq!(iso_week_in_name("W33", Some("weekly")), None);
    assert_eq!(iso_week_in_name("notes", None), None);
}

#[test]
fn templates_are_checked() {
    assert!(check_template("{root}/monthly/{YYYY}/{MM}.md").is_ok());
    assert!(
        check_template("monthly/{YY}.md")
            .unwrap_err()
            .contains("{YY}")
    );
    let mut caps = [None; 3];
    assert!(match_component("{YYYY}-{MM}.md", "2026-08.md", &mut caps));
    assert_eq!(caps, [Some(2026), Some(8), None]);
    assert!(!match_component("{MM}.md", "8.md", &mut [None; 3]));
}

#[test]
fn report_dates_from_the_head_or_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
    // Long body: the head is enough.
    let long = dir.path().join("2020-01-01-a.md");
    std::fs::write(
        &long,
        format!("---\ndate: 2026-08-14\n---\n{}", "é word. ".repeat(3000)),
    )
    .unwrap();
    assert_eq!(
        report_date(&long, DEFAULT_MAX_FILE_BYTES).unwrap(),
        d("2026-08-14")
    );
    // Front matter longer than the head: the whole file is read.
    let big = dir.path().join("2020-01-02-b.md");
    std::fs::write(
        &big,
        format!(
            "---\nnotes: \"{}\"\ndate: 2026-08-13\n---\nbody\n",
            "x".repeat(20_000)
        ),
    )
    .unwrap();
    assert_eq!(
        report_date(&big, DEFAULT_MAX_FILE_BYTES).unwrap(),
        d("2026-08-13")
    );
    // No front matter: the name decides.
    let plain = dir.path().join("2026-08-12-c.md");
    std::fs::write(&plain, "body ".repeat(5000)).unwrap();
    assert_eq!(
        report_date(&plain, DEFAULT_MAX_FILE_BYTES).unwrap(),
        d("2026-08-12")
    );
    // Unclosed front matter in a long file is still an error.
    let bad = dir.path().join("2026-08-11-d.md");
    std::fs::write(&bad, format!("---\ntitle: x\n{}", "line\n".repeat(5000))).unwrap();
    assert!(
        report_date(&bad, DEFAULT_MAX_FILE_BYTES)
            .unwrap_err()
            .to_string()
            .contains("never closed")
    );
}

fn weekly_source() -> SourceConfig {
    let config = crate::HistoryConfig::default();
    config
        .sources
        .iter()
        .find(|s| s.key == "previous_week")
        .cloned()
        .unwrap()
}

fn put(root: &Path, rel: &str, text: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn find(root: &Path, date: &str) -> (Result<Located, HistoryError>, Vec<String>) {
    find_in(root, date, false)
}

fn find_in(root: &Path, date: &str, follow: bool) -> (Result<Located, HistoryError>, Vec<String>) {
    let mut warnings = Vec::new();
    let found = locate(
        &weekly_source(),
        root,
        &Scope::new(root, follow).unwrap(),
        parse_date(date).unwrap(),
        None,
        &mut warnings,
    );
    (found, warnings.iter().map(ToString::to_string).collect())
}

#[cfg(unix)]
#[test]
fn symlinked_directories_are_not_followed() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    put(root, "weekly/2026-08-07.md", b"## Blind Spots\na\n");
    put(root, "weekly/2026/2026-08-14.md", b"## Blind Spots\nb\n");
    put(root, "elsewhere/r.md", b"---\ndate: 2026-08-15\n---\nc\n");
    // Two loops: before the fix every report was listed once per
    // level of `archive/archive/...` and `up/.../archive/...`, until
    // the path grew too long.
    symlink("..", root.join("weekly/archive")).unwrap();
    symlink("..", root.join("weekly/2026/up")).unwrap();
    symlink(".", root.join("weekly/2026/here")).unwrap();
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    let scope = Scope::new(root, false).unwrap();
    collect_markdown(&root.join("weekly"), &scope, &mut files, &mut warnings).unwrap();
    let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        files,
        [
            root.join("weekly/2026/2026-08-14.md"),
            root.join("weekly/2026-08-07.md"),
        ]
    );
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].ends_with("weekly/2026/here: symbolic link to a directory; not followed"));
    assert!(warnings[1].ends_with("weekly/2026/up: symbolic link to a directory; not followed"));
    assert!(warnings[2].ends_with("weekly/archive: symbolic link to a directory; not followed"));
    let (found, _) = find(root, "2026-08-20");
    assert_eq!(
        found.unwrap(),
        Located::Found(root.join("weekly/2026/2026-08-14.md"))
    );

    // A link to a file is read like the file (dated by its target's
    // front matter); a dangling link is skipped with a warning.
    symlink("../elsewhere/r.md", root.join("weekly/latest.md")).unwrap();
    symlink("../nowhere.md", root.join("weekly/gone.md")).unwrap();
    let (found, warnings) = find(root, "2026-08-20");
    assert_eq!(
        found.unwrap(),
        Located::Found(root.join("weekly/latest.md"))
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.ends_with("weekly/gone.md: symbolic link to nothing readable; skipped")),
        "{warnings:?}"
    );
}

#[cfg(unix)]
#[test]
fn links_leading_outside_the_root_are_not_followed_unless_asked() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    put(
        outside.path(),
        "secret.md",
        b"---\ndate: 2026-08-19\n---\nkey\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    put(root, "weekly/2026-08-07.md", b"## Blind Spots\nolder\n");
    symlink(
        outside.path().join("secret.md"),
        root.join("weekly/2026-08-18.md"),
    )
    .unwrap();
    // Before the fix the link was chosen (it is the latest) and read.
    let (found, warnings) = find_in(root, "2026-08-20", false);
    assert_eq!(
        found.unwrap(),
        Located::Found(root.join("weekly/2026-08-07.md"))
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .contains("weekly/2026-08-18.md: symbolic link leading outside the content root")
    );
    let (found, warnings) = find_in(root, "2026-08-20", true);
    assert_eq!(
        found.unwrap(),
        Located::Found(root.join("weekly/2026-08-18.md"))
    );
    assert!(warnings.is_empty());
    // A fixed source that is such a link, and a linked directory.
    let rolling = crate::HistoryConfig::default().sources[0].clone();
    std::fs::create_dir_all(root.join("rolling")).unwrap();
    symlink(
        outside.path().join("secret.md"),
        root.join("rolling/last-month.md"),
    )
    .unwrap();
    let mut w = Vec::new();
    let scope = Scope::new(root, false).unwrap();
    let date = parse_date("2026-08-20").unwrap();
    assert_eq!(
        locate(&rolling, root, &scope, date, None, &mut w).unwrap(),
        Located::Outside(root.join("rolling/last-month.md"))
    );
    assert_eq!(w.len(), 1);
    std::fs::remove_dir_all(root.join("weekly")).unwrap();
    symlink(outside.path(), root.join("weekly")).unwrap();
    let (found, warnings) = find_in(root, "2026-08-20", false);
    assert_eq!(found.unwrap(), Located::Outside(root.join("weekly")));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

#[test]
fn a_named_previous_summary_must_be_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let scope = Scope::new(root, false).unwrap();
    let date = parse_date("2026-08-20").unwrap();
    let try_with = |p: &Path| {
        locate(
            &weekly_source(),
            root,
            &scope,
            date,
            Some(p),
            &mut Vec::new(),
        )
        .map_err(|e| e.to_string())
    };
    // Before the fix both were reported `missing` and exit 0.
    let missing = root.join("nope.md");
    assert_eq!(
        try_with(&missing).unwrap_err(),
        format!("{}: previous summary: does not exist", missing.display())
    );
    assert!(
        try_with(root)
            .unwrap_err()
            .ends_with("previous summary: is a directory")
    );
    #[cfg(unix)]
    {
        let fifo = root.join("fifo.md");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(
                try_with(&fifo)
                    .unwrap_err()
                    .ends_with("is not a regular file (a FIFO, socket or device)")
            );
        }
    }
    put(root, "prev.md", b"## Blind Spots\nx\n");
    assert_eq!(
        try_with(&root.join("prev.md")).unwrap(),
        Located::Found(root.join("prev.md"))
    );
}

#[test]
fn a_broken_report_that_is_not_chosen_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    put(root, "weekly/2026-08-14.md", b"## Blind Spots\nlatest\n");
    // A markdown rule on the first line reads as unclosed front matter.
    put(root, "weekly/2019-01-01.md", b"---\nOld notes\n");
    put(
        root,
        "weekly/2019-02-01.md",
        b"---\ntitle: x\nsummary: [unclosed\n---\nbody\n",
    );
    put(root, "weekly/2019-03-01.md", b"notes\n\xff\n");
    put(root, "weekly/notes.md", b"+++\ntitle = 1\n");
    // Dated after the date: never a candidate, still only a warning.
    put(root, "weekly/2026-09-01.md", b"---\nlater\n");
    let (found, warnings) = find(root, "2026-08-20");
    assert_eq!(
        found.unwrap(),
        Located::Found(root.join("weekly/2026-08-14.md"))
    );
    let w = |i: usize| warnings.get(i).map(String::as_str).unwrap_or("");
    assert_eq!(warnings.len(), 5, "{warnings:?}");
    assert!(w(0).ends_with(
        "weekly/2019-01-01.md:1: front matter opened with `---` is never closed; not the chosen report, skipped"
    ), "{}", w(0));
    assert!(
        w(1).contains("weekly/2019-02-01.md:3: malformed YAML front matter"),
        "{}",
        w(1)
    );
    assert!(
        w(1).ends_with("; not the chosen report, skipped"),
        "{}",
        w(1)
    );
    assert!(
        w(2).contains("weekly/2019-03-01.md: not valid UTF-8"),
        "{}",
        w(2)
    );
    assert!(w(2).contains("line 2"), "{}", w(2));
    assert!(w(3).ends_with(
        "weekly/2026-09-01.md:1: front matter opened with `---` is never closed; not the chosen report, skipped"
    ), "{}", w(3));
    assert!(w(4).ends_with(
        "weekly/notes.md:1: front matter opened with `+++` is never closed; no date in its name, skipped"
    ), "{}", w(4));
}

#[test]
fn a_broken_report_that_is_chosen_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    put(root, "weekly/2026-08-07.md", b"## Blind Spots\nolder\n");
    // Dated by its name, it is the latest: its error, not the older
    // report, is the answer.
    put(root, "weekly/2026-08-14.md", b"---\nOld notes\n");
    let (found, _) = find(root, "2026-08-20");
    assert_eq!(
        found.unwrap_err().to_string(),
        format!(
            "{}:1: front matter opened with `---` is never closed",
            root.join("weekly/2026-08-14.md").display()
        )
    );
    // Closed but malformed: an error too, whether or not the source
    // reads a front-matter field.
    put(root, "weekly/2026-08-14.md", b"---\ndate: [\n---\nbody\n");
    let (found, _) = find(root, "2026-08-20");
    let e = found.unwrap_err().to_string();
    assert!(
        e.contains("2026-08-14.md:2: malformed YAML front matter"),
        "{e}"
    );
    // For an earlier date the older report is chosen and the broken
    // one only warned about.
    let (found, warnings) = find(root, "2026-08-10");
    assert_eq!(
        found.unwrap(),
        Located::Found(root.join("weekly/2026-08-07.md"))
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

#[test]
fn dates_parse() {
    assert_eq!(parse_date("2026-08-20").unwrap().to_string(), "2026-08-20");
    assert_eq!(
        parse_date("2026-08-20T10:00:00Z").unwrap().to_string(),
        "2026-08-20"
    );
    assert_eq!(
        parse_date("2026-08-20T10:00").unwrap().to_string(),
        "2026-08-20"
    );
    let d = |s: &str| leading_date(s).map(|d| d.to_string());
    assert_eq!(d("07-25-2023").as_deref(), Some("2023-07-25"));
    assert_eq!(d("25/07/2023").as_deref(), Some("2023-07-25"));
    assert_eq!(d("2026-08-14T10:00:00Z").as_deref(), Some("2026-08-14"));
    assert_eq!(d("soon"), None);
    let e = parse_date("2026-13-01").unwrap_err();
    assert!(e.to_string().starts_with("date: `2026-13-01`"));
}
