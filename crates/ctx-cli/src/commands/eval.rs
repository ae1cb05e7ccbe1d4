//! `ctx eval PLAN`: does the injected context help? The plan runs in
//! variants that leave parts of the context out, and the checks that pass
//! are counted per variant and per task. The use case, its rules and the
//! report are [`ctx_run::eval`]; this command turns flags into
//! [`EvalSettings`], prints each stored run's id as it starts, drives the
//! runs with a progress bar and stop signals, and prints the report.
//!
//! * Ctrl-C, SIGTERM or SIGHUP stops every run: each stores its in-flight
//!   tasks as interrupted and is closed as an interrupted run.
//! * Every run is an ordinary stored run, labelled `[eval VARIANT K/N]`
//!   after its plan path (`ctx runs list`) and its engine (`ctx runs
//!   show`), so each can be inspected and resumed with `ctx run --resume`.
//!
//! * `--max-cost USD` is the budget of the whole eval, shared by all its
//!   runs ([`ctx_run::eval`], "Budget"); prices come from the flags of
//!   `ctx run` (`--prices`, `--price`, `config.prices`), and the report
//!   says what each variant spent.
//!
//! * `--baseline RUN` compares each variant's rates with a stored eval's
//!   ([`ctx_run::eval_baseline`]).
//!
//! Exit codes: 0 when every variant ran (whatever the pass rates: they are
//! a measurement, not a verdict), 2 on bad usage (no checks in the plan, an
//! engine that cannot answer, an unknown variant, a budget that cannot be
//! bounded, a missing or bad `--var` value, an unknown `--baseline` run or
//! one that shares no variant with the eval), 3 when a filled prompt is over
//! its cap, 4 when a store fails,
//! 128 + N when a signal stops it (the runs so far are stored).

use std::path::PathBuf;

use ctx_deps::ContextVariant;
use ctx_run::eval::{EvalOutcome, EvalSession, EvalSettings, EvalStore};
use ctx_run::eval_baseline::{Baseline, BaselineError};
use ctx_store_sqlite::RunRoot;

use super::run::StopSignal;
use crate::engines::{self, EngineArgs};
use crate::exit::{CliError, CliResult, Exit};
pub use crate::format::Format;
use crate::heading;

/// `--ablate` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Variant {
    /// Prompts as designed.
    Full,
    /// Without the entity block.
    NoEntities,
    /// Without the dependency outputs.
    NoDependencies,
    /// The task's own prompt alone.
    Bare,
}

impl Variant {
    fn context(self) -> ContextVariant {
        match self {
            Variant::Full => ContextVariant::Full,
            Variant::NoEntities => ContextVariant::NoEntities,
            Variant::NoDependencies => ContextVariant::NoDependencies,
            Variant::Bare => ContextVariant::Bare,
        }
    }
}

// Arguments of `ctx eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan (JSON or YAML by extension); it must have checks.
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// The variants to run, comma-separated [default: all four].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VARIANTS")]
    pub ablate: Vec<Variant>,

    /// Runs of each variant.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,

    /// Most engine calls in flight at once, shared by all the variant and
    /// repeat runs; 0 means unlimited. With --batch: the most real-time
    /// calls (batched calls go a batch file's worth at once).
    #[arg(long, value_name = "N", default_value_t = ctx_deps::DEFAULT_CONCURRENCY, help_heading = heading::BOUNDS)]
    pub concurrency: usize,

    #[command(flatten)]
    pub bounds: super::run::TaskBoundArgs,

    #[command(flatten)]
    pub limits: super::run::PlanLimitArgs,

    /// The plan's inputs (`--var`, the digest flags), as for `ctx run`;
    /// `--publish-root` is not taken (an eval publishes nothing).
    #[command(flatten)]
    pub inputs: super::plan_inputs::PlanInputArgs,

    /// A budget in US dollars for the whole eval: every variant and repeat
    /// run draws on it, and all of them together never spend more. As for
    /// `ctx run --max-cost`: each task reserves its high end before it
    /// starts, a task that can never fit is skipped with reason `budget`
    /// (its checks count as not passed), and every task needs max_tokens
    /// (params or --max-tokens) and a known price.
    #[arg(long, value_name = "USD", allow_hyphen_values = true, help_heading = heading::COST)]
    pub max_cost: Option<String>,

    #[command(flatten, next_help_heading = heading::COST)]
    pub prices: super::prices::PriceArgs,

    /// The store root the variant runs are recorded under [default:
    /// .ctx/runs].
    #[arg(long, value_name = "DIR", help_heading = heading::STORE)]
    pub root: Option<PathBuf>,

    /// Keep the runs in memory only.
    #[arg(long, conflicts_with = "root", help_heading = heading::STORE)]
    pub no_store: bool,

    /// Compare each variant's first-try and final pass rates with a stored
    /// eval's: RUN is any run of that eval (its other runs are found beside
    /// it under --root), or a plain run (the baseline of `full`). Changes
    /// the 95 % intervals do not separate are marked `~`.
    #[arg(long, value_name = "RUN", help_heading = heading::OUTPUT)]
    pub baseline: Option<String>,

    /// Output format.
    #[arg(long, value_enum, default_value = "text", help_heading = heading::OUTPUT)]
    pub format: Format,

    /// `--otlp URL`: the run's trace to an OpenTelemetry collector.
    #[command(flatten)]
    pub otlp: crate::telemetry::OtlpFlag,
}

/// Runs the command.
pub fn run(args: Args) -> CliResult {
    // `--content-root` answers a plan's `no_content_root`, as for `ctx run`.
    let mut plan =
        super::plan_check::load_valid_plan_given(&args.plan, args.inputs.content_root.is_some())?;
    args.limits.apply(&mut plan)?;
    // Filled once, as `ctx run` fills it, before any variant runs: every
    // variant and repeat runs the same filled prompts, so the variants
    // differ only in the context they leave out.
    let (plan, secret_mask) = args.inputs.fill_to_run(plan, &args.plan, !args.no_store)?;
    let bounds = args.bounds.resolve()?;
    let max_cost = super::run_cost::max_cost(args.max_cost.as_deref(), &args.engine)?;
    let canary = crate::telemetry::canary(&plan, &args.plan)?;
    let notices = engines::Notices::masking_run(secret_mask.clone(), canary.as_ref());
    let engine = engines::build(&args.engine, &notices, args.concurrency)?;
    ctx_run::refuse_unjudgeable(&plan, engine.as_ref())
        .map_err(|e| CliError::run(e, &args.plan))?;
    let pricing = args.prices.pricing(args.engine.costs(), max_cost)?;
    // Refused (exit 2) before any run is created when the budget cannot
    // be bounded.
    let cost = super::run_cost::options(&plan, &pricing)?;
    // The baseline is read, and refused when it shares no variant with
    // this eval, before any run starts.
    let root = RunRoot::new(
        args.root
            .clone()
            .unwrap_or_else(|| PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT)),
    );
    let variants: Vec<ContextVariant> = args.ablate.iter().map(|v| v.context()).collect();
    let baseline = load_baseline(args.baseline.as_deref(), &root, &variants)?;
    let store = if args.no_store {
        EvalStore::Memory
    } else {
        EvalStore::Sqlite {
            root,
            plan_source: args.plan.display().to_string(),
        }
    };
    let settings = EvalSettings {
        variants,
        repeat: args.repeat,
        concurrency: args.concurrency,
        task_timeout: bounds.task_timeout,
        max_output_bytes: bounds.max_output_bytes,
        store,
        cost: Some(cost),
        secret_mask,
        canary,
    };
    let session =
        EvalSession::start(plan, engine, settings).map_err(|e| CliError::eval(e, &args.plan))?;
    for r in session.runs() {
        if let Some(id) = r.run_id() {
            eprintln!(
                "eval {} {}/{}: run {id}",
                r.variant.as_str(),
                r.repeat,
                args.repeat
            );
        }
    }
    let (outcome, signal) = super::run::drive(session.tasks(), &notices, |cancel, progress| {
        session.execute(cancel, progress)
    })?;
    match outcome.map_err(|e| CliError::eval(e, &args.plan))? {
        EvalOutcome::Interrupted => {
            let by = signal.map_or_else(String::new, |s| format!(" by {}", s.name()));
            eprintln!("eval interrupted{by}; the runs so far are stored");
            Ok(signal.map_or(Exit::Interrupted, StopSignal::exit))
        }
        EvalOutcome::Finished(mut report) => {
            report.baseline = baseline.map(|b| Box::new(b.compare(&report.variants)));
            match args.format {
                Format::Json => crate::io::print_stdout(&crate::io::json_text(&report)?)?,
                Format::Text => crate::io::print_stdout(&report.text())?,
            }
            Ok(signal.map_or(Exit::Ok, StopSignal::exit))
        }
    }
}

/// `--baseline RUN` read and checked against the eval's variants, before
/// any run starts.
fn load_baseline(
    id: Option<&str>,
    root: &RunRoot,
    variants: &[ContextVariant],
) -> Result<Option<Baseline>, CliError> {
    let Some(id) = id else {
        return Ok(None);
    };
    let b = Baseline::load(root, id).map_err(baseline_error)?;
    b.check_common(variants).map_err(baseline_error)?;
    Ok(Some(b))
}

/// An unknown `--baseline` run or one without a variant in common is bad
/// input (2); a store that fails once found is exit 4.
fn baseline_error(e: BaselineError) -> CliError {
    match e {
        BaselineError::Store { ref source, .. } if !source.is_not_found() => {
            CliError::with(Exit::Store, e)
        }
        e => CliError::usage(e),
    }
}
