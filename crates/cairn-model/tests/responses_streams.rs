//! Responses API streams recorded from api.openai.com
//! (`tests/fixtures/responses/`) through a mock server: the whole response
//! that comes out, what the next request carries (reasoning items with their
//! `encrypted_content`, function-call outputs paired by `call_id`), and how
//! many requests were made.

mod common;

use cairn_model::{
    Message, ModelError, ModelRequest, ModelResponse, OpenAiResponsesProvider, Provider, Reasoning,
    Stop, ToolCall, Usage,
};
use common::{bodies, fast_config, fixture, results_for, serve_fixtures, tool, Recorder};
use serde_json::{json, Value};
use wiremock::MockServer;

const ENDPOINT: &str = "/v1/responses";

fn provider(server: &MockServer) -> OpenAiResponsesProvider {
    OpenAiResponsesProvider::new(
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
        tools: ["read_file", "calculator"].into_iter().map(tool).collect(),
        ..ModelRequest::default()
    }
}

async fn complete(server: &MockServer, request: &ModelRequest) -> (ModelResponse, Recorder) {
    let mut sink = Recorder::default();
    let response = provider(server).complete(request, &mut sink).await.unwrap();
    (response, sink)
}

/// The output of the final event of fixture `name`, as recorded.
fn recorded_output(name: &str) -> Vec<Value> {
    let body = fixture(name);
    let last = body
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    last["response"]["output"].as_array().unwrap().clone()
}

fn without_id(item: &Value) -> Value {
    let mut item = item.clone();
    item.as_object_mut().unwrap().remove("id");
    item
}

#[tokio::test]
async fn a_text_answer_streams_and_keeps_its_message_item() {
    let server = serve_fixtures(ENDPOINT, &["responses/text.sse"]).await;
    let (got, sink) = complete(&server, &request(vec![Message::user("the code?")])).await;
    assert_eq!(sink.deltas, ["blue", "-", "42"]);
    assert_eq!(
        got,
        ModelResponse {
            text: "blue-42".into(),
            usage: Some(Usage {
                input_tokens: 91,
                output_tokens: 7
            }),
            model: "gpt-5.2-2025-12-11".into(),
            stop_reason: Some("completed".into()),
            stop: Stop::Done,
            items: recorded_output("responses/text.sse"),
            ..ModelResponse::default()
        }
    );
    let sent = &bodies(&server).await[0];
    assert_eq!(sent["store"], false);
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        sent["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "the code?"}]}])
    );
    assert_eq!(sent["tools"][0]["strict"], false);
}

#[tokio::test]
async fn a_function_call_is_assembled_and_its_output_goes_back_by_call_id() {
    let server = serve_fixtures(
        ENDPOINT,
        &["responses/function_call.sse", "responses/text.sse"],
    )
    .await;
    let first = request(vec![Message::user("weather in Beijing?")]);
    let (got, sink) = complete(&server, &first).await;
    assert!(sink.deltas.is_empty());
    assert_eq!(
        got.tool_calls,
        [ToolCall::new(
            "call_2FQdm3Br7Qb35YUBSkDR7kue",
            "get_weather",
            json!({"city": "Beijing"})
        )]
    );
    assert_eq!(got.stop, Stop::ToolUse);
    assert_eq!(got.stop_reason.as_deref(), Some("completed"));
    assert_eq!(got.usage.unwrap().total(), 70);

    let mut next = first.clone();
    next.messages.push(got.to_message());
    next.messages.extend(results_for(&got, "sunny, 21 °C"));
    complete(&server, &next).await;
    let sent = &bodies(&server).await[1]["input"];
    let call = &recorded_output("responses/function_call.sse")[0];
    assert_eq!(sent[1], without_id(call));
    assert_eq!(
        sent[2],
        json!({"type": "function_call_output", "call_id": "call_2FQdm3Br7Qb35YUBSkDR7kue", "output": "sunny, 21 °C"})
    );
    assert_eq!(sent.as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn encrypted_reasoning_goes_back_unmodified_across_the_tool_call() {
    let server = serve_fixtures(
        ENDPOINT,
        &[
            "responses/reasoning_encrypted_tool_call.sse",
            "responses/text.sse",
        ],
    )
    .await;
    let first = request(vec![Message::user("(12+7)*3*10?")]);
    let (got, sink) = complete(&server, &first).await;
    assert!(sink.deltas.is_empty(), "reasoning is not text");
    let output = recorded_output("responses/reasoning_encrypted_tool_call.sse");
    // The items of `response.completed`: OpenAI re-encrypts the reasoning
    // between `output_item.added`, `.done` and the final event.
    assert_eq!(got.items, output);
    assert!(output[0]["encrypted_content"]
        .as_str()
        .unwrap()
        .starts_with("gAAAAABpPDIVYBwu"));
    assert_eq!(
        got.reasoning,
        Some(Reasoning {
            text: "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result by 3, and finally multiply that by 10, reporting the final product.".into(),
            ..Reasoning::default()
        })
    );
    assert_eq!(
        got.tool_calls,
        [ToolCall::new(
            "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
            "calculator",
            json!({"a": 12, "b": 7, "op": "add"})
        )]
    );
    assert_eq!(got.model, "gpt-5.1-codex-max");
    assert_eq!(
        got.usage,
        Some(Usage {
            input_tokens: 134,
            output_tokens: 28
        })
    );

    // The loop's next request: the user's message, the reasoning item and
    // the call exactly as received (without ids), the call's output.
    let mut next = first.clone();
    next.messages.push(got.to_message());
    next.messages.extend(results_for(&got, "19"));
    complete(&server, &next).await;
    let sent = bodies(&server).await[1]["input"].clone();
    assert_eq!(
        sent,
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "(12+7)*3*10?"}]},
            without_id(&output[0]),
            without_id(&output[1]),
            {"type": "function_call_output", "call_id": "call_AB6AaRZ1FYZB2RwS6A5vbdqn", "output": "19"},
        ])
    );
}

#[tokio::test]
async fn a_call_cut_by_max_output_tokens_is_kept_as_received_and_not_bought_twice() {
    let server = serve_fixtures(
        ENDPOINT,
        &[
            "responses/incomplete_max_output_tokens.sse",
            "responses/text.sse",
        ],
    )
    .await;
    let first = request(vec![Message::user("weather?")]);
    let (got, _) = complete(&server, &first).await;
    assert_eq!(got.stop, Stop::Truncated);
    assert_eq!(got.stop_reason.as_deref(), Some("max_output_tokens"));
    assert_eq!(got.tool_calls[0].arguments, json!("{\"city\":\"Be"));
    assert_eq!(
        bodies(&server).await.len(),
        1,
        "a cut answer is not bought twice"
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_final_event_is_requested_again() {
    let server = serve_fixtures(
        ENDPOINT,
        &[
            "responses/cut_before_completed.sse",
            "responses/function_call.sse",
        ],
    )
    .await;
    let (got, _) = complete(&server, &request(vec![Message::user("weather?")])).await;
    assert_eq!(got.tool_calls.len(), 1);
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn errors_in_the_stream_fail_or_are_retried_as_their_code_says() {
    let server = serve_fixtures(ENDPOINT, &["responses/error_insufficient_quota.sse"]).await;
    let error = provider(&server)
        .complete(
            &request(vec![Message::user("hi")]),
            &mut Recorder::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Api { kind, .. } if kind == "insufficient_quota"),
        "{error}"
    );
    assert!(error
        .to_string()
        .contains("You exceeded your current quota"));
    assert_eq!(bodies(&server).await.len(), 1, "not retried");

    let server = serve_fixtures(
        ENDPOINT,
        &["responses/failed_rate_limit.sse", "responses/text.sse"],
    )
    .await;
    let (got, _) = complete(&server, &request(vec![Message::user("hi")])).await;
    assert_eq!(got.text, "blue-42");
    assert_eq!(bodies(&server).await.len(), 2, "retried once");
}
