//! `--engine openai` flags (being built).

/// Flags of the OpenAI-compatible engine.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OpenAiArgs {}
