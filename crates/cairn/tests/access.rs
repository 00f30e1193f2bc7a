//! Who may call `cairn serve` and `cairn gateway` (DESIGN §8, "What a web
//! page can do: nothing"): an empty token refused at start, and in a real
//! browser (headless Chromium driven by playwright-core, `tests/browser/`)
//! another site's page that can change and read nothing, and the viewer
//! behind a token with its login.
//!
//! The browser tests need `/usr/bin/chromium`, `node` and playwright-core
//! (the directory holding its `node_modules` in `CAIRN_PLAYWRIGHT_DIR`,
//! default `target/ci-playwright`); `.ci/run` installs them. Run with
//! `--ignored`; they fail when a part is missing.

mod common;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{Scratch, Served};
use serde_json::{json, Value};

#[test]
fn serve_and_gateway_refuse_an_empty_token_at_start() {
    let s = Scratch::new();
    for args in [
        &["serve", "--token", ""][..],
        &["serve", "--listen", "0.0.0.0:0", "--token", ""],
        &["serve", "--listen", "127.0.0.1:0", "--token", "  "],
        &["gateway", "--token", ""],
        &["gateway", "--listen", "0.0.0.0:0", "--token", ""],
    ] {
        let out = s.run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--token is empty"), "{args:?}: {err}");
    }
    // The environment's token too: set to nothing, it is not "no token".
    let mut child = s
        .cmd()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("CAIRN_SERVE_TOKEN", "")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    common::wait_until(30, "serve to refuse an empty CAIRN_SERVE_TOKEN", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.unwrap().code(), Some(2), "{err}");
    assert!(err.contains("CAIRN_SERVE_TOKEN"), "{err}");
}

/// A request to `addr` with `extra` header lines; its status line's code.
fn status_of(addr: &str, request_line: &str, extra: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{request_line} HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out[9..12].parse().unwrap()
}

#[test]
fn the_gateway_takes_its_token_from_the_environment_so_ps_does_not_show_it() {
    use std::io::BufRead;
    let s = Scratch::new();
    let mut child = s
        .cmd()
        .args(["gateway", "--listen", "127.0.0.1:0"])
        .args(["--openai-upstream", "http://127.0.0.1:9/v1"])
        .env("CAIRN_GATEWAY_TOKEN", "gw-env-token-31c7")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("cairn gateway listening on http://")
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let without = status_of(&addr, "GET /v1/models", "");
    let with = status_of(
        &addr,
        "GET /v1/models",
        "x-cairn-token: gw-env-token-31c7\r\n",
    );
    common::kill(&mut child, libc::SIGTERM);
    let _ = child.wait();
    assert_eq!(without, 401, "no token");
    assert_eq!(with, 502, "admitted, then the dead upstream");
}

/// The directory holding playwright-core, or a failure naming what is missing.
fn playwright() -> PathBuf {
    let dir = std::env::var_os("CAIRN_PLAYWRIGHT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ci-playwright")
        });
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: .ci/run installs it (apt-get install chromium)"
    );
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is missing from {} (CAIRN_PLAYWRIGHT_DIR): .ci/run installs it",
        dir.display()
    );
    assert!(
        Command::new("node").arg("--version").output().is_ok(),
        "node is missing: .ci/run installs it"
    );
    dir
}

/// Runs `tests/browser/SCRIPT ARGS…` in node; its stdout, or a failure
/// with everything it said.
fn node(script: &str, args: &[&str]) -> String {
    let pw = playwright();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser")
        .join(script);
    let out = Command::new("node")
        .arg(&path)
        .args(args)
        .env("CAIRN_PLAYWRIGHT_DIR", pw)
        .output()
        .unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script}: {said}");
    said
}

/// A GET through the API as a program sends it (no Origin): status, JSON.
fn api(addr: &str, path: &str) -> (u16, Value) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, body)
}

#[test]
#[ignore = "needs Chromium and playwright-core: .ci/run installs them"]
fn a_page_from_another_origin_changes_nothing_and_reads_nothing() {
    let s = Scratch::new();
    let script = s.script(
        "one.json",
        json!([
            {"text": "Writing.", "tool_calls": [common::call("w", "write_file", json!({"path": "f.txt", "content": "saved\n"}))]},
            {"text": "Done."}
        ]),
    );
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "write f.txt",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.only_session();
    let out = s.run(&["checkpoint", "save", &id, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cp = common::json(&out.stdout)["id"]
        .as_str()
        .unwrap()
        .to_string();
    // What a restore would undo, were one to run.
    std::fs::write(s.ws.join("f.txt"), "changed since\n").unwrap();
    let records = s.records(&id).len();

    let served = Served::start(&s, &[]);
    let addr = served.addr.clone();
    let (_, before) = api(&addr, "/v1/sessions");
    assert_eq!(before.as_array().unwrap().len(), 1);

    let said = node("attacker.mjs", &[&served.base(), &id, &cp]);
    assert!(said.contains("evil.example"), "{said}");
    eprintln!("{said}");

    let (status, after) = api(&addr, "/v1/sessions");
    assert_eq!(status, 200);
    assert_eq!(
        after.as_array().unwrap().len(),
        1,
        "no fork, no new session: {after}"
    );
    assert_eq!(
        after[0]["status"], before[0]["status"],
        "no run resumed or suspended"
    );
    assert_eq!(s.records(&id).len(), records, "nothing was journaled");
    let (_, cps) = api(&addr, &format!("/v1/sessions/{id}/checkpoints"));
    assert_eq!(
        cps.as_array().unwrap().len(),
        1,
        "no checkpoint was saved: {cps}"
    );
    assert_eq!(
        s.read("f.txt"),
        "changed since\n",
        "no restore or rewind ran"
    );
    drop(served);
}

#[test]
#[ignore = "needs Chromium and playwright-core: .ci/run installs them"]
fn behind_a_token_a_browser_logs_in_lists_and_follows_a_live_session() {
    let s = Scratch::new();
    let script = s.script("one.json", json!([{"text": "hello"}]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "hi",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let slow = s.script(
        "slow.json",
        json!([
            {"text": "step one", "tool_calls": [common::shell("a", "sleep 1.5")]},
            {"text": "step two", "tool_calls": [common::shell("b", "sleep 1.5")]},
            {"text": "step three"}
        ]),
    );
    let token = "cairn-test-token-8f2b41";
    let served = Served::start_with(&s, &["--listen", "0.0.0.0:0", "--token", token], &[]);
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    assert!(served.addr.starts_with("0.0.0.0:"), "{}", served.addr);
    // Reached at a loopback address of the machine; the server listens on
    // every address, so only the token admits.
    let base = format!("http://127.0.0.1:{port}");
    let (status, _) = api(&format!("127.0.0.1:{port}"), "/v1/sessions");
    assert_eq!(status, 401, "no token, no list");
    let said = node(
        "login.mjs",
        &[
            &base,
            token,
            &s.ws.display().to_string(),
            &slow.display().to_string(),
        ],
    );
    assert!(said.contains("login test: ok"), "{said}");
    drop(served);
}
