//! `ctx`: give every LLM prompt exactly the context it needs, within a
//! budget, and never let untrusted text pose as instructions.
//!
//! This crate is the only place that knows about terminals, output formats
//! and exit codes (see `exit.rs`); everything else lives in the library
//! crates.
//!
//! It is the root of ctx-cli's library target: the binary (src/bin/ctx.rs)
//! calls [`main`]. Nothing else is public: `cargo xtask man` gets the man
//! pages from the binary itself (`ctx man --out DIR`, not in `--help`:
//! src/commands/man.rs), so xtask never links this crate.

mod commands;
mod engines;
mod exit;
mod format;
mod heading;
mod io;
mod runtime;
mod telemetry;
mod tokenizer_flag;
mod var_flag;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::exit::Exit;

/// Context for LLM prompts: bounded, exact, fenced.
#[derive(Debug, Parser)]
#[command(name = "ctx", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// `defer`: each subcommand's arguments are defined only when that
// subcommand is parsed (or its help printed, or the whole tree built for
// completions and man pages), so `ctx --version` and `ctx history` do not
// build every other subcommand's flags first (issue 26: that was a third
// of `ctx --version`'s instructions). The parser is clap's either way.
// The argument structs (`#[derive(clap::Args)]`) carry plain comments, not
// doc comments: a deferred definition runs last, and clap would take an
// argument struct's doc comment as the subcommand's help text (the test
// `deferred_subcommands_keep_their_help_text`).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    /// Execute a plan: assemble each task's prompt and run it on an engine.
    // Boxed: `ctx run` flattens every engine's flags, which makes its
    // arguments far larger than any other command's.
    Run(Box<commands::run::Args>),
    /// Measure whether context helps: run a checked plan in variants
    /// without entities and/or dependency outputs, and count the checks
    /// that pass.
    Eval(Box<commands::eval::Args>),
    /// Work on the runs of a shared PostgreSQL store: claim ready tasks,
    /// run them, commit results under a lease.
    Worker(Box<commands::worker::Args>),
    /// Check or draw a plan.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Print the plan format's JSON Schema.
    Schema(commands::schema::Args),
    /// Assemble a bounded digest of a markdown report archive.
    History(commands::history::Args),
    /// Render a prompt template, fencing untrusted values.
    Render(commands::render::Args),
    /// Check prompt templates for unfenced or unclassified placeholders.
    Lint(commands::lint::Args),
    /// List the known model prices, where each came from, and the default
    /// table's date.
    Prices(commands::prices::Args),
    /// List the inference engines and the settings each reads.
    Engines(commands::engines::Args),
    /// Print a shell completion script to stdout.
    Completions(commands::completions::Args),
    /// Inspect, export and prune stored runs.
    #[command(subcommand)]
    Runs(commands::runs::RunsCommand),
    /// Sum what stored runs spent over a period, by plan, model, day or
    /// run, from each attempt's stored cost.
    Spend(commands::spend::Args),
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum PlanCommand {
    /// Report every problem in a plan at once.
    Check(commands::plan_check::Args),
    /// Print the DAG with its order, levels and critical path.
    Graph(commands::plan_graph::Args),
    // Boxed: it holds `ctx run`'s engine flags.
    /// What a run can cost: prompt tokens and dollars per task and in
    /// total, as a range.
    Cost(Box<commands::plan_cost::Args>),
}

/// The clap definition of `ctx`, every subcommand and flag: completion
/// scripts and man pages are generated from it.
fn command() -> clap::Command {
    Cli::command()
}

/// Parses the process's arguments, runs the command and returns its exit
/// code.
pub fn main() -> ExitCode {
    // `ctx man --out DIR` (`cargo xtask man`) is not in `Cli`: clap_complete
    // offers even hidden subcommands (zsh), and the pages are for
    // packagers, not a command of the tour.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == commands::man::NAME)
    {
        return finish(commands::man::run(command()));
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => traced(&a.otlp.clone(), || commands::run::run(*a)),
        Command::Eval(a) => traced(&a.otlp.clone(), || commands::eval::run(*a)),
        Command::Worker(a) => traced(&a.otlp.clone(), || commands::worker::run(*a)),
        Command::Plan(PlanCommand::Check(a)) => commands::plan_check::run(a),
        Command::Plan(PlanCommand::Graph(a)) => commands::plan_graph::run(a),
        Command::Plan(PlanCommand::Cost(a)) => commands::plan_cost::run(*a),
        Command::Prices(a) => commands::prices::run(a),
        Command::Schema(a) => commands::schema::run(a),
        Command::History(a) => commands::history::run(a),
        Command::Render(a) => commands::render::run(a),
        Command::Lint(a) => commands::lint::run(a),
        Command::Engines(a) => commands::engines::run(a),
        Command::Completions(a) => commands::completions::run(a, command()),
        Command::Runs(c) => commands::runs::run(c),
        Command::Spend(a) => commands::spend::run(a),
    };
    runtime::shutdown();
    finish(result)
}

/// The exit code of `result`, its error printed on stderr first.
fn finish(result: exit::CliResult) -> ExitCode {
    match result {
        Ok(code) => code.into(),
        Err(e) => {
            // Errors quote files, servers and commands: escaped for the
            // terminal (ctx_table::printable_lines) like every such text.
            eprintln!("error: {}", ctx_table::printable_lines(&e.message));
            e.exit.into()
        }
    }
}

/// `command` with the OTLP exporter around it when `otlp` or the
/// environment asks for one (src/telemetry.rs).
fn traced(
    otlp: &telemetry::OtlpFlag,
    command: impl FnOnce() -> exit::CliResult,
) -> exit::CliResult {
    let tracing = telemetry::start(otlp);
    let result = command();
    tracing.finish();
    result
}

/// Every exit code `ctx` uses, with its meaning in one line, in
/// ascending order: the man pages' EXIT STATUS section (`ctx man`),
/// checked against the README's table by a test of src/commands/man.rs.
fn exit_codes() -> Vec<(u8, &'static str)> {
    Exit::ALL.iter().map(|e| (*e as u8, e.summary())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The about (and long about) of each subcommand of `unbuilt`, as its
    /// enum variant's doc comment gives it before any deferred
    /// definition has run.
    fn abouts(unbuilt: &clap::Command) -> Vec<(String, String, String)> {
        unbuilt
            .get_subcommands()
            .map(|s| {
                let text = |t: Option<&clap::builder::StyledStr>| t.map(|t| t.to_string());
                (
                    s.get_name().to_string(),
                    text(s.get_about()).unwrap_or_default(),
                    text(s.get_long_about()).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Deferred subcommands (`defer = true`) define their flags when
    /// built; that must not replace the help text their variant gives
    /// them with the doc comment of their arguments' struct (it did:
    /// `ctx history --help` opened with "Arguments of this command").
    #[test]
    fn deferred_subcommands_keep_their_help_text() {
        let mut built = command();
        built.build();
        let levels = [
            (None, abouts(&command())),
            (
                Some("plan"),
                abouts(&PlanCommand::augment_subcommands(clap::Command::new(
                    "plan",
                ))),
            ),
            (
                Some("runs"),
                abouts(&commands::runs::RunsCommand::augment_subcommands(
                    clap::Command::new("runs"),
                )),
            ),
        ];
        for (parent, expected) in levels {
            let parent = match parent {
                None => &built,
                Some(name) => built.find_subcommand(name).expect("subcommand"),
            };
            assert!(!expected.is_empty());
            for (name, about, long_about) in expected {
                let sub = parent.find_subcommand(&name).expect("subcommand");
                assert_eq!(
                    sub.get_about().map(|a| a.to_string()).unwrap_or_default(),
                    about,
                    "{name}"
                );
                assert_eq!(
                    sub.get_long_about()
                        .map(|a| a.to_string())
                        .unwrap_or_default(),
                    long_about,
                    "{name}"
                );
            }
        }
    }
}
