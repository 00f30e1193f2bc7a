//! Decoding a streamed Responses API answer (typed events, each with its
//! `type` in the data and, from OpenAI, as the SSE `event:` name too).
//!
//! What the decoder keeps, event by event:
//!
//! 1. `response.created`, `response.in_progress`: the model.
//! 2. `response.output_text.delta`: text, forwarded to the sink as it comes;
//!    `response.refusal.delta`: the refusal.
//! 3. `response.output_item.added` with a `function_call` item opens a call
//!    at its `output_index` (its `call_id`, `name`, initial `arguments`);
//!    `response.function_call_arguments.delta` pieces are concatenated onto
//!    it as received, and `.done` replaces them with the whole text.
//! 4. `response.reasoning_summary_text.delta` (and the raw
//!    `response.reasoning_text.delta` some compatible servers stream) is the
//!    reasoning text, kept for the record; summary parts are joined by a
//!    blank line.
//! 5. `response.output_item.done` keeps the finished item, whole and as
//!    sent, at its `output_index`.
//! 6. `response.completed` or `response.incomplete` ends the stream: its
//!    `response` is the whole answer — its `output` items (reasoning items
//!    with their `encrypted_content`, messages, function calls) are the
//!    items kept, and a function call's arguments are taken from them; its
//!    `usage` is the usage; an incomplete one's `incomplete_details.reason`
//!    is the stop reason. Should its `output` be empty while
//!    `response.output_item.done` events carried items (some compatible
//!    servers do that), those items are the output, in `output_index` order.
//! 7. `error` and `response.failed` fail the attempt: rate-limit, overload
//!    and server errors are retried, anything else is final. Other events
//!    (`response.content_part.*`, `*.done` of text, web search, …) are
//!    ignored.
//!
//! The final items are kept as the provider sent them in that last event:
//! OpenAI re-encrypts a reasoning item's `encrypted_content` between
//! `response.output_item.added`, `.done` and `response.completed`, and the
//! last one is the one to send back.
//!
//! The response is complete ([`Decoder::complete`]) only with its final
//! event: it alone carries the usage, so a stream cut before it is
//! requested again. There is no `data: [DONE]` after it (a proxy that adds
//! one is harmless: the final event already ended the stream).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{excerpt, ModelError};
use crate::http::{Decoder, Failure, Step};
use crate::message::{
    refusal_from_text, streamed_call, ModelResponse, Reasoning, Stop, StreamSink, Usage,
};
use crate::sse::SseEvent;

use super::PROVIDER;

/// One function call being assembled from its events.
#[derive(Default)]
struct PartialCall {
    call_id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed Responses answer.
pub(crate) struct ResponsesDecoder {
    text: String,
    refusal: String,
    model: String,
    calls: BTreeMap<u64, PartialCall>,
    done_items: BTreeMap<u64, Value>,
    reasoning: String,
    summary_at: Option<(u64, u64)>,
    last: Option<Value>,
}

impl ResponsesDecoder {
    pub(crate) fn new(model: &str) -> ResponsesDecoder {
        ResponsesDecoder {
            text: String::new(),
            refusal: String::new(),
            model: model.to_owned(),
            calls: BTreeMap::new(),
            done_items: BTreeMap::new(),
            reasoning: String::new(),
            summary_at: None,
            last: None,
        }
    }

    fn reasoning_piece(&mut self, data: &Value) {
        let Some(delta) = data.get("delta").and_then(Value::as_str) else {
            return;
        };
        let at = (index(data, "output_index"), index(data, "summary_index"));
        if self.summary_at.is_some_and(|seen| seen != at) && !self.reasoning.is_empty() {
            self.reasoning.push_str("\n\n");
        }
        self.summary_at = Some(at);
        self.reasoning.push_str(delta);
    }

    fn call_item(&mut self, at: u64, item: &Value) {
        if item.get("type").and_then(Value::as_str) != Some("function_call") {
            return;
        }
        let call = self.calls.entry(at).or_default();
        if let Some(id) = item.get("call_id").and_then(Value::as_str) {
            id.clone_into(&mut call.call_id);
        }
        if let Some(name) = item.get("name").and_then(Value::as_str) {
            name.clone_into(&mut call.name);
        }
        if let Some(arguments) = item.get("arguments").and_then(Value::as_str) {
            if !arguments.is_empty() || call.arguments.is_empty() {
                arguments.clone_into(&mut call.arguments);
            }
        }
    }
}

/// A non-negative integer field, 0 when absent.
fn index(data: &Value, field: &str) -> u64 {
    data.get(field).and_then(Value::as_u64).unwrap_or(0)
}

impl Decoder for ResponsesDecoder {
    type Output = ModelResponse;

    const END_MARKER: &'static str = "`response.completed`";

    fn event(&mut self, event: SseEvent, sink: &mut dyn StreamSink) -> Result<Step, Failure> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Step::Continue);
        }
        let data: Value = serde_json::from_str(data).map_err(|e| ModelError::Protocol {
            provider: PROVIDER,
            message: format!("a stream event is not JSON ({e}): {}", excerpt(data)),
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event)
            .to_owned();
        if let Some(model) = data
            .get("response")
            .and_then(|r| r.get("model"))
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            model.clone_into(&mut self.model);
        }
        let at = index(&data, "output_index");
        let delta = || data.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind.as_str() {
            "response.output_text.delta" => {
                let piece = delta();
                if !piece.is_empty() {
                    sink.text(piece);
                    self.text.push_str(piece);
                }
            }
            "response.refusal.delta" => self.refusal.push_str(delta()),
            "response.output_item.added" => {
                if let Some(item) = data.get("item") {
                    self.call_item(at, item);
                }
            }
            "response.function_call_arguments.delta" => {
                let piece = delta().to_owned();
                self.calls.entry(at).or_default().arguments.push_str(&piece);
            }
            "response.function_call_arguments.done" => {
                if let Some(whole) = data.get("arguments").and_then(Value::as_str) {
                    whole.clone_into(&mut self.calls.entry(at).or_default().arguments);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.reasoning_piece(&data);
            }
            "response.output_item.done" => {
                if let Some(item) = data.get("item") {
                    self.call_item(at, item);
                    self.done_items.insert(at, item.clone());
                }
            }
            "response.completed" | "response.incomplete" => {
                self.last = Some(data.get("response").cloned().unwrap_or(Value::Null));
                return Ok(Step::Done);
            }
            "response.failed" => {
                let error = data.get("response").and_then(|r| r.get("error"));
                return Err(stream_error(error.unwrap_or(&Value::Null)));
            }
            "error" => {
                // Documented flat (`code`, `message`); some send it nested.
                let error = data.get("error").filter(|e| e.is_object()).unwrap_or(&data);
                return Err(stream_error(error));
            }
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn complete(&self) -> bool {
        self.last.is_some()
    }

    fn finish(self) -> ModelResponse {
        let last = self.last.unwrap_or(Value::Null);
        let mut items: Vec<Value> = last
            .get("output")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if items.is_empty() {
            items = self.done_items.into_values().collect();
        }
        let status = last.get("status").and_then(Value::as_str);
        let stop_reason = match status {
            Some("incomplete") => Some(
                last.pointer("/incomplete_details/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("incomplete")
                    .to_owned(),
            ),
            Some(other) => Some(other.to_owned()),
            None => None,
        };
        let truncated = Stop::from_reason(stop_reason.as_deref()) == Stop::Truncated;
        let mut calls: Vec<PartialCall> = items
            .iter()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("function_call"))
            .map(|item| {
                let field = |f: &str| item.get(f).and_then(Value::as_str).unwrap_or("");
                PartialCall {
                    call_id: field("call_id").to_owned(),
                    name: field("name").to_owned(),
                    arguments: field("arguments").to_owned(),
                }
            })
            .collect();
        if calls.is_empty() && items.is_empty() {
            calls = self.calls.into_values().collect();
        }
        let count = calls.len();
        let tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| {
                // Only the last call can have been cut by the output limit.
                let cut = truncated && i + 1 == count;
                streamed_call(i as u64, call.call_id, call.name, &call.arguments, cut)
            })
            .collect::<Vec<_>>();
        let (stop, refusal) = if !self.refusal.is_empty() {
            (Stop::Refused, Some(self.refusal))
        } else {
            let stop = match Stop::from_reason(stop_reason.as_deref()) {
                Stop::Done if !tool_calls.is_empty() => Stop::ToolUse,
                other => other,
            };
            (
                stop,
                (stop == Stop::Refused).then(|| refusal_from_text(&self.text, None)),
            )
        };
        let usage = last.get("usage").filter(|u| u.is_object()).map(|u| {
            let count = |f: &str| u.get(f).and_then(Value::as_u64).unwrap_or(0);
            Usage {
                input_tokens: count("input_tokens"),
                output_tokens: count("output_tokens"),
            }
        });
        let model = last
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map_or(self.model, str::to_owned);
        ModelResponse {
            text: self.text,
            tool_calls,
            usage,
            model,
            stop,
            stop_reason,
            refusal,
            stop_details: None,
            thinking: Vec::new(),
            reasoning: (!self.reasoning.is_empty()).then(|| Reasoning {
                text: self.reasoning,
                ..Reasoning::default()
            }),
            items,
        }
    }
}

/// An `error` event's error, or a failed response's. Rate-limit, overload
/// and server errors are retried; anything else is final.
fn stream_error(error: &Value) -> Failure {
    let field = |name: &str| match error.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let message = field("message");
    let kind = [field("code"), field("type")]
        .into_iter()
        .find(|k| !k.is_empty())
        .unwrap_or_else(|| "error".to_owned());
    let transient = matches!(
        kind.as_str(),
        "server_error" | "overloaded" | "rate_limit_exceeded" | "internal_error"
    );
    Failure::in_stream(PROVIDER, kind, &message, transient)
}
