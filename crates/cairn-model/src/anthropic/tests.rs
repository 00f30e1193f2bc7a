use super::*;
use crate::message::{Thinking, ToolCall, ToolSpec};

fn call(id: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "read_file".into(),
        arguments,
        raw_arguments: None,
    }
}

fn result(id: &str, output: &str, is_error: bool) -> Message {
    Message::ToolResult {
        call_id: id.into(),
        name: "read_file".into(),
        output: output.into(),
        is_error,
    }
}

#[test]
fn conversation_maps_to_merged_blocks() {
    let messages = vec![
        Message::user("read a and b"),
        Message::Assistant {
            thinking: Vec::new(),
            reasoning: None,
            text: String::new(),
            tool_calls: vec![call("t1", json!({"path": "a"})), call("t2", json!("raw"))],
            items: Vec::new(),
        },
        result("t1", "A", false),
        result("t2", "", true),
        Message::user("also: files changed"),
        Message::assistant(""),
        Message::user("go on"),
    ];
    let want = json!([
        {"role": "user", "content": [{"type": "text", "text": "read a and b"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"value": "raw"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "t2", "is_error": true},
            {"type": "text", "text": "also: files changed"},
            {"type": "text", "text": "go on"},
        ]},
    ]);
    assert_eq!(Value::Array(api_messages(&messages)), want);
}

#[test]
fn body_has_required_fields() {
    let request = ModelRequest {
        turn: 1,
        system: Some("be brief".into()),
        messages: vec![Message::user("hi")],
        tools: vec![ToolSpec {
            name: "list_dir".into(),
            description: "List a directory".into(),
            parameters: json!({"type": "object"}),
        }],
        max_output_tokens: None,
        thinking: None,
    };
    let want = json!({
        "model": "claude-x",
        "max_tokens": 8192,
        "stream": true,
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [{"name": "list_dir", "description": "List a directory", "input_schema": {"type": "object"}}],
    });
    assert_eq!(messages_body("claude-x", &request), want);
}

#[test]
fn thinking_budget_fits_below_max_tokens() {
    // (thinking, max_output_tokens, last assistant called tools, max_tokens, budget)
    type Row = (Option<&'static str>, Option<u32>, bool, u32, Option<u32>);
    let rows: [Row; 9] = [
        (None, None, false, 8192, None),
        (Some("off"), None, false, 8192, None),
        (Some("low"), None, false, 8192 + 2048, Some(2048)),
        (Some("on"), None, false, 8192 + 4096, Some(4096)),
        (Some("high"), None, false, 8192 + 8192, Some(8192)),
        (Some("3000"), None, false, 8192 + 3000, Some(3000)),
        (Some("high"), Some(4000), false, 4000, Some(2976)),
        (Some("high"), Some(1500), false, 1500, None),
        (Some("high"), None, true, 8192, None),
    ];
    for (thinking, max, in_tool_loop, want_max, want_budget) in rows {
        let mut messages = vec![Message::user("q")];
        if in_tool_loop {
            messages.push(Message::Assistant {
                thinking: Vec::new(),
                reasoning: None,
                text: String::new(),
                tool_calls: vec![call("t1", json!({}))],
                items: Vec::new(),
            });
            messages.push(result("t1", "x", false));
        }
        let request = ModelRequest {
            messages,
            max_output_tokens: max,
            thinking: thinking.map(str::to_owned),
            ..ModelRequest::default()
        };
        let body = messages_body("m", &request);
        let label = format!("{thinking:?} {max:?} {in_tool_loop}");
        assert_eq!(body["max_tokens"], json!(want_max), "{label}");
        let budget = body
            .get("thinking")
            .map(|t| t["budget_tokens"].as_u64().unwrap() as u32);
        assert_eq!(budget, want_budget, "{label}");
    }
}

#[test]
fn base_urls_are_normalised() {
    let config = ProviderConfig::default();
    let rows = [
        (None, "https://api.anthropic.com"),
        (
            Some("https://api.anthropic.com/v1"),
            "https://api.anthropic.com",
        ),
        (Some("http://127.0.0.1:9/"), "http://127.0.0.1:9"),
        (
            Some("http://proxy:9/anthropic/v1/"),
            "http://proxy:9/anthropic",
        ),
    ];
    for (given, want) in rows {
        let provider = AnthropicProvider::new("m", given, Some("k".into()), &config).unwrap();
        assert_eq!(provider.base_url(), Some(want));
        assert_eq!(provider.endpoint, format!("{want}/v1/messages"));
    }
    let err = AnthropicProvider::new("m", None, None, &config).unwrap_err();
    assert!(err.to_string().starts_with("ANTHROPIC_API_KEY is not set"));
}

fn thought() -> Vec<Thinking> {
    vec![
        Thinking::Thinking {
            thinking: "plan".into(),
            signature: "sig".into(),
        },
        Thinking::RedactedThinking { data: "enc".into() },
    ]
}

fn turn(thinking: Vec<Thinking>, calls: bool) -> Message {
    Message::Assistant {
        text: "t".into(),
        tool_calls: if calls {
            vec![call("t1", json!({}))]
        } else {
            Vec::new()
        },
        thinking,
        reasoning: None,
        items: Vec::new(),
    }
}

#[test]
fn thinking_stays_on_through_a_tool_loop_unless_the_loop_began_without_it() {
    let q = || Message::user("q");
    let done = || result("t1", "x", false);
    // (messages, thinking parameter sent)
    let rows: Vec<(Vec<Message>, bool)> = vec![
        (vec![q()], true),
        // A loop begun with thinking: on, though later turns have no block.
        (vec![q(), turn(thought(), true), done()], true),
        (
            vec![
                q(),
                turn(thought(), true),
                done(),
                turn(vec![], true),
                done(),
            ],
            true,
        ),
        // Text cairn adds beside tool results does not end the loop.
        (
            vec![q(), turn(thought(), true), done(), Message::user("note")],
            true,
        ),
        // A loop begun without thinking (thinking was off): off until it ends.
        (vec![q(), turn(vec![], true), done()], false),
        (
            vec![q(), turn(vec![], true), done(), turn(vec![], true), done()],
            false,
        ),
        (
            vec![q(), turn(vec![], true), done(), Message::user("note")],
            false,
        ),
        // A new user turn may change the configuration.
        (
            vec![q(), turn(vec![], true), done(), turn(vec![], false), q()],
            true,
        ),
        (vec![q(), turn(vec![], false), q()], true),
    ];
    for (n, (messages, want)) in rows.into_iter().enumerate() {
        let request = ModelRequest {
            messages,
            thinking: Some("on".into()),
            ..ModelRequest::default()
        };
        let body = messages_body("m", &request);
        assert_eq!(body.get("thinking").is_some(), want, "row {n}");
        let max = if want { 8192 + 4096 } else { 8192 };
        assert_eq!(body["max_tokens"], json!(max), "row {n}");
    }
}

#[test]
fn thinking_blocks_go_first_and_unmodified() {
    let messages = vec![
        Message::user("q"),
        turn(thought(), true),
        result("t1", "x", false),
        turn(Vec::new(), false),
    ];
    let sent = api_messages(&messages);
    assert_eq!(
        sent[1]["content"],
        json!([
            {"type": "thinking", "thinking": "plan", "signature": "sig"},
            {"type": "redacted_thinking", "data": "enc"},
            {"type": "text", "text": "t"},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}},
        ])
    );
    assert_eq!(sent[3]["content"], json!([{"type": "text", "text": "t"}]));
    // Two assistant messages in a row merge with every thinking block first.
    let merged = api_messages(&[turn(Vec::new(), false), turn(thought(), false)]);
    let kinds: Vec<&str> = merged[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["thinking", "redacted_thinking", "text", "text"]);
}

/// The stop reason ends the answer: a block left open then (what a real
/// `max_tokens` cut inside a `tool_use` block sends) is not waited for.
#[test]
fn complete_needs_message_start_and_a_stop_reason_not_closed_blocks() {
    use crate::http::Decoder;
    use crate::sse::SseEvent;

    let start =
        json!({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}});
    let open = |i: u64| json!({"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": ""}});
    let close = |i: u64| json!({"type": "content_block_stop", "index": i});
    let stop = json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}});
    let rows = [
        (vec![], false),
        (vec![start.clone()], false),
        (vec![stop.clone()], false),
        (vec![start.clone(), stop.clone()], true),
        (vec![start.clone(), open(0), stop.clone()], true),
        (
            vec![start.clone(), open(0), close(0), open(1), stop.clone()],
            true,
        ),
        (
            vec![start.clone(), open(0), close(0), open(1), close(1), stop],
            true,
        ),
        (vec![start.clone(), open(0), close(0)], false),
        (vec![start, open(0)], false),
    ];
    for (n, (events, want)) in rows.into_iter().enumerate() {
        let mut decoder = MessagesDecoder::new("m");
        for data in events {
            let event = SseEvent {
                event: "message".into(),
                data: data.to_string(),
            };
            assert!(decoder.event(event, &mut String::new()).is_ok());
        }
        assert_eq!(decoder.complete(), want, "row {n}");
    }
}

/// Token counts are the server's word, anything up to `u64::MAX`: input
/// and cache counts add up saturating, never wrapping or panicking.
#[test]
fn usage_near_u64_max_saturates() {
    use crate::decode::{decode_stream, Outcome, StreamFormat};

    let max = u64::MAX;
    let rows = [
        // (input, cache creation, cache read) → input counted
        ((max, 0, 0), max),
        ((max - 1, 0, 5), max),
        ((max, max, max), max),
        ((7, max - 3, 3), max),
        ((1, 2, 3), 6),
    ];
    for ((input, created, read), want) in rows {
        let events = [
            json!({"type": "message_start", "message": {"model": "m", "usage": {
                "input_tokens": input, "cache_creation_input_tokens": created,
                "cache_read_input_tokens": read, "output_tokens": max}}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": max}}),
            json!({"type": "message_stop"}),
        ];
        let body: String = events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect();
        match decode_stream(StreamFormat::AnthropicMessages, body.as_bytes(), &[]) {
            Outcome::Response(r, _) => {
                let usage = r.usage.unwrap();
                assert_eq!(usage.input_tokens, want, "{input} {created} {read}");
                assert_eq!(usage.output_tokens, max);
                assert_eq!(usage.total(), max);
            }
            Outcome::Failed(why) => panic!("{input} {created} {read}: {why}"),
        }
    }
}
