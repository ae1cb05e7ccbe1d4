//! What an engine means for costs, stated by the engine itself.
//!
//! Pricing a plan (`ctx plan cost`), bounding a run (`--max-cost`) and
//! recording what each task cost all need to know how an engine bills and
//! stops: whether it calls a priced model at all, the defaults a task's
//! params win over, how many requests one call may bill, whether it can
//! stop a completion at `max_tokens`. Those are facts about the engine, so
//! each engine states them next to its code (`DryRunEngine::costs`,
//! `ctx_engine_command::CommandEngine::costs`,
//! `ctx_engine_openai::RequestDefaults::costs`), and a front end only
//! passes its flags in. They are plain data, not a method of the trait,
//! because a plan is priced before any engine is built: `ctx plan cost`
//! needs no API key and no server.

/// What the engine means for costs: the defaults a task's params win
/// over, and how the engine bills and stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineCosts {
    /// The engine calls no model (the dry run): every task costs $0.
    pub free: bool,
    /// The model of a task without `params.model` (`--model`).
    pub model: Option<String>,
    /// The `max_tokens` of a task without `params.max_tokens`.
    pub max_tokens: Option<u32>,
    /// The system prompt of a task without `params.system`.
    pub system: Option<String>,
    /// Requests per call, the first included (the HTTP engine's retries
    /// may each be billed); 1 for engines that do not retry.
    pub attempts: u32,
    /// The engine cannot stop a completion at `max_tokens` (a command):
    /// under a budget the executor cuts its output there.
    pub cuts_at_max_tokens: bool,
    /// The engine sends each task's params with `params.extra` passed
    /// through (the openai engine); see
    /// ctx-run's `EngineDefaults::sends_params`.
    pub sends_params: bool,
    /// The engine calls no priced API of its own (a local command): its
    /// tasks are priced only when a price is asked for (a budget, a
    /// prices file, `--price`, the plan's `config.prices`), not by an
    /// API's list price for a model name the command may not even run
    /// (ctx-run's `RunPricing::book`).
    pub priced_on_request: bool,
    /// The engine sends each prompt as chat messages, with the system
    /// prompt as a message of its own, that the server frames with its
    /// chat template (the openai engine). Where the server reports no
    /// usage, ctx's own count of such a request adds the system message
    /// and a framing allowance (ctx-deps' `CostModel::request_overhead`);
    /// a command is sent the prompt as it is.
    pub chat_framing: bool,
}
