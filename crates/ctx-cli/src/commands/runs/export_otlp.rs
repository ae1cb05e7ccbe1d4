//! `ctx runs export RUN --format otlp [--to URL|FILE]`: a stored run's
//! trace (ctx-otel's `stored`), to stdout, a file or a collector.

use ctx_run::export::StoredRun;

use crate::exit::{CliError, CliResult, Exit};
use crate::io::print_stdout;

/// Prints, writes or sends `run`'s trace.
pub fn export(run: &StoredRun, workflow: &str, to: Option<&str>) -> CliResult {
    let spans = ctx_otel::stored::run_spans(run, workflow);
    match to {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            let timeout =
                ctx_otel::OtlpSettings::resolve(Some(url), |name| std::env::var(name).ok())
                    .ok()
                    .flatten()
                    .map_or(ctx_otel::DEFAULT_TIMEOUT, |s| s.timeout);
            let sent = ctx_otel::send(url, spans, timeout, crate::runtime::handle()?)
                .map_err(|e| CliError::with(Exit::OutWrite, format!("--to: {e}")))?;
            eprintln!("sent {sent} span(s) of run {}", run.input.run_id);
        }
        Some(file) => {
            let path = std::path::Path::new(file);
            ctx_run::write_atomic(path, ctx_otel::otlp_json(spans).as_bytes())
                .map_err(|e| CliError::with(Exit::OutWrite, format!("--to: {e}")))?;
        }
        None => print_stdout(&(ctx_otel::otlp_json(spans) + "\n"))?,
    }
    Ok(Exit::Ok)
}
