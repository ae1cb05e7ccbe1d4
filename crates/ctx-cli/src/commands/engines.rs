//! `ctx engines`: the inference engines `ctx run --engine` accepts, and the
//! flags and environment variables each reads.
//!
//! The list is built from the same constants the engines use, so it cannot
//! drift from them. Environment variables are reported as set or not set,
//! never with their values (one of them holds an API key).

use crate::engines::openai::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_ATTEMPTS, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRY_INITIAL_MS, DEFAULT_RETRY_MAX_MS,
};
use crate::exit::{CliResult, Exit};
use ctx_engine_openai::{BASE_URL_ENV, DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL};

/// Arguments of `ctx engines`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

pub use crate::format::Format;

struct Setting {
    name: &'static str,
    default: Option<String>,
    meaning: &'static str,
}

struct Engine {
    name: &'static str,
    default: bool,
    description: &'static str,
    flags: Vec<Setting>,
    environment: Vec<Setting>,
}

fn setting(name: &'static str, default: Option<String>, meaning: &'static str) -> Setting {
    Setting {
        name,
        default,
        meaning,
    }
}

fn engines() -> Vec<Engine> {
    let s = |v: &str| Some(v.to_string());
    vec![
        Engine {
            name: "dry-run",
            default: true,
            description: "No model is called; each task's output is `[dry-run] output of task {id}`, \
                          so downstream prompts show where real outputs will go.",
            flags: vec![],
            environment: vec![],
        },
        Engine {
            name: "command",
            default: false,
            description: "Runs CMD with `sh -c` once per task: the final prompt on stdin, stdout \
                          is the output, a non-zero exit fails the task with the end of stderr. \
                          Past ctx run's --task-timeout or --max-output-bytes its process \
                          group is killed. Chosen by --command alone too.",
            flags: vec![setting(
                "--command CMD",
                None,
                "the shell command (required)",
            )],
            environment: vec![
                setting("CTX_TASK_ID", None, "set for the command: the task's id"),
                setting(
                    "CTX_MODEL",
                    None,
                    "set for the command: the task's params.model, or empty",
                ),
            ],
        },
        Engine {
            name: "openai",
            default: false,
            description: "OpenAI-compatible chat completions over HTTP: OpenAI, Ollama, vLLM, \
                          llama.cpp's server, LM Studio, the LiteLLM proxy. Task params (model, \
                          temperature, max_tokens, top_p, stop, seed, system) win over the flags; \
                          other params are sent as they are.",
            flags: vec![
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
                    s(&secs(DEFAULT_REQUEST_TIMEOUT)),
                    "one attempt (with --stream: until the answer starts)",
                ),
                setting(
                    "--idle-timeout SECS",
                    s(&secs(DEFAULT_IDLE_TIMEOUT)),
                    "with --stream: longest silence inside a stream",
                ),
                setting(
                    "--connect-timeout SECS",
                    s(&secs(DEFAULT_CONNECT_TIMEOUT)),
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
            ],
            environment: vec![
                setting(BASE_URL_ENV, None, "base URL when --base-url is not given"),
                setting(
                    DEFAULT_API_KEY_ENV,
                    None,
                    "API key unless --api-key-env names another; unset suits local servers",
                ),
            ],
        },
    ]
}

fn secs(v: f64) -> String {
    format!("{v}")
}

fn is_set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}

/// Whether an environment entry is one ctx reads (as opposed to one it sets
/// for a command).
fn is_read(var: &str) -> bool {
    !var.starts_with("CTX_")
}

/// Longest line `text` writes where it can help it.
const MAX_LINE: usize = 100;

fn text(engines: &[Engine]) -> String {
    let mut out = String::new();
    for (i, e) in engines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(e.name);
        if e.default {
            out.push_str(" (default)");
        }
        out.push('\n');
        out.push_str(&wrap(e.description, 76, "  "));
        if !e.flags.is_empty() {
            out.push_str("  flags:\n");
            let width = e.flags.iter().map(|f| f.name.len()).max().unwrap_or(0);
            for f in &e.flags {
                let line = format!("    {:width$}  {}", f.name, f.meaning);
                out.push_str(&line);
                if let Some(d) = &f.default {
                    let default = format!("[default: {d}]");
                    if line.len() + 1 + default.len() > MAX_LINE {
                        // Continue under the meaning column.
                        out.push('\n');
                        out.push_str(&" ".repeat(4 + width + 2));
                    } else {
                        out.push(' ');
                    }
                    out.push_str(&default);
                }
                out.push('\n');
            }
        }
        if !e.environment.is_empty() {
            out.push_str("  environment:\n");
            let width = e
                .environment
                .iter()
                .map(|f| f.name.len())
                .max()
                .unwrap_or(0);
            for v in &e.environment {
                out.push_str(&format!("    {:width$}  {}", v.name, v.meaning));
                if is_read(v.name) {
                    out.push_str(if is_set(v.name) {
                        " (set)"
                    } else {
                        " (not set)"
                    });
                }
                out.push('\n');
            }
        }
    }
    out
}

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `ctx engines --format json`: `{"engines": [{"name", "default",
/// "description", "flags", "environment"}]}`, each setting `{"name",
/// "meaning", "default"?, "set"?}`, keys in this order.
#[derive(serde::Serialize)]
struct EnginesJson {
    engines: Vec<EngineJson>,
}

#[derive(serde::Serialize)]
struct EngineJson {
    name: &'static str,
    default: bool,
    description: String,
    flags: Vec<SettingJson>,
    environment: Vec<SettingJson>,
}

#[derive(serde::Serialize)]
struct SettingJson {
    name: &'static str,
    meaning: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<String>,
    /// Whether the variable is set (never its value); environment only.
    #[serde(skip_serializing_if = "Option::is_none")]
    set: Option<bool>,
}

fn json(engines: &[Engine]) -> EnginesJson {
    let settings = |list: &[Setting], env: bool| -> Vec<SettingJson> {
        list.iter()
            .map(|s| SettingJson {
                name: s.name,
                meaning: s.meaning,
                default: s.default.clone(),
                set: (env && is_read(s.name)).then(|| is_set(s.name)),
            })
            .collect()
    };
    EnginesJson {
        engines: engines
            .iter()
            .map(|e| EngineJson {
                name: e.name,
                default: e.default,
                description: e
                    .description
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
                flags: settings(&e.flags, false),
                environment: settings(&e.environment, true),
            })
            .collect(),
    }
}

/// Prints the engines.
pub fn run(args: Args) -> CliResult {
    let list = engines();
    let text = match args.format {
        Format::Text => text(&list),
        Format::Json => crate::io::json_text(&json(&list))?,
    };
    crate::io::print_stdout(&text)?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_engine_with_its_settings() {
        let t = text(&engines());
        assert!(t.starts_with("dry-run (default)\n"), "{t}");
        for needle in [
            "\ncommand\n",
            "\nopenai\n",
            "--base-url URL",
            "$OPENAI_BASE_URL, else https://api.openai.com/v1",
            "--max-attempts N",
            "[default: 4]",
            "OPENAI_API_KEY",
            "--rpm N",
            "--tpm N",
            "--idle-timeout SECS",
        ] {
            assert!(t.contains(needle), "missing {needle:?} in\n{t}");
        }
        assert!(t.lines().all(|l| l.len() <= MAX_LINE), "{t}");
    }

    #[test]
    fn json_form_names_the_same_engines() {
        let j = serde_json::to_value(json(&engines())).unwrap();
        let names: Vec<&str> = j["engines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["dry-run", "command", "openai"]);
    }
}
