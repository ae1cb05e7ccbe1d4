//! `ctx render`: fill a prompt template, fencing untrusted values, and
//! preflight its token budget.
//!
//! Order of work, each step able to stop the command:
//!
//! 1. read and lint the template (findings → exit 1, nothing rendered);
//! 2. read the `--var` values (`NAME=VALUE`, `NAME=@FILE`, `NAME=@-` for
//!    stdin, `NAME=@@text` for a literal value starting with `@`; one
//!    trailing line break of a file is dropped);
//! 3. with `--content-root`, assemble the historical digest against the
//!    same `--prompt-budget` and use it as `{{HISTORICAL_CONTEXT}}`;
//! 4. render in one pass (a missing value or an unused `--var` → exit 2);
//!    a template with `fence: nonce` gets a nonce of 16 bytes from the
//!    operating system's random source, new on every run;
//! 5. preflight: count the template text, each value and the whole prompt;
//!    over `--prompt-budget` → exit 3 with the table on stderr.
//!
//! Text output is the prompt on stdout and the preflight table on stderr;
//! `--format json` prints one object with the prompt, the table, the total
//! and the budget.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ctx_prompt::fence::FenceNonce;
use ctx_prompt::render_prompt::{HistoryInput, RenderInput, render_prompt};
use ctx_prompt::template::{Classes, FenceStyle, Template, is_valid_name};

use crate::commands::history::{DigestArgs, DigestSetup};
use crate::exit::{CliError, CliResult, Exit};
use crate::io::read_text;

pub use crate::format::Format;

/// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The template (`-` reads standard input).
    #[arg(value_name = "TEMPLATE")]
    pub template: PathBuf,
    /// A value: NAME=VALUE, NAME=@FILE (`@-` = stdin), NAME=@@text for a literal `@text`.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// Placeholder classes: `untrusted: [..]` / `trusted: [..]` (YAML, or TOML for .toml).
    #[arg(long, value_name = "FILE")]
    pub classes: Option<PathBuf>,
    /// Fill {{HISTORICAL_CONTEXT}} with the digest of this archive.
    #[arg(long, value_name = "DIR")]
    pub content_root: Option<PathBuf>,
    #[command(flatten)]
    pub digest: DigestArgs,
    /// Tokenizer for the digest and the preflight [default: cl100k_base].
    #[arg(long, value_name = "T", value_parser = crate::tokenizer_flag::parser(), ignore_case = true)]
    pub tokenizer: Option<ctx_tokens::Tokenizer>,
    /// Token budget of the whole prompt; the digest gets its share of it.
    /// [default with --content-root: the history config's, 90000]
    #[arg(long, value_name = "N")]
    pub prompt_budget: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// The text of `--var NAME=@PATH`: standard input for `-`, else a regular
/// file, each read no further than `limit` bytes.
fn read_var_file(path: &Path, limit: u64) -> Result<String, String> {
    let bytes = if path == Path::new("-") {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| format!("<stdin>: {e}"))?;
        if bytes.len() as u64 > limit {
            return Err(format!(
                "<stdin>: larger than the limit of {limit} bytes (--max-file-bytes)"
            ));
        }
        bytes
    } else {
        ctx_history::markdown::read_bounded(path, limit, "file").map_err(|e| match e {
            ctx_history::HistoryError::TooLarge { .. } => format!("{e} (--max-file-bytes)"),
            e => e.to_string(),
        })?
    };
    crate::io::utf8_text(path, bytes)
}

/// A `--var` argument: the name and the value it stands for. An `@FILE`
/// is read no further than `max_file_bytes` (`--max-file-bytes`): a
/// larger file, a directory or a FIFO is exit 2 naming the variable
/// (`@/dev/zero` used to read until memory ran out).
fn parse_var(arg: &str, max_file_bytes: u64) -> Result<(String, String), CliError> {
    let Some((name, value)) = arg.split_once('=') else {
        return Err(CliError::usage(format!(
            "--var {arg}: expected NAME=VALUE or NAME=@FILE"
        )));
    };
    if !is_valid_name(name) {
        return Err(CliError::usage(format!(
            "--var {arg}: `{name}` is not a placeholder name ([A-Z][A-Z0-9_]*)"
        )));
    }
    let value = if let Some(lit) = value.strip_prefix("@@") {
        format!("@{lit}")
    } else if let Some(path) = value.strip_prefix('@') {
        if path.is_empty() {
            return Err(CliError::usage(format!(
                "--var {arg}: `@` needs a file name (or `@-` for stdin)"
            )));
        }
        let mut text = read_var_file(path.as_ref(), max_file_bytes)
            .map_err(|e| CliError::usage(format!("--var {name}: {e}")))?;
        // One trailing line break goes, as with shell command substitution,
        // so `{{X}}` on its own line stays one line.
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        text
    } else {
        value.to_string()
    };
    Ok((name.to_string(), value))
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let source = read_text(&args.template)?;
    let shown = if args.template.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        args.template.display().to_string()
    };
    let template = Template::parse(&source, &shown).map_err(CliError::usage)?;
    let classes = match &args.classes {
        Some(path) => Classes::parse_file(&read_text(path)?, path).map_err(CliError::usage)?,
        None => Classes::default(),
    };

    let mut values = BTreeMap::new();
    for arg in &args.vars {
        let (name, value) = parse_var(arg, args.digest.max_file_bytes)?;
        if values.insert(name.clone(), value).is_some() {
            return Err(CliError::usage(format!(
                "--var {name} is given more than once"
            )));
        }
    }

    let mut input = RenderInput::new(&template, &classes, values);
    if let Some(root) = &args.content_root {
        let DigestSetup { config, request } =
            args.digest
                .setup(root, args.prompt_budget, args.tokenizer, false)?;
        input.history = Some(HistoryInput::new(config, request));
    } else {
        input.budget = args.prompt_budget;
        input.tokenizer = args.tokenizer;
    }
    if template.fence == FenceStyle::Nonce {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| {
            CliError::usage(format!(
                "{shown}: `fence: nonce` needs a random nonce, and the operating system gave none: {e}"
            ))
        })?;
        input.nonce = Some(FenceNonce::from_bytes(bytes));
    }

    let rendered = render_prompt(input).map_err(|e| CliError::render(e, &shown))?;
    if let Some(digest) = &rendered.digest {
        for w in &digest.warnings {
            eprintln!("warning: {}", ctx_table::printable_lines(&w.to_string()));
        }
    }
    let pre = &rendered.preflight;

    let out = match args.format {
        Format::Text => {
            eprint!("{}", pre.table());
            rendered.text
        }
        Format::Json => crate::io::json_text(&rendered.json(&shown))?,
    };
    crate::io::print_stdout(&out)?;
    Ok(Exit::Ok)
}

/// The library's missing and unused values, said with the flag that gives
/// a value: `give --var NAME=VALUE`, `--var NAME is not used`.
pub(crate) fn values_message(path: &str, missing: &[(String, usize)], unused: &[String]) -> String {
    let mut lines: Vec<String> = missing
        .iter()
        .map(|(n, l)| format!("{path}:{l}: no value for {{{{{n}}}}} (give --var {n}=VALUE)"))
        .collect();
    lines.extend(
        unused
            .iter()
            .map(|n| format!("{path}: --var {n} is not used by the template")),
    );
    lines.join("\n")
}
