//! `--otlp URL` and the `OTEL_*` environment for `ctx run`, `ctx eval` and
//! `ctx worker`: the exporter is installed before the command and flushed
//! after it (ctx-otel; docs/tracing.md). Tracing never changes a command's
//! outcome: a setting ctx cannot use is one warning and no export, and
//! spans the collector did not take are one line on stderr at exit.

use clap::Args;

// The flag every command that runs tasks takes.
#[derive(Debug, Clone, Default, Args)]
pub struct OtlpFlag {
    /// Export the run's trace and GenAI metrics over OTLP/HTTP to this base
    /// endpoint (ctx appends /v1/traces and /v1/metrics), as
    /// OTEL_EXPORTER_OTLP_ENDPOINT does; it wins over the OTEL_*
    /// environment. Without either, nothing is exported.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
}

/// The installed exporter, if any.
pub struct Tracing(Option<ctx_otel::Telemetry>);

/// Installs the exporter when `flag` or the environment asks for it.
pub fn start(flag: &OtlpFlag) -> Tracing {
    let settings = match ctx_otel::OtlpSettings::resolve(flag.otlp.as_deref(), |name| {
        std::env::var(name).ok()
    }) {
        Ok(Some(s)) => s,
        Ok(None) => return Tracing(None),
        Err(e) => {
            warn(&e.to_string());
            return Tracing(None);
        }
    };
    let runtime = match crate::runtime::handle() {
        Ok(h) => h,
        Err(e) => {
            warn(&e.message);
            return Tracing(None);
        }
    };
    match ctx_otel::install(settings, runtime) {
        Ok(t) => Tracing(Some(t)),
        Err(e) => {
            warn(&e.to_string());
            Tracing(None)
        }
    }
}

impl Tracing {
    /// Flushes within the OTLP timeout; says once what was lost.
    pub fn finish(self) {
        if let Some(lost) = self.0.and_then(ctx_otel::Telemetry::shutdown) {
            warn(&lost.to_string());
        }
    }
}

fn warn(message: &str) {
    eprintln!("warning: tracing: {}", ctx_table::printable_lines(message));
}

/// The canary of a run of `plan` (docs/security.md, "A canary for
/// injected instructions"), when it plants one: 128 bits from the
/// operating system, made anew by each command (a resume plants a new
/// one), handed to the tracer to redact as a secret is. Exit 2 when the
/// operating system gives no random bytes.
pub fn canary(
    plan: &ctx_model::Plan,
    plan_path: &std::path::Path,
) -> Result<Option<ctx_deps::Canary>, crate::exit::CliError> {
    if !ctx_model::plan_has_canary(plan) {
        return Ok(None);
    }
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        crate::exit::CliError::usage(format!(
            "{}: a canary needs a random token, and the operating system gave none: {e}",
            plan_path.display()
        ))
    })?;
    let canary = ctx_deps::Canary::from_bytes(bytes);
    ctx_otel::redact_values([canary.token().to_string()]);
    Ok(Some(canary))
}

/// Hands the texts of `plan`'s secret variables among `values` to the
/// tracer, which redacts them from captured content: the same texts a
/// store hides (`ctx_run::inputs::secret_mask`: the value as given, and
/// neutralized where it is inserted so).
pub fn redact_secrets(plan: &ctx_model::Plan, values: &std::collections::BTreeMap<String, String>) {
    let mask = ctx_run::inputs::secret_mask(plan, values);
    ctx_otel::redact_values(mask.texts().map(str::to_string));
}
