//! The report in a real browser: headless Chromium loads the HTML from a
//! file, runs it, and prints the DOM after scripts ran (`--dump-dom`); its
//! console goes to stderr (`--enable-logging=stderr --v=0`).
//!
//! Install the browser with `scripts/install-chromium.sh` (Debian's
//! `chromium` package). Without one, each test says so and skips, except
//! when `CI` is set: then it fails, so CI can never pass without having
//! looked. `CTX_CHROMIUM=/path/to/chrome` picks a browser explicitly.
//! The README's screenshot (docs/report-tetris.png) is of a real stored
//! run, made by scripts/report-screenshot.sh, not of these inputs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{mapped_run, synthetic_run, tetris_run};
use ctx_report::{RunReportInput, render_html};

fn find_browser() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CTX_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The browser, or `None` after saying why the test is skipped. Panics
/// when `CI` is set: a CI run must not pass without a browser.
fn browser() -> Option<PathBuf> {
    if let Some(b) = find_browser() {
        return Some(b);
    }
    let why = "no headless Chromium on PATH (chromium, chromium-browser, google-chrome) and CTX_CHROMIUM unset; install one with scripts/install-chromium.sh";
    if std::env::var_os("CI").is_some() {
        panic!("{why}. CI is set, so this browser test fails instead of skipping.");
    }
    eprintln!("SKIPPED: {why}");
    None
}

struct Loaded {
    dom: String,
    console: Vec<String>,
}

/// Runs the browser with `args` then the page URL; kills it after 120 s.
fn run_browser(browser: &Path, profile: &Path, args: &[String], page: &Path) -> (String, String) {
    let url = format!("file://{}", page.display());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(&url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} did not finish loading {url} within 120 s",
                browser.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (out.join().unwrap(), err.join().unwrap())
}

/// Writes the report of `run` into `dir` and loads it.
fn load(browser: &Path, dir: &Path, run: &RunReportInput) -> Loaded {
    let page = dir.join("report.html");
    std::fs::write(&page, render_html(run)).unwrap();
    let args = vec![
        "--enable-logging=stderr".into(),
        "--v=0".into(),
        "--dump-dom".into(),
    ];
    let (dom, stderr) = run_browser(browser, &dir.join("profile"), &args, &page);
    assert!(
        dom.contains("</html>"),
        "no DOM dumped; browser stderr:\n{stderr}"
    );
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    Loaded { dom, console }
}

/// Takes a screenshot of the report [`load`] wrote in `dir` at the window
/// `size` (`W,H`), checks it is a PNG of some substance, and returns it.
fn screenshot(browser: &Path, dir: &Path, size: &str) -> Vec<u8> {
    let shot = dir.join("report.png");
    let (_, stderr) = run_browser(
        browser,
        &dir.join("profile"),
        &[
            format!("--screenshot={}", shot.display()),
            format!("--window-size={size}"),
            "--hide-scrollbars".into(),
        ],
        &dir.join("report.html"),
    );
    let png =
        std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}); stderr:\n{stderr}"));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    png
}

/// What every report must show after loading: our script ran, nothing was
/// logged to the console, nothing was recorded as an error or a blocked
/// script, and there is one bar per started task.
fn assert_clean(l: &Loaded, bars: usize) {
    assert!(
        l.console.is_empty(),
        "console output while loading the report:\n{}",
        l.console.join("\n")
    );
    assert!(
        l.dom.contains("data-report-script=\"ran\""),
        "the report's own script did not run (CSP hash mismatch?)"
    );
    let errors = &l.dom[l.dom.find("id=\"report-errors\"").expect("error box")..];
    assert!(
        errors.contains("<ul></ul>") && errors.contains("hidden"),
        "the page recorded errors: {}",
        &errors[..errors.len().min(2_000)]
    );
    assert_eq!(
        l.dom.matches("<rect class=\"bar ").count(),
        bars,
        "one bar per task"
    );
}

#[test]
fn tetris_report_renders_one_bar_per_task_without_errors() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = tetris_run(false);
    assert_eq!(run.tasks.len(), 9);
    let l = load(&b, dir.path(), &run);
    assert_clean(&l, 9);
    assert!(
        l.dom
            .contains("<title>ctx run 20261130T100000.000Z-7e7715a1</title>")
    );
    // Task 7's check failure and task 3's retry are marked; the critical
    // path is outlined.
    assert_eq!(l.dom.matches("class=\"mark m-check\"").count(), 1);
    assert_eq!(l.dom.matches("class=\"mark m-retry\"").count(), 1);
    assert!(l.dom.matches(" crit\"").count() >= 2);
    // The outputs' own <script> tags are text, not elements.
    assert!(l.dom.contains("&lt;script&gt;\n  // "));

    // A screenshot: a PNG of the page as a user sees it.
    screenshot(&b, dir.path(), "1280,1500");
}

#[test]
fn a_maps_items_load_grouped_under_it_with_a_screenshot() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = mapped_run();
    let l = load(&b, dir.path(), &run);
    assert_clean(&l, run.tasks.len());
    // As the browser parsed it: the three item rows of the table follow
    // the map task's row, and the item labels are indented.
    let table = &l.dom[l.dom.find("<section id=\"tasks\">").expect("the table")..];
    let scan = table.find(">scan</a>").expect("the map task's row");
    let rows: Vec<usize> = table
        .match_indices("<tr class=\"item\">")
        .map(|(at, _)| at)
        .collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(rows.iter().all(|&at| at > scan) && table[..rows[2]].contains(">scan[1]</a>"));
    assert_eq!(l.dom.matches("<text x=\"16\" ").count(), 3);
    screenshot(&b, dir.path(), "1280,900");
}

#[test]
fn hostile_task_content_executes_nothing() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let l = load(&b, dir.path(), &tetris_run(true));
    assert_clean(&l, 9);
    assert!(
        !l.dom.contains("pwned</title>"),
        "document.title was changed by task content"
    );
    assert!(
        l.dom
            .contains("<title>ctx run 20261130T100000.000Z-0badc0de&lt;/script&gt;")
    );
    assert!(
        !l.dom.contains("data-pwned=\"1\""),
        "an injected handler ran"
    );
    // No element came from content: no <img>, no javascript: link, no
    // <style> beyond ours, no second <script>.
    assert!(!l.dom.contains("<img"));
    assert!(!l.dom.contains("<a href=\"javascript:"));
    assert!(
        l.dom
            .contains("&lt;a href=\"javascript:document.title='pwned'\"&gt;click me")
    );
    assert_eq!(l.dom.matches("<script>").count(), 1);
    assert_eq!(l.dom.matches("<style>").count(), 1);
    // ... and the payloads are there, as text.
    assert!(
        l.dom
            .contains("&lt;img src=x onerror=\"document.title='pwned'\"&gt;")
    );
    assert!(
        l.dom
            .contains("&lt;/script&gt;&lt;script&gt;document.title='pwned'&lt;/script&gt;")
    );
}

#[test]
fn a_run_in_progress_renders_as_in_progress() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut run = tetris_run(false);
    run.status = ctx_report::RunStatus::Running;
    run.ended_at = None;
    let cut = run.tasks[6].started_at.unwrap().unix_ms() + 2_000;
    run.as_of = Some(ctx_report::Timestamp::from_unix_ms(cut));
    for t in &mut run.tasks {
        if t.started_at.unwrap().unix_ms() >= cut {
            *t = ctx_report::TaskReport {
                dependencies: t.dependencies.clone(),
                description: t.description.clone(),
                ..ctx_report::TaskReport::new(t.id.clone(), ctx_report::TaskState::Pending)
            };
        } else if t.ended_at.unwrap().unix_ms() > cut {
            t.status = ctx_report::TaskState::InProgress;
            t.ended_at = None;
            t.output.clear();
            t.attempts
                .retain(|a| a.ended_at.is_some_and(|e| e.unix_ms() <= cut));
        }
    }
    let started = run.tasks.iter().filter(|t| t.started_at.is_some()).count();
    let l = load(&b, dir.path(), &run);
    assert_clean(&l, started);
    assert!(l.dom.contains("This run is still in progress"));
    assert!(l.dom.contains("class=\"bar st-in_progress"));
    assert!(l.dom.contains("class=\"now\""));
}

#[test]
fn a_2000_task_report_loads_with_one_bar_per_task() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let l = load(&b, dir.path(), &synthetic_run(2_000, 7));
    assert_clean(&l, 2_000);
    assert_eq!(l.dom.matches("<details id=\"task-").count(), 2_000);
}
