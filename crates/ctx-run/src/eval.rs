//! `ctx eval`'s use case: does the injected context help? A plan runs in
//! variants that leave parts of the context out, and the checks that pass
//! are counted per variant and per task: the originating design's success
//! metric (IMPLEMENTATION_PLAN.md, section 10) as a number.
//!
//! * Variants ([`ContextVariant`]): `full`, prompts as designed;
//!   `no-entities`, without the entity block; `no-dependencies`, without
//!   the dependency outputs; `bare`, the task's own prompt alone. A variant
//!   changes only the prompt: the checks (the `entities` check too) and the
//!   schedule are the same in all of them.
//! * [`EvalSettings::repeat`] runs each variant N times (sampled models
//!   vary). All the variant x repeat runs execute at once on the caller's
//!   runtime, each with its own ready queue, and
//!   [`EvalSettings::concurrency`] is shared by all of them: one
//!   [`ExecutorOptions::dispatch_gate`] holds that many permits, and a task
//!   holds one for its engine work, so the engine never sees more than that
//!   many calls in flight, whichever runs they belong to. Waiting for a
//!   permit does not count against the task timeout. An engine that sends
//!   provider batches ([`InferenceEngine::batch_capacity`], `--batch`)
//!   gets a batch's worth of permits instead, as a run's executor keeps a
//!   batch's worth in flight: every variant's ready calls go as one batch,
//!   and the engine bounds its real-time calls (fallbacks) itself.
//! * The report lists variants in their fixed order whatever order the runs
//!   finished in; a variant's `wall_ms` is the time from the eval's start
//!   to the end of its last run, and `task_ms` the tasks' own time (from
//!   their permit on), which does not depend on what else was running.
//! * Stopping ([`EvalSession::execute`]'s `stop`) stops every run: each
//!   stores its in-flight tasks as interrupted and is closed as an
//!   interrupted run. A run whose store fails stops the others too: their
//!   engine calls would go into a measurement that is not reported.
//! * Budget ([`EvalSettings::cost`] with a `max_cost`): the budget is the
//!   whole eval's, not each run's. One [`SharedBudget`] is shared by every
//!   run, as the dispatch gate is: each task reserves its high end in it
//!   before it starts and settles what it cost, so however the runs
//!   interleave, the eval never spends more than the budget (under the
//!   executor's condition: no call costs more than its task's bound). A
//!   task that waits for budget another run holds is tried again when any
//!   run settles; one that can never fit is skipped with reason `budget`,
//!   and passes none of its checks. The report says what each variant
//!   spent and how many of its tasks the budget skipped.
//! * With [`EvalStore::Sqlite`] every run is an ordinary stored run,
//!   labelled `[eval VARIANT K/N]` after its plan source and its engine
//!   label, so each can be listed, shown and resumed like any other.
//!
//! Two rates are reported, per variant and per task: the checks the first
//! attempt passed (`first_attempt_pass_rate`) and those the final attempt
//! passed (`pass_rate`). The first is the ablation's number: a retry's
//! feedback quotes what a failed check looked for, so a model that follows
//! it passes any variant on its second attempt, whatever the context gave
//! it. With more than one repeat each rate gets a 95 % Wilson score
//! interval ([`Interval`]), and the table marks a variant's rate whose
//! interval overlaps `full`'s.
//!
//! A task's checks count in every run: a task that failed for another
//! reason or was skipped passes none of them, so a variant that breaks a
//! dependency loses its dependents' checks too. `tasks_passing` counts the
//! (run, task) pairs whose checks all passed, over tasks with checks.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument;

use ctx_cost::Usd;
use ctx_deps::{
    ContextVariant, CostOptions, ExecError, ExecutionStore, Executor, ExecutorOptions, GraphError,
    MemoryStore, ProgressEvent, RunReport, SharedBudget,
};
use ctx_engine::InferenceEngine;
use ctx_model::{Plan, TaskStatus};
use ctx_store_sqlite::{NewRun, RunRoot, SessionEnd, SqliteStore, StartAt};
use serde::Serialize;
use tokio::sync::Semaphore;

/// The eval's shared limit on engine work: `concurrency` permits (none
/// for 0, no limit), or, with an engine that sends provider batches, a
/// batch's worth ([`InferenceEngine::batch_capacity`]) when that is more.
/// A batched call waits at the provider, holding no connection: bounded
/// by `concurrency`, the variants' calls would go as many small batches.
/// Such an engine bounds its real-time calls itself (`ctx eval` builds it
/// with `--concurrency` as that bound), as for `ctx run`.
fn dispatch_gate(concurrency: usize, engine: &dyn InferenceEngine) -> Option<Arc<Semaphore>> {
    (concurrency > 0).then(|| Arc::new(Semaphore::new(concurrency.max(engine.batch_capacity()))))
}

/// Every variant, in report order.
pub const ALL_VARIANTS: [ContextVariant; 4] = [
    ContextVariant::Full,
    ContextVariant::NoEntities,
    ContextVariant::NoDependencies,
    ContextVariant::Bare,
];

/// Where the eval's runs are recorded.
#[derive(Debug, Clone)]
pub enum EvalStore {
    /// In memory only.
    Memory,
    /// One stored run per variant x repeat under `root`.
    Sqlite {
        /// The store root.
        root: RunRoot,
        /// Where the plan came from, shown (with the run's `[eval ...]`
        /// tag) as its plan source.
        plan_source: String,
    },
}

/// How an eval runs. The defaults are `ctx run`'s.
#[derive(Debug, Clone)]
pub struct EvalSettings {
    /// The variants to run (duplicates are dropped; the report keeps
    /// [`ALL_VARIANTS`]' order). Empty: all four.
    pub variants: Vec<ContextVariant>,
    /// Runs of each variant, at least 1.
    pub repeat: u32,
    /// Most engine calls in flight at once over all the runs; 0 means
    /// unlimited. With an engine that sends provider batches, a batch's
    /// worth when that is more ([`InferenceEngine::batch_capacity`]); the
    /// engine bounds its real-time calls.
    pub concurrency: usize,
    /// How long one task's engine work may take.
    pub task_timeout: Option<Duration>,
    /// Most bytes one task's output may have.
    pub max_output_bytes: usize,
    /// Where the runs are recorded.
    pub store: EvalStore,
    /// Prices, so each task's `cost_usd` is recorded and the report says
    /// what each variant spent; with `max_cost`, the budget of the whole
    /// eval (module documentation). `already_spent` and `shared_budget`
    /// are not used: the eval makes the shared budget itself.
    pub cost: Option<CostOptions>,
    /// The texts of the plan's secret variables, which no run's
    /// `prompt_cache_key` is computed from
    /// ([`ExecutorOptions::secret_mask`]). An eval with a secret runs
    /// without a store, so nothing else needs it.
    pub secret_mask: ctx_store::SecretMask,
    /// The canary every variant's calls carry, when the plan plants one
    /// (`ExecutorOptions::canary`); `None`: each variant's run makes its
    /// own.
    pub canary: Option<ctx_deps::Canary>,
}

impl Default for EvalSettings {
    fn default() -> Self {
        EvalSettings {
            variants: Vec::new(),
            repeat: 1,
            concurrency: ctx_deps::DEFAULT_CONCURRENCY,
            task_timeout: Some(ctx_deps::DEFAULT_TASK_TIMEOUT),
            max_output_bytes: ctx_deps::DEFAULT_MAX_OUTPUT_BYTES,
            store: EvalStore::Memory,
            cost: None,
            secret_mask: ctx_store::SecretMask::default(),
            canary: None,
        }
    }
}

/// Why an eval could not start, or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// No task has a check: there is nothing to measure.
    #[error(
        "the plan has no checks, so there is nothing to measure (add `checks:` to tasks or `config.checks`)"
    )]
    NoChecks,
    /// `repeat` was 0.
    #[error("repeat must be at least 1")]
    NoRepeat,
    /// The engine's outputs are placeholders (the dry-run engine): checks
    /// on them measure nothing.
    #[error(
        "an eval needs an engine that answers prompts: the {engine} engine's outputs are placeholders"
    )]
    PlaceholderEngine {
        /// The engine's name.
        engine: String,
    },
    /// A stored run could not be started or closed;
    /// [`ctx_store_sqlite::Error::is_not_found`] tells a missing root
    /// apart.
    #[error(transparent)]
    Store(#[from] ctx_store_sqlite::Error),
    /// The plan's dependency graph is not a DAG (a validated plan never
    /// is).
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A run stopped because its store failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// A run's task, or a store call on the blocking pool, did not return
    /// (it panicked, or the runtime is shutting down).
    #[error("an eval run stopped unexpectedly: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// One variant x repeat run of an eval.
pub struct EvalRun {
    /// Its variant.
    pub variant: ContextVariant,
    /// Which repeat of the variant it is (1-based).
    pub repeat: u32,
    executor: Arc<Executor>,
    store: Option<Arc<SqliteStore>>,
}

impl std::fmt::Debug for EvalRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalRun")
            .field("variant", &self.variant)
            .field("repeat", &self.repeat)
            .field("run_id", &self.run_id())
            .finish_non_exhaustive()
    }
}

impl EvalRun {
    /// Its stored run's id (`None` in memory).
    pub fn run_id(&self) -> Option<&str> {
        self.store.as_deref().map(SqliteStore::run_id)
    }
}

/// An eval whose runs are set up (and, in a store, recorded as started):
/// [`execute`](Self::execute) runs them.
#[derive(Debug)]
pub struct EvalSession {
    plan: Plan,
    variants: Vec<ContextVariant>,
    /// Checks per task, in plan order (config's, then the task's own).
    checks: Vec<usize>,
    runs: Vec<EvalRun>,
    /// The eval's budget, shared by every run.
    budget: Option<SharedBudget>,
}

/// How an eval ended.
#[derive(Debug, Clone)]
pub enum EvalOutcome {
    /// Every run ran to its end.
    Finished(EvalReport),
    /// A stop came first; the runs so far are stored (as interrupted).
    Interrupted,
}

impl EvalSession {
    /// Checks that the plan has checks and the engine answers prompts, then
    /// sets up every variant x repeat run (in report order: variant, then
    /// repeat), starting a stored run for each with [`EvalStore::Sqlite`].
    pub fn start(
        plan: Plan,
        engine: Arc<dyn InferenceEngine>,
        settings: EvalSettings,
    ) -> Result<EvalSession, EvalError> {
        if settings.repeat == 0 {
            return Err(EvalError::NoRepeat);
        }
        let checks: Vec<usize> = plan
            .sub_tasks
            .iter()
            .map(|t| ctx_model::task_checks(&plan, t).len())
            .collect();
        if checks.iter().all(|&n| n == 0) {
            return Err(EvalError::NoChecks);
        }
        if !engine.answers_prompts() {
            return Err(EvalError::PlaceholderEngine {
                engine: engine.name().to_string(),
            });
        }
        let mut variants = settings.variants.clone();
        if variants.is_empty() {
            variants = ALL_VARIANTS.to_vec();
        }
        variants.sort();
        variants.dedup();
        let label = engine.label();
        let gate = dispatch_gate(settings.concurrency, engine.as_ref());
        let budget = settings
            .cost
            .as_ref()
            .and_then(|c| c.max_cost)
            .map(SharedBudget::new);
        let cost = settings.cost.as_ref().map(|c| CostOptions {
            already_spent: Usd::ZERO,
            shared_budget: budget.clone(),
            ..c.clone()
        });
        let mut runs = Vec::with_capacity(variants.len() * settings.repeat as usize);
        for &variant in &variants {
            for k in 1..=settings.repeat {
                let options = ExecutorOptions {
                    concurrency: settings.concurrency,
                    task_timeout: settings.task_timeout,
                    max_output_bytes: settings.max_output_bytes,
                    context: variant,
                    dispatch_gate: gate.clone(),
                    cost: cost.clone(),
                    secret_mask: settings.secret_mask.clone(),
                    canary: settings.canary.clone(),
                    // An eval never waits: its variants publish nothing,
                    // and a gated task runs as if approved.
                    ignore_gates: true,
                    ..ExecutorOptions::default()
                };
                let (store, sqlite): (Arc<dyn ExecutionStore>, _) = match &settings.store {
                    EvalStore::Memory => (Arc::new(MemoryStore::new()), None),
                    EvalStore::Sqlite { root, plan_source } => {
                        let tag = format!("[eval {} {k}/{}]", variant.as_str(), settings.repeat);
                        let new = NewRun {
                            plan: &plan,
                            engine: &format!("{label} {tag}"),
                            plan_source: Some(&format!("{plan_source} {tag}")),
                            inputs: None,
                        };
                        let (store, _) = root.start(StartAt::NewRun, &new)?;
                        let store = Arc::new(store);
                        (Arc::clone(&store) as Arc<dyn ExecutionStore>, Some(store))
                    }
                };
                let executor = Executor::new(plan.clone(), Arc::clone(&engine), store, options)?;
                runs.push(EvalRun {
                    variant,
                    repeat: k,
                    executor: Arc::new(executor),
                    store: sqlite,
                });
            }
        }
        Ok(EvalSession {
            plan,
            variants,
            checks,
            runs,
            budget,
        })
    }

    /// The runs, in report order.
    pub fn runs(&self) -> &[EvalRun] {
        &self.runs
    }

    /// How many task executions the eval makes (for a progress bar).
    pub fn tasks(&self) -> usize {
        self.runs.len() * self.plan.sub_tasks.len()
    }

    /// Runs every run at once on the current runtime until all have ended
    /// or `stop` resolves, closes each stored run (finished or
    /// interrupted, on the blocking pool) whatever became of the others,
    /// and scores them. `progress` gets every run's executor events.
    pub async fn execute<S, P>(self, stop: S, progress: P) -> Result<EvalOutcome, EvalError>
    where
        S: Future<Output = ()> + Send,
        P: FnMut(&ProgressEvent) + Send + 'static,
    {
        let progress = Arc::new(Mutex::new(progress));
        let (stopping, stopped) = tokio::sync::watch::channel(false);
        let started = Instant::now();
        let mut jobs = tokio::task::JoinSet::new();
        for (k, run) in self.runs.iter().enumerate() {
            let executor = Arc::clone(&run.executor);
            let mut stopped = stopped.clone();
            let progress = Arc::clone(&progress);
            // One trace per variant run: `eval {variant} #{repeat}`.
            let span = ctx_deps::spans::workflow_span(
                &format!("eval {} #{}", run.variant.as_str(), run.repeat),
                run.store.as_ref().map(|s| s.run_id()),
                false,
            );
            jobs.spawn(
                async move {
                    let cancel = async move {
                        // Resolves once the stop is sent.
                        let _ = stopped.wait_for(|&s| s).await;
                    };
                    let report = executor
                        .run_with(cancel, move |e| {
                            if let Ok(mut p) = progress.lock() {
                                p(e);
                            }
                        })
                        .await;
                    (k, report, started.elapsed())
                }
                .instrument(span),
            );
        }
        let mut outcomes: Vec<Option<(Result<RunReport, ExecError>, Duration)>> =
            (0..self.runs.len()).map(|_| None).collect();
        let mut signalled = false;
        let mut unexpected = None;
        tokio::pin!(stop);
        loop {
            tokio::select! {
                // A stop is seen before any further run's end.
                biased;
                () = &mut stop, if !signalled => {
                    signalled = true;
                    // Every run stops; a run that has ended ignores it.
                    let _ = stopping.send(true);
                }
                joined = jobs.join_next() => match joined {
                    None => break,
                    Some(Ok((k, report, ended))) => {
                        if report.is_err() {
                            let _ = stopping.send(true);
                        }
                        if let Some(slot) = outcomes.get_mut(k) {
                            *slot = Some((report, ended));
                        }
                    }
                    Some(Err(e)) => {
                        let _ = stopping.send(true);
                        unexpected.get_or_insert(e);
                    }
                },
            }
        }
        // Each stored run is closed whatever became of the others; the
        // first failure is reported after.
        let mut failure: Option<EvalError> = unexpected.map(EvalError::from);
        let mut interrupted = signalled;
        let mut reports = Vec::with_capacity(self.runs.len());
        for (run, outcome) in self.runs.iter().zip(outcomes) {
            let Some((outcome, wall)) = outcome else {
                if let Some(store) = &run.store {
                    let _ = finish(store, SessionEnd::Interrupted).await;
                }
                continue;
            };
            match outcome {
                Ok(report) => {
                    if let Some(store) = &run.store {
                        let end = if report.interrupted {
                            SessionEnd::Interrupted
                        } else {
                            SessionEnd::Finished
                        };
                        if let Err(e) = finish(store, end).await {
                            failure.get_or_insert(e);
                        }
                    }
                    interrupted |= report.interrupted;
                    reports.push((run, report, wall));
                }
                Err(e) => {
                    if let Some(store) = &run.store {
                        // The run stopped on a store error; closing it may
                        // fail the same way, and the first error is the
                        // one reported.
                        let _ = finish(store, SessionEnd::Interrupted).await;
                    }
                    failure.get_or_insert(EvalError::Exec(e));
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if interrupted {
            return Ok(EvalOutcome::Interrupted);
        }
        Ok(EvalOutcome::Finished(self.score(&reports)))
    }

    /// The report over every run's results.
    fn score(&self, reports: &[(&EvalRun, RunReport, Duration)]) -> EvalReport {
        let repeated = self.runs.iter().any(|r| r.repeat > 1);
        let mut rows = self.tally_runs(reports);
        for (v, _) in &mut rows {
            v.set_rates(repeated);
        }
        let tasks = self.task_rates(&rows, repeated);
        let variants: Vec<VariantScore> = rows.into_iter().map(|(v, _)| v).collect();
        let spent_usd = variants
            .iter()
            .filter_map(|v| v.spent_usd)
            .reduce(Usd::saturating_add);
        EvalReport {
            variants,
            tasks,
            spent_usd,
            budget_usd: self.budget.as_ref().map(|b| b.ledger().budget()),
            baseline: None,
        }
    }

    /// Each variant's totals over its runs, with its checks counted per
    /// task, in the order the variants were asked for.
    fn tally_runs(
        &self,
        reports: &[(&EvalRun, RunReport, Duration)],
    ) -> Vec<(VariantScore, Vec<Tally>)> {
        let mut rows: Vec<(VariantScore, Vec<Tally>)> = self
            .variants
            .iter()
            .map(|v| {
                (
                    VariantScore::new(v.as_str()),
                    vec![Tally::default(); self.plan.sub_tasks.len()],
                )
            })
            .collect();
        for (run, report, wall) in reports {
            let Some(i) = self.variants.iter().position(|v| *v == run.variant) else {
                continue;
            };
            let (v, per_task) = &mut rows[i];
            if let Some(id) = run.run_id() {
                v.run_ids.push(id.to_string());
            }
            // The runs overlap: a variant's wall time is the eval's, up to
            // the end of its last run.
            v.wall_ms = v
                .wall_ms
                .max(u64::try_from(wall.as_millis()).unwrap_or(u64::MAX));
            v.runs += 1;
            v.tally(&self.plan, &self.checks, report, per_task);
        }
        rows
    }

    /// The pass rates of each checked task, per variant (with their
    /// intervals when the runs were repeated).
    fn task_rates(&self, rows: &[(VariantScore, Vec<Tally>)], repeated: bool) -> Vec<TaskRates> {
        self.plan
            .sub_tasks
            .iter()
            .enumerate()
            .filter(|(i, _)| self.checks[*i] > 0)
            .map(|(i, t)| {
                let rates = |passed: fn(&Tally) -> u64| -> BTreeMap<&'static str, f64> {
                    rows.iter()
                        .map(|(v, per)| (v.name, rate(passed(&per[i]), per[i].total)))
                        .collect()
                };
                let intervals = |passed: fn(&Tally) -> u64| -> BTreeMap<&'static str, Interval> {
                    rows.iter()
                        .filter(|_| repeated)
                        .filter_map(|(v, per)| {
                            Some((v.name, Interval::wilson(passed(&per[i]), per[i].total)?))
                        })
                        .collect()
                };
                TaskRates {
                    task_id: t.id.clone(),
                    checks: self.checks[i],
                    first_attempt_pass_rate: rates(|c| c.first),
                    first_attempt_interval: intervals(|c| c.first),
                    pass_rate: rates(|c| c.last),
                    interval: intervals(|c| c.last),
                }
            })
            .collect()
    }
}

/// Closes a stored run on the blocking pool (a SQLite write and fsync).
async fn finish(store: &Arc<SqliteStore>, end: SessionEnd) -> Result<(), EvalError> {
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || store.finish(end)).await??;
    Ok(())
}

/// What `ctx eval --format json` prints: per variant, then per task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// One row per variant, in [`ALL_VARIANTS`]' order.
    pub variants: Vec<VariantScore>,
    /// One row per task with checks, in plan order.
    pub tasks: Vec<TaskRates>,
    /// What the whole eval spent (the known costs of every run), when it
    /// had prices.
    pub spent_usd: Option<Usd>,
    /// The eval's budget, when it had one: `spent_usd` never exceeds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<Usd>,
    /// With `--baseline`: each variant's rates against a stored eval's
    /// ([`crate::eval_baseline`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Box<crate::eval_baseline::BaselineComparison>>,
}

/// One variant's totals over its runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantScore {
    /// The variant (`full`, `no-entities`, `no-dependencies`, `bare`).
    pub name: &'static str,
    /// Runs made.
    pub runs: u32,
    /// Checks the first attempt passed, over every run: the answer to the
    /// prompt alone, before any retry feedback (module documentation).
    pub first_attempt_checks_passed: u64,
    /// Checks the final attempt passed, over every run.
    pub checks_passed: u64,
    /// Checks counted, over every run.
    pub checks_total: u64,
    /// `first_attempt_checks_passed / checks_total`, rounded to 4 places:
    /// the ablation's number.
    pub first_attempt_pass_rate: f64,
    /// With more than one repeat, the 95 % Wilson score interval of
    /// `first_attempt_pass_rate` over the checks counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_attempt_interval: Option<Interval>,
    /// `checks_passed / checks_total`, rounded to 4 places: retries with
    /// feedback included.
    pub pass_rate: f64,
    /// With more than one repeat, the 95 % Wilson score interval of
    /// `pass_rate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// (run, task) pairs whose checks all passed.
    pub tasks_passing: u64,
    /// (run, task) pairs with checks.
    pub tasks_checked: u64,
    /// When the plan plants a canary (docs/security.md): the attempts
    /// whose output repeated the run's token, over every run, each check
    /// attempt counted (a first answer that gave the token away counts
    /// even when its retry passed). Left out of JSON for a plan without
    /// one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_failures: Option<u64>,
    /// Prompt tokens the engine reported, over every run; `None` (JSON
    /// `null`, `-` in the table) when no call reported any (a command
    /// engine reports no usage): "not reported", never a 0 that sits
    /// beside money spent. Tasks are priced on ctx's own counts then
    /// (docs/cost.md), which `ctx runs show` lists per task.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens the engine reported, over every run; `None` as
    /// for `prompt_tokens`.
    pub completion_tokens: Option<u64>,
    /// From the eval's start to the end of this variant's last run (the
    /// runs of all variants overlap).
    pub wall_ms: u64,
    /// The tasks' own time summed over the variant's runs (from holding a
    /// slot of the shared concurrency to their result): what the variant
    /// cost in engine time, whatever it waited for.
    pub task_ms: u64,
    /// What the variant's runs spent (the known `cost_usd` of the tasks
    /// they executed), when the eval had prices.
    pub spent_usd: Option<Usd>,
    /// Tasks executed whose cost is unknown (no price for their model).
    pub cost_unknown: u64,
    /// (run, task) pairs the budget skipped (themselves or upstream):
    /// their checks count as not passed.
    pub budget_skipped: u64,
    /// The stored runs' ids (none in memory).
    pub run_ids: Vec<String>,
}

impl VariantScore {
    pub(crate) fn new(name: &'static str) -> VariantScore {
        VariantScore {
            name,
            runs: 0,
            first_attempt_checks_passed: 0,
            checks_passed: 0,
            checks_total: 0,
            first_attempt_pass_rate: 0.0,
            first_attempt_interval: None,
            pass_rate: 0.0,
            interval: None,
            tasks_passing: 0,
            tasks_checked: 0,
            canary_failures: None,
            prompt_tokens: None,
            completion_tokens: None,
            wall_ms: 0,
            task_ms: 0,
            spent_usd: None,
            cost_unknown: 0,
            budget_skipped: 0,
            run_ids: Vec::new(),
        }
    }

    /// The variant's overall first-attempt and final pass rates, with
    /// their 95 % intervals when the runs were repeated.
    fn set_rates(&mut self, repeated: bool) {
        let (first, last, total) = (
            self.first_attempt_checks_passed,
            self.checks_passed,
            self.checks_total,
        );
        self.first_attempt_pass_rate = rate(first, total);
        self.pass_rate = rate(last, total);
        if repeated {
            self.first_attempt_interval = Interval::wilson(first, total);
            self.interval = Interval::wilson(last, total);
        }
    }

    /// Adds one run's checks, tokens, task time and passing tasks.
    fn tally(&mut self, plan: &Plan, checks: &[usize], report: &RunReport, per_task: &mut [Tally]) {
        if let Some(cost) = report.cost {
            self.spent_usd = Some(
                self.spent_usd
                    .unwrap_or(Usd::ZERO)
                    .saturating_add(cost.spent),
            );
            self.cost_unknown += cost.unknown as u64;
        }
        self.budget_skipped += report
            .results
            .iter()
            .filter(|r| ctx_deps::is_budget_skip(r))
            .count() as u64;
        self.tally_results(plan, checks, &report.results, per_task);
    }

    /// Adds one run's results: its checks, tokens, task time and passing
    /// tasks (a stored run's too: `--baseline`).
    pub(crate) fn tally_results(
        &mut self,
        plan: &Plan,
        checks: &[usize],
        results_of_run: &[ctx_model::TaskExecutionResult],
        per_task: &mut [Tally],
    ) {
        if ctx_model::plan_has_canary(plan) {
            let repeated: u64 = results_of_run.iter().map(canary_failures).sum();
            self.canary_failures = Some(self.canary_failures.unwrap_or(0) + repeated);
        }
        for (i, task) in plan.sub_tasks.iter().enumerate() {
            // A map task's checks run on its items: each item counts as one
            // run of the task's checks (the map task's own result, a count
            // of items, has none). An empty list counts no check.
            let results: Vec<Option<&ctx_model::TaskExecutionResult>> = if task.map.is_some() {
                results_of_run
                    .iter()
                    .filter(|r| {
                        ctx_model::map::parse_item_id(&r.task_id).is_some_and(|(m, _)| m == task.id)
                    })
                    .map(Some)
                    .collect()
            } else {
                vec![results_of_run.iter().find(|r| r.task_id == task.id)]
            };
            if results.is_empty() {
                continue;
            }
            let mut all_passed = true;
            for result in results {
                if let Some(u) = result.and_then(|r| r.metadata.tokens_used) {
                    let add = |sum: Option<u64>, n: u64| Some(sum.unwrap_or(0).saturating_add(n));
                    self.prompt_tokens = add(self.prompt_tokens, u.prompt_tokens);
                    self.completion_tokens = add(self.completion_tokens, u.completion_tokens);
                }
                if let Some(ms) = result.and_then(|r| r.metadata.execution_time_ms) {
                    self.task_ms = self.task_ms.saturating_add(ms);
                }
                let total = checks[i] as u64;
                if total == 0 {
                    continue;
                }
                // Checks only count when they ran: a task that failed
                // otherwise or was skipped passes none.
                let ran = result
                    .filter(|r| matches!(r.status, TaskStatus::Completed | TaskStatus::Failed));
                let count = |checks: &[ctx_checks::CheckResult]| {
                    checks.iter().filter(|c| c.passed).count() as u64
                };
                let passed = ran.map_or(0, |r| count(&r.metadata.checks));
                // The first attempt's checks: an attempt whose call failed
                // ran none, so passed none.
                let first = ran.map_or(0, |r| match r.metadata.check_attempts.first() {
                    Some(a) => count(&a.checks),
                    None => count(&r.metadata.checks),
                });
                self.checks_total += total;
                self.checks_passed += passed;
                self.first_attempt_checks_passed += first;
                all_passed &= passed == total;
                per_task[i].first += first;
                per_task[i].last += passed;
                per_task[i].total += total;
            }
            if checks[i] > 0 {
                self.tasks_checked += 1;
                if all_passed {
                    self.tasks_passing += 1;
                }
            }
        }
    }
}

/// One task's pass rates in each variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRates {
    /// The task.
    pub task_id: String,
    /// Its checks (config's and its own).
    pub checks: usize,
    /// Checks its first attempt passed over checks counted, per variant
    /// name.
    pub first_attempt_pass_rate: BTreeMap<&'static str, f64>,
    /// With more than one repeat, the 95 % Wilson interval of each
    /// `first_attempt_pass_rate`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub first_attempt_interval: BTreeMap<&'static str, Interval>,
    /// Checks its final attempt passed over checks counted, per variant
    /// name.
    pub pass_rate: BTreeMap<&'static str, f64>,
    /// With more than one repeat, the 95 % Wilson interval of each
    /// `pass_rate`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub interval: BTreeMap<&'static str, Interval>,
}

/// Checks counted for one task in one variant: passed on the first
/// attempt, passed on the final attempt, counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    first: u64,
    last: u64,
    total: u64,
}

/// A 95 % confidence interval of a pass rate, rounded to 4 places.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Its lower end.
    pub low: f64,
    /// Its upper end.
    pub high: f64,
}

/// The normal quantile of a two-sided 95 % interval.
const Z_95: f64 = 1.959_963_984_540_054;

impl Interval {
    /// The Wilson score interval of `passed` successes in `total` checks
    /// (`None` without checks). Wilson's, not the normal approximation
    /// `p ± z·sqrt(p(1-p)/n)`: that one collapses to a point at 0 % and
    /// 100 %, which an ablation reaches often, and leaves [0, 1] for small
    /// counts; Wilson's stays inside [0, 1] and is wide where few checks
    /// were counted.
    pub fn wilson(passed: u64, total: u64) -> Option<Interval> {
        if total == 0 {
            return None;
        }
        let n = total as f64;
        let p = passed.min(total) as f64 / n;
        let z2 = Z_95 * Z_95;
        let denominator = 1.0 + z2 / n;
        let center = (p + z2 / (2.0 * n)) / denominator;
        let half = Z_95 / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
        let round = |x: f64| (x.clamp(0.0, 1.0) * 10_000.0).round() / 10_000.0;
        Some(Interval {
            low: round(center - half),
            high: round(center + half),
        })
    }

    /// Whether the two intervals overlap: a difference between their rates
    /// that they do not separate.
    pub fn overlaps(self, other: Interval) -> bool {
        self.low <= other.high && other.low <= self.high
    }
}

pub(crate) fn rate(passed: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        // Rounded to 4 places so the JSON is stable to read and compare.
        ((passed as f64 / total as f64) * 10_000.0).round() / 10_000.0
    }
}

/// `$0.001234`, and how many executed tasks have no known cost.
fn spent_text(spent: Usd, unknown: u64) -> String {
    if unknown == 0 {
        ctx_deps::dollars(spent)
    } else {
        format!("{} + {unknown} unpriced", ctx_deps::dollars(spent))
    }
}

pub(crate) fn percent(r: f64) -> String {
    format!("{:.0} %", r * 100.0)
}

/// The mark of a rate whose 95 % interval overlaps full's: the difference
/// from `full` may be chance.
const UNSEPARATED: &str = "~";

/// Whether a cell of `cells` carries the not-separated mark.
fn marked(cells: &[String]) -> bool {
    cells.iter().any(|c| c.ends_with(UNSEPARATED))
}

/// A pass rate, with its 95 % interval when there is one (`58 % [31-81]`),
/// marked [`UNSEPARATED`] when `full` (the same rate of the `full` variant,
/// `None` for `full` itself) has an interval that overlaps it.
fn rate_cell(rate: f64, interval: Option<Interval>, full: Option<Interval>) -> String {
    let Some(i) = interval else {
        return percent(rate);
    };
    let mark = if full.is_some_and(|f| f.overlaps(i)) {
        format!(" {UNSEPARATED}")
    } else {
        String::new()
    };
    format!(
        "{} [{:.0}-{:.0}]{mark}",
        percent(rate),
        i.low * 100.0,
        i.high * 100.0
    )
}

/// The attempts of `result` whose `canary` check failed: each check
/// attempt, or the final checks when the task was tried once.
fn canary_failures(result: &ctx_model::TaskExecutionResult) -> u64 {
    let failed = |checks: &[ctx_checks::CheckResult]| {
        checks
            .iter()
            .any(|c| c.kind == ctx_checks::CheckKind::Canary && !c.passed)
    };
    let attempts = &result.metadata.check_attempts;
    if attempts.is_empty() {
        u64::from(failed(&result.metadata.checks))
    } else {
        attempts.iter().filter(|a| failed(&a.checks)).count() as u64
    }
}

/// A token count the engine reported, or `-` when it reported none.
fn reported(tokens: Option<u64>) -> String {
    tokens.map_or_else(|| "-".to_string(), |n| n.to_string())
}

impl EvalReport {
    /// The text `ctx eval` prints: one row per variant (with a CANARY
    /// column, the attempts that repeated the run's canary token, when the
    /// plan plants one; with a SPENT
    /// column when the eval had a budget or some task a known, non-zero
    /// cost: an eval whose models have no price shows no column of
    /// zeros), one row per task with its pass rate in each variant, what
    /// the eval spent, then the stored runs' ids.
    pub fn text(&self) -> String {
        let priced =
            self.budget_usd.is_some() || self.spent_usd.is_some_and(|spent| spent > Usd::ZERO);
        let (mut out, variants_unseparated) = self.variant_table(priced);
        out.push('\n');
        let (tasks, tasks_unseparated) = self.task_table();
        out.push_str(&tasks);
        if variants_unseparated || tasks_unseparated {
            out.push_str(&format!(
                "\n{UNSEPARATED}: not separated from full (the 95 % intervals overlap)\n"
            ));
        }
        out.push_str(&self.footer(priced));
        out
    }

    /// The table of variants, and whether a rate in it is marked as not
    /// separated from `full`'s.
    fn variant_table(&self, priced: bool) -> (String, bool) {
        let full = self.variants.iter().find(|v| v.name == "full");
        let rows: Vec<Vec<String>> = self
            .variants
            .iter()
            .map(|v| {
                let mut row = vec![
                    v.name.to_string(),
                    v.runs.to_string(),
                    v.checks_total.to_string(),
                    rate_cell(
                        v.first_attempt_pass_rate,
                        v.first_attempt_interval,
                        full.filter(|f| f.name != v.name)
                            .and_then(|f| f.first_attempt_interval),
                    ),
                    rate_cell(
                        v.pass_rate,
                        v.interval,
                        full.filter(|f| f.name != v.name).and_then(|f| f.interval),
                    ),
                    format!("{}/{}", v.tasks_passing, v.tasks_checked),
                    reported(v.prompt_tokens),
                    reported(v.completion_tokens),
                    ctx_model::display::duration(std::time::Duration::from_millis(v.wall_ms)),
                ];
                if let Some(n) = v.canary_failures {
                    row.push(n.to_string());
                }
                if priced {
                    row.push(spent_text(v.spent_usd.unwrap_or(Usd::ZERO), v.cost_unknown));
                }
                row
            })
            .collect();
        let mut header = vec![
            "VARIANT",
            "RUNS",
            "CHECKS",
            "FIRST-TRY PASS",
            "FINAL PASS",
            "TASKS PASSING",
            "PROMPT TOK",
            "COMPL TOK",
            "WALL",
        ];
        if self.variants.iter().any(|v| v.canary_failures.is_some()) {
            header.push("CANARY");
        }
        if priced {
            header.push("SPENT");
        }
        let right: Vec<bool> = header.iter().enumerate().map(|(i, _)| i > 0).collect();
        let unseparated = rows.iter().any(|r| marked(&r[3..5]));
        (ctx_table::render(&header, &right, &rows), unseparated)
    }

    /// The table of checked tasks, each variant's first and final rates,
    /// and whether a rate in it is marked as not separated from `full`'s.
    fn task_table(&self) -> (String, bool) {
        let names: Vec<String> = self
            .variants
            .iter()
            .map(|v| format!("{} (first / final)", v.name))
            .collect();
        let mut header = vec!["TASK", "CHECKS"];
        header.extend(names.iter().map(String::as_str));
        let right: Vec<bool> = header.iter().enumerate().map(|(i, _)| i > 0).collect();
        let rows: Vec<Vec<String>> = self
            .tasks
            .iter()
            .map(|t| {
                let mut row = vec![t.task_id.clone(), t.checks.to_string()];
                row.extend(self.variants.iter().map(|v| {
                    // Compared with full's interval for the same task.
                    let of_full = |m: &BTreeMap<&str, Interval>| {
                        (v.name != "full").then(|| m.get("full").copied()).flatten()
                    };
                    let cell =
                        |rates: &BTreeMap<&str, f64>, intervals: &BTreeMap<&str, Interval>| {
                            rates.get(v.name).map_or_else(String::new, |r| {
                                rate_cell(*r, intervals.get(v.name).copied(), of_full(intervals))
                            })
                        };
                    format!(
                        "{} / {}",
                        cell(&t.first_attempt_pass_rate, &t.first_attempt_interval),
                        cell(&t.pass_rate, &t.interval)
                    )
                }));
                row
            })
            .collect();
        let unseparated = rows.iter().any(|r| marked(&r[2..]));
        (ctx_table::render(&header, &right, &rows), unseparated)
    }

    /// What was spent (of the budget), the runs' ids, and the comparison
    /// with a baseline.
    fn footer(&self, priced: bool) -> String {
        let mut out = String::new();
        if let Some(spent) = self.spent_usd.filter(|_| priced) {
            let unknown: u64 = self.variants.iter().map(|v| v.cost_unknown).sum();
            out.push_str(&format!("\nspent: {}", spent_text(spent, unknown)));
            if let Some(budget) = self.budget_usd {
                let skipped: u64 = self.variants.iter().map(|v| v.budget_skipped).sum();
                out.push_str(&format!(
                    " of the {} budget; {} skipped by it (not passing)",
                    ctx_deps::dollars(budget),
                    ctx_model::display::count(skipped, "task", "tasks")
                ));
            }
            out.push('\n');
        }
        let ids: Vec<String> = self
            .variants
            .iter()
            .filter(|v| !v.run_ids.is_empty())
            .map(|v| format!("{}: {}", v.name, v.run_ids.join(", ")))
            .collect();
        if !ids.is_empty() {
            out.push_str("\nruns: ");
            out.push_str(&ids.join("; "));
            out.push('\n');
        }
        if let Some(b) = &self.baseline {
            out.push_str(&b.text());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_engine::{BoxFuture, EngineError, InferenceRequest, InferenceResponse};
    use ctx_model::TokenUsage;

    /// Answers every prompt with the prompt itself: a check on a value the
    /// context carries passes exactly when the variant keeps that context.
    struct Echo;

    impl InferenceEngine for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
            Box::pin(async move {
                Ok(InferenceResponse {
                    output: request.prompt.clone(),
                    usage: Some(TokenUsage {
                        prompt_tokens: 10,
                        completion_tokens: 1,
                        total_tokens: 11,
                        cached_tokens: None,
                        cache_write_tokens: None,
                        partial: false,
                        prompt_counted: false,
                        service_tier: None,
                    }),
                    ..InferenceResponse::default()
                })
            })
        }
    }

    /// `colour` must mention the entity's value (only in its entity block)
    /// and `shape` the dependency's output (only in its dependency block).
    fn plan() -> Plan {
        // One attempt: a retry's feedback names the missing text, which an
        // echo would pass.
        let yaml = "schema_version: 1
config: {max_check_attempts: 1}
entities:
  - name: Colour
    type: constraint
    intent: the colour
    grounded_value: vermilion
sub_tasks:
  - id: colour
    description: name the colour
    entity_context: [{entity_name: Colour, intent_relevance: constraint}]
    tool_or_prompt: {name: inference, params: {prompt: Name it.}}
    checks: [{contains: vermilion}]
  - id: shape
    description: name a shape
    dependencies: [colour]
    tool_or_prompt: {name: inference, params: {prompt: Draw it.}}
    checks: [{contains: Name it.}]
  - id: unchecked
    description: no checks
    tool_or_prompt: {name: inference, params: {prompt: Anything.}}
";
        ctx_model::parse_plan(yaml, "plan.yaml", ctx_model::PlanFormat::Yaml).unwrap()
    }

    fn settings(store: EvalStore) -> EvalSettings {
        EvalSettings {
            variants: vec![
                ContextVariant::Bare,
                ContextVariant::Full,
                ContextVariant::Full,
            ],
            repeat: 2,
            store,
            ..EvalSettings::default()
        }
    }

    fn run(session: EvalSession) -> EvalOutcome {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(session.execute(std::future::pending(), |_| {}))
            .unwrap()
    }

    #[test]
    fn each_variant_passes_what_its_context_allows() {
        let session =
            EvalSession::start(plan(), Arc::new(Echo), settings(EvalStore::Memory)).unwrap();
        // Duplicates dropped, report order kept: full before bare.
        let order: Vec<_> = session
            .runs()
            .iter()
            .map(|r| (r.variant, r.repeat))
            .collect();
        assert_eq!(
            order,
            [
                (ContextVariant::Full, 1),
                (ContextVariant::Full, 2),
                (ContextVariant::Bare, 1),
                (ContextVariant::Bare, 2)
            ]
        );
        assert_eq!(session.tasks(), 12);
        let EvalOutcome::Finished(report) = run(session) else {
            panic!("not finished");
        };
        let full = &report.variants[0];
        let bare = &report.variants[1];
        assert_eq!((full.name, full.runs), ("full", 2));
        assert_eq!((full.checks_passed, full.checks_total), (4, 4));
        assert_eq!((full.tasks_passing, full.tasks_checked), (4, 4));
        assert_eq!(full.pass_rate, 1.0);
        assert_eq!((bare.checks_passed, bare.checks_total), (0, 4));
        // Every executed task's usage counts, the unchecked one's too.
        assert_eq!(full.prompt_tokens, Some(60));
        assert!(full.run_ids.is_empty());
        let rates: Vec<_> = report.tasks.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(rates, ["colour", "shape"]);
        assert_eq!(report.tasks[0].pass_rate["full"], 1.0);
        assert_eq!(report.tasks[0].pass_rate["bare"], 0.0);
    }

    /// The leak: a retry's feedback quotes what a failed check looked for,
    /// so an echo passes every variant on its second attempt. The first
    /// attempt's rate is the answer to the prompt alone: it tells the
    /// variants apart, and with repeats its intervals separate them, while
    /// the final rates' intervals do not (marked `~`).
    #[test]
    fn the_first_attempt_rate_is_measured_before_the_feedback() {
        let mut plan = plan();
        plan.config.max_check_attempts = 2;
        let session =
            EvalSession::start(plan, Arc::new(Echo), settings(EvalStore::Memory)).unwrap();
        let EvalOutcome::Finished(report) = run(session) else {
            panic!("not finished");
        };
        let (full, bare) = (&report.variants[0], &report.variants[1]);
        assert_eq!((full.first_attempt_pass_rate, full.pass_rate), (1.0, 1.0));
        assert_eq!((bare.first_attempt_pass_rate, bare.pass_rate), (0.0, 1.0));
        assert_eq!(
            (bare.first_attempt_checks_passed, bare.checks_passed),
            (0, 4)
        );
        let interval = |low, high| Some(Interval { low, high });
        assert_eq!(bare.first_attempt_interval, interval(0.0, 0.4899));
        assert_eq!(full.first_attempt_interval, interval(0.5101, 1.0));
        assert_eq!(bare.interval, full.interval);
        let colour = &report.tasks[0];
        assert_eq!(colour.first_attempt_pass_rate["bare"], 0.0);
        assert_eq!(colour.pass_rate["bare"], 1.0);
        assert_eq!(
            colour.first_attempt_interval["bare"],
            Interval::wilson(0, 2).unwrap()
        );
        // The first-attempt rate comes first, in the JSON and the table.
        let json = serde_json::to_string(full).unwrap();
        assert!(json.find("first_attempt_pass_rate") < json.find("\"pass_rate\""));
        let json = serde_json::to_string(colour).unwrap();
        assert!(json.find("first_attempt_pass_rate") < json.find("\"pass_rate\""));
        let text = report.text();
        let header = text.lines().next().unwrap();
        assert!(
            header.find("FIRST-TRY PASS") < header.find("FINAL PASS"),
            "{text}"
        );
        let bare_row = text.lines().find(|l| l.starts_with("bare")).unwrap();
        assert!(bare_row.contains("0 % [0-49]  100 % [51-100] ~"), "{text}");
        assert!(text.contains("~: not separated from full"), "{text}");
    }

    #[test]
    fn wilson_intervals_match_the_reference_values() {
        let i = |p, n| Interval::wilson(p, n).unwrap();
        assert_eq!(
            i(5, 10),
            Interval {
                low: 0.2366,
                high: 0.7634
            }
        );
        assert_eq!(
            i(0, 10),
            Interval {
                low: 0.0,
                high: 0.2775
            }
        );
        assert_eq!(
            i(10, 10),
            Interval {
                low: 0.7225,
                high: 1.0
            }
        );
        assert_eq!(Interval::wilson(0, 0), None);
        assert!(i(5, 10).overlaps(i(10, 10)));
        assert!(!i(0, 10).overlaps(i(10, 10)));
    }

    #[test]
    fn stored_runs_are_labelled_and_closed_and_a_stop_interrupts_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = || EvalStore::Sqlite {
            root: RunRoot::new(dir.path()),
            plan_source: "plan.yaml".into(),
        };
        let session = EvalSession::start(plan(), Arc::new(Echo), settings(store())).unwrap();
        let ids: Vec<String> = session
            .runs()
            .iter()
            .map(|r| r.run_id().unwrap().to_string())
            .collect();
        let EvalOutcome::Finished(report) = run(session) else {
            panic!("not finished");
        };
        assert_eq!(report.variants[0].run_ids, ids[..2]);
        let (runs, bad) = RunRoot::new(dir.path()).list().unwrap();
        assert!(bad.is_empty());
        assert_eq!(runs.len(), 4);
        // Closed as finished: full's runs completed, bare's failed their
        // checks.
        let states: Vec<(&str, &str)> = runs
            .iter()
            .map(|r| (r.plan.as_deref().unwrap_or_default(), r.state.as_str()))
            .collect();
        assert!(
            states.contains(&("plan.yaml [eval full 1/2]", "completed"))
                && states.contains(&("plan.yaml [eval bare 2/2]", "failed")),
            "{states:?}"
        );

        // A stop before anything runs: every run is closed as interrupted.
        let session = EvalSession::start(plan(), Arc::new(Echo), settings(store())).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let outcome = rt
            .block_on(session.execute(std::future::ready(()), |_| {}))
            .unwrap();
        assert!(matches!(outcome, EvalOutcome::Interrupted));
        let (runs, _) = RunRoot::new(dir.path()).list().unwrap();
        let interrupted = runs
            .iter()
            .filter(|r| r.state.as_str() == "interrupted")
            .count();
        assert_eq!(interrupted, 4, "{runs:?}");
    }

    #[test]
    fn what_cannot_be_measured_is_refused() {
        let mut unchecked = plan();
        for t in &mut unchecked.sub_tasks {
            t.checks.clear();
        }
        let err = EvalSession::start(unchecked, Arc::new(Echo), EvalSettings::default());
        assert!(matches!(err, Err(EvalError::NoChecks)));
        let err = EvalSession::start(
            plan(),
            Arc::new(ctx_deps::DryRunEngine),
            EvalSettings::default(),
        );
        assert!(matches!(err, Err(EvalError::PlaceholderEngine { .. })));
        let zero = EvalSettings {
            repeat: 0,
            ..EvalSettings::default()
        };
        assert!(matches!(
            EvalSession::start(plan(), Arc::new(Echo), zero),
            Err(EvalError::NoRepeat)
        ));
    }

    #[test]
    fn the_text_report() {
        let mut full = VariantScore::new("full");
        full.runs = 2;
        full.first_attempt_checks_passed = 9;
        full.checks_passed = 11;
        full.checks_total = 12;
        full.first_attempt_pass_rate = rate(9, 12);
        full.pass_rate = rate(11, 12);
        full.tasks_passing = 5;
        full.tasks_checked = 6;
        full.prompt_tokens = Some(1234);
        full.completion_tokens = Some(56);
        full.wall_ms = 1890;
        full.run_ids = vec!["r1".into(), "r2".into()];
        let mut bare = VariantScore::new("bare");
        bare.runs = 2;
        bare.first_attempt_checks_passed = 2;
        bare.checks_passed = 7;
        bare.checks_total = 12;
        bare.first_attempt_pass_rate = rate(2, 12);
        bare.pass_rate = rate(7, 12);
        bare.tasks_passing = 2;
        bare.tasks_checked = 6;
        bare.wall_ms = 950;
        bare.run_ids = vec!["r3".into(), "r4".into()];
        let report = EvalReport {
            variants: vec![full, bare],
            tasks: vec![TaskRates {
                task_id: "css".into(),
                checks: 6,
                first_attempt_pass_rate: [("full", 0.8333), ("bare", 0.1667)].into(),
                first_attempt_interval: BTreeMap::new(),
                pass_rate: [("full", 0.9167), ("bare", 0.5)].into(),
                interval: BTreeMap::new(),
            }],
            // Nothing priced (a command engine without prices): no SPENT
            // column of zeros.
            spent_usd: Some(Usd::ZERO),
            budget_usd: None,
            baseline: None,
        };
        insta::assert_snapshot!(report.text());
    }

    #[test]
    fn the_text_report_with_a_budget() {
        let mut full = VariantScore::new("full");
        full.runs = 1;
        full.first_attempt_checks_passed = 2;
        full.checks_passed = 2;
        full.checks_total = 2;
        full.first_attempt_pass_rate = 1.0;
        full.pass_rate = 1.0;
        full.tasks_passing = 1;
        full.tasks_checked = 1;
        full.spent_usd = Some(Usd::parse("0.0125").unwrap());
        let mut bare = VariantScore::new("bare");
        bare.runs = 1;
        bare.checks_total = 2;
        bare.tasks_checked = 1;
        bare.spent_usd = Some(Usd::parse("0.002").unwrap());
        bare.cost_unknown = 1;
        bare.budget_skipped = 1;
        let report = EvalReport {
            variants: vec![full, bare],
            tasks: vec![TaskRates {
                task_id: "css".into(),
                checks: 2,
                first_attempt_pass_rate: [("full", 1.0), ("bare", 0.0)].into(),
                first_attempt_interval: BTreeMap::new(),
                pass_rate: [("full", 1.0), ("bare", 0.0)].into(),
                interval: BTreeMap::new(),
            }],
            spent_usd: Some(Usd::parse("0.0145").unwrap()),
            budget_usd: Some(Usd::parse("0.02").unwrap()),
            baseline: None,
        };
        insta::assert_snapshot!(report.text());
    }

    /// $0.50 a call (10 prompt tokens at $50,000 a million, the usage
    /// [`Echo`] reports); every task's high end is $1.
    struct HalfDollar;

    impl ctx_deps::CostModel for HalfDollar {
        fn bound(&self, _: &ctx_model::SubTask) -> Option<Usd> {
            Some(Usd::parse("1").unwrap())
        }
        fn max_tokens(&self, _: &ctx_model::SubTask) -> Option<u64> {
            Some(100)
        }
        fn call_cost(&self, _: &ctx_model::SubTask, usage: &ctx_cost::Usage) -> Option<Usd> {
            let rate = |r| ctx_cost::Rate::parse(r).unwrap();
            Some(ctx_cost::Price::flat(rate("50000"), rate("0"), None).cost(usage))
        }
    }

    /// [`Echo`] after a short sleep, counting its calls: the runs of an
    /// eval overlap.
    struct SlowEcho {
        calls: std::sync::atomic::AtomicU64,
    }

    impl InferenceEngine for SlowEcho {
        fn name(&self) -> &str {
            "slow-echo"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
            Box::pin(async move {
                self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
                Echo.infer(request).await
            })
        }
    }

    /// Three independent tasks whose checks pass in every variant (each
    /// looks for the task's own prompt, which [`Echo`] repeats): a task
    /// passes exactly when it runs.
    fn independent_plan() -> Plan {
        let tasks: String = ["a", "b", "c"]
            .iter()
            .map(|id| {
                format!(
                    "  - id: {id}
    description: task {id}
    tool_or_prompt: {{name: inference, params: {{prompt: Say {id}.}}}}
    checks: [{{contains: Say {id}.}}]
"
                )
            })
            .collect();
        let yaml = format!("schema_version: 1\nsub_tasks:\n{tasks}");
        ctx_model::parse_plan(&yaml, "plan.yaml", ctx_model::PlanFormat::Yaml).unwrap()
    }

    #[test]
    fn one_budget_holds_for_every_run_of_the_eval() {
        // 4 variants x 3 repeats x 3 tasks at $0.50 each would spend $18;
        // each reserves $1, so once $4.50 is spent nothing more fits.
        let engine = Arc::new(SlowEcho {
            calls: Default::default(),
        });
        let budget = Usd::parse("5").unwrap();
        let settings = EvalSettings {
            repeat: 3,
            concurrency: 0,
            cost: Some(CostOptions {
                model: Arc::new(HalfDollar),
                max_cost: Some(budget),
                already_spent: Usd::ZERO,
                cut_output_at_max_tokens: false,
                shared_budget: None,
            }),
            ..EvalSettings::default()
        };
        let session = EvalSession::start(independent_plan(), engine.clone(), settings).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let outcome = rt
            .block_on(session.execute(std::future::pending(), |_| {}))
            .unwrap();
        let EvalOutcome::Finished(report) = outcome else {
            panic!("not finished");
        };
        let calls = engine.calls.load(std::sync::atomic::Ordering::SeqCst);
        let half = Usd::parse("0.5").unwrap();
        let spent = report.spent_usd.unwrap();
        assert_eq!(spent, half.saturating_mul(calls), "{report:?}");
        assert!(spent <= budget, "{spent} over {budget}");
        // A task waiting for budget another run held was tried again when
        // that run settled, so the budget was used up to its last $0.50.
        assert_eq!(spent, Usd::parse("4.5").unwrap(), "{report:?}");
        assert_eq!(report.budget_usd, Some(budget));
        let per_variant = report
            .variants
            .iter()
            .filter_map(|v| v.spent_usd)
            .reduce(Usd::saturating_add);
        assert_eq!(per_variant, Some(spent));
        // Every task not called was skipped by the budget (a run never
        // gave up on a task while budget could still come free), and a
        // skipped task's checks count as failed.
        let skipped: u64 = report.variants.iter().map(|v| v.budget_skipped).sum();
        assert_eq!(skipped + calls, 36, "{report:?}");
        let checked: u64 = report.variants.iter().map(|v| v.tasks_checked).sum();
        assert_eq!(checked, 36);
        let passing: u64 = report.variants.iter().map(|v| v.tasks_passing).sum();
        assert_eq!(passing, calls, "{report:?}");
        assert!(
            report
                .text()
                .contains("spent: $4.500000 of the $5.000000 budget")
        );
    }

    /// Keeps the `prompt_cache_key` of every request, and echoes.
    #[derive(Default)]
    struct Keys(Mutex<Vec<Option<String>>>);

    impl InferenceEngine for Keys {
        fn name(&self) -> &str {
            "keys"
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
            Box::pin(async move {
                let key = request.params.extra.get("prompt_cache_key");
                self.0
                    .lock()
                    .unwrap()
                    .push(key.and_then(|k| k.as_str()).map(String::from));
                Echo.infer(request).await
            })
        }
    }

    /// An eval runs a plan with a secret (`--no-store`): its runs' keys
    /// are computed without the secret's text, as a `ctx run`'s are.
    #[test]
    fn an_evals_prompt_cache_keys_hold_nothing_of_its_secrets() {
        let keys = |pin: &str| {
            let mut p = plan();
            p.config.cache_key = ctx_model::prompt_cache::CacheKey::Auto;
            p.entities[0].grounded_value = Some(format!("vermilion, PIN {pin}"));
            let engine = Arc::new(Keys::default());
            let settings = EvalSettings {
                secret_mask: ctx_store::SecretMask::new([("PIN".to_string(), pin.to_string())]),
                ..settings(EvalStore::Memory)
            };
            run(EvalSession::start(p, engine.clone(), settings).unwrap());
            let mut keys = std::mem::take(&mut *engine.0.lock().unwrap());
            keys.sort();
            keys
        };
        let first = keys("4812");
        assert!(first.iter().any(Option::is_some), "{first:?}");
        assert_eq!(first, keys("9907"));
    }

    /// An engine that gathers its calls into batches as `--batch` does:
    /// a call is answered (as [`Echo`]) once `batch` calls wait together,
    /// or after a second; `most` is the most calls it held at once.
    struct Gathering {
        batch: usize,
        waiting: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
        full: tokio::sync::Notify,
    }

    impl InferenceEngine for Gathering {
        fn name(&self) -> &str {
            "gathering"
        }
        fn batch_capacity(&self) -> usize {
            100
        }
        fn infer<'a>(
            &'a self,
            request: &'a InferenceRequest,
        ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
            use std::sync::atomic::Ordering::SeqCst;
            Box::pin(async move {
                let full = self.full.notified();
                tokio::pin!(full);
                full.as_mut().enable();
                let now = self.waiting.fetch_add(1, SeqCst) + 1;
                self.most.fetch_max(now, SeqCst);
                if now >= self.batch {
                    self.full.notify_waiters();
                } else {
                    let _ = tokio::time::timeout(Duration::from_secs(1), full).await;
                }
                self.waiting.fetch_sub(1, SeqCst);
                Echo.infer(request).await
            })
        }
    }

    /// With an engine that sends batches, `--concurrency` does not bound
    /// the calls in flight: every variant's ready tasks (4 variants x 3
    /// independent tasks) wait in the engine at once, one batch, where
    /// the shared limit of 2 would have made batches of 2.
    #[test]
    fn a_batching_engine_holds_every_variants_calls_at_once() {
        let engine = Arc::new(Gathering {
            batch: 12,
            waiting: Default::default(),
            most: Default::default(),
            full: tokio::sync::Notify::new(),
        });
        let settings = EvalSettings {
            concurrency: 2,
            ..EvalSettings::default()
        };
        let session = EvalSession::start(independent_plan(), engine.clone(), settings).unwrap();
        let EvalOutcome::Finished(report) = run(session) else {
            panic!("not finished");
        };
        assert_eq!(
            engine.most.load(std::sync::atomic::Ordering::SeqCst),
            12,
            "{report:?}"
        );
        let passing: u64 = report.variants.iter().map(|v| v.tasks_passing).sum();
        assert_eq!(passing, 12, "{report:?}");
        // Without batches the limit holds: at most 2 at once.
        let slow = Arc::new(SlowEcho {
            calls: Default::default(),
        });
        assert_eq!(slow.batch_capacity(), 0);
        assert!(dispatch_gate(2, slow.as_ref()).is_some_and(|g| g.available_permits() == 2));
        assert!(dispatch_gate(0, engine.as_ref()).is_none());
    }
}
