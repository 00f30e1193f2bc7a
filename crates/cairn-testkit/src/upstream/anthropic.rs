//! Anthropic's wire formats: the Messages API (a whole `message`, and the
//! events `message_start`, `ping`, then per content block
//! `content_block_start`, `content_block_delta`…, `content_block_stop`, then
//! `message_delta` with the stop reason and usage, and `message_stop`), token
//! counting, the model list, and the error body.

use serde_json::{json, Value};

use super::script::{RecordedRequest, Usage};
use super::wire::{argument_pieces, named_event, Answer, Rendered};

/// Anthropic's error body for `status`.
pub(crate) fn error(status: u16) -> Value {
    let (kind, message) = match status {
        400 => ("invalid_request_error", "Bad request (mock)."),
        401 => ("authentication_error", "invalid x-api-key (mock)"),
        403 => ("permission_error", "Forbidden (mock)."),
        404 => ("not_found_error", "Not found (mock)."),
        413 => (
            "request_too_large",
            "Request exceeds the maximum size (mock).",
        ),
        429 => ("rate_limit_error", "Rate limited (mock)."),
        529 => ("overloaded_error", "Overloaded (mock)"),
        _ => ("api_error", "Internal server error (mock)."),
    };
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_mock"})
}

/// Anthropic counts cached input apart: `input_tokens` excludes it.
fn usage(u: Usage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": u.input_tokens.saturating_sub(u.cached_input_tokens),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached_input_tokens,
        "output_tokens": output_tokens,
        "service_tier": "standard"
    })
}

/// `POST /v1/messages`.
pub(crate) fn messages(answer: &Answer<'_>, req: &RecordedRequest) -> Rendered {
    let id = answer.id_or("msg_mock");
    let stop = match answer.stop {
        Some(stop) => stop,
        None if answer.tools.is_empty() => "end_turn",
        None => "tool_use",
    };
    let has_text = !answer.pieces.is_empty() || answer.tools.is_empty();
    if !req.is_stream() {
        let mut content = Vec::new();
        if has_text {
            content.push(json!({"type": "text", "text": answer.text()}));
        }
        for tool in answer.tools {
            content.push(json!({
                "type": "tool_use", "id": tool.id, "name": tool.name, "input": tool.arguments
            }));
        }
        return Rendered::json(
            200,
            &json!({
                "id": id, "type": "message", "role": "assistant", "model": answer.model,
                "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": usage(answer.usage, answer.usage.output_tokens)
            }),
        );
    }
    let mut events = Vec::new();
    let mut push = |data: Value| {
        let name = data["type"].as_str().unwrap_or("message").to_owned();
        events.push(named_event(&name, &data));
    };
    push(json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": answer.model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": usage(answer.usage, 1)
    }}));
    push(json!({"type": "ping"}));
    let mut index = 0;
    if has_text {
        push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}}));
        for piece in answer.pieces {
            push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": piece}}));
        }
        push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for tool in answer.tools {
        push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": tool.id, "name": tool.name, "input": {}}}));
        for piece in argument_pieces(tool) {
            push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let mut final_usage = usage(answer.usage, answer.usage.output_tokens);
    if let Some(map) = final_usage.as_object_mut() {
        map.remove("service_tier");
    }
    push(json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": final_usage}));
    push(json!({"type": "message_stop"}));
    Rendered::Stream { events }
}

/// `POST /v1/messages/count_tokens`: the reply's input tokens.
pub(crate) fn count_tokens(answer: &Answer<'_>) -> Value {
    json!({"input_tokens": answer.usage.input_tokens})
}

/// `GET /v1/models` asked with an `anthropic-version` header.
pub(crate) fn models() -> Value {
    let model = |id: &str, name: &str| {
        json!({
            "type": "model", "id": id, "display_name": name,
            "created_at": "2026-01-01T00:00:00Z", "lifecycle": "active", "deprecated_at": null
        })
    };
    json!({
        "data": [model("claude-sonnet-4-5", "Claude Sonnet 4.5"), model("claude-haiku-4-5", "Claude Haiku 4.5")],
        "has_more": false, "first_id": "claude-sonnet-4-5", "last_id": "claude-haiku-4-5"
    })
}
