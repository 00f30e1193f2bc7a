//! The clients of the gateway tests: the gateway as a child process, and
//! raw HTTP/1.1 (a library would normalise the paths and bodies these tests
//! send on purpose).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_testkit::upstream::Upstream;
use serde_json::{json, Value};

use crate::common::*;

/// `cairn gateway` on an ephemeral loopback port, both upstreams at
/// `upstream`, its stderr kept line by line.
pub(crate) struct Gw {
    pub(crate) child: Child,
    pub(crate) addr: String,
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Gw {
    pub(crate) fn start(s: &Scratch, upstream: &Upstream, extra: &[&str]) -> Gw {
        Gw::start_with(s, upstream, extra, |_| {})
    }

    pub(crate) fn start_with(
        s: &Scratch,
        upstream: &Upstream,
        extra: &[&str],
        adjust: impl FnOnce(&mut std::process::Command),
    ) -> Gw {
        let mut cmd = s.cmd();
        cmd.args([
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--openai-upstream",
            &upstream.openai_base_url(),
            "--anthropic-upstream",
            &upstream.base_url(),
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        adjust(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let kept = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("cairn gateway listening on http://")
            .unwrap_or_else(|| panic!("no address in {line:?}; stderr: {}", stderr.lock().unwrap()))
            .to_string();
        Gw {
            child,
            addr,
            stderr,
        }
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr holds `text`.
    pub(crate) fn wait_stderr(&self, secs: u64, text: &str) {
        wait_until(secs, &format!("{text:?} on the gateway's stderr"), || {
            self.stderr().contains(text)
        });
    }

    /// Waits for the gateway to exit, at most `secs`; its exit code.
    pub(crate) fn wait_exit(&mut self, secs: u64) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the gateway still runs {secs} s later; stderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn signal(&mut self, signal: i32) {
        kill(&mut self.child, signal);
    }
}

impl Drop for Gw {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill(&mut self.child, libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// One HTTP/1.1 exchange on a connection of its own: the status, the
/// response's head and its body (chunked or not).
pub(crate) fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    send(&mut conn, addr, method, path, headers, body);
    read_answer(&mut BufReader::new(conn))
}

pub(crate) fn send(
    conn: &mut TcpStream,
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\n",
        body.len()
    );
    // As SDKs send it (a recorded route takes JSON only), unless a test
    // says otherwise.
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("content-type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    // A connection the gateway closed shows in the answer read next.
    let _ = conn
        .write_all(head.as_bytes())
        .and_then(|()| conn.write_all(body));
}

#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
    /// The body ended early: the connection closed or broke inside it.
    pub(crate) broken: bool,
}

pub(crate) fn read_answer(r: &mut BufReader<TcpStream>) -> Answer {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if matches!(r.read_line(&mut line), Ok(0) | Err(_)) {
            // No whole head: status 0, and what came of it.
            return Answer {
                status: 0,
                head,
                body: String::new(),
                broken: true,
            };
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let lower = head.to_ascii_lowercase();
    let mut body = Vec::new();
    let mut broken = false;
    if lower.contains("transfer-encoding: chunked") {
        loop {
            let mut size = String::new();
            if r.read_line(&mut size).unwrap_or(0) == 0 {
                broken = true;
                break;
            }
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0u8; n + 2];
            if r.read_exact(&mut chunk).is_err() {
                broken = true;
                break;
            }
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(len) = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|l| l.trim().parse::<usize>().ok())
    {
        body.resize(len, 0);
        broken = r.read_exact(&mut body).is_err();
    }
    Answer {
        status,
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
        broken,
    }
}

/// A chat completion request, not streamed.
pub(crate) fn chat(content: &str) -> Vec<u8> {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]})
        .to_string()
        .into_bytes()
}

pub(crate) const AUTH: (&str, &str) = ("authorization", "Bearer sk-cairn-test");

/// Every byte of the store, as text (to search for a leaked secret).
pub(crate) fn store_text(s: &Scratch) -> String {
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

/// Every `model_call` record in the store.
pub(crate) fn model_calls(s: &Scratch) -> Vec<Value> {
    let mut out = Vec::new();
    for r in std::fs::read_dir(s.store.join("runs"))
        .into_iter()
        .flatten()
    {
        let id = r.unwrap().file_name().into_string().unwrap();
        out.extend(
            s.records_so_far(&id)
                .into_iter()
                .filter(|r| r["kind"] == "model_call"),
        );
    }
    out
}

/// A chat completion request, streamed.
pub(crate) fn chat_streamed(content: &str) -> Vec<u8> {
    json!({"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": content}]})
        .to_string()
        .into_bytes()
}

/// Sends a streamed call on a thread; what the client got, once the
/// gateway answers or closes.
pub(crate) fn call_in_background(addr: &str, content: &str) -> std::thread::JoinHandle<String> {
    let (addr, body) = (addr.to_string(), chat_streamed(content));
    std::thread::spawn(move || {
        let mut conn = TcpStream::connect(&addr).unwrap();
        send(
            &mut conn,
            &addr,
            "POST",
            "/v1/chat/completions",
            &[AUTH],
            &body,
        );
        let mut got = Vec::new();
        let _ = conn.read_to_end(&mut got);
        String::from_utf8_lossy(&got).into_owned()
    })
}

/// A client on one kept-alive connection.
pub(crate) struct KeepAlive {
    pub(crate) conn: BufReader<TcpStream>,
    pub(crate) addr: String,
}

impl KeepAlive {
    pub(crate) fn connect(addr: &str) -> KeepAlive {
        let conn = TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        KeepAlive {
            conn: BufReader::new(conn),
            addr: addr.to_string(),
        }
    }

    pub(crate) fn call(&mut self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        send(self.conn.get_mut(), &self.addr, "POST", path, headers, body);
        read_answer(&mut self.conn)
    }
}
