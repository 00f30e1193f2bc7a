//! What the pinned SDKs really send when a call is retried, measured against
//! the mock upstream. These facts are what the gateway's replay rules stand
//! on (DESIGN §7); a new SDK pin that changes one fails here first.
//!
//! Measured with openai 3.57.0 and anthropic 2.15.0:
//! 1. The SDK retries by itself only when it has no response yet: the
//!    connection closed before the status line, or a whole (non-streamed)
//!    body cut short (it reads the body inside its retry loop). The retry
//!    sends `x-stainless-retry-count: 1` (2, … after it) and is otherwise the
//!    same request: byte-identical body, the same headers.
//! 2. A stream cut after its headers is never retried by the SDK, whatever
//!    `max_retries` says: the error comes out of the iteration (openai wraps
//!    it in `APIConnectionError`, anthropic raises httpx's
//!    `RemoteProtocolError` as it is). An application that calls again makes
//!    a fresh request: `x-stainless-retry-count: 0` again, the same body.
//! 3. Neither SDK sends an `Idempotency-Key` (nor any idempotency header), on
//!    any request, first or retried.
//! 4. A retry without streaming (what Claude Code does after a cut) drops
//!    `"stream": true` (and OpenAI's `stream_options`) from the body and the
//!    `x-stainless-helper-method` header that the chat and messages stream
//!    helpers send (the Responses helper sends none); nothing else in the
//!    body changes.
//! 5. The read timeout travels as `x-stainless-read-timeout` (both SDKs);
//!    anthropic also sends `x-stainless-timeout` (`NOT_GIVEN` when the
//!    timeout was set on the client, not the call).
//!
//! These tests are `#[ignore]`d: they need the pinned SDKs
//! (`crates/cairn-testkit/python/requirements.txt`), which `.ci/run`
//! installs and names in `CAIRN_TEST_PYTHON`; `cargo test -- --ignored`
//! runs them (building `target/cairn-test-venv` from PyPI when
//! `CAIRN_TEST_PYTHON` is unset).

mod common;

use std::time::Duration;

use cairn_testkit::upstream::{Cut, RecordedRequest, Reply, Script, Upstream};
use common::{base_for, ok_json, retry_call, sdk_call, APIS};
use serde_json::Value;

fn retry_counts(requests: &[RecordedRequest]) -> Vec<Option<String>> {
    requests
        .iter()
        .map(|r| r.header("x-stainless-retry-count").map(str::to_owned))
        .collect()
}

/// The headers without the retry count.
fn other_headers(request: &RecordedRequest) -> Vec<(String, String)> {
    request
        .headers
        .iter()
        .filter(|(k, _)| k != "x-stainless-retry-count")
        .cloned()
        .collect()
}

fn no_idempotency_header(requests: &[RecordedRequest]) {
    for r in requests {
        assert!(
            r.headers.iter().all(|(k, _)| !k.contains("idempotency")),
            "{:?}",
            r.headers
        );
    }
}

fn some(s: &str) -> Option<String> {
    Some(s.to_owned())
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn the_sdk_retries_a_connection_closed_before_the_response_as_the_same_request() {
    for api in APIS {
        let upstream = Upstream::start(Script::sequence(vec![
            Reply::drop_connection(),
            Reply::text("second time lucky"),
        ]));
        let base = base_for(api, &upstream.base_url());
        let got = ok_json(&sdk_call(api, &base, &["--stream", "--max-retries", "2"]));
        assert_eq!(got["text"], "second time lucky", "{api}");
        let requests = upstream.requests();
        assert_eq!(retry_counts(&requests), [some("0"), some("1")], "{api}");
        assert_eq!(requests[0].body, requests[1].body, "{api}");
        assert_eq!(
            other_headers(&requests[0]),
            other_headers(&requests[1]),
            "{api}"
        );
        no_idempotency_header(&requests);
        assert_eq!(
            requests[0].header("x-stainless-read-timeout"),
            Some("30.0"),
            "{api}"
        );
        let timeout = requests[0].header("x-stainless-timeout");
        let want = (api == "anthropic").then_some("NOT_GIVEN");
        assert_eq!(timeout, want, "{api}");
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn the_sdk_retries_a_whole_body_cut_short_as_the_same_request() {
    for api in APIS {
        let upstream = Upstream::start(Script::sequence(vec![
            Reply::text("whole").cut(Cut::AfterBytes(20)),
            Reply::text("whole"),
        ]));
        let base = base_for(api, &upstream.base_url());
        let got = ok_json(&sdk_call(api, &base, &["--max-retries", "2"]));
        assert_eq!(got["text"], "whole", "{api}");
        let requests = upstream.requests();
        assert_eq!(retry_counts(&requests), [some("0"), some("1")], "{api}");
        assert_eq!(requests[0].body, requests[1].body, "{api}");
        no_idempotency_header(&requests);
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn the_sdk_retries_a_server_error_with_a_growing_retry_count() {
    let upstream = Upstream::start(Script::sequence(vec![
        Reply::fail(503).with_header("retry-after-ms", "10"),
        Reply::fail(529).with_header("retry-after-ms", "10"),
        Reply::text("at last"),
    ]));
    let got = ok_json(&sdk_call(
        "anthropic",
        &upstream.base_url(),
        &["--max-retries", "2"],
    ));
    assert_eq!(got["text"], "at last");
    let requests = upstream.requests();
    assert_eq!(retry_counts(&requests), [some("0"), some("1"), some("2")]);
    assert!(requests.windows(2).all(|w| w[0].body == w[1].body));
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn no_sdk_retries_a_stream_cut_after_its_headers() {
    for api in APIS {
        for k in [0, 3] {
            let upstream = Upstream::start(Script::sequence(vec![
                Reply::deltas(20).cut_after_events(k),
                Reply::deltas(20),
            ]));
            let base = base_for(api, &upstream.base_url());
            let out = sdk_call(api, &base, &["--stream", "--max-retries", "3"]);
            let got = out.json().unwrap_or_else(|e| panic!("{e}"));
            assert!(!out.success(), "{api} k={k}: {got}");
            let error = if api == "anthropic" {
                "RemoteProtocolError"
            } else {
                "APIConnectionError"
            };
            assert_eq!(got["error"]["type"], error, "{api} k={k}: {got}");
            // Give a retry, were there one, time to arrive.
            assert!(
                !upstream.wait_for_requests(2, Duration::from_millis(300)),
                "{api} k={k}"
            );
            assert_eq!(upstream.count(), 1, "{api} k={k}");
        }
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn an_application_retry_after_a_cut_stream_is_a_fresh_identical_request() {
    for api in APIS {
        let upstream = Upstream::start(Script::sequence(vec![
            Reply::deltas(20).cut_after_events(4),
            Reply::deltas(20),
        ]));
        let base = base_for(api, &upstream.base_url());
        let got = ok_json(&retry_call(api, &base, &["--stream"]));
        assert_eq!(got["attempts"][0]["ok"], false, "{api}: {got}");
        assert_eq!(got["attempts"][1]["ok"], true, "{api}: {got}");
        let requests = upstream.requests();
        assert_eq!(retry_counts(&requests), [some("0"), some("0")], "{api}");
        assert_eq!(requests[0].body, requests[1].body, "{api}");
        assert_eq!(
            other_headers(&requests[0]),
            other_headers(&requests[1]),
            "{api}"
        );
        no_idempotency_header(&requests);
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_retry_without_streaming_drops_only_the_stream_fields() {
    for api in APIS {
        let upstream = Upstream::start(Script::sequence(vec![
            Reply::deltas(20).cut_after_events(4),
            Reply::deltas(20),
        ]));
        let base = base_for(api, &upstream.base_url());
        let got = ok_json(&retry_call(
            api,
            &base,
            &["--stream", "--retry-without-stream"],
        ));
        assert_eq!(got["result"]["stream"], false, "{api}: {got}");
        let requests = upstream.requests();
        let mut first = requests[0].json().unwrap_or_default();
        let second = requests[1].json().unwrap_or_default();
        assert_eq!(first["stream"], true, "{api}");
        if let Some(map) = first.as_object_mut() {
            map.remove("stream");
            map.remove("stream_options");
        }
        assert_eq!(first, second, "{api}");
        assert_eq!(second.get("stream"), None::<&Value>, "{api}");
        // The Responses stream helper names itself in no header.
        let helper = requests[0].header("x-stainless-helper-method");
        assert_eq!(helper.is_some(), api != "openai-responses", "{api}");
        assert_eq!(
            requests[1].header("x-stainless-helper-method"),
            None,
            "{api}"
        );
    }
}
