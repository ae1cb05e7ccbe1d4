//! `cargo xtask man [--out DIR]`: man pages for `ctx`, generated from its
//! clap definition (`ctx_cli::command()`) by clap_mangen.
//!
//! One page for `ctx` itself (`ctx.1`) and one per subcommand, nested ones
//! included (`ctx-plan-check.1`, `ctx-runs-list.1`), so `man ctx-run`
//! shows every flag of `ctx run`. Generated, never written by hand: the
//! pages cannot describe a flag the parser does not have. The default
//! directory is `target/man`.
//!
//! Each page ends with an EXIT STATUS section (before VERSION), from
//! `ctx_cli::exit_codes()`: the codes live once, in ctx-cli's exit.rs.

use std::path::{Path, PathBuf};

/// Parses `[--out DIR]` and writes the pages.
pub fn run(args: &[String]) -> Result<(), String> {
    let out = match args {
        [] => crate::root().join("target").join("man"),
        [flag, dir] if flag == "--out" => PathBuf::from(dir),
        _ => return Err("usage: cargo xtask man [--out DIR]".into()),
    };
    let pages = write_pages(ctx_cli::command(), &out)?;
    eprintln!("{} man page(s) in {}", pages.len(), out.display());
    Ok(())
}

/// Writes the page of `command` and of every subcommand under `out`
/// (created if missing) and returns their paths, sorted.
pub fn write_pages(command: clap::Command, out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let status = exit_status_section();
    write_tree(command, out, &status).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(out)
        .map_err(|e| format!("{}: {e}", out.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort();
    Ok(pages)
}

/// Writes the page of `command` and of each visible subcommand, as
/// `clap_mangen::generate_to` does, with `status` inserted before the
/// VERSION section (or at the end).
fn write_tree(command: clap::Command, out: &Path, status: &str) -> std::io::Result<()> {
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub.clone(), out, status)?;
    }
    let man = clap_mangen::Man::new(command);
    let mut page = Vec::new();
    man.render(&mut page)?;
    let page = String::from_utf8_lossy(&page);
    let page = match page.find("\n.SH VERSION") {
        Some(at) => format!("{}\n{}{}", &page[..at], status.trim_end(), &page[at..]),
        None => format!("{page}{status}"),
    };
    std::fs::write(out.join(man.get_filename()), page)
}

/// The EXIT STATUS section in roff: one tagged paragraph per code.
fn exit_status_section() -> String {
    let mut roff = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in ctx_cli::exit_codes() {
        // roff: a backslash escapes, a hyphen is `\-` (never a hyphenation
        // point), and a line must not start with `.` or `'`.
        let text = meaning.replace('\\', "\\e").replace('-', "\\-");
        roff.push_str(&format!(".TP\n\\fB{code}\\fR\n\\&{text}\n"));
    }
    roff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_page_per_subcommand_naming_them() {
        let dir = std::env::temp_dir().join(format!("ctx-xtask-man-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pages = write_pages(ctx_cli::command(), &dir).expect("write pages");
        let names: Vec<String> = pages
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(String::from))
            .collect();
        for page in [
            "ctx.1",
            "ctx-run.1",
            "ctx-plan.1",
            "ctx-plan-check.1",
            "ctx-completions.1",
        ] {
            assert!(names.contains(&page.to_string()), "no {page} in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.contains("help")),
            "a page for `help`: {names:?}"
        );
        let top = std::fs::read_to_string(dir.join("ctx.1")).expect("read ctx.1");
        assert!(
            top.starts_with(".ie \\n(.g .ds Aq") || top.contains(".TH ctx 1"),
            "not roff:\n{top}"
        );
        for sub in [
            "run",
            "plan",
            "history",
            "render",
            "lint",
            "runs",
            "completions",
        ] {
            assert!(top.contains(sub), "ctx.1 does not name `{sub}`");
        }
        let run = std::fs::read_to_string(dir.join("ctx-run.1")).expect("read ctx-run.1");
        assert!(run.contains("resume"), "ctx-run.1 lacks --resume");
        // Every page says what each exit code means, before VERSION.
        for page in &pages {
            let text = std::fs::read_to_string(page).expect("read page");
            let status = text
                .find(".SH \"EXIT STATUS\"")
                .unwrap_or_else(|| panic!("{}: no EXIT STATUS", page.display()));
            if let Some(version) = text.find(".SH VERSION") {
                assert!(
                    status < version,
                    "{}: EXIT STATUS after VERSION",
                    page.display()
                );
            }
            for (code, _) in ctx_cli::exit_codes() {
                assert!(
                    text[status..].contains(&format!("\\fB{code}\\fR")),
                    "{}: exit code {code} missing",
                    page.display()
                );
            }
        }
        let again = std::env::temp_dir().join(format!("ctx-xtask-man2-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&again);
        write_pages(ctx_cli::command(), &again).expect("write again");
        assert_eq!(
            std::fs::read(dir.join("ctx-run.1")).ok(),
            std::fs::read(again.join("ctx-run.1")).ok(),
            "pages differ between runs"
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&again);
    }

    /// README.md's exit-code table lists exactly the codes exit.rs has, so
    /// the man pages and the README cannot drift apart.
    #[test]
    fn the_readme_table_has_every_exit_code() {
        let readme = std::fs::read_to_string(crate::root().join("README.md")).expect("README");
        let table = readme
            .split("## Exit codes")
            .nth(1)
            .expect("README has an Exit codes section");
        let table = table.split("\n## ").next().unwrap_or(table);
        let in_readme: Vec<u8> = table
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split(" |").next()?.parse().ok())
            .collect();
        let in_code: Vec<u8> = ctx_cli::exit_codes().iter().map(|(c, _)| *c).collect();
        assert_eq!(
            in_readme, in_code,
            "README's exit codes differ from exit.rs"
        );
    }
}
