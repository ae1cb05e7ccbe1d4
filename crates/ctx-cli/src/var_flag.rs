//! The `--var NAME=VALUE` flag of `ctx render`, `ctx run`, `ctx plan
//! check` and `ctx plan cost`: read by one library reader
//! ([`ctx_prompt::vars`]), its errors said with the flags.

use std::collections::BTreeMap;

use crate::exit::CliError;

/// Every `--var` value by name; a bad argument, an unreadable file or a
/// repeated name is exit 2 naming the variable.
pub fn values(args: &[String], max_file_bytes: u64) -> Result<BTreeMap<String, String>, CliError> {
    ctx_prompt::vars::parse_vars(args, max_file_bytes).map_err(|e| {
        let limit = if e.is_size_limit() {
            " (--max-file-bytes)"
        } else {
            ""
        };
        CliError::usage(format!("--var {e}{limit}"))
    })
}
