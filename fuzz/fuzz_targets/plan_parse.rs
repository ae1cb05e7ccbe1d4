//! Arbitrary bytes through the plan reader: parse as JSON and as YAML
//! (and by sniffing), validate whatever parses, and resolve every task's
//! entity context. Nothing may panic; a parse error must name its origin.

#![no_main]

use ctx_model::{PlanFormat, parse_plan, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in [PlanFormat::Json, PlanFormat::Yaml, PlanFormat::sniff(text)] {
        match parse_plan(text, "fuzz", format) {
            Ok(plan) => {
                let problems = validate(&plan);
                for p in &problems {
                    let _ = p.to_string();
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
});
