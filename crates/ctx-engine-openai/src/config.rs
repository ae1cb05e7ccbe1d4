//! What the engine is told: where to send requests, with which key, and how
//! patiently.

use std::fmt;
use std::time::Duration;

use reqwest::Url;

/// The public OpenAI endpoint, used when neither `--base-url` nor
/// `OPENAI_BASE_URL` is given.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The environment variable the API key is read from by default.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The environment variable the base URL is read from.
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// Attempts per request, the first included ([`RetryPolicy::max_attempts`]).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;
/// The backoff cap before the first retry ([`RetryPolicy::initial_backoff`]).
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// The backoff never grows past this ([`RetryPolicy::max_backoff`]).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Bound on one attempt ([`OpenAiConfig::request_timeout`]).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest silence in a stream ([`OpenAiConfig::idle_timeout`]).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on opening a connection ([`OpenAiConfig::connect_timeout`]).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An API key. It is sent in the `Authorization` header and nowhere else:
/// it has no `Display`, its `Debug` prints `ApiKey(<redacted>)`, and every
/// message the engine builds from a server's words passes through
/// [`ApiKey::redact`] first.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key; `None` for an empty or all-blank string (local servers
    /// run without one).
    pub fn new(key: impl Into<String>) -> Option<ApiKey> {
        let key = key.into().trim().to_string();
        if key.is_empty() {
            None
        } else {
            Some(ApiKey(key))
        }
    }

    /// The key itself, for the one header that carries it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `<redacted>`.
    ///
    /// Servers echo keys back ("Incorrect API key provided: sk-...") and a
    /// proxy may put one in an error page; nothing the engine reports is
    /// built without passing through here.
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            // A one- to three-character "key" would redact ordinary words.
            return text.to_string();
        }
        text.replace(&self.0, "<redacted>")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// How failures are retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (`--max-attempts`, at least 1).
    pub max_attempts: u32,
    /// The backoff cap before the first retry; it doubles with each retry.
    pub initial_backoff: Duration,
    /// The backoff cap never grows past this.
    pub max_backoff: Duration,
    /// A server's `Retry-After` / `retry-after-ms` up to this long is
    /// honoured exactly; a longer one falls back to the computed backoff.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Request parameters used when a task's `params` leave them out. Task
/// params always win.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestDefaults {
    /// The model, when a task names none (`--model`).
    pub model: Option<String>,
    /// `--temperature`.
    pub temperature: Option<f64>,
    /// `--max-tokens`.
    pub max_tokens: Option<u32>,
    /// `--top-p`.
    pub top_p: Option<f64>,
    /// `--stop`, repeatable.
    pub stop: Option<Vec<String>>,
    /// `--seed`.
    pub seed: Option<i64>,
    /// `--system`: a system message sent before the prompt.
    pub system: Option<String>,
    /// `--service-tier`: the `service_tier` of a request whose task sets
    /// none in `params` (`flex`, `default`, ...). Not in the engine's
    /// label: a tier changes the price, not the answer, so a resume
    /// under another tier reuses what is done.
    pub service_tier: Option<String>,
}

impl RequestDefaults {
    /// What these defaults mean for costs: the model, `max_tokens` and
    /// system prompt of tasks whose params set none, `max_attempts`
    /// requests per call (each retry may be billed), and each task's
    /// params sent with `params.extra` passed through. Plain data, so a
    /// plan is priced without building the engine (no key, no server).
    pub fn costs(&self, max_attempts: u32) -> ctx_engine::EngineCosts {
        ctx_engine::EngineCosts {
            free: false,
            model: self.model.clone(),
            max_tokens: self.max_tokens,
            system: self.system.clone(),
            attempts: max_attempts,
            cuts_at_max_tokens: false,
            sends_params: true,
            priced_on_request: false,
            chat_framing: true,
        }
    }
}

/// Everything the engine needs. Build it, then [`crate::OpenAiEngine::new`].
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The API root, ending before `/chat/completions` (for example
    /// `http://localhost:11434/v1`).
    pub base_url: String,
    /// The bearer token, if the server wants one.
    pub api_key: Option<ApiKey>,
    /// CLI-level defaults for request parameters.
    pub defaults: RequestDefaults,
    /// Ask for a server-sent-event stream (`--stream`).
    pub stream: bool,
    /// Bound on one attempt: the whole exchange without streaming, the wait
    /// for the response headers with it (`--request-timeout`).
    pub request_timeout: Duration,
    /// With streaming, the longest silence between two chunks
    /// (`--idle-timeout`).
    pub idle_timeout: Duration,
    /// Bound on opening the TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
    /// Requests per minute (`--rpm`); `None` = unpaced.
    pub requests_per_minute: Option<u32>,
    /// Tokens per minute (`--tpm`); `None` = unpaced.
    pub tokens_per_minute: Option<u32>,
    /// When a request carries a JSON Schema for its answer, whether it is
    /// sent as `response_format` (`--structured-output`).
    pub structured_output: StructuredOutput,
    /// What a flex request does when the server has no flex capacity
    /// (`--flex-fallback`).
    pub flex_fallback: FlexFallback,
}

/// What a `service_tier: flex` request does when the server answers "429
/// resource unavailable" (flex capacity is sold when there is some).
///
/// The unavailable answer is retried as any 429 is, with backoff; with
/// [`FlexFallback::Standard`] the call's last attempt (of
/// `--max-attempts`) goes at the standard tier instead, so the task is
/// answered, at the standard price, rather than failed. It stays within
/// the attempts `--max-cost` reserves for the call, and a 429 bills
/// nothing, so the budget holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlexFallback {
    /// The last attempt is sent with `service_tier: default`.
    #[default]
    Standard,
    /// Every attempt stays at flex: a call the server never has capacity
    /// for fails.
    None,
}

/// Whether a task's JSON Schema (its `json_schema` check) is sent as
/// `response_format: {type: json_schema, strict: true}`.
///
/// Many OpenAI-compatible servers support structured output, some reject
/// the field with a 4xx; the check runs on the answer either way, so the
/// schema in the request is a help to the model, not the guarantee.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StructuredOutput {
    /// Send it; when the server rejects it (a 4xx whose error mentions
    /// `response_format` or `json_schema`), send the request again without
    /// it and leave it out for the rest of the run (one warning).
    #[default]
    Auto,
    /// Send it; a server that rejects it fails the task.
    Always,
    /// Never send it: the prompt alone asks for the JSON.
    Never,
}

impl OpenAiConfig {
    /// Refuses a setting the engine cannot work with; every front end
    /// gets the same rules from here ([`crate::OpenAiEngine::new`] calls
    /// it). The error names the field; the CLI names its flag.
    pub fn check(&self) -> Result<(), ConfigError> {
        let refuse = |field, reason: &str| {
            Err(ConfigError::Setting {
                field,
                reason: reason.to_string(),
            })
        };
        if self.retry.max_attempts == 0 {
            return refuse(Setting::MaxAttempts, "must be at least 1");
        }
        for (field, value) in [
            (Setting::RequestTimeout, self.request_timeout),
            (Setting::IdleTimeout, self.idle_timeout),
            (Setting::ConnectTimeout, self.connect_timeout),
        ] {
            if value.is_zero() {
                return refuse(field, "must be greater than zero");
            }
        }
        if self.retry.max_backoff < self.retry.initial_backoff {
            return refuse(
                Setting::MaxBackoff,
                &format!(
                    "{} ms is below retry.initial_backoff ({} ms)",
                    self.retry.max_backoff.as_millis(),
                    self.retry.initial_backoff.as_millis()
                ),
            );
        }
        for (field, value) in [
            (Setting::RequestsPerMinute, self.requests_per_minute),
            (Setting::TokensPerMinute, self.tokens_per_minute),
        ] {
            if value == Some(0) {
                return refuse(field, "must be at least 1 (leave it out for no limit)");
            }
        }
        if self
            .defaults
            .model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return refuse(Setting::Model, "empty model name");
        }
        for (field, value) in [
            (Setting::Temperature, self.defaults.temperature),
            (Setting::TopP, self.defaults.top_p),
        ] {
            if value.is_some_and(|v| !v.is_finite()) {
                return refuse(field, "not a number");
            }
        }
        Ok(())
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: DEFAULT_BASE_URL.to_string(),
            api_key: None,
            defaults: RequestDefaults::default(),
            stream: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            retry: RetryPolicy::default(),
            requests_per_minute: None,
            tokens_per_minute: None,
            structured_output: StructuredOutput::Auto,
            flex_fallback: FlexFallback::Standard,
        }
    }
}

/// A configuration the engine cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The base URL does not parse, or is not `http`/`https`.
    #[error("base URL `{url}`: {reason}")]
    BaseUrl {
        /// The URL as given (with any password masked).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key cannot be put in an HTTP header (a newline, say).
    #[error("the API key contains characters that cannot be sent in an HTTP header")]
    ApiKey,
    /// A numeric setting is out of range. The message names the
    /// [`OpenAiConfig`] field; a front end that sets it from a flag names
    /// the flag itself (ctx's CLI maps [`Setting`] to `--max-attempts` and
    /// the others).
    #[error("{field}: {reason}")]
    Setting {
        /// The setting.
        field: Setting,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (TLS roots, for instance).
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The numeric settings [`OpenAiEngine::new`](crate::OpenAiEngine::new)
/// checks, named as [`OpenAiConfig`]'s fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Setting {
    /// `retry.max_attempts`.
    MaxAttempts,
    /// `request_timeout`.
    RequestTimeout,
    /// `idle_timeout`.
    IdleTimeout,
    /// `requests_per_minute`.
    RequestsPerMinute,
    /// `tokens_per_minute`.
    TokensPerMinute,
    /// `connect_timeout`.
    ConnectTimeout,
    /// `retry.max_backoff` (below `retry.initial_backoff`).
    MaxBackoff,
    /// `defaults.model`.
    Model,
    /// `defaults.temperature`.
    Temperature,
    /// `defaults.top_p`.
    TopP,
}

impl Setting {
    /// The field's path in [`OpenAiConfig`] (`retry.max_attempts`).
    pub fn as_str(self) -> &'static str {
        match self {
            Setting::MaxAttempts => "retry.max_attempts",
            Setting::RequestTimeout => "request_timeout",
            Setting::IdleTimeout => "idle_timeout",
            Setting::RequestsPerMinute => "requests_per_minute",
            Setting::TokensPerMinute => "tokens_per_minute",
            Setting::ConnectTimeout => "connect_timeout",
            Setting::MaxBackoff => "retry.max_backoff",
            Setting::Model => "defaults.model",
            Setting::Temperature => "defaults.temperature",
            Setting::TopP => "defaults.top_p",
        }
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The chat-completions endpoint under `base_url`, validated.
pub(crate) fn endpoint(base_url: &str) -> Result<Url, ConfigError> {
    let trimmed = base_url.trim().trim_end_matches('/');
    let url =
        Url::parse(&format!("{trimmed}/chat/completions")).map_err(|e| ConfigError::BaseUrl {
            url: mask_password(base_url),
            reason: e.to_string(),
        })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ConfigError::BaseUrl {
            url: display_url(&url),
            reason: format!("scheme `{}` is not http or https", url.scheme()),
        });
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::BaseUrl {
            url: display_url(&url),
            reason: "a base URL takes no query or fragment".into(),
        });
    }
    Ok(url)
}

/// A URL fit to print: a password in it is masked as `***`.
pub(crate) fn display_url(url: &Url) -> String {
    if url.password().is_some() {
        let mut masked = url.clone();
        // Setting a password only fails on URLs that cannot have one.
        let _ = masked.set_password(Some("***"));
        masked.to_string()
    } else {
        url.to_string()
    }
}

fn mask_password(raw: &str) -> String {
    match Url::parse(raw) {
        Ok(url) => display_url(&url),
        // Unparseable: mask anything between `//` and `@`.
        Err(_) => match (raw.find("//"), raw.find('@')) {
            (Some(s), Some(at)) if s + 2 < at => format!("{}***{}", &raw[..s + 2], &raw[at..]),
            _ => raw.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_what_the_engine_cannot_work_with_and_names_the_field() {
        assert!(OpenAiConfig::default().check().is_ok());
        let refused = |edit: fn(&mut OpenAiConfig)| {
            let mut c = OpenAiConfig::default();
            edit(&mut c);
            match c.check() {
                Err(ConfigError::Setting { field, .. }) => field,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(refused(|c| c.retry.max_attempts = 0), Setting::MaxAttempts);
        assert_eq!(
            refused(|c| c.connect_timeout = Duration::ZERO),
            Setting::ConnectTimeout
        );
        assert_eq!(
            refused(|c| c.retry.max_backoff = Duration::from_millis(10)),
            Setting::MaxBackoff
        );
        assert_eq!(
            refused(|c| c.tokens_per_minute = Some(0)),
            Setting::TokensPerMinute
        );
        assert_eq!(
            refused(|c| c.defaults.model = Some("  ".into())),
            Setting::Model
        );
        assert_eq!(
            refused(|c| c.defaults.top_p = Some(f64::NAN)),
            Setting::TopP
        );
        assert_eq!(
            refused(|c| c.defaults.temperature = Some(f64::INFINITY)),
            Setting::Temperature
        );
    }

    #[test]
    fn endpoint_joins_and_validates() {
        assert_eq!(
            endpoint("http://localhost:11434/v1/").unwrap().as_str(),
            "http://localhost:11434/v1/chat/completions"
        );
        assert_eq!(
            endpoint(DEFAULT_BASE_URL).unwrap().as_str(),
            "https://api.openai.com/v1/chat/completions"
        );
        assert!(matches!(
            endpoint("ftp://x/v1"),
            Err(ConfigError::BaseUrl { .. })
        ));
        assert!(matches!(
            endpoint("not a url"),
            Err(ConfigError::BaseUrl { .. })
        ));
        assert!(matches!(
            endpoint("http://x/v1?key=1"),
            Err(ConfigError::BaseUrl { .. })
        ));
    }

    #[test]
    fn passwords_in_urls_are_masked() {
        let url = endpoint("https://user:hunter22@proxy.example/v1").unwrap();
        let shown = display_url(&url);
        assert!(!shown.contains("hunter22"), "{shown}");
        assert!(shown.contains("user:***@proxy.example"), "{shown}");
        let err = endpoint("ftp://user:hunter22@x/").unwrap_err().to_string();
        assert!(!err.contains("hunter22"), "{err}");
    }

    #[test]
    fn keys_never_print() {
        let key = ApiKey::new("  sk-test-1234567890  ").unwrap();
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.expose(), "sk-test-1234567890");
        assert_eq!(
            key.redact("Incorrect API key provided: sk-test-1234567890."),
            "Incorrect API key provided: <redacted>."
        );
        assert!(ApiKey::new("   ").is_none());
        let cfg = OpenAiConfig {
            api_key: Some(key),
            ..OpenAiConfig::default()
        };
        assert!(!format!("{cfg:?}").contains("sk-test"));
    }
}
