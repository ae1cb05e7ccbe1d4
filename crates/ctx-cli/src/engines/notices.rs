//! What a person sees of an engine's progress events (the engine seam's
//! [`EngineEvent`]: retries, pacing waits, streaming, a refused
//! structured output): on the command's progress bar once it has one,
//! else the ones worth a log line on stderr. One [`Notices`] per command,
//! handed to the engine as its observer when it is built: no global.
//!
//! This is the printer's door of the run's secret mask
//! (`ctx_store::secret_mask`): an event's text can quote the request (a
//! server that rejects `response_format` and echoes the prompt), so every
//! line is masked before it is shown.

use std::sync::{Arc, Mutex};

use ctx_engine_openai::{EngineEvent, Observer};
use ctx_model::display::duration;
use ctx_run::inputs::SecretMask;

/// Where one command shows its engine's events.
#[derive(Clone, Default)]
pub struct Notices {
    bar: Arc<Mutex<Option<indicatif::ProgressBar>>>,
    /// The run's secrets, hidden in every line shown.
    mask: Arc<SecretMask>,
}

impl Notices {
    /// Notices that show every line with `mask`'s secrets hidden.
    pub fn masking(mask: SecretMask) -> Notices {
        Notices {
            mask: Arc::new(mask),
            ..Notices::default()
        }
    }

    /// [`masking`](Self::masking) the run's canary token too, when it
    /// plants one (`ctx_deps::canary`).
    pub fn masking_run(mask: SecretMask, canary: Option<&ctx_deps::Canary>) -> Notices {
        Notices::masking(ctx_deps::canary::mask_with(mask, canary))
    }

    /// Shows the events on `bar` from now on (its message line; retries
    /// are also printed above it). Without a bar, retries go to stderr as
    /// lines.
    pub fn attach(&self, bar: &indicatif::ProgressBar) {
        *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
    }

    /// The observer an engine sends its events to.
    pub fn observer(&self) -> Observer {
        let notices = self.clone();
        Arc::new(move |event| notices.show(event))
    }

    fn show(&self, event: &EngineEvent) {
        let Some(text) = describe(event) else { return };
        let text = self.mask.apply(&text).into_owned();
        let bar = self.bar.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match (bar, lasting(event)) {
            (Some(bar), true) => {
                bar.println(&text);
                bar.set_message(text);
            }
            (Some(bar), false) => bar.set_message(text),
            // No bar: only these are worth a line of their own in a log.
            (None, true) => eprintln!("ctx: {text}"),
            (None, false) => {}
        }
    }
}

/// Whether `event` is worth a line of its own (above the bar, or in a
/// log): a retry, a refused structured output, a flex fallback, a
/// batch's state or counts. The others (pacing, streaming) only update
/// the bar's message.
fn lasting(event: &EngineEvent) -> bool {
    matches!(
        event,
        EngineEvent::Retrying { .. }
            | EngineEvent::StructuredOutputRejected { .. }
            | EngineEvent::FlexFallback { .. }
            | EngineEvent::Batch { .. }
    )
}

/// What a person sees of an [`EngineEvent`].
pub fn describe(event: &EngineEvent) -> Option<String> {
    use ctx_table::printable;
    match event {
        EngineEvent::Retrying {
            task_id,
            failed_attempt,
            max_attempts,
            delay,
            outcome,
        } => Some(format!(
            "task {}: attempt {failed_attempt}/{max_attempts} failed ({}); retrying in {}",
            printable(task_id),
            printable(&outcome.to_string()),
            duration(*delay)
        )),
        EngineEvent::Paced { task_id, wait } => Some(format!(
            "task {}: paced by --rpm/--tpm, sending in {}",
            printable(task_id),
            duration(*wait)
        )),
        // The server's message is its own text: escaped for the terminal.
        EngineEvent::StructuredOutputRejected { task_id, message } => Some(format!(
            "warning: task {}: the server rejected response_format ({}); \
             structured output is off for the rest of the run, the checks still run",
            printable(task_id),
            printable(message)
        )),
        EngineEvent::FlexFallback { task_id, attempt } => Some(format!(
            "task {}: no flex capacity; attempt {attempt} goes at the standard tier (--flex-fallback standard)",
            printable(task_id)
        )),
        EngineEvent::Batch { batch } => Some(format!(
            "batch {}: {}, {} of {} requests completed, {} failed",
            printable(&batch.id),
            printable(&batch.status),
            batch.completed,
            batch.total,
            batch.failed
        )),
        EngineEvent::Streaming { task_id, chars } => Some(format!(
            "task {}: streaming, {chars} characters",
            printable(task_id)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn events_read_well() {
        let e = EngineEvent::Retrying {
            task_id: "3".into(),
            failed_attempt: 1,
            max_attempts: 4,
            delay: Duration::from_millis(1250),
            outcome: "http_429".into(),
        };
        assert_eq!(
            describe(&e).unwrap(),
            "task 3: attempt 1/4 failed (http_429); retrying in 1.2 s"
        );
        let e = EngineEvent::Paced {
            task_id: "3".into(),
            wait: Duration::from_millis(40),
        };
        assert_eq!(
            describe(&e).unwrap(),
            "task 3: paced by --rpm/--tpm, sending in 40 ms"
        );
        let e = EngineEvent::Batch {
            batch: ctx_engine_openai::BatchReport {
                id: "batch_1".into(),
                status: "in_progress".into(),
                total: 3,
                completed: 1,
                failed: 0,
            },
        };
        assert!(lasting(&e));
        assert_eq!(
            describe(&e).unwrap(),
            "batch batch_1: in_progress, 1 of 3 requests completed, 0 failed"
        );
    }
}
