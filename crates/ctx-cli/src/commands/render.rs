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

use std::path::PathBuf;

use ctx_prompt::fence::FenceNonce;
use ctx_prompt::render_prompt::{HistoryInput, RenderInput, render_prompt};
use ctx_prompt::template::{Classes, FenceStyle, Template};

use crate::commands::history::{DigestArgs, DigestSetup};
use crate::exit::{CliError, CliResult, Exit};
use crate::io::read_text;

pub use crate::format::Format;

// Arguments of this command.
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

    let values = crate::var_flag::values(&args.vars, args.digest.max_file_bytes)?;

    let mut input = RenderInput::new(&template, &classes, values);
    if let Some(root) = &args.content_root {
        let DigestSetup { config, request } =
            args.digest
                .setup(root, args.prompt_budget, args.tokenizer, false)?;
        input.history = Some(HistoryInput::new(config, request));
    } else {
        args.digest.refuse_without_root()?;
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
