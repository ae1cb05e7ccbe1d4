//! `cargo xtask tour [--base-url URL]`: every command block of the
//! README's tour ("## A tour", up to "## Exit codes"), run in order, in a
//! scratch copy of the checkout, each command checked. A README that
//! drifts from the code (a renamed flag, a file that moved, a command that
//! now fails) fails `cargo xtask test`.
//!
//! How a block is run: its logical lines (`\` continuations joined) become
//! one `sh` script, run from `target/tour/` (a copy of `fixtures/` and
//! `scripts/`, plus the `plan.yaml` the tour's examples name, a copy of
//! the Tetris plan, and a LiteLLM-format `model_prices_and_context_window.json`).
//! `ctx` on PATH is the debug build; `ollama` on PATH is a stand-in that
//! answers every prompt, so `--command 'ollama run llama3.2'` runs as
//! written. The placeholders `RUN` and `RUN_ID` become the newest run of
//! the store in use (`ctx runs list`). Each command's exit code is checked:
//! 0, or, for a command that calls a model, 0 or 1 (a task failing its
//! checks on a mock answer is the model's outcome, not the README's
//! drift; a usage error, 2, is).
//!
//! Blocks that call a model (`--engine openai`) run only with `--base-url`
//! (the LiteLLM proxy `cargo xtask e2e` starts, which serves `gpt-*`,
//! `mock-*` and `llama*` with mock answers): the tour's `localhost` URLs
//! and `$OPENAI_BASE_URL` point there. The PostgreSQL block runs
//! `scripts/postgres.sh` as written (a server of the scratch copy's own,
//! stopped by the block's last line); with `--no-postgres` it is skipped.
//! What ran and what was skipped is printed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// One fenced `sh` block of the tour.
#[derive(Debug, PartialEq)]
pub struct Block {
    /// The README line its fence opens on (1-based).
    pub line: usize,
    /// Its commands, continuations joined, comments and blank lines left out.
    pub commands: Vec<String>,
}

impl Block {
    fn calls_a_model(&self) -> bool {
        self.commands
            .iter()
            .any(|c| c.contains("--engine openai") || c.contains("OPENAI_API_KEY="))
    }

    fn uses_postgres(&self) -> bool {
        self.commands.iter().any(|c| c.contains("postgres.sh"))
    }
}

/// What to run.
pub struct Options {
    /// The OpenAI-compatible server model blocks run against; `None`
    /// skips them.
    pub base_url: Option<String>,
    /// Run the PostgreSQL block.
    pub postgres: bool,
    /// Run only the blocks that call a model (`cargo xtask e2e` does, with
    /// its proxy, after `cargo xtask test` ran the others).
    pub only_models: bool,
}

/// `cargo xtask tour [--base-url URL] [--no-postgres]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut options = Options {
        base_url: None,
        postgres: true,
        only_models: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--base-url" => options.base_url = it.next().cloned(),
            "--no-postgres" => options.postgres = false,
            _ => return Err("usage: cargo xtask tour [--base-url URL] [--no-postgres]".into()),
        }
    }
    let root = crate::root();
    let ctx = crate::build_ctx(&root)?;
    run_tour(&root, &ctx, &options)
}

/// Runs the tour's blocks with `ctx`, as [`Options`] say.
pub fn run_tour(root: &Path, ctx: &Path, options: &Options) -> Result<(), String> {
    let started = Instant::now();
    let readme = read(&root.join("README.md"))?;
    let blocks = tour_blocks(&readme)?;
    let scratch = scratch_copy(root, ctx)?;
    let (mut ran, mut skipped) = (0, Vec::new());
    for block in &blocks {
        let model = block.calls_a_model();
        if options.only_models && !model {
            continue;
        }
        if model && options.base_url.is_none() {
            skipped.push(format!(
                "README.md:{} (calls a model; run with --base-url)",
                block.line
            ));
            continue;
        }
        if block.uses_postgres() && !options.postgres {
            skipped.push(format!("README.md:{} (PostgreSQL)", block.line));
            continue;
        }
        let script = script_of(block, model);
        let script_path = scratch.join(format!("block-{}.sh", block.line));
        fs::write(&script_path, &script).map_err(|e| format!("{}: {e}", script_path.display()))?;
        eprintln!(
            "==> tour: README.md:{} ({} commands)",
            block.line,
            block.commands.len()
        );
        let mut cmd = Command::new("sh");
        cmd.arg(&script_path)
            .current_dir(&scratch)
            .env("PATH", path_with(&scratch.join("bin")))
            .env_remove("CTX_STORE")
            .env("NO_COLOR", "1");
        match &options.base_url {
            Some(url) => {
                cmd.env("OPENAI_BASE_URL", url)
                    .env("OPENAI_API_KEY", "sk-tour")
                    .env("CTX_TOUR_BASE_URL", url)
                    .env("NO_PROXY", "127.0.0.1,localhost");
            }
            None => {
                cmd.env_remove("OPENAI_BASE_URL")
                    .env_remove("OPENAI_API_KEY");
            }
        }
        let status = cmd.status().map_err(|e| format!("sh: {e}"))?;
        if !status.success() {
            return Err(format!(
                "tour: the block at README.md:{} failed ({status}); its script: {}",
                block.line,
                script_path.display()
            ));
        }
        ran += 1;
    }
    for s in &skipped {
        eprintln!("tour: skipped {s}");
    }
    eprintln!(
        "==> tour: {ran} block(s) of README.md ran as written in {:.0} s, {} skipped",
        started.elapsed().as_secs_f64(),
        skipped.len()
    );
    Ok(())
}

/// The fenced `sh` blocks between "## A tour" and the next `## ` heading.
pub fn tour_blocks(readme: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut in_tour = false;
    let mut open: Option<(usize, Vec<String>)> = None;
    let mut pending = String::new();
    for (i, line) in readme.lines().enumerate() {
        if open.is_none() && line.starts_with("## ") {
            in_tour = line == "## A tour";
            continue;
        }
        if !in_tour {
            continue;
        }
        match &mut open {
            None if line.trim() == "```sh" => open = Some((i + 1, Vec::new())),
            None => {}
            Some((start, commands)) if line.trim() == "```" => {
                if !pending.is_empty() {
                    return Err(format!(
                        "README.md:{start}: a block ends inside a `\\` continuation"
                    ));
                }
                blocks.push(Block {
                    line: *start,
                    commands: std::mem::take(commands),
                });
                open = None;
            }
            Some((_, commands)) => {
                let code = strip_comment(line);
                if let Some(head) = code.trim_end().strip_suffix('\\') {
                    pending.push_str(head.trim());
                    pending.push(' ');
                    continue;
                }
                pending.push_str(code.trim());
                let command = std::mem::take(&mut pending).trim().to_string();
                if !command.is_empty() {
                    commands.push(command);
                }
            }
        }
    }
    if blocks.is_empty() {
        return Err("README.md: no ```sh block under \"## A tour\"".into());
    }
    Ok(blocks)
}

/// `line` without its shell comment: a `#` outside quotes that starts a
/// word.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (at, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return &line[..at],
            _ => {}
        }
        prev = c;
    }
    line
}

/// The block as a script: each command echoed, run, and its exit code
/// checked (0; 0 or 1 in a block that calls a model). Background
/// commands (`&`) are waited for by the block's own `wait` or at its end.
fn script_of(block: &Block, model: bool) -> String {
    let highest_ok = if model { 1 } else { 0 };
    let mut s = String::from(
        "# Generated by `cargo xtask tour` from README.md; run from target/tour.\n\
         last_run() { ctx runs list | awk 'NR > 1 { id = $1 } END { print id }'; }\n\
         fail() { echo \"tour: README.md:$1: exited $2: $3\" >&2; exit 1; }\n",
    );
    // `a; b` is two commands, each checked (the shell would report only
    // the last one's status).
    let commands = block.commands.iter().flat_map(|c| split_commands(c));
    for command in commands {
        let command = placeholders(&command);
        s.push_str(&format!(
            "echo '+ {}' >&2\n",
            command.replace('\'', "'\\''")
        ));
        if command.ends_with('&') {
            s.push_str(&command);
            s.push('\n');
            continue;
        }
        s.push_str(&command);
        s.push_str(&format!(
            "\nrc=$?; [ \"$rc\" -le {highest_ok} ] || fail {} \"$rc\" '{}'\n",
            block.line,
            command.replace('\'', "'\\''")
        ));
    }
    s.push_str("wait\n");
    s
}

/// `line` split at each `;` outside quotes, parts trimmed, empty ones
/// dropped.
fn split_commands(line: &str) -> Vec<String> {
    let (mut single, mut double) = (false, false);
    let mut parts = vec![String::new()];
    for c in line.chars() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            ';' if !single && !double => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The tour's placeholders made concrete: `RUN` and `RUN_ID` are the
/// newest run, and a local server's URL is the one the tour runs against.
fn placeholders(command: &str) -> String {
    let words: Vec<String> = command
        .split(' ')
        .map(|w| match w {
            "RUN" | "RUN_ID" => "\"$(last_run)\"".to_string(),
            "http://localhost:11434/v1" | "http://localhost:8000/v1" => {
                "\"$CTX_TOUR_BASE_URL\"".to_string()
            }
            w => w.to_string(),
        })
        .collect();
    words.join(" ")
}

/// `target/tour`, fresh: `fixtures/` and `scripts/` copied, `plan.yaml`
/// (the Tetris plan), a prices file, and `bin/` with `ctx` and a stand-in
/// `ollama`.
fn scratch_copy(root: &Path, ctx: &Path) -> Result<PathBuf, String> {
    let scratch = crate::target_dir(root).join("tour");
    let _ = fs::remove_dir_all(&scratch);
    let bin = scratch.join("bin");
    fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    for dir in ["fixtures", "scripts"] {
        copy_tree(&root.join(dir), &scratch.join(dir))?;
    }
    let write = |path: PathBuf, text: &str| {
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    fs::copy(
        root.join("fixtures/tetris/plan.yaml"),
        scratch.join("plan.yaml"),
    )
    .map_err(|e| format!("plan.yaml: {e}"))?;
    write(
        scratch.join("model_prices_and_context_window.json"),
        "{\"gpt-4o-mini\": {\"input_cost_per_token\": 1.5e-7, \"output_cost_per_token\": 6e-7}}\n",
    )?;
    std::os::unix::fs::symlink(ctx, bin.join("ctx")).map_err(|e| format!("bin/ctx: {e}"))?;
    let ollama = bin.join("ollama");
    write(
        ollama.clone(),
        "#!/bin/sh\n# A stand-in for `ollama run MODEL`: reads the prompt, answers.\ncat >/dev/null\necho \"a local model's answer\"\n",
    )?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&ollama, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", ollama.display()))?;
    Ok(scratch)
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(|e| e.to_string())?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        }
    }
    Ok(())
}

fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut paths = vec![bin.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_join_continuations_and_drop_comments() {
        let readme = "# x\n## Set up\n```sh\nnot this\n```\n## A tour\ntext\n```sh\n\
                      ctx a  # one\n# only a comment\nctx b \\\n  --c 'd # e'\n```\n## Exit codes\n```sh\nnor this\n```\n";
        let blocks = tour_blocks(readme).unwrap();
        assert_eq!(
            blocks,
            [Block {
                line: 8,
                commands: vec!["ctx a".into(), "ctx b --c 'd # e'".into()],
            }]
        );
    }

    #[test]
    fn the_readme_has_a_tour_with_a_model_block_and_a_postgres_block() {
        let readme = read(&crate::root().join("README.md")).unwrap();
        let blocks = tour_blocks(&readme).unwrap();
        assert!(blocks.iter().any(Block::calls_a_model));
        assert!(blocks.iter().any(Block::uses_postgres));
        assert!(
            blocks
                .iter()
                .any(|b| !b.calls_a_model() && !b.uses_postgres())
        );
    }

    #[test]
    fn placeholders_name_the_newest_run_and_the_tour_server() {
        assert_eq!(
            placeholders("ctx runs show RUN --task 9"),
            "ctx runs show \"$(last_run)\" --task 9"
        );
        assert_eq!(
            placeholders("ctx run p --base-url http://localhost:8000/v1 --stream"),
            "ctx run p --base-url \"$CTX_TOUR_BASE_URL\" --stream"
        );
        // `RUNS` or `RUN_IDS` are not placeholders.
        assert_eq!(placeholders("echo RUNS"), "echo RUNS");
    }

    #[test]
    fn each_command_of_a_line_is_checked_on_its_own() {
        assert_eq!(
            split_commands("ctx runs list; ctx runs show RUN; echo 'a; b'"),
            ["ctx runs list", "ctx runs show RUN", "echo 'a; b'"]
        );
        let block = Block {
            line: 3,
            commands: vec!["ctx a; ctx b".into()],
        };
        let script = script_of(&block, false);
        assert_eq!(script.matches("rc=$?").count(), 2, "{script}");
    }
}
