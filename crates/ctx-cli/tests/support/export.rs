//! `ctx runs export --format json` is `ctx run --format json` plus three
//! keys at the end of each task; tests that compare the two byte for byte
//! cut those keys out of the text first.

/// `text` (pretty JSON from `ctx runs export`) without each task's
/// `started_at`, `ended_at` and `cost_usd`, which must come last in the
/// task, in that order. Panics (failing the test) when they do not.
pub fn without_task_times(text: &str) -> String {
    const START: &str = ",\n      \"started_at\": ";
    const END: &str = "\n      \"ended_at\": ";
    const COST: &str = "\n      \"cost_usd\": null";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(START) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let cost = tail
            .find(&format!("{COST}\n"))
            .expect("cost_usd after started_at");
        let end = tail.find(END).expect("ended_at after started_at");
        assert!(end < cost, "ended_at must come before cost_usd");
        rest = &tail[cost + COST.len()..];
        assert!(
            rest.starts_with("\n    }"),
            "cost_usd must be the task's last key"
        );
    }
    out.push_str(rest);
    out
}
