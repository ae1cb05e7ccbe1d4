//! `cargo bench -p ctx-report --bench render`: `render_html` on the Tetris
//! run (9 tasks) and on seeded random runs of 10, 1,000 and 2,000 tasks shaped
//! like the scheduling benchmark's plan (full prompts and outputs, ~9 KB of
//! text per task). The browser's load time is measured separately by
//! `crates/ctx-report/tools/load_time.py` (see docs/runs.md, "Run report").

#[path = "../tests/common/mod.rs"]
mod common;

use ctx_report::{RunReportInput, render_html};

fn main() {
    divan::main();
}

#[divan::bench]
fn tetris(b: divan::Bencher<'_, '_>) {
    let run = common::tetris_run(false);
    b.bench(|| render_html(divan::black_box(&run)));
}

#[divan::bench(args = [10, 1_000, 2_000])]
fn synthetic(b: divan::Bencher<'_, '_>, n: usize) {
    let run: RunReportInput = common::synthetic_run(n, 7);
    b.bench(|| render_html(divan::black_box(&run)));
}
