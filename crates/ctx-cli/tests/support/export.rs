//! `ctx runs export --format json` is `ctx run --format json` plus two
//! keys at the end of each task; tests that compare the two byte for byte
//! cut those keys out of the text first.

/// `text` (pretty JSON from `ctx runs export`) without each task's
/// `started_at` and `ended_at`, which must come last in the task, in that
/// order. Panics (failing the test) when they do not.
pub fn without_task_times(text: &str) -> String {
    const START: &str = ",\n      \"started_at\": ";
    const END: &str = "\n      \"ended_at\": ";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(START) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail.find(END).expect("ended_at after started_at");
        let line_end = tail[end + 1..]
            .find('\n')
            .map(|n| end + 1 + n)
            .expect("a line after ended_at");
        rest = &tail[line_end..];
        assert!(
            rest.starts_with("\n    }"),
            "ended_at must be the task's last key"
        );
    }
    out.push_str(rest);
    out
}
