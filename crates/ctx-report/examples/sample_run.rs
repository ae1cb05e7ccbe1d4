//! Writes a sample run as JSON for `render_report`: the Tetris fixture's 9
//! tasks with synthetic times (the run the browser test draws), or a
//! seeded random run of N tasks shaped like the scheduling benchmark's
//! plan (used to measure the report at 2,000 tasks).
//!
//! ```text
//! cargo run -p ctx-report --example sample_run -- tetris tetris.json
//! cargo run -p ctx-report --example sample_run -- 2000 big.json [SEED]
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (kind, out, seed) = match args.as_slice() {
        [k, o] => (k, o, 7),
        [k, o, s] => match s.parse() {
            Ok(s) => (k, o, s),
            Err(_) => {
                eprintln!("error: SEED must be a number, got `{s}`");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: sample_run (tetris | N) OUT.json [SEED]");
            return ExitCode::from(2);
        }
    };
    let run = if kind == "tetris" {
        common::tetris_run(false)
    } else {
        match kind.parse::<usize>() {
            Ok(n) => common::synthetic_run(n, seed),
            Err(_) => {
                eprintln!("error: expected `tetris` or a task count, got `{kind}`");
                return ExitCode::from(2);
            }
        }
    };
    let json = match serde_json::to_string_pretty(&run) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(out, json) {
        eprintln!("error: {out}: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
