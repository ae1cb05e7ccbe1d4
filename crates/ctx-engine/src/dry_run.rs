//! `dry-run`: no model is called.

use ctx_model::Attempt;

use crate::{
    BoxFuture, EngineCosts, EngineError, InferenceEngine, InferenceRequest, InferenceResponse,
    RequestPurpose,
};

/// Answers every task with `[dry-run] output of task {id}`, and every
/// summary call with `[dry-run] summary of task {id}` (`... for task
/// {dependent}` under `summary_focus: dependent`).
///
/// The output is deterministic and carries no metadata beyond one attempt of
/// zero milliseconds, so a dry run's prompts and outputs are byte-identical
/// from run to run (they are golden files) and every downstream prompt shows
/// exactly where a real output will go.
#[derive(Debug, Clone, Copy, Default)]
pub struct DryRunEngine;

impl DryRunEngine {
    /// The engine's name as `--engine` takes it.
    pub const NAME: &'static str = "dry-run";

    /// What a dry run costs: nothing. It calls no model, so every task is
    /// priced at $0 whatever its params name, with one attempt per call.
    pub fn costs() -> EngineCosts {
        EngineCosts {
            free: true,
            attempts: 1,
            ..EngineCosts::default()
        }
    }

    /// The output a dry run gives task `task_id`.
    pub fn output_for(task_id: &str) -> String {
        format!("[dry-run] output of task {task_id}")
    }

    /// The summary a dry run gives of task `task_id`'s output, for
    /// `dependent` under `summary_focus: dependent`.
    pub fn summary_for(task_id: &str, dependent: Option<&str>) -> String {
        match dependent {
            Some(d) => format!("[dry-run] summary of task {task_id} for task {d}"),
            None => format!("[dry-run] summary of task {task_id}"),
        }
    }
}

impl InferenceEngine for DryRunEngine {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn answers_prompts(&self) -> bool {
        false
    }

    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            Ok(InferenceResponse {
                output: match &request.purpose {
                    RequestPurpose::Task | RequestPurpose::Judge => {
                        DryRunEngine::output_for(&request.task_id)
                    }
                    RequestPurpose::Summary { dependent } => {
                        DryRunEngine::summary_for(&request.task_id, dependent.as_deref())
                    }
                },
                attempts: vec![Attempt::ok(1, 0)],
                ..InferenceResponse::default()
            })
        })
    }
}
