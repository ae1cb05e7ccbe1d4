//! The README's first example is what ctx does: its plan excerpt is the
//! fixture's text, and what it says `ctx run` prints and writes is what
//! the dry run prints and writes today. (The guide's blocks are run by
//! `cargo xtask tour`; this is the README's own.)

use ctx_test_support::{Dir, repo_root};

fn readme() -> String {
    std::fs::read_to_string(repo_root().join("README.md")).expect("read README.md")
}

/// The fenced blocks of `lang` after the line holding `after`, in order.
fn blocks_after(text: &str, after: &str, lang: &str) -> Vec<String> {
    let start = text
        .find(after)
        .unwrap_or_else(|| panic!("README.md: no `{after}`"));
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in text[start..].lines() {
        match &mut open {
            None if line == format!("```{lang}") => open = Some(String::new()),
            None => {}
            Some(_) if line == "```" => blocks.extend(open.take()),
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    blocks
}

/// Wall-clock times read as `0 ms`, whatever the machine took.
fn without_times(text: &str) -> String {
    text.lines()
        .map(|line| match line.rsplit_once("  ") {
            Some((head, time)) if time.trim_end().ends_with(" ms") => format!("{head}  0 ms"),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_readme_shows_what_the_release_note_run_prints_and_writes() {
    let readme = readme();
    let text = blocks_after(
        &readme,
        "ctx run fixtures/release-note/plan.yaml --out out/",
        "text",
    );
    assert!(
        text.len() >= 2,
        "README.md: the table and the prompt blocks"
    );
    let dir = Dir::new();
    let plan = repo_root().join("fixtures/release-note/plan.yaml");
    let out = dir.run(&[
        "run".as_ref(),
        plan.as_os_str(),
        "--out".as_ref(),
        "out".as_ref(),
        "--no-store".as_ref(),
    ]);
    let (code, stdout, stderr) = out.parts();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(without_times(&stdout).trim_end(), text[0].trim_end());
    let prompt = std::fs::read_to_string(dir.path().join("out/prompts/note.md")).expect("prompt");
    assert_eq!(prompt.trim_end(), text[1].trim_end());
}

#[test]
fn the_readme_plan_excerpt_is_the_fixtures_text() {
    let readme = readme();
    let yaml = blocks_after(&readme, "## A plan and its run", "yaml");
    let fixture = std::fs::read_to_string(repo_root().join("fixtures/release-note/plan.yaml"))
        .expect("fixture");
    // Each shown line is the fixture's, in order; `...` stands for lines
    // left out and a trailing `# comment` is the README's.
    let mut rest = fixture.as_str();
    for line in yaml[0]
        .lines()
        .filter(|l| !l.trim().is_empty() && l.trim() != "...")
    {
        let line = line.split("  #").next().unwrap_or(line).trim_end();
        let at = rest.find(line).unwrap_or_else(|| {
            panic!("README.md's plan shows `{line}`, not in the fixture (in order)")
        });
        rest = &rest[at + line.len()..];
    }
}
