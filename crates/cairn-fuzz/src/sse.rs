//! The SSE parser, against a model of the format and fed in pieces.
//!
//! Input: a byte stream as a server would send it.
//!
//! Properties:
//! 1. parsed whole, the stream gives the events of a model written straight
//!    from the WHATWG rules (split the whole stream into lines first, then
//!    read each line);
//! 2. fed byte by byte, split after every `\r` (between the two bytes of a
//!    `\r\n`), or in pieces of sizes drawn from the bytes themselves (empty
//!    pieces included), it gives exactly the same events.

use cairn_model::{SseEvent, SseParser};

/// Checks the SSE properties (see the module doc) on `data`.
pub fn sse(data: &[u8]) {
    let whole = SseParser::new()
        .feed(data)
        .expect("a fuzz input is far under the event limit");
    assert_eq!(whole, model(data), "the parser and the model differ");

    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for b in data {
        events.extend(
            parser
                .feed(std::slice::from_ref(b))
                .expect("under the limit"),
        );
    }
    assert_eq!(events, whole, "fed byte by byte");

    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for piece in data.split_inclusive(|&b| b == b'\r') {
        events.extend(parser.feed(piece).expect("under the limit"));
    }
    assert_eq!(events, whole, "split after every CR");

    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut rest = data;
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ data.len() as u64;
    while !rest.is_empty() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(u64::from(rest[0]) | 1);
        let n = usize::try_from(state >> 61).unwrap_or(0).min(rest.len());
        let (piece, tail) = rest.split_at(n);
        events.extend(parser.feed(piece).expect("under the limit"));
        rest = tail;
    }
    assert_eq!(events, whole, "fed in pieces");
}

/// The events of a whole stream, by the rules of the format.
fn model(data: &[u8]) -> Vec<SseEvent> {
    let data = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < data.len() {
        match data[i] {
            b'\n' => {
                lines.push(&data[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&data[start..i]);
                i += 1;
                if data.get(i) == Some(&b'\n') {
                    i += 1;
                }
                start = i;
            }
            _ => i += 1,
        }
    }
    // Bytes after the last line ending are an unfinished line: dropped.
    let mut out = Vec::new();
    let (mut event, mut data_buf, mut seen) = (String::new(), String::new(), false);
    for line in lines {
        if line.is_empty() {
            if seen {
                let name = if event.is_empty() { "message" } else { &event };
                out.push(SseEvent {
                    event: name.to_owned(),
                    data: std::mem::take(&mut data_buf),
                });
            }
            event.clear();
            data_buf.clear();
            seen = false;
            continue;
        }
        if line.starts_with(b":") {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if seen {
                    data_buf.push('\n');
                }
                data_buf.push_str(&String::from_utf8_lossy(value));
                seen = true;
            }
            b"event" => event = String::from_utf8_lossy(value).into_owned(),
            _ => {}
        }
    }
    out
}
