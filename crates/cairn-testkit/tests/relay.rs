//! The relay forwards bytes unchanged and cuts where it is told, for a raw
//! client and for the official SDKs.

mod common;

use std::time::Duration;

use cairn_testkit::relay::{Cut, Relay};
use cairn_testkit::upstream::{Reply, Script, Upstream};
use common::{ok_json, raw_request, sdk_call};

const CHAT_STREAM: &str = r#"{"model":"m","stream":true,"messages":[]}"#;

#[test]
fn bytes_pass_unchanged_both_ways() {
    let upstream = Upstream::start(Script::always(Reply::deltas(100)));
    let relay = Relay::start(upstream.addr());
    for (path, body) in [
        ("/v1/chat/completions", CHAT_STREAM),
        ("/v1/messages", r#"{"model":"m"}"#),
    ] {
        let direct = raw_request(upstream.addr(), "POST", path, &[("x-k", "v")], body);
        let relayed = raw_request(relay.addr(), "POST", path, &[("x-k", "v")], body);
        assert_eq!(relayed.status(), direct.status(), "{path}");
        assert_eq!(relayed.body(), direct.body(), "{path}");
    }
    let requests = upstream.requests();
    assert_eq!(requests[0].body, requests[1].body);
    assert_eq!(requests[1].header("x-k"), Some("v"));
    assert_eq!(
        (relay.connections(), relay.responses(), relay.cuts()),
        (2, 2, 0)
    );
}

#[test]
fn a_cut_after_k_events_ends_the_clients_connection_there_once() {
    let upstream = Upstream::start(Script::always(Reply::deltas(50)));
    let relay = Relay::start(upstream.addr());
    for k in [0, 1, 4] {
        relay.cut_next(Cut::AfterEvents(k));
        let cut = raw_request(
            relay.addr(),
            "POST",
            "/v1/chat/completions",
            &[],
            CHAT_STREAM,
        );
        assert_eq!(cut.status(), 200, "k={k}");
        let (body, terminated) = cut.body();
        assert!(!terminated, "k={k}");
        assert_eq!(cut.events().len(), k, "k={k}");
        assert!(
            k == 0 || body.ends_with(b"\n\n"),
            "k={k}: cut inside an event"
        );
        // The next response passes whole.
        let whole = raw_request(
            relay.addr(),
            "POST",
            "/v1/chat/completions",
            &[],
            CHAT_STREAM,
        );
        assert!(whole.body().1, "k={k}");
        assert_eq!(whole.events().len(), 53);
    }
    assert_eq!(relay.cuts(), 3);
}

#[test]
fn a_cut_before_the_response_forwards_nothing_of_it() {
    let upstream = Upstream::start(Script::always(Reply::text("hi")));
    let relay = Relay::start(upstream.addr());
    relay.cut_next(Cut::BeforeResponse);
    let raw = raw_request(relay.addr(), "POST", "/v1/messages", &[], "{}");
    assert_eq!(raw.bytes, b"");
    // The server did answer: the request got there whole.
    assert_eq!(upstream.count(), 1);
    assert!(relay.wait_for_cuts(1, Duration::from_secs(5)));
}

#[test]
fn a_cut_after_n_body_bytes_stops_a_whole_body() {
    let upstream = Upstream::start(Script::always(Reply::text("hello")));
    let relay = Relay::start(upstream.addr());
    relay.cut_next(Cut::AfterBytes(7));
    let raw = raw_request(relay.addr(), "POST", "/v1/messages", &[], "{}");
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.body().0, br#"{"conte"#);
}

#[test]
fn a_cut_also_drops_the_servers_connection() {
    // 40 events 25 ms apart: a second of stream, which the server cannot
    // finish once its client is gone.
    let upstream = Upstream::start(Script::always(
        Reply::deltas(40).event_delay(Duration::from_millis(25)),
    ));
    let relay = Relay::start(upstream.addr());
    relay.cut_next(Cut::AfterEvents(2));
    let raw = raw_request(
        relay.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        CHAT_STREAM,
    );
    assert_eq!(raw.events().len(), 2);
    assert!(!upstream.wait_for_finished(1, Duration::from_secs(2)));
}

#[test]
fn a_server_that_is_down_closes_the_client() {
    let gone = Upstream::start(Script::always(Reply::text("x")));
    let addr = gone.addr();
    drop(gone);
    let relay = Relay::start(addr);
    let raw = raw_request(relay.addr(), "GET", "/v1/models", &[], "");
    assert_eq!(raw.bytes, b"");
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn an_sdk_cut_mid_stream_by_the_relay_sees_the_first_k_events_and_fails() {
    let upstream = Upstream::start(Script::always(Reply::deltas(30)));
    let relay = Relay::start(upstream.addr());
    relay.cut_next(Cut::AfterEvents(3));
    let out = sdk_call(
        "openai-chat",
        &relay.openai_base_url(),
        &["--stream", "--max-retries", "2"],
    );
    let json = out.json().unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.success(), "{json}");
    assert_eq!(json["events"], 3, "{json}");
    assert_eq!(json["error"]["type"], "APIConnectionError", "{json}");
    // Not retried: the SDK's retries end when the headers arrive.
    assert_eq!(upstream.count(), 1);
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn an_sdk_cut_before_the_response_retries_and_the_server_answers_twice() {
    let upstream = Upstream::start(Script::always(Reply::text("answered twice")));
    let relay = Relay::start(upstream.addr());
    relay.cut_next(Cut::BeforeResponse);
    let out = sdk_call(
        "anthropic",
        &relay.base_url(),
        &["--stream", "--max-retries", "1"],
    );
    assert_eq!(ok_json(&out)["text"], "answered twice");
    let retries: Vec<_> = upstream
        .requests()
        .iter()
        .map(|r| r.header("x-stainless-retry-count").map(str::to_owned))
        .collect();
    assert_eq!(retries, [Some("0".to_owned()), Some("1".to_owned())]);
    assert_eq!(relay.cuts(), 1);
}
