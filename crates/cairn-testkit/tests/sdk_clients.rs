//! The mock upstream answers each official SDK correctly: the SDKs (with
//! strict response validation) parse its answers, streamed and not, to what
//! the script said.
//!
//! These tests are `#[ignore]`d: they need the pinned SDKs
//! (`crates/cairn-testkit/python/requirements.txt`), which `.ci/run`
//! installs and names in `CAIRN_TEST_PYTHON`; `cargo test -- --ignored`
//! runs them (building `target/cairn-test-venv` from PyPI when
//! `CAIRN_TEST_PYTHON` is unset).

mod common;

use cairn_testkit::upstream::{Reply, Script, Upstream, Usage};
use common::{base_for, ok_json, route, sdk_call, APIS};
use serde_json::json;

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn each_sdk_parses_a_text_answer_streamed_and_not() {
    let reply = Reply::text("Hello from the mock, ünïcödé and all.").with_full_usage(Usage {
        input_tokens: 31,
        output_tokens: 9,
        cached_input_tokens: 4,
    });
    for api in APIS {
        for stream in [false, true] {
            let upstream = Upstream::start(Script::always(reply.clone()));
            let base = base_for(api, &upstream.base_url());
            let args: &[&str] = if stream { &["--stream"] } else { &[] };
            let got = ok_json(&sdk_call(api, &base, args));
            let what = format!("{api} stream={stream}");
            assert_eq!(
                got["text"], "Hello from the mock, ünïcödé and all.",
                "{what}"
            );
            assert_eq!(got["tool_calls"], json!([]), "{what}");
            assert_eq!(
                got["usage"],
                json!({"input_tokens": 31, "output_tokens": 9, "cached_input_tokens": 4}),
                "{what}"
            );
            let stop = match api {
                "openai-chat" => "stop",
                "openai-responses" => "completed",
                _ => "end_turn",
            };
            assert_eq!(got["stop"], stop, "{what}");
            let requests = upstream.requests();
            assert_eq!(requests.len(), 1, "{what}");
            assert_eq!(requests[0].path, route(api), "{what}");
            assert_eq!(requests[0].is_stream(), stream, "{what}");
            assert_eq!(
                got["model"].as_str(),
                requests[0].model().as_deref(),
                "{what}"
            );
        }
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn each_sdk_parses_tool_calls_streamed_and_not() {
    let reply = Reply::text("Writing both.")
        .with_tool_call("write_file", json!({"path": "a.txt", "content": "first ✓"}))
        .with_tool_call(
            "write_file",
            json!({"path": "b/c.txt", "content": "second"}),
        );
    for api in APIS {
        for stream in [false, true] {
            let upstream = Upstream::start(Script::always(reply.clone()));
            let base = base_for(api, &upstream.base_url());
            let mut args = vec!["--tools"];
            if stream {
                args.push("--stream");
            }
            let got = ok_json(&sdk_call(api, &base, &args));
            let what = format!("{api} stream={stream}");
            assert_eq!(got["text"], "Writing both.", "{what}");
            assert_eq!(
                got["tool_calls"],
                json!([
                    {"id": "call_1", "name": "write_file", "arguments": {"path": "a.txt", "content": "first ✓"}},
                    {"id": "call_2", "name": "write_file", "arguments": {"path": "b/c.txt", "content": "second"}}
                ]),
                "{what}"
            );
            let stop = match api {
                "openai-chat" => "tool_calls",
                "openai-responses" => "completed",
                _ => "tool_use",
            };
            assert_eq!(got["stop"], stop, "{what}");
            let sent = upstream.requests()[0].json().unwrap_or_default();
            assert!(sent["tools"].is_array(), "{what}: the tool was not offered");
        }
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn streamed_and_whole_answers_parse_to_the_same_result() {
    let reply = Reply::text("Same either way.")
        .with_tool_call("write_file", json!({"path": "x", "content": "y"}));
    for api in APIS {
        let upstream = Upstream::start(Script::always(reply.clone()));
        let base = base_for(api, &upstream.base_url());
        let mut whole = ok_json(&sdk_call(api, &base, &["--tools"]));
        let mut streamed = ok_json(&sdk_call(api, &base, &["--tools", "--stream"]));
        for result in [&mut whole, &mut streamed] {
            result["stream"] = json!(null);
            result["events"] = json!(null);
        }
        assert_eq!(whole, streamed, "{api}");
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn each_sdk_reads_a_two_hundred_event_stream() {
    for (api, events) in [
        ("openai-chat", 203),
        ("openai-responses", 208),
        ("anthropic", 205),
    ] {
        let upstream = Upstream::start(Script::always(Reply::deltas(200)));
        let got = ok_json(&sdk_call(
            api,
            &base_for(api, &upstream.base_url()),
            &["--stream"],
        ));
        let want: String = (0..200)
            .map(|i| {
                if i == 0 {
                    "w0".to_owned()
                } else {
                    format!(" w{i}")
                }
            })
            .collect();
        assert_eq!(got["text"], want, "{api}");
        assert_eq!(got["events"], events, "{api}");
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn each_sdk_raises_the_status_and_body_of_a_failure() {
    for (api, status, error) in [
        ("openai-chat", 400, "BadRequestError"),
        ("openai-responses", 404, "NotFoundError"),
        ("anthropic", 529, "OverloadedError"),
    ] {
        let upstream = Upstream::start(Script::always(Reply::fail(status)));
        let out = sdk_call(api, &base_for(api, &upstream.base_url()), &["--stream"]);
        let got = out.json().unwrap_or_else(|e| panic!("{e}"));
        assert!(!out.success(), "{api}: {got}");
        assert_eq!(got["error"]["type"], error, "{api}: {got}");
        assert_eq!(got["error"]["status"], status, "{api}: {got}");
        let message = if api == "anthropic" {
            &got["error"]["body"]["error"]["message"]
        } else {
            &got["error"]["body"]["message"]
        };
        assert!(
            message.as_str().is_some_and(|m| m.contains("(mock)")),
            "{api}: {got}"
        );
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn strict_validation_rejects_an_answer_of_the_wrong_shape() {
    // The check the other tests rely on: an answer the SDK's models do not
    // accept fails the call.
    for api in APIS {
        let upstream = Upstream::start(Script::always(Reply::fail_with(200, json!({"id": "x"}))));
        let out = sdk_call(api, &base_for(api, &upstream.base_url()), &[]);
        let got = out.json().unwrap_or_else(|e| panic!("{e}"));
        assert!(!out.success(), "{api}: {got}");
        assert_eq!(
            got["error"]["type"], "APIResponseValidationError",
            "{api}: {got}"
        );
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn the_passed_through_routes_answer_each_sdk() {
    let upstream = Upstream::start(Script::always(Reply::text("").with_usage(77, 1)));
    let models = ok_json(&sdk_call("openai-models", &upstream.openai_base_url(), &[]));
    assert_eq!(models["models"], json!(["gpt-4o-mini", "gpt-5-mini"]));
    let models = ok_json(&sdk_call("anthropic-models", &upstream.base_url(), &[]));
    assert_eq!(
        models["models"],
        json!(["claude-sonnet-4-5", "claude-haiku-4-5"])
    );
    let counted = ok_json(&sdk_call(
        "anthropic-count-tokens",
        &upstream.base_url(),
        &[],
    ));
    assert_eq!(counted["input_tokens"], 77);
    let paths: Vec<_> = upstream
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    assert_eq!(
        paths,
        [
            ("GET".to_owned(), "/v1/models".to_owned()),
            ("GET".to_owned(), "/v1/models".to_owned()),
            ("POST".to_owned(), "/v1/messages/count_tokens".to_owned())
        ]
    );
}
