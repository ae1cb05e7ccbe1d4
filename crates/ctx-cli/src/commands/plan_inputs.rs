//! A plan's run-time inputs as flags: `--var NAME=VALUE` (as in `ctx
//! render`) and the digest flags of `ctx history` (`--content-root`,
//! `--date`, `--prompt-budget`, …), which override the plan's `history:`
//! block. The filling itself is the library's
//! ([`ctx_prompt::plan_fill`]); this file only reads the flags, prints the
//! digest's warnings and maps the errors to exit codes.

use std::path::{Path, PathBuf};

use ctx_model::Plan;
use ctx_prompt::plan_fill::{self, DigestSettings, FillError};
use ctx_run::inputs::{RunInputs, SecretMask};

use super::history::{DigestArgs, DigestSetup};
use crate::exit::{CliError, Exit};
use crate::heading;

// The inputs of a plan: its variables' values and its digest settings.
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
    /// the `--var` values and the digest, or for a resume with the run's
    /// `stored` inputs under them ([`ctx_run::inputs`]). Returns the filled
    /// plan and what the run records of its inputs (`None` for a plan with
    /// nothing to fill, which is returned as it is).
    ///
    /// Exit 2 for a bad, undeclared, missing or over-long value, a secret
    /// a resume is not given again, a trusted value with a fence tag, a
    /// digest flag with no archive, a bad publish path; exit 3 for a task
    /// whose filled prompt is over its cap.
    pub fn fill(
        &self,
        plan: Plan,
        plan_path: &Path,
        stored: Option<&RunInputs>,
    ) -> Result<(Plan, Option<RunInputs>), CliError> {
        let given = crate::var_flag::values(&self.vars, self.digest.max_file_bytes)?;
        if !plan_fill::has_templates(&plan) && given.is_empty() && self.content_root.is_none() {
            self.digest.refuse_without_root()?;
            return Ok((plan, None));
        }
        let values = match stored {
            Some(s) => ctx_run::inputs::resumed_values(s, &plan, &given)
                .map_err(|e| CliError::usage(format!("{}: --resume: {e}", plan_path.display())))?,
            None => given,
        };
        crate::telemetry::redact_secrets(&plan, &values);
        let reused = stored
            .filter(|_| plan_fill::uses_digest(&plan))
            .and_then(|s| ctx_run::inputs::reuse_digest(s, &plan, self.digest_flags_given()));
        let digest = match reused {
            Some(d) => Some(d.to_string()),
            None => self.digest(&plan, plan_path, true)?,
        };
        let filled = plan_fill::fill_plan(&plan, &values, digest.as_deref())
            .map_err(|e| fill_error(plan_path, &e))?;
        let inputs = ctx_run::inputs::recorded(&plan, &values, digest.as_deref(), &filled.values);
        Ok((filled.plan, inputs))
    }

    /// [`fill`](Self::fill) for `ctx eval`, whose runs record no inputs:
    /// a plan with a secret variable is refused (exit 2) when its runs are
    /// stored (`durable`), since a stored prompt would keep the secret in
    /// clear. With the filled plan comes the mask of its secrets' texts,
    /// which no `prompt_cache_key` is computed from.
    pub fn fill_to_run(
        &self,
        plan: Plan,
        plan_path: &Path,
        durable: bool,
    ) -> Result<(Plan, SecretMask), CliError> {
        if durable && plan.variables.iter().any(|v| v.secret) {
            return Err(CliError::usage(format!(
                "{}: ctx eval does not hide secret variables in its stored runs; run it with --no-store",
                plan_path.display()
            )));
        }
        let (plan, inputs) = self.fill(plan, plan_path, None)?;
        Ok((plan, inputs.map(|i| i.mask).unwrap_or_default()))
    }

    /// Whether a flag of the digest is given: a resume then computes the
    /// digest again instead of reusing the stored one.
    fn digest_flags_given(&self) -> bool {
        let d = &self.digest;
        self.content_root.is_some()
            || self.prompt_budget.is_some()
            || d.date.is_some()
            || d.previous_summary.is_some()
            || d.share.is_some()
            || d.max_words.is_some()
            || d.config.is_some()
            || d.follow_symlinks
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

// `ctx run`'s inputs: the plan's ([`PlanInputArgs`]) and where published
// outputs go.
#[derive(Debug, Clone, clap::Args)]
pub struct RunInputArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    /// Write each task's final output to DIR/{its publish: path}, atomically,
    /// once the run ends, for each task that completed with its checks
    /// passing (never with the dry-run engine; with a shared --store, once
    /// the run is complete). Without it nothing is published.
    #[arg(long, value_name = "DIR", help_heading = heading::INPUTS)]
    pub publish_root: Option<PathBuf>,
}

/// What [`RunInputArgs::prepare`] needs to know of the run.
pub struct RunKind {
    /// The engine is the dry-run engine (it never publishes).
    pub dry_run_engine: bool,
    /// The run goes to a shared PostgreSQL store.
    pub shared: bool,
}

/// Where the plan [`RunInputArgs::prepare`] fills comes from.
pub struct PlanFrom<'a> {
    /// PLAN, as given; `None` for a resume of the stored plan.
    pub file: Option<&'a Path>,
    /// For a resume: the path the run's plan was given as (a stored plan's
    /// `history:` paths are relative to its directory).
    pub source: Option<&'a Path>,
    /// For a resume: what the run's plan was filled from.
    pub stored: Option<&'a RunInputs>,
}

impl RunInputArgs {
    /// The plan as it runs, and what the run records of its inputs: filled
    /// from the flags (a new run), or from the run's stored inputs under
    /// them (a resume, with PLAN or with the stored plan before filling).
    /// A resume of a run stored without inputs runs its stored plan as it
    /// is.
    pub fn prepare(
        &self,
        plan: Plan,
        from: &PlanFrom<'_>,
        kind: &RunKind,
    ) -> Result<(Plan, Option<RunInputs>), CliError> {
        if self.publish_root.is_some() && kind.dry_run_engine {
            return Err(CliError::usage(
                "--publish-root: the dry-run engine never publishes (its outputs are placeholders); choose --engine command or openai",
            ));
        }
        let path = match (from.file, from.stored) {
            (Some(file), _) => file,
            (None, Some(_)) => from.source.unwrap_or(Path::new("plan")),
            (None, None) => {
                if !self.plan.vars.is_empty() || self.plan.content_root.is_some() {
                    return Err(CliError::usage(
                        "--resume without PLAN runs the plan as it was stored, which has no variables; give the PLAN to use --var or --content-root",
                    ));
                }
                return Ok((plan, None));
            }
        };
        if kind.shared
            && let Some(v) = plan.variables.iter().find(|v| v.secret)
        {
            return Err(CliError::usage(format!(
                "{}: variable {} is secret, and a shared --store cannot take it: workers run the plan as stored, and a secret is never stored",
                path.display(),
                v.name
            )));
        }
        self.plan.fill(plan, path, from.stored)
    }
}
