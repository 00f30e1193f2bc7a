//! `cairn serve`: the server starts on loopback, answers, and refuses to
//! listen elsewhere without a token.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::Duration;

use common::Scratch;
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
    let script = s.script("one.json", json!([{"text": "hello"}]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "hi",
    ]);
    assert!(out.status.success());
    let id = s.only_session();

    let mut child = s
        .cmd()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
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
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");

    let out = s.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));
}
