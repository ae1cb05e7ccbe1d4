//! Arbitrary text as a history configuration, in both syntaxes. Parsing
//! either succeeds with a configuration that passes validation, or fails
//! with an error naming the file; it never panics.

#![no_main]

use std::path::Path;

use ctx_history::HistoryConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for name in ["fuzz.toml", "fuzz.yaml"] {
        match HistoryConfig::parse(text, Path::new(name)) {
            Ok(config) => {
                assert!(config.validate().is_ok());
                let _ = config.token_cap();
                let _ = config.sources_by_priority();
            }
            Err(e) => assert!(e.to_string().starts_with(name)),
        }
    }
});
