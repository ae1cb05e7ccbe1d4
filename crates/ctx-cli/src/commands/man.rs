//! `ctx man --out DIR` (not in `--help` nor in completion scripts): man pages for `ctx`, rendered from the
//! clap definition that parses the command line by clap_mangen.
//!
//! One page for `ctx` itself (`ctx.1`) and one per visible subcommand,
//! nested ones included (`ctx-plan-check.1`, `ctx-runs-list.1`), so `man
//! ctx-run` shows every flag of `ctx run`. Generated, never written by
//! hand: a page cannot describe a flag the parser does not have. Each page
//! ends with an EXIT STATUS section (before VERSION) from
//! [`crate::exit_codes`]: the codes live once, in exit.rs.
//!
//! Why a hidden subcommand of the binary rather than a library call from
//! xtask: `cargo xtask man` used to link ctx-cli, so every `cargo xtask`
//! compiled ctx-cli's whole dependency tree a second time, with features
//! unified with xtask's own dependencies (issue 26, docs/performance.md,
//! "The first hour"). Now xtask builds the same `ctx` the README's main
//! job builds and asks it for the pages. It is not a subcommand of the
//! `Cli` parser but dispatched before it (src/lib.rs `main`) with a parser
//! of its own: the pages are for packagers and `cargo xtask man`, not a
//! command of the tour, and clap_complete's zsh script would offer even a
//! hidden subcommand.

use std::path::{Path, PathBuf};

use crate::exit::{CliError, CliResult, Exit};

/// The first argument that selects this command.
pub const NAME: &str = "man";

/// Write the man pages of ctx and of every subcommand to a directory.
#[derive(Debug, clap::Parser)]
#[command(name = "ctx man")]
pub struct Args {
    /// The directory to write the pages to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Parses the process's arguments after `ctx man` (a usage error exits 2,
/// as clap's always do) and writes the pages of `command` (the whole `ctx`
/// definition, passed in by main) under `--out`, saying how many, and
/// where, on stderr.
pub fn run(command: clap::Command) -> CliResult {
    // The program name clap shows in usage: `ctx man`, not `man`.
    let argv = std::iter::once("ctx man".into()).chain(std::env::args_os().skip(2));
    let args = <Args as clap::Parser>::parse_from(argv);
    let pages = write_pages(command, &args.out)
        .map_err(|e| CliError::with(Exit::OutWrite, format!("{}: {e}", args.out.display())))?;
    eprintln!("{} man page(s) in {}", pages.len(), args.out.display());
    Ok(Exit::Ok)
}

/// Writes the page of `command` and of every visible subcommand under
/// `out` (created if missing) and returns the paths of the pages in `out`,
/// sorted.
pub fn write_pages(command: clap::Command, out: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out)?;
    let mut command = command.disable_help_subcommand(true);
    command.build();
    write_tree(command, out, &exit_status_section())?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(out)?
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
    for (code, meaning) in crate::exit_codes() {
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

    /// `man` is offered by no completion script: zsh's lists even hidden
    /// subcommands, which is why it is not one (see the module comment).
    #[test]
    fn no_completion_script_offers_man() {
        for shell in [clap_complete::Shell::Zsh, clap_complete::Shell::Bash] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut crate::command(), "ctx", &mut script);
            let script = String::from_utf8(script).expect("UTF-8");
            assert!(script.contains("completions"), "{shell}: no subcommands");
            assert!(
                !script.contains("'man:") && !script.contains(" man "),
                "{shell} offers `man`"
            );
        }
    }

    #[test]
    fn one_page_per_subcommand_naming_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pages = write_pages(crate::command(), dir.path()).expect("write pages");
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
        for hidden in ["help", "ctx-man.1"] {
            assert!(
                !names.iter().any(|n| n.contains(hidden)),
                "a page for `{hidden}`: {names:?}"
            );
        }
        let top = std::fs::read_to_string(dir.path().join("ctx.1")).expect("read ctx.1");
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
            "spend",
            "completions",
        ] {
            assert!(top.contains(sub), "ctx.1 does not name `{sub}`");
        }
        let run = std::fs::read_to_string(dir.path().join("ctx-run.1")).expect("read ctx-run.1");
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
            for (code, _) in crate::exit_codes() {
                assert!(
                    text[status..].contains(&format!("\\fB{code}\\fR")),
                    "{}: exit code {code} missing",
                    page.display()
                );
            }
        }
        let again = tempfile::tempdir().expect("temp dir");
        write_pages(crate::command(), again.path()).expect("write again");
        assert_eq!(
            std::fs::read(dir.path().join("ctx-run.1")).ok(),
            std::fs::read(again.path().join("ctx-run.1")).ok(),
            "pages differ between runs"
        );
    }

    /// README.md's exit-code table lists exactly the codes exit.rs has, so
    /// the man pages and the README cannot drift apart.
    #[test]
    fn the_readme_table_has_every_exit_code() {
        let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
        let readme = std::fs::read_to_string(readme_path).expect("README");
        let table = readme
            .split("## Exit codes")
            .nth(1)
            .expect("README has an Exit codes section");
        let table = table.split("\n## ").next().unwrap_or(table);
        let in_readme: Vec<u8> = table
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split(" |").next()?.parse().ok())
            .collect();
        let in_code: Vec<u8> = crate::exit_codes().iter().map(|(c, _)| *c).collect();
        assert_eq!(
            in_readme, in_code,
            "README's exit codes differ from exit.rs"
        );
    }
}
