//! The one reader of `text/event-stream` framing: server-sent events with
//! their byte offsets. [`SseParser`](crate::SseParser), which the providers
//! read streams with, and the gateway, which must also know which bytes of a
//! stream belong to whole events, both frame with it.
//!
//! The framing rules are the WHATWG `text/event-stream` ones, with one
//! addition: every event knows the offset of the first byte of its block (its
//! first line, comments included), and the framer knows the offset just after
//! the last blank line it has read.
//!
//! 1. A line ends at `\r\n`, `\n` or `\r`; a `\r\n` split across two feeds is
//!    one line ending.
//! 2. A line starting with `:` is a comment.
//! 3. `field: value` sets a field (one space after the colon dropped); a line
//!    without a colon is a field with an empty value.
//! 4. `data` lines accumulate, joined with `\n`; `event` names the event;
//!    other fields are ignored.
//! 5. A blank line ends a block; the block is an event when it had a `data`
//!    line.
//! 6. A byte-order mark before the first line is skipped.
//! 7. At the end of the stream, a block without its blank line is still an
//!    event when it had a `data` line ([`SseFramer::finish`]): the bytes are kept
//!    whatever the client makes of them, so their usage and completeness are
//!    read too.
//! 8. What the parser holds is bounded: the line being read and the `data` of
//!    the event it belongs to may not pass its limit ([`SseFramer::limited`],
//!    default [`SSE_MAX_EVENT`]). Past it the parser stops for good: it reads no
//!    more events, its boundary stays where it was, and
//!    [`SseFramer::overflowed`] says so.

use super::SSE_MAX_EVENT;

/// One event and where its block starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FramedEvent {
    /// Offset of the first byte of the event's block in the stream.
    pub start: u64,
    /// The `event:` field, empty when the event had none.
    pub name: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The incremental parser (rules in the module doc).
#[derive(Debug)]
pub struct SseFramer {
    /// Rule 8's limit, in bytes.
    max_event: usize,
    /// The limit was passed: nothing more is read.
    overflowed: bool,
    /// Bytes fed so far.
    fed: u64,
    /// The current line's bytes, when it spans feeds.
    line: Vec<u8>,
    /// Offset of the current line's first byte.
    line_start: u64,
    /// Offset of the current block's first line, while a block is open.
    block_start: Option<u64>,
    /// Offset just after the last blank line read.
    boundary: u64,
    name: String,
    data: String,
    has_data: bool,
    /// The last feed ended with `\r`: a `\n` opening the next one belongs to it.
    after_cr: bool,
    /// A line has been read (so a byte-order mark can no longer appear).
    started: bool,
}

impl Default for SseFramer {
    fn default() -> Self {
        SseFramer::limited(SSE_MAX_EVENT)
    }
}

impl SseFramer {
    /// A parser holding events of up to `max_event` bytes (rule 8).
    pub fn limited(max_event: usize) -> SseFramer {
        SseFramer {
            max_event,
            overflowed: false,
            fed: 0,
            line: Vec::new(),
            line_start: 0,
            block_start: None,
            boundary: 0,
            name: String::new(),
            data: String::new(),
            has_data: false,
            after_cr: false,
            started: false,
        }
    }

    /// Rule 8's limit, in bytes.
    pub fn max_event(&self) -> usize {
        self.max_event
    }

    /// Whether an event outgrew the limit (rule 8): then no more is read.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Whether holding `more` bytes of the current line besides what is held
    /// passes the limit; marks the parser overflowed if so.
    fn over(&mut self, more: usize) -> bool {
        let held = self
            .line
            .len()
            .saturating_add(more)
            .saturating_add(self.data.len());
        if held > self.max_event {
            self.overflowed = true;
            self.line = Vec::new();
            self.data = String::new();
        }
        self.overflowed
    }

    /// Feeds the next bytes; returns the events they completed, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<FramedEvent> {
        let base = self.fed;
        let mut events = Vec::new();
        if self.overflowed {
            self.fed = base + bytes.len() as u64;
            return events;
        }
        let mut i = 0;
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                i = 1;
                self.line_start = base + 1;
            }
        }
        while let Some(rel) = bytes[i..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = i + rel;
            if self.over(rel) {
                self.fed = base + bytes.len() as u64;
                return events;
            }
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let after = base + next as u64;
            if self.line.is_empty() {
                self.process_line(&bytes[i..end], &mut events, after);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&bytes[i..end]);
                self.process_line(&line, &mut events, after);
                line.clear();
                self.line = line;
            }
            self.line_start = after;
            i = next;
        }
        if !self.over(bytes.len() - i) {
            self.line.extend_from_slice(&bytes[i..]);
        }
        self.fed = base + bytes.len() as u64;
        events
    }

    /// Ends the stream: the event of a block left without its blank line, if
    /// it had data.
    pub fn finish(&mut self) -> Option<FramedEvent> {
        if self.overflowed {
            return None;
        }
        let mut events = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut events, self.fed);
        }
        self.after_cr = false;
        // A blank line closes whatever block is open.
        self.process_line(&[], &mut events, self.fed);
        events.pop()
    }

    /// Bytes fed so far.
    pub fn fed(&self) -> u64 {
        self.fed
    }

    /// Offset just after the last blank line read: every byte before it
    /// belongs to a block that has been dispatched (or had no data).
    pub fn boundary(&self) -> u64 {
        self.boundary
    }

    /// One complete line whose ending ends at offset `after`.
    fn process_line(&mut self, mut line: &[u8], events: &mut Vec<FramedEvent>, after: u64) {
        if !self.started {
            if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
                line = rest;
            }
            self.started = true;
        }
        if line.is_empty() {
            if let Some(start) = self.block_start.take() {
                let name = std::mem::take(&mut self.name);
                let data = std::mem::take(&mut self.data);
                if std::mem::take(&mut self.has_data) {
                    events.push(FramedEvent { start, name, data });
                }
            }
            self.boundary = after;
            return;
        }
        if self.block_start.is_none() {
            self.block_start = Some(self.line_start);
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => self.name = String::from_utf8_lossy(value).into_owned(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> (Vec<FramedEvent>, u64) {
        let mut p = SseFramer::default();
        let mut events = p.feed(bytes);
        let boundary = p.boundary();
        events.extend(p.finish());
        (events, boundary)
    }

    fn ev(start: u64, name: &str, data: &str) -> FramedEvent {
        FramedEvent {
            start,
            name: name.into(),
            data: data.into(),
        }
    }

    #[test]
    fn parses_the_format_rules_with_offsets() {
        let rows: Vec<(&[u8], Vec<FramedEvent>, u64)> = vec![
            (b"data: a\n\n", vec![ev(0, "", "a")], 9),
            (b"data: a\r\n\r\n", vec![ev(0, "", "a")], 11),
            (
                b"data: a\r\rdata: b\r\r",
                vec![ev(0, "", "a"), ev(9, "", "b")],
                18,
            ),
            (b"data: a\ndata: b\n\n", vec![ev(0, "", "a\nb")], 17),
            (b": c\ndata:x\n\n", vec![ev(0, "", "x")], 12),
            (b"event: e\ndata: {}\n\n", vec![ev(0, "e", "{}")], 19),
            (b"event: e\n\ndata: 1\n\n", vec![ev(10, "", "1")], 19),
            (b"data\n\n", vec![ev(0, "", "")], 6),
            (b"\n\ndata: 1\n\n", vec![ev(2, "", "1")], 11),
            (b"data: tail\n", vec![ev(0, "", "tail")], 0),
            (b"data: tail", vec![ev(0, "", "tail")], 0),
            (b"\xEF\xBB\xBFdata: bom\n\n", vec![ev(0, "", "bom")], 14),
            (
                b"id: 7\nretry: 1\ndata:  two\n\n",
                vec![ev(0, "", " two")],
                27,
            ),
            (b": only a comment\n\n", vec![], 18),
        ];
        for (input, want, boundary) in rows {
            let got = all(input);
            assert_eq!(
                got,
                (want, boundary),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn an_event_over_the_limit_stops_the_parser_however_it_is_split() {
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
                "in one feed with its end",
                vec![b"data: 0123456789abcdef\n\n"],
            ),
            ("a comment", vec![b": 0123456789abcdefgh"]),
        ];
        for (what, pieces) in rows {
            let mut p = SseFramer::limited(16);
            let mut events = p.feed(b"data: ok\n\n");
            for piece in pieces {
                events.extend(p.feed(piece));
            }
            assert!(p.overflowed(), "{what}");
            events.extend(p.feed(b"\n\ndata: later\n\n"));
            events.extend(p.finish());
            assert_eq!(events, vec![ev(0, "", "ok")], "{what}");
            assert_eq!(p.boundary(), 10, "{what}");
        }
        let mut p = SseFramer::limited(16);
        for k in 0..100u64 {
            assert_eq!(
                p.feed(b"data: 0123456789\n\n"),
                vec![ev(k * 18, "", "0123456789")]
            );
        }
        assert!(!p.overflowed());
    }

    #[test]
    fn every_split_gives_the_same_events() {
        let input =
            "\u{feff}event: a\r\ndata: é1\r\n\r\n: c\rdata: 2\rdata: 3\r\r\ndata: 4\n\ndata: 5";
        let bytes = input.as_bytes();
        let (whole, _) = all(bytes);
        assert_eq!(whole.len(), 4);
        for cut in 0..=bytes.len() {
            let mut p = SseFramer::default();
            let mut events = p.feed(&bytes[..cut]);
            events.extend(p.feed(&bytes[cut..]));
            events.extend(p.finish());
            assert_eq!(events, whole, "cut at {cut}");
        }
        let mut p = SseFramer::default();
        let mut events = Vec::new();
        for b in bytes {
            events.extend(p.feed(std::slice::from_ref(b)));
            assert!(events.iter().all(|e| e.start < p.boundary()));
        }
        events.extend(p.finish());
        assert_eq!(events, whole, "byte by byte");
    }
}
