//! `ctx history`: assemble a bounded digest of a markdown report archive.
//!
//! Flags override the configuration file (`--config`), which overrides the
//! built-in defaults of the original design. Markdown output is the digest
//! itself (nothing at all when no source exists); JSON output is the digest
//! with its report. Warnings (skipped reports, links not followed, sources
//! dropped for lack of room) go to stderr, and into the JSON report.
//!
//! The digest is archive text, untrusted by definition: it goes into a
//! prompt. Its fence tags and control tokens are neutralized by default,
//! with the same neutralizer `ctx render` applies to untrusted values
//! (`ctx_prompt::fence::neutralize`), so swapping the Python assembler —
//! which escapes them in its own output — for `ctx history` loses no
//! protection. `--raw` prints the text as extracted.

use std::path::{Path, PathBuf};

use ctx_history::{
    DigestRequest, HistoryConfig, assemble_digest, parse_date, today_utc, token_cap,
};
use ctx_tokens::{Tokenizer, TokenizerExt};

use crate::exit::{CliError, CliResult, Exit};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The digest as markdown.
    Markdown,
    /// The digest and its per-source report as JSON.
    Json,
}

// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The archive: `rolling/`, `weekly/`, `monthly/`, `yearly/` under it.
    #[arg(long, value_name = "DIR")]
    pub content_root: PathBuf,
    #[command(flatten)]
    pub digest: DigestArgs,
    /// Total prompt budget in tokens [default: 90000].
    #[arg(long, value_name = "N")]
    pub prompt_budget: Option<usize>,
    /// The tokenizer that counts the digest [default: the config's, cl100k_base].
    #[arg(long, value_name = "T", value_parser = crate::tokenizer_flag::parser(), ignore_case = true)]
    pub tokenizer: Option<Tokenizer>,
    /// Print the archive text as extracted, without neutralizing fence
    /// tags and control tokens (the default neutralizes them).
    #[arg(long)]
    pub raw: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: Format,
}

// The digest flags `ctx history` and `ctx render` both take (in `ctx
// render` each needs `--content-root`, which `ctx history` always has).
#[derive(Debug, Clone, clap::Args)]
pub struct DigestArgs {
    /// The analysis date (YYYY-MM-DD or ISO 8601 date-time); default today (UTC).
    #[arg(long, value_name = "DATE")]
    pub date: Option<String>,
    /// The previous weekly report, instead of searching `weekly/`.
    #[arg(long, value_name = "PATH")]
    pub previous_summary: Option<PathBuf>,
    /// Share of the prompt budget the digest may use [default: 0.15].
    #[arg(long, value_name = "F")]
    pub share: Option<f64>,
    /// Word cap of the digest [default: 1500].
    #[arg(long, value_name = "N")]
    pub max_words: Option<usize>,
    /// History sources configuration (TOML, or YAML for .yaml/.yml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Read archive files whose symbolic links lead outside the content root.
    #[arg(long)]
    pub follow_symlinks: bool,
    /// Largest file read, in bytes: a larger archive file is skipped with a
    /// warning (`ctx render`: a larger `--var NAME=@FILE` is exit 2).
    #[arg(long, value_name = "BYTES", default_value_t = ctx_history::markdown::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
}

/// Everything `assemble_digest` needs, with the flags applied over the
/// config file (or the built-in defaults).
pub(crate) struct DigestSetup {
    pub config: HistoryConfig,
    pub request: DigestRequest,
}

impl DigestArgs {
    /// Refuses these flags without an archive to apply them to (`ctx
    /// render` without `--content-root`, `ctx run` whose plan names no
    /// `history.content_root`): a flag that would be ignored is an error.
    pub(crate) fn refuse_without_root(&self) -> Result<(), CliError> {
        let given = [
            ("--date", self.date.is_some()),
            ("--previous-summary", self.previous_summary.is_some()),
            ("--share", self.share.is_some()),
            ("--max-words", self.max_words.is_some()),
            ("--config", self.config.is_some()),
            ("--follow-symlinks", self.follow_symlinks),
        ];
        match given.iter().find(|(_, g)| *g) {
            Some((flag, _)) => Err(CliError::usage(format!(
                "{flag} needs an archive: give --content-root DIR"
            ))),
            None => Ok(()),
        }
    }

    /// Loads the sources config, applies these flags over it with the ones
    /// each command words its own way (`content_root`, `prompt_budget`,
    /// `tokenizer`), checks them, and builds the request. One place, so
    /// both commands read flags alike.
    pub(crate) fn setup(
        &self,
        content_root: &Path,
        prompt_budget: Option<usize>,
        tokenizer: Option<Tokenizer>,
        exact_counts: bool,
    ) -> Result<DigestSetup, CliError> {
        let mut config = match &self.config {
            Some(path) => HistoryConfig::load(path).map_err(CliError::usage)?,
            None => HistoryConfig::default(),
        };
        if let Some(n) = self.max_words {
            config.max_words = n;
        }
        if let Some(n) = prompt_budget {
            config.prompt_budget = n;
        }
        if let Some(f) = self.share {
            config.share = f;
        }
        if let Some(t) = tokenizer {
            config.tokenizer = t;
        }
        // The config's own rules; of what a flag sets, only `share` can break
        // them (the file's own values were checked when it was read).
        config.validate().map_err(|e| match e.field.as_str() {
            "share" => CliError::usage(format!("--share: {}", e.reason)),
            _ => CliError::usage(e),
        })?;
        let date = match self.date.as_deref() {
            Some(d) => parse_date(d).map_err(|e| CliError::usage(format!("--{e}")))?,
            None => today_utc(),
        };
        let request = DigestRequest {
            content_root: content_root.to_path_buf(),
            date,
            previous_summary: self.previous_summary.clone(),
            max_words: config.max_words,
            token_cap: token_cap(config.prompt_budget, config.share),
            exact_counts,
            follow_symlinks: self.follow_symlinks,
            max_file_bytes: self.max_file_bytes,
            rewrite: None,
        };
        Ok(DigestSetup { config, request })
    }
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let DigestSetup { config, request } = args.digest.setup(
        &args.content_root,
        args.prompt_budget,
        args.tokenizer,
        args.format == Format::Json,
    )?;
    let counter = config.tokenizer.counter();
    let digest = if args.raw {
        assemble_digest(&config, &request, &*counter)
    } else {
        ctx_prompt::fenced_digest(&config, &request, &*counter)
    }
    .map_err(CliError::usage)?;
    for w in &digest.warnings {
        eprintln!("warning: {}", ctx_table::printable_lines(&w.to_string()));
    }
    let out = match args.format {
        Format::Markdown => digest.markdown.clone(),
        Format::Json => crate::io::json_text(&digest)?,
    };
    crate::io::print_stdout(&out)?;
    Ok(Exit::Ok)
}
