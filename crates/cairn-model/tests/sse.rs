//! The SSE parser: chunk boundaries never change the events.

use cairn_model::{SseEvent, SseParser};
use proptest::prelude::*;

/// An event to encode: optional name, data lines, line ending, a leading comment.
#[derive(Clone, Debug)]
struct Encoded {
    name: Option<String>,
    lines: Vec<String>,
    line_end: &'static str,
    comment: bool,
}

fn encoded() -> impl Strategy<Value = Encoded> {
    (
        proptest::option::of("[a-z_]{1,12}"),
        proptest::collection::vec("[ a-zA-Z0-9{}\":,.é😀\\[\\]]{0,20}", 1..4),
        prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
        any::<bool>(),
    )
        .prop_map(|(name, lines, line_end, comment)| Encoded {
            name,
            lines,
            line_end,
            comment,
        })
}

fn encode(events: &[Encoded]) -> Vec<u8> {
    let mut out = String::new();
    for e in events {
        let end = e.line_end;
        if e.comment {
            out.push_str(&format!(": keep-alive{end}"));
        }
        if let Some(name) = &e.name {
            out.push_str(&format!("event: {name}{end}"));
        }
        for line in &e.lines {
            out.push_str(&format!("data: {line}{end}"));
        }
        out.push_str(end);
    }
    out.into_bytes()
}

fn expected(events: &[Encoded]) -> Vec<SseEvent> {
    events
        .iter()
        .map(|e| SseEvent {
            event: e.name.clone().unwrap_or_else(|| "message".into()),
            data: e.lines.join("\n"),
        })
        .collect()
}

fn parse_in_pieces(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        events.extend(parser.feed(&bytes[start..cut]).unwrap());
        start = cut;
    }
    events
}

proptest! {
    #[test]
    fn random_chunking_gives_the_encoded_events(
        events in proptest::collection::vec(encoded(), 0..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..24),
    ) {
        let bytes = encode(&events);
        prop_assert_eq!(parse_in_pieces(&bytes, &cuts), expected(&events));
    }

    #[test]
    fn arbitrary_bytes_parse_the_same_however_split(
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), any::<u8>(),
                        Just(b'd'), Just(b'a'), Just(b't')],
            0..200,
        ),
        cuts in proptest::collection::vec(any::<usize>(), 0..24),
    ) {
        let whole = SseParser::new().feed(&bytes).unwrap();
        prop_assert_eq!(parse_in_pieces(&bytes, &cuts), whole);
    }
}

#[test]
fn every_single_split_of_a_real_stream_agrees() {
    let stream = concat!(
        "event: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\n",
        ": ping\n\n",
        "event: content_block_delta\ndata: {\"delta\":{\"text\":\"héllo\"}}\n\n",
        "data: [DONE]\r\r",
    )
    .as_bytes();
    let whole = SseParser::new().feed(stream).unwrap();
    assert_eq!(whole.len(), 3);
    assert_eq!(whole[2].data, "[DONE]");
    for a in 0..=stream.len() {
        for b in a..=stream.len() {
            assert_eq!(parse_in_pieces(stream, &[a, b]), whole, "cuts at {a}, {b}");
        }
    }
}
