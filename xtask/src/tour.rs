//! `cargo xtask tour [--base-url URL]`: every command block of the guide
//! (docs/guide.md, the tour the README links), run in order, in a
//! scratch copy of the checkout, each command checked. A guide that
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
//! checks on a mock answer is the model's outcome, not the guide's
//! drift; a usage error, 2, is). So is its output: what the guide
//! promises it prints or writes ([`CLAIMS`]), and the files it names
//! after `-o`, `--out` or `--to`. A command sent to the background (`&`)
//! is checked when the block waits for it, and a block that hangs is
//! killed after [`BLOCK_DEADLINE`] and fails.
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
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// One fenced `sh` block of the tour.
#[derive(Debug, PartialEq)]
pub struct Block {
    /// The guide's line its fence opens on (1-based).
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
    let readme = read(&root.join(GUIDE))?;
    let blocks = tour_blocks(&readme)?;
    let unmatched = unmatched_claims(&blocks);
    if !unmatched.is_empty() {
        return Err(format!(
            "xtask/src/tour.rs: claims about commands the guide no longer has (reworded? update CLAIMS): {}",
            unmatched.join(" | ")
        ));
    }
    let scratch = scratch_copy(root, ctx)?;
    let (mut ran, mut skipped) = (0, Vec::new());
    for block in &blocks {
        let model = block.calls_a_model();
        if options.only_models && !model {
            continue;
        }
        if model && options.base_url.is_none() {
            skipped.push(format!(
                "{GUIDE}:{} (calls a model; run with --base-url)",
                block.line
            ));
            continue;
        }
        if block.uses_postgres() && !options.postgres {
            skipped.push(format!("{GUIDE}:{} (PostgreSQL)", block.line));
            continue;
        }
        let script = script_of(block, model);
        let script_path = scratch.join(format!("block-{}.sh", block.line));
        fs::write(&script_path, &script).map_err(|e| format!("{}: {e}", script_path.display()))?;
        eprintln!(
            "==> tour: {GUIDE}:{} ({} commands)",
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
        let status = run_with_deadline(&mut cmd, BLOCK_DEADLINE)
            .map_err(|e| format!("tour: the block at {GUIDE}:{}: {e}", block.line))?;
        if !status.success() {
            return Err(format!(
                "tour: the block at {GUIDE}:{} failed ({status}); its script: {}",
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
        "==> tour: {ran} block(s) of {GUIDE} ran as written in {:.0} s, {} skipped",
        started.elapsed().as_secs_f64(),
        skipped.len()
    );
    Ok(())
}

/// The most one block may take. A block that hangs (a worker that never
/// finishes the run it waits on, a command reading a terminal) fails the
/// tour after this, with every process it started killed, instead of
/// hanging the test job.
const BLOCK_DEADLINE: Duration = Duration::from_secs(600);

/// Runs `cmd` in a process group of its own and waits for it; past
/// `deadline` the whole group (background commands included) is killed
/// and the block fails.
fn run_with_deadline(cmd: &mut Command, deadline: Duration) -> Result<ExitStatus, String> {
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .spawn()
        .map_err(|e| format!("sh: {e}"))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("sh: {e}"))? {
            return Ok(status);
        }
        if started.elapsed() > deadline {
            // The group's id is the shell's pid (`process_group(0)`).
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            return Err(format!(
                "still running after {} s: killed (a command that hangs)",
                deadline.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where the tour is written.
pub const GUIDE: &str = "docs/guide.md";

/// The fenced `sh` blocks of the guide, in order.
pub fn tour_blocks(guide: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, Vec<String>)> = None;
    let mut pending = String::new();
    for (i, line) in guide.lines().enumerate() {
        match &mut open {
            None if line.trim() == "```sh" => open = Some((i + 1, Vec::new())),
            None => {}
            Some((start, commands)) if line.trim() == "```" => {
                if !pending.is_empty() {
                    return Err(format!(
                        "{GUIDE}:{start}: a block ends inside a `\\` continuation"
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
        return Err(format!("{GUIDE}: no ```sh block"));
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

/// The block as a script: each command echoed, run with its output
/// captured (and then shown), its exit code checked (0; 0 or 1 in a block
/// that calls a model), the files it names after `-o`, `--out` or `--to`
/// checked to exist, and the tour's [`CLAIMS`] about it checked in its
/// output. A background command (`&`) is checked when the block waits for
/// it: at the guide's own `wait`, or at the block's end, so a `ctx run`
/// that fails behind a `&` fails the tour as one in the foreground does.
fn script_of(block: &Block, model: bool) -> String {
    let highest_ok = if model { 1 } else { 0 };
    let mut s = String::from(
        "# Generated by `cargo xtask tour` from docs/guide.md; run from target/tour.\n\
         last_run() { ctx runs list | awk 'NR > 1 { id = $1 } END { print id }'; }\n\
         fail() { echo \"tour: docs/guide.md:$1: $2\" >&2; exit 1; }\n\
         mkdir -p .tour\n",
    );
    // `a; b` is two commands, each checked (the shell would report only
    // the last one's status).
    let commands: Vec<String> = block
        .commands
        .iter()
        .flat_map(|c| split_commands(c))
        .collect();
    // Background commands not waited for yet: their checks, run after
    // `wait PID`.
    let mut pending: Vec<String> = Vec::new();
    for (i, written) in commands.iter().enumerate() {
        let quoted = shell_quote(written);
        s.push_str(&format!(
            "echo {} >&2\n",
            shell_quote(&format!("+ {written}"))
        ));
        if written == "wait" {
            s.push_str(&pending.concat());
            pending.clear();
            continue;
        }
        let out = format!(".tour/{}-{i}.out", block.line);
        let checks = checks_of(written, &out, block.line, highest_ok);
        match written.strip_suffix('&') {
            Some(background) => {
                s.push_str(&format!(
                    "{{ {}\n}} >{out} 2>&1 &\npid_{i}=$!\n",
                    placeholders(background.trim_end())
                ));
                pending.push(format!(
                    "wait \"$pid_{i}\"; rc=$?; echo '+ (waited for) '{quoted} >&2; cat {out} >&2\n{checks}"
                ));
            }
            None => s.push_str(&format!(
                "{{ {}\n}} >{out} 2>&1; rc=$?; cat {out} >&2\n{checks}",
                placeholders(written)
            )),
        }
    }
    s.push_str(&pending.concat());
    s
}

/// The checks of one command whose exit code is in `$rc` and whose
/// output is in the file `out`.
fn checks_of(written: &str, out: &str, line: usize, highest_ok: i32) -> String {
    let quoted = shell_quote(written);
    let mut s = format!("[ \"$rc\" -le {highest_ok} ] || fail {line} \"exited $rc: \"{quoted}\n");
    for path in written_paths(written) {
        s.push_str(&format!(
            "[ -e {p} ] || fail {line} {}\n",
            shell_quote(&format!("wrote no {path}: {written}")),
            p = shell_quote(&path)
        ));
    }
    for claim in CLAIMS.iter().filter(|c| c.command == written) {
        for needle in claim.output {
            s.push_str(&format!(
                "grep -qF -- {n} {out} || fail {line} {}\n",
                shell_quote(&format!("its output lacks `{needle}`: {written}")),
                n = shell_quote(needle)
            ));
        }
        for (path, needle) in claim.files {
            s.push_str(&format!(
                "grep -qF -- {n} {p} || fail {line} {}\n",
                shell_quote(&format!("{path} lacks `{needle}`: {written}")),
                n = shell_quote(needle),
                p = shell_quote(path)
            ));
        }
    }
    s
}

/// What the guide says a command prints or writes, beyond exiting as
/// expected: each line of the tour that promises something a reader would
/// look for. Every claim must name a command of the guide,
/// character for character (continuations joined, comment left out), so a
/// reworded command fails the tour until its claim follows
/// ([`unmatched_claims`]).
pub struct Claim {
    /// The command as the guide writes it.
    pub command: &'static str,
    /// Text its output (stdout and stderr) holds.
    pub output: &'static [&'static str],
    /// Files it writes, relative to the tour's folder, and text each holds.
    pub files: &'static [(&'static str, &'static str)],
}

/// The tour's claims ([`Claim`]).
pub const CLAIMS: &[Claim] = &[
    Claim {
        command: "ctx plan check fixtures/tetris/plan.yaml",
        output: &["fixtures/tetris/plan.yaml: ok (9 tasks"],
        files: &[],
    },
    Claim {
        command: "ctx plan graph fixtures/tetris/plan.yaml --format mermaid",
        output: &["flowchart", "critical path", "priority 44000 ms"],
        files: &[],
    },
    Claim {
        // "out/prompts/{id}.md, out/outputs/{id}.md, out/results.json",
        // and, as the set-up's comment says, each prompt holds
        // "[dry-run] output of task N" where a real output will go.
        command: "ctx run fixtures/tetris/plan.yaml -o out/",
        output: &["9 tasks: 9 completed"],
        files: &[
            ("out/prompts/2.md", "[dry-run] output of task 1"),
            ("out/outputs/9.md", "[dry-run]"),
            ("out/results.json", "\"task_id\""),
        ],
    },
    Claim {
        command: "ctx run fixtures/tetris/plan.yaml --format json",
        output: &["\"order\"", "\"tasks\"", "\"spent_usd\""],
        files: &[],
    },
    Claim {
        command: "ctx runs list",
        output: &["completed"],
        files: &[],
    },
    Claim {
        // The shared-store block: the run registered in the background is
        // finished by the workers started beside it (none of them exits
        // "0 committed" before it is registered), and prints its summary.
        command: "ctx run fixtures/tetris/plan.yaml --no-local &",
        output: &["9 tasks: 9 completed"],
        files: &[],
    },
    Claim {
        command: "ctx plan cost fixtures/tetris/plan.yaml",
        output: &["total", "unbounded"],
        files: &[],
    },
    Claim {
        command: "ctx prices",
        output: &["gpt-4o-mini"],
        files: &[],
    },
    Claim {
        command: "ctx lint fixtures/weekly/prompts/analyze-weekly.md",
        output: &["untrusted, fenced", "0 findings"],
        files: &[],
    },
    Claim {
        command: "ctx history --content-root fixtures/weekly/content --date 2026-08-20 --prompt-budget 8000",
        output: &["### Rolling Last 4 Weeks"],
        files: &[],
    },
    Claim {
        // The weekly plan's map over the export's `notable` list.
        command: "ctx run fixtures/weekly/plan.yaml --no-store --var RAW_JSON=@fixtures/weekly/raw/2026-W35.json --var WEEK=2026-W35 --date 2026-08-27 --out weekly-out/",
        output: &["notable[0]"],
        files: &[],
    },
];

/// The claims that name no command of `blocks` (the guide changed; the
/// claim must follow).
pub fn unmatched_claims(blocks: &[Block]) -> Vec<&'static str> {
    CLAIMS
        .iter()
        .filter(|c| {
            !blocks
                .iter()
                .flat_map(|b| b.commands.iter().flat_map(|c| split_commands(c)))
                .any(|command| command == c.command)
        })
        .map(|c| c.command)
        .collect()
}

/// The paths a command says it writes: the word after `-o`, `--out` or
/// `--to` (not a URL, not a shell expansion).
fn written_paths(command: &str) -> Vec<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "-o" | "--out" | "--to"))
        .map(|w| w[1])
        .filter(|p| !p.contains("://") && !p.contains('$') && !p.contains('"'))
        .map(str::to_string)
        .collect()
}

/// `text` as one single-quoted shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
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
        let guide = "# x\n## Set up\n```yaml\nnot this\n```\n## A tour\ntext\n```sh\n\
                      ctx a  # one\n# only a comment\nctx b \\\n  --c 'd # e'\n```\n";
        let blocks = tour_blocks(guide).unwrap();
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
        let readme = read(&crate::root().join(GUIDE)).unwrap();
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
    fn every_claim_names_a_command_of_the_readme() {
        let readme = read(&crate::root().join(GUIDE)).unwrap();
        let blocks = tour_blocks(&readme).unwrap();
        assert_eq!(unmatched_claims(&blocks), Vec::<&str>::new());
        let reworded = Block {
            line: 1,
            commands: vec!["ctx prices --all".into()],
        };
        assert!(unmatched_claims(&[reworded]).contains(&"ctx prices"));
    }

    #[test]
    fn the_paths_a_command_writes_are_the_words_after_its_output_flags() {
        assert_eq!(written_paths("ctx run p -o out/ --format json"), ["out/"]);
        assert_eq!(
            written_paths("ctx runs export RUN --format otlp --to trace.json"),
            ["trace.json"]
        );
        assert!(written_paths("ctx runs export RUN --to http://localhost:4318").is_empty());
    }

    /// A reader who pastes the tour in their checkout is left with no
    /// untracked file: each path a command writes is in `.gitignore`.
    #[test]
    fn every_file_the_tour_writes_is_ignored_by_git() {
        let root = crate::root();
        let blocks = tour_blocks(&read(&root.join(GUIDE)).unwrap()).unwrap();
        let ignored = read(&root.join(".gitignore")).unwrap();
        let ignored: Vec<&str> = ignored.lines().map(str::trim).collect();
        let written: Vec<String> = blocks
            .iter()
            .flat_map(|b| b.commands.iter())
            .flat_map(|c| written_paths(c))
            .collect();
        assert!(written.iter().any(|p| p == "out/"), "{written:?}");
        for path in &written {
            let first = path.trim_start_matches("./").split('/').next().unwrap();
            assert!(
                ignored.contains(&format!("/{first}").as_str()) || ignored.contains(&first),
                "the tour writes {path}, which .gitignore does not list (/{first})"
            );
        }
    }

    /// A command of the README or the guide that writes into a folder
    /// (`> DIR/FILE`) creates the folder first on the same line (`mkdir -p
    /// DIR && ...`), so pasting it on a fresh machine works: the README's
    /// completions line did not.
    #[test]
    fn every_redirect_of_the_readme_into_a_folder_creates_it() {
        let text = ["README.md", GUIDE]
            .map(|f| read(&crate::root().join(f)).unwrap())
            .join("\n");
        let mut in_code = false;
        let mut redirects = 0;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            let code = strip_comment(line);
            let Some(target) = (in_code)
                .then(|| code.split_once(" > "))
                .flatten()
                .and_then(|(_, rest)| rest.split_whitespace().next())
            else {
                continue;
            };
            let Some((dir, _)) = target.rsplit_once('/') else {
                continue;
            };
            redirects += 1;
            assert!(
                code.contains(&format!("mkdir -p {dir} ")),
                "`{line}` writes into {dir} without `mkdir -p {dir}` first"
            );
        }
        assert!(
            redirects > 0,
            "the completions line is a redirect into a folder"
        );
    }

    /// Runs the script of `commands` with `ctx` on PATH a stand-in that
    /// prints `ctx_says` and exits `ctx_exits`; true when the block
    /// passes.
    fn block_passes(commands: &[&str], ctx_says: &str, ctx_exits: i32) -> bool {
        use std::os::unix::fs::PermissionsExt;
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xtask-tour-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).unwrap();
        let ctx = dir.join("bin/ctx");
        fs::write(
            &ctx,
            format!(
                "#!/bin/sh
echo '{ctx_says}'
exit {ctx_exits}
"
            ),
        )
        .unwrap();
        fs::set_permissions(&ctx, fs::Permissions::from_mode(0o755)).unwrap();
        let block = Block {
            line: 7,
            commands: commands.iter().map(|c| c.to_string()).collect(),
        };
        fs::write(dir.join("block.sh"), script_of(&block, false)).unwrap();
        let status = Command::new("sh")
            .arg("block.sh")
            .current_dir(&dir)
            .env("PATH", path_with(&dir.join("bin")))
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        fs::remove_dir_all(&dir).unwrap();
        status.success()
    }

    #[test]
    fn a_background_command_that_fails_fails_the_block() {
        // What the PostgreSQL block does: `ctx run ... &`, then `wait`.
        // A bare `wait` returns 0 whatever its jobs did.
        assert!(block_passes(&["ctx a &", "ctx b", "wait"], "", 0));
        assert!(!block_passes(&["ctx a &", "wait"], "", 2));
        // Waited for at the block's end when the guide has no `wait`.
        assert!(!block_passes(&["ctx a &"], "", 1));
    }

    #[test]
    fn a_claim_the_output_does_not_keep_fails_the_block() {
        assert!(block_passes(&["ctx prices"], "gpt-4o-mini 0.15 0.6", 0));
        assert!(!block_passes(&["ctx prices"], "nothing known", 0));
        // In the background too, checked when waited for.
        let registered = "ctx run fixtures/tetris/plan.yaml --no-local &";
        assert!(block_passes(
            &[registered, "wait"],
            "9 tasks: 9 completed",
            0
        ));
        assert!(!block_passes(&[registered, "wait"], "0 committed", 0));
    }

    #[test]
    fn a_path_a_command_says_it_writes_must_exist() {
        assert!(!block_passes(&["ctx runs report x -o report.html"], "", 0));
    }

    #[test]
    fn a_hanging_block_is_killed_at_its_deadline() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30"]);
        let started = Instant::now();
        let err = run_with_deadline(&mut cmd, Duration::from_millis(300)).unwrap_err();
        assert!(err.contains("killed"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
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
