//! The Anthropic provider against a mock Messages server.

mod common;

use cairn_model::{
    AnthropicProvider, Message, ModelError, ModelRequest, ModelResponse, Provider, ToolCall,
    ToolSpec, Usage,
};
use common::{error_response, fast_config, named_events, pieces, sse, Recorder, Sequence};
use serde_json::{json, Value};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer};

const ENDPOINT: &str = "/v1/messages";

fn provider(server: &MockServer, max_retries: u32) -> AnthropicProvider {
    AnthropicProvider::new(
        "claude-test",
        Some(&server.uri()),
        Some("sk-ant-test".into()),
        &fast_config(max_retries),
    )
    .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest {
        turn: 1,
        system: Some("Be careful.".into()),
        messages: vec![Message::user("read the readme")],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        ..ModelRequest::default()
    }
}

fn message_start(input_tokens: u64) -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-test-20250101", "stop_reason": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }})
}

fn text_delta(index: u64, text: &str) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}})
}

fn json_delta(index: u64, partial: &str) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial}})
}

fn block_stop(index: u64) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_end(stop_reason: &str, output_tokens: u64) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
        json!({"type": "message_stop"}),
    ]
}

/// Text in pieces of four characters, then a `read_file` call whose input arrives in
/// pieces of three.
fn text_and_tool_stream(text: &str, input: &str) -> String {
    let mut events = vec![
        message_start(25),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
    ];
    events.extend(pieces(text, 4).iter().map(|p| text_delta(0, p)));
    events.push(block_stop(0));
    events.push(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}));
    events.extend(pieces(input, 3).iter().map(|p| json_delta(1, p)));
    events.push(block_stop(1));
    events.extend(message_end("tool_use", 31));
    named_events(&events)
}

fn text_stream(text: &str) -> String {
    let mut events = vec![
        message_start(10),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        text_delta(0, text),
        block_stop(0),
    ];
    events.extend(message_end("end_turn", 3));
    named_events(&events)
}

async fn requests_seen(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

#[tokio::test]
async fn streams_text_and_assembles_tool_use() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(sse(text_and_tool_stream(
            "I'll read the README first.",
            r#"{"path": "README.md", "note": "ünïcode"}"#,
        )))
        .expect(1)
        .mount(&server)
        .await;
    let mut sink = Recorder::default();
    let response = provider(&server, 0)
        .complete(&request(), &mut sink)
        .await
        .unwrap();
    assert_eq!(sink.deltas, pieces("I'll read the README first.", 4));
    assert_eq!(
        response,
        ModelResponse {
            text: "I'll read the README first.".into(),
            tool_calls: vec![ToolCall {
                id: "toolu_1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "README.md", "note": "ünïcode"}),
                // As streamed: spaced, keys not sorted.
                raw_arguments: Some(r#"{"path": "README.md", "note": "ünïcode"}"#.into()),
            }],
            usage: Some(Usage {
                input_tokens: 25,
                output_tokens: 31
            }),
            model: "claude-test-20250101".into(),
            stop_reason: Some("tool_use".into()),
            stop: cairn_model::Stop::ToolUse,
            ..ModelResponse::default()
        }
    );
}

#[tokio::test]
async fn sends_the_mapped_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(sse(text_stream("done")))
        .mount(&server)
        .await;
    let mut request = request();
    request.messages.extend([
        Message::Assistant {
            thinking: Vec::new(),
            reasoning: None,
            text: "Reading.".into(),
            tool_calls: vec![ToolCall {
                id: "toolu_1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "README.md"}),
                raw_arguments: None,
            }],
            items: Vec::new(),
        },
        Message::ToolResult {
            call_id: "toolu_1".into(),
            name: "read_file".into(),
            output: "no such file".into(),
            is_error: true,
        },
    ]);
    request.max_output_tokens = Some(1000);
    provider(&server, 0)
        .complete(&request, &mut Recorder::default())
        .await
        .unwrap();
    let received = server.received_requests().await.unwrap();
    let sent = &received[0];
    assert_eq!(sent.headers.get("x-api-key").unwrap(), "sk-ant-test");
    assert_eq!(sent.headers.get("anthropic-version").unwrap(), "2023-06-01");
    assert!(sent.headers.get("authorization").is_none());
    let body: Value = sent.body_json().unwrap();
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": 1000,
            "stream": true,
            "system": "Be careful.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read the readme"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "README.md"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file", "is_error": true},
                ]},
            ],
            "tools": [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        })
    );
}

#[tokio::test]
async fn counts_cached_input_tokens() {
    let mut events = vec![json!({"type": "message_start", "message": {
        "model": "claude-test", "usage": {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000, "output_tokens": 1},
    }})];
    events.extend(message_end("end_turn", 7));
    let server = MockServer::start().await;
    Mock::given(path(ENDPOINT))
        .respond_with(sse(named_events(&events)))
        .mount(&server)
        .await;
    let response = provider(&server, 0)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap();
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 1105,
            output_tokens: 7
        })
    );
}

#[tokio::test]
async fn retries_when_overloaded() {
    let server = MockServer::start().await;
    let overloaded = error_response(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    Mock::given(path(ENDPOINT))
        .respond_with(Sequence::new(vec![
            overloaded,
            sse(text_stream("fine now")),
        ]))
        .mount(&server)
        .await;
    let response = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap();
    assert_eq!(response.text, "fine now");
    assert_eq!(requests_seen(&server).await, 2);
}

#[tokio::test]
async fn retries_an_overloaded_error_event() {
    let server = MockServer::start().await;
    let mid_stream = named_events(&[
        message_start(10),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    Mock::given(path(ENDPOINT))
        .respond_with(Sequence::new(vec![
            sse(mid_stream),
            sse(text_stream("recovered")),
        ]))
        .mount(&server)
        .await;
    let response = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap();
    assert_eq!(response.text, "recovered");
    assert_eq!(requests_seen(&server).await, 2);
}

#[tokio::test]
async fn bad_request_fails_at_once() {
    let server = MockServer::start().await;
    Mock::given(path(ENDPOINT))
        .respond_with(error_response(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: at least one message is required"}}),
        ))
        .mount(&server)
        .await;
    let error = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Rejected { provider: "anthropic", status: 400, message, .. }
            if message == "messages: at least one message is required"),
        "{error}"
    );
    assert_eq!(requests_seen(&server).await, 1);
}

#[tokio::test]
async fn rejected_key_names_the_variable() {
    let server = MockServer::start().await;
    Mock::given(path(ENDPOINT))
        .respond_with(error_response(
            401,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        ))
        .mount(&server)
        .await;
    let error = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("check ANTHROPIC_API_KEY"), "{message}");
    assert!(!message.contains("sk-ant-test"), "{message}");
    assert_eq!(requests_seen(&server).await, 1);
}

#[tokio::test]
async fn a_stream_without_message_stop_is_retried() {
    let server = MockServer::start().await;
    let cut = named_events(&[message_start(10), text_delta(0, "half")]);
    Mock::given(path(ENDPOINT))
        .respond_with(Sequence::new(vec![sse(cut), sse(text_stream("whole"))]))
        .mount(&server)
        .await;
    let mut sink = Recorder::default();
    let response = provider(&server, 4)
        .complete(&request(), &mut sink)
        .await
        .unwrap();
    assert_eq!(response.text, "whole");
    assert_eq!((sink.restarts, sink.deltas), (1, vec!["whole".to_owned()]));
    assert_eq!(requests_seen(&server).await, 2);
}
