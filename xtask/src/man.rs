//! `cargo xtask man [--out DIR]`: man pages for `ctx`, generated from its
//! clap definition (`ctx_cli::command()`) by clap_mangen.
//!
//! One page for `ctx` itself (`ctx.1`) and one per subcommand, nested ones
//! included (`ctx-plan-check.1`, `ctx-runs-list.1`), so `man ctx-run`
//! shows every flag of `ctx run`. Generated, never written by hand: the
//! pages cannot describe a flag the parser does not have. The default
//! directory is `target/man`.

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
    clap_mangen::generate_to(command, out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(out)
        .map_err(|e| format!("{}: {e}", out.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort();
    Ok(pages)
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
}
