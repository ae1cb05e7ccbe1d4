//! How a run behaves: [`ExecutorOptions`] and the settings it is made of
//! (the schedule, the concurrency, the context variant `ctx eval`
//! compares), shared by the [`Executor`](crate::Executor) and the
//! [`TaskRunner`](crate::TaskRunner).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ctx_model::Plan;
use ctx_store::SecretMask;

use crate::cost::CostOptions;

/// The default number of tasks in flight.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// The default bound on one task's engine call (one hour).
///
/// Long enough for the slowest honest case the defaults allow (the HTTP
/// engine's four attempts of up to ten minutes each, with backoff), short
/// enough that a command that hangs forever does not hold a scheduled job
/// for ever. [`ExecutorOptions::task_timeout`] overrides it; `None` means
/// no bound (`ctx run --task-timeout 0`).
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(3600);

/// How ready tasks are dispatched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Each task starts as soon as its dependencies are completed, longest
    /// remaining path first.
    #[default]
    ReadyQueue,
    /// Batch by dependency level: level `n + 1` starts only when all of
    /// level `n` has finished. Kept for benchmark comparison only.
    Levels,
}

/// The most tasks in flight that a `concurrency` setting allows: `0` means
/// no limit. The one reading of the setting, for the executor and for a
/// shared-store worker alike.
pub fn concurrency_limit(concurrency: usize) -> usize {
    if concurrency == 0 {
        usize::MAX
    } else {
        concurrency
    }
}

/// How a run behaves.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Most tasks in flight at once; `0` means unlimited.
    pub concurrency: usize,
    /// Ready queue (the default) or level batches.
    pub schedule: Schedule,
    /// Do not execute tasks whose stored result is already `completed`.
    pub reuse_completed: bool,
    /// With `reuse_completed`: ids executed again anyway, together with
    /// everything that depends on them.
    pub force_rerun: BTreeSet<String>,
    /// Of `force_rerun`, the ids a user asked to run again (`ctx run
    /// --resume RUN --rerun TASK`). The forcing of other ids stops at a
    /// map task (what is below a map is decided by the items it
    /// receives); from these it goes on through maps, and a map reached
    /// from them takes none of its items from the store: everything
    /// below an asked task runs again.
    pub rerun_requested: BTreeSet<String>,
    /// Bound on each task's engine call, retries included; `None` means
    /// none. When it expires the engine's future is dropped (a command's
    /// process group is killed, a request aborted) and the task fails with
    /// outcome `timeout`. Each of a task's other calls is bounded the same
    /// way on its own: a `judge` check's call (which then fails that
    /// check, not the run) and an `llm` summary.
    pub task_timeout: Option<Duration>,
    /// Bound on each task's output in bytes, passed to the engine as
    /// [`InferenceRequest::max_output_bytes`](ctx_engine::InferenceRequest::max_output_bytes) and checked again on what it
    /// returns.
    pub max_output_bytes: usize,
    /// Prices: each task's `cost_usd`, and optionally a budget
    /// (module documentation, "Budget"). `None`: no costs are recorded.
    pub cost: Option<CostOptions>,
    /// Under `summarize_strategy: llm`, summarise every output a dependent
    /// receives under `llm`, whatever its length. For the dry run, whose
    /// placeholder outputs are never long: its prompts then show where a
    /// summary goes.
    pub summarize_every_output: bool,
    /// Which context prompts get: everything (the default), or a variant
    /// of `ctx eval` that leaves entities and/or dependency outputs out.
    pub context: ContextVariant,
    /// A limit on engine work shared with other executors (or task
    /// runners): each dispatched job holds one permit from the moment its
    /// engine work begins (dependency reads, prompt assembly, the task's
    /// calls, judges and retries, its `llm` summaries) until it ends.
    /// `None`: only [`Self::concurrency`] limits this run.
    ///
    /// Why a semaphore beside `concurrency`: `ctx eval` runs every variant
    /// and repeat at once, and `--concurrency` is the limit on what the
    /// *user's engine* sees, not per run. Each run keeps its own ready
    /// queue and priorities; the gate only decides which dispatched job
    /// goes next, in the order they asked (tokio's semaphore is fair).
    /// A job makes its engine calls one after another, so the permits in
    /// use bound the engine calls in flight.
    ///
    /// Waiting for the gate is not running: [`Self::task_timeout`] bounds
    /// each engine call from its start, and a task's
    /// `execution_time_ms` starts once the permit is held, so a run that
    /// waits behind others neither times out nor looks slow. A job
    /// cancelled while it waits is recorded as interrupted before it began.
    pub dispatch_gate: Option<Arc<tokio::sync::Semaphore>>,
    /// The texts of the run's `secret: true` variables (ctx-run's
    /// `inputs::secret_mask`, the one a store hides them with). The
    /// `prompt_cache_key` of `config.cache_key: auto` is a hash of the
    /// call's shared prefix, and it travels where the prompt does not:
    /// in the request's parameters, which a proxy or a provider log may
    /// keep while dropping message content. Hashed with the secret in
    /// it, the key would let anyone who knows the plan test guesses of a
    /// short secret offline; so it is hashed with each secret shown as
    /// `[secret NAME]` (`prompt_cache::cache_key`). Empty: nothing is
    /// hidden.
    pub secret_mask: SecretMask,
    /// The run's canary token (docs/security.md), planted in every
    /// system prompt when the plan asks for one
    /// (`ctx_model::plan_has_canary`); `None` with such a plan: the
    /// executor makes a fresh one ([`Canary::fresh`](crate::Canary::fresh)).
    /// Ignored for a plan that asks for none. The executor adds it to
    /// [`secret_mask`](Self::secret_mask).
    pub canary: Option<crate::Canary>,
    /// Run every gated task as if approved, and hold no output for
    /// approval: `ctx eval`, whose variants publish nothing and never
    /// wait. `false` (the default): a `before: run` gate holds its task
    /// until the store has a decision ([`crate::gates`]).
    pub ignore_gates: bool,
    /// With gates held: keep waiting for a decision, until a deadline,
    /// when nothing else can run (`ctx run --wait-approval DURATION`).
    /// `None`: the run ends with its gates waiting.
    pub approval_wait: Option<crate::gates::ApprovalWait>,
}

/// The context a prompt is assembled with: the variants `ctx eval`
/// compares. A variant changes only what it names: checks (the `entities`
/// check too) and the schedule stay as designed, so `no-dependencies`
/// still waits for the dependencies it leaves out of the prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContextVariant {
    /// Entities and dependency outputs, as designed.
    #[default]
    Full,
    /// The entity block left out.
    NoEntities,
    /// The dependency outputs left out.
    NoDependencies,
    /// Both left out: the task's own prompt alone.
    Bare,
}

impl ContextVariant {
    /// Every variant, in the order reports list them.
    pub const ALL: [ContextVariant; 4] = [
        ContextVariant::Full,
        ContextVariant::NoEntities,
        ContextVariant::NoDependencies,
        ContextVariant::Bare,
    ];

    /// The name `ctx eval --ablate` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextVariant::Full => "full",
            ContextVariant::NoEntities => "no-entities",
            ContextVariant::NoDependencies => "no-dependencies",
            ContextVariant::Bare => "bare",
        }
    }

    /// Whether prompts carry the entity block.
    pub fn entities(self) -> bool {
        matches!(self, ContextVariant::Full | ContextVariant::NoDependencies)
    }

    /// Whether prompts carry the dependency outputs.
    pub fn dependencies(self) -> bool {
        matches!(self, ContextVariant::Full | ContextVariant::NoEntities)
    }

    /// The plan prompts are assembled from: `plan` itself, or without
    /// entities a copy whose tasks name none (so the assembler renders no
    /// entity block and nothing else changes).
    pub fn prompt_plan(self, plan: &Plan) -> Option<Plan> {
        if self.entities() {
            return None;
        }
        let mut bare = plan.clone();
        bare.config.entities.include_all = false;
        for task in &mut bare.sub_tasks {
            task.entity_context.clear();
        }
        Some(bare)
    }
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            concurrency: DEFAULT_CONCURRENCY,
            schedule: Schedule::ReadyQueue,
            reuse_completed: false,
            force_rerun: BTreeSet::new(),
            rerun_requested: BTreeSet::new(),
            task_timeout: Some(DEFAULT_TASK_TIMEOUT),
            max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
            cost: None,
            summarize_every_output: false,
            context: ContextVariant::Full,
            dispatch_gate: None,
            secret_mask: SecretMask::default(),
            canary: None,
            ignore_gates: false,
            approval_wait: None,
        }
    }
}
