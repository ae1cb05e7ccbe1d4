//! The second process of `tests/crash.rs`, a helper binary and not a
//! test: a test run must not count a child's entry point as a pass (it was
//! a `#[test]` that passed by returning when no child was asked for).
//! Shipped with nothing: ctx's installer builds the `ctx` binary alone.
//!
//! `ctx-store-sqlite-crash-child write DIR PLAN` creates the run in `DIR`
//! for the plan in the JSON file `PLAN`, then stores results forever,
//! printing `stored ID` once each `store()` has returned: what the crash
//! test kills it after. `... hold DIR PLAN` resumes the run and holds its
//! lock until killed. Both print `ready PID` first.

use std::path::Path;
use std::process::ExitCode;

use ctx_model::{Plan, TaskExecutionResult, TaskStatus};
use ctx_store::ExecutionStore;
use ctx_store_sqlite::{NewRun, SqliteStore};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [what, dir, plan] = args.as_slice() else {
        eprintln!("usage: ctx-store-sqlite-crash-child write|hold DIR PLAN");
        return ExitCode::from(2);
    };
    match run(what, Path::new(dir), Path::new(plan)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes or holds until killed; returns only on an error.
fn run(what: &str, dir: &Path, plan: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let plan: Plan = serde_json::from_slice(&std::fs::read(plan)?)?;
    let new_run = NewRun {
        plan: &plan,
        engine: "command",
        plan_source: None,
        inputs: None,
    };
    let store = match what {
        "write" => SqliteStore::create_in(dir, &new_run)?,
        "hold" => SqliteStore::resume(dir, &new_run)?.0,
        other => return Err(format!("{other}: expected write or hold").into()),
    };
    println!("ready {}", std::process::id());
    for i in 0.. {
        if what == "write" {
            let id = format!("t{i}");
            store.store(TaskExecutionResult::new(&id, TaskStatus::InProgress))?;
            let mut r = TaskExecutionResult::new(&id, TaskStatus::Completed);
            r.output = format!("output {i} ").repeat(40);
            store.store(r)?;
            println!("stored {id}");
        } else {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    Ok(())
}
