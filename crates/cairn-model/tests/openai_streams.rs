//! Real-shaped OpenAI-compatible streams (`tests/fixtures/openai/`) through a
//! mock server: the whole response that comes out, what the next request
//! carries, and how many requests were made.

mod common;

use cairn_model::{
    Message, ModelRequest, ModelResponse, OpenAiProvider, Provider, Reasoning, Stop, ToolCall,
    Usage,
};
use common::{bodies, fast_config, results_for, serve_fixtures, tool, Recorder};
use serde_json::{json, Value};
use wiremock::MockServer;

const ENDPOINT: &str = "/v1/chat/completions";

fn provider(server: &MockServer) -> OpenAiProvider {
    OpenAiProvider::new(
        "gpt-test",
        Some(&server.uri()),
        Some("sk-test".into()),
        &fast_config(4),
    )
    .unwrap()
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        turn: 1,
        messages,
        tools: ["read_file", "write_file", "list_dir", "shell"]
            .into_iter()
            .map(tool)
            .collect(),
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

fn response(model: &str, reason: &str, stop: Stop, usage: Usage) -> ModelResponse {
    ModelResponse {
        model: model.into(),
        stop_reason: Some(reason.into()),
        stop,
        usage: Some(usage),
        ..ModelResponse::default()
    }
}

/// Sends `request` to a server answering with `fixtures` in turn.
async fn complete(server: &MockServer, request: &ModelRequest) -> (ModelResponse, Recorder) {
    let mut sink = Recorder::default();
    let response = provider(server).complete(request, &mut sink).await.unwrap();
    (response, sink)
}

const TEXT: &str = "Grüße, from the 日本 team 🚀.";

fn text_response() -> ModelResponse {
    ModelResponse {
        text: TEXT.into(),
        ..response("gpt-4.1-2025-04-14", "stop", Stop::Done, usage(19, 10))
    }
}

#[tokio::test]
async fn plain_text_with_a_usage_only_final_chunk() {
    let server = serve_fixtures(ENDPOINT, &["openai/text.sse"]).await;
    let (got, sink) = complete(&server, &request(vec![Message::user("hi")])).await;
    assert_eq!(got, text_response());
    assert_eq!(
        sink.deltas,
        ["Grüße", ", from", " the 日本", " team 🚀", "."]
    );
    assert_eq!(bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn parallel_tool_calls_are_assembled_in_index_order() {
    let server = serve_fixtures(ENDPOINT, &["openai/parallel_tool_calls.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("look")])).await;
    let want = ModelResponse {
        tool_calls: vec![
            spelled(
                call(
                    "call_Xq81ZpVtB0",
                    "read_file",
                    json!({"path": "src/lib.rs"}),
                ),
                r#"{"path": "src/lib.rs"}"#,
            ),
            spelled(
                call("call_Hm3c7Rk2uL", "list_dir", json!({"path": "crates/é"})),
                r#"{"path": "crates/é"}"#,
            ),
        ],
        ..response(
            "gpt-4.1-2025-04-14",
            "tool_calls",
            Stop::ToolUse,
            usage(84, 51),
        )
    };
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_streamed_refusal_is_recorded_as_a_refusal_not_an_empty_answer() {
    let server = serve_fixtures(ENDPOINT, &["openai/refusal.sse"]).await;
    let (got, sink) = complete(&server, &request(vec![Message::user("do harm")])).await;
    let want = ModelResponse {
        refusal: Some("I’m sorry, but I can’t help with that.".into()),
        ..response("gpt-4.1-2025-04-14", "stop", Stop::Refused, usage(27, 12))
    };
    assert_eq!(got, want);
    assert!(sink.deltas.is_empty(), "a refusal is not text: {sink:?}");
}

#[tokio::test]
async fn length_inside_tool_arguments_is_truncated_and_keeps_them_as_received() {
    let partial = r#"{"path": "notes.txt", "content": "line one\nline tw"#;
    let server = serve_fixtures(
        ENDPOINT,
        &["openai/length_in_tool_call.sse", "openai/text.sse"],
    )
    .await;
    let first = request(vec![Message::user("write notes")]);
    let (got, _) = complete(&server, &first).await;
    let want = ModelResponse {
        text: "I'll write the file.".into(),
        tool_calls: vec![call("call_W9e2Lk5sQa", "write_file", json!(partial))],
        ..response(
            "gpt-4.1-2025-04-14",
            "length",
            Stop::Truncated,
            usage(40, 32),
        )
    };
    assert_eq!(got, want);

    // What the model said goes back as it said it.
    let mut next = first.clone();
    next.messages.push(got.to_message());
    next.messages
        .extend(results_for(&got, "not run: the call was cut off"));
    complete(&server, &next).await;
    let sent = &bodies(&server).await[1]["messages"][1];
    assert_eq!(
        sent["tool_calls"][0]["function"]["arguments"],
        json!(partial)
    );
}

#[tokio::test]
async fn length_right_after_a_tool_name_leaves_no_runnable_call() {
    let server = serve_fixtures(ENDPOINT, &["openai/length_after_tool_name.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("go")])).await;
    let want = ModelResponse {
        tool_calls: vec![
            spelled(
                call("call_Rd0a", "read_file", json!({"path": "a.txt"})),
                r#"{"path": "a.txt"}"#,
            ),
            call("call_Wr1b", "write_file", json!("")),
        ],
        ..response(
            "gpt-4.1-2025-04-14",
            "length",
            Stop::Truncated,
            usage(40, 16),
        )
    };
    assert_eq!(got, want);
}

#[tokio::test]
async fn deepseek_reasoning_content_is_kept_and_sent_back_for_its_tool_round() {
    let reasoning = "The user wants the size of Cargo.toml — read it first.";
    let server = serve_fixtures(
        ENDPOINT,
        &["openai/reasoning_content_tool_call.sse", "openai/text.sse"],
    )
    .await;
    let first = request(vec![Message::user("how big is Cargo.toml?")]);
    let (got, sink) = complete(&server, &first).await;
    let want = ModelResponse {
        tool_calls: vec![call(
            "call_00_Q7xw2Lr",
            "read_file",
            json!({"path": "Cargo.toml"}),
        )],
        reasoning: Some(Reasoning {
            text: reasoning.into(),
            field: Some("reasoning_content".into()),
            details: vec![],
        }),
        ..response(
            "deepseek-v4-pro",
            "tool_calls",
            Stop::ToolUse,
            usage(312, 57),
        )
    };
    assert_eq!(got, want);
    assert!(sink.deltas.is_empty(), "reasoning is not text: {sink:?}");

    let mut second = first.clone();
    second.messages.push(got.to_message());
    second.messages.extend(results_for(&got, "412 bytes"));
    let (answer, _) = complete(&server, &second).await;
    let mut third = second.clone();
    third.messages.push(answer.to_message());
    third.messages.push(Message::user("and Cargo.lock?"));
    complete(&server, &third).await;

    let sent = bodies(&server).await;
    let tool_turn = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{"id": "call_00_Q7xw2Lr", "type": "function",
                        "function": {"name": "read_file", "arguments": "{\"path\":\"Cargo.toml\"}"}}],
        "reasoning_content": reasoning,
    });
    assert_eq!(sent[1]["messages"][1], tool_turn, "in the tool loop");
    assert_eq!(sent[2]["messages"][1], tool_turn, "in every later request");
    assert_eq!(
        sent[2]["messages"][3],
        json!({"role": "assistant", "content": TEXT}),
        "the answer streamed no reasoning and called no tool"
    );
}

#[tokio::test]
async fn openrouter_reasoning_details_are_merged_and_sent_back_as_received() {
    let server = serve_fixtures(
        ENDPOINT,
        &["openai/reasoning_details_tool_call.sse", "openai/text.sse"],
    )
    .await;
    let first = request(vec![Message::user("run the tests")]);
    let (got, sink) = complete(&server, &first).await;
    let details = vec![
        json!({"type": "reasoning.text", "text": "Check the tests first — ünïcode.",
               "signature": "ErUBCkYIBxgCKkD3kq9vPz0YtR1aN8mWc4Lx2Jd5Hs7Ke6Gb1Fq3Tn9Uo0Ip2Ml4Zr6Ay8Xw5Cv7Bn1Qm3Sd9Fg0Hj2Kl4",
               "format": "anthropic-claude-v1", "index": 0}),
        json!({"type": "reasoning.encrypted",
               "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qyHBvfEt3zPsL4u2bbk0gTHNnyZ3HeTcvZpyAg==",
               "format": "anthropic-claude-v1", "index": 1}),
    ];
    let want = ModelResponse {
        text: "Running them.".into(),
        tool_calls: vec![spelled(
            call("toolu_01Hk8Zq2", "shell", json!({"command": "cargo test"})),
            r#"{"command": "cargo test"}"#,
        )],
        reasoning: Some(Reasoning {
            text: "Check the tests first — ünïcode.".into(),
            field: Some("reasoning".into()),
            details: details.clone(),
        }),
        ..response(
            "anthropic/claude-sonnet-4.5",
            "tool_calls",
            Stop::ToolUse,
            usage(1204, 96),
        )
    };
    assert_eq!(got, want);
    assert_eq!(sink.deltas.concat(), "Running them.");

    let mut next = first.clone();
    next.messages.push(got.to_message());
    next.messages.extend(results_for(&got, "ok"));
    complete(&server, &next).await;
    let sent = &bodies(&server).await[1]["messages"][1];
    // The arguments go back as the model wrote them, spaces included.
    assert_eq!(
        *sent,
        json!({
            "role": "assistant",
            "content": "Running them.",
            "tool_calls": [{"id": "toolu_01Hk8Zq2", "type": "function",
                            "function": {"name": "shell", "arguments": "{\"command\": \"cargo test\"}"}}],
            "reasoning_details": details,
        })
    );
}

#[tokio::test]
async fn reasoning_text_is_kept_but_not_sent_back_after_a_round_without_tools() {
    let server = serve_fixtures(
        ENDPOINT,
        &["openai/reasoning_field_text.sse", "openai/text.sse"],
    )
    .await;
    let first = request(vec![Message::user("17 times 3?")]);
    let (got, sink) = complete(&server, &first).await;
    let want = ModelResponse {
        text: "17 × 3 = 51.".into(),
        reasoning: Some(Reasoning {
            text: "Simple arithmetic: 17 × 3 = 51.".into(),
            field: Some("reasoning".into()),
            details: vec![],
        }),
        ..response("openai/gpt-oss-20b", "stop", Stop::Done, usage(88, 29))
    };
    assert_eq!(got, want);
    assert_eq!(sink.deltas.concat(), "17 × 3 = 51.");

    let mut next = first.clone();
    next.messages.push(got.to_message());
    next.messages.push(Message::user("and 18 times 3?"));
    complete(&server, &next).await;
    assert_eq!(
        bodies(&server).await[1]["messages"][1],
        json!({"role": "assistant", "content": "17 × 3 = 51."})
    );
}

#[tokio::test]
async fn an_azure_prompt_filter_chunk_without_choices_changes_nothing() {
    let server = serve_fixtures(ENDPOINT, &["openai/azure_prompt_filter.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("salut")])).await;
    let want = ModelResponse {
        text: "Bonjour à tous.".into(),
        ..response("gpt-4o-2024-11-20", "stop", Stop::Done, usage(15, 4))
    };
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_content_filter_finish_is_filtered() {
    let server = serve_fixtures(ENDPOINT, &["openai/azure_content_filter_stop.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("a story")])).await;
    let want = ModelResponse {
        text: "The scene opens".into(),
        ..response(
            "gpt-4o-2024-11-20",
            "content_filter",
            Stop::Filtered,
            usage(15, 3),
        )
    };
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_complete_stream_without_done_is_accepted_after_one_request() {
    let server = serve_fixtures(ENDPOINT, &["openai/no_done_marker.sse"]).await;
    let (got, sink) = complete(&server, &request(vec![Message::user("hi")])).await;
    assert_eq!(got, text_response());
    assert_eq!(sink.restarts, 0);
    assert_eq!(bodies(&server).await.len(), 1, "the answer was bought once");
}

#[tokio::test]
async fn a_done_marker_without_its_blank_line_is_accepted_after_one_request() {
    let server = serve_fixtures(ENDPOINT, &["openai/done_without_blank_line.sse"]).await;
    let (got, _) = complete(&server, &request(vec![Message::user("hi")])).await;
    assert_eq!(got, text_response());
    assert_eq!(bodies(&server).await.len(), 1, "the answer was bought once");
}

#[tokio::test]
async fn a_stream_ending_after_its_finish_reason_is_bought_once_with_usage_unknown() {
    let server = serve_fixtures(
        ENDPOINT,
        &["openai/cut_before_usage.sse", "openai/text.sse"],
    )
    .await;
    let (got, sink) = complete(&server, &request(vec![Message::user("hi")])).await;
    assert_eq!(
        got,
        ModelResponse {
            usage: None,
            ..text_response()
        }
    );
    assert_eq!((sink.restarts, sink.deltas.concat()), (0, TEXT.to_owned()));
    assert_eq!(bodies(&server).await.len(), 1, "the answer was bought once");
}

#[tokio::test]
async fn length_inside_tool_arguments_without_a_usage_chunk_is_complete_and_bought_once() {
    // A server that ignores `stream_options.include_usage` (llama.cpp, older
    // vLLM), ending with `[DONE]` or with the finish chunk itself.
    let partial = r#"{"path": "notes.txt", "content": "alpha\nbe"#;
    for fixture in [
        "openai/length_in_tool_call_no_usage.sse",
        "openai/length_in_tool_call_eof.sse",
    ] {
        let server = serve_fixtures(ENDPOINT, &[fixture, "openai/text.sse"]).await;
        let (got, sink) = complete(&server, &request(vec![Message::user("notes")])).await;
        let want = ModelResponse {
            text: "Writing it now.".into(),
            tool_calls: vec![call("call_M3pQ7vXa", "write_file", json!(partial))],
            model: "gpt-oss-20b".into(),
            stop_reason: Some("length".into()),
            stop: Stop::Truncated,
            usage: None,
            ..ModelResponse::default()
        };
        assert_eq!(got, want, "{fixture}");
        assert_eq!(sink.restarts, 0, "{fixture}");
        assert_eq!(bodies(&server).await.len(), 1, "{fixture}: bought once");
    }
}

#[tokio::test]
async fn usage_is_read_where_groq_and_moonshot_put_it() {
    let rows = [
        (
            "openai/groq_usage_in_x_groq.sse",
            "moonshotai/kimi-k2-instruct-0905",
            "Oi!",
            usage(20, 3),
        ),
        (
            "openai/moonshot_usage_in_choice.sse",
            "kimi-k2-turbo-preview",
            "你好，李雷！",
            usage(19, 13),
        ),
    ];
    for (fixture, model, text, reported) in rows {
        let server = serve_fixtures(ENDPOINT, &[fixture]).await;
        let (got, _) = complete(&server, &request(vec![Message::user("hi")])).await;
        let want = ModelResponse {
            text: text.into(),
            ..response(model, "stop", Stop::Done, reported)
        };
        assert_eq!(got, want, "{fixture}");
    }
}

#[tokio::test]
async fn several_choices_are_refused_and_not_bought_again() {
    let server = serve_fixtures(ENDPOINT, &["openai/n_choices.sse", "openai/text.sse"]).await;
    let error = provider(&server)
        .complete(
            &request(vec![Message::user("a colour")]),
            &mut Recorder::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            cairn_model::ModelError::SeveralChoices { index: 1, .. }
        ),
        "{error:?}"
    );
    let shown = error.to_string();
    assert!(
        shown.contains("more than one choice") && shown.contains("`n`"),
        "{shown}"
    );
    assert_eq!(bodies(&server).await.len(), 1, "not bought again");
}
