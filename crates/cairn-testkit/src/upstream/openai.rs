//! OpenAI's wire formats: Chat Completions (`chat.completion`, and
//! `chat.completion.chunk` events ended by `data: [DONE]`, with a usage-only
//! chunk when `stream_options.include_usage` is set), the Responses API
//! (whole `response` objects, and the event sequence `response.created`,
//! `response.in_progress`, `response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta`…,
//! `response.output_text.done`, `response.content_part.done`,
//! `response.output_item.done` — or for a tool call
//! `response.function_call_arguments.delta`…/`.done`, for a reasoning item
//! `response.reasoning_summary_part.added`,
//! `response.reasoning_summary_text.delta`…/`.done`,
//! `response.reasoning_summary_part.done` — and
//! `response.completed`, each with its `sequence_number`), the model list,
//! and the error body.

use serde_json::{json, Map, Value};

use super::script::{RecordedRequest, ToolCall, Usage};
use super::wire::{
    argument_pieces, arguments_text, data_event, named_event, Answer, Rendered, CREATED,
};

/// OpenAI's error body for `status`.
pub(crate) fn error(status: u16) -> Value {
    let (kind, code, message) = match status {
        400 => ("invalid_request_error", Value::Null, "Bad request (mock)."),
        401 => (
            "invalid_request_error",
            json!("invalid_api_key"),
            "Incorrect API key provided (mock).",
        ),
        403 => ("invalid_request_error", Value::Null, "Forbidden (mock)."),
        404 => ("invalid_request_error", Value::Null, "Not found (mock)."),
        429 => (
            "requests",
            json!("rate_limit_exceeded"),
            "Rate limit reached (mock).",
        ),
        _ => (
            "server_error",
            Value::Null,
            "The server had an error while processing your request (mock).",
        ),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

fn chat_usage(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0
        }
    })
}

fn chat_tool_call(tool: &ToolCall) -> Value {
    json!({
        "id": tool.id, "type": "function",
        "function": {"name": tool.name, "arguments": arguments_text(tool)}
    })
}

/// `POST /v1/chat/completions`.
pub(crate) fn chat(answer: &Answer<'_>, req: &RecordedRequest) -> Rendered {
    let body = req.json().unwrap_or(Value::Null);
    let id = answer.id_or("chatcmpl-mock");
    let finish = match answer.stop {
        Some(stop) => stop,
        None if answer.tools.is_empty() => "stop",
        None => "tool_calls",
    };
    if !req.is_stream() {
        let text = answer.text();
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !answer.tools.is_empty() { Value::Null } else { json!(text) },
            "refusal": null,
            "annotations": []
        });
        if !answer.tools.is_empty() {
            message["tool_calls"] = answer.tools.iter().map(chat_tool_call).collect();
        }
        return Rendered::json(
            200,
            &json!({
                "id": id, "object": "chat.completion", "created": CREATED, "model": answer.model,
                "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
                "usage": chat_usage(answer.usage),
                "service_tier": "default", "system_fingerprint": "fp_cairn_mock"
            }),
        );
    }
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let chunk = |choices: Value| {
        let mut c = json!({
            "id": id, "object": "chat.completion.chunk", "created": CREATED,
            "model": answer.model, "service_tier": "default",
            "system_fingerprint": "fp_cairn_mock", "choices": choices
        });
        // With include_usage the API puts `usage: null` in every chunk but
        // the last.
        if include_usage {
            c["usage"] = Value::Null;
        }
        data_event(&c)
    };
    let delta = |delta: Value| {
        chunk(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]))
    };
    let mut events = vec![delta(
        json!({"role": "assistant", "content": "", "refusal": null}),
    )];
    for piece in answer.pieces {
        events.push(delta(json!({"content": piece})));
    }
    for (index, tool) in answer.tools.iter().enumerate() {
        events.push(delta(json!({"tool_calls": [{
            "index": index, "id": tool.id, "type": "function",
            "function": {"name": tool.name, "arguments": ""}
        }]})));
        for piece in argument_pieces(tool) {
            events.push(delta(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
            ));
        }
    }
    events.push(chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]),
    ));
    if include_usage {
        let mut last = json!({
            "id": id, "object": "chat.completion.chunk", "created": CREATED,
            "model": answer.model, "service_tier": "default",
            "system_fingerprint": "fp_cairn_mock", "choices": []
        });
        last["usage"] = chat_usage(answer.usage);
        events.push(data_event(&last));
    }
    events.push(b"data: [DONE]\n\n".to_vec());
    Rendered::Stream { events }
}

fn responses_usage(u: Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_input_tokens, "cache_write_tokens": 0},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input_tokens + u.output_tokens
    })
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// The `response` object, echoing what the request set.
fn response_object(
    answer: &Answer<'_>,
    body: &Value,
    status: &str,
    output: Vec<Value>,
    usage: Option<Usage>,
) -> Value {
    let field = |name: &str| body.get(name).cloned().unwrap_or(Value::Null);
    let incomplete = if status == "incomplete" {
        json!({"reason": answer.stop.unwrap_or("max_output_tokens")})
    } else {
        Value::Null
    };
    json!({
        "id": answer.id_or("resp_mock"), "object": "response", "created_at": CREATED,
        "status": status, "background": false, "error": null,
        "incomplete_details": incomplete, "instructions": field("instructions"),
        "max_output_tokens": field("max_output_tokens"), "model": answer.model,
        "output": output, "parallel_tool_calls": true,
        "previous_response_id": field("previous_response_id"),
        "reasoning": {"effort": null, "summary": null},
        "store": body.get("store").cloned().unwrap_or(json!(true)), "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice").cloned().unwrap_or(json!("auto")),
        "tools": body.get("tools").cloned().unwrap_or(json!([])),
        "top_p": 1.0, "truncation": "disabled",
        "usage": usage.map(responses_usage).unwrap_or(Value::Null),
        "user": null, "metadata": body.get("metadata").cloned().unwrap_or(json!({}))
    })
}

/// The output items of a finished answer: the reasoning item (when the
/// reply has one), a message (when there is text, or nothing else), then the
/// function calls.
fn output_items(answer: &Answer<'_>, message_status: &str) -> Vec<(String, Value)> {
    let mut items = Vec::new();
    if let Some(r) = answer.reasoning {
        let id = format!("rs_{}", answer.tag);
        let item = json!({
            "id": id, "type": "reasoning", "encrypted_content": r.encrypted_content,
            "summary": [{"type": "summary_text", "text": r.summary}]
        });
        items.push((id, item));
    }
    if !answer.pieces.is_empty() || answer.tools.is_empty() {
        let id = format!("msg_{}", answer.tag);
        let item = json!({
            "id": id, "type": "message", "status": message_status, "role": "assistant",
            "content": [output_text(&answer.text())]
        });
        items.push((id, item));
    }
    for (i, tool) in answer.tools.iter().enumerate() {
        let id = format!("fc_{}_{i}", answer.tag);
        let item = json!({
            "id": id, "type": "function_call", "status": "completed",
            "arguments": arguments_text(tool), "call_id": tool.id, "name": tool.name
        });
        items.push((id, item));
    }
    items
}

/// `POST /v1/responses`.
pub(crate) fn responses(answer: &Answer<'_>, req: &RecordedRequest) -> Rendered {
    let body = req.json().unwrap_or(Value::Null);
    // A stop reason given to the reply makes the response `incomplete` (the
    // Responses API has no finish reason on a completed response).
    let (status, message_status, last_event) = match answer.stop {
        Some(_) => ("incomplete", "incomplete", "response.incomplete"),
        None => ("completed", "completed", "response.completed"),
    };
    let items = output_items(answer, message_status);
    let done = response_object(
        answer,
        &body,
        status,
        items.iter().map(|(_, item)| item.clone()).collect(),
        Some(answer.usage),
    );
    if !req.is_stream() {
        return Rendered::json(200, &done);
    }
    let mut events = Vec::new();
    let mut push = |kind: &str, mut data: Map<String, Value>| {
        data.insert("type".into(), json!(kind));
        data.insert("sequence_number".into(), json!(events.len()));
        events.push(named_event(kind, &Value::Object(data)));
    };
    let obj = |v: Value| match v {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let started = response_object(answer, &body, "in_progress", Vec::new(), None);
    push("response.created", obj(json!({"response": started})));
    push("response.in_progress", obj(json!({"response": started})));
    for (output_index, (item_id, item)) in items.iter().enumerate() {
        if item["type"] == "reasoning" {
            let mut opened = item.clone();
            opened["summary"] = json!([]);
            push(
                "response.output_item.added",
                obj(json!({"output_index": output_index, "item": opened})),
            );
            let summary = item["summary"][0]["text"].as_str().unwrap_or("");
            let at = json!({"item_id": item_id, "output_index": output_index, "summary_index": 0});
            let with = |extra: Value| {
                let mut m = obj(at.clone());
                m.extend(obj(extra));
                m
            };
            let part = |text: &str| json!({"type": "summary_text", "text": text});
            push(
                "response.reasoning_summary_part.added",
                with(json!({"part": part("")})),
            );
            for piece in split_summary(summary) {
                push(
                    "response.reasoning_summary_text.delta",
                    with(json!({"delta": piece})),
                );
            }
            push(
                "response.reasoning_summary_text.done",
                with(json!({"text": summary})),
            );
            push(
                "response.reasoning_summary_part.done",
                with(json!({"part": part(summary)})),
            );
        } else if item["type"] == "message" {
            let mut opened = item.clone();
            opened["status"] = json!("in_progress");
            opened["content"] = json!([]);
            push(
                "response.output_item.added",
                obj(json!({"output_index": output_index, "item": opened})),
            );
            let at = json!({"item_id": item_id, "output_index": output_index, "content_index": 0});
            let with = |extra: Value| {
                let mut m = obj(at.clone());
                m.extend(obj(extra));
                m
            };
            push(
                "response.content_part.added",
                with(json!({"part": output_text("")})),
            );
            for piece in answer.pieces {
                push(
                    "response.output_text.delta",
                    with(json!({"delta": piece, "logprobs": []})),
                );
            }
            push(
                "response.output_text.done",
                with(json!({"text": answer.text(), "logprobs": []})),
            );
            push(
                "response.content_part.done",
                with(json!({"part": output_text(&answer.text())})),
            );
        } else {
            let mut opened = item.clone();
            opened["status"] = json!("in_progress");
            opened["arguments"] = json!("");
            push(
                "response.output_item.added",
                obj(json!({"output_index": output_index, "item": opened})),
            );
            let tool = &answer.tools[output_index - (items.len() - answer.tools.len())];
            for piece in argument_pieces(tool) {
                push(
                    "response.function_call_arguments.delta",
                    obj(json!({"item_id": item_id, "output_index": output_index, "delta": piece})),
                );
            }
            push(
                "response.function_call_arguments.done",
                obj(json!({
                    "item_id": item_id, "output_index": output_index,
                    "name": tool.name, "arguments": arguments_text(tool)
                })),
            );
        }
        push(
            "response.output_item.done",
            obj(json!({"output_index": output_index, "item": item})),
        );
    }
    push(last_event, obj(json!({"response": done})));
    Rendered::Stream { events }
}

/// A reasoning summary in the pieces it is streamed in: each word with
/// the spaces before it.
fn split_summary(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == ' ' && i > start && !text[start..i].trim().is_empty() {
            pieces.push(&text[start..i]);
            start = i;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// `GET /v1/models`.
pub(crate) fn models() -> Value {
    let model =
        |id: &str| json!({"id": id, "object": "model", "created": CREATED, "owned_by": "openai"});
    json!({"object": "list", "data": [model("gpt-4o-mini"), model("gpt-5-mini")]})
}
