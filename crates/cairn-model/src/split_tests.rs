//! Every fixture of `tests/fixtures/`, fed through the SSE parser and the
//! decoder in pieces cut anywhere (mid-line, mid-UTF-8 character, between the
//! `\r` and `\n` of a line ending), decodes to exactly what it decodes to
//! whole: the same response and streamed text, or the same failure.

use proptest::prelude::*;

use crate::decode::{decode_stream, Outcome, StreamFormat};

macro_rules! fixtures {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(($name, include_bytes!(concat!("../tests/fixtures/", $dir, "/", $name)) as &[u8])),*]
    };
}

const OPENAI: &[(&str, &[u8])] = fixtures!("openai":
    "azure_content_filter_stop.sse",
    "azure_prompt_filter.sse",
    "cut_before_usage.sse",
    "done_without_blank_line.sse",
    "length_after_tool_name.sse",
    "length_in_tool_call.sse",
    "no_done_marker.sse",
    "parallel_tool_calls.sse",
    "reasoning_content_tool_call.sse",
    "reasoning_details_tool_call.sse",
    "reasoning_field_text.sse",
    "refusal.sse",
    "text.sse",
);

const ANTHROPIC: &[(&str, &[u8])] = fixtures!("anthropic":
    "cut_in_text.sse",
    "max_tokens_at_tool_start.sse",
    "max_tokens_in_tool_use.sse",
    "no_message_stop.sse",
    "no_trailing_blank_line.sse",
    "open_block_at_end.sse",
    "overloaded_mid_stream.sse",
    "refusal.sse",
    "refusal_without_text.sse",
    "text_and_tool.sse",
    "thinking_continuation.sse",
    "thinking_final.sse",
    "thinking_tool_use.sse",
);

fn openai(bytes: &[u8], cuts: &[usize]) -> Outcome {
    decode_stream(StreamFormat::OpenAiChat, bytes, cuts)
}

fn anthropic(bytes: &[u8], cuts: &[usize]) -> Outcome {
    decode_stream(StreamFormat::AnthropicMessages, bytes, cuts)
}

type Decode = fn(&[u8], &[usize]) -> Outcome;

fn all() -> impl Iterator<Item = (&'static str, &'static [u8], Decode)> {
    let openai = OPENAI.iter().map(|&(n, b)| (n, b, openai as Decode));
    let anthropic = ANTHROPIC.iter().map(|&(n, b)| (n, b, anthropic as Decode));
    openai.chain(anthropic)
}

#[test]
fn every_fixture_file_is_split_tested() {
    for (dir, listed) in [("openai", OPENAI), ("anthropic", ANTHROPIC)] {
        let path = format!("{}/tests/fixtures/{dir}", env!("CARGO_MANIFEST_DIR"));
        let mut on_disk: Vec<String> = std::fs::read_dir(&path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".sse"))
            .collect();
        on_disk.sort();
        let listed: Vec<&str> = listed.iter().map(|(name, _)| *name).collect();
        assert_eq!(on_disk, listed, "{path}");
    }
}

#[test]
fn fixtures_decode_whole_as_their_names_say() {
    let failing = [
        (
            "cut_before_usage.sse",
            "retry: the response stream ended before `data: [DONE]`",
        ),
        (
            "cut_in_text.sse",
            "retry: the response stream ended before `message_stop`",
        ),
        (
            "open_block_at_end.sse",
            "retry: the response stream ended before `message_stop`",
        ),
        (
            "overloaded_mid_stream.sse",
            "retry: error in stream (overloaded_error): Overloaded",
        ),
    ];
    for (name, bytes, decode) in all() {
        let outcome = decode(bytes, &[]);
        match failing.iter().find(|(n, _)| *n == name) {
            Some((_, why)) => assert_eq!(outcome, Outcome::Failed((*why).to_owned()), "{name}"),
            None => assert!(
                matches!(outcome, Outcome::Response(..)),
                "{name}: {outcome:?}"
            ),
        }
    }
}

#[test]
fn fixtures_fed_byte_by_byte_decode_as_whole() {
    for (name, bytes, decode) in all() {
        let every: Vec<usize> = (0..=bytes.len()).collect();
        assert_eq!(decode(bytes, &every), decode(bytes, &[]), "{name}");
    }
}

proptest! {
    #[test]
    fn fixtures_split_anywhere_decode_as_whole(
        cuts in proptest::collection::vec(any::<usize>(), 1..40),
    ) {
        for (name, bytes, decode) in all() {
            prop_assert_eq!(decode(bytes, &cuts), decode(bytes, &[]), "{}", name);
        }
    }
}
