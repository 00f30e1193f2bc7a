//! Real-shaped Anthropic Messages streams (`tests/fixtures/anthropic/`)
//! through a mock server: the whole response that comes out, what the next
//! request carries, and how many requests were made.

mod common;

use cairn_model::{
    AnthropicProvider, Message, ModelRequest, ModelResponse, Provider, Stop, Thinking, ToolCall,
    Usage, REFUSAL_WITHOUT_TEXT,
};
use common::{bodies, fast_config, results_for, serve_fixtures, tool, Recorder};
use serde_json::{json, Value};
use wiremock::MockServer;

const ENDPOINT: &str = "/v1/messages";
const MODEL: &str = "claude-sonnet-4-5-20250929";
const SIGNATURE: &str = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds4UjmhcyHqFqDrDWyKrkrFZcPAmmHbCG7AbCj4pVG2FJL2VCN6SiuzR0oDhSVoZNtN7KMYsvR4pelqBqM1OLnLSmrHqrrUnY7uA8sW3R1fJdmnB3ecuSgxQR";
const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qyHBvfEt3zPsL4u2bbk0gTHNnyZ3HeTcvZpyAg==";

fn provider(server: &MockServer) -> AnthropicProvider {
    AnthropicProvider::new(
        "claude-test",
        Some(&server.uri()),
        Some("sk-ant-test".into()),
        &fast_config(4),
    )
    .unwrap()
}

fn request(messages: Vec<Message>, thinking: Option<&str>) -> ModelRequest {
    ModelRequest {
        turn: 1,
        messages,
        tools: ["read_file", "write_file", "shell"]
            .into_iter()
            .map(tool)
            .collect(),
        thinking: thinking.map(str::to_owned),
        ..ModelRequest::default()
    }
}

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
        raw_arguments: None,
    }
}

/// `call` as streamed: its arguments spelled `text` (spaced, keys in the
/// model's order), which goes back on later requests as it came.
fn spelled(mut call: ToolCall, text: &str) -> ToolCall {
    call.raw_arguments = Some(text.into());
    call
}

fn response(reason: &str, stop: Stop, usage: Usage) -> ModelResponse {
    ModelResponse {
        model: MODEL.into(),
        stop_reason: Some(reason.into()),
        stop,
        usage: Some(usage),
        ..ModelResponse::default()
    }
}

async fn complete(server: &MockServer, request: &ModelRequest) -> (ModelResponse, Recorder) {
    let mut sink = Recorder::default();
    let response = provider(server).complete(request, &mut sink).await.unwrap();
    (response, sink)
}

fn text_and_tool_response() -> ModelResponse {
    ModelResponse {
        text: "I'll read the RÉADME first 📖.".into(),
        tool_calls: vec![spelled(
            call(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "read_file",
                json!({"path": "README.md", "note": "ünïcode"}),
            ),
            r#"{"path": "README.md", "note": "ünïcode"}"#,
        )],
        ..response("tool_use", Stop::ToolUse, usage(1125, 31))
    }
}

fn done_response() -> ModelResponse {
    ModelResponse {
        text: "Done — all tests pass.".into(),
        ..response("end_turn", Stop::Done, usage(10, 9))
    }
}

#[tokio::test]
async fn text_and_tool_use_with_cached_input_and_a_ping() {
    let server = serve_fixtures(ENDPOINT, &["anthropic/text_and_tool.sse"]).await;
    let (got, sink) = complete(&server, &request(vec![Message::user("readme?")], None)).await;
    assert_eq!(got, text_and_tool_response());
    assert_eq!(sink.deltas, ["I'll read", " the RÉADME", " first 📖."]);
}

#[tokio::test]
async fn max_tokens_inside_a_tool_input_is_truncated_and_keeps_it_as_received() {
    let partial = r##"{"path": "plan.md", "content": "# Plan\n\n1. Rea"##;
    let server = serve_fixtures(
        ENDPOINT,
        &[
            "anthropic/max_tokens_in_tool_use.sse",
            "anthropic/thinking_final.sse",
        ],
    )
    .await;
    let first = request(vec![Message::user("plan it")], None);
    let (got, _) = complete(&server, &first).await;
    let want = ModelResponse {
        text: "Writing the plan.".into(),
        tool_calls: vec![call("toolu_01Mx7Qw2", "write_file", json!(partial))],
        ..response("max_tokens", Stop::Truncated, usage(200, 64))
    };
    assert_eq!(got, want);

    let mut next = first.clone();
    next.messages.push(got.to_message());
    next.messages
        .extend(results_for(&got, "not run: the call was cut off"));
    complete(&server, &next).await;
    let sent = &bodies(&server).await[1]["messages"][1]["content"][1];
    assert_eq!(
        *sent,
        json!({"type": "tool_use", "id": "toolu_01Mx7Qw2", "name": "write_file", "input": {"value": partial}})
    );
}

#[tokio::test]
async fn max_tokens_at_a_tool_start_leaves_no_runnable_call() {
    let server = serve_fixtures(ENDPOINT, &["anthropic/max_tokens_at_tool_start.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("go")], None)).await;
    let want = ModelResponse {
        text: "Next:".into(),
        tool_calls: vec![call("toolu_01Ns8Rz3", "shell", json!(""))],
        ..response("max_tokens", Stop::Truncated, usage(200, 64))
    };
    assert_eq!(got, want);
}

#[tokio::test]
async fn thinking_blocks_and_the_thinking_parameter_stay_through_the_tool_loop() {
    let server = serve_fixtures(
        ENDPOINT,
        &[
            "anthropic/thinking_tool_use.sse",
            "anthropic/thinking_continuation.sse",
            "anthropic/thinking_final.sse",
        ],
    )
    .await;
    let first = request(vec![Message::user("which version?")], Some("on"));
    let (got, sink) = complete(&server, &first).await;
    let thinking = vec![
        Thinking::Thinking {
            thinking: "The user wants the crate's version. Cargo.toml has it — read that first."
                .into(),
            signature: SIGNATURE.into(),
        },
        Thinking::RedactedThinking {
            data: REDACTED.into(),
        },
    ];
    let want = ModelResponse {
        text: "Let me read it.".into(),
        tool_calls: vec![spelled(
            call("toolu_01Th9Ab4", "read_file", json!({"path": "Cargo.toml"})),
            r#"{"path": "Cargo.toml"}"#,
        )],
        thinking: thinking.clone(),
        ..response("tool_use", Stop::ToolUse, usage(512, 143))
    };
    assert_eq!(got, want);
    assert_eq!(
        sink.deltas.concat(),
        "Let me read it.",
        "thinking is not text"
    );

    // Without interleaved thinking the loop's later turns have no thinking block.
    let mut second = first.clone();
    second.messages.push(got.to_message());
    second
        .messages
        .extend(results_for(&got, "version = \"0.4.1\""));
    let (more, _) = complete(&server, &second).await;
    assert!(more.thinking.is_empty());
    let mut third = second.clone();
    third.messages.push(more.to_message());
    third
        .messages
        .extend(results_for(&more, "version = \"0.4.1\""));
    let (last, _) = complete(&server, &third).await;
    assert_eq!(last.text, "The version is 0.4.1 — in both.");

    let sent = bodies(&server).await;
    let parameter = json!({"type": "enabled", "budget_tokens": 4096});
    for (n, body) in sent.iter().enumerate() {
        assert_eq!(body["thinking"], parameter, "request {}", n + 1);
        assert_eq!(body["max_tokens"], json!(8192 + 4096), "request {}", n + 1);
    }
    let first_turn = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "The user wants the crate's version. Cargo.toml has it — read that first.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "text", "text": "Let me read it."},
        {"type": "tool_use", "id": "toolu_01Th9Ab4", "name": "read_file", "input": {"path": "Cargo.toml"}},
    ]});
    assert_eq!(sent[1]["messages"][1], first_turn);
    assert_eq!(sent[2]["messages"][1], first_turn);
    assert_eq!(
        sent[2]["messages"][3]["content"][0],
        json!({"type": "text", "text": "Now the lock file."})
    );
}

#[tokio::test]
async fn a_refusal_stop_reason_is_refused_with_the_text() {
    let server = serve_fixtures(ENDPOINT, &["anthropic/refusal.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("do harm")], None)).await;
    let text = "I can’t help with that request.";
    let want = ModelResponse {
        text: text.into(),
        refusal: Some(text.into()),
        ..response("refusal", Stop::Refused, usage(60, 9))
    };
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_refusal_without_text_is_recorded_with_a_note() {
    let server = serve_fixtures(ENDPOINT, &["anthropic/refusal_without_text.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("do harm")], None)).await;
    let want = ModelResponse {
        refusal: Some(REFUSAL_WITHOUT_TEXT.into()),
        ..response("refusal", Stop::Refused, usage(60, 1))
    };
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_mid_stream_overloaded_error_is_retried_and_the_retry_accepted() {
    let server = serve_fixtures(
        ENDPOINT,
        &[
            "anthropic/overloaded_mid_stream.sse",
            "anthropic/text_and_tool.sse",
        ],
    )
    .await;
    let (got, sink) = complete(&server, &request(vec![Message::user("readme?")], None)).await;
    assert_eq!(got, text_and_tool_response());
    assert_eq!(sink.restarts, 1, "the partial text was withdrawn");
    assert_eq!(sink.deltas.concat(), "I'll read the RÉADME first 📖.");
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn a_message_stop_without_its_blank_line_is_accepted_after_one_request() {
    let server = serve_fixtures(ENDPOINT, &["anthropic/no_trailing_blank_line.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("test")], None)).await;
    assert_eq!(got, done_response());
    assert_eq!(bodies(&server).await.len(), 1, "the answer was bought once");
}

#[tokio::test]
async fn a_stream_ending_after_message_delta_is_accepted_after_one_request() {
    let server = serve_fixtures(ENDPOINT, &["anthropic/no_message_stop.sse"]).await;
    let (got, sink) = complete(&server, &request(vec![Message::user("test")], None)).await;
    assert_eq!(got, done_response());
    assert_eq!(sink.restarts, 0);
    assert_eq!(bodies(&server).await.len(), 1, "the answer was bought once");
}

#[tokio::test]
async fn streams_missing_content_are_requested_again() {
    for cut in ["anthropic/cut_in_text.sse"] {
        let server = serve_fixtures(ENDPOINT, &[cut, "anthropic/text_and_tool.sse"]).await;
        let (got, sink) = complete(&server, &request(vec![Message::user("test")], None)).await;
        assert_eq!(got, text_and_tool_response(), "{cut}");
        assert_eq!(sink.restarts, 1, "{cut}");
        assert_eq!(bodies(&server).await.len(), 2, "{cut}");
    }
}

#[tokio::test]
async fn a_connection_dropped_after_a_complete_response_is_accepted_once() {
    let (uri, served) = common::dropping_server(vec![(
        common::fixture("anthropic/no_message_stop.sse"),
        false,
    )])
    .await;
    let provider =
        AnthropicProvider::new("claude-test", Some(&uri), Some("k".into()), &fast_config(4))
            .unwrap();
    let mut sink = Recorder::default();
    let got = provider
        .complete(&request(vec![Message::user("test")], None), &mut sink)
        .await
        .unwrap();
    assert_eq!(got, done_response());
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_dropped_inside_a_block_is_requested_again() {
    let (uri, served) = common::dropping_server(vec![
        (common::fixture("anthropic/cut_in_text.sse"), false),
        (common::fixture("anthropic/text_and_tool.sse"), true),
    ])
    .await;
    let provider =
        AnthropicProvider::new("claude-test", Some(&uri), Some("k".into()), &fast_config(4))
            .unwrap();
    let got = provider
        .complete(
            &request(vec![Message::user("test")], None),
            &mut Recorder::default(),
        )
        .await
        .unwrap();
    assert_eq!(got, text_and_tool_response());
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// The cut call of `max_tokens_in_open_tool_use*.sse`, its input as received.
const OPEN_CUT: &str = r##"{"path": "report.md", "content": "# Q3 report\n\nRevenue gr"##;

#[tokio::test]
async fn max_tokens_inside_a_tool_block_never_closed_is_complete_and_bought_once() {
    // Real Anthropic streams cut by `max_tokens` inside a `tool_use` block
    // send no `content_block_stop` for it: the stop reason ends the answer,
    // with `message_stop` after it or not.
    for fixture in [
        "anthropic/max_tokens_in_open_tool_use.sse",
        "anthropic/max_tokens_in_open_tool_use_no_stop.sse",
    ] {
        let server = serve_fixtures(ENDPOINT, &[fixture, "anthropic/text_and_tool.sse"]).await;
        let (got, sink) = complete(&server, &request(vec![Message::user("report")], None)).await;
        let want = ModelResponse {
            text: "I'll write the report to a file.".into(),
            tool_calls: vec![call("toolu_01Rk7Tq2WmZ9", "write_file", json!(OPEN_CUT))],
            ..response("max_tokens", Stop::Truncated, usage(412, 64))
        };
        assert_eq!(got, want, "{fixture}");
        assert_eq!(sink.restarts, 0, "{fixture}");
        assert_eq!(bodies(&server).await.len(), 1, "{fixture}: bought once");
    }
}

#[tokio::test]
async fn a_stop_reason_with_a_text_block_never_closed_is_accepted_after_one_request() {
    let server = serve_fixtures(
        ENDPOINT,
        &[
            "anthropic/open_block_at_end.sse",
            "anthropic/text_and_tool.sse",
        ],
    )
    .await;
    let (got, _) = complete(&server, &request(vec![Message::user("test")], None)).await;
    assert_eq!(
        got,
        ModelResponse {
            text: "Done".into(),
            ..response("end_turn", Stop::Done, usage(10, 9))
        }
    );
    assert_eq!(bodies(&server).await.len(), 1, "the answer was bought once");
}

#[tokio::test]
async fn a_refusal_keeps_the_providers_stop_details_verbatim() {
    let server = serve_fixtures(ENDPOINT, &["anthropic/refusal_stop_details.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("do harm")], None)).await;
    let explanation = "This request was declined because it asks for working malware.";
    let want = ModelResponse {
        model: "claude-opus-4-5-20251101".into(),
        refusal: Some(explanation.into()),
        stop_details: Some(
            json!({"type": "refusal", "category": "cyber", "explanation": explanation}),
        ),
        ..response("refusal", Stop::Refused, usage(873, 0))
    };
    assert_eq!(got, want);
}
