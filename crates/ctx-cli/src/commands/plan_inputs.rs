//! A plan's run-time inputs as flags: `--var NAME=VALUE` (as in `ctx
//! render`) and the digest flags of `ctx history` (`--content-root`,
//! `--date`, `--prompt-budget`, …), which override the plan's `history:`
//! block. The filling itself is the library's
//! ([`ctx_prompt::plan_fill`]); this file only reads the flags, prints the
//! digest's warnings and maps the errors to exit codes.

use std::path::{Path, PathBuf};

use ctx_model::Plan;
use ctx_prompt::plan_fill::{self, DigestSettings, FillError};

use super::history::{DigestArgs, DigestSetup};
use crate::exit::{CliError, Exit};
use crate::heading;

/// The inputs of a plan: its variables' values and its digest settings.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanInputArgs {
    /// A value of a plan variable: NAME=VALUE, NAME=@FILE (`@-` = stdin),
    /// NAME=@@text for a literal `@text`.
    #[arg(long = "var", value_name = "NAME=VALUE", help_heading = heading::INPUTS)]
    pub vars: Vec<String>,
    /// The archive that fills {{HISTORICAL_CONTEXT}} (overrides the plan's
    /// history.content_root).
    #[arg(long, value_name = "DIR", help_heading = heading::INPUTS)]
    pub content_root: Option<PathBuf>,
    #[command(flatten, next_help_heading = heading::INPUTS)]
    pub digest: DigestArgs,
    /// The prompt budget the digest takes its share of (overrides
    /// history.prompt_budget) [default: the history config's, 90000].
    #[arg(long, value_name = "N", help_heading = heading::INPUTS)]
    pub prompt_budget: Option<usize>,
}

impl PlanInputArgs {
    /// Fills `plan` (read from `plan_path`, its overrides applied) with
    /// the `--var` values and the digest. A plan with nothing to fill and
    /// no inputs given is returned as it is.
    ///
    /// Exit 2 for a bad, undeclared, missing or over-long value, a trusted
    /// value with a fence tag, a digest flag with no archive, a bad
    /// publish path; exit 3 for a task whose filled prompt is over its cap.
    pub fn fill(&self, plan: Plan, plan_path: &Path) -> Result<Plan, CliError> {
        let values = crate::var_flag::values(&self.vars, self.digest.max_file_bytes)?;
        crate::telemetry::redact_secrets(&plan, &values);
        if !plan_fill::has_templates(&plan) && values.is_empty() && self.content_root.is_none() {
            self.digest.refuse_without_root()?;
            return Ok(plan);
        }
        let digest = self.digest(&plan, plan_path, true)?;
        let filled = plan_fill::fill_plan(&plan, &values, digest.as_deref())
            .map_err(|e| fill_error(plan_path, &e))?;
        Ok(filled.plan)
    }

    /// [`fill`](Self::fill) for a plan about to run (`ctx run`, `ctx
    /// eval`): a plan with a secret variable is refused (exit 2) when its
    /// runs are stored (`durable`), since a stored prompt would keep the
    /// secret in clear.
    pub fn fill_to_run(
        &self,
        plan: Plan,
        plan_path: &Path,
        durable: bool,
    ) -> Result<Plan, CliError> {
        if durable && plan.variables.iter().any(|v| v.secret) {
            return Err(CliError::usage(format!(
                "{}: secret variables are not stored as hashes yet; run with --no-store",
                plan_path.display()
            )));
        }
        self.fill(plan, plan_path)
    }

    /// [`fill`](Self::fill) for `ctx plan cost`: a variable without a
    /// value, and the digest without an archive, stand in empty, and each
    /// is named on stderr with what bounds it.
    pub fn fill_for_estimate(&self, plan: Plan, plan_path: &Path) -> Result<Plan, CliError> {
        let values = crate::var_flag::values(&self.vars, self.digest.max_file_bytes)?;
        if !plan_fill::has_templates(&plan) && values.is_empty() && self.content_root.is_none() {
            self.digest.refuse_without_root()?;
            return Ok(plan);
        }
        let digest = self.digest(&plan, plan_path, false)?;
        let (filled, without) = plan_fill::fill_for_estimate(&plan, &values, digest.as_deref())
            .map_err(|e| fill_error(plan_path, &e))?;
        for w in without {
            match w.max_tokens {
                Some(n) => eprintln!(
                    "note: {{{{{}}}}} has no value: its max_tokens ({n}) bounds it, and each prompt is priced up to max_prompt_tokens",
                    w.name
                ),
                None => eprintln!(
                    "warning: {{{{{}}}}} has no value and no max_tokens: its size is unbounded; each prompt is priced up to max_prompt_tokens (give --var {}=VALUE to price the filled prompts)",
                    w.name, w.name
                ),
            }
        }
        Ok(filled.plan)
    }

    /// The digest text when a task uses `{{HISTORICAL_CONTEXT}}` and an
    /// archive is named (`required`: a missing archive is an error, else
    /// `None`). `--content-root` for a plan that uses no digest is exit 2.
    fn digest(
        &self,
        plan: &Plan,
        plan_path: &Path,
        required: bool,
    ) -> Result<Option<String>, CliError> {
        if plan_fill::uses_digest(plan) {
            let named = self.content_root.is_some()
                || plan
                    .history
                    .as_ref()
                    .is_some_and(|h| h.content_root.is_some());
            if !required && !named {
                return Ok(None);
            }
            return self.digest_text(plan, plan_path).map(Some);
        }
        if self.content_root.is_some() {
            return Err(CliError::usage(format!(
                "{}: --content-root is given but no task uses {{{{HISTORICAL_CONTEXT}}}}",
                plan_path.display()
            )));
        }
        self.digest.refuse_without_root()?;
        Ok(None)
    }

    /// The digest for the plan's `{{HISTORICAL_CONTEXT}}`, computed once:
    /// the plan's `history:` block under these flags, through `ctx
    /// history`'s one setup. Its warnings go to stderr.
    fn digest_text(&self, plan: &Plan, plan_path: &Path) -> Result<String, CliError> {
        let overrides = DigestSettings {
            content_root: self.content_root.clone(),
            date: self.digest.date.clone(),
            prompt_budget: self.prompt_budget,
            share: self.digest.share,
            max_words: self.digest.max_words,
            config: self.digest.config.clone(),
        };
        let Some(merged) =
            plan_fill::plan_history(plan, ctx_model::plan_base_dir(plan_path), &overrides)
        else {
            return Err(CliError::usage(format!(
                "{}: a task uses {{{{HISTORICAL_CONTEXT}}}}, and no archive fills it: set history.content_root or give --content-root",
                plan_path.display()
            )));
        };
        let args = DigestArgs {
            date: merged.date,
            share: merged.share,
            max_words: merged.max_words,
            config: merged.config,
            ..self.digest.clone()
        };
        let root = merged.content_root.unwrap_or_default();
        let DigestSetup { config, request } =
            args.setup(&root, merged.prompt_budget, None, false)?;
        let digest = plan_fill::plan_digest(plan, &config, &request).map_err(CliError::usage)?;
        for w in &digest.warnings {
            eprintln!("warning: {}", ctx_table::printable_lines(&w.to_string()));
        }
        Ok(digest.markdown)
    }
}

/// The library's fill error as an exit: 3 for a prompt over its cap,
/// else 2.
fn fill_error(plan_path: &Path, e: &FillError) -> CliError {
    let exit = if e.is_over_cap() {
        Exit::OverBudget
    } else {
        Exit::Usage
    };
    CliError::with(exit, fill_message(&plan_path.display().to_string(), e))
}

/// The library's fill error, said with the flag that gives a value.
fn fill_message(plan: &str, e: &FillError) -> String {
    match e {
        FillError::Missing { names } => names
            .iter()
            .map(|n| {
                format!("{plan}: variable {n} is required and has no value (give --var {n}=VALUE)")
            })
            .collect::<Vec<_>>()
            .join("\n"),
        FillError::Undeclared { .. }
        | FillError::Reserved
        | FillError::NotJson { .. }
        | FillError::TooManyTokens { .. } => format!("{plan}: --var {e}"),
        e => format!("{plan}: {e}"),
    }
}

/// `ctx run`'s inputs: the plan's ([`PlanInputArgs`]) and where published
/// outputs go.
#[derive(Debug, Clone, clap::Args)]
pub struct RunInputArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    /// Write each task's final output to DIR/{its publish: path}, atomically,
    /// once the task completed with its checks passing (never with the
    /// dry-run engine). Without it nothing is published.
    #[arg(long, value_name = "DIR", help_heading = heading::INPUTS)]
    pub publish_root: Option<PathBuf>,
}

/// What [`RunInputArgs::prepare`] needs to know of the run.
pub struct RunKind {
    /// The engine is the dry-run engine (it never publishes).
    pub dry_run_engine: bool,
    /// The run goes to a shared PostgreSQL store.
    pub shared: bool,
    /// The run is stored (its prompts outlive it).
    pub durable: bool,
}

impl RunInputArgs {
    /// The plan as it runs: filled from the flags when `plan_path` is given
    /// (a new run, or a resume with its plan), as stored when it is not (a
    /// resume of the stored plan, which was filled when the run started).
    pub fn prepare(
        &self,
        plan: Plan,
        plan_path: Option<&Path>,
        kind: &RunKind,
    ) -> Result<Plan, CliError> {
        if self.publish_root.is_some() {
            if kind.dry_run_engine {
                return Err(CliError::usage(
                    "--publish-root: the dry-run engine never publishes (its outputs are placeholders); choose --engine command or openai",
                ));
            }
            if kind.shared {
                return Err(CliError::usage(
                    "--publish-root is not supported with a shared --store yet",
                ));
            }
        }
        let Some(path) = plan_path else {
            if !self.plan.vars.is_empty() || self.plan.content_root.is_some() {
                return Err(CliError::usage(
                    "--resume without PLAN runs the plan as it was filled; give the PLAN to change --var or --content-root",
                ));
            }
            return Ok(plan);
        };
        self.plan.fill_to_run(plan, path, kind.durable)
    }

    /// Where published outputs go, for [`super::run::report_run`].
    pub fn publish<'a>(&'a self, plan: &Plan) -> Option<super::run::Publish<'a>> {
        Some(super::run::Publish {
            root: self.publish_root.as_deref()?,
            targets: ctx_run::publish::publish_targets(plan),
        })
    }
}
