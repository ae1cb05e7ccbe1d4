//! Reading user files and stdin, with errors that name the path.

use std::io::Read;
use std::path::Path;

use crate::exit::{CliError, Exit};

/// Reads `path` as UTF-8 text; `-` reads standard input.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| CliError::usage(format!("<stdin>: {e}")))?;
        return Ok(s);
    }
    let bytes =
        std::fs::read(path).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    utf8_text(path, bytes).map_err(CliError::usage)
}

/// `bytes` read from `path` as text; the error names the path and the
/// offset of the first bad byte.
pub fn utf8_text(path: &Path, bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{}: not valid UTF-8 (first bad byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// [`ctx_run::write_atomic`] (whole or not at all, no temporary file
/// left); its failure, naming the path, exits [`Exit::OutWrite`] (5): an
/// output that cannot be written is not a usage error.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), CliError> {
    ctx_run::write_atomic(path, contents).map_err(|e| CliError::with(Exit::OutWrite, e))
}

/// Writes `text` to standard output and flushes it.
///
/// A closed pipe (`ctx run plan.yaml | head -3`) ends the output quietly:
/// the reader has what it wanted, and the command's own work (a stored run,
/// `--out` files) is already done. `print!` would panic there instead.
pub fn print_stdout(text: &str) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::usage(format!("<stdout>: {e}"))),
    }
}

/// `value` as pretty-printed JSON with a trailing newline: the one JSON
/// layout every `--format json` output and `results.json` use.
pub fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, CliError> {
    ctx_model::json_text(value).map_err(|e| CliError::usage(format!("cannot encode JSON: {e}")))
}
