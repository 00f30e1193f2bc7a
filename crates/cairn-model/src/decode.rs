//! One streamed response body decoded from bytes alone, with no network:
//! the SSE parser and a provider's decoder driven exactly as the HTTP path
//! drives them. For the split tests and the fuzz targets (`cairn-fuzz`),
//! which check that any bytes, fed in any pieces, decode to the same
//! outcome without a panic. Not part of the supported API.

use crate::anthropic::MessagesDecoder;
use crate::http::{Decoder, Decoding, Failure, Fed};
use crate::message::ModelResponse;
use crate::openai::ChatDecoder;
use crate::responses::ResponsesDecoder;

/// Which provider's stream format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamFormat {
    /// OpenAI chat completions (`data: {chunk}` … `data: [DONE]`).
    OpenAiChat,
    /// Anthropic messages (`message_start` … `message_stop`).
    AnthropicMessages,
    /// OpenAI responses (`response.created` … `response.completed`).
    OpenAiResponses,
}

/// What one stream decodes to.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The response and the text the sink received.
    Response(Box<ModelResponse>, String),
    /// Why the attempt failed (`retry: …` or `fatal: …`).
    Failed(String),
}

/// Decodes `bytes` fed in the pieces that the byte offsets `cuts` make
/// (each taken modulo the length plus one, in any order, repeats allowed).
pub fn decode_stream(format: StreamFormat, bytes: &[u8], cuts: &[usize]) -> Outcome {
    match format {
        StreamFormat::OpenAiChat => decode(ChatDecoder::new("gpt-test"), bytes, cuts),
        StreamFormat::AnthropicMessages => decode(MessagesDecoder::new("claude-test"), bytes, cuts),
        StreamFormat::OpenAiResponses => decode(ResponsesDecoder::new("gpt-test"), bytes, cuts),
    }
}

fn decode<D: Decoder<Output = ModelResponse>>(decoder: D, bytes: &[u8], cuts: &[usize]) -> Outcome {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut decoding = Decoding::new(decoder);
    let mut sink = String::new();
    let mut start = 0;
    for end in cuts.into_iter().chain([bytes.len()]) {
        match decoding.feed(&bytes[start..end], &mut sink) {
            Ok(Fed::Done) => return Outcome::Response(Box::new(decoding.finish()), sink),
            Ok(Fed::More) => {}
            Err(failure) => return failed(failure),
        }
        start = end;
    }
    match decoding.ended(None) {
        Ok(response) => Outcome::Response(Box::new(response), sink),
        Err(failure) => failed(failure),
    }
}

fn failed(failure: Failure) -> Outcome {
    Outcome::Failed(match failure {
        Failure::Retry { detail, .. } => format!("retry: {detail}"),
        Failure::Fatal(error) => format!("fatal: {error}"),
    })
}
