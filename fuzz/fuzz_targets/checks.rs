//! Arbitrary (checks, output, judge answer) triples through ctx-checks:
//! parse the checks as YAML, compile, evaluate, answer the judges, build
//! the feedback. Nothing may panic or overflow the stack, and:
//! one result per check, of its kind; the same input gives the same
//! results and feedback; `contains` and `not_contains` of the same text
//! and case option disagree; a judge prompt holds exactly one fence, and
//! no message quoting the output holds a fence tag.
//!
//! Input layout: the checks (YAML, a list or a single check), a NUL byte,
//! the output (any bytes, so invalid UTF-8 too), a NUL byte, the judge's
//! answer. Schema files are not read (paths are dropped): a fuzzer must
//! not depend on the file system.

#![no_main]

use std::path::Path;

use ctx_checks::{Check, CheckSet, EvalContext, ExpectedEntity, Feedback, Rule, SchemaSource};
use ctx_fence::{FENCE_CLOSE, FENCE_OPEN, TagKind, find_tags};
use ctx_tokens::TokenizerExt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let spec = parts.next().unwrap_or(&[]);
    let output = parts.next().unwrap_or(&[]);
    let answer = String::from_utf8_lossy(parts.next().unwrap_or(&[]));
    let Ok(spec) = std::str::from_utf8(spec) else {
        return;
    };
    let checks: Vec<Check> = match serde_saphyr::from_str::<Vec<Check>>(spec) {
        Ok(list) => list,
        Err(_) => match serde_saphyr::from_str::<Check>(spec) {
            Ok(one) => vec![one],
            Err(_) => return,
        },
    };
    let checks: Vec<Check> = checks
        .into_iter()
        .filter(|c| !matches!(c.rule, Rule::JsonSchema { schema: SchemaSource::Path(_) }))
        .collect();
    let Ok(set) = CheckSet::compile(&checks, Path::new("/nonexistent")) else {
        return;
    };
    // The output's first line doubles as an entity value, so entities are
    // sometimes reflected and sometimes not.
    let first_line = String::from_utf8_lossy(output.split(|&b| b == b'\n').next().unwrap_or(&[])).into_owned();
    let entities = [
        ExpectedEntity::new("Entity", &[first_line], None).expect("a literal always compiles"),
        ExpectedEntity::new("Name only", &[], None).expect("a literal always compiles"),
    ];
    // A planted canary, so `canary` checks judge the output too.
    let context = EvalContext {
        entities: &entities,
        canary: Some("ctx-canary-0123456789abcdef"),
    };

    let run = || {
        let mut evaluation = set.evaluate(output, &context);
        for request in evaluation.take_judge_requests() {
            let fence_tags = find_tags(&request.prompt)
                .iter()
                .filter(|t| t.kind != TagKind::Control)
                .count();
            let rubric_tags = match &checks[request.index].rule {
                Rule::Judge(judge) => find_tags(&judge.rubric).len(),
                _ => panic!("a judge request for a check that is no judge"),
            };
            if rubric_tags == 0 {
                assert_eq!(fence_tags, 2, "the judge prompt's fence does not hold");
                assert_eq!(request.prompt.matches(FENCE_OPEN).count(), 1);
                assert_eq!(request.prompt.matches(FENCE_CLOSE).count(), 1);
            }
            evaluation.record_judge_answer(request.index, &answer).expect("a taken request is awaited");
        }
        evaluation.finish()
    };
    let results = run();
    assert_eq!(results.len(), checks.len());
    for (result, check) in results.iter().zip(&checks) {
        assert_eq!(result.kind, check.kind());
        if matches!(check.rule, Rule::JsonSchema { .. } | Rule::Judge(_)) && check.message.is_none() {
            assert!(find_tags(&result.message).is_empty(), "a message quotes a tag: {:?}", result.message);
        }
    }
    assert_eq!(results, run(), "evaluation is not deterministic");

    let counter = ctx_tokens::Tokenizer::Estimate.counter();
    let feedback = Feedback::build(&results, &*counter);
    assert_eq!(feedback, Feedback::build(&results, &*counter));
    if let Some(f) = &feedback {
        assert_eq!(f.text.lines().filter(|l| l.starts_with("## ")).count(), 1);
        let fitted = Feedback::fit(&results, &*counter, f.tokens / 2);
        assert!(fitted.is_none_or(|g| g.tokens <= f.tokens / 2));
    }

    for check in &checks {
        let (text, case_sensitive) = match &check.rule {
            Rule::Contains { text, case_sensitive } | Rule::NotContains { text, case_sensitive } => {
                (text.clone(), *case_sensitive)
            }
            _ => continue,
        };
        let pair = [
            Check::new(Rule::Contains { text: text.clone(), case_sensitive }),
            Check::new(Rule::NotContains { text, case_sensitive }),
        ];
        let Ok(pair) = CheckSet::compile(&pair, Path::new("/nonexistent")) else {
            continue;
        };
        let r = pair.evaluate(output, &context).finish();
        assert_ne!(r[0].passed, r[1].passed, "contains and not_contains agree");
    }
});
