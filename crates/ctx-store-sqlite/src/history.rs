//! A run directory read through the seam both stores share
//! ([`RunHistory`]): what `ctx runs report` and `ctx runs export` read,
//! and what a resume is planned from, in the same shape as the shared
//! store gives it.

use ctx_model::Plan;
use ctx_store::{Published, ResultRecord, RunHeader, RunHistory, StoreError};

use crate::RunView;

fn read_error(e: crate::Error) -> StoreError {
    StoreError::wrap(e)
}

impl RunHistory for RunView {
    fn header(&self) -> Result<RunHeader, StoreError> {
        let sessions = self.sessions().map_err(read_error)?;
        let state = self.state().map_err(read_error)?;
        Ok(RunHeader {
            run_id: self.run_id().to_string(),
            state,
            started_at: sessions.first().map(|s| s.started_at.clone()),
            finished_at: sessions.last().and_then(|s| s.finished_at.clone()),
            plan_source: sessions.last().and_then(|s| s.plan_source.clone()),
            location: self.store_path().display().to_string(),
        })
    }

    fn plan(&self) -> Result<Plan, StoreError> {
        RunView::plan(self).map_err(read_error)
    }

    fn latest(&self) -> Result<Vec<ResultRecord>, StoreError> {
        self.results().map_err(read_error)
    }

    fn history(&self, task_id: &str) -> Result<Vec<ResultRecord>, StoreError> {
        RunView::history(self, task_id).map_err(read_error)
    }

    fn inputs(&self) -> Result<Option<ctx_store::RunInputs>, StoreError> {
        RunView::inputs(self).map_err(read_error)
    }

    fn published(&self) -> Result<Vec<Published>, StoreError> {
        RunView::published(self).map_err(read_error)
    }

    fn publish_events(&self) -> Result<Vec<ctx_store::PublishEvent>, StoreError> {
        RunView::publish_events(self).map_err(read_error)
    }

    fn decisions(&self) -> Result<Vec<ctx_model::approval::Decision>, StoreError> {
        RunView::decisions(self).map_err(read_error)
    }

    fn batches(&self) -> Result<Vec<ctx_store::RunBatch>, StoreError> {
        RunView::batches(self).map_err(read_error)
    }

    fn fallback(&self) -> Result<Option<ctx_model::FallbackChoice>, StoreError> {
        RunView::fallback(self).map_err(read_error)
    }
}
