//! Helpers shared by the harness's own tests: a raw HTTP/1.1 client that
//! shows exactly what came over the wire, and the SDK scripts.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use cairn_testkit::python::{self, ScriptOutput};
use serde_json::Value;

/// What came back over one connection, read to its close.
#[derive(Debug)]
pub struct Raw {
    /// Everything received, byte for byte.
    pub bytes: Vec<u8>,
    /// How long until the server closed the connection.
    pub closed_after: Duration,
}

impl Raw {
    /// The status line and headers (empty when nothing came).
    pub fn head(&self) -> String {
        match find(&self.bytes, b"\r\n\r\n") {
            Some(end) => String::from_utf8_lossy(&self.bytes[..end]).into_owned(),
            None => String::from_utf8_lossy(&self.bytes).into_owned(),
        }
    }

    pub fn status(&self) -> u16 {
        self.head()
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    fn raw_body(&self) -> &[u8] {
        match find(&self.bytes, b"\r\n\r\n") {
            Some(end) => &self.bytes[end + 4..],
            None => &[],
        }
    }

    pub fn is_chunked(&self) -> bool {
        self.head()
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
    }

    /// The body with chunked framing removed, and whether the terminating
    /// zero-size chunk arrived.
    pub fn body(&self) -> (Vec<u8>, bool) {
        let raw = self.raw_body();
        if !self.is_chunked() {
            return (raw.to_vec(), true);
        }
        let mut body = Vec::new();
        let mut rest = raw;
        loop {
            let Some(line_end) = find(rest, b"\r\n") else {
                return (body, false);
            };
            let size_text = String::from_utf8_lossy(&rest[..line_end]);
            let Ok(size) = usize::from_str_radix(size_text.trim(), 16) else {
                return (body, false);
            };
            rest = &rest[line_end + 2..];
            if size == 0 {
                return (body, rest.starts_with(b"\r\n"));
            }
            let take = size.min(rest.len());
            body.extend_from_slice(&rest[..take]);
            if take < size {
                return (body, false);
            }
            rest = &rest[take..];
            rest = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        }
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body().0).into_owned()
    }

    /// The SSE events in the body (each ends at a blank line).
    pub fn events(&self) -> Vec<String> {
        let text = self.body_text();
        let mut events: Vec<String> = text.split("\n\n").map(str::to_owned).collect();
        // What follows the last blank line is not a whole event.
        events.pop();
        events
    }
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Sends one request with `Connection: close` and reads until the server
/// closes the connection.
pub fn raw_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Raw {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        request.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let started = Instant::now();
    stream.write_all(request.as_bytes()).expect("write");
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            // A reset ends the connection as surely as a close.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the response: {e} (after {:?})", started.elapsed()),
        }
    }
    Raw {
        bytes,
        closed_after: started.elapsed(),
    }
}

/// `sdk_call.py` with `args`, against `base_url`.
pub fn sdk_call(api: &str, base_url: &str, args: &[&str]) -> ScriptOutput {
    script("sdk_call.py", api, base_url, args)
}

/// `retry_call.py` with `args`, against `base_url`.
pub fn retry_call(api: &str, base_url: &str, args: &[&str]) -> ScriptOutput {
    script("retry_call.py", api, base_url, args)
}

fn script(name: &str, api: &str, base_url: &str, args: &[&str]) -> ScriptOutput {
    let python = python::interpreter().unwrap_or_else(|e| panic!("{e}"));
    python
        .script(name)
        .args(["--api", api, "--base-url", base_url])
        .args(args)
        .run()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The script's JSON, which must say it succeeded.
pub fn ok_json(out: &ScriptOutput) -> Value {
    let json = out.json().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.success(),
        "the script failed: {json}\nstderr:\n{}",
        out.stderr
    );
    json
}

/// The base URL each API's SDK is given for a server at `root`
/// (`http://127.0.0.1:PORT`).
pub fn base_for(api: &str, root: &str) -> String {
    if api.starts_with("anthropic") {
        root.to_owned()
    } else {
        format!("{root}/v1")
    }
}

pub const APIS: [&str; 3] = ["openai-chat", "openai-responses", "anthropic"];

/// The route each API posts to.
pub fn route(api: &str) -> &'static str {
    match api {
        "openai-chat" => "/v1/chat/completions",
        "openai-responses" => "/v1/responses",
        _ => "/v1/messages",
    }
}
