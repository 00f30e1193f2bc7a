//! Decoding a streamed Messages response (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `ping`, `error`).
//!
//! What the decoder keeps, event by event:
//!
//! 1. `message_start`: the model and the input usage (plain, cache creation and
//!    cache read tokens together).
//! 2. `content_block_start` opens block `index`: `text` (its text, usually
//!    empty, goes to the sink), `tool_use` (id, name, initial input),
//!    `thinking` (initial thinking and signature, usually empty) or
//!    `redacted_thinking` (its `data`, whole); anything else is kept as an
//!    opaque block so it still has to be closed.
//! 3. `content_block_delta`: `text_delta` text goes to the sink,
//!    `input_json_delta` pieces are concatenated as received, `thinking_delta`
//!    and `signature_delta` pieces are concatenated onto their thinking block.
//! 4. `content_block_stop` closes block `index`.
//! 5. `message_delta`: the stop reason, the provider's `stop_details`
//!    (verbatim; a refusal's `category` and `explanation`), the output usage
//!    (and input usage when given again).
//! 6. `message_stop` ends the stream; `error` fails the attempt (overload,
//!    rate-limit and server errors are retried, anything else is final);
//!    `ping` and unknown events are ignored.
//!
//! The response is complete ([`Decoder::complete`]) once `message_start` and a
//! stop reason arrived: the server sends the stop reason only once the model
//! has stopped, so a stream ending there without `message_stop` (or without
//! the blank line after it) is whole and is not requested again. A block still
//! open then is not missing anything: real streams cut by `max_tokens` inside
//! a `tool_use` block end `input_json_delta`, `message_delta`, `message_stop`
//! with no `content_block_stop` for it.
//!
//! In the response, thinking blocks keep their stream order, byte for byte; the
//! stop reason `refusal` gives [`Stop::Refused`] with the turn's text as the
//! refusal (without text, the `explanation` of the stop details, else
//! [`crate::REFUSAL_WITHOUT_TEXT`]); `max_tokens` gives [`Stop::Truncated`].
//! A tool call cut off — its block never closed, or the last block of a
//! `max_tokens` stop — keeps its input exactly as received unless it is a
//! whole JSON object (so it is journaled and never run). The usage is the
//! one `message_start` and `message_delta` reported; `None` when neither
//! carried a `usage` object.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{excerpt, ModelError};
use crate::http::{Decoder, Failure, Step};
use crate::message::{
    parse_arguments, parse_cut_arguments, refusal_from_text, ModelResponse, Stop, StreamSink,
    Thinking, ToolCall, Usage,
};
use crate::sse::SseEvent;

use super::PROVIDER;

/// One content block being assembled.
enum Kind {
    Text,
    ToolUse {
        id: String,
        name: String,
        initial: Value,
        json: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted {
        data: String,
    },
    Other,
}

struct Block {
    kind: Kind,
    closed: bool,
}

/// Assembles a streamed Messages response.
pub(crate) struct MessagesDecoder {
    text: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    usage_reported: bool,
    model: String,
    started: bool,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
}

impl MessagesDecoder {
    pub(crate) fn new(model: &str) -> MessagesDecoder {
        MessagesDecoder {
            text: String::new(),
            blocks: BTreeMap::new(),
            usage: Usage::default(),
            usage_reported: false,
            model: model.to_owned(),
            started: false,
            stop_reason: None,
            stop_details: None,
        }
    }

    fn emit(&mut self, text: &str, sink: &mut dyn StreamSink) {
        if !text.is_empty() {
            sink.text(text);
            self.text.push_str(text);
        }
    }

    fn start_block(&mut self, index: u64, block: &Value, sink: &mut dyn StreamSink) {
        let string = |field: &str| block.get(field).and_then(Value::as_str).unwrap_or("");
        let kind = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                self.emit(string("text"), sink);
                Kind::Text
            }
            Some("tool_use") => Kind::ToolUse {
                id: string("id").to_owned(),
                name: string("name").to_owned(),
                initial: block.get("input").cloned().unwrap_or(Value::Null),
                json: String::new(),
            },
            Some("thinking") => Kind::Thinking {
                thinking: string("thinking").to_owned(),
                signature: string("signature").to_owned(),
            },
            Some("redacted_thinking") => Kind::Redacted {
                data: string("data").to_owned(),
            },
            _ => Kind::Other,
        };
        self.blocks.insert(
            index,
            Block {
                kind,
                closed: false,
            },
        );
    }

    fn delta(&mut self, index: u64, delta: &Value, sink: &mut dyn StreamSink) {
        let piece = |field: &str| delta.get(field).and_then(Value::as_str).unwrap_or("");
        let kind = self.blocks.get_mut(&index).map(|block| &mut block.kind);
        match (delta.get("type").and_then(Value::as_str), kind) {
            (Some("text_delta"), _) => {
                let text = piece("text").to_owned();
                self.emit(&text, sink);
            }
            (Some("input_json_delta"), Some(Kind::ToolUse { json, .. })) => {
                json.push_str(piece("partial_json"));
            }
            (Some("thinking_delta"), Some(Kind::Thinking { thinking, .. })) => {
                thinking.push_str(piece("thinking"));
            }
            (Some("signature_delta"), Some(Kind::Thinking { signature, .. })) => {
                signature.push_str(piece("signature"));
            }
            _ => {}
        }
    }
}

/// Every prompt token of a `usage` object: plain, cache creation and cache read.
fn input_tokens(usage: &Value) -> Option<u64> {
    let count = |field: &str| usage.get(field).and_then(Value::as_u64);
    let plain = count("input_tokens")?;
    // Saturating: the counts are the server's word, anything up to u64::MAX.
    let cached = count("cache_creation_input_tokens")
        .unwrap_or(0)
        .saturating_add(count("cache_read_input_tokens").unwrap_or(0));
    Some(plain.saturating_add(cached))
}

impl Decoder for MessagesDecoder {
    type Output = ModelResponse;

    const END_MARKER: &'static str = "`message_stop`";

    fn event(&mut self, event: SseEvent, sink: &mut dyn StreamSink) -> Result<Step, Failure> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| ModelError::Protocol {
            provider: PROVIDER,
            message: format!("a stream event is not JSON ({e}): {}", excerpt(&event.data)),
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                self.started = true;
                let message = &data["message"];
                if let Some(model) = message.get("model").and_then(Value::as_str) {
                    self.model = model.to_owned();
                }
                let usage = &message["usage"];
                self.usage_reported |= usage.is_object();
                self.usage.input_tokens = input_tokens(usage).unwrap_or(0);
                self.usage.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => self.start_block(index, &data["content_block"], sink),
            "content_block_delta" => self.delta(index, &data["delta"], sink),
            "content_block_stop" => {
                if let Some(block) = self.blocks.get_mut(&index) {
                    block.closed = true;
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(details) = data["delta"].get("stop_details").filter(|d| !d.is_null()) {
                    self.stop_details = Some(details.clone());
                }
                let usage = &data["usage"];
                self.usage_reported |= usage.is_object();
                if let Some(output) = usage["output_tokens"].as_u64() {
                    self.usage.output_tokens = output;
                }
                if let Some(input) = input_tokens(usage) {
                    self.usage.input_tokens = input;
                }
            }
            "message_stop" => return Ok(Step::Done),
            "error" => return Err(stream_error(&data["error"])),
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn complete(&self) -> bool {
        self.started && self.stop_reason.is_some()
    }

    fn finish(self) -> ModelResponse {
        let stop = Stop::from_reason(self.stop_reason.as_deref());
        let last = self.blocks.keys().next_back().copied();
        let mut tool_calls = Vec::new();
        let mut thinking = Vec::new();
        for (index, block) in self.blocks {
            match block.kind {
                Kind::ToolUse {
                    id,
                    name,
                    initial,
                    json,
                } => {
                    let cut = !block.closed || (stop == Stop::Truncated && Some(index) == last);
                    let arguments = if cut {
                        parse_cut_arguments(&json)
                    } else if json.is_empty() && initial.is_object() {
                        initial
                    } else {
                        parse_arguments(&json)
                    };
                    tool_calls.push(ToolCall::new(id, name, arguments).with_text(&json));
                }
                Kind::Thinking {
                    thinking: text,
                    signature,
                } => thinking.push(Thinking::Thinking {
                    thinking: text,
                    signature,
                }),
                Kind::Redacted { data } => thinking.push(Thinking::RedactedThinking { data }),
                Kind::Text | Kind::Other => {}
            }
        }
        let refusal = (stop == Stop::Refused)
            .then(|| refusal_from_text(&self.text, self.stop_details.as_ref()));
        ModelResponse {
            text: self.text,
            tool_calls,
            usage: self.usage_reported.then_some(self.usage),
            model: self.model,
            stop,
            stop_reason: self.stop_reason,
            refusal,
            thinking,
            reasoning: None,
            stop_details: self.stop_details,
            items: Vec::new(),
        }
    }
}

/// An `error` event. Overload, rate-limit and server errors are retried.
fn stream_error(error: &Value) -> Failure {
    let kind = error["type"].as_str().unwrap_or("error").to_owned();
    let transient = matches!(
        kind.as_str(),
        "overloaded_error" | "api_error" | "rate_limit_error"
    );
    Failure::in_stream(
        PROVIDER,
        kind,
        error["message"].as_str().unwrap_or(""),
        transient,
    )
}
