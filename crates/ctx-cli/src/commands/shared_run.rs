//! `ctx run PLAN --store postgres://…`: what the CLI says of a run on the
//! shared store. The use case is ctx-worker's [`SharedSession`]: it
//! registers the run (or resumes it by the local rules), works on it here
//! as one worker unless `--no-local` (then it only follows the run while
//! other workers finish it), and reads the report back from the store.
//! Here are only the lines on stderr and the summary, printed as a local
//! run's.

use std::sync::Arc;

use ctx_deps::InferenceEngine;
use ctx_model::Plan;
use ctx_worker::{SharedEvent, SharedSession, SharedSettings};

use super::run::{Executed, Output};
use super::worker::log_event;
use crate::exit::{CliError, CliResult};

/// Runs `plan` on the shared store `settings` name and reports it.
pub fn run(
    plan: Plan,
    engine: Arc<dyn InferenceEngine>,
    settings: SharedSettings,
    output: &Output<'_>,
) -> CliResult {
    let shared = |e| CliError::shared(e, output.plan_path);
    let outcome = crate::runtime::until_stopped(|stop| async move {
        let session = SharedSession::start(plan, engine, settings).await?;
        let run_id = session.run_id().to_string();
        match session.resumed() {
            Some(resume) => eprintln!(
                "resuming run {run_id} in {}: {} reused, {} to run again",
                session.display_url(),
                resume.reuse.len(),
                resume.rerun.len()
            ),
            None => eprintln!("run {run_id} registered in {}", session.display_url()),
        }
        let url = session.display_url().to_string();
        let outcome = session
            .execute_with(stop, |event| match event {
                SharedEvent::Claim(e) => log_event(false, &e),
                SharedEvent::Progress { counts: c, tasks } => eprintln!(
                    "run {run_id}: {} of {tasks} completed, {} failed, {} skipped, {} running",
                    c.completed, c.failed, c.skipped, c.in_progress
                ),
            })
            .await?;
        Ok((run_id, url, outcome))
    })?;
    let (run_id, url, outcome) = outcome.map_err(|e| {
        if let ctx_worker::SharedError::Run(ctx_run::RunError::PeriodBudget(refused)) = &e {
            super::run::annotate_refusal(refused);
        }
        shared(e)
    })?;
    let signal = outcome.stopped;
    let executed = Executed {
        report: outcome.report,
        signal,
        published: outcome.published,
        unpublished: outcome.publish_error,
        alerts: outcome.alerts,
        fallback: outcome.fallback,
        waiting: outcome.waiting,
        withheld: outcome.withheld,
    };
    let exit = super::run::report_run(&executed, output)?;
    // The statements this process sent (registration, claims, reads,
    // commits, or the follower's polls), as `ctx worker` reports them:
    // what scripts/bench-workers.sh adds up per task.
    let trips = outcome.round_trips;
    if signal.is_some() {
        eprintln!("run {run_id} stays open in {url}: workers can finish it ({trips} round trips)");
    } else {
        eprintln!("run {run_id} stored in {url} ({trips} round trips)");
    }
    Ok(exit)
}
