use super::*;

#[test]
fn thinking_maps_to_reasoning_effort() {
    let rows = [
        (None, None),
        (Some("off"), None),
        (Some("on"), Some("medium")),
        (Some("High"), Some("high")),
        (Some("low"), Some("low")),
    ];
    for (thinking, want) in rows {
        assert_eq!(reasoning_effort(thinking).as_deref(), want, "{thinking:?}");
    }
}

#[test]
fn max_tokens_field_depends_on_the_host() {
    let request = ModelRequest {
        max_output_tokens: Some(100),
        ..ModelRequest::default()
    };
    let official = chat_body("m", &request, true);
    assert_eq!(official["max_completion_tokens"], json!(100));
    assert!(official.get("max_tokens").is_none());
    let local = chat_body("m", &request, false);
    assert_eq!(local["max_tokens"], json!(100));
}

#[test]
fn base_urls_are_normalised() {
    let config = ProviderConfig::default();
    let rows = [
        (None, "https://api.openai.com/v1"),
        (Some("http://localhost:11434"), "http://localhost:11434/v1"),
        (Some("http://localhost:11434/"), "http://localhost:11434/v1"),
        (
            Some("http://localhost:8000/v1/"),
            "http://localhost:8000/v1",
        ),
        (
            Some("https://openrouter.ai/api/v1"),
            "https://openrouter.ai/api/v1",
        ),
    ];
    for (given, want) in rows {
        let provider = OpenAiProvider::new("m", given, Some("k".into()), &config).unwrap();
        assert_eq!(provider.base_url(), Some(want));
        assert_eq!(provider.endpoint, format!("{want}/chat/completions"));
    }
}

#[test]
fn a_key_is_needed_only_for_the_official_host() {
    let config = ProviderConfig::default();
    let err = OpenAiProvider::new("m", None, None, &config).unwrap_err();
    assert!(err.to_string().starts_with("OPENAI_API_KEY is not set"));
    let local = OpenAiProvider::new("m", Some("http://127.0.0.1:1/v1"), None, &config);
    assert!(local.is_ok());
    let debug = format!(
        "{:?}",
        OpenAiProvider::new("m", None, Some("sk-secret".into()), &config).unwrap()
    );
    assert!(!debug.contains("sk-secret"), "{debug}");
}

fn assistant(calls: bool, reasoning: Option<Reasoning>) -> Message {
    let tool_calls = if calls {
        vec![crate::ToolCall {
            id: "c".into(),
            name: "read_file".into(),
            arguments: json!({}),
            raw_arguments: None,
        }]
    } else {
        Vec::new()
    };
    Message::Assistant {
        text: "t".into(),
        tool_calls,
        thinking: Vec::new(),
        reasoning,
        items: Vec::new(),
    }
}

fn text(field: &str, text: &str) -> Option<Reasoning> {
    Some(Reasoning {
        text: text.into(),
        field: Some(field.into()),
        details: Vec::new(),
    })
}

fn result() -> Message {
    Message::ToolResult {
        call_id: "c".into(),
        name: "read_file".into(),
        output: "x".into(),
        is_error: false,
    }
}

/// The reasoning keys and values one assistant message is sent with.
type Sent = Vec<(String, Value)>;

/// The reasoning keys each assistant message is sent with.
fn reasoning_sent(messages: &[Message]) -> Vec<Sent> {
    chat_messages(messages)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| {
            let fields = ["reasoning_content", "reasoning", "reasoning_details"];
            fields
                .into_iter()
                .filter_map(|f| m.get(f).map(|v| (f.to_owned(), v.clone())))
                .collect()
        })
        .collect()
}

#[test]
fn reasoning_goes_back_in_rounds_with_tool_calls_and_details_always() {
    let rc = |t: &str| vec![("reasoning_content".to_owned(), json!(t))];
    let details = vec![json!({"type": "reasoning.encrypted", "data": "x", "index": 0})];
    let with_details = Some(Reasoning {
        text: "seen".into(),
        field: Some("reasoning".into()),
        details: details.clone(),
    });
    let rows: Vec<(Vec<Message>, Vec<Sent>)> = vec![
        // DeepSeek: every message of a tool-calling round, in every later
        // request; none in a round without tools; an empty field for a tool
        // call that streamed no reasoning.
        (
            vec![
                Message::user("q1"),
                assistant(true, text("reasoning_content", "r1")),
                result(),
                assistant(false, text("reasoning_content", "r2")),
                Message::user("q2"),
                assistant(false, text("reasoning_content", "r3")),
                Message::user("q3"),
                assistant(true, None),
                result(),
            ],
            vec![rc("r1"), rc("r2"), vec![], rc("")],
        ),
        // `reasoning` (gpt-oss servers, OpenRouter without details): the same
        // rounds, and no empty field for a call without reasoning.
        (
            vec![
                Message::user("q"),
                assistant(true, text("reasoning", "x")),
                result(),
                assistant(true, None),
                result(),
            ],
            vec![vec![("reasoning".to_owned(), json!("x"))], vec![]],
        ),
        // Details go back as they came, on every message, instead of the text.
        (
            vec![
                Message::user("q"),
                assistant(false, with_details),
                Message::user("q2"),
            ],
            vec![vec![(
                "reasoning_details".to_owned(),
                Value::Array(details),
            )]],
        ),
        // A recorded field name other than the two reasoning fields is not
        // used: it could overwrite the message's own fields.
        (
            vec![
                Message::user("q"),
                assistant(true, text("content", "x")),
                result(),
            ],
            vec![vec![]],
        ),
        // Reasoning text without a field name is not sent: no name to use.
        (
            vec![
                Message::user("q"),
                assistant(
                    true,
                    Some(Reasoning {
                        text: "x".into(),
                        ..Reasoning::default()
                    }),
                ),
                result(),
            ],
            vec![vec![]],
        ),
    ];
    for (n, (messages, want)) in rows.into_iter().enumerate() {
        assert_eq!(reasoning_sent(&messages), want, "row {n}");
    }
}

#[test]
fn tool_rounds_split_at_user_messages() {
    let messages = [
        assistant(false, None),
        Message::user("a"),
        assistant(true, None),
        result(),
        Message::user("b"),
        assistant(false, None),
    ];
    assert_eq!(
        tool_rounds(&messages),
        [false, false, true, true, false, false]
    );
    assert!(tool_rounds(&[]).is_empty());
}

mod decoding {
    use super::*;
    use crate::http::Decoder;
    use crate::message::Stop;
    use crate::sse::SseEvent;

    fn decode(chunks: &[Value]) -> ModelResponse {
        let mut decoder = ChatDecoder::new("m");
        let mut sink = String::new();
        for chunk in chunks {
            let event = SseEvent {
                event: "message".into(),
                data: chunk.to_string(),
            };
            assert!(decoder.event(event, &mut sink).is_ok());
        }
        decoder.finish()
    }

    fn delta(delta: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    }

    fn finish(reason: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    }

    #[test]
    fn reasoning_details_merge_by_index() {
        let got = decode(&[
            delta(json!({"reasoning_details": [
                {"type": "reasoning.text", "text": "a", "signature": null, "format": "f", "index": 0}]})),
            delta(json!({"reasoning_details": [
                {"type": "reasoning.text", "text": "b", "signature": null, "format": "f", "index": 0},
                {"type": "reasoning.summary", "summary": "s", "index": 1}]})),
            delta(json!({"reasoning_details": [
                {"type": "reasoning.text", "signature": "si", "index": 0},
                {"summary": "t", "id": null, "index": 1}]})),
            delta(json!({"reasoning_details": [{"signature": "g", "id": "r1", "index": 0}]})),
        ]);
        let details = got.reasoning.unwrap().details;
        assert_eq!(
            details,
            [
                json!({"type": "reasoning.text", "text": "ab", "signature": "sig", "format": "f", "index": 0, "id": "r1"}),
                json!({"type": "reasoning.summary", "summary": "st", "id": null, "index": 1}),
            ]
        );
    }

    #[test]
    fn a_server_sending_both_reasoning_fields_is_read_once() {
        let got = decode(&[
            delta(json!({"reasoning_content": null, "reasoning": null})),
            delta(json!({"reasoning_content": "same", "reasoning": "same"})),
            delta(json!({"reasoning_content": " text", "reasoning": " text"})),
        ]);
        assert_eq!(
            got.reasoning,
            Some(Reasoning {
                text: "same text".into(),
                field: Some("reasoning_content".into()),
                details: vec![],
            })
        );
        let none = decode(&[delta(json!({"reasoning": "", "content": "hi"}))]);
        assert_eq!(none.reasoning, None);
    }

    #[test]
    fn refusal_and_stop_follow_the_rules() {
        // (chunks, stop, refusal)
        let rows: Vec<(Vec<Value>, Stop, Option<&str>)> = vec![
            (
                vec![delta(json!({"refusal": ""})), finish("stop")],
                Stop::Done,
                None,
            ),
            (
                vec![delta(json!({"refusal": "no"})), finish("length")],
                Stop::Refused,
                Some("no"),
            ),
            (
                vec![delta(json!({"content": "I won't."})), finish("refusal")],
                Stop::Refused,
                Some("I won't."),
            ),
            (
                vec![finish("refusal")],
                Stop::Refused,
                Some(crate::REFUSAL_WITHOUT_TEXT),
            ),
            (vec![finish("content_filter")], Stop::Filtered, None),
            (vec![finish("length")], Stop::Truncated, None),
            (vec![finish("something_new")], Stop::Unknown, None),
            (vec![delta(json!({"content": "x"}))], Stop::Unknown, None),
        ];
        for (n, (chunks, stop, refusal)) in rows.into_iter().enumerate() {
            let got = decode(&chunks);
            assert_eq!(
                (got.stop, got.refusal.as_deref()),
                (stop, refusal),
                "row {n}"
            );
        }
    }

    /// A finish reason ends the answer; the usage is accounting, not part of
    /// it (a stream without it is whole, its cost unknown).
    #[test]
    fn complete_needs_a_finish_reason_not_the_usage() {
        let usage = json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}});
        let rows = [
            (vec![], false),
            (vec![finish("stop")], true),
            (vec![usage.clone()], false),
            (vec![finish("stop"), usage.clone()], true),
            (vec![usage, finish("tool_calls")], true),
        ];
        for (n, (chunks, want)) in rows.into_iter().enumerate() {
            let mut decoder = ChatDecoder::new("m");
            for chunk in chunks {
                let event = SseEvent {
                    event: "message".into(),
                    data: chunk.to_string(),
                };
                assert!(decoder.event(event, &mut String::new()).is_ok());
            }
            assert_eq!(decoder.complete(), want, "row {n}");
        }
    }
}

#[test]
fn a_recorded_field_name_cannot_overwrite_the_message() {
    let messages = [
        Message::user("q"),
        assistant(true, text("content", "injected")),
        result(),
    ];
    let sent = chat_messages(&messages);
    assert_eq!(sent[1]["content"], json!("t"));
    assert_eq!(sent[1].as_object().unwrap().len(), 3, "{}", sent[1]);
}
