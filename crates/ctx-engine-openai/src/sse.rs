//! An incremental parser for server-sent events (`text/event-stream`).
//!
//! Streaming chat completions arrive as SSE: `data: {json}` lines separated
//! by blank lines, ending with `data: [DONE]`. Network chunks split that
//! stream anywhere — inside a line, between `\r` and `\n`, inside a
//! multi-byte UTF-8 character — so the parser keeps the unfinished line
//! between calls to [`SseParser::feed`] and only ever decodes complete
//! lines. It follows the WHATWG rules for the parts that matter here:
//!
//! * lines end with `\r\n`, `\n` or `\r` (a `\r` at the end of one chunk and
//!   a `\n` at the start of the next are one line end);
//! * a leading byte-order mark is dropped;
//! * `:` starts a comment (servers send `: keep-alive` pings);
//! * `field: value` loses one space after the colon; a line without a colon
//!   is a field with an empty value;
//! * several `data` lines join with `\n`; a blank line dispatches the event;
//!   an event with no `data` line is not dispatched;
//! * `retry` must be all ASCII digits; an `id` containing NUL is ignored.
//!
//! Memory is bounded: an event whose data (plus the unfinished line) grows
//! past the limit is an error, not an ever-growing buffer.

/// The default cap on one event's size: far above any chat-completion
/// chunk, far below what could hurt.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field; `None` means the default type, `message`.
    pub event: Option<String>,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The last `id` seen so far in the stream, if any.
    pub id: Option<String>,
    /// A `retry` field in this event, in milliseconds.
    pub retry: Option<u64>,
}

/// The stream broke a rule the parser enforces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One event (or one unfinished line) grew past the size limit.
    #[error("server-sent event larger than {limit} bytes")]
    EventTooLarge {
        /// The limit in force.
        limit: usize,
    },
}

/// Parses a byte stream into [`SseEvent`]s, chunk by chunk.
///
/// ```
/// use ctx_engine_openai::sse::SseParser;
///
/// let mut parser = SseParser::new();
/// let mut events = parser.feed(b"data: {\"a\"").unwrap();
/// assert!(events.is_empty()); // the line is not finished yet
/// events = parser.feed(b":1}\r\n\r\ndata: [DONE]\n\n").unwrap();
/// assert_eq!(events.len(), 2);
/// assert_eq!(events[0].data, "{\"a\":1}");
/// assert_eq!(events[1].data, "[DONE]");
/// assert!(!parser.has_pending());
/// ```
#[derive(Debug, Clone)]
pub struct SseParser {
    /// The unfinished line, raw bytes (UTF-8 may be split).
    line: Vec<u8>,
    /// Data of the event being built, each line followed by `\n`.
    data: String,
    /// Whether any `data` field was seen for the event being built.
    has_data: bool,
    event: Option<String>,
    retry: Option<u64>,
    last_id: Option<String>,
    /// The previous chunk ended in `\r`: a leading `\n` is part of it.
    skip_lf: bool,
    /// No line has been completed yet (for the byte-order mark).
    first_line: bool,
    max_event_bytes: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::new()
    }
}

impl SseParser {
    /// A parser with [`DEFAULT_MAX_EVENT_BYTES`].
    pub fn new() -> SseParser {
        SseParser::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A parser that rejects events larger than `max_event_bytes`.
    pub fn with_limit(max_event_bytes: usize) -> SseParser {
        SseParser {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            event: None,
            retry: None,
            last_id: None,
            skip_lf: false,
            first_line: true,
            max_event_bytes,
        }
    }

    /// Feeds the next chunk and returns the events it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.skip_lf && !rest.is_empty() {
            self.skip_lf = false;
            if let Some((&b'\n', tail)) = rest.split_first() {
                rest = tail;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (head, tail) = rest.split_at(pos);
            self.line.extend_from_slice(head);
            self.check_size()?;
            let terminator = tail.first().copied();
            let mut after = tail.get(1..).unwrap_or_default();
            self.skip_lf = false;
            if terminator == Some(b'\r') {
                match after.first() {
                    Some(b'\n') => after = after.get(1..).unwrap_or_default(),
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.process_line(&line) {
                events.push(event);
            }
            self.check_size()?;
            rest = after;
        }
        self.line.extend_from_slice(rest);
        self.check_size()?;
        Ok(events)
    }

    /// Whether the stream so far ends inside an event: an unfinished line,
    /// or fields not yet dispatched by a blank line. A stream that closes in
    /// that state was cut short.
    pub fn has_pending(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    fn check_size(&self) -> Result<(), SseError> {
        if self.line.len().saturating_add(self.data.len()) > self.max_event_bytes {
            Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            })
        } else {
            Ok(())
        }
    }

    fn process_line(&mut self, raw: &[u8]) -> Option<SseEvent> {
        let mut raw = raw;
        if self.first_line {
            self.first_line = false;
            if let Some(stripped) = raw.strip_prefix(b"\xEF\xBB\xBF") {
                raw = stripped;
            }
        }
        if raw.is_empty() {
            return self.dispatch();
        }
        if raw.first() == Some(&b':') {
            return None;
        }
        let line = String::from_utf8_lossy(raw);
        let (field, value) = match line.find(':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        let retry = self.retry.take();
        if !self.has_data {
            self.data.clear();
            return None;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        Some(SseEvent {
            event: event.filter(|e| !e.is_empty()),
            data,
            id: self.last_id.clone(),
            retry,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(input: &[u8]) -> Vec<SseEvent> {
        SseParser::new().feed(input).unwrap()
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn openai_stream() {
        let input = b"data: {\"x\":1}\n\ndata: {\"x\":2}\n\ndata: [DONE]\n\n";
        assert_eq!(data(&all(input)), ["{\"x\":1}", "{\"x\":2}", "[DONE]"]);
    }

    #[test]
    fn every_line_ending() {
        assert_eq!(
            data(&all(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n")),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn cr_lf_split_across_chunks_is_one_line_end() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: a\r").unwrap().is_empty());
        // The `\n` completes the `\r` above; the next `\r\n` is the blank line.
        let events = p.feed(b"\n\r\n").unwrap();
        assert_eq!(data(&events), ["a"]);
        assert!(!p.has_pending());
    }

    #[test]
    fn multi_line_data_comments_and_fields() {
        let input =
            b": keep-alive\nevent: update\nid: 7\nretry: 1500\ndata: one\ndata:two\ndata\n\n";
        let events = all(input);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "one\ntwo\n");
        assert_eq!(events[0].event.as_deref(), Some("update"));
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[0].retry, Some(1500));
    }

    #[test]
    fn bad_retry_and_nul_id_are_ignored() {
        let events = all(b"retry: 1x\nid: a\0b\ndata: z\n\n");
        assert_eq!(events[0].retry, None);
        assert_eq!(events[0].id, None);
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert!(all(b"event: ping\n\n: only a comment\n\n").is_empty());
    }

    #[test]
    fn byte_order_mark_is_dropped_even_split() {
        let mut p = SseParser::new();
        assert!(p.feed(b"\xEF\xBB").unwrap().is_empty());
        let events = p.feed(b"\xBFdata: x\n\n").unwrap();
        assert_eq!(data(&events), ["x"]);
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let text = "data: héllo wörld\n\n".as_bytes();
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for b in text {
            out.extend(p.feed(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(data(&out), ["héllo wörld"]);
    }

    #[test]
    fn pending_detects_a_cut_stream() {
        let mut p = SseParser::new();
        p.feed(b"data: {\"partial").unwrap();
        assert!(p.has_pending());
        let mut p = SseParser::new();
        p.feed(b"data: complete line\n").unwrap();
        assert!(
            p.has_pending(),
            "a data line without its blank line is pending"
        );
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut p = SseParser::with_limit(16);
        assert_eq!(
            p.feed(b"data: 0123456789abcdefghij"),
            Err(SseError::EventTooLarge { limit: 16 })
        );
        let mut p = SseParser::with_limit(16);
        p.feed(b"data: 0123456789\n").unwrap();
        assert!(p.feed(b"data: 0123456789\n").is_err());
    }

    proptest! {
        /// Chunk boundaries never change what is parsed.
        #[test]
        fn chunking_does_not_matter(
            input in proptest::collection::vec(
                prop_oneof![
                    Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '),
                    Just(b'd'), Just(b'a'), Just(b't'), Just(b'i'), Just(0xC3u8), Just(0xA9u8),
                    any::<u8>()
                ],
                0..200,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let whole = SseParser::new().feed(&input).unwrap();
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= input.len()).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut p = SseParser::new();
            let mut pieces = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain(std::iter::once(input.len())) {
                pieces.extend(p.feed(&input[from..cut]).unwrap());
                from = cut;
            }
            prop_assert_eq!(whole, pieces);
        }
    }
}
