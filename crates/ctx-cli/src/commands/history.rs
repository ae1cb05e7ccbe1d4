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
use ctx_tokens::Tokenizer;

use crate::exit::{CliError, CliResult, Exit};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The digest as markdown.
    Markdown,
    /// The digest and its per-source report as JSON.
    Json,
}

/// Arguments of this command.
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

/// The digest flags `ctx history` and `ctx render` both take (in `ctx
/// render` each needs `--content-root`, which `ctx history` always has).
#[derive(Debug, clap::Args)]
pub struct DigestArgs {
    /// The analysis date (YYYY-MM-DD or ISO 8601 date-time); default today (UTC).
    #[arg(long, value_name = "DATE", requires = "content_root")]
    pub date: Option<String>,
    /// The previous weekly report, instead of searching `weekly/`.
    #[arg(long, value_name = "PATH", requires = "content_root")]
    pub previous_summary: Option<PathBuf>,
    /// Share of the prompt budget the digest may use [default: 0.15].
    #[arg(long, value_name = "F", requires = "content_root")]
    pub share: Option<f64>,
    /// Word cap of the digest [default: 1500].
    #[arg(long, value_name = "N", requires = "content_root")]
    pub max_words: Option<usize>,
    /// History sources configuration (TOML, or YAML for .yaml/.yml).
    #[arg(long, value_name = "FILE", requires = "content_root")]
    pub config: Option<PathBuf>,
    /// Read archive files whose symbolic links lead outside the content root.
    #[arg(long, requires = "content_root")]
    pub follow_symlinks: bool,
}

impl DigestArgs {
    /// These flags with the ones each command words its own way.
    pub(crate) fn flags<'a>(
        &'a self,
        content_root: &'a Path,
        prompt_budget: Option<usize>,
        tokenizer: Option<Tokenizer>,
    ) -> DigestFlags<'a> {
        DigestFlags {
            content_root,
            config: self.config.as_deref(),
            date: self.date.as_deref(),
            previous_summary: self.previous_summary.as_deref(),
            prompt_budget,
            share: self.share,
            max_words: self.max_words,
            tokenizer,
            follow_symlinks: self.follow_symlinks,
        }
    }
}

/// The history flags `ctx history` and `ctx render --content-root` share,
/// as given on the command line (`None` = not given).
pub(crate) struct DigestFlags<'a> {
    pub content_root: &'a Path,
    pub config: Option<&'a Path>,
    pub date: Option<&'a str>,
    pub previous_summary: Option<&'a Path>,
    pub prompt_budget: Option<usize>,
    pub share: Option<f64>,
    pub max_words: Option<usize>,
    pub tokenizer: Option<Tokenizer>,
    pub follow_symlinks: bool,
}

/// Everything `assemble_digest` needs, with the flags applied over the
/// config file (or the built-in defaults).
pub(crate) struct DigestSetup {
    pub config: HistoryConfig,
    pub request: DigestRequest,
}

/// Loads the sources config, applies the flags over it, checks them, and
/// builds the request. One place, so both commands read flags alike.
pub(crate) fn digest_setup(
    flags: &DigestFlags<'_>,
    exact_counts: bool,
) -> Result<DigestSetup, CliError> {
    let mut config = match flags.config {
        Some(path) => HistoryConfig::load(path).map_err(CliError::usage)?,
        None => HistoryConfig::default(),
    };
    if let Some(n) = flags.max_words {
        config.max_words = n;
    }
    if let Some(n) = flags.prompt_budget {
        config.prompt_budget = n;
    }
    if let Some(f) = flags.share {
        config.share = f;
    }
    if let Some(t) = flags.tokenizer {
        config.tokenizer = t;
    }
    // The config's own rules; of what a flag sets, only `share` can break
    // them (the file's own values were checked when it was read).
    config.validate().map_err(|e| match e.field.as_str() {
        "share" => CliError::usage(format!("--share: {}", e.reason)),
        _ => CliError::usage(e),
    })?;
    let date = match flags.date {
        Some(d) => parse_date(d).map_err(|e| CliError::usage(format!("--{e}")))?,
        None => today_utc(),
    };
    let request = DigestRequest {
        content_root: flags.content_root.to_path_buf(),
        date,
        previous_summary: flags.previous_summary.map(Path::to_path_buf),
        max_words: config.max_words,
        token_cap: token_cap(config.prompt_budget, config.share),
        exact_counts,
        follow_symlinks: flags.follow_symlinks,
        rewrite: None,
    };
    Ok(DigestSetup { config, request })
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let DigestSetup { config, request } = digest_setup(
        &args
            .digest
            .flags(&args.content_root, args.prompt_budget, args.tokenizer),
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
        eprintln!("warning: {w}");
    }
    let out = match args.format {
        Format::Markdown => digest.markdown.clone(),
        Format::Json => crate::io::json_text(&digest)?,
    };
    crate::io::print_stdout(&out)?;
    Ok(Exit::Ok)
}
