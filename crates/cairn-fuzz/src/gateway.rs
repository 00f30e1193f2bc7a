//! The gateway's reading of a response body as it passes (DESIGN §7): what a
//! provider sends is untrusted, and the gateway decides from it whether a
//! response is complete (and so kept and replayed), what it cost and how each
//! answer ended.
//!
//! Input: one byte choosing the API (its value modulo 3: chat completions,
//! Responses, Messages), then a response body as the upstream would send it,
//! read both as a stream and as a whole body.
//!
//! Properties:
//! 1. nothing panics: [`StreamWatch`], [`parse_whole`], [`stream_to_whole`]
//!    and, on what that gives, [`whole_to_stream`];
//! 2. fed byte by byte, or in pieces of sizes drawn from the bytes
//!    themselves, the watcher reads exactly what it reads whole: the same
//!    usage, model, completeness and answers, the same final event;
//! 3. what may be forwarded never goes back, never passes the bytes fed nor
//!    the start of the final event once that is read;
//! 4. a stream with a whole form is a complete response.

use cairn_gateway::{parse_whole, stream_to_whole, whole_to_stream, Api, Parsed, StreamWatch};

/// Checks the properties (see the module doc) on `data`.
pub fn gateway_stream(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let api = match which % 3 {
        0 => Api::ChatCompletions,
        1 => Api::Responses,
        _ => Api::Messages,
    };
    let whole = watch(api, body, &[body.len()]);
    let every: Vec<usize> = (1..=body.len()).collect();
    assert_eq!(watch(api, body, &every), whole, "fed byte by byte");
    let mut cuts = Vec::new();
    let mut at = 0usize;
    let mut state = 0xD6E8_FEB8_6659_FD93u64 ^ body.len() as u64;
    while at < body.len() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(u64::from(body[at]) | 1);
        at = at
            .saturating_add(usize::try_from(state >> 58).unwrap_or(1).max(1))
            .min(body.len());
        cuts.push(at);
    }
    assert_eq!(watch(api, body, &cuts), whole, "fed in pieces");

    let _ = parse_whole(api, body);
    if let Ok(converted) = stream_to_whole(api, body) {
        assert!(whole.0.complete, "a stream with a whole form is complete");
        let _ = parse_whole(api, &converted);
        let _ = whole_to_stream(api, &converted);
    }
}

/// The watcher's reading of `body` fed up to each offset of `ends` in turn
/// (the last one the body's length), checking rule 3 after every feed.
fn watch(api: Api, body: &[u8], ends: &[usize]) -> (Parsed, Option<u64>) {
    let mut w = StreamWatch::new(api);
    let (mut at, mut last) = (0, 0);
    for &end in ends {
        w.feed(&body[at..end])
            .expect("a fuzz input is far under the event limit");
        at = end;
        let f = w.forwardable();
        assert!(f >= last, "forwardable went back from {last} to {f}");
        assert!(f <= w.fed(), "forwardable {f} passes the bytes fed");
        if let Some(final_at) = w.final_event_at() {
            assert!(f <= final_at, "forwardable {f} passes the final event");
        }
        last = f;
    }
    w.finish();
    (w.parsed(), w.final_event_at())
}
