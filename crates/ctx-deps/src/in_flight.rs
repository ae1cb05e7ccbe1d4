//! The jobs in flight, and the order their completions are settled in.
//!
//! A real engine's calls end when they end, and the executor settles each
//! as it comes back: that is what makes the ready queue fast, and what
//! makes a real run's start order depend on the model's latencies. A dry
//! run's "calls" take no time at all, so which of two jobs comes back
//! first is decided only by the threads of the runtime; settled as they
//! came back, two dry runs of one plan started their tasks in different
//! orders (issue 35: two orders in five runs of the Tetris plan), and
//! neither a golden file nor a library run could be compared with the
//! CLI's.
//!
//! So when the engine answers no prompt, completions are settled in the
//! order their jobs were dispatched ([`InFlight::in_dispatch_order`]): a
//! job that comes back early is held until every job dispatched before it
//! has been settled. Zero-length calls that all take the same time end in
//! the order they started, which is what this models; the ready queue
//! already breaks ties by plan order, so the whole schedule, and every
//! output of a dry run, is a function of the plan alone. A held job still
//! counts as running ([`InFlight::running`]), so the concurrency limit
//! sees the same number either way.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ctx_model::TaskExecutionResult;
use ctx_store::StoreError;
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

/// What a job returns: its task's index and result (`Err`: the store
/// failed).
pub(crate) type JobOutcome = (usize, Result<TaskExecutionResult, StoreError>);

/// A job as it comes back from the [`JoinSet`].
pub(crate) type Joined = Result<(Id, JobOutcome), JoinError>;

/// A job in flight.
pub(crate) struct Dispatched {
    pub(crate) task: usize,
    pub(crate) at: Instant,
    /// Set once the job holds its permit of the dispatch gate (at once
    /// without a gate).
    pub(crate) began: Arc<AtomicBool>,
}

/// The jobs in flight.
#[derive(Default)]
pub(crate) struct InFlight {
    pub(crate) jobs: JoinSet<JobOutcome>,
    /// Each job's task and when it was dispatched; a job is removed when
    /// it is settled, so what is left after a drain was cancelled.
    pub(crate) dispatched: HashMap<Id, Dispatched>,
    /// Settle completions in dispatch order (see the module docs).
    in_order: bool,
    /// With `in_order`: the jobs not yet settled, in dispatch order.
    order: VecDeque<Id>,
    /// With `in_order`: jobs that came back before one dispatched earlier.
    held: HashMap<Id, Joined>,
}

/// The id of the job `joined` is the outcome of.
fn id_of(joined: &Joined) -> Id {
    match joined {
        Ok((id, _)) => *id,
        Err(e) => e.id(),
    }
}

impl InFlight {
    /// Jobs whose completions are settled in dispatch order when
    /// `in_dispatch_order` (a dry run), else as they come back.
    pub(crate) fn new(in_dispatch_order: bool) -> InFlight {
        InFlight {
            in_order: in_dispatch_order,
            ..InFlight::default()
        }
    }

    /// Jobs running or come back but not yet settled: what the
    /// concurrency limit counts.
    pub(crate) fn running(&self) -> usize {
        self.jobs.len() + self.held.len()
    }

    /// Whether no job is running or waiting to be settled.
    pub(crate) fn is_empty(&self) -> bool {
        self.running() == 0
    }

    /// Records a job just spawned on [`Self::jobs`].
    pub(crate) fn dispatched(&mut self, id: Id, job: Dispatched) {
        self.dispatched.insert(id, job);
        if self.in_order {
            self.order.push_back(id);
        }
    }

    /// Takes in a job that came back. Returns it when it is the one to
    /// settle now; in dispatch order, a job that came back before an
    /// earlier one is held and `None` returned.
    pub(crate) fn came_back(&mut self, joined: Joined) -> Option<Joined> {
        if !self.in_order {
            return Some(joined);
        }
        self.held.insert(id_of(&joined), joined);
        self.in_dispatch_order()
    }

    /// In dispatch order: the earliest dispatched job, when it has come
    /// back. Always `None` otherwise.
    pub(crate) fn in_dispatch_order(&mut self) -> Option<Joined> {
        let first = *self.order.front()?;
        let joined = self.held.remove(&first)?;
        self.order.pop_front();
        Some(joined)
    }

    /// Every job that came back and is still held, in dispatch order, for
    /// a drain (the rest are aborted).
    pub(crate) fn take_held(&mut self) -> Vec<Joined> {
        let order = std::mem::take(&mut self.order);
        let mut held: Vec<Joined> = order.iter().filter_map(|id| self.held.remove(id)).collect();
        // Nothing is held that was not dispatched; kept all the same.
        held.extend(self.held.drain().map(|(_, j)| j));
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(flight: &mut InFlight, task: usize, delay_ms: u64) {
        let handle = flight.jobs.spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
            (
                task,
                Ok(TaskExecutionResult::new(
                    task.to_string(),
                    ctx_model::TaskStatus::Completed,
                )),
            )
        });
        flight.dispatched(
            handle.id(),
            Dispatched {
                task,
                at: Instant::now(),
                began: Arc::default(),
            },
        );
    }

    async fn settled(in_order: bool) -> Vec<usize> {
        let mut flight = InFlight::new(in_order);
        for (task, delay) in [(0, 30), (1, 10), (2, 20)] {
            spawn(&mut flight, task, delay);
        }
        let mut order = Vec::new();
        while !flight.is_empty() {
            let next = match flight.in_dispatch_order() {
                Some(j) => Some(j),
                None => {
                    let j = flight.jobs.join_next_with_id().await.expect("a job");
                    flight.came_back(j)
                }
            };
            if let Some(Ok((id, (task, _)))) = next {
                flight.dispatched.remove(&id);
                order.push(task);
            }
            assert!(flight.running() <= 3);
        }
        order
    }

    #[tokio::test(start_paused = true)]
    async fn a_dry_run_settles_in_dispatch_order_a_real_one_as_jobs_come_back() {
        assert_eq!(settled(true).await, [0, 1, 2]);
        assert_eq!(settled(false).await, [1, 2, 0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_job_counts_as_running_and_is_handed_to_a_drain() {
        let mut flight = InFlight::new(true);
        spawn(&mut flight, 0, 30);
        spawn(&mut flight, 1, 10);
        let j = flight.jobs.join_next_with_id().await.unwrap();
        assert!(flight.came_back(j).is_none(), "task 1 waits for task 0");
        assert_eq!(flight.running(), 2);
        let held = flight.take_held();
        assert_eq!(held.len(), 1);
        assert_eq!(flight.running(), 1);
    }
}
