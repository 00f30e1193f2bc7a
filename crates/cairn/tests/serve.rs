//! `cairn serve`: the server starts on loopback, answers, and refuses to
//! listen elsewhere without a token.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{Scratch, Served};
use serde_json::json;

fn get(addr: &str, path: &str, extra: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_lists_the_stores_sessions_and_guards_itself() {
    let s = Scratch::new();
    ran(&s, "one.json", json!([{"text": "hello"}]), "hi");
    let id = s.only_session();

    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let list = get(&addr, "/v1/sessions", "");
    assert!(list.starts_with("HTTP/1.1 200"), "{list}");
    assert!(list.contains(&id), "{list}");
    let mut s2 = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s2,
        "GET /v1/sessions HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut refused = String::new();
    s2.read_to_string(&mut refused).unwrap();
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    let viewer = get(&addr, "/", "");
    assert!(viewer.contains("<title>cairn</title>"), "{viewer}");
    let status = served.stop();
    assert!(status.success(), "{status:?}");

    let out = s.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));
}

fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status: u16 = out[9..12].parse().unwrap();
    let json = out
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(serde_json::Value::Null);
    (status, json)
}

fn wait_status(addr: &str, id: &str, want: &str) -> serde_json::Value {
    let start = std::time::Instant::now();
    loop {
        let (code, v) = request(addr, "GET", &format!("/v1/sessions/{id}"), None);
        assert_eq!(code, 200, "{v}");
        if v["status"] == want {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "status stayed {}",
            v["status"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `cairn run TASK` in the terminal with the model script `turns`
/// (written as `file`), to its end.
fn ran(s: &Scratch, file: &str, turns: serde_json::Value, task: &str) {
    let script = s.script(file, turns);
    let model = format!("script:{}", script.display());
    let out = s.run(&["run", "--model", &model, task]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn runs_started_resumed_suspended_rewound_and_checkpointed_over_http() {
    let s = Scratch::new();
    let script = s.script(
        "served.json",
        json!([
            {"text": "Writing.", "tool_calls": [common::call("w", "write_file", json!({"path": "a.txt", "content": "A\n"}))]},
            {"text": "Done."},
            {"text": "Again, done."}
        ]),
    );
    let model = format!("script:{}", script.display());
    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let ws = s.ws.display().to_string();

    let (code, v) = request(
        &addr,
        "POST",
        "/v1/sessions",
        Some(&json!({"task": "write a.txt", "workspace": ws, "model": model})),
    );
    assert_eq!(code, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    wait_status(&addr, &id, "completed");
    assert_eq!(s.read("a.txt"), "A\n");

    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{id}/resume"),
        Some(&json!({"text": "once more"})),
    );
    assert_eq!(code, 202, "{v}");
    let start = std::time::Instant::now();
    while !(s
        .records(&id)
        .last()
        .is_some_and(|r| r["kind"] == "terminal")
        && s.records(&id)
            .iter()
            .filter(|r| r["kind"] == "assistant")
            .count()
            == 3)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the resumed run did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let shown = wait_status(&addr, &id, "completed");
    assert_eq!(shown["turns"], 3);
    let records = s.records(&id);
    assert!(records
        .iter()
        .any(|r| r["kind"] == "user" && r["text"] == "once more"));

    // Not running here: a suspend is refused.
    let (code, v) = request(&addr, "POST", &format!("/v1/sessions/{id}/suspend"), None);
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["class"], "refused");

    // Rewind to before turn 1: a.txt goes, banked first.
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{id}/rewind"),
        Some(&json!({"to": "turn:1"})),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["deleted"], json!(["a.txt"]));
    assert!(!s.ws.join("a.txt").exists());
    let bank = v["bank"]["snapshot"].as_str().unwrap().to_string();
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{id}/rewind"),
        Some(&json!({"snapshot": bank})),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(s.read("a.txt"), "A\n", "the bank undid the rewind");

    // With `fork`, every check comes before the first change: a snapshot is
    // no point of the conversation to fork at, and nothing moves.
    std::fs::write(s.ws.join("a.txt"), "B\n").unwrap();
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{id}/rewind"),
        Some(&json!({"snapshot": bank, "fork": true})),
    );
    assert_eq!(code, 400, "{v}");
    assert_eq!(s.read("a.txt"), "B\n", "a refused rewind changed the files");
    std::fs::write(s.ws.join("a.txt"), "A\n").unwrap();
    // To a node: the files go back and a fork starts there.
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{id}/rewind"),
        Some(&json!({"to": "turn:1", "fork": true})),
    );
    assert_eq!(code, 200, "{v}");
    assert!(!s.ws.join("a.txt").exists());
    let child = v["fork"].as_str().expect("a fork id").to_string();
    let (code, f) = request(&addr, "GET", &format!("/v1/sessions/{child}"), None);
    assert_eq!(code, 200, "{f}");
    assert_eq!(f["parent"]["id"], json!(id), "{f}");
    let bank = v["bank"]["snapshot"].as_str().unwrap().to_string();
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{id}/rewind"),
        Some(&json!({"snapshot": bank})),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(s.read("a.txt"), "A\n");

    // A checkpoint, saved and restored.
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{id}/checkpoints"),
        None,
    );
    assert_eq!(code, 201, "{v}");
    let cp = v["id"].as_str().unwrap().to_string();
    std::fs::write(s.ws.join("a.txt"), "changed\n").unwrap();
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/checkpoints/{cp}/restore"),
        None,
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(s.read("a.txt"), "A\n");

    // A slow run, suspended after the step in flight.
    let slow = s.script(
        "slow.json",
        json!([
            {"text": "Waiting.", "tool_calls": [common::shell("z", "sleep 1")]},
            {"text": "never"}
        ]),
    );
    let (code, v) = request(
        &addr,
        "POST",
        "/v1/sessions",
        Some(
            &json!({"task": "wait", "workspace": ws, "model": format!("script:{}", slow.display())}),
        ),
    );
    assert_eq!(code, 201, "{v}");
    let slow_id = v["id"].as_str().unwrap().to_string();
    let (code, v) = request(
        &addr,
        "POST",
        &format!("/v1/sessions/{slow_id}/suspend"),
        None,
    );
    assert_eq!(code, 202, "{v}");
    wait_status(&addr, &slow_id, "suspended");

    let (code, v) = request(
        &addr,
        "POST",
        "/v1/sessions",
        Some(&json!({"task": "x", "workspace": "/no/such/dir", "model": "script:/x"})),
    );
    assert_eq!(code, 400, "{v}");
    drop(served);
}

#[test]
fn no_response_ever_contains_an_api_key() {
    let s = Scratch::new();
    ran(&s, "one.json", json!([{"text": "hello"}]), "hi");
    let id = s.only_session();
    let key = "sk-cairn-secret-7f3a9c";
    let served = Served::start(
        &s,
        &[
            ("OPENAI_API_KEY", key),
            ("ANTHROPIC_API_KEY", key),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ],
    );
    let addr = served.addr.clone();
    let ws = s.ws.display().to_string();
    // A run whose provider cannot be reached, with the key in the server's
    // environment: its error, its records and every route stay keyless.
    let (code, started) = request(
        &addr,
        "POST",
        "/v1/sessions",
        Some(&json!({"task": "t", "workspace": ws, "model": "openai:gpt-4.1"})),
    );
    let mut bodies = vec![started.to_string()];
    if code == 201 {
        let other = started["id"].as_str().unwrap().to_string();
        let start = std::time::Instant::now();
        while s
            .records(&other)
            .last()
            .is_none_or(|r| r["kind"] != "terminal")
        {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the run did not end"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        bodies.push(get(
            &addr,
            &format!("/v1/sessions/{other}/records?limit=1000"),
            "",
        ));
    }
    for path in [
        "/".to_string(),
        "/openapi.json".into(),
        "/v1/sessions".into(),
        format!("/v1/sessions/{id}"),
        format!("/v1/sessions/{id}/records?limit=1000"),
        format!("/v1/sessions/{id}/snapshots"),
        format!("/v1/sessions/{id}/checkpoints"),
    ] {
        bodies.push(get(&addr, &path, ""));
    }
    for b in &bodies {
        assert!(!b.contains(key), "a response holds the key: {b}");
    }
    let store = walk(&s.store);
    assert!(
        !store.iter().any(|b| b.contains(key)),
        "the store holds the key"
    );
    drop(served);
}

/// Every file under `dir`, as text.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push(String::from_utf8_lossy(&b).into_owned());
            }
        }
    }
    out
}

#[test]
fn a_snapshots_files_are_read_over_http_from_the_store_alone() {
    let s = Scratch::new();
    ran(
        &s,
        "w.json",
        json!([
            {"text": "writing", "tool_calls": [common::call("w", "write_file", json!({"path": "src/hello.txt", "content": "hello, world\n"}))]},
            {"text": "done"}
        ]),
        "write hello",
    );
    let id = s.only_session();
    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let (code, snaps) = request(&addr, "GET", &format!("/v1/sessions/{id}/snapshots"), None);
    assert_eq!(code, 200, "{snaps}");
    let newest = snaps[0]["id"].as_str().unwrap().to_string();
    let oldest = snaps.as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The workspace directory is not read: the store holds what is shown.
    std::fs::remove_dir_all(&s.ws).unwrap();

    let (code, tree) = request(
        &addr,
        "GET",
        &format!("/v1/sessions/{id}/snapshots/{newest}/tree"),
        None,
    );
    assert_eq!(code, 200, "{tree}");
    assert_eq!(
        tree,
        json!([{"path": "src/hello.txt", "size": 13, "mode": 0o644}])
    );
    let (code, old_tree) = request(
        &addr,
        "GET",
        &format!("/v1/sessions/{id}/snapshots/{oldest}/tree"),
        None,
    );
    assert_eq!((code, old_tree), (200, json!([])));
    let (code, file) = request(
        &addr,
        "GET",
        &format!("/v1/sessions/{id}/snapshots/{newest}/file?path=src/hello.txt"),
        None,
    );
    assert_eq!(code, 200, "{file}");
    assert_eq!(file["text"], "hello, world\n");
    assert_eq!(file["binary"], false);
    let (code, diff) = request(
        &addr,
        "GET",
        &format!("/v1/sessions/{id}/diff?from={oldest}&to={newest}"),
        None,
    );
    assert_eq!(code, 200, "{diff}");
    assert_eq!(diff[0]["path"], "src/hello.txt");
    assert_eq!(diff[0]["added"], 1);

    for (path, want) in [
        (
            format!("/v1/sessions/{id}/snapshots/{newest}/file?path=nope.txt"),
            404,
        ),
        (
            format!("/v1/sessions/{id}/snapshots/{oldest}/file?path=src/hello.txt"),
            404,
        ),
        (
            format!("/v1/sessions/{id}/snapshots/not-a-snapshot/tree"),
            400,
        ),
        (format!("/v1/sessions/{id}/snapshots/{newest}/file"), 400),
    ] {
        let (code, body) = request(&addr, "GET", &path, None);
        assert_eq!(code, want, "{path}: {body}");
        assert!(body["error"]["message"].is_string(), "{path}: {body}");
    }
    drop(served);
}

#[test]
fn the_rewind_to_a_message_previews_goes_back_and_is_undone_over_http() {
    let s = Scratch::new();
    ran(
        &s,
        "w.json",
        json!([
            {"text": "writing", "tool_calls": [common::call("w", "write_file", json!({"path": "hello.txt", "content": "hello\n"}))]},
            {"text": "done"}
        ]),
        "write hello",
    );
    let id = s.only_session();
    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let base = format!("/v1/sessions/{id}");

    let (code, points) = request(&addr, "GET", &format!("{base}/rewind-points"), None);
    assert_eq!(code, 200, "{points}");
    assert_eq!(points.as_array().unwrap().len(), 1, "{points}");
    assert_eq!(points[0]["text"], "write hello");
    assert_eq!(points[0]["name"], "turn:1");
    assert_eq!(points[0]["files"], json!(["hello.txt"]));
    let seq = points[0]["seq"].as_u64().unwrap();

    let (code, preview) = request(
        &addr,
        "POST",
        &format!("{base}/rewind-preview"),
        Some(&json!({"seq": seq})),
    );
    assert_eq!(code, 200, "{preview}");
    assert_eq!(preview["changes"][0]["path"], "hello.txt");
    assert_eq!(preview["changes"][0]["change"], "deleted");
    assert!(s.ws.join("hello.txt").exists(), "a preview changes no file");

    let (code, done) = request(
        &addr,
        "POST",
        &format!("{base}/rewind-point"),
        Some(&json!({"seq": seq, "action": "code"})),
    );
    assert_eq!(code, 200, "{done}");
    assert_eq!(done["report"]["deleted"], json!(["hello.txt"]));
    assert_eq!(done["fork"], serde_json::Value::Null);
    assert!(!s.ws.join("hello.txt").exists());
    let bank = done["report"]["bank"]["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, undone) = request(
        &addr,
        "POST",
        &format!("{base}/rewind"),
        Some(&json!({"snapshot": bank})),
    );
    assert_eq!(code, 200, "{undone}");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("hello.txt")).unwrap(),
        "hello\n"
    );

    let (code, forked) = request(
        &addr,
        "POST",
        &format!("{base}/rewind-point"),
        Some(&json!({"seq": seq, "action": "conversation"})),
    );
    assert_eq!(code, 200, "{forked}");
    assert!(forked["report"].is_null(), "{forked}");
    let child = forked["fork"].as_str().unwrap();
    let (code, shown) = request(&addr, "GET", &format!("/v1/sessions/{child}"), None);
    assert_eq!(code, 200, "{shown}");
    assert_eq!(shown["parent"]["id"], id.as_str());
    assert_eq!(
        shown["parent"]["seq"],
        seq - 1,
        "the fork is just before the message"
    );

    for (body, want) in [
        (json!({"seq": 1, "action": "code"}), 400),
        (json!({"seq": seq, "action": "sideways"}), 400),
        (json!({"action": "code"}), 400),
    ] {
        let (code, answer) = request(&addr, "POST", &format!("{base}/rewind-point"), Some(&body));
        assert_eq!(code, want, "{body}: {answer}");
        assert!(answer["error"]["message"].is_string(), "{answer}");
    }
    drop(served);
}

#[test]
fn a_served_run_asks_over_http_and_hears_the_answer() {
    let s = Scratch::new();
    let script = s.script(
        "asks.json",
        json!([
            {"text": "write", "tool_calls": [common::call("y", "write_file", json!({"path": "yes.txt", "content": "yes\n"}))]},
            {"text": "done"},
            {"text": "again", "tool_calls": [common::call("z", "write_file", json!({"path": "no.txt", "content": "no\n"}))]},
            {"text": "left it"}
        ]),
    );
    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let ws = s.ws.display().to_string();
    let model = format!("script:{}", script.display());
    let (code, bad) = request(
        &addr,
        "POST",
        "/v1/sessions",
        Some(&json!({"task": "t", "workspace": ws, "model": model, "approve": "always"})),
    );
    assert_eq!(code, 400, "{bad}");
    let (code, started) = request(
        &addr,
        "POST",
        "/v1/sessions",
        Some(&json!({"task": "t", "workspace": ws, "model": model, "approve": "writes"})),
    );
    assert_eq!(code, 201, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    let path = format!("/v1/sessions/{id}/approval");
    let question = question_about(&addr, &id, "y");
    assert_eq!(question["call"]["name"], "write_file");
    assert!(
        question["preview"].as_str().unwrap().contains("+yes"),
        "{question}"
    );
    assert!(
        !s.ws.join("yes.txt").exists(),
        "nothing runs before the answer"
    );
    let call = question["call"]["id"].as_str().unwrap();
    for (body, want) in [
        (json!({"call": "another", "decision": "run"}), 409),
        (json!({"call": call, "decision": "maybe"}), 400),
    ] {
        let (code, answer) = request(&addr, "POST", &path, Some(&body));
        assert_eq!(code, want, "{body}: {answer}");
    }
    let (code, answer) = request(
        &addr,
        "POST",
        &path,
        Some(&json!({"call": call, "decision": "run"})),
    );
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["heard"], true);
    wait_status(&addr, &id, "completed");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("yes.txt")).unwrap(),
        "yes\n"
    );
    let (_, after) = request(&addr, "GET", &path, None);
    assert!(after.is_null(), "{after}");
    // A resume asks too, when told to.
    let resume = format!("/v1/sessions/{id}/resume");
    let (code, bad) = request(
        &addr,
        "POST",
        &resume,
        Some(&json!({"text": "more", "approve": "sometimes"})),
    );
    assert_eq!(code, 400, "{bad}");
    let (code, resumed) = request(
        &addr,
        "POST",
        &resume,
        Some(&json!({"text": "more", "approve": "writes"})),
    );
    assert_eq!(code, 202, "{resumed}");
    question_about(&addr, &id, "z");
    let (code, answer) = request(
        &addr,
        "POST",
        &path,
        Some(&json!({"call": "z", "decision": "decline"})),
    );
    assert_eq!(code, 200, "{answer}");
    wait_status(&addr, &id, "completed");
    assert!(!s.ws.join("no.txt").exists(), "a declined write ran");
    drop(served);
}

/// The question a session waits on, once it asks one about `call`.
fn question_about(addr: &str, id: &str, call: &str) -> serde_json::Value {
    let since = std::time::Instant::now();
    loop {
        let (code, q) = request(addr, "GET", &format!("/v1/sessions/{id}/approval"), None);
        assert_eq!(code, 200, "{q}");
        if q["call"]["id"] == call {
            return q;
        }
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "no question about {call}: {q}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_run_asking_in_a_terminal_is_answered_from_the_page_then_from_its_terminal() {
    use std::process::Stdio;
    let s = Scratch::new();
    let script = s.script(
        "terminal.json",
        json!([
            {"text": "one", "tool_calls": [common::shell("c1", "echo one > one.txt")]},
            {"text": "two", "tool_calls": [common::shell("c2", "echo two > two.txt")]},
            {"text": "done"}
        ]),
    );
    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let model = format!("script:{}", script.display());
    let mut run = s
        .cmd()
        .args(["run", "--approve", "shell", "--model", &model, "task"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held open: the terminal's prompt waits for a line that does not come.
    let mut stdin = run.stdin.take().unwrap();
    let runs = s.store.join("runs");
    let since = std::time::Instant::now();
    let id = loop {
        let found: Vec<String> = std::fs::read_dir(&runs)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        if let [one] = found.as_slice() {
            break one.clone();
        }
        assert!(since.elapsed() < Duration::from_secs(30), "no session");
        std::thread::sleep(Duration::from_millis(50));
    };
    let path = format!("/v1/sessions/{id}/approval");
    let q = question_about(&addr, &id, "c1");
    assert_eq!(q["call"]["name"], "shell", "{q}");
    assert!(
        !s.ws.join("one.txt").exists(),
        "nothing runs before the answer"
    );
    let (code, answer) = request(
        &addr,
        "POST",
        &path,
        Some(&json!({"call": "c1", "decision": "run"})),
    );
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["heard"], true, "{answer}");
    // The next question is answered on the terminal, by the line typed
    // after it (the read the first prompt began is the one that hears it).
    question_about(&addr, &id, "c2");
    stdin.write_all(b"n\n").unwrap();
    drop(stdin);
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("cairn: answered from the viewer: run"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(s.ws.join("one.txt")).unwrap(),
        "one\n"
    );
    assert!(!s.ws.join("two.txt").exists(), "the terminal declined it");
    let outcomes: Vec<_> = s
        .records(&id)
        .into_iter()
        .filter(|r| r["kind"] == "tool_result")
        .map(|r| (r["call"].clone(), r["outcome"].clone()))
        .collect();
    assert_eq!(
        outcomes,
        [(json!("c1"), json!("ok")), (json!("c2"), json!("refused"))]
    );
    // Nothing is left waiting, and nothing is left in the session's
    // directory to be mistaken for a question.
    let (_, after) = request(&addr, "GET", &path, None);
    assert!(after.is_null(), "{after}");
    for f in ["question.json", "answer.json"] {
        assert!(!runs.join(&id).join(f).exists(), "{f} left behind");
    }
    drop(served);
}

#[test]
fn a_search_finds_what_the_sessions_said_and_where() {
    let s = Scratch::new();
    for (file, text, output) in [
        ("a.json", "the FIRST answer", "echo alpha"),
        ("b.json", "the second answer", "echo beta-output"),
    ] {
        ran(
            &s,
            file,
            json!([
                {"text": text, "tool_calls": [common::shell("c", output)]},
                {"text": "done"}
            ]),
            "a task",
        );
    }
    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let (code, found) = request(&addr, "GET", "/v1/search?q=first%20ANSWER", None);
    assert_eq!(code, 200, "{found}");
    assert_eq!(found["complete"], true);
    assert_eq!(found["searched"], 2);
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{found}");
    assert_eq!(hits[0]["kind"], "assistant");
    assert_eq!(hits[0]["excerpt"], "the FIRST answer");
    let id = hits[0]["id"].as_str().unwrap();
    let records = s.records(id);
    let seq = hits[0]["seq"].as_u64().unwrap();
    assert_eq!(records[seq as usize - 1]["text"], "the FIRST answer");
    // Tool output is searched too; a bound stops early and says so.
    let (_, found) = request(&addr, "GET", "/v1/search?q=beta-output", None);
    assert_eq!(found["hits"][0]["kind"], "tool_result", "{found}");
    let (_, found) = request(&addr, "GET", "/v1/search?q=answer&limit=1", None);
    assert_eq!(found["hits"].as_array().unwrap().len(), 1);
    assert_eq!(found["complete"], false);
    for path in [
        "/v1/search?q=",
        "/v1/search?q=%20%20",
        "/v1/search?q=x&limit=0",
    ] {
        let (code, body) = request(&addr, "GET", path, None);
        assert_eq!(code, 400, "{path}: {body}");
    }
    drop(served);
}
