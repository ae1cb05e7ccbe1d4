//! Arbitrary bytes through the plan reader: parse as JSON and as YAML
//! (and by sniffing), validate whatever parses, locate every problem's
//! field in the text, and resolve every task's entity context. Nothing may panic; a parse error must name its origin.

#![no_main]

use ctx_model::{FieldLocator, PlanFormat, parse_plan, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in [PlanFormat::Json, PlanFormat::Yaml, PlanFormat::sniff(text)] {
        match parse_plan(text, "fuzz", format) {
            Ok(plan) => {
                let problems = validate(&plan);
                let locator = FieldLocator::new(text);
                for p in &problems {
                    let _ = p.to_string();
                    let _ = locator.locate(&p.field);
                }
                for task in &plan.sub_tasks {
                    let _ = plan.resolve_entity_context(task);
                }
                // Validation is deterministic.
                assert_eq!(problems, validate(&plan));
            }
            Err(e) => assert!(e.to_string().starts_with("fuzz")),
        }
    }
    // The locator walks any text, plan or not.
    let _ = FieldLocator::new(text).locate("sub_tasks[0].dependencies[0]");
});
