//! What real providers send, read by the gateway's watcher and converted
//! between forms: the shapes of issue 26 (the fixtures are cairn-model's,
//! `crates/cairn-model/tests/fixtures/`, where each one's origin is noted).
//! A response the upstream finished is complete whatever cut it off; the
//! usage is read wherever the provider put it; every answer's end is kept.

use cairn_gateway::{parse_whole, stream_to_whole, Api, Parsed, StreamWatch};
use cairn_journal::{Choice, Usage};
use serde_json::{json, Value};

macro_rules! fixture {
    ($path:literal) => {
        include_bytes!(concat!("../../cairn-model/tests/fixtures/", $path)) as &[u8]
    };
}

/// The watcher's reading of `bytes`, fed whole and then byte by byte (the
/// two must agree).
fn watch(api: Api, bytes: &[u8]) -> Parsed {
    let read = |cuts: &mut dyn Iterator<Item = &[u8]>| {
        let mut w = StreamWatch::new(api);
        for piece in cuts {
            w.feed(piece).unwrap();
        }
        w.finish();
        w.parsed()
    };
    let whole = read(&mut std::iter::once(bytes));
    assert_eq!(read(&mut bytes.chunks(1)), whole, "byte by byte");
    whole
}

fn usage(input_tokens: u64, output_tokens: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens,
        output_tokens,
    })
}

fn ended(index: u64, stop_reason: &str) -> Choice {
    Choice {
        index,
        stop_reason: Some(stop_reason.into()),
        ..Choice::default()
    }
}

#[test]
fn a_tool_call_cut_by_max_tokens_without_its_block_stop_is_a_complete_response() {
    for bytes in [
        fixture!("anthropic/max_tokens_in_open_tool_use.sse"),
        fixture!("anthropic/max_tokens_in_open_tool_use_no_stop.sse"),
    ] {
        let parsed = watch(Api::Messages, bytes);
        assert_eq!(
            parsed,
            Parsed {
                usage: usage(412, 64),
                model: Some("claude-sonnet-4-5-20250929".into()),
                complete: true,
                choices: vec![ended(0, "max_tokens")],
            }
        );
        // Kept, so servable in the other form: the cut input read as the
        // Anthropic SDK reads it from the stream.
        let whole: Value =
            serde_json::from_slice(&stream_to_whole(Api::Messages, bytes).unwrap()).unwrap();
        assert_eq!(whole["stop_reason"], "max_tokens");
        assert_eq!(
            whole["content"][0]["text"],
            "I'll write the report to a file."
        );
        assert_eq!(whole["content"][1]["input"], json!({"path": "report.md"}));
    }
}

#[test]
fn a_chat_stream_cut_by_length_is_complete_with_or_without_its_usage_chunk() {
    let rows = [
        (
            fixture!("openai/length_in_tool_call.sse"),
            usage(40, 32),
            "gpt-4.1-2025-04-14",
        ),
        (
            fixture!("openai/length_in_tool_call_no_usage.sse"),
            None,
            "gpt-oss-20b",
        ),
        (
            fixture!("openai/length_in_tool_call_eof.sse"),
            None,
            "gpt-oss-20b",
        ),
    ];
    for (bytes, reported, model) in rows {
        let parsed = watch(Api::ChatCompletions, bytes);
        assert_eq!(
            parsed,
            Parsed {
                usage: reported,
                model: Some(model.into()),
                complete: true,
                choices: vec![ended(0, "length")],
            },
            "{model}"
        );
        let whole: Value =
            serde_json::from_slice(&stream_to_whole(Api::ChatCompletions, bytes).unwrap()).unwrap();
        assert_eq!(whole["choices"][0]["finish_reason"], "length");
    }
}

#[test]
fn usage_is_read_where_groq_and_moonshot_put_it() {
    let rows = [
        (fixture!("openai/groq_usage_in_x_groq.sse"), usage(20, 3)),
        (
            fixture!("openai/moonshot_usage_in_choice.sse"),
            usage(19, 13),
        ),
        (
            fixture!("openai/reasoning_content_tool_call.sse"),
            usage(312, 57),
        ),
    ];
    for (bytes, want) in rows {
        let parsed = watch(Api::ChatCompletions, bytes);
        assert_eq!(parsed.usage, want);
        assert!(parsed.complete);
        // The whole form keeps the provider's fields, and reads the same.
        let whole = stream_to_whole(Api::ChatCompletions, bytes).unwrap();
        assert_eq!(parse_whole(Api::ChatCompletions, &whole).usage, want);
    }
}

#[test]
fn every_choice_of_an_n_3_completion_is_read() {
    let bytes = fixture!("openai/n_choices.sse");
    let want = vec![
        ended(0, "stop"),
        Choice {
            refusal: Some("I can’t pick for you.".into()),
            ..ended(1, "stop")
        },
        ended(2, "stop"),
    ];
    let parsed = watch(Api::ChatCompletions, bytes);
    assert_eq!(parsed.choices, want);
    assert_eq!(parsed.usage, usage(14, 9));
    let whole = stream_to_whole(Api::ChatCompletions, bytes).unwrap();
    let v: Value = serde_json::from_slice(&whole).unwrap();
    let texts: Vec<&Value> = v["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["message"]["content"])
        .collect();
    assert_eq!(
        texts,
        [&json!("Red"), &Value::Null, &json!("Green, or teal")]
    );
    assert_eq!(parse_whole(Api::ChatCompletions, &whole).choices, want);
    // The recorded whole body reads the same.
    let recorded = fixture!("openai/n_choices.json");
    assert_eq!(parse_whole(Api::ChatCompletions, recorded).choices, want);
}

#[test]
fn a_refusals_stop_details_are_kept_verbatim() {
    let bytes = fixture!("anthropic/refusal_stop_details.sse");
    let details = json!({"type": "refusal", "category": "cyber",
        "explanation": "This request was declined because it asks for working malware."});
    let want = vec![Choice {
        stop_details: Some(details.clone()),
        ..ended(0, "refusal")
    }];
    let parsed = watch(Api::Messages, bytes);
    assert_eq!(parsed.choices, want);
    let whole = stream_to_whole(Api::Messages, bytes).unwrap();
    let v: Value = serde_json::from_slice(&whole).unwrap();
    assert_eq!(v["stop_details"], details);
    assert_eq!(parse_whole(Api::Messages, &whole).choices, want);
}
