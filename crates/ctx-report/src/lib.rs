//! A run's report as one self-contained HTML file.
//!
//! [`render_html`] draws a [`RunReportInput`] (a run and its tasks, plain
//! data that also reads from JSON) as a page a user opens in any browser or
//! attaches to a ticket, with nothing fetched from the network:
//!
//! - a **timeline**: one bar per started task from its start to its end,
//!   coloured by state, with markers where an engine call was retried or an
//!   output failed a check, and the run's **actual critical path** (the
//!   chain of tasks each of which waited last for the previous one, ending
//!   with the task that ended last) outlined;
//! - the **dependency graph**, laid out by level;
//! - **totals**: wall time against the critical-path lower bound (the
//!   longest dependency chain by duration), tokens, cost, cache hits,
//!   engine calls;
//! - **per task**: tokens (and how much of each dependency's output was
//!   cut), cost, times, engine calls, each check of each attempt (kind,
//!   passed or failed, message), and the prompt and output, collapsed.
//!
//! Task content is escaped everywhere it appears and the page's
//! Content-Security-Policy admits only its own script, so an output holding
//! `</script>` or `<img onerror=…>` shows as text (see [`html`]). The same
//! input renders to the same bytes.
//!
//! ```
//! use ctx_report::{RunReportInput, RunStatus, TaskReport, TaskState, Timestamp, render_html};
//!
//! let mut task = TaskReport::new("a", TaskState::Completed);
//! task.started_at = Some(Timestamp::from_unix_ms(1_000));
//! task.ended_at = Some(Timestamp::from_unix_ms(3_500));
//! let run = RunReportInput {
//!     run_id: "20261130T101308.299Z-7ab97002".into(),
//!     plan: "plan.yaml".into(),
//!     status: RunStatus::Completed,
//!     started_at: Some(Timestamp::from_unix_ms(1_000)),
//!     ended_at: Some(Timestamp::from_unix_ms(3_600)),
//!     as_of: None,
//!     tasks: vec![task],
//!     published: Vec::new(),
//!     fallback: None,
//!     decisions: Vec::new(),
//! };
//! let html = render_html(&run);
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! assert_eq!(html.matches("<rect class=\"bar ").count(), 1);
//! ```

pub mod analysis;
mod dag;
mod details;
pub mod escape;
mod format;
pub mod from_model;
mod groups;
pub mod html;
pub mod input;
mod table;
mod timeline;
mod totals;

pub use analysis::Analysis;
pub use html::render_html;
pub use input::{
    AttemptOutcome, AttemptReport, CheckAttemptReport, CheckReport, Decision, DependencyCut,
    FallbackNote, FallbackTaskNote, InputError, Published, RunReportInput, RunStatus, ServiceTier,
    TaskReport, TaskState, TierFallback, Timestamp, TimestampError,
};
