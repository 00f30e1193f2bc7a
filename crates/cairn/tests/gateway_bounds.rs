//! `cairn gateway` at its edges (DESIGN §7), black box: what it refuses to
//! start with, which requests never go upstream, the resources a client can
//! make it hold, and how it stops.

#[path = "gateway_bounds/client.rs"]
mod client;
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_testkit::upstream::{Reply, Script, Upstream};
use client::*;
use common::{kill, kinds, read_until_closed, wait_until, Scratch};
use serde_json::Value;

#[test]
fn an_upstream_carrying_credentials_is_refused_before_anything_runs_and_never_echoed() {
    let upstream = Upstream::start(Script::always(Reply::text("hi")));
    let s = Scratch::new();
    let secret = "sk-upstream-secret-77";
    let url = format!("http://user:{secret}@{}/v1", upstream.addr());
    let bare = format!("http://{secret}@{}", upstream.addr());
    type Try<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let tries: Vec<Try> = vec![
        (vec!["--openai-upstream", &url], Vec::new()),
        (vec!["--anthropic-upstream", &bare], Vec::new()),
        (Vec::new(), vec![("OPENAI_BASE_URL", url.as_str())]),
    ];
    for (flags, env) in tries {
        let mut cmd = s.cmd();
        cmd.args(["gateway", "--listen", "127.0.0.1:0"])
            .args(&flags)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let started = child.try_wait().unwrap().is_none();
        if started {
            kill(&mut child, libc::SIGKILL);
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!started, "the gateway started with {flags:?} {env:?}");
        assert_eq!(out.status.code(), Some(2), "{flags:?} {env:?}: {err}");
        assert!(err.contains("credentials"), "{err}");
        assert!(!err.contains(secret), "the secret was echoed: {err}");
    }
    // `exec --gateway` refuses it from the environment before the command
    // runs (with exec's own failure code).
    let out = s
        .cmd()
        .env("OPENAI_BASE_URL", &url)
        .args(["exec", "--gateway", "--", "sh", "-c", "echo ran > ran.txt"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("credentials"), "{err}");
    assert!(!err.contains(secret), "the secret was echoed: {err}");
    assert!(!s.ws.join("ran.txt").exists(), "the command ran");
    assert!(
        !store_text(&s).contains(secret),
        "the secret reached the store"
    );
    assert_eq!(upstream.count(), 0);
}

#[test]
fn a_path_another_server_could_read_as_a_recorded_route_never_goes_upstream() {
    let upstream = Upstream::start(Script::always(Reply::text("bought").with_usage(3, 1)));
    let s = Scratch::new();
    let gw = Gw::start(&s, &upstream, &["--name", "paths"]);
    let disguised = [
        "/v1/x/../chat/completions",
        "/v1/./chat/completions",
        "/v1//chat/completions",
        "/v1/chat/completions/",
        "/v1/x/%2e%2e/chat/completions",
        "/v1/x/%2E./chat/completions",
        "/v1/%2e/chat/completions",
        "/v1/x/..;/chat/completions",
        "/v1/x/%252e%252e/chat/completions",
        "/v1/chat%2Fcompletions",
        "/v1/chat%2fcompletions",
        "/v1/chat%5Ccompletions",
        "/v1/Chat/Completions",
        "/v1/chat/c%6fmpletions",
        "/v1/chat/completions;x",
        "/v1/messages/..",
        "/v1/x/%EF%BC%8E%EF%BC%8E/chat/completions",
    ];
    for path in disguised {
        let a = exchange(&gw.addr, "POST", path, &[AUTH], &chat(path));
        assert_eq!(a.status, 400, "{path}: {a:?}");
        assert!(a.body.contains("path"), "{path}: {}", a.body);
    }
    assert_eq!(upstream.count(), 0, "{:?}", upstream.requests());
    // The plain routes still work: one recorded, one passed through.
    let a = exchange(
        &gw.addr,
        "POST",
        "/v1/chat/completions",
        &[AUTH],
        &chat("hi"),
    );
    assert_eq!(a.status, 200, "{a:?}");
    let a = exchange(&gw.addr, "GET", "/v1/models", &[AUTH], b"");
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(upstream.count(), 2);
    assert_eq!(model_calls(&s).len(), 1);
}

#[test]
fn under_offline_nothing_goes_upstream_not_even_a_pass_through() {
    let upstream = Upstream::start(Script::always(Reply::text("bought")));
    let s = Scratch::new();
    let gw = Gw::start(&s, &upstream, &["--name", "offline", "--offline"]);
    for (method, path, body) in [
        ("GET", "/v1/models", Vec::new()),
        ("POST", "/v1/messages/count_tokens", b"{}".to_vec()),
        ("POST", "/v1/embeddings", b"{}".to_vec()),
        ("POST", "/v1/chat/completions", chat("never bought")),
    ] {
        let a = exchange(&gw.addr, method, path, &[AUTH], &body);
        assert_eq!(a.status, 503, "{method} {path}: {a:?}");
        assert!(a.body.contains("offline"), "{}", a.body);
    }
    assert_eq!(upstream.count(), 0, "{:?}", upstream.requests());
}

#[test]
fn an_upstream_response_over_the_limits_is_not_kept_and_fails_its_model_call() {
    let big = "x".repeat(3 << 20);
    let upstream = Upstream::start(Script::from_fn(move |req| {
        match req.json().unwrap()["messages"][0]["content"]
            .as_str()
            .unwrap()
        {
            "big event" => Reply::text(&big).in_deltas(1),
            "many events" => Reply::deltas(200_000),
            _ => Reply::text(&big),
        }
    }));
    let s = Scratch::new();
    let gw = Gw::start(
        &s,
        &upstream,
        &[
            "--name",
            "limits",
            "--max-response-mb",
            "2",
            "--max-event-mb",
            "1",
        ],
    );
    // A whole body that declares its length is refused before it is read.
    let a = exchange(
        &gw.addr,
        "POST",
        "/v1/chat/completions",
        &[AUTH],
        &chat("whole"),
    );
    assert_eq!(a.status, 502, "{}", a.head);
    assert!(a.body.contains("--max-response-mb"), "{}", a.body);
    // A stream with one event over --max-event-mb, and one over
    // --max-response-mb in small events: cut, the end never sent.
    for what in ["big event", "many events"] {
        let a = exchange(
            &gw.addr,
            "POST",
            "/v1/chat/completions",
            &[AUTH],
            &chat_streamed(what),
        );
        assert_eq!(a.status, 200, "{what}: {}", a.head);
        assert!(a.broken, "{what}: the client saw a whole response");
        assert!(!a.body.contains("[DONE]"), "{what}");
    }
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 3, "{calls:?}");
    for (c, limit) in calls
        .iter()
        .zip(["--max-response-mb", "--max-event-mb", "--max-response-mb"])
    {
        let error = c["error"].as_str().unwrap_or_default();
        assert!(error.contains(limit), "{c}");
    }
    let store = cairn_store::Store::open(&s.store).unwrap();
    assert!(
        cairn_calls::ResponseStore::new(&store)
            .entries()
            .unwrap()
            .is_empty(),
        "a response over a limit was kept as servable"
    );
}

/// An upstream that answers every request with a stream whose one line
/// never ends, written in 64 KiB chunks until the reader goes away (or
/// `give_up` bytes); returns its address and the bytes it got written.
fn endless_line_upstream(give_up: usize) -> (String, Arc<Mutex<Option<usize>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let written = Arc::new(Mutex::new(None));
    let out = written.clone();
    std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let mut r = BufReader::new(conn);
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).unwrap();
        let mut conn = r.into_inner();
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        conn.write_all(head.as_bytes()).unwrap();
        let mut total = 0;
        let chunk = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
        let start = "data: {\"x\": \"";
        let _ = conn.write_all(format!("{:x}\r\n{start}\r\n", start.len()).as_bytes());
        while total < give_up && conn.write_all(chunk.as_bytes()).is_ok() {
            total += 0x10000;
        }
        *out.lock().unwrap() = Some(total);
    });
    (addr, written)
}

#[test]
fn an_upstream_line_that_never_ends_is_read_only_to_the_limit() {
    let (up, written) = endless_line_upstream(256 << 20);
    let s = Scratch::new();
    let mut cmd = s.cmd();
    cmd.args([
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--name",
        "endless",
        "--max-event-mb",
        "1",
        "--openai-upstream",
        &format!("http://{up}/v1"),
    ]);
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = out;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("cairn gateway listening on http://")
        .unwrap()
        .to_string();
    let a = exchange(
        &addr,
        "POST",
        "/v1/chat/completions",
        &[AUTH],
        &chat_streamed("endless"),
    );
    assert!(a.broken && a.body.is_empty(), "{a:?}");
    wait_until(60, "the upstream to stop writing", || {
        written.lock().unwrap().is_some()
    });
    let total = written.lock().unwrap().unwrap();
    // What the kernel's socket buffers take besides the limit.
    assert!(
        total < 32 << 20,
        "the gateway read {total} bytes of one line"
    );
    wait_until(20, "the failed call on the record", || {
        model_calls(&s).len() == 1
    });
    let c = &model_calls(&s)[0];
    assert!(
        c["error"].as_str().unwrap().contains("--max-event-mb"),
        "{c}"
    );
    kill(&mut child, libc::SIGKILL);
    let _ = child.wait();
}

#[test]
fn a_half_sent_request_is_not_held_past_the_timeouts() {
    let upstream = Upstream::start(Script::always(Reply::text("x")));
    let s = Scratch::new();
    let gw = Gw::start(
        &s,
        &upstream,
        &[
            "--name",
            "slow",
            "--header-timeout",
            "1s",
            "--body-timeout",
            "1s",
        ],
    );
    // Nothing at all.
    let started = Instant::now();
    let mut conn = TcpStream::connect(&gw.addr).unwrap();
    let got = read_until_closed(&mut conn, 20);
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 408"), "{got}");
    // Half a head.
    let mut conn = TcpStream::connect(&gw.addr).unwrap();
    conn.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-le")
        .unwrap();
    let got = read_until_closed(&mut conn, 20);
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 408"), "{got}");
    // Half a body.
    let mut conn = TcpStream::connect(&gw.addr).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{}",
        gw.addr,
        " ".repeat(50)
    );
    conn.write_all(head.as_bytes()).unwrap();
    let got = read_until_closed(&mut conn, 20);
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("--body-timeout"), "{got}");
    // A kept-alive connection left idle after its request.
    let mut conn = TcpStream::connect(&gw.addr).unwrap();
    send(&mut conn, &gw.addr, "GET", "/", &[], b"");
    let got = read_until_closed(&mut conn, 20);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeouts took {:?}",
        started.elapsed()
    );
    assert_eq!(upstream.count(), 0);
}

#[test]
fn no_more_connections_than_the_cap_are_served_and_the_next_is_once_one_closes() {
    let upstream = Upstream::start(Script::always(Reply::text("x")));
    let s = Scratch::new();
    let gw = Gw::start(
        &s,
        &upstream,
        &[
            "--name",
            "capped",
            "--max-connections",
            "2",
            "--header-timeout",
            "120s",
        ],
    );
    // Two connections that say nothing hold the two places.
    let first = TcpStream::connect(&gw.addr).unwrap();
    let second = TcpStream::connect(&gw.addr).unwrap();
    // A third is left waiting: its request is not answered...
    let mut third = TcpStream::connect(&gw.addr).unwrap();
    send(
        &mut third,
        &gw.addr,
        "GET",
        "/",
        &[("connection", "close")],
        b"",
    );
    third
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut byte = [0u8; 1];
    let waited = third.read(&mut byte);
    assert!(
        matches!(&waited, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "a third connection was served past a cap of 2: {waited:?}"
    );
    // ...until one of the two closes.
    drop(first);
    let got = read_until_closed(&mut third, 30);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    for _ in 0..3 {
        let a = exchange(&gw.addr, "GET", "/", &[], b"");
        assert_eq!(a.status, 200, "{a:?}");
    }
    drop(second);
    assert_eq!(upstream.count(), 0);
}

/// The answer to a stalled call: held for an hour before its status line.
fn stalling_upstream() -> Upstream {
    Upstream::start(Script::from_fn(|req| {
        let text = req.json().unwrap()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        match text.as_str() {
            "stall" => Reply::text("late").sleep_first(Duration::from_secs(3600)),
            "slow" => Reply::text("one two three four five six seven eight nine ten")
                .event_delay(Duration::from_millis(300))
                .with_usage(4, 10),
            _ => Reply::text("kept").with_usage(2, 1),
        }
    }))
}

#[test]
fn a_stop_waits_for_a_stalled_call_and_a_second_signal_stops_at_once_naming_it() {
    let upstream = stalling_upstream();
    let s = Scratch::new();
    let mut gw = Gw::start(&s, &upstream, &["--name", "stalled", "--stop-grace", "10m"]);
    let a = exchange(
        &gw.addr,
        "POST",
        "/v1/chat/completions",
        &[AUTH],
        &chat("kept"),
    );
    assert_eq!(a.status, 200, "{a:?}");
    let client = call_in_background(&gw.addr, "stall");
    assert!(upstream.wait_for_requests(2, Duration::from_secs(20)));
    gw.signal(libc::SIGINT);
    gw.wait_stderr(
        20,
        "waiting up to 10m for 1 call(s) still reading their upstream",
    );
    assert!(
        gw.stderr()
            .contains("POST /v1/chat/completions (gpt-4o-mini) for session"),
        "{}",
        gw.stderr()
    );
    assert!(
        gw.child.try_wait().unwrap().is_none(),
        "it did not wait: {}",
        gw.stderr()
    );
    gw.signal(libc::SIGINT);
    assert_eq!(gw.wait_exit(20), Some(1), "{}", gw.stderr());
    let err = gw.stderr();
    assert!(err.contains("1 call(s) were not stored"), "{err}");
    assert!(!client.join().unwrap().contains("late"));
    // What was durable stays durable, and the session is ended.
    let id = s.only_session();
    let records = s.records(&id);
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["status"], 200);
    let last = records.last().unwrap();
    assert_eq!(last["kind"], "terminal", "{last}");
    assert_eq!(last["reason"], "interrupted", "{last}");
    let out = s.run(&["verify", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_stop_gives_up_on_a_stalled_call_after_its_grace() {
    let upstream = stalling_upstream();
    let s = Scratch::new();
    let mut gw = Gw::start(&s, &upstream, &["--stop-grace", "1s"]);
    let client = call_in_background(&gw.addr, "stall");
    assert!(upstream.wait_for_requests(1, Duration::from_secs(20)));
    gw.signal(libc::SIGTERM);
    assert_eq!(gw.wait_exit(30), Some(1), "{}", gw.stderr());
    let err = gw.stderr();
    assert!(err.contains("waiting up to 1s"), "{err}");
    assert!(err.contains("1 call(s) were not stored"), "{err}");
    client.join().unwrap();
    // The session the gateway made for the call is ended.
    let id = s.only_session();
    assert_eq!(s.records(&id).last().unwrap()["kind"], "terminal");
}

#[test]
fn a_call_that_finishes_within_the_grace_is_kept_and_delivered() {
    let upstream = stalling_upstream();
    let s = Scratch::new();
    let mut gw = Gw::start(&s, &upstream, &["--name", "slow"]);
    let client = call_in_background(&gw.addr, "slow");
    assert!(upstream.wait_for_requests(1, Duration::from_secs(20)));
    gw.signal(libc::SIGTERM);
    assert_eq!(gw.wait_exit(60), Some(0), "{}", gw.stderr());
    assert!(gw.stderr().contains("waiting up to 30s"), "{}", gw.stderr());
    let got = client.join().unwrap();
    assert!(got.contains("[DONE]"), "{got}");
    let calls = model_calls(&s);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["error"], Value::Null, "{}", calls[0]);
    let id = s.only_session();
    let last = s.records(&id).last().cloned().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["reason"].as_str()),
        (Some("terminal"), Some("completed"))
    );
}

#[test]
fn ten_thousand_client_sessions_fit_in_a_thousand_descriptors() {
    const CLIENTS: usize = 10_000;
    const THREADS: usize = 8;
    let upstream = Upstream::start(Script::always(Reply::text("ok").with_usage(1, 1)));
    let s = Scratch::new();
    let gw = Gw::start_with(&s, &upstream, &[], |cmd| {
        use std::os::unix::process::CommandExt;
        // Fsyncs skipped (test builds only): this is about descriptors, and
        // 10,000 sessions' worth of fsyncs would take minutes.
        cmd.env("CAIRN_FAULT", "skip-fsync");
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 1024,
                    rlim_max: 1024,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let failures = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (addr, failures) = (gw.addr.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut client = KeepAlive::connect(&addr);
                for i in (t..CLIENTS).step_by(THREADS) {
                    let id = format!("codex-{i:05}");
                    let a = client.call(
                        "/v1/chat/completions",
                        &[AUTH, ("session-id", &id)],
                        &chat(&format!("call {i}")),
                    );
                    if a.status != 200 {
                        failures.lock().unwrap().push(format!("{id}: {a:?}"));
                        return;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let failures = failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // A client whose session was closed while idle is continued in it.
    let mut client = KeepAlive::connect(&gw.addr);
    let a = client.call(
        "/v1/chat/completions",
        &[AUTH, ("session-id", "codex-00000")],
        &chat("again"),
    );
    assert_eq!(a.status, 200, "{a:?}");
    let runs: Vec<_> = std::fs::read_dir(s.store.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs.len(), CLIENTS);
    let again = runs
        .iter()
        .map(|id| s.records(id))
        .find(|r| r[0]["name"] == "Codex session codex-00000")
        .unwrap();
    let kinds = kinds(&again);
    assert_eq!(
        kinds,
        ["meta", "model_call", "terminal", "model_call"],
        "{again:?}"
    );
}

#[test]
fn what_a_client_names_reaches_the_gateways_log_with_its_controls_escaped() {
    let upstream = Upstream::start(Script::always(Reply::text("hi").with_usage(3, 1)));
    let s = Scratch::new();
    let gw = Gw::start(&s, &upstream, &["--name", "log"]);
    // A model name that would reorder the log line on a terminal.
    let body = serde_json::json!({
        "model": "gpt-4o\u{202e}ini-m",
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string();
    let a = exchange(
        &gw.addr,
        "POST",
        "/v1/chat/completions",
        &[AUTH],
        body.as_bytes(),
    );
    assert_eq!(a.status, 200, "{a:?}");
    gw.wait_stderr(20, "gpt-4o\\u{202e}ini-m");
    let err = gw.stderr();
    assert!(
        !err.chars().any(|c| c == '\u{202e}' || c == '\u{1b}'),
        "{err:?}"
    );
}
