//! `cairn gateway` and `cairn exec --gateway` with the official SDKs as
//! unmodified clients (DESIGN §7): what they get equals a direct call's, a
//! cut or a crash never buys a call twice, and an SDK agent's session holds
//! its model calls and its file changes.
//!
//! These tests are `#[ignore]`d: they need the pinned SDKs
//! (`crates/cairn-testkit/python/requirements.txt`), which `.ci/run`
//! installs and names in `CAIRN_TEST_PYTHON`; `cargo test -- --ignored`
//! runs them (building `target/cairn-test-venv` from PyPI when
//! `CAIRN_TEST_PYTHON` is unset).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use cairn_testkit::python::{self, Python, ScriptCommand};
use cairn_testkit::relay::Relay;
use cairn_testkit::upstream::{Cut, Reply, Script, Upstream};
use common::*;
use serde_json::{json, Value};

fn py() -> Python {
    python::interpreter().unwrap_or_else(|e| panic!("{e}"))
}

/// `cairn gateway` on an ephemeral loopback port, with both upstreams at
/// `upstream`; returns the child and its address.
fn gateway(
    s: &Scratch,
    upstream: &Upstream,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Child, String) {
    let listen = extra
        .iter()
        .position(|a| *a == "--listen")
        .map_or("127.0.0.1:0".to_string(), |i| extra[i + 1].to_string());
    let mut cmd = s.cmd();
    cmd.args([
        "gateway",
        "--listen",
        &listen,
        "--openai-upstream",
        &upstream.openai_base_url(),
        "--anthropic-upstream",
        &upstream.base_url(),
    ]);
    let mut skip = false;
    for a in extra {
        if skip {
            skip = false;
            continue;
        }
        if *a == "--listen" {
            skip = true;
            continue;
        }
        cmd.arg(a);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
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

fn sdk(api: &str, base: &str, stream: bool) -> ScriptCommand {
    let mut c = py()
        .script("sdk_call.py")
        .args(["--api", api, "--base-url", base, "--max-retries", "0"])
        .args(["--api-key", "sk-cairn-test"]);
    if stream {
        c = c.arg("--stream");
    }
    c
}

fn base_for(api: &str, addr: &str) -> String {
    if api == "anthropic" {
        format!("http://{addr}")
    } else {
        format!("http://{addr}/v1")
    }
}

/// Every `model_call` record in the store, in journal order per session.
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

fn stop(mut child: Child) {
    kill(&mut child, libc::SIGTERM);
    child.wait().unwrap();
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn each_sdk_through_the_gateway_gets_what_a_direct_call_gets() {
    let upstream = Upstream::start(Script::always(
        Reply::text("The answer is 42.")
            .in_deltas(7)
            .with_usage(21, 8),
    ));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, &[], &[]);
    let mut n = 0;
    for api in ["openai-chat", "openai-responses", "anthropic"] {
        for stream in [false, true] {
            let direct_base = if api == "anthropic" {
                upstream.base_url()
            } else {
                upstream.openai_base_url()
            };
            let direct = sdk(api, &direct_base, stream).run().unwrap();
            assert!(direct.success(), "{api} {stream}: {}", direct.stderr);
            let through = sdk(api, &base_for(api, &addr), stream).run().unwrap();
            assert!(through.success(), "{api} {stream}: {}", through.stderr);
            assert_eq!(
                through.json().unwrap(),
                direct.json().unwrap(),
                "{api} stream={stream}"
            );
            n += 1;
        }
    }
    stop(gw);
    let calls = model_calls(&s);
    assert_eq!(
        calls.len(),
        n,
        "one model_call per call through the gateway"
    );
    for c in &calls {
        assert_eq!(c["usage"]["input_tokens"], 21, "{c}");
        assert_eq!(c["usage"]["output_tokens"], 8, "{c}");
        assert_eq!(c["replay"], Value::Null, "{c}");
    }
    // The key never reaches the store.
    assert!(!store_bytes(&s).contains("sk-cairn-test"));
}

/// Every byte of the store, as text (to search for a leaked key).
fn store_bytes(s: &Scratch) -> String {
    fn walk(dir: &std::path::Path, out: &mut String) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push_str(&String::from_utf8_lossy(&b));
            }
        }
    }
    let mut out = String::new();
    walk(&s.store, &mut out);
    out
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_connection_cut_mid_stream_is_bought_once_and_the_retry_gets_the_same_bytes() {
    // Events 50 ms apart: the cut falls well inside the stream.
    let upstream = Upstream::start(Script::always(
        Reply::text("one two three four five six")
            .in_deltas(6)
            .event_delay(Duration::from_millis(50))
            .with_usage(10, 6),
    ));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, &[], &[]);
    let relay = Relay::start(addr.parse().unwrap());
    // The client's connection is cut after 3 events; the SDK gives up on a
    // cut stream, and the application calls again (retry count 0).
    relay.cut_next(Cut::AfterEvents(3));
    let out = py()
        .script("retry_call.py")
        .args([
            "--api",
            "openai-chat",
            "--stream",
            "--base-url",
            &relay.openai_base_url(),
        ])
        .run()
        .unwrap();
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let v = out.json().unwrap();
    let attempts = v["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{v}");
    assert_eq!(attempts[0]["ok"], false);
    assert_eq!(attempts[1]["ok"], true);
    assert!(upstream.wait_for_finished(1, Duration::from_secs(10)));
    assert_eq!(upstream.count(), 1, "the call was bought once");
    // The retry got what a direct call gets.
    let direct = sdk("openai-chat", &upstream.openai_base_url(), true)
        .run()
        .unwrap();
    assert_eq!(v["result"], direct.json().unwrap());
    stop(gw);
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["delivered"], "client_gone");
    assert_eq!(calls[1]["replay"], true);
    assert_eq!(calls[1]["cost"]["state"], "zero");

    // The SDK's own retry (x-stainless-retry-count: 1) after a cut before
    // any response byte, and a retry without streaming (as Claude Code
    // does): each served from the store.
    let upstream = Upstream::start(Script::always(Reply::text("again").with_usage(4, 1)));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, &[], &[]);
    let relay = Relay::start(addr.parse().unwrap());
    relay.cut_next(Cut::BeforeResponse);
    let out = sdk("anthropic", &relay.base_url(), false)
        .args(["--max-retries", "2"])
        .run()
        .unwrap();
    assert!(out.success(), "{}", out.stderr);
    assert!(upstream.wait_for_finished(1, Duration::from_secs(10)));
    assert_eq!(upstream.count(), 1);
    relay.cut_next(Cut::AfterEvents(2));
    let out = py()
        .script("retry_call.py")
        .args([
            "--api",
            "anthropic",
            "--stream",
            "--retry-without-stream",
            "--prompt",
            "a second question",
            "--base-url",
            &relay.base_url(),
        ])
        .run()
        .unwrap();
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.json().unwrap()["result"]["text"], "again");
    assert!(upstream.wait_for_finished(2, Duration::from_secs(10)));
    assert_eq!(upstream.count(), 2, "the second question was bought once");
    stop(gw);
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_gateway_killed_before_the_final_event_serves_the_retry_from_the_store_after_restart() {
    let upstream = Upstream::start(Script::always(
        Reply::text("kept through a crash")
            .in_deltas(4)
            .with_usage(9, 4),
    ));
    let s = Scratch::new();
    let (gw, addr) = gateway(
        &s,
        &upstream,
        &[],
        &[("CAIRN_FAULT", "stall-before-final-event")],
    );
    let mut call = sdk("openai-chat", &base_for("openai-chat", &addr), true)
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(upstream.wait_for_finished(1, Duration::from_secs(20)));
    wait_until(20, "the model_call record", || model_calls(&s).len() == 1);
    let mut gw = gw;
    kill(&mut gw, libc::SIGKILL);
    gw.wait().unwrap();
    let _ = call.wait();
    // Restarted on the same address, the same request (a fresh one, retry
    // count 0) is served from the store: its response was never delivered.
    let (gw, addr2) = gateway(&s, &upstream, &["--listen", &addr], &[]);
    assert_eq!(addr2, addr);
    let out = sdk("openai-chat", &base_for("openai-chat", &addr), true)
        .run()
        .unwrap();
    assert!(out.success(), "{}", out.stderr);
    assert_eq!(out.json().unwrap()["text"], "kept through a crash");
    assert_eq!(upstream.count(), 1, "not bought again");
    stop(gw);
    // (Two sessions: the restarted gateway files the retry in a new one.)
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls.iter().filter(|c| c["replay"] == true).count(),
        1,
        "{calls:?}"
    );
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_fresh_identical_request_after_a_complete_delivery_is_bought_again() {
    let upstream = Upstream::start(Script::always(Reply::text("sample").with_usage(3, 1)));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, &[], &[]);
    for _ in 0..2 {
        let out = sdk(
            "openai-responses",
            &base_for("openai-responses", &addr),
            true,
        )
        .run()
        .unwrap();
        assert!(out.success(), "{}", out.stderr);
    }
    assert_eq!(upstream.count(), 2, "a deliberate new sample goes upstream");
    stop(gw);
    // --replay always: a cassette, every match served.
    let (gw, addr) = gateway(&s, &upstream, &["--replay", "always"], &[]);
    let out = sdk(
        "openai-responses",
        &base_for("openai-responses", &addr),
        true,
    )
    .run()
    .unwrap();
    assert!(out.success(), "{}", out.stderr);
    assert_eq!(upstream.count(), 2, "served from the store");
    // --offline: a miss is an error naming the key, never an upstream call.
    stop(gw);
    let (gw, addr) = gateway(&s, &upstream, &["--offline"], &[]);
    let out = sdk("openai-chat", &base_for("openai-chat", &addr), false)
        .args(["--prompt", "never asked before"])
        .run()
        .unwrap();
    assert!(!out.success());
    assert!(out.stdout.contains("offline"), "{}", out.stdout);
    assert_eq!(upstream.count(), 2);
    stop(gw);
}

/// The pid of `parent`'s first child process.
fn child_of(parent: u32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn an_sdk_agent_under_exec_gateway_killed_and_rerun_buys_nothing_twice() {
    let upstream = Upstream::start(Script::by_turn(vec![
        Reply::tool_call(
            "write_file",
            json!({"path": "hello.txt", "content": "hello\n"}),
        )
        .with_usage(30, 5),
        // Slow: the agent is killed while this answer streams.
        Reply::tool_call(
            "write_file",
            json!({"path": "notes.txt", "content": "notes\n"}),
        )
        .in_deltas(20)
        .event_delay(Duration::from_millis(100))
        .with_usage(40, 6),
        Reply::text("Both files are written.").with_usage(50, 7),
    ]));
    let s = Scratch::new();
    std::fs::write(s.ws.join("kept.txt"), "the operator's\n").unwrap();
    let agent = python::script_path("agent.py");
    let py_path = py().path().to_owned();
    let run_exec = |run: Option<&str>| {
        let mut c = s.cmd();
        c.env("OPENAI_BASE_URL", upstream.openai_base_url())
            .env("OPENAI_API_KEY", "sk-cairn-test")
            .arg("exec");
        if let Some(r) = run {
            c.args(["--run", r]);
        }
        c.args(["--gateway", "--json", "--"])
            .arg(&py_path)
            .arg(&agent)
            .args(["--stream"]);
        c
    };
    let exec = run_exec(None)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Turn 1 done and its file written; turn 2 is streaming.
    assert!(upstream.wait_for_requests(2, Duration::from_secs(30)));
    wait_until(10, "hello.txt", || s.ws.join("hello.txt").exists());
    let agent_pid = child_of(exec.id()).expect("the agent's pid");
    unsafe {
        libc::kill(agent_pid, libc::SIGKILL);
    }
    let out = exec.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(137),
        "exec exits as its command did"
    );
    assert!(upstream.wait_for_finished(2, Duration::from_secs(20)));
    let id = s.only_session();

    // Run again: turn 1 is a fresh sample (delivered before), turn 2 is
    // served from the store (its client was killed), turn 3 is bought.
    let out = run_exec(Some(&id)).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("notes.txt"), "notes\n");
    let turn2 = upstream.requests().iter().filter(|r| r.turn() == 1).count();
    assert_eq!(
        turn2, 1,
        "the answer the killed agent never got was not bought again"
    );
    let recs = s.records(&id);
    let calls: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "model_call").collect();
    assert!(
        calls.iter().any(|c| c["delivered"] == "client_gone"),
        "{calls:?}"
    );
    assert!(calls.iter().any(|c| c["replay"] == true), "{calls:?}");
    // The node boundaries hold the agent's files; rewind undoes them.
    let labels: Vec<&str> = recs
        .iter()
        .filter(|r| r["kind"] == "snapshot")
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert!(
        labels.contains(&"pre:exec:1") && labels.contains(&"post:exec:2"),
        "{labels:?}"
    );
    let out = s.run(&["rewind", &id, "--to", "exec:1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!s.ws.join("hello.txt").exists());
    assert!(!s.ws.join("notes.txt").exists());
    assert_eq!(s.read("kept.txt"), "the operator's\n");
    assert!(
        !store_bytes(&s).contains("sk-cairn-test"),
        "the key reached the store"
    );
}

/// A raw HTTP/1.1 POST (so the body is sent exactly as given); the status.
fn raw_post(addr: &str, path: &str, body: &[u8]) -> u16 {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nauthorization: Bearer sk-cairn-test\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(body).unwrap();
    let mut reply = String::new();
    let _ = conn.read_to_string(&mut reply);
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_malformed_body_goes_upstream_untouched_and_verify_and_rm_know_the_calls() {
    let upstream = Upstream::start(Script::sequence(vec![
        Reply::fail(400),
        Reply::text("fine").with_usage(2, 1),
    ]));
    let s = Scratch::new();
    let (gw, addr) = gateway(&s, &upstream, &["--name", "checked"], &[]);
    assert_eq!(raw_post(&addr, "/v1/chat/completions", b"{not json"), 400);
    let direct = sdk("openai-chat", &base_for("openai-chat", &addr), false)
        .run()
        .unwrap();
    assert!(direct.success(), "{}", direct.stderr);
    stop(gw);
    assert_eq!(
        upstream.requests()[0].body,
        b"{not json",
        "passed on untouched"
    );
    let id = s.only_session();
    let calls: Vec<Value> = s
        .records(&id)
        .into_iter()
        .filter(|r| r["kind"] == "model_call")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0]["status"], 400,
        "the upstream's error is on the record"
    );
    assert!(calls[0]["response"].is_string());
    // verify checks the bodies a model_call names.
    assert!(s.run(&["verify", &id]).status.success());
    let hash = calls[1]["response"].as_str().unwrap();
    std::fs::remove_file(s.store.join("objects").join(&hash[..2]).join(&hash[2..])).unwrap();
    let out = s.run(&["verify", &id, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(json(&out.stdout)["problem"]
        .as_str()
        .unwrap()
        .contains("model_call at seq"));
    // rm removes the session's stored responses (they hold prompts).
    let stored = |s: &Scratch| {
        let store = cairn_store::Store::open(&s.store).unwrap();
        cairn_calls::ResponseStore::new(&store)
            .entries()
            .unwrap()
            .len()
    };
    assert_eq!(stored(&s), 1);
    let out = s.run(&["session", "rm", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stored(&s), 0);
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_providers_error_inside_a_200_reaches_each_sdk_as_it_does_direct() {
    use cairn_testkit::upstream::fixtures::PROVIDER_ERRORS;
    for f in PROVIDER_ERRORS {
        let upstream = Upstream::start(Script::always(f.reply()));
        let s = Scratch::new();
        let (gw, addr) = gateway(&s, &upstream, &[], &[]);
        let api = f.api.sdk_name();
        let direct_base = if api == "anthropic" {
            upstream.base_url()
        } else {
            upstream.openai_base_url()
        };
        let direct = sdk(api, &direct_base, f.stream).run().unwrap();
        let through = sdk(api, &base_for(api, &addr), f.stream).run().unwrap();
        assert!(!direct.success(), "{}: {}", f.name, direct.stdout);
        let (direct, through) = (direct.json().unwrap(), through.json().unwrap());
        assert_eq!(through, direct, "{}: what the SDK raised", f.name);
        // The provider's message, not a broken connection.
        let said = serde_json::to_string(f.message).unwrap();
        let said = &said[1..said.len() - 1];
        assert!(through.to_string().contains(said), "{}: {through}", f.name);
        assert!(
            !through.to_string().contains("Connection error"),
            "{}: {through}",
            f.name
        );
        stop(gw);
        let calls = model_calls(&s);
        assert_eq!(calls.len(), 1, "{}: {calls:?}", f.name);
        assert_eq!(calls[0]["status"], 200, "{}", f.name);
        assert!(
            calls[0]["error"]
                .as_str()
                .unwrap_or_default()
                .contains(f.message),
            "{}: {}",
            f.name,
            calls[0]
        );
        assert_eq!(calls[0]["delivered"], "complete", "{}", f.name);
        assert_eq!(
            upstream.count(),
            2,
            "{}: one direct call, one bought",
            f.name
        );
    }
}

/// Sends the request `sdk_call.py --api openai-chat` sends (the same key)
/// on a raw connection, reads `read` bytes of the answer and closes: with a
/// reset when `reset` (SO_LINGER 0), else cleanly.
fn raw_chat_then_close(addr: &str, read: usize, reset: bool) {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let body =
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello."}]})
            .to_string();
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nauthorization: Bearer sk-cairn-test\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(body.as_bytes()).unwrap();
    let mut got = vec![0u8; read];
    conn.read_exact(&mut got).unwrap();
    if reset {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        let rc = unsafe {
            libc::setsockopt(
                conn.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                std::ptr::addr_of!(linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "SO_LINGER");
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_whole_response_its_client_never_took_is_served_to_the_sdks_retry() {
    for size in [1usize << 10, 1 << 20] {
        let upstream = Upstream::start(Script::always(
            Reply::text(&"word ".repeat(size / 5)).with_usage(10, 20),
        ));
        let s = Scratch::new();
        let (gw, addr) = gateway(&s, &upstream, &[], &[]);
        // A client that read 40% of the body and died (its close resets the
        // connection): the SDK's call, a fresh one, is served from the store.
        raw_chat_then_close(&addr, size * 2 / 5, true);
        let out = sdk("openai-chat", &base_for("openai-chat", &addr), false)
            .run()
            .unwrap();
        assert!(out.success(), "{size} B: {}", out.stderr);
        assert!(out.json().unwrap()["text"]
            .as_str()
            .unwrap()
            .starts_with("word word"));
        assert_eq!(upstream.count(), 1, "{size} B: not bought again");
        // That one the SDK read whole and closed: the next is a new sample.
        let key = model_calls(&s)[1]["key"].as_str().unwrap().to_owned();
        let responses =
            cairn_calls::ResponseStore::new(&cairn_store::Store::open(&s.store).unwrap());
        wait_until(10, "the delivery mark", || {
            responses
                .get(&key)
                .unwrap()
                .is_some_and(|r| r.entry.delivered)
        });
        let out = sdk("openai-chat", &base_for("openai-chat", &addr), false)
            .run()
            .unwrap();
        assert!(out.success(), "{size} B: {}", out.stderr);
        assert_eq!(upstream.count(), 2, "{size} B: a new sample");
        stop(gw);
        let calls = model_calls(&s);
        assert_eq!(calls.len(), 3, "{size} B: {calls:?}");
        assert_eq!(calls[1]["replay"], true, "{size} B");
    }
}
