//! `ctx lint`: check prompt templates for unfenced or unclassified
//! placeholders and broken fences.
//!
//! Every template is checked even when an earlier one fails. Exit 0 when
//! all are clean, 1 when any has findings, 2 when any could not be read
//! (or has malformed front matter) — 2 wins over 1.
//!
//! Text output, one line each:
//!
//! ```text
//! fixtures/weekly/prompts/analyze-weekly.md:14: {{WEEK}} trusted
//! fixtures/weekly/prompts/analyze-weekly.md:31: {{HISTORICAL_CONTEXT}} untrusted, fenced
//! fixtures/prompts/unfenced.md:7: error[unfenced-untrusted]: untrusted {{NOTES}} is outside ...
//! fixtures/prompts/unfenced.md: 3 placeholders, 1 finding
//! ```

use std::io::Write;
use std::path::PathBuf;

use ctx_prompt::template::{
    Class, Classes, LintReport, LintSummary, Template, UnreadTemplate, lint,
};

use crate::exit::{CliError, CliResult, Exit};
use crate::io::read_text;

pub use crate::format::Format;

// Arguments of this command.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Templates to check (`-` reads standard input).
    #[arg(value_name = "TEMPLATE", required = true)]
    pub templates: Vec<PathBuf>,
    /// Placeholder classes: `untrusted: [..]` / `trusted: [..]` (YAML, or TOML for .toml).
    #[arg(long, value_name = "FILE")]
    pub classes: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// Writes `report` as text lines (placeholders, findings, summary).
pub fn print_findings(report: &LintReport, out: &mut dyn Write) {
    let path = &report.path;
    for f in &report.findings {
        let _ = writeln!(
            out,
            "{path}:{}: error[{}]: {}",
            f.line,
            f.kind.as_str(),
            f.message
        );
    }
}

fn print_report(report: &LintReport, out: &mut dyn Write) {
    let path = &report.path;
    for p in &report.placeholders {
        let class = match p.class {
            Some(Class::Trusted) => "trusted",
            Some(Class::Untrusted) => "untrusted",
            None => "unclassified",
        };
        let fenced = if p.fenced { ", fenced" } else { "" };
        let _ = writeln!(out, "{path}:{}: {{{{{}}}}} {class}{fenced}", p.line, p.name);
    }
    print_findings(report, out);
    let _ = writeln!(
        out,
        "{path}: {}, {}",
        ctx_model::display::count(report.placeholders.len(), "placeholder", "placeholders"),
        ctx_model::display::count(report.findings.len(), "finding", "findings")
    );
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    let classes = match &args.classes {
        Some(path) => Classes::parse_file(&read_text(path)?, path).map_err(CliError::usage)?,
        None => Classes::default(),
    };
    let mut reports = Vec::new();
    let mut errors = Vec::new();
    for path in &args.templates {
        let shown = if path.as_os_str() == "-" {
            "<stdin>".to_string()
        } else {
            path.display().to_string()
        };
        let parsed = read_text(path)
            .map_err(|e| e.message)
            .and_then(|text| Template::parse(&text, &shown).map_err(|e| e.to_string()));
        match parsed {
            Ok(t) => reports.push(lint(&t, &classes)),
            Err(message) => errors.push(UnreadTemplate {
                path: shown,
                message,
            }),
        }
    }
    let summary = LintSummary::new(reports, errors);
    let mut stdout = std::io::stdout().lock();
    match args.format {
        Format::Text => {
            for r in &summary.templates {
                print_report(r, &mut stdout);
            }
        }
        Format::Json => {
            let _ = write!(stdout, "{}", crate::io::json_text(&summary)?);
        }
    }
    let _ = stdout.flush();
    for e in &summary.errors {
        eprintln!("error: {}", ctx_table::printable_lines(&e.message));
    }
    Ok(if !summary.errors.is_empty() {
        Exit::Usage
    } else if summary.findings > 0 {
        Exit::Findings
    } else {
        Exit::Ok
    })
}
