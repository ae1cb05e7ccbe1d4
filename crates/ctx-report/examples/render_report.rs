//! Renders a run given as JSON (a `RunReportInput`) into one HTML file:
//!
//! ```text
//! cargo run -p ctx-report --example render_report -- INPUT.json OUT.html
//! ```
//!
//! Prints the file's size and the render time to stderr. `ctx runs report
//! RUN` will do the same from a stored run.

use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: render_report INPUT.json OUT.html");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(input) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {input}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let run = match ctx_report::RunReportInput::from_json(&text, input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let html = ctx_report::render_html(&run);
    let took = started.elapsed();
    if let Err(e) = std::fs::write(output, &html) {
        eprintln!("error: {output}: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!(
        "{output}: {} tasks, {} bytes, rendered in {:.1} ms",
        run.tasks.len(),
        html.len(),
        took.as_secs_f64() * 1e3
    );
    ExitCode::SUCCESS
}
