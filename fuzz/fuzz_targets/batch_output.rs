//! Arbitrary bytes as a batch's output or error file, read against the
//! requests of one file ctx sent (`ctx_engine_openai::batch::read_results`):
//! nothing may panic, and whatever is read back is an answer to a request
//! that was sent, each at most once.

#![no_main]

use std::collections::BTreeMap;

use ctx_deps::InferenceRequest;
use ctx_engine_openai::batch::{BatchCall, BatchClient, custom_id, read_results};
use ctx_engine_openai::{OpenAiConfig, RequestDefaults};
use ctx_model::Params;
use libfuzzer_sys::fuzz_target;

fn call(task: &str) -> BatchCall {
    BatchCall {
        run: "r1".into(),
        attempt: 1,
        request: InferenceRequest {
            task_id: task.into(),
            prompt: "Say yes.".into(),
            params: Params {
                prompt: "Say yes.".into(),
                max_tokens: Some(16),
                ..Params::default()
            },
            prompt_tokens: 3,
            max_output_bytes: 4096,
            purpose: Default::default(),
            cache_breakpoints: None,
            canary: None,
            response_schema: None,
        },
    }
}

fuzz_target!(|data: &[u8]| {
    let config = OpenAiConfig {
        base_url: "http://127.0.0.1:9/v1".into(),
        defaults: RequestDefaults {
            model: Some("m".into()),
            ..RequestDefaults::default()
        },
        ..OpenAiConfig::default()
    };
    let Ok(client) = BatchClient::new(config) else {
        return;
    };
    let calls = [call("a"), call("b"), call("c")];
    let Ok(files) = client.encode(&calls) else {
        return;
    };
    let sent: Vec<String> = ["a", "b", "c"].iter().map(|t| custom_id("r1", t, 1)).collect();
    for file in &files {
        let mut outcomes = BTreeMap::new();
        if read_results(data, "file-out", "batch-1", file, &mut outcomes).is_ok() {
            assert!(outcomes.keys().all(|id| sent.contains(id)), "{:?}", outcomes.keys());
        }
    }
});
