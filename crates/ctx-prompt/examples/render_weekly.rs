//! Renders the README's `ctx render` example with one library call
//! (`cargo run -p ctx-prompt --example render_weekly`); stdout is exactly
//! what `ctx render fixtures/weekly/prompts/analyze-weekly.md --var
//! WEEK=2026-W34 --var PROJECT=Kestrel --var MAX_WORDS=600 --var
//! RAW_JSON=@fixtures/weekly/prompts/raw-2026-W34.json --content-root
//! fixtures/weekly/content --date 2026-08-20 --prompt-budget 8000` prints.

use std::collections::BTreeMap;
use std::path::Path;

use ctx_history::{DigestRequest, HistoryConfig, parse_date};
use ctx_prompt::render_prompt::{HistoryInput, RenderInput, render_prompt};
use ctx_prompt::template::{Classes, Template};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weekly = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/weekly");
    let source = std::fs::read_to_string(weekly.join("prompts/analyze-weekly.md"))?;
    let template = Template::parse(&source, "fixtures/weekly/prompts/analyze-weekly.md")?;
    let raw = std::fs::read_to_string(weekly.join("prompts/raw-2026-W34.json"))?;
    let values = BTreeMap::from([
        ("WEEK".to_string(), "2026-W34".to_string()),
        ("PROJECT".to_string(), "Kestrel".to_string()),
        ("MAX_WORDS".to_string(), "600".to_string()),
        // As `--var NAME=@FILE`: one trailing line break is dropped.
        (
            "RAW_JSON".to_string(),
            raw.strip_suffix('\n').unwrap_or(&raw).to_string(),
        ),
    ]);
    let config = HistoryConfig {
        prompt_budget: 8000,
        ..HistoryConfig::default()
    };
    let date = parse_date("2026-08-20")?;
    let request = DigestRequest::new(&config, weekly.join("content"), date);
    let classes = Classes::default();
    let mut input = RenderInput::new(&template, &classes, values);
    input.history = Some(HistoryInput::new(config, request));
    print!("{}", render_prompt(input)?.text);
    Ok(())
}
