//! `ctx engines`: the inference engines `ctx run --engine` accepts, and the
//! flags and environment variables each reads.
//!
//! The list is built from the same constants the engines use, so it cannot
//! drift from them. Environment variables are reported as set or not set,
//! never with their values (one of them holds an API key).

use crate::engines::{Engine, EngineKind, Setting};
use crate::exit::{CliResult, Exit};

/// Every engine's listing, in `--engine`'s order.
fn engines() -> Vec<Engine> {
    EngineKind::ALL.iter().map(|k| k.listing()).collect()
}

// Arguments of `ctx engines`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

pub use crate::format::Format;

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
        let listed: Vec<&str> = EngineKind::ALL.iter().map(|k| k.listing().name).collect();
        assert_eq!(names, listed);
        assert_eq!(&names[..3], ["dry-run", "command", "openai"]);
    }
}
