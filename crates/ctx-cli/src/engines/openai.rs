//! `--engine openai`: the flags and environment variables of the
//! OpenAI-compatible HTTP engine, and the one place they become an
//! [`OpenAiConfig`].
//!
//! Precedence follows the ecosystem's conventions:
//!
//! * base URL: `--base-url`, else `OPENAI_BASE_URL`, else
//!   `https://api.openai.com/v1`;
//! * API key: the variable named by `--api-key-env` (default
//!   `OPENAI_API_KEY`); none at all is fine for local servers, but a
//!   variable named explicitly must be set. There is deliberately no
//!   `--api-key` flag: a key on a command line lands in shell history and
//!   `ps` output;
//! * model and sampling: the task's `params` win over `--model`,
//!   `--temperature`, `--max-tokens`, `--top-p`, `--stop`, `--seed`,
//!   `--system`.
//!
//! Retries, streaming progress and pacing waits are the engine seam's
//! [`EngineEvent`]s, sent to the observer of the command's
//! [`Notices`](super::Notices).

use std::sync::Arc;
use std::time::Duration;

use ctx_deps::InferenceEngine;
use ctx_engine_openai::batch::PollPolicy;
use ctx_engine_openai::{
    ApiKey, BASE_URL_ENV, ConfigError, DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, FlexFallback,
    OpenAiConfig, OpenAiEngine, RequestDefaults, RetryPolicy, Setting, StructuredOutput,
};
use ctx_engine_openai::{BatchingConfig, BatchingEngine};

use super::{Engine, EngineArgs, setting};
use crate::exit::CliError;

/// The `--help` section of these flags.
const HEADING: &str = "OpenAI-compatible engine (--engine openai)";

/// Defaults shown in `--help` and `ctx engines`: the engine's own
/// (ctx-engine-openai), in the units the flags take.
pub const DEFAULT_MAX_ATTEMPTS: u32 = ctx_engine_openai::DEFAULT_MAX_ATTEMPTS;
/// `--request-timeout` default, seconds.
pub const DEFAULT_REQUEST_TIMEOUT: f64 = ctx_engine_openai::DEFAULT_REQUEST_TIMEOUT.as_secs_f64();
/// `--idle-timeout` default, seconds.
pub const DEFAULT_IDLE_TIMEOUT: f64 = ctx_engine_openai::DEFAULT_IDLE_TIMEOUT.as_secs_f64();
/// `--connect-timeout` default, seconds.
pub const DEFAULT_CONNECT_TIMEOUT: f64 = ctx_engine_openai::DEFAULT_CONNECT_TIMEOUT.as_secs_f64();
/// `--retry-initial-ms` default.
pub const DEFAULT_RETRY_INITIAL_MS: u64 =
    ctx_engine_openai::DEFAULT_INITIAL_BACKOFF.as_millis() as u64;
/// `--retry-max-ms` default.
pub const DEFAULT_RETRY_MAX_MS: u64 = ctx_engine_openai::DEFAULT_MAX_BACKOFF.as_millis() as u64;

// Flags of the OpenAI-compatible engine. Every one is optional so that
// `ctx run` can tell whether any was given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OpenAiArgs {
    /// API root, before `/chat/completions` [default: $OPENAI_BASE_URL, else
    /// `https://api.openai.com/v1`]. Ollama: `http://localhost:11434/v1`.
    #[arg(long, value_name = "URL", help_heading = HEADING)]
    pub base_url: Option<String>,

    /// Environment variable holding the API key [default: OPENAI_API_KEY;
    /// unset is fine for local servers].
    #[arg(long, value_name = "VAR", help_heading = HEADING)]
    pub api_key_env: Option<String>,

    /// Model for tasks whose params name none.
    #[arg(long, value_name = "NAME", help_heading = HEADING)]
    pub model: Option<String>,

    /// Sampling temperature for tasks whose params set none.
    #[arg(long, value_name = "T", help_heading = HEADING)]
    pub temperature: Option<f64>,

    /// Cap on generated tokens for tasks whose params set none.
    #[arg(long, value_name = "N", help_heading = HEADING)]
    pub max_tokens: Option<u32>,

    /// Nucleus sampling for tasks whose params set none.
    #[arg(long, value_name = "P", help_heading = HEADING)]
    pub top_p: Option<f64>,

    /// A stop sequence (repeat for several) for tasks whose params set none.
    #[arg(long, value_name = "SEQ", help_heading = HEADING)]
    pub stop: Vec<String>,

    /// Sampling seed for tasks whose params set none.
    #[arg(long, value_name = "N", help_heading = HEADING)]
    pub seed: Option<i64>,

    /// System message for tasks whose params set none.
    #[arg(long, value_name = "TEXT", help_heading = HEADING)]
    pub system: Option<String>,

    /// Stream each answer as server-sent events (progress, idle timeout).
    #[arg(long, help_heading = HEADING)]
    pub stream: bool,

    /// Seconds one attempt may take (with --stream: until the response
    /// starts) [default: 600].
    #[arg(long, value_name = "SECS", help_heading = HEADING)]
    pub request_timeout: Option<f64>,

    /// With --stream, seconds of silence after which a stream counts as
    /// stalled [default: 60].
    #[arg(long, value_name = "SECS", help_heading = HEADING)]
    pub idle_timeout: Option<f64>,

    /// Seconds to open a connection [default: 10].
    #[arg(long, value_name = "SECS", help_heading = HEADING)]
    pub connect_timeout: Option<f64>,

    /// Attempts per task, the first included [default: 4].
    #[arg(long, value_name = "N", help_heading = HEADING)]
    pub max_attempts: Option<u32>,

    /// Backoff cap before the first retry, doubling per retry [default: 1000].
    #[arg(long, value_name = "MS", help_heading = HEADING)]
    pub retry_initial_ms: Option<u64>,

    /// Backoff cap's ceiling [default: 30000].
    #[arg(long, value_name = "MS", help_heading = HEADING)]
    pub retry_max_ms: Option<u64>,

    /// Requests per minute, paced before sending [default: unlimited].
    #[arg(long, value_name = "N", help_heading = HEADING)]
    pub rpm: Option<u32>,

    /// Tokens (prompt + max_tokens) per minute, paced before sending
    /// [default: unlimited].
    #[arg(long, value_name = "N", help_heading = HEADING)]
    pub tpm: Option<u32>,

    /// Send a task's json_schema check as `response_format` (strict JSON
    /// Schema): auto falls back to the prompt alone, for the rest of the
    /// run, when the server rejects the field [default: auto].
    #[arg(long, value_enum, value_name = "WHEN", help_heading = HEADING)]
    pub structured_output: Option<StructuredOutputArg>,

    /// `service_tier` of each request whose task's params set none:
    /// `flex` is sold at batch prices, slower, when there is capacity.
    /// Each call records the tier the server billed, and is priced at it.
    #[arg(long, value_enum, value_name = "TIER", help_heading = HEADING)]
    pub service_tier: Option<ServiceTierArg>,

    /// When a flex request finds no flex capacity ("429 resource
    /// unavailable") on every attempt but the last: `standard` sends the
    /// last one at the standard tier (and price), `none` keeps it at flex
    /// [default: standard].
    #[arg(long, value_enum, value_name = "TIER", help_heading = HEADING)]
    pub flex_fallback: Option<FlexFallbackArg>,

    /// Send each wave of ready tasks as one batch through the server's
    /// Batch API (half price, answered within 24 hours); a request the
    /// batch fails in a retryable way goes real-time. On a run directory
    /// each batch is journaled before ctx waits on it: `ctx run --resume`
    /// takes up a batch a killed run left, `ctx runs cancel` cancels it.
    /// `ctx plan cost --batch` gives the run's range at batch prices
    /// beside the real-time one.
    #[arg(long, help_heading = HEADING)]
    pub batch: bool,

    /// With --batch: after this long (`90s`, `30m`, `6h`) what a batch has
    /// not answered is cancelled in it and sent real-time [default: wait
    /// for the provider's window].
    #[arg(long, value_name = "DURATION", help_heading = HEADING)]
    pub batch_deadline: Option<String>,

    /// With --batch: the first wait between reads of a batch, doubling to
    /// a minute [default: 5000].
    #[arg(long, value_name = "MS", help_heading = HEADING)]
    pub batch_poll_ms: Option<u64>,
}

/// `--service-tier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceTierArg {
    /// The standard tier.
    Default,
    /// Flex processing: batch prices, slower, sometimes unavailable.
    Flex,
    /// The project's setting (may be priority: refused under a budget).
    Auto,
    /// Priority processing, dearer (refused under a budget).
    Priority,
}

impl ServiceTierArg {
    fn as_str(self) -> &'static str {
        match self {
            ServiceTierArg::Default => "default",
            ServiceTierArg::Flex => "flex",
            ServiceTierArg::Auto => "auto",
            ServiceTierArg::Priority => "priority",
        }
    }
}

/// `--flex-fallback`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FlexFallbackArg {
    /// The last attempt goes at the standard tier.
    Standard,
    /// Every attempt stays at flex.
    None,
}

/// `--structured-output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StructuredOutputArg {
    /// Send it; fall back to the prompt alone when the server rejects it.
    Auto,
    /// Send it; a server that rejects it fails the task.
    Always,
    /// Never send it.
    Never,
}

impl OpenAiArgs {
    /// The flags given, by name, so another engine can refuse them.
    pub fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        let mut check = |set: bool, name: &'static str| {
            if set {
                given.push(name);
            }
        };
        check(self.base_url.is_some(), "--base-url");
        check(self.api_key_env.is_some(), "--api-key-env");
        check(self.model.is_some(), "--model");
        check(self.temperature.is_some(), "--temperature");
        check(self.max_tokens.is_some(), "--max-tokens");
        check(self.top_p.is_some(), "--top-p");
        check(!self.stop.is_empty(), "--stop");
        check(self.seed.is_some(), "--seed");
        check(self.system.is_some(), "--system");
        check(self.stream, "--stream");
        check(self.request_timeout.is_some(), "--request-timeout");
        check(self.idle_timeout.is_some(), "--idle-timeout");
        check(self.connect_timeout.is_some(), "--connect-timeout");
        check(self.max_attempts.is_some(), "--max-attempts");
        check(self.retry_initial_ms.is_some(), "--retry-initial-ms");
        check(self.retry_max_ms.is_some(), "--retry-max-ms");
        check(self.rpm.is_some(), "--rpm");
        check(self.tpm.is_some(), "--tpm");
        check(self.structured_output.is_some(), "--structured-output");
        check(self.service_tier.is_some(), "--service-tier");
        check(self.flex_fallback.is_some(), "--flex-fallback");
        check(self.batch, "--batch");
        check(self.batch_deadline.is_some(), "--batch-deadline");
        check(self.batch_poll_ms.is_some(), "--batch-poll-ms");
        given
    }
}

/// Refuses, under a budget, a `--service-tier` a call's bound does not
/// cover (`auto` may be priority, `priority` is dearer: docs/cost.md,
/// "Service tiers"), as a task's own `service_tier` is refused.
pub fn check_budget(args: &OpenAiArgs, budget: bool) -> Result<(), CliError> {
    match args.service_tier {
        Some(tier @ (ServiceTierArg::Auto | ServiceTierArg::Priority)) if budget => {
            Err(CliError::usage(format!(
                "--service-tier {}: no budget bound covers it (a call may be billed at the priority tier); use default or flex under --max-cost or a period budget",
                tier.as_str()
            )))
        }
        _ => Ok(()),
    }
}

/// Refuses `--command`, which only the command engine uses.
pub fn check(args: &EngineArgs) -> Result<(), CliError> {
    if args.command.is_some() {
        return Err(CliError::usage(
            "--command is only used by --engine command",
        ));
    }
    Ok(())
}

/// The request defaults the flags give: tasks' params win over them.
fn request_defaults(args: &OpenAiArgs) -> RequestDefaults {
    RequestDefaults {
        model: args.model.clone(),
        temperature: args.temperature,
        max_tokens: args.max_tokens,
        top_p: args.top_p,
        stop: (!args.stop.is_empty()).then(|| args.stop.clone()),
        seed: args.seed,
        system: args.system.clone(),
        service_tier: args.service_tier.map(|t| t.as_str().to_string()),
    }
}

/// The flags' meaning for costs, as the engine states it
/// ([`RequestDefaults::costs`]): `--max-attempts` requests per call.
pub fn costs(args: &OpenAiArgs) -> ctx_run::run_costs::EngineCosts {
    request_defaults(args).costs(args.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS))
}

/// What `ctx engines` says of it: built from the constants the engine
/// uses, so it cannot drift from them.
pub fn listing() -> Engine {
    Engine {
        name: "openai",
        default: false,
        description: "OpenAI-compatible chat completions over HTTP: OpenAI, Ollama, vLLM, \
                      llama.cpp's server, LM Studio, the LiteLLM proxy. Task params (model, \
                      temperature, max_tokens, top_p, stop, seed, system) win over the flags; \
                      other params are sent as they are.",
        flags: flags(),
        environment: vec![
            setting(BASE_URL_ENV, None, "base URL when --base-url is not given"),
            setting(
                DEFAULT_API_KEY_ENV,
                None,
                "API key unless --api-key-env names another; unset suits local servers",
            ),
        ],
    }
}

/// The flags `ctx engines` lists, with their defaults.
fn flags() -> Vec<super::Setting> {
    let s = |v: &str| Some(v.to_string());
    let secs = |v: f64| Some(format!("{v}"));
    vec![
        setting(
            "--base-url URL",
            s(&format!("${BASE_URL_ENV}, else {DEFAULT_BASE_URL}")),
            "API root, before /chat/completions",
        ),
        setting(
            "--api-key-env VAR",
            s(DEFAULT_API_KEY_ENV),
            "variable holding the API key (a named variable must be set)",
        ),
        setting(
            "--model NAME",
            None,
            "model for tasks whose params name none (else the task fails)",
        ),
        setting("--temperature T", None, "sampling temperature"),
        setting("--max-tokens N", None, "cap on generated tokens"),
        setting("--top-p P", None, "nucleus sampling"),
        setting("--stop SEQ", None, "stop sequence, repeatable"),
        setting("--seed N", None, "sampling seed"),
        setting("--system TEXT", None, "system message before each prompt"),
        setting("--stream", s("off"), "stream answers as server-sent events"),
        setting(
            "--request-timeout SECS",
            secs(DEFAULT_REQUEST_TIMEOUT),
            "one attempt (with --stream: until the answer starts)",
        ),
        setting(
            "--idle-timeout SECS",
            secs(DEFAULT_IDLE_TIMEOUT),
            "with --stream: longest silence inside a stream",
        ),
        setting(
            "--connect-timeout SECS",
            secs(DEFAULT_CONNECT_TIMEOUT),
            "opening a connection",
        ),
        setting(
            "--max-attempts N",
            s(&DEFAULT_MAX_ATTEMPTS.to_string()),
            "attempts per task, the first included",
        ),
        setting(
            "--retry-initial-ms MS",
            s(&DEFAULT_RETRY_INITIAL_MS.to_string()),
            "backoff cap before the first retry (doubles, full jitter)",
        ),
        setting(
            "--retry-max-ms MS",
            s(&DEFAULT_RETRY_MAX_MS.to_string()),
            "backoff cap's ceiling",
        ),
        setting(
            "--rpm N",
            s("unlimited"),
            "requests per minute, paced before sending",
        ),
        setting(
            "--tpm N",
            s("unlimited"),
            "tokens (prompt + max_tokens) per minute, paced before sending",
        ),
    ]
    .into_iter()
    .chain(tier_flags())
    .collect()
}

/// The tier and batch flags `ctx engines` lists.
fn tier_flags() -> Vec<super::Setting> {
    let s = |v: &str| Some(v.to_string());
    vec![
        setting(
            "--service-tier TIER",
            None,
            "service_tier for tasks that set none (flex: cheaper, slower)",
        ),
        setting(
            "--flex-fallback TIER",
            s("standard"),
            "no flex capacity: last attempt at the standard tier",
        ),
        setting(
            "--batch",
            s("off"),
            "each wave of ready tasks as one batch (Batch API, half price)",
        ),
        setting(
            "--batch-deadline DURATION",
            None,
            "with --batch: then cancel what is pending and send it real-time",
        ),
        setting(
            "--batch-poll-ms MS",
            s("5000"),
            "with --batch: first wait between reads of a batch (doubles to 60 s)",
        ),
    ]
}

/// Builds the engine from flags and the process environment (exit 2 on a
/// bad value, naming the flag or variable); with `--batch`, at most
/// `concurrency` real-time calls in flight (0: no limit).
pub fn build(
    args: &OpenAiArgs,
    notices: &super::Notices,
    concurrency: usize,
) -> Result<Arc<dyn InferenceEngine>, CliError> {
    let config = config_from(args, |name| std::env::var(name).ok())?;
    if let Some(mut settings) = batching(args)? {
        settings.real_time_limit = concurrency;
        // The run's id is given out after the engine is built: a token of
        // this process names the run in each request's `custom_id`.
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let token = format!("p{}-{started}", std::process::id());
        let engine = BatchingEngine::new(config, &token, settings)
            .map_err(|e| CliError::usage(format!("--engine openai: {}", config_error(&e, args))))?
            .with_observer(notices.observer());
        // A server without the Batch API is refused before anything runs.
        crate::runtime::block_on(engine.probe())?
            .map_err(|e| CliError::usage(format!("--batch: {e}")))?;
        return Ok(Arc::new(engine));
    }
    let engine = OpenAiEngine::new(config)
        .map_err(|e| CliError::usage(format!("--engine openai: {}", config_error(&e, args))))?
        .with_observer(notices.observer());
    Ok(Arc::new(engine))
}

/// How `--batch` gathers and waits, or `None` without it. The deadline
/// and the poll wait need `--batch`; a batch has no stream (exit 2).
fn batching(args: &OpenAiArgs) -> Result<Option<BatchingConfig>, CliError> {
    if !args.batch {
        for (given, flag) in [
            (args.batch_deadline.is_some(), "--batch-deadline"),
            (args.batch_poll_ms.is_some(), "--batch-poll-ms"),
        ] {
            if given {
                return Err(CliError::usage(format!("{flag} needs --batch")));
            }
        }
        return Ok(None);
    }
    if args.stream {
        return Err(CliError::usage(
            "--batch and --stream: a batch's answers do not stream",
        ));
    }
    let deadline = match &args.batch_deadline {
        Some(text) => Some(parse_duration(text).ok_or_else(|| {
            CliError::usage(format!(
                "--batch-deadline {text:?}: expected a whole number and a unit (ms, s, m, h, d), as `6h`"
            ))
        })?),
        None => None,
    };
    let first = args.batch_poll_ms.unwrap_or(5000).max(1);
    Ok(Some(BatchingConfig {
        deadline,
        poll: PollPolicy {
            initial: Duration::from_millis(first),
            max: Duration::from_secs(60).max(Duration::from_millis(first)),
        },
        ..BatchingConfig::default()
    }))
}

/// `90s`, `30m`, `6h`, `1d`, `500ms`: a whole positive number and its unit
/// (`--batch-deadline`, `--wait-approval`).
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok().filter(|n| *n > 0)?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    number.checked_mul(unit_ms).map(Duration::from_millis)
}

/// A configuration error as the CLI says it: a numeric setting is named by
/// its flag (the library names the config field).
fn config_error(e: &ConfigError, args: &OpenAiArgs) -> String {
    match e {
        ConfigError::Setting {
            field: Setting::MaxBackoff,
            ..
        } => format!(
            "--retry-max-ms {} is below --retry-initial-ms {}",
            args.retry_max_ms.unwrap_or(DEFAULT_RETRY_MAX_MS),
            args.retry_initial_ms.unwrap_or(DEFAULT_RETRY_INITIAL_MS)
        ),
        ConfigError::Setting { field, reason } => {
            let flag = match field {
                Setting::MaxAttempts => "--max-attempts",
                Setting::RequestTimeout => "--request-timeout",
                Setting::IdleTimeout => "--idle-timeout",
                Setting::ConnectTimeout => "--connect-timeout",
                Setting::RequestsPerMinute => "--rpm",
                Setting::TokensPerMinute => "--tpm",
                Setting::Model => "--model",
                Setting::Temperature => "--temperature",
                Setting::TopP => "--top-p",
                _ => return e.to_string(),
            };
            format!("{flag}: {reason}")
        }
        other => other.to_string(),
    }
}

/// The API key: the variable `--api-key-env` names (which must be set),
/// else `OPENAI_API_KEY` when it is set.
fn api_key(
    args: &OpenAiArgs,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<ApiKey>, CliError> {
    let Some(var) = &args.api_key_env else {
        return Ok(env(DEFAULT_API_KEY_ENV).and_then(ApiKey::new));
    };
    let var = var.trim();
    if var.is_empty() || var.contains('=') || var.contains('\0') {
        return Err(CliError::usage(format!(
            "--api-key-env `{var}`: not an environment variable name"
        )));
    }
    match env(var).and_then(ApiKey::new) {
        Some(key) => Ok(Some(key)),
        None => Err(CliError::usage(format!(
            "--api-key-env {var}: the variable is not set (or empty)"
        ))),
    }
}

/// The configuration `args` and the environment (read through `env`)
/// describe.
pub fn config_from(
    args: &OpenAiArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<OpenAiConfig, CliError> {
    let base_url = args
        .base_url
        .clone()
        .or_else(|| env(BASE_URL_ENV).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    let api_key = api_key(args, &env)?;
    // Seconds become a `Duration` here (a negative or non-finite number
    // cannot be one); zero, `--max-attempts 0`, `--rpm 0`, a maximum
    // backoff below the initial one, an empty model and a NaN temperature
    // are the engine's to refuse (`OpenAiConfig::check`, named back to the
    // flag by `config_error`): one check, in the library.
    let secs = |flag: &str, value: Option<f64>, default: f64| -> Result<Duration, CliError> {
        let v = value.unwrap_or(default);
        Duration::try_from_secs_f64(v).map_err(|_| {
            CliError::usage(format!("{flag} {v}: must be a positive number of seconds"))
        })
    };
    let initial = args.retry_initial_ms.unwrap_or(DEFAULT_RETRY_INITIAL_MS);
    let max = args
        .retry_max_ms
        .unwrap_or(DEFAULT_RETRY_MAX_MS.max(initial));
    Ok(OpenAiConfig {
        base_url,
        api_key,
        defaults: request_defaults(args),
        stream: args.stream,
        request_timeout: secs(
            "--request-timeout",
            args.request_timeout,
            DEFAULT_REQUEST_TIMEOUT,
        )?,
        idle_timeout: secs("--idle-timeout", args.idle_timeout, DEFAULT_IDLE_TIMEOUT)?,
        connect_timeout: secs(
            "--connect-timeout",
            args.connect_timeout,
            DEFAULT_CONNECT_TIMEOUT,
        )?,
        retry: RetryPolicy {
            max_attempts: args.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
            initial_backoff: Duration::from_millis(initial),
            max_backoff: Duration::from_millis(max),
            ..RetryPolicy::default()
        },
        requests_per_minute: args.rpm,
        tokens_per_minute: args.tpm,
        structured_output: match args.structured_output {
            None | Some(StructuredOutputArg::Auto) => StructuredOutput::Auto,
            Some(StructuredOutputArg::Always) => StructuredOutput::Always,
            Some(StructuredOutputArg::Never) => StructuredOutput::Never,
        },
        flex_fallback: match args.flex_fallback {
            None | Some(FlexFallbackArg::Standard) => FlexFallback::Standard,
            Some(FlexFallbackArg::None) => FlexFallback::None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn batch_deadlines_are_a_number_and_a_unit() {
        let parsed = |t: &str| parse_duration(t).map(|d| d.as_millis());
        assert_eq!(parsed("500ms"), Some(500));
        assert_eq!(parsed("90s"), Some(90_000));
        assert_eq!(parsed(" 30m "), Some(1_800_000));
        assert_eq!(parsed("6h"), Some(21_600_000));
        assert_eq!(parsed("1d"), Some(86_400_000));
        for bad in [
            "",
            "6",
            "h",
            "0s",
            "1.5h",
            "-1h",
            "6hours",
            "99999999999999999999d",
        ] {
            assert_eq!(parsed(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_bad_setting_is_named_by_its_flag() {
        for (field, flag) in [
            (Setting::MaxAttempts, "--max-attempts"),
            (Setting::RequestTimeout, "--request-timeout"),
            (Setting::IdleTimeout, "--idle-timeout"),
            (Setting::RequestsPerMinute, "--rpm"),
            (Setting::TokensPerMinute, "--tpm"),
            (Setting::ConnectTimeout, "--connect-timeout"),
            (Setting::Model, "--model"),
            (Setting::Temperature, "--temperature"),
            (Setting::TopP, "--top-p"),
        ] {
            let e = ConfigError::Setting {
                field,
                reason: "must be at least 1".into(),
            };
            assert!(!e.to_string().contains("--"), "{e}");
            assert_eq!(
                config_error(&e, &OpenAiArgs::default()),
                format!("{flag}: must be at least 1")
            );
        }
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn base_url_precedence() {
        let args = OpenAiArgs::default();
        assert_eq!(
            config_from(&args, env(&[])).unwrap().base_url,
            DEFAULT_BASE_URL
        );
        let from_env = config_from(&args, env(&[(BASE_URL_ENV, "http://localhost:11434/v1")]));
        assert_eq!(from_env.unwrap().base_url, "http://localhost:11434/v1");
        let flag = OpenAiArgs {
            base_url: Some("http://127.0.0.1:8000/v1".into()),
            ..OpenAiArgs::default()
        };
        let both = config_from(&flag, env(&[(BASE_URL_ENV, "http://ignored/v1")]));
        assert_eq!(both.unwrap().base_url, "http://127.0.0.1:8000/v1");
    }

    #[test]
    fn api_key_sources() {
        let args = OpenAiArgs::default();
        assert!(config_from(&args, env(&[])).unwrap().api_key.is_none());
        let k = config_from(&args, env(&[(DEFAULT_API_KEY_ENV, "sk-a")])).unwrap();
        assert_eq!(k.api_key, ApiKey::new("sk-a"));
        let named = OpenAiArgs {
            api_key_env: Some("GROQ_API_KEY".into()),
            ..OpenAiArgs::default()
        };
        let k = config_from(
            &named,
            env(&[(DEFAULT_API_KEY_ENV, "sk-a"), ("GROQ_API_KEY", "gsk-b")]),
        );
        assert_eq!(k.unwrap().api_key, ApiKey::new("gsk-b"));
        let missing = config_from(&named, env(&[])).unwrap_err();
        assert_eq!(
            missing.message,
            "--api-key-env GROQ_API_KEY: the variable is not set (or empty)"
        );
    }

    #[test]
    fn defaults_and_bad_values() {
        let c = config_from(&OpenAiArgs::default(), env(&[])).unwrap();
        assert_eq!(c.retry.max_attempts, 4);
        assert_eq!(c.request_timeout, Duration::from_secs(600));
        assert_eq!(c.idle_timeout, Duration::from_secs(60));
        assert!(!c.stream);
        let bad = |args: OpenAiArgs| config_from(&args, env(&[])).unwrap_err().message;
        // What the engine refuses is refused once, by the engine, and
        // named back to its flag.
        let refused = |args: OpenAiArgs| {
            build(&args, &super::super::Notices::default(), 0)
                .err()
                .unwrap()
                .message
        };
        assert_eq!(
            refused(OpenAiArgs {
                max_attempts: Some(0),
                ..Default::default()
            }),
            "--engine openai: --max-attempts: must be at least 1"
        );
        assert_eq!(
            bad(OpenAiArgs {
                idle_timeout: Some(-1.0),
                ..Default::default()
            }),
            "--idle-timeout -1: must be a positive number of seconds"
        );
        assert_eq!(
            refused(OpenAiArgs {
                rpm: Some(0),
                ..Default::default()
            }),
            "--engine openai: --rpm: must be at least 1 (leave it out for no limit)"
        );
        assert_eq!(
            refused(OpenAiArgs {
                retry_initial_ms: Some(500),
                retry_max_ms: Some(100),
                ..Default::default()
            }),
            "--engine openai: --retry-max-ms 100 is below --retry-initial-ms 500"
        );
        assert_eq!(
            refused(OpenAiArgs {
                temperature: Some(f64::NAN),
                ..Default::default()
            }),
            "--engine openai: --temperature: not a number"
        );
        assert_eq!(
            refused(OpenAiArgs {
                idle_timeout: Some(0.0),
                ..Default::default()
            }),
            "--engine openai: --idle-timeout: must be greater than zero"
        );
        assert_eq!(
            refused(OpenAiArgs {
                model: Some(" ".into()),
                ..Default::default()
            }),
            "--engine openai: --model: empty model name"
        );
    }

    #[test]
    fn sampling_flags_become_defaults() {
        let args = OpenAiArgs {
            model: Some("llama3.2".into()),
            temperature: Some(0.1),
            max_tokens: Some(32),
            stop: vec!["END".into(), "STOP".into()],
            seed: Some(42),
            system: Some("Be brief.".into()),
            stream: true,
            ..OpenAiArgs::default()
        };
        let c = config_from(&args, env(&[])).unwrap();
        assert_eq!(c.defaults.model.as_deref(), Some("llama3.2"));
        assert_eq!(c.defaults.stop, Some(vec!["END".into(), "STOP".into()]));
        assert_eq!(c.defaults.seed, Some(42));
        assert!(c.stream);
        assert_eq!(
            args.given(),
            [
                "--model",
                "--temperature",
                "--max-tokens",
                "--stop",
                "--seed",
                "--system",
                "--stream"
            ]
        );
    }
}
