//! Arbitrary bytes through the incremental server-sent-events parser, fed
//! whole and split at a point taken from the input: nothing may panic, and
//! where both succeed, chunking must not change the events parsed.

#![no_main]

use ctx_engine_openai::sse::SseParser;
use libfuzzer_sys::fuzz_target;

/// Small enough that the size limit is exercised too.
const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| usize::from(b)) % (data.len() + 1);
    let (head, tail) = data.split_at(split);

    let mut whole = SseParser::with_limit(LIMIT);
    let whole_events = whole.feed(data);

    let mut parts = SseParser::with_limit(LIMIT);
    let first = parts.feed(head);
    let second = parts.feed(tail);

    if let (Ok(all), Ok(mut a), Ok(b)) = (whole_events, first, second) {
        a.extend(b);
        assert_eq!(all, a);
        assert_eq!(whole.has_pending(), parts.has_pending());
        for event in &all {
            assert!(event.data.len() <= LIMIT);
        }
    }
});
