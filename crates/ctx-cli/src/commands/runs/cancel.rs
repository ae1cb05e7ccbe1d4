//! `ctx runs cancel RUN`: cancels the run's live provider batches (`ctx
//! run --batch`) at the provider, and records each cancel with the run
//! (docs/runs.md, "Durable batches").
//!
//! The provider is the one `ctx run` sent the batches to: `--base-url`
//! (default `$OPENAI_BASE_URL`, else OpenAI's) and the API key in
//! `--api-key-env` (default `OPENAI_API_KEY`), read as `ctx run --engine
//! openai` reads them. The run's lock is not taken: a `ctx run` still
//! waiting on the batches sees them cancelled at its next read, and fails
//! the calls they held; a later `ctx run --resume` takes what the batches
//! answered before the cancel and sends the rest again.
//!
//! Exit codes: 0 every live batch cancelled (or none was live), 1 a batch
//! the provider did not cancel (named; the others were still cancelled),
//! 2 an unknown run, a bad flag, or a shared store (which keeps no
//! batches: `--batch` is refused there), 4 a store that cannot be read or
//! written.

use ctx_engine_openai::BatchClient;
use ctx_store_sqlite::{BatchLog, RunRoot};
use ctx_table::printable;

use super::RootArg;
use crate::engines::openai::{OpenAiArgs, config_from};
use crate::exit::{CliError, CliResult, Exit};

// `ctx runs cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// A run id or a run directory.
    #[arg(value_name = "RUN")]
    run: String,
    /// The API root the run's batches were sent to [default:
    /// $OPENAI_BASE_URL, else `https://api.openai.com/v1`].
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Environment variable holding the API key [default: OPENAI_API_KEY].
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    #[command(flatten)]
    root: RootArg,
}

/// `ctx runs cancel`.
pub fn cancel(a: CancelArgs) -> CliResult {
    if a.root.shared()?.is_some() {
        return Err(CliError::usage(
            "ctx runs cancel: a shared store keeps no batches (--batch is refused there)",
        ));
    }
    let dir = RunRoot::new(&a.root.root).resolve(&a.run)?;
    let log = BatchLog::open(&dir)?;
    let live = log.live()?;
    if live.is_empty() {
        println!("{}: no live batch to cancel", printable(&a.run));
        return Ok(Exit::Ok);
    }
    let flags = OpenAiArgs {
        base_url: a.base_url.clone(),
        api_key_env: a.api_key_env.clone(),
        ..OpenAiArgs::default()
    };
    let config = config_from(&flags, |name| std::env::var(name).ok())?;
    let client =
        BatchClient::new(config).map_err(|e| CliError::usage(format!("--base-url: {e}")))?;
    let mut refused = false;
    for batch in live.iter().filter_map(|b| b.id.as_deref()) {
        match crate::runtime::block_on(client.cancel(batch))? {
            Ok(status) => {
                log.record_cancel(&status.report())?;
                println!(
                    "cancelled batch {} (status {})",
                    printable(batch),
                    printable(status.state.name())
                );
            }
            Err(e) => {
                eprintln!(
                    "error: batch {}: {}",
                    printable(batch),
                    printable(&e.to_string())
                );
                refused = true;
            }
        }
    }
    Ok(if refused { Exit::Findings } else { Exit::Ok })
}
