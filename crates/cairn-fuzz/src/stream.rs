//! The provider stream decoders (OpenAI chat completions, Anthropic
//! messages, OpenAI responses) over the SSE parser: a model's untrusted
//! response body.
//!
//! Input: a response body as a server would send it.
//!
//! Properties, for each format:
//! 1. decoding never panics, whatever the bytes;
//! 2. fed byte by byte, or in pieces of sizes drawn from the bytes
//!    themselves, the body decodes to exactly what it decodes to whole: the
//!    same response and streamed text, or the same failure;
//! 3. a decoded response's text is exactly what was streamed to the sink.

use cairn_model::decode::{decode_stream, Outcome, StreamFormat};

/// Checks the properties (see the module doc) for the OpenAI format.
pub fn openai_stream(data: &[u8]) {
    check(StreamFormat::OpenAiChat, data);
}

/// Checks the properties (see the module doc) for the Anthropic format.
pub fn anthropic_stream(data: &[u8]) {
    check(StreamFormat::AnthropicMessages, data);
}

/// Checks the properties (see the module doc) for the OpenAI Responses
/// format.
pub fn responses_stream(data: &[u8]) {
    check(StreamFormat::OpenAiResponses, data);
}

fn check(format: StreamFormat, data: &[u8]) {
    let whole = decode_stream(format, data, &[]);
    if let Outcome::Response(response, streamed) = &whole {
        assert_eq!(
            &response.text, streamed,
            "the text is not what was streamed"
        );
    }
    let every: Vec<usize> = (1..data.len()).collect();
    assert_eq!(
        decode_stream(format, data, &every),
        whole,
        "fed byte by byte"
    );
    let mut cuts = Vec::new();
    let mut at = 0usize;
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ data.len() as u64;
    while at < data.len() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(u64::from(data[at]) | 1);
        at += usize::try_from(state >> 58).unwrap_or(1).max(1);
        cuts.push(at.min(data.len()));
    }
    assert_eq!(decode_stream(format, data, &cuts), whole, "fed in pieces");
}
