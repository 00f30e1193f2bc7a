use serde_json::{json, Value};

use super::*;
use crate::message::ToolSpec;

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        turn: 1,
        system: Some("Be brief.".into()),
        messages,
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_output_tokens: Some(2000),
        thinking: Some("on".into()),
    }
}

fn result(call_id: &str, output: &str) -> Message {
    Message::ToolResult {
        call_id: call_id.into(),
        name: "read_file".into(),
        output: output.into(),
        is_error: false,
    }
}

#[test]
fn every_request_is_stateless_and_asks_for_encrypted_reasoning() {
    let body = responses_body("gpt-5", &request(vec![Message::user("hi")]));
    assert_eq!(
        body,
        json!({
            "model": "gpt-5",
            "instructions": "Be brief.",
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            "tools": [{"type": "function", "name": "read_file", "description": "Read a file",
                       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                       "strict": false}],
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "max_output_tokens": 2000,
            "reasoning": {"effort": "medium", "summary": "auto"},
        })
    );
    let plain = ModelRequest {
        messages: vec![Message::user("hi")],
        ..ModelRequest::default()
    };
    let body = responses_body("gpt-5", &plain);
    for absent in ["instructions", "tools", "max_output_tokens", "reasoning"] {
        assert!(body.get(absent).is_none(), "{absent}: {body}");
    }
    assert_eq!(body["store"], false);
}

#[test]
fn a_turn_goes_back_as_its_items_without_ids_and_results_pair_by_call_id() {
    let reasoning = json!({"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Look first"}],
                           "encrypted_content": "gAAAAB-opaque=="});
    let call = json!({"id": "fc_1", "type": "function_call", "status": "completed",
                      "arguments": "{\"path\": \"a\"}", "call_id": "call_A", "name": "read_file"});
    let cut = json!({"id": "fc_2", "type": "function_call", "status": "incomplete",
                     "arguments": "{\"pa", "call_id": "call_B", "name": "read_file"});
    let turn = Message::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCall::new("call_A", "read_file", json!({"path": "a"}))
            .with_text("{\"path\": \"a\"}")],
        thinking: Vec::new(),
        reasoning: None,
        items: vec![reasoning.clone(), call.clone(), cut],
    };
    let messages = vec![
        Message::user("read a"),
        turn,
        result("call_A", "contents"),
        // cairn's note about the cut call, as a user turn.
        Message::user("cairn: your call was NOT run"),
    ];
    let items = input_items(&messages);
    let without_id = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("id");
        v
    };
    assert_eq!(items[1], without_id(&reasoning));
    assert_eq!(items[2], without_id(&call));
    assert_eq!(
        items[3],
        json!({"type": "function_call_output", "call_id": "call_A", "output": "contents"})
    );
    assert_eq!(items[4]["role"], "user");
    assert_eq!(items.len(), 5, "the call that was not run is left out");
}

#[test]
fn a_turn_from_another_api_goes_back_as_a_message_and_function_calls() {
    let messages = vec![
        Message::user("go"),
        Message::Assistant {
            text: "Reading.".into(),
            tool_calls: vec![
                ToolCall::new("c1", "read_file", json!({"path": "a", "n": 1}))
                    .with_text(r#"{"path": "a", "n": 1}"#),
            ],
            thinking: Vec::new(),
            reasoning: None,
            items: Vec::new(),
        },
        result("c1", "x"),
    ];
    let items = input_items(&messages);
    assert_eq!(
        items[1],
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]})
    );
    assert_eq!(
        items[2],
        json!({"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": r#"{"path": "a", "n": 1}"#})
    );
}
