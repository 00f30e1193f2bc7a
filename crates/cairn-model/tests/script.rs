//! The script provider: turns by index, and clear errors for bad scripts.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_model::{
    provider_from_spec, Message, ModelError, ModelRequest, ModelResponse, ModelSpec,
    ProviderConfig, Reasoning, ScriptProvider, Stop, Thinking, ToolCall, Usage,
};
use common::Recorder;
use serde_json::json;

const SCRIPT: &str = r#"{"turns": [
    {"text": "I will list the files.", "tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}], "usage": {"input_tokens": 10, "output_tokens": 4}},
    {"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}, {"id": "c3", "name": "read_file"}]},
    {"text": "Done."}
]}"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn turn(n: u64) -> ModelRequest {
    ModelRequest {
        turn: n,
        messages: vec![Message::user("go")],
        ..ModelRequest::default()
    }
}

#[tokio::test]
async fn replays_turns_by_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "turns.json", SCRIPT);
    let spec: ModelSpec = format!("script:{}", path.display()).parse().unwrap();
    let provider = provider_from_spec(&spec, None, &ProviderConfig::default()).unwrap();
    assert_eq!(provider.kind(), "script");
    assert_eq!(provider.base_url(), None);
    let model = path.display().to_string();

    let mut sink = Recorder::default();
    let first = provider.complete(&turn(1), &mut sink).await.unwrap();
    assert_eq!(sink.deltas, ["I ", "will ", "list ", "the ", "files."]);
    assert_eq!(
        first,
        ModelResponse {
            text: "I will list the files.".into(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "list_dir".into(),
                arguments: json!({"path": "."}),
                raw_arguments: None,
            }],
            usage: Some(Usage {
                input_tokens: 10,
                output_tokens: 4
            }),
            model: model.clone(),
            stop_reason: Some("tool_use".into()),
            stop: cairn_model::Stop::ToolUse,
            ..ModelResponse::default()
        }
    );

    let third = provider
        .complete(&turn(3), &mut Recorder::default())
        .await
        .unwrap();
    assert_eq!(
        third,
        ModelResponse {
            text: "Done.".into(),
            tool_calls: vec![],
            usage: Some(Usage::default()),
            model: model.clone(),
            stop_reason: Some("end_turn".into()),
            stop: cairn_model::Stop::Done,
            ..ModelResponse::default()
        }
    );

    let second = provider
        .complete(&turn(2), &mut Recorder::default())
        .await
        .unwrap();
    assert_eq!(
        second.tool_calls,
        vec![
            ToolCall {
                id: "call_2_1".into(),
                name: "shell".into(),
                arguments: json!({"command": "ls"}),
                raw_arguments: None,
            },
            ToolCall {
                id: "c3".into(),
                name: "read_file".into(),
                arguments: json!({}),
                raw_arguments: None,
            },
        ]
    );
}

#[tokio::test]
async fn streams_with_a_delay_between_words() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "turns.json", SCRIPT);
    let provider = ScriptProvider::open(&path, Duration::from_millis(1)).unwrap();
    assert_eq!(provider.turns(), 3);
    let mut text = String::new();
    cairn_model::Provider::complete(&provider, &turn(1), &mut text)
        .await
        .unwrap();
    assert_eq!(text, "I will list the files.");
}

#[tokio::test]
async fn past_the_end_names_the_file_and_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "turns.json", SCRIPT);
    let provider = ScriptProvider::open(&path, Duration::ZERO).unwrap();
    let error = cairn_model::Provider::complete(&provider, &turn(4), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::ScriptExhausted { turn: 4, turns: 3, path: p } if *p == path),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(
        message.contains("has 3 turn(s) but turn 4 was requested"),
        "{message}"
    );

    let zero = cairn_model::Provider::complete(&provider, &turn(0), &mut Recorder::default())
        .await
        .unwrap_err();
    assert!(matches!(zero, ModelError::InvalidRequest { .. }), "{zero}");
}

#[test]
fn malformed_scripts_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        ("{\"turns\": [", "EOF while parsing"),
        (
            "{\"turns\": [{\"text\": 5}]}",
            "invalid type: integer `5`, expected a string",
        ),
        ("{\"steps\": []}", "missing field `turns`"),
        (
            "{\"turns\": [{\"text\": \"x\", \"tool_call\": []}]}",
            "unknown field `tool_call`",
        ),
        (
            "{\"turns\": [{\"tool_calls\": [{\"id\": \"c\"}]}]}",
            "missing field `name`",
        ),
        (
            "{\"turns\": [{\"thinking\": [{\"type\": \"thoughts\"}]}]}",
            "unknown variant `thoughts`",
        ),
    ];
    for (n, (text, want)) in rows.into_iter().enumerate() {
        let path = write(dir.path(), &format!("bad{n}.json"), text);
        let error = ScriptProvider::open(&path, Duration::ZERO).unwrap_err();
        assert!(matches!(error, ModelError::ScriptParse { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains(want), "{text}: {message}");
        assert!(message.contains("line 1"), "{message}");
    }
}

#[test]
fn a_missing_script_names_its_path() {
    let spec: ModelSpec = "script:/nonexistent/turns.json".parse().unwrap();
    let error = provider_from_spec(&spec, None, &ProviderConfig::default())
        .err()
        .unwrap();
    assert!(matches!(error, ModelError::ScriptRead { .. }), "{error}");
    assert!(
        error.to_string().contains("/nonexistent/turns.json"),
        "{error}"
    );
}

#[tokio::test]
async fn turns_can_say_how_they_stopped_and_what_came_beside_the_text() {
    let script = r#"{"turns": [
        {"text": "Writing.", "tool_calls": [{"id": "w", "name": "write_file", "arguments": "{\"path\": \"a"}],
         "stop_reason": "max_tokens"},
        {"refusal": "I can't help with that."},
        {"text": "No.", "stop_reason": "refusal"},
        {"text": "Filtered", "stop_reason": "content_filter"},
        {"text": "Thought about it.",
         "thinking": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                      {"type": "redacted_thinking", "data": "enc"}],
         "reasoning": {"text": "r", "field": "reasoning_content",
                       "details": [{"type": "reasoning.text", "text": "r", "index": 0}]}}
    ]}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "turns.json", script);
    let provider = ScriptProvider::open(&path, Duration::ZERO).unwrap();
    let mut got = Vec::new();
    for n in 1..=5 {
        got.push(
            cairn_model::Provider::complete(&provider, &turn(n), &mut Recorder::default())
                .await
                .unwrap(),
        );
    }
    let model = path.display().to_string();
    let base = |reason: &str, stop: Stop| ModelResponse {
        model: model.clone(),
        stop_reason: Some(reason.into()),
        stop,
        usage: Some(Usage::default()),
        ..ModelResponse::default()
    };
    let thinking = vec![
        Thinking::Thinking {
            thinking: "hm".into(),
            signature: "sig".into(),
        },
        Thinking::RedactedThinking { data: "enc".into() },
    ];
    let reasoning = Reasoning {
        text: "r".into(),
        field: Some("reasoning_content".into()),
        details: vec![json!({"type": "reasoning.text", "text": "r", "index": 0})],
    };
    let want = vec![
        ModelResponse {
            text: "Writing.".into(),
            tool_calls: vec![ToolCall {
                id: "w".into(),
                name: "write_file".into(),
                arguments: json!("{\"path\": \"a"),
                raw_arguments: None,
            }],
            ..base("max_tokens", Stop::Truncated)
        },
        ModelResponse {
            refusal: Some("I can't help with that.".into()),
            ..base("refusal", Stop::Refused)
        },
        ModelResponse {
            text: "No.".into(),
            refusal: Some("No.".into()),
            ..base("refusal", Stop::Refused)
        },
        ModelResponse {
            text: "Filtered".into(),
            ..base("content_filter", Stop::Filtered)
        },
        ModelResponse {
            text: "Thought about it.".into(),
            thinking: thinking.clone(),
            reasoning: Some(reasoning.clone()),
            ..base("end_turn", Stop::Done)
        },
    ];
    assert_eq!(got, want);
    assert_eq!(
        got[4].to_message(),
        Message::Assistant {
            text: "Thought about it.".into(),
            tool_calls: vec![],
            thinking,
            reasoning: Some(reasoning),
            items: Vec::new(),
        }
    );
}
