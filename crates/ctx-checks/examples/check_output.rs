//! Checks one output file against a list of checks, as a task's output
//! would be checked, and prints each result and the retry feedback.
//!
//! ```text
//! cargo run -p ctx-checks --example check_output -- CHECKS OUTPUT \
//!     [--entity NAME=VALUE]... [--judge-answer TEXT]
//! ```
//!
//! `CHECKS` is a YAML or JSON list of checks (the `checks:` of a plan task);
//! schema paths in it are relative to its directory. `--entity` adds an
//! entity for `entities` checks (repeat it; `NAME=V1|V2` gives several
//! values). A `judge` check needs a model, which this example does not
//! call: it prints the judge prompt's size and records `--judge-answer` as
//! the judge's reply (the check fails as "not asked" without it).
//! Exits 0 when every check passes, 1 when one fails, 2 on bad input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ctx_checks::{Check, CheckSet, EvalContext, ExpectedEntity, Feedback, all_passed};
use ctx_tokens::TokenizerExt;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool, String> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let mut entities = Vec::new();
    let mut judge_answer = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--entity" => {
                let spec = args.next().ok_or("--entity needs NAME=VALUE")?;
                let (name, values) = spec.split_once('=').ok_or("--entity needs NAME=VALUE")?;
                let values: Vec<String> = values.split('|').map(str::to_string).collect();
                entities.push(ExpectedEntity::new(name, &values, None).map_err(|e| e.to_string())?);
            }
            "--judge-answer" => {
                judge_answer = Some(args.next().ok_or("--judge-answer needs TEXT")?)
            }
            _ => positional.push(PathBuf::from(arg)),
        }
    }
    let [checks_path, output_path] = positional.as_slice() else {
        return Err(
            "usage: check_output CHECKS OUTPUT [--entity NAME=VALUE]... [--judge-answer TEXT]"
                .into(),
        );
    };

    let text = std::fs::read_to_string(checks_path)
        .map_err(|e| format!("cannot read {}: {e}", checks_path.display()))?;
    let checks = parse_checks(&text, checks_path)?;
    let base = checks_path.parent().unwrap_or(Path::new("."));
    let set = CheckSet::compile(&checks, base).map_err(|e| {
        let cause = std::error::Error::source(&e)
            .map(|c| format!(": {c}"))
            .unwrap_or_default();
        format!("{}: {e}{cause}", checks_path.display())
    })?;
    let output = std::fs::read(output_path)
        .map_err(|e| format!("cannot read {}: {e}", output_path.display()))?;

    let context = EvalContext {
        entities: &entities,
        canary: None,
    };
    let mut evaluation = set.evaluate(&output, &context);
    for request in evaluation.take_judge_requests() {
        println!(
            "judge check {}: a {}-byte prompt for {} (max {} tokens)",
            request.index,
            request.prompt.len(),
            request.model.as_deref().unwrap_or("the run's model"),
            request.max_tokens
        );
        if let Some(answer) = &judge_answer {
            evaluation
                .record_judge_answer(request.index, answer)
                .map_err(|e| e.to_string())?;
        }
    }
    let results = evaluation.finish();
    for result in &results {
        let mark = if result.passed { "pass" } else { "FAIL" };
        println!("{mark}  {:<12} {}", result.kind.as_str(), result.message);
        if let Some(detail) = &result.detail {
            println!("      {:<12} ({detail})", "");
        }
    }
    let counter = ctx_tokens::Tokenizer::Cl100kBase.counter();
    if let Some(feedback) = Feedback::build(&results, &*counter) {
        println!(
            "\nretry feedback ({} tokens, cl100k_base):\n\n{}",
            feedback.tokens, feedback.text
        );
    }
    Ok(all_passed(&results))
}

/// YAML or JSON by extension, with the failing field's path in the error.
fn parse_checks(text: &str, path: &Path) -> Result<Vec<Check>, String> {
    let is_json = path.extension().is_some_and(|e| e == "json");
    let located =
        |field: String, message: String| format!("{}: checks{field}: {message}", path.display());
    if is_json {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de)
            .map_err(|e| located(path_of(&e), e.inner().to_string()))
    } else {
        let mut field = String::new();
        let result = serde_saphyr::with_deserializer_from_str(text, |de| {
            serde_path_to_error::deserialize::<_, Vec<Check>>(de).map_err(|e| {
                field = path_of(&e);
                e.into_inner()
            })
        });
        result.map_err(|e| located(field, e.to_string()))
    }
}

fn path_of<E>(e: &serde_path_to_error::Error<E>) -> String {
    let p = e.path().to_string();
    if p == "." { String::new() } else { p }
}
