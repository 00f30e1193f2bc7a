//! Decoding a streamed chat completion (`chat.completion.chunk` events).
//!
//! What the decoder keeps, chunk by chunk, from choice 0 (a chunk with
//! `choices: []`, such as Azure's first chunk carrying `prompt_filter_results`
//! or the final usage chunk, only updates the model and the usage). A choice
//! with any other index fails the attempt for good
//! ([`ModelError::SeveralChoices`]): cairn asks for one answer a turn, and a
//! server answering several (`n` set by a proxy or its defaults) would have
//! all but one dropped from the record.
//!
//! 1. `delta.content` strings are the text, forwarded to the sink as they come.
//! 2. `delta.refusal` strings are concatenated into the refusal; a non-empty
//!    refusal makes the stop [`Stop::Refused`] whatever `finish_reason` says.
//!    A `finish_reason` of `refusal` without such pieces gives the text (or
//!    [`crate::REFUSAL_WITHOUT_TEXT`]) as the refusal.
//! 3. `delta.tool_calls[]` fragments are merged by their `index`: the first
//!    `id` and `name` win, `arguments` pieces are concatenated as received.
//! 4. Reasoning text comes from `delta.reasoning_content` (DeepSeek, Moonshot,
//!    older vLLM) or `delta.reasoning` (OpenRouter, Groq, xAI, newer vLLM,
//!    Ollama). The first of the two that carries text names the field, and
//!    only that field is read afterwards: servers that send both send the same
//!    text twice.
//! 5. `delta.reasoning_details[]` items are merged by their `index`: the string
//!    pieces of `text`, `summary`, `data` and `signature` are concatenated, any
//!    other field keeps its first non-null value; items stay in `index` order.
//! 6. The last non-null `finish_reason` is the stop reason; the usage is the
//!    last one a chunk reports, wherever it comes (the usage-only final chunk,
//!    beside the finish reason, Moonshot's on the choice, Groq's
//!    `x_groq.usage`; the rules are [`crate::chat_completion_usage`]'s).
//! 7. `{"error": ...}` in a chunk fails the attempt: overload and server errors
//!    are retried, anything else is final.
//!
//! The response is complete ([`Decoder::complete`]) once a finish reason has
//! arrived: the server sends it when the model has stopped, so a stream that
//! ends there without `data: [DONE]` is whole and is not requested again.
//! `stream_options.include_usage` is always sent, but a server may ignore it
//! or the stream may end before the usage chunk: the response then has no
//! usage (`None`), and its cost is recorded unknown. Buying the same answer
//! again to learn its price would cost more than not knowing it.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{excerpt, ModelError};
use crate::http::{Decoder, Failure, Step};
use crate::message::{
    refusal_from_text, streamed_call, ModelResponse, Reasoning, Stop, StreamSink, Usage,
};
use crate::sse::SseEvent;
use crate::usage::chat_completion_usage;

use super::PROVIDER;

/// The delta fields that carry reasoning text, in the order they are tried.
pub(super) const REASONING_FIELDS: [&str; 2] = ["reasoning_content", "reasoning"];

/// The `reasoning_details` fields whose streamed pieces are concatenated.
const DETAIL_PIECES: [&str; 4] = ["text", "summary", "data", "signature"];

/// One tool call being assembled from `delta.tool_calls[]` fragments.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed chat completion.
pub(crate) struct ChatDecoder {
    text: String,
    refusal: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    model: String,
    stop_reason: Option<String>,
    reasoning_text: String,
    reasoning_field: Option<&'static str>,
    details: BTreeMap<u64, Map<String, Value>>,
}

impl ChatDecoder {
    pub(crate) fn new(model: &str) -> ChatDecoder {
        ChatDecoder {
            text: String::new(),
            refusal: String::new(),
            calls: BTreeMap::new(),
            usage: None,
            model: model.to_owned(),
            stop_reason: None,
            reasoning_text: String::new(),
            reasoning_field: None,
            details: BTreeMap::new(),
        }
    }

    fn delta(&mut self, delta: &Value, sink: &mut dyn StreamSink) {
        if let Some(content) = delta.get("content").and_then(Value::as_str) {
            if !content.is_empty() {
                sink.text(content);
                self.text.push_str(content);
            }
        }
        if let Some(refusal) = delta.get("refusal").and_then(Value::as_str) {
            self.refusal.push_str(refusal);
        }
        let fragments = delta.get("tool_calls").and_then(Value::as_array);
        for (position, fragment) in fragments.into_iter().flatten().enumerate() {
            self.tool_fragment(position, fragment);
        }
        self.reasoning(delta);
        let details = delta.get("reasoning_details").and_then(Value::as_array);
        for (position, detail) in details.into_iter().flatten().enumerate() {
            self.detail(position, detail);
        }
    }

    fn tool_fragment(&mut self, position: usize, fragment: &Value) {
        let index = fragment
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = fragment.get("id").and_then(Value::as_str) {
            if call.id.is_empty() {
                call.id = id.to_owned();
            }
        }
        let Some(function) = fragment.get("function") else {
            return;
        };
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            if call.name.is_empty() {
                call.name = name.to_owned();
            }
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            Some(whole) => call.arguments.push_str(&whole.to_string()),
        }
    }

    fn reasoning(&mut self, delta: &Value) {
        let field = match self.reasoning_field {
            Some(field) => field,
            None => {
                let carrying = REASONING_FIELDS.into_iter().find(|field| {
                    delta
                        .get(*field)
                        .and_then(Value::as_str)
                        .is_some_and(|text| !text.is_empty())
                });
                let Some(field) = carrying else {
                    return;
                };
                self.reasoning_field = Some(field);
                field
            }
        };
        if let Some(text) = delta.get(field).and_then(Value::as_str) {
            self.reasoning_text.push_str(text);
        }
    }

    fn detail(&mut self, position: usize, detail: &Value) {
        let Some(piece) = detail.as_object() else {
            return;
        };
        let index = piece
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let merged = self.details.entry(index).or_default();
        for (key, value) in piece {
            match (merged.get_mut(key), value) {
                (None, _) => {
                    merged.insert(key.clone(), value.clone());
                }
                (Some(Value::String(have)), Value::String(more))
                    if DETAIL_PIECES.contains(&key.as_str()) =>
                {
                    have.push_str(more);
                }
                (Some(have @ Value::Null), _) => *have = value.clone(),
                (Some(_), _) => {}
            }
        }
    }
}

impl Decoder for ChatDecoder {
    type Output = ModelResponse;

    const END_MARKER: &'static str = "`data: [DONE]`";

    fn event(&mut self, event: SseEvent, sink: &mut dyn StreamSink) -> Result<Step, Failure> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Step::Done);
        }
        if data.is_empty() {
            return Ok(Step::Continue);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| ModelError::Protocol {
            provider: PROVIDER,
            message: format!("a stream event is not JSON ({e}): {}", excerpt(data)),
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(error));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            if !model.is_empty() {
                self.model = model.to_owned();
            }
        }
        if let Some(usage) = chat_completion_usage(&chunk) {
            self.usage = Some(usage);
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            if index != 0 {
                return Err(Failure::Fatal(ModelError::SeveralChoices {
                    provider: PROVIDER,
                    index,
                }));
            }
            if let Some(delta) = choice.get("delta") {
                self.delta(delta, sink);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.stop_reason = Some(reason.to_owned());
            }
        }
        Ok(Step::Continue)
    }

    fn complete(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(self) -> ModelResponse {
        let (stop, refusal) = if !self.refusal.is_empty() {
            (Stop::Refused, Some(self.refusal))
        } else {
            let stop = Stop::from_reason(self.stop_reason.as_deref());
            (
                stop,
                (stop == Stop::Refused).then(|| refusal_from_text(&self.text, None)),
            )
        };
        let last = self.calls.keys().next_back().copied();
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| {
                // Only the last call can have been cut by the output limit.
                let cut = stop == Stop::Truncated && Some(index) == last;
                streamed_call(index, call.id, call.name, &call.arguments, cut)
            })
            .collect();
        let reasoning = Reasoning {
            text: self.reasoning_text,
            field: self.reasoning_field.map(str::to_owned),
            details: self.details.into_values().map(Value::Object).collect(),
        };
        ModelResponse {
            text: self.text,
            tool_calls,
            usage: self.usage,
            model: self.model,
            stop,
            stop_reason: self.stop_reason,
            refusal,
            thinking: Vec::new(),
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            stop_details: None,
            items: Vec::new(),
        }
    }
}

/// An `{"error": ...}` object inside the stream. Overload and server errors are
/// retried; anything else is final.
fn stream_error(error: &Value) -> Failure {
    let field = |name: &str| -> String {
        match error.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    };
    let message = match error {
        Value::String(s) => s.clone(),
        _ => field("message"),
    };
    let kind = [field("type"), field("code")]
        .into_iter()
        .find(|k| !k.is_empty())
        .unwrap_or_else(|| "error".to_owned());
    let code = error.get("code").and_then(Value::as_u64).unwrap_or(0);
    let transient = matches!(code, 429 | 500..=599)
        || matches!(
            kind.as_str(),
            "server_error" | "overloaded" | "rate_limit_exceeded"
        );
    Failure::in_stream(PROVIDER, kind, &message, transient)
}
