//! Values given on the command line: `NAME=VALUE`, `NAME=@FILE`
//! (`NAME=@-` reads standard input) and `NAME=@@text` (a literal value
//! that starts with `@`). One reader for every command that takes
//! `--var` (`ctx render`, `ctx run`, `ctx plan check`, `ctx plan cost`),
//! so a value means the same thing to each.
//!
//! A file is read no further than a byte limit (the archive's per-file
//! limit, `--max-file-bytes`): `@/dev/zero` used to read until memory ran
//! out. A directory, a FIFO or anything else that is not a regular file is
//! refused before it is opened, so `@some-fifo` cannot block a run. One
//! trailing line break of a file is dropped, as shell command
//! substitution drops it, so `{{X}}` on its own line stays one line.
//!
//! Errors name the variable and say what is wrong in the library's terms;
//! the CLI puts `--var` in front and maps them to exit 2.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use ctx_history::HistoryError;

use crate::template::is_valid_name;

/// Why a `--var` argument gave no value.
#[derive(Debug, thiserror::Error)]
pub enum VarError {
    /// No `=`.
    #[error("{arg}: expected NAME=VALUE or NAME=@FILE")]
    Syntax {
        /// The argument as given.
        arg: String,
    },
    /// The name is not `[A-Z][A-Z0-9_]*`.
    #[error("{arg}: `{name}` is not a placeholder name ([A-Z][A-Z0-9_]*)")]
    BadName {
        /// The argument as given.
        arg: String,
        /// The name part.
        name: String,
    },
    /// `NAME=@` with nothing after the `@`.
    #[error("{arg}: `@` needs a file name (or `@-` for stdin)")]
    NoFile {
        /// The argument as given.
        arg: String,
    },
    /// The file could not be read: missing, a directory or FIFO, larger
    /// than the limit, an I/O error.
    #[error("{name}: {source}")]
    File {
        /// The variable.
        name: String,
        /// Why, naming the path.
        #[source]
        source: HistoryError,
    },
    /// Standard input could not be read.
    #[error("{name}: <stdin>: {source}")]
    Stdin {
        /// The variable.
        name: String,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// Standard input holds more than the limit.
    #[error("{name}: <stdin>: larger than the limit of {limit} bytes")]
    StdinTooLarge {
        /// The variable.
        name: String,
        /// The limit.
        limit: u64,
    },
    /// The file's bytes are not UTF-8.
    #[error("{name}: {}: not valid UTF-8 (first bad byte at offset {offset})", path.display())]
    NotUtf8 {
        /// The variable.
        name: String,
        /// The file (`-` for stdin).
        path: PathBuf,
        /// The first bad byte.
        offset: usize,
    },
    /// The same name twice.
    #[error("{name} is given more than once")]
    Repeated {
        /// The variable.
        name: String,
    },
}

impl VarError {
    /// Whether the error is the byte limit, which a front end may name
    /// with its flag (`--max-file-bytes`).
    pub fn is_size_limit(&self) -> bool {
        matches!(
            self,
            VarError::StdinTooLarge { .. }
                | VarError::File {
                    source: HistoryError::TooLarge { .. },
                    ..
                }
        )
    }
}

/// One `NAME=…` argument: the name and the value it stands for, files and
/// standard input read no further than `max_file_bytes`.
pub fn parse_var(arg: &str, max_file_bytes: u64) -> Result<(String, String), VarError> {
    let Some((name, value)) = arg.split_once('=') else {
        return Err(VarError::Syntax { arg: arg.into() });
    };
    if !is_valid_name(name) {
        return Err(VarError::BadName {
            arg: arg.into(),
            name: name.into(),
        });
    }
    let value = if let Some(lit) = value.strip_prefix("@@") {
        format!("@{lit}")
    } else if let Some(path) = value.strip_prefix('@') {
        if path.is_empty() {
            return Err(VarError::NoFile { arg: arg.into() });
        }
        let mut text = read_value_file(name, Path::new(path), max_file_bytes)?;
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        text
    } else {
        value.to_string()
    };
    Ok((name.to_string(), value))
}

/// Every argument of `args` ([`parse_var`]), by name; a name given twice
/// is [`VarError::Repeated`].
pub fn parse_vars<S: AsRef<str>>(
    args: &[S],
    max_file_bytes: u64,
) -> Result<BTreeMap<String, String>, VarError> {
    let mut values = BTreeMap::new();
    for arg in args {
        let (name, value) = parse_var(arg.as_ref(), max_file_bytes)?;
        if values.contains_key(&name) {
            return Err(VarError::Repeated { name });
        }
        values.insert(name, value);
    }
    Ok(values)
}

/// The text of `@PATH`: standard input for `-`, else a regular file.
fn read_value_file(name: &str, path: &Path, limit: u64) -> Result<String, VarError> {
    let bytes = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|source| VarError::Stdin {
                name: name.into(),
                source,
            })?;
        if bytes.len() as u64 > limit {
            return Err(VarError::StdinTooLarge {
                name: name.into(),
                limit,
            });
        }
        bytes
    } else {
        ctx_history::markdown::read_bounded(path, limit, "file").map_err(|source| {
            VarError::File {
                name: name.into(),
                source,
            }
        })?
    };
    String::from_utf8(bytes).map_err(|e| VarError::NotUtf8 {
        name: name.into(),
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_spellings_of_a_value() {
        let dir = ctx_test_support::Dir::new();
        let file = dir.write("raw.json", "{\"a\": 1}\r\n");
        let args = [
            "A=plain".to_string(),
            "B=@@at".to_string(),
            format!("C=@{}", file.display()),
        ];
        let values = parse_vars(&args, 1000).unwrap();
        assert_eq!(values["A"], "plain");
        assert_eq!(values["B"], "@at");
        assert_eq!(values["C"], "{\"a\": 1}");
    }

    #[test]
    fn bad_arguments_are_typed_errors_naming_the_variable() {
        let dir = ctx_test_support::Dir::new();
        let big = dir.write("big.txt", "0123456789");
        type Is = fn(&VarError) -> bool;
        let cases: Vec<(String, Is)> = vec![
            ("A".into(), |e| matches!(e, VarError::Syntax { .. })),
            ("a=1".into(), |e| matches!(e, VarError::BadName { .. })),
            ("A=@".into(), |e| matches!(e, VarError::NoFile { .. })),
            (format!("A=@{}", dir.path().display()), |e| {
                matches!(
                    e,
                    VarError::File {
                        source: HistoryError::NotAFile { .. },
                        ..
                    }
                )
            }),
            (format!("A=@{}", big.display()), |e| e.is_size_limit()),
        ];
        for (arg, is) in cases {
            let e = parse_var(&arg, 5).unwrap_err();
            assert!(is(&e), "{arg}: {e:?}");
        }
        let e = parse_vars(&["A=1", "A=2"], 5).unwrap_err();
        assert_eq!(e.to_string(), "A is given more than once");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = ctx_test_support::Dir::new();
        let fifo = dir.path().join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let e = parse_var(&format!("A=@{}", fifo.display()), 100).unwrap_err();
        assert!(
            matches!(
                e,
                VarError::File {
                    source: HistoryError::NotAFile { .. },
                    ..
                }
            ),
            "{e:?}"
        );
    }
}
