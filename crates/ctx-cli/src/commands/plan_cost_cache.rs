//! `ctx plan cost --layout design,cache`: the prefix-cache prediction
//! beside the cost report (ctx-run's `cache_prediction` computes it; this
//! module reads the flags and prints).

use ctx_cost::{CostReport, PriceBook, Round};
use ctx_model::{Plan, PromptLayout};
use ctx_run::cache_prediction::{CacheMinimum, LayoutPrediction, predict};
use ctx_run::estimate::{EngineDefaults, EstimateError};

use crate::exit::CliError;

/// A layout named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutArg {
    /// The design's order.
    Design,
    /// Most shared first.
    Cache,
}

impl From<LayoutArg> for PromptLayout {
    fn from(l: LayoutArg) -> PromptLayout {
        match l {
            LayoutArg::Design => PromptLayout::Design,
            LayoutArg::Cache => PromptLayout::Cache,
        }
    }
}

// The flags of the prediction.
#[derive(Debug, clap::Args)]
pub struct CacheArgs {
    /// Also predict how many prompt tokens a provider's prefix cache can
    /// serve, and the expected cost, under each of these layouts, side by
    /// side (`design`, `cache`, or `design,cache`).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LAYOUT")]
    pub layout: Vec<LayoutArg>,
    /// The shortest prefix the provider serves from cache, in tokens
    /// (OpenAI: 1024); above it the cached part grows in steps of 128.
    #[arg(long, default_value_t = CacheMinimum::OPENAI.min_tokens, value_name = "TOKENS")]
    pub cache_min_tokens: u64,
}

/// The report as text or JSON, with the prediction of each layout asked
/// for; the report alone when none is.
pub fn render(
    report: &CostReport,
    json: bool,
    args: &CacheArgs,
    plan: &Plan,
    defaults: &EngineDefaults<'_>,
    book: &PriceBook,
) -> Result<String, CliError> {
    let minimum = CacheMinimum {
        min_tokens: args.cache_min_tokens,
        ..CacheMinimum::OPENAI
    };
    let mut predictions = Vec::new();
    for &layout in &args.layout {
        predictions.push(
            predict(plan, defaults, book, layout.into(), minimum)
                .map_err(|e: EstimateError| CliError::usage(e.to_string()))?,
        );
    }
    if json {
        let mut value = serde_json::to_value(report)
            .map_err(|e| CliError::usage(format!("cannot encode JSON: {e}")))?;
        if !predictions.is_empty()
            && let Some(object) = value.as_object_mut()
        {
            object.insert(
                "cache".into(),
                serde_json::json!({"minimum": minimum, "layouts": predictions}),
            );
        }
        return crate::io::json_text(&value);
    }
    let mut text = report.render_text();
    if !predictions.is_empty() {
        text.push_str(&side_by_side(&predictions, minimum));
    }
    Ok(text)
}

/// One row per layout: calls, prompt tokens, cacheable tokens, the fraction,
/// the expected cost and the saving it expects, then what the figures
/// assume.
fn side_by_side(predictions: &[LayoutPrediction], minimum: CacheMinimum) -> String {
    let header = [
        "layout",
        "calls",
        "prompt tokens",
        "cacheable",
        "fraction",
        "expected",
        "saving",
    ];
    let rows: Vec<[String; 7]> = predictions
        .iter()
        .map(|p| {
            [
                p.layout.to_string(),
                p.calls.to_string(),
                p.prompt_tokens.to_string(),
                p.cacheable_tokens.to_string(),
                format!("{:.1}%", p.cacheable_fraction * 100.0),
                p.expected_usd
                    .map_or("unknown".into(), |u| u.to_dollars(6, Round::Up)),
                p.expected_saving_usd
                    .map_or("unknown".into(), |s| s.to_dollars(6)),
            ]
        })
        .collect();
    format!(
        "\nprefix cache (low-end prompts in schedule order; cached from {} tokens in steps of {}; a map task is max_items calls; expected: cacheable tokens at the cached rate, completion at max_tokens; saving: against every prompt token at the input rate):\n{}",
        minimum.min_tokens,
        minimum.step_tokens,
        ctx_table::render(&header, &[false, true, true, true, true, true, true], &rows)
    )
}
