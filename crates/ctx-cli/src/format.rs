//! The `--format` flag shared by every command whose output is either for
//! people or for tools.
//!
//! One enum, so that `--format json` means the same thing everywhere: one
//! JSON object on stdout, keys in the order the command's page in docs/
//! documents, written through [`crate::io::json_text`]. Commands with other
//! renderings (`plan graph`: mermaid, dot; `history`: markdown; `runs
//! export`: csv) keep their own enum.

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people: tables and messages (each command's page in docs/ shows
    /// them).
    Text,
    /// For tools: one JSON object with the keys in the documented order.
    Json,
}
