//! Choosing and building the `InferenceEngine` a run uses (`--engine`).
//! The executor sees only the trait; this is the edge that knows names,
//! flags and environment variables.
//!
//! | `--engine` | what it does | reads |
//! |------------|--------------|-------|
//! | `dry-run` (default) | no model; output `[dry-run] output of task {id}` | nothing |
//! | `command` | `sh -c CMD` per task, prompt on stdin, stdout = output | `--command` |
//! | `openai`  | OpenAI-compatible chat completions over HTTP | the `openai` flags |
//!
//! `--command CMD` without `--engine` selects `command`. The bounds every
//! engine shares (`--task-timeout`, `--max-output-bytes`) are `ctx run`'s,
//! enforced by the executor, not an engine's.

pub mod openai;

use std::sync::Arc;

use ctx_deps::{CommandEngine, DryRunEngine, InferenceEngine};

use crate::exit::CliError;

/// The engines `--engine` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// No model is called; each output is `[dry-run] output of task {id}`.
    DryRun,
    /// Run `--command` with `sh -c` once per task, the prompt on stdin.
    Command,
    /// An OpenAI-compatible HTTP server.
    Openai,
}

/// Engine flags, flattened into `ctx run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EngineArgs {
    /// The engine that runs each task [default: dry-run, or command when
    /// --command is given].
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<EngineKind>,

    /// The shell command of `--engine command`: run with `sh -c` once per
    /// task, the final prompt on stdin, stdout taken as the output;
    /// CTX_TASK_ID and CTX_MODEL are set.
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,

    /// Flags of the OpenAI-compatible engine.
    #[command(flatten)]
    pub openai: openai::OpenAiArgs,
}

impl EngineArgs {
    /// The engine selected, after defaults.
    pub fn kind(&self) -> EngineKind {
        match (self.engine, &self.command) {
            (Some(kind), _) => kind,
            (None, Some(_)) => EngineKind::Command,
            (None, None) => EngineKind::DryRun,
        }
    }
}

/// Builds the selected engine, or explains which flag is missing or out of
/// place (exit 2).
pub fn build(args: &EngineArgs) -> Result<Arc<dyn InferenceEngine>, CliError> {
    let kind = args.kind();
    if kind != EngineKind::Openai {
        // The command engine takes `--max-tokens` too: under `ctx run
        // --max-cost` ctx cuts its output there (run.rs checks the pair).
        let given: Vec<&str> = args
            .openai
            .given()
            .into_iter()
            .filter(|flag| !(kind == EngineKind::Command && *flag == "--max-tokens"))
            .collect();
        if !given.is_empty() {
            return Err(CliError::usage(format!(
                "{} {} only used by --engine openai",
                given.join(", "),
                if given.len() == 1 { "is" } else { "are" }
            )));
        }
    }
    match kind {
        EngineKind::DryRun => {
            if args.command.is_some() {
                return Err(CliError::usage(
                    "--command is only used by --engine command (the dry-run engine runs nothing)",
                ));
            }
            Ok(Arc::new(DryRunEngine))
        }
        EngineKind::Command => {
            let Some(command) = args.command.as_deref().filter(|c| !c.trim().is_empty()) else {
                return Err(CliError::usage(
                    "--engine command needs --command 'CMD' (for example --command 'ollama run llama3.2')",
                ));
            };
            Ok(Arc::new(CommandEngine::new(command)))
        }
        EngineKind::Openai => {
            if args.command.is_some() {
                return Err(CliError::usage(
                    "--command is only used by --engine command",
                ));
            }
            openai::build(&args.openai)
        }
    }
}

/// The engine label a run records with every result and compares on
/// `--resume` (docs/runs.md, rule 5): the engine's name plus the
/// engine-level defaults that change outputs and are not in the plan's
/// `params`. For `openai` those are `--model`, `--temperature`,
/// `--max-tokens`, `--top-p`, `--stop`, `--seed` and `--system` (the latter
/// as a short hash: the label is shown by `ctx runs show`); `dry-run` and
/// `command` are the name alone. Never a credential, base URL or command
/// string: those may embed secrets, and the label is stored.
pub fn label(args: &EngineArgs) -> String {
    let kind = args.kind();
    let mut label = String::from(kind_name(kind));
    if kind == EngineKind::Openai {
        let o = &args.openai;
        let mut push = |key: &str, value: String| {
            label.push(' ');
            label.push_str(key);
            label.push('=');
            label.push_str(&value);
        };
        if let Some(m) = &o.model {
            push("model", quote(m));
        }
        if let Some(t) = o.temperature {
            push("temperature", t.to_string());
        }
        if let Some(n) = o.max_tokens {
            push("max_tokens", n.to_string());
        }
        if let Some(p) = o.top_p {
            push("top_p", p.to_string());
        }
        for s in &o.stop {
            push("stop", format!("{s:?}"));
        }
        if let Some(n) = o.seed {
            push("seed", n.to_string());
        }
        if let Some(s) = &o.system {
            let hash = ctx_store_sqlite::sha256_hex(s.as_bytes());
            push(
                "system",
                format!("sha256:{}", hash.get(..12).unwrap_or(&hash)),
            );
        }
    }
    label
}

/// The identity `--cache` keys outputs by: [`label`] plus what selects the
/// model server or program (the `--command` string, the resolved base
/// URL). It only enters a hash and is never stored, so it may hold what
/// the label must not.
pub fn cache_identity(args: &EngineArgs) -> String {
    let label = label(args);
    match args.kind() {
        EngineKind::DryRun => label,
        EngineKind::Command => format!(
            "{label}\ncommand={}",
            args.command.as_deref().unwrap_or_default()
        ),
        EngineKind::Openai => format!("{label}\nbase_url={}", resolved_base_url(&args.openai)),
    }
}

/// The base URL the openai engine uses, resolved as `openai::config_from`
/// does: `--base-url`, else `$OPENAI_BASE_URL`, else the default.
fn resolved_base_url(args: &openai::OpenAiArgs) -> String {
    args.base_url
        .clone()
        .or_else(|| {
            std::env::var(ctx_engine_openai::BASE_URL_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
        })
        .unwrap_or_else(|| ctx_engine_openai::DEFAULT_BASE_URL.to_string())
}

fn kind_name(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::DryRun => "dry-run",
        EngineKind::Command => "command",
        EngineKind::Openai => "openai",
    }
}

/// A label value: as is when it has no spaces, quotes or control
/// characters, else quoted.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"')
    {
        s.to_string()
    } else {
        format!("{s:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_hold_output_settings_never_secrets() {
        let mut a = EngineArgs::default();
        assert_eq!(label(&a), "dry-run");
        a.command = Some("API_KEY=sk-x llm".into());
        assert_eq!(label(&a), "command");
        assert!(cache_identity(&a).contains("sk-x"));
        let mut o = EngineArgs {
            engine: Some(EngineKind::Openai),
            ..EngineArgs::default()
        };
        o.openai.model = Some("gpt-4o".into());
        o.openai.temperature = Some(0.0);
        o.openai.stop = vec!["END".into()];
        o.openai.system = Some("be brief".into());
        o.openai.base_url = Some("http://user:pw@127.0.0.1:9/v1".into());
        let l = label(&o);
        assert!(
            l.starts_with("openai model=gpt-4o temperature=0 stop=\"END\" system=sha256:"),
            "{l}"
        );
        assert!(!l.contains("pw@") && !l.contains("be brief"));
        assert!(cache_identity(&o).ends_with("base_url=http://user:pw@127.0.0.1:9/v1"));
    }
}
