//! The mock upstream on the wire, read with a raw HTTP client: what it
//! records, what it sends, and that its cuts really close the connection.

mod common;

use std::time::Duration;

use cairn_testkit::upstream::{Cut, Reply, Script, Upstream};
use common::raw_request;
use serde_json::{json, Value};

const CHAT_STREAM: &str =
    r#"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

fn data(event: &str) -> Value {
    let line = event
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no data line in {event:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn every_request_is_recorded_in_order_with_its_query_headers_and_body() {
    let upstream = Upstream::start(Script::always(Reply::text("ok")));
    raw_request(
        upstream.addr(),
        "GET",
        "/v1/models",
        &[("authorization", "Bearer k1")],
        "",
    );
    raw_request(
        upstream.addr(),
        "POST",
        "/v1/messages?beta=true",
        &[("anthropic-version", "2023-06-01"), ("X-Custom", "Yes")],
        r#"{"model":"m","messages":[]}"#,
    );
    raw_request(upstream.addr(), "POST", "/v2/unknown", &[], "not json");
    let requests = upstream.requests();
    assert_eq!(upstream.count(), 3);
    let summary: Vec<_> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), r.query.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [
            ("GET", "/v1/models", None),
            ("POST", "/v1/messages", Some("beta=true")),
            ("POST", "/v2/unknown", None)
        ]
    );
    assert_eq!(requests[0].header("Authorization"), Some("Bearer k1"));
    assert_eq!(requests[1].header("x-custom"), Some("Yes"));
    assert_eq!(requests[1].body, br#"{"model":"m","messages":[]}"#);
    assert_eq!(requests[1].model().as_deref(), Some("m"));
    assert_eq!(requests[2].body, b"not json");
    assert_eq!(requests[2].json(), None);
}

#[test]
fn a_chat_stream_is_chunks_then_usage_then_done() {
    let upstream = Upstream::start(Script::always(
        Reply::text("one two three").with_usage(12, 3),
    ));
    let body =
        r#"{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#;
    let raw = raw_request(upstream.addr(), "POST", "/v1/chat/completions", &[], body);
    assert_eq!(raw.status(), 200);
    assert!(
        raw.head().contains("content-type: text/event-stream"),
        "{}",
        raw.head()
    );
    assert!(
        raw.head().contains("x-request-id: req_mock_0"),
        "{}",
        raw.head()
    );
    let (_, terminated) = raw.body();
    assert!(terminated);
    let events = raw.events();
    // role, three words, finish, usage, [DONE]
    assert_eq!(events.len(), 7, "{events:?}");
    assert_eq!(events[6], "data: [DONE]");
    let text: String = events[1..4]
        .iter()
        .map(|e| {
            data(e)["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(text, "one two three");
    assert_eq!(data(&events[4])["choices"][0]["finish_reason"], "stop");
    let usage = data(&events[5]);
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 12);
    assert_eq!(usage["usage"]["completion_tokens"], 3);
    for event in &events[..5] {
        let chunk = data(event);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "gpt-x");
        assert_eq!(chunk["usage"], Value::Null);
    }
}

#[test]
fn without_include_usage_a_chat_stream_has_no_usage_chunk() {
    let upstream = Upstream::start(Script::always(Reply::deltas(200)));
    let raw = raw_request(
        upstream.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        CHAT_STREAM,
    );
    let events = raw.events();
    // role, 200 deltas, finish, [DONE]
    assert_eq!(events.len(), 203);
    assert!(events.iter().all(|e| !e.contains("\"usage\"")));
}

#[test]
fn the_responses_stream_is_the_documented_event_sequence() {
    let reply =
        Reply::text("hi there").with_tool_call("write_file", json!({"path": "a", "content": "b"}));
    let upstream = Upstream::start(Script::always(reply));
    let body = r#"{"model":"gpt-x","stream":true,"input":"hi","instructions":"be brief"}"#;
    let raw = raw_request(upstream.addr(), "POST", "/v1/responses", &[], body);
    let events = raw.events();
    let names: Vec<String> = events
        .iter()
        .map(|e| {
            e.lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("event: ")
                .to_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (i, event) in events.iter().enumerate() {
        let d = data(event);
        assert_eq!(d["sequence_number"], i, "{event}");
        assert_eq!(d["type"].as_str(), Some(names[i].as_str()));
    }
    let done = &data(&events[14])["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["instructions"], "be brief");
    assert_eq!(done["output"][0]["content"][0]["text"], "hi there");
    assert_eq!(
        done["output"][1]["arguments"],
        r#"{"content":"b","path":"a"}"#
    );
    assert_eq!(data(&events[0])["response"]["status"], "in_progress");
}

#[test]
fn raw_arguments_and_reasoning_go_out_as_the_reply_wrote_them() {
    let raw_args = r#"{"path": "a.txt",  "content": "x"}"#;
    let reply = Reply::text("")
        .with_raw_tool_call("write_file", raw_args)
        .with_reasoning("Thinking it over", "gAAAA-opaque==");
    let upstream = Upstream::start(Script::always(reply));
    let body = r#"{"model":"gpt-x","stream":true,"store":false,"input":"hi"}"#;
    let raw = raw_request(upstream.addr(), "POST", "/v1/responses", &[], body);
    let events: Vec<Value> = raw.events().iter().map(|e| data(e)).collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds[2..8],
        [
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
        ]
    );
    assert_eq!(events[2]["item"]["encrypted_content"], "gAAAA-opaque==");
    assert_eq!(events[2]["item"]["summary"], json!([]));
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, raw_args);
    let done = &events.last().unwrap()["response"];
    assert_eq!(done["store"], false);
    assert_eq!(done["output"][0]["type"], "reasoning");
    assert_eq!(done["output"][0]["summary"][0]["text"], "Thinking it over");
    assert_eq!(done["output"][1]["arguments"], raw_args);

    let chat = raw_request(
        upstream.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        CHAT_STREAM,
    );
    let pieces: String = chat
        .events()
        .iter()
        .filter(|e| e.starts_with("data: {"))
        .filter_map(|e| {
            data(e)["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(pieces, raw_args);
}

#[test]
fn the_messages_stream_is_the_documented_event_sequence() {
    let reply = Reply::text("hi").with_tool_call("write_file", json!({"path": "a"}));
    let upstream = Upstream::start(Script::always(reply.with_usage(40, 6)));
    let body = r#"{"model":"claude-x","stream":true,"max_tokens":10,"messages":[]}"#;
    let raw = raw_request(upstream.addr(), "POST", "/v1/messages", &[], body);
    assert!(
        raw.head().contains("request-id: req_mock_0"),
        "{}",
        raw.head()
    );
    let events = raw.events();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e.lines().next().unwrap_or("").trim_start_matches("event: "))
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(data(&events[0])["message"]["usage"]["input_tokens"], 40);
    assert_eq!(data(&events[5])["content_block"]["type"], "tool_use");
    assert_eq!(data(&events[6])["delta"]["partial_json"], r#"{"path":"a"}"#);
    let delta = data(&events[8]);
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 6);
}

#[test]
fn whole_answers_have_a_content_length_and_the_apis_shapes() {
    let upstream = Upstream::start(Script::always(Reply::text("hello").with_usage(5, 1)));
    let rows = [
        (
            "/v1/chat/completions",
            "/choices/0/message/content",
            "hello",
        ),
        ("/v1/responses", "/output/0/content/0/text", "hello"),
        ("/v1/messages", "/content/0/text", "hello"),
    ];
    for (path, pointer, want) in rows {
        let raw = raw_request(upstream.addr(), "POST", path, &[], r#"{"model":"m"}"#);
        assert_eq!(raw.status(), 200, "{path}");
        assert!(!raw.is_chunked(), "{path}: {}", raw.head());
        assert!(raw.head().contains("content-length:"), "{path}");
        let body: Value = serde_json::from_str(&raw.body_text()).unwrap_or(Value::Null);
        assert_eq!(
            body.pointer(pointer).and_then(Value::as_str),
            Some(want),
            "{path}: {body}"
        );
        assert_eq!(body["model"], "m", "{path}");
    }
    let tokens = raw_request(
        upstream.addr(),
        "POST",
        "/v1/messages/count_tokens",
        &[],
        "{}",
    );
    assert_eq!(tokens.body_text(), r#"{"input_tokens":5}"#);
    let openai_models = raw_request(upstream.addr(), "GET", "/v1/models", &[], "");
    assert!(openai_models.body_text().contains(r#""object":"list""#));
    let anthropic_models = raw_request(
        upstream.addr(),
        "GET",
        "/v1/models",
        &[("anthropic-version", "2023-06-01")],
        "",
    );
    assert!(anthropic_models.body_text().contains(r#""has_more":false"#));
    let unknown = raw_request(upstream.addr(), "POST", "/v1/nothing", &[], "{}");
    assert_eq!(unknown.status(), 404);
    assert!(unknown.body_text().contains("invalid_request_error"));
}

#[test]
fn the_same_reply_is_the_same_bytes() {
    let upstream = Upstream::start(Script::always(
        Reply::deltas(20).with_tool_call("t", json!({"a": 1})),
    ));
    for path in ["/v1/chat/completions", "/v1/responses", "/v1/messages"] {
        let body = r#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#;
        let first = raw_request(upstream.addr(), "POST", path, &[], body);
        let second = raw_request(upstream.addr(), "POST", path, &[], body);
        assert_eq!(first.body(), second.body(), "{path}");
    }
}

#[test]
fn failures_carry_the_apis_error_bodies() {
    let upstream = Upstream::start(Script::always(Reply::fail(529)));
    let anthropic = raw_request(upstream.addr(), "POST", "/v1/messages", &[], "{}");
    assert_eq!(anthropic.status(), 529);
    let body: Value = serde_json::from_str(&anthropic.body_text()).unwrap_or(Value::Null);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error");
    let upstream = Upstream::start(Script::always(
        Reply::fail(429).with_header("retry-after-ms", "10"),
    ));
    let openai = raw_request(
        upstream.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        CHAT_STREAM,
    );
    assert_eq!(openai.status(), 429);
    assert!(openai.head().contains("retry-after-ms: 10"));
    let body: Value = serde_json::from_str(&openai.body_text()).unwrap_or(Value::Null);
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    let custom = Upstream::start(Script::always(Reply::fail_with(
        418,
        json!({"teapot": true}),
    )));
    let raw = raw_request(custom.addr(), "POST", "/v1/responses", &[], "{}");
    assert_eq!(
        (raw.status(), raw.body_text().as_str()),
        (418, r#"{"teapot":true}"#)
    );
}

#[test]
fn a_stream_cut_after_k_events_closes_the_connection_without_a_terminator() {
    for k in [0, 1, 3] {
        let upstream = Upstream::start(Script::always(Reply::deltas(50).cut_after_events(k)));
        let raw = raw_request(
            upstream.addr(),
            "POST",
            "/v1/chat/completions",
            &[],
            CHAT_STREAM,
        );
        assert_eq!(raw.status(), 200, "k={k}");
        let (body, terminated) = raw.body();
        assert!(!terminated, "k={k}: the zero chunk came");
        assert_eq!(raw.events().len(), k, "k={k}");
        assert!(body.ends_with(b"\n\n") || k == 0, "k={k}: a partial event");
        assert!(
            raw.closed_after < Duration::from_secs(5),
            "k={k}: closed late"
        );
        assert_eq!(upstream.finished(), 0);
    }
}

#[test]
fn an_uncut_stream_ends_with_its_terminator_and_counts_as_finished() {
    let upstream = Upstream::start(Script::always(Reply::deltas(5)));
    let raw = raw_request(
        upstream.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        CHAT_STREAM,
    );
    assert!(raw.body().1);
    assert!(upstream.wait_for_finished(1, Duration::from_secs(5)));
}

#[test]
fn a_drop_sends_not_a_byte() {
    let upstream = Upstream::start(Script::always(Reply::drop_connection()));
    for (path, body) in [
        ("/v1/chat/completions", CHAT_STREAM),
        ("/v1/messages", "{}"),
        ("/v1/models", ""),
    ] {
        let method = if body.is_empty() { "GET" } else { "POST" };
        let raw = raw_request(upstream.addr(), method, path, &[], body);
        assert_eq!(raw.bytes, b"", "{path}");
    }
    assert_eq!(upstream.count(), 3);
}

#[test]
fn a_whole_body_cut_after_n_bytes_stops_there() {
    let upstream = Upstream::start(Script::always(
        Reply::text("hello world").cut(Cut::AfterBytes(10)),
    ));
    let raw = raw_request(
        upstream.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        r#"{"model":"m"}"#,
    );
    assert_eq!(raw.status(), 200);
    let (body, terminated) = raw.body();
    assert_eq!(
        (body.as_slice(), terminated),
        (&br#"{"choices""#[..], false)
    );
}

#[test]
fn delays_hold_the_answer_and_space_the_events() {
    let reply = Reply::deltas(4)
        .sleep_first(Duration::from_millis(300))
        .event_delay(Duration::from_millis(50));
    let upstream = Upstream::start(Script::always(reply));
    let raw = raw_request(
        upstream.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        CHAT_STREAM,
    );
    // 300 ms, then 7 events 50 ms apart.
    assert!(
        raw.closed_after >= Duration::from_millis(300 + 7 * 50),
        "{:?}",
        raw.closed_after
    );
    assert_eq!(raw.events().len(), 7);
}

#[test]
fn scripts_answer_by_sequence_by_turn_or_by_closure() {
    let sequence = Upstream::start(Script::sequence(vec![
        Reply::fail(500),
        Reply::text("a"),
        Reply::text("b"),
    ]));
    let statuses: Vec<(u16, String)> = (0..4)
        .map(|_| {
            let raw = raw_request(
                sequence.addr(),
                "POST",
                "/v1/messages",
                &[],
                r#"{"model":"m"}"#,
            );
            let text = serde_json::from_str::<Value>(&raw.body_text()).unwrap_or(Value::Null)
                ["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            (raw.status(), text)
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (500, "".into()),
            (200, "a".into()),
            (200, "b".into()),
            (200, "b".into())
        ]
    );

    let by_turn = Upstream::start(Script::by_turn(vec![
        Reply::text("first"),
        Reply::text("second"),
    ]));
    let turn_one = r#"{"messages":[{"role":"user"},{"role":"assistant"},{"role":"user"}]}"#;
    for (body, want) in [
        (r#"{"messages":[{"role":"user"}]}"#, "first"),
        (turn_one, "second"),
        (turn_one, "second"),
    ] {
        let raw = raw_request(by_turn.addr(), "POST", "/v1/chat/completions", &[], body);
        assert!(raw.body_text().contains(want), "{body}");
    }

    let by_header = Upstream::start(Script::from_fn(|req| match req.header("x-answer") {
        Some(answer) => Reply::text(answer),
        None => Reply::fail(400),
    }));
    let raw = raw_request(
        by_header.addr(),
        "POST",
        "/v1/chat/completions",
        &[("x-answer", "yes")],
        "{}",
    );
    assert!(raw.body_text().contains(r#""content":"yes""#));
    let raw = raw_request(by_header.addr(), "POST", "/v1/chat/completions", &[], "{}");
    assert_eq!(raw.status(), 400);
}

#[tokio::test]
async fn the_server_serves_an_async_test_and_stops_when_dropped() {
    let upstream = Upstream::start(Script::always(Reply::text("hi")));
    let addr = upstream.addr();
    let raw = tokio::task::spawn_blocking(move || raw_request(addr, "GET", "/v1/models", &[], ""))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(raw.status(), 200);
    drop(upstream);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening after the drop"
    );
}
