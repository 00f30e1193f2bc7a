//! What real providers send, through `cairn gateway` with the official SDKs
//! as clients (the upstream plays recorded responses byte for byte; the
//! fixtures are cairn-model's, `crates/cairn-model/tests/fixtures/`, where
//! each one's origin is noted): a response the provider finished is kept
//! and replayable whatever cut it off, its usage is read where the provider
//! put it, and the `model_call` says how every answer ended.
//!
//! `#[ignore]`d like `gateway.rs`: they need the pinned SDKs that `.ci/run`
//! installs and names in `CAIRN_TEST_PYTHON`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use cairn_testkit::python::{self, Python, ScriptCommand};
use cairn_testkit::upstream::{Reply, Script, Upstream};
use common::*;
use serde_json::{json, Value};

macro_rules! fixture {
    ($path:literal) => {
        include_bytes!(concat!("../../cairn-model/tests/fixtures/", $path)).to_vec()
    };
}

fn py() -> Python {
    python::interpreter().unwrap_or_else(|e| panic!("{e}"))
}

/// `cairn gateway` on an ephemeral port in front of `upstream`, with the
/// price table `prices` when given; returns the child and its address.
fn gateway(s: &Scratch, upstream: &Upstream, prices: Option<Value>) -> (Child, String) {
    let mut cmd = s.cmd();
    if let Some(prices) = prices {
        let path = s.dir.path().join("prices.json");
        std::fs::write(&path, prices.to_string()).unwrap();
        cmd.env("CAIRN_PRICES", path);
    }
    let mut child = cmd
        .args(["gateway", "--listen", "127.0.0.1:0"])
        .args(["--openai-upstream", &upstream.openai_base_url()])
        .args(["--anthropic-upstream", &upstream.base_url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("cairn gateway listening on http://")
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, addr)
}

fn stop(mut child: Child) {
    kill(&mut child, libc::SIGTERM);
    child.wait().unwrap();
}

/// The base URL an SDK of `api` is given for `addr`.
fn base(api: &str, addr: &str) -> String {
    if api == "anthropic" {
        format!("http://{addr}")
    } else {
        format!("http://{addr}/v1")
    }
}

/// One SDK call through `script` (`sdk_call.py` or `retry_call.py`).
fn sdk(script: &str, api: &str, base: &str, stream: bool) -> ScriptCommand {
    let mut c = py().script(script).args([
        "--api",
        api,
        "--base-url",
        base,
        "--api-key",
        "sk-cairn-test",
    ]);
    if stream {
        c = c.arg("--stream");
    }
    c
}

/// Every `model_call` record in the store.
fn model_calls(s: &Scratch) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(runs) = std::fs::read_dir(s.store.join("runs")) else {
        return out;
    };
    for r in runs {
        let id = r.unwrap().file_name().into_string().unwrap();
        out.extend(
            s.records_so_far(&id)
                .into_iter()
                .filter(|r| r["kind"] == "model_call"),
        );
    }
    out
}

/// What the SDK made of it: its result, or the error it raised.
fn outcome(out: &python::ScriptOutput) -> Value {
    let v = out.json().unwrap();
    match v.get("error") {
        Some(e) => json!({"error": e["type"], "message": e["message"]}),
        None => v,
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_tool_call_cut_by_max_tokens_is_kept_and_its_retry_served_from_the_store() {
    let upstream = Upstream::start(Script::sequence(vec![
        // Direct, then through the gateway: the block never closed.
        Reply::raw_stream(fixture!("anthropic/max_tokens_in_open_tool_use.sse")),
        Reply::raw_stream(fixture!("anthropic/max_tokens_in_open_tool_use.sse")),
        // The same answer with the connection cut after `message_delta`,
        // before `message_stop` (11 events; 10 go out).
        Reply::raw_stream(fixture!("anthropic/max_tokens_in_open_tool_use.sse"))
            .cut_after_events(10),
        // Direct: what the retry must get (the same bytes, ended cleanly).
        Reply::raw_stream(fixture!(
            "anthropic/max_tokens_in_open_tool_use_no_stop.sse"
        )),
    ]));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, None);
    let direct = sdk("sdk_call.py", "anthropic", &upstream.base_url(), true)
        .run()
        .unwrap();
    assert!(direct.success(), "{}", direct.stderr);
    let through = sdk("sdk_call.py", "anthropic", &base("anthropic", &addr), true)
        .run()
        .unwrap();
    assert!(through.success(), "{}", through.stderr);
    let want = direct.json().unwrap();
    assert_eq!(through.json().unwrap(), want);
    assert_eq!(want["stop"], "max_tokens");
    assert_eq!(
        want["tool_calls"][0]["arguments"],
        json!({"path": "report.md"})
    );

    // Cut upstream after the stop reason: the gateway keeps what the
    // provider finished; the client's stream breaks, and its retry is
    // served from the store, not bought again.
    let out = sdk(
        "retry_call.py",
        "anthropic",
        &base("anthropic", &addr),
        true,
    )
    .args(["--prompt", "the cut one"])
    .run()
    .unwrap();
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let v = out.json().unwrap();
    let attempts = v["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{v}");
    assert_eq!(attempts[0]["ok"], false, "{v}");
    assert!(upstream.wait_for_requests(3, Duration::from_secs(10)));
    assert_eq!(upstream.count(), 3, "the cut answer was bought once");
    let direct = sdk("sdk_call.py", "anthropic", &upstream.base_url(), true)
        .args(["--prompt", "the cut one"])
        .run()
        .unwrap();
    assert!(direct.success(), "{}", direct.stderr);
    assert_eq!(v["result"], direct.json().unwrap());
    stop(gw);

    let calls = model_calls(&s);
    assert_eq!(calls.len(), 3, "{calls:?}");
    let ended = json!([{"index": 0, "stop_reason": "max_tokens"}]);
    for c in &calls {
        assert_eq!(c["choices"], ended, "{c}");
        assert_eq!(
            c["usage"],
            json!({"input_tokens": 412, "output_tokens": 64}),
            "{c}"
        );
    }
    assert_eq!(calls[0]["error"], Value::Null, "complete: {}", calls[0]);
    assert!(
        calls[1]["error"].as_str().unwrap().contains("broke"),
        "{}",
        calls[1]
    );
    assert_eq!(calls[2]["replay"], true);
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_chat_answer_cut_by_length_without_usage_or_done_is_complete_and_priced_unknown() {
    let fixture = fixture!("openai/length_in_tool_call_eof.sse");
    let upstream = Upstream::start(Script::always(Reply::raw_stream(fixture)));
    let s = Scratch::new();
    let prices = json!({"openai:gpt-oss-20b": {"input_per_mtok": 0.1, "output_per_mtok": 0.5}});
    let (gw, addr) = gateway(&s, &upstream, Some(prices));
    let call = |base: &str| {
        sdk("sdk_call.py", "openai-chat", base, true)
            .args(["--model", "gpt-oss-20b"])
            .run()
            .unwrap()
    };
    let direct = call(&upstream.openai_base_url());
    let through = call(&base("openai-chat", &addr));
    // The SDK's stream helper refuses a `length` finish either way: the
    // client gets what a direct call gets, not a broken stream.
    assert_eq!(outcome(&through), outcome(&direct));
    assert_eq!(
        outcome(&direct)["error"],
        "LengthFinishReasonError",
        "{}",
        direct.stdout
    );
    // A retry is served what was kept.
    let retry = sdk(
        "sdk_call.py",
        "openai-chat",
        &base("openai-chat", &addr),
        true,
    )
    .args([
        "--model",
        "gpt-oss-20b",
        "--header",
        "x-stainless-retry-count:1",
    ])
    .run()
    .unwrap();
    assert_eq!(outcome(&retry), outcome(&direct));
    assert_eq!(upstream.count(), 2, "direct, and once through the gateway");
    stop(gw);
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["error"], Value::Null, "{}", calls[0]);
    assert_eq!(
        calls[0]["choices"],
        json!([{"index": 0, "stop_reason": "length"}])
    );
    assert_eq!(
        calls[0]["cost"],
        json!({"state": "unknown", "usd": null}),
        "never a zero"
    );
    assert_eq!(calls[1]["replay"], true);
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn every_choice_of_an_n_3_completion_is_on_the_model_call() {
    let upstream = Upstream::start(Script::sequence(vec![
        Reply::raw_json(fixture!("openai/n_choices.json")),
        Reply::raw_stream(fixture!("openai/n_choices.sse")),
    ]));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, None);
    for stream in [false, true] {
        let out = sdk(
            "sdk_call.py",
            "openai-chat",
            &base("openai-chat", &addr),
            stream,
        )
        .args(["--n", "3", "--model", "gpt-4.1-mini"])
        .run()
        .unwrap();
        assert!(
            out.success(),
            "stream={stream}: {}{}",
            out.stdout,
            out.stderr
        );
        assert_eq!(out.json().unwrap()["text"], "Red", "choice 0");
    }
    stop(gw);
    let want = json!([
        {"index": 0, "stop_reason": "stop"},
        {"index": 1, "stop_reason": "stop", "refusal": "I can’t pick for you."},
        {"index": 2, "stop_reason": "stop"},
    ]);
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 2);
    for c in calls {
        assert_eq!(c["choices"], want, "{c}");
        assert_eq!(c["usage"], json!({"input_tokens": 14, "output_tokens": 9}));
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn groq_usage_in_x_groq_is_recorded() {
    let upstream = Upstream::start(Script::always(Reply::raw_stream(fixture!(
        "openai/groq_usage_in_x_groq.sse"
    ))));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, None);
    // Without stream_options, Groq reports usage only in x_groq.
    let out = sdk(
        "sdk_call.py",
        "openai-chat",
        &base("openai-chat", &addr),
        true,
    )
    .args(["--no-usage", "--model", "moonshotai/kimi-k2-instruct-0905"])
    .run()
    .unwrap();
    assert!(out.success(), "{}", out.stderr);
    assert_eq!(out.json().unwrap()["text"], "Oi!");
    stop(gw);
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]["usage"],
        json!({"input_tokens": 20, "output_tokens": 3})
    );
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_refusals_stop_details_are_on_the_model_call_verbatim() {
    let upstream = Upstream::start(Script::always(Reply::raw_stream(fixture!(
        "anthropic/refusal_stop_details.sse"
    ))));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, None);
    let direct = sdk("sdk_call.py", "anthropic", &upstream.base_url(), true)
        .run()
        .unwrap();
    let through = sdk("sdk_call.py", "anthropic", &base("anthropic", &addr), true)
        .run()
        .unwrap();
    assert!(through.success(), "{}", through.stderr);
    assert_eq!(through.json().unwrap(), direct.json().unwrap());
    assert_eq!(through.json().unwrap()["stop"], "refusal");
    stop(gw);
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]["choices"],
        json!([{"index": 0, "stop_reason": "refusal", "stop_details": {
            "type": "refusal", "category": "cyber",
            "explanation": "This request was declined because it asks for working malware."}}])
    );
}
