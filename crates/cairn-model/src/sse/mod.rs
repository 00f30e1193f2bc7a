//! An incremental parser for server-sent events (the `text/event-stream` format).

mod framer;

pub use framer::{FramedEvent, SseFramer};

use crate::ModelError;

/// The largest event a parser holds by default: 32 MiB of one unterminated
/// line plus the `data` of the event it belongs to.
pub const SSE_MAX_EVENT: usize = 32 << 20;

/// One dispatched server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when the event had none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Turns a byte stream, fed in chunks of any size, into server-sent events.
///
/// The rules, as in the WHATWG `text/event-stream` specification:
///
/// 1. A line ends at `\r\n`, `\n` or `\r`; a `\r\n` split across two chunks is one
///    line ending.
/// 2. A line starting with `:` is a comment and is ignored.
/// 3. `field: value` sets a field; one space after the colon is dropped. A line
///    without a colon is a field with an empty value.
/// 4. `data` lines accumulate, joined with `\n`; `event` names the event; `id` and
///    `retry` and unknown fields are ignored.
/// 5. An empty line dispatches the event, unless no `data` line was seen.
/// 6. An event not ended by an empty line when the stream ends is discarded.
/// 7. A byte-order mark at the very start is skipped.
/// 8. What it holds is bounded: an unterminated line and the `data` of the
///    event being read together may not pass [`SseParser::max_event`]
///    (default [`SSE_MAX_EVENT`]). Past it, [`SseParser::feed`] fails with
///    [`ModelError::EventTooLarge`], now and on every later call.
///
/// Lines are decoded as UTF-8 only once complete, so a chunk boundary inside a
/// multi-byte character is harmless; invalid UTF-8 becomes U+FFFD.
///
/// ```
/// use cairn_model::SseParser;
///
/// let mut parser = SseParser::new();
/// let mut events = parser.feed(b"event: ping\ndata: {\"a\"")?;
/// assert!(events.is_empty());
/// events = parser.feed(b":1}\r\n\r\n")?;
/// assert_eq!(events[0].event, "ping");
/// assert_eq!(events[0].data, "{\"a\":1}");
/// # Ok::<(), cairn_model::ModelError>(())
/// ```
#[derive(Debug, Default)]
pub struct SseParser {
    framer: SseFramer,
}

impl SseParser {
    /// A parser at the start of a stream, holding events of up to
    /// [`SSE_MAX_EVENT`] bytes.
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Sets the largest event held (rule 8), in bytes.
    pub fn max_event(self, bytes: usize) -> SseParser {
        SseParser {
            framer: SseFramer::limited(bytes),
        }
    }

    /// Feeds the next chunk of bytes and returns the events it completed.
    ///
    /// # Errors
    /// [`ModelError::EventTooLarge`] once an event outgrows the limit
    /// (rule 8); the parser then refuses every later chunk too.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, ModelError> {
        let events = if self.framer.overflowed() {
            Vec::new()
        } else {
            self.framer.feed(bytes)
        };
        if self.framer.overflowed() {
            return Err(ModelError::EventTooLarge {
                limit: self.framer.max_event(),
            });
        }
        Ok(events
            .into_iter()
            .map(|e| SseEvent {
                event: if e.name.is_empty() {
                    "message".to_owned()
                } else {
                    e.name
                },
                data: e.data,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_whole(bytes: &[u8]) -> Vec<SseEvent> {
        SseParser::new().feed(bytes).unwrap()
    }

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            event: name.into(),
            data: data.into(),
        }
    }

    #[test]
    fn parses_the_format_rules() {
        let rows: Vec<(&[u8], Vec<SseEvent>)> = vec![
            (b"data: a\n\n", vec![event("message", "a")]),
            (b"data: a\r\n\r\n", vec![event("message", "a")]),
            (
                b"data: a\r\rdata: b\r\r",
                vec![event("message", "a"), event("message", "b")],
            ),
            (b"data: a\ndata: b\n\n", vec![event("message", "a\nb")]),
            (b": comment\ndata:x\n\n", vec![event("message", "x")]),
            (b"event: e\ndata: {}\n\n", vec![event("e", "{}")]),
            (b"event: e\n\n", vec![]),
            (b"data\n\n", vec![event("message", "")]),
            (b"data: tail without blank line\n", vec![]),
            (b"\xEF\xBB\xBFdata: bom\n\n", vec![event("message", "bom")]),
            (
                b"id: 7\nretry: 10\ndata:  two spaces\n\n",
                vec![event("message", " two spaces")],
            ),
            (b"event: a\n\nevent: b\ndata: 1\n\n", vec![event("b", "1")]),
        ];
        for (input, want) in rows {
            assert_eq!(
                parse_whole(input),
                want,
                "input: {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let input = "\u{feff}event: a\r\ndata: é1\r\n\r\n: c\rdata: 2\rdata: 3\r\r\ndata: 4\n\n";
        let bytes = input.as_bytes();
        let whole = parse_whole(bytes);
        assert_eq!(whole.len(), 3);
        for cut in 0..=bytes.len() {
            let mut parser = SseParser::new();
            let mut events = parser.feed(&bytes[..cut]).unwrap();
            events.extend(parser.feed(&bytes[cut..]).unwrap());
            assert_eq!(events, whole, "cut at {cut}");
        }
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for byte in bytes {
            events.extend(parser.feed(std::slice::from_ref(byte)).unwrap());
        }
        assert_eq!(events, whole, "byte by byte");
    }

    #[test]
    fn an_event_over_the_limit_is_refused_however_it_is_split() {
        let rows: Vec<(&str, Vec<&[u8]>)> = vec![
            ("one unterminated line", vec![b"data: 0123456789abcdef"]),
            (
                "the line in pieces",
                vec![b"data: 0123", b"456789", b"abcdef"],
            ),
            (
                "many data lines of one event",
                vec![b"data: 01234\ndata: 56789\n", b"data: abcdef\n"],
            ),
            (
                "in one chunk with its end",
                vec![b"data: 0123456789abcdef\n\n"],
            ),
            ("a comment line", vec![b": 0123456789abcdefgh"]),
        ];
        for (what, pieces) in rows {
            let mut parser = SseParser::new().max_event(16);
            let mut failed = false;
            for piece in pieces {
                match parser.feed(piece) {
                    Ok(events) => assert!(events.is_empty(), "{what}: {events:?}"),
                    Err(e) => {
                        assert!(e.to_string().contains("over 16 bytes"), "{what}: {e}");
                        failed = true;
                        break;
                    }
                }
            }
            assert!(failed, "{what}: not refused");
            assert!(
                parser.feed(b"\n\ndata: x\n\n").is_err(),
                "{what}: later chunks"
            );
        }
        // Events under the limit, one after another, are all read.
        let mut parser = SseParser::new().max_event(16);
        for _ in 0..100 {
            let events = parser.feed(b"data: 0123456789\n\n").unwrap();
            assert_eq!(events, vec![event("message", "0123456789")]);
        }
    }
}
