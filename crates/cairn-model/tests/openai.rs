//! The OpenAI provider against a mock Chat Completions server.

mod common;

use cairn_model::{
    Message, ModelError, ModelRequest, ModelResponse, OpenAiProvider, Provider, ToolCall, ToolSpec,
    Usage,
};
use common::{data_events, error_response, fast_config, pieces, sse, Recorder, Sequence};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const ENDPOINT: &str = "/v1/chat/completions";

fn provider(server: &MockServer, max_retries: u32) -> OpenAiProvider {
    OpenAiProvider::new(
        "gpt-test",
        Some(&server.uri()),
        Some("sk-test".into()),
        &fast_config(max_retries),
    )
    .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest {
        turn: 1,
        messages: vec![Message::user("hi")],
        ..ModelRequest::default()
    }
}

fn content(text: &str) -> Value {
    json!({"model": "gpt-test-2024", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"model": "gpt-test-2024", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage(prompt: u64, completion: u64) -> Value {
    json!({"model": "gpt-test-2024", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
}

/// A complete streamed answer saying `text` in pieces of three characters.
fn text_stream(text: &str) -> String {
    let mut events: Vec<Value> = vec![
        json!({"model": "gpt-test-2024", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    ];
    events.extend(pieces(text, 3).iter().map(|p| content(p)));
    events.push(finish("stop"));
    events.push(usage(12, 5));
    data_events(&events, "\n") + "data: [DONE]\n\n"
}

async fn mount(server: &MockServer, responder: impl wiremock::Respond + 'static) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(responder)
        .mount(server)
        .await;
}

async fn requests_seen(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

#[tokio::test]
async fn streams_text_in_order() {
    let server = MockServer::start().await;
    mount(&server, sse(text_stream("Hello, wörld! All good."))).await;
    let mut sink = Recorder::default();
    let response = provider(&server, 0)
        .complete(&request(), &mut sink)
        .await
        .unwrap();
    assert_eq!(sink.deltas, pieces("Hello, wörld! All good.", 3));
    assert_eq!(
        response,
        ModelResponse {
            text: "Hello, wörld! All good.".into(),
            tool_calls: vec![],
            usage: Some(Usage {
                input_tokens: 12,
                output_tokens: 5
            }),
            model: "gpt-test-2024".into(),
            stop_reason: Some("stop".into()),
            stop: cairn_model::Stop::Done,
            ..ModelResponse::default()
        }
    );
}

#[tokio::test]
async fn assembles_tool_calls_from_fragments() {
    let first = r#"{"path": "src/main.rs", "limit": 20}"#;
    let second = r#"{"command": "ls -la | head", "timeout_s": 5}"#;
    let fragment = |index: u64, piece: &str| json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}}]});
    let mut events = vec![
        content("Let me look."),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}}]}),
    ];
    let first_pieces = pieces(first, 4);
    let (early, late) = first_pieces.split_at(3);
    events.extend(early.iter().map(|p| fragment(0, p)));
    events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "shell", "arguments": "{\"com"}}]}}]}));
    events.extend(late.iter().map(|p| fragment(0, p)));
    events.extend(pieces(&second[5..], 2).iter().map(|p| fragment(1, p)));
    events.push(finish("tool_calls"));
    events.push(usage(40, 22));
    let body = data_events(&events, "\r\n") + "data: [DONE]\r\n\r\n";

    let server = MockServer::start().await;
    mount(&server, sse(body)).await;
    let mut sink = Recorder::default();
    let response = provider(&server, 0)
        .complete(&request(), &mut sink)
        .await
        .unwrap();
    assert_eq!(
        response,
        ModelResponse {
            text: "Let me look.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "src/main.rs", "limit": 20}),
                    // As streamed, to go back as the model wrote it.
                    raw_arguments: Some(first.into()),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls -la | head", "timeout_s": 5}),
                    raw_arguments: Some(second.into()),
                },
            ],
            usage: Some(Usage {
                input_tokens: 40,
                output_tokens: 22
            }),
            model: "gpt-test-2024".into(),
            stop_reason: Some("tool_calls".into()),
            stop: cairn_model::Stop::ToolUse,
            ..ModelResponse::default()
        }
    );
}

#[tokio::test]
async fn keeps_invalid_arguments_as_a_string() {
    let events = [
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "shell", "arguments": "{\"command\": \"ls"}}]}}]}),
        finish("tool_calls"),
    ];
    let server = MockServer::start().await;
    mount(
        &server,
        sse(data_events(&events, "\n") + "data: [DONE]\n\n"),
    )
    .await;
    let response = provider(&server, 0)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap();
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "c1".into(),
            name: "shell".into(),
            arguments: json!("{\"command\": \"ls"),
            raw_arguments: None,
        }]
    );
    assert_eq!(response.usage, None, "no usage was reported");
}

#[tokio::test]
async fn sends_the_mapped_request() {
    let server = MockServer::start().await;
    mount(&server, sse(text_stream("ok"))).await;
    let request = ModelRequest {
        turn: 3,
        system: Some("You are terse.".into()),
        messages: vec![
            Message::user("list files"),
            Message::Assistant {
                thinking: Vec::new(),
                reasoning: None,
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "list_dir".into(),
                    arguments: json!({"path": "."}),
                    raw_arguments: None,
                }],
                items: Vec::new(),
            },
            Message::ToolResult {
                call_id: "call_1".into(),
                name: "list_dir".into(),
                output: "a.txt\nb.txt".into(),
                is_error: false,
            },
            Message::assistant("Two files."),
            Message::user("thanks"),
        ],
        tools: vec![ToolSpec {
            name: "list_dir".into(),
            description: "List a directory".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_output_tokens: Some(256),
        thinking: Some("high".into()),
    };
    provider(&server, 0)
        .complete(&request, &mut Recorder::default())
        .await
        .unwrap();

    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    let sent = &received[0];
    assert_eq!(
        sent.headers.get("authorization").unwrap().to_str().unwrap(),
        "Bearer sk-test"
    );
    let body: Value = sent.body_json().unwrap();
    assert_eq!(
        body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
                {"role": "assistant", "content": "Two files."},
                {"role": "user", "content": "thanks"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "list_dir",
                "description": "List a directory",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }}],
            "max_tokens": 256,
            "reasoning_effort": "high",
        })
    );
}

#[tokio::test]
async fn sends_no_authorization_without_a_key() {
    let server = MockServer::start().await;
    mount(&server, sse(text_stream("ok"))).await;
    let base = format!("{}/v1", server.uri());
    let provider = OpenAiProvider::new("llama3", Some(&base), None, &fast_config(0)).unwrap();
    provider
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap();
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn retries_after_429_with_retry_after() {
    let server = MockServer::start().await;
    let limited = error_response(429, json!({"error": {"message": "Rate limit reached"}}))
        .insert_header("retry-after", "0");
    mount(
        &server,
        Sequence::new(vec![limited, sse(text_stream("after the wait"))]),
    )
    .await;
    let mut sink = Recorder::default();
    let response = provider(&server, 4)
        .complete(&request(), &mut sink)
        .await
        .unwrap();
    assert_eq!(response.text, "after the wait");
    assert_eq!(sink.restarts, 0, "nothing was streamed before the retry");
    assert_eq!(requests_seen(&server).await, 2);
}

#[tokio::test]
async fn retries_server_errors() {
    let server = MockServer::start().await;
    let failing = error_response(500, json!({"error": {"message": "internal"}}));
    mount(
        &server,
        Sequence::new(vec![
            failing.clone(),
            failing,
            sse(text_stream("third time")),
        ]),
    )
    .await;
    let response = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap();
    assert_eq!(response.text, "third time");
    assert_eq!(requests_seen(&server).await, 3);
}

#[tokio::test]
async fn gives_up_after_max_retries() {
    let server = MockServer::start().await;
    mount(
        &server,
        error_response(503, json!({"error": {"message": "upstream unavailable"}})),
    )
    .await;
    let error = provider(&server, 2)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::RetriesExhausted { attempts: 3, last, .. } if last == "HTTP 503: upstream unavailable"),
        "{error}"
    );
    assert!(error.to_string().contains("after 3 attempt(s)"), "{error}");
    assert_eq!(requests_seen(&server).await, 3);
}

#[tokio::test]
async fn rejected_key_fails_at_once() {
    let server = MockServer::start().await;
    mount(
        &server,
        error_response(401, json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})),
    )
    .await;
    let error = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("the API key was rejected"), "{message}");
    assert!(message.contains("check OPENAI_API_KEY"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(!message.contains("sk-test"), "{message}");
    assert_eq!(requests_seen(&server).await, 1);
}

#[tokio::test]
async fn bad_request_fails_at_once() {
    let server = MockServer::start().await;
    mount(
        &server,
        error_response(
            404,
            json!({"error": {"message": "The model `gpt-test` does not exist"}}),
        ),
    )
    .await;
    let error = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Rejected { status: 404, message, .. } if message == "The model `gpt-test` does not exist"),
        "{error}"
    );
    assert_eq!(requests_seen(&server).await, 1);
}

#[tokio::test]
async fn retries_a_stream_cut_short() {
    let server = MockServer::start().await;
    let cut = data_events(&[content("Hel"), content("lo")], "\n");
    mount(
        &server,
        Sequence::new(vec![sse(cut), sse(text_stream("Hello again"))]),
    )
    .await;
    let mut sink = Recorder::default();
    let response = provider(&server, 4)
        .complete(&request(), &mut sink)
        .await
        .unwrap();
    assert_eq!(response.text, "Hello again");
    assert_eq!(sink.restarts, 1);
    assert_eq!(sink.deltas.concat(), "Hello again");
    assert_eq!(requests_seen(&server).await, 2);
}

#[tokio::test]
async fn a_stream_that_never_completes_names_the_marker() {
    let server = MockServer::start().await;
    mount(&server, sse(data_events(&[content("partial")], "\n"))).await;
    let error = provider(&server, 1)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("[DONE]"), "{error}");
    assert_eq!(requests_seen(&server).await, 2);
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let provider = OpenAiProvider::new("gpt-test", Some(&uri), None, &fast_config(1)).unwrap();
    let error = provider
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ModelError::RetriesExhausted { attempts: 2, .. }),
        "{error}"
    );
}

#[tokio::test]
async fn json_instead_of_a_stream_is_a_clear_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_json(json!({"choices": []})),
    )
    .await;
    let error = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("text/event-stream"), "{error}");
    assert_eq!(requests_seen(&server).await, 1);
}

#[tokio::test]
async fn an_event_that_never_ends_is_refused_at_the_limit_not_buffered() {
    let server = MockServer::start().await;
    // One line, longer than the parser holds, that never ends.
    let endless = format!(
        "{}data: {}",
        data_events(&[content("partial")], "\n"),
        "x".repeat(cairn_model::SSE_MAX_EVENT + 1)
    );
    mount(&server, sse(endless)).await;
    let error = provider(&server, 4)
        .complete(&request(), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ModelError::EventTooLarge { limit } if limit == cairn_model::SSE_MAX_EVENT),
        "{error}"
    );
    assert_eq!(requests_seen(&server).await, 1, "not retried");
}
