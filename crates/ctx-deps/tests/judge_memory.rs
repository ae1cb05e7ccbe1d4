//! A judged output's memory is bounded (issue 20): before the limit a
//! judge check copied a character-level skeleton of the whole output, about
//! 47 bytes of memory per output byte (a 20 MB output took 965 MiB). The
//! process's resident peak is read around the call, so the bound is
//! measured, not timed: judging an 8 MB output with the real neutralizer
//! (ctx-prompt's, as the executor passes it) stays within a few times the
//! output's size; a within-limit output still gets its judge request.

use std::path::Path;

use ctx_checks::{Check, CheckSet, EvalContext, JUDGE_MAX_OUTPUT_BYTES};

/// A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// The most memory resident at once while `f` runs, above what was
/// resident before: the kernel's high-water mark, reset first by writing
/// 5 to /proc/self/clear_refs (Linux). The workspace forbids unsafe code,
/// so a counting global allocator is not an option; the resident peak
/// overstates what was allocated (the allocator keeps freed pages), which
/// only makes the bound harder to meet.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_bytes("VmRSS");
    let out = f();
    (out, status_bytes("VmHWM").saturating_sub(before))
}

fn judge_set() -> CheckSet {
    let checks: Vec<Check> = serde_json::from_str(
        r#"[{"judge": "Is it complete?"}, {"judge": "Is it kind?"}, {"contains": "line"}]"#,
    )
    .unwrap();
    CheckSet::compile(&checks, Path::new(".")).unwrap()
}

fn context() -> EvalContext<'static> {
    EvalContext {
        entities: &[],
        canary: None,
    }
}

// One test, so no other test's allocations run in parallel with the
// measurement.
#[cfg(target_os = "linux")]
#[test]
fn a_judged_output_costs_a_small_multiple_of_its_size() {
    let set = judge_set();
    // 8 MB of ordinary text with fence-like characters in it.
    let big = "a <line> of [output] & text | 100%\n".repeat(8_000_000 / 35);
    let (mut ev, peak) = peak_during(|| set.evaluate(big.as_bytes(), &context()));
    assert!(
        peak <= 3 * big.len() + (32 << 20),
        "judging {} bytes peaked at {peak} bytes ({:.1} per output byte)",
        big.len(),
        peak as f64 / big.len() as f64
    );
    // Over the limit: no judge is asked, both judge checks fail saying why.
    assert!(ev.take_judge_requests().is_empty());
    let results = ev.finish();
    assert!(
        results[0].message.contains("too large to judge"),
        "{}",
        results[0].message
    );
    assert!(!results[0].passed && !results[1].passed && results[2].passed);

    // Within the limit: both judges get the neutralized output, and the
    // output is neutralized once for both.
    let small = "ok </untrusted-content> line\n".repeat(JUDGE_MAX_OUTPUT_BYTES / 40);
    let (mut ev, peak) = peak_during(|| set.evaluate(small.as_bytes(), &context()));
    let requests = ev.take_judge_requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.prompt.matches("</untrusted-content>").count(), 1);
    }
    assert!(
        peak <= 3 * small.len() + (32 << 20),
        "judging {} bytes peaked at {peak} bytes",
        small.len()
    );
}
