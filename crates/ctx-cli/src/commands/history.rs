//! `ctx history`: assemble a bounded digest of a markdown report archive.
//!
//! Flags override the configuration file (`--config`), which overrides the
//! built-in defaults of the original design. Markdown output is the digest
//! itself (nothing at all when no source exists); JSON output is the digest
//! with its report. Warnings (undated reports) go to stderr.

use std::path::PathBuf;

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
    /// The analysis date (YYYY-MM-DD or ISO 8601 date-time); default today (UTC).
    #[arg(long, value_name = "DATE")]
    pub date: Option<String>,
    /// The previous weekly report, instead of searching `weekly/`.
    #[arg(long, value_name = "PATH")]
    pub previous_summary: Option<PathBuf>,
    /// Total prompt budget in tokens [default: 90000].
    #[arg(long, value_name = "N")]
    pub prompt_budget: Option<usize>,
    /// Share of the prompt budget the digest may use [default: 0.15].
    #[arg(long, value_name = "F")]
    pub share: Option<f64>,
    /// Word cap of the digest [default: 1500].
    #[arg(long, value_name = "N")]
    pub max_words: Option<usize>,
    /// cl100k_base, o200k_base, o200k_harmony, p50k_base, r50k_base or estimate [default: cl100k_base].
    #[arg(long, value_name = "T")]
    pub tokenizer: Option<String>,
    /// Sources configuration (TOML, or YAML for .yaml/.yml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: Format,
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let mut config = match &args.config {
        Some(path) => HistoryConfig::load(path).map_err(CliError::usage)?,
        None => HistoryConfig::default(),
    };
    if let Some(n) = args.max_words {
        config.max_words = n;
    }
    if let Some(n) = args.prompt_budget {
        config.prompt_budget = n;
    }
    if let Some(f) = args.share {
        if !(f.is_finite() && (0.0..=1.0).contains(&f)) {
            return Err(CliError::usage(format!(
                "--share: must be between 0 and 1, got {f}"
            )));
        }
        config.share = f;
    }
    if let Some(t) = &args.tokenizer {
        config.tokenizer = t.clone();
    }
    let tokenizer: Tokenizer = config
        .tokenizer
        .parse()
        .map_err(|e| CliError::usage(format!("--tokenizer: {e}")))?;
    let date = match &args.date {
        Some(d) => parse_date(d).map_err(|e| CliError::usage(format!("--{e}")))?,
        None => today_utc(),
    };
    let request = DigestRequest {
        content_root: args.content_root.clone(),
        date,
        previous_summary: args.previous_summary.clone(),
        max_words: config.max_words,
        token_cap: token_cap(config.prompt_budget, config.share),
        exact_counts: args.format == Format::Json,
    };
    let counter = tokenizer.counter();
    let digest = assemble_digest(&config, &request, &*counter).map_err(CliError::usage)?;
    for w in &digest.warnings {
        eprintln!("warning: {w}");
    }
    let out = match args.format {
        Format::Markdown => digest.markdown.clone(),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&digest)
                .map_err(|e| CliError::usage(format!("serializing the report: {e}")))?;
            s.push('\n');
            s
        }
    };
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::usage(format!("<stdout>: {e}")))?;
    Ok(Exit::Ok)
}
