//! Helpers shared by the provider suites: SSE bodies, a recording sink, response
//! sequences for a mock server.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cairn_model::{ProviderConfig, RetryPolicy, StreamSink};
use serde_json::Value;
use wiremock::{Request, Respond, ResponseTemplate};

/// A config whose retries wait a few milliseconds at most.
pub fn fast_config(max_retries: u32) -> ProviderConfig {
    ProviderConfig::with_retry(RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(2),
        max_delay: Duration::from_millis(10),
    })
}

/// `data: {json}` events, each ended by a blank line, with `line_end` endings.
pub fn data_events(events: &[Value], line_end: &str) -> String {
    events
        .iter()
        .map(|e| format!("data: {e}{line_end}{line_end}"))
        .collect()
}

/// Named events: `event: NAME` then `data: {json}`.
pub fn named_events(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            let name = e["type"].as_str().unwrap_or("message");
            format!("event: {name}\ndata: {e}\n\n")
        })
        .collect()
}

/// A 200 response carrying `body` as `text/event-stream`.
pub fn sse(body: impl Into<String>) -> ResponseTemplate {
    let body: String = body.into();
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_raw(body.into_bytes(), "text/event-stream")
}

/// A JSON error response.
pub fn error_response(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

/// Answers the n-th request with the n-th template; the last one repeats.
pub struct Sequence {
    responses: Vec<ResponseTemplate>,
    seen: AtomicUsize,
}

impl Sequence {
    pub fn new(responses: Vec<ResponseTemplate>) -> Sequence {
        Sequence {
            responses,
            seen: AtomicUsize::new(0),
        }
    }
}

impl Respond for Sequence {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.seen.fetch_add(1, Ordering::SeqCst);
        self.responses[n.min(self.responses.len() - 1)].clone()
    }
}

/// A sink that records each delta and each restart.
#[derive(Debug, Default)]
pub struct Recorder {
    pub deltas: Vec<String>,
    pub restarts: u32,
}

impl StreamSink for Recorder {
    fn text(&mut self, delta: &str) {
        self.deltas.push(delta.to_owned());
    }

    fn restart(&mut self) {
        self.restarts += 1;
        self.deltas.clear();
    }
}

/// Splits `text` into pieces of `size` characters.
pub fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The SSE body of fixture `name` (a path under `tests/fixtures/`).
pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// A mock server answering POSTs to `endpoint` with `fixtures` in turn (the
/// last one repeats).
pub async fn serve_fixtures(endpoint: &str, fixtures: &[&str]) -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    let responses = fixtures.iter().map(|name| sse(fixture(name))).collect();
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path(endpoint))
        .respond_with(Sequence::new(responses))
        .mount(&server)
        .await;
    server
}

/// The JSON bodies of every request the server received, in order.
pub async fn bodies(server: &wiremock::MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json().unwrap())
        .collect()
}

/// A tool with an open object schema.
pub fn tool(name: &str) -> cairn_model::ToolSpec {
    cairn_model::ToolSpec {
        name: name.into(),
        description: format!("The {name} tool"),
        parameters: serde_json::json!({"type": "object"}),
    }
}

/// The tool result answering every call of `response`.
pub fn results_for(
    response: &cairn_model::ModelResponse,
    output: &str,
) -> Vec<cairn_model::Message> {
    response
        .tool_calls
        .iter()
        .map(|call| cairn_model::Message::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output: output.into(),
            is_error: false,
        })
        .collect()
}

/// A raw HTTP server answering the n-th connection with the n-th body (the
/// last one repeats) as a chunked `text/event-stream`. A body marked `false`
/// is cut: the connection closes without the final chunk, so the client sees
/// a broken body rather than a clean end. Returns the base URL and the count
/// of requests served.
pub async fn dropping_server(bodies: Vec<(String, bool)>) -> (String, std::sync::Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let n = count.fetch_add(1, Ordering::SeqCst);
            let (body, finish) = bodies[n.min(bodies.len() - 1)].clone();
            // Read the whole request: headers, then content-length bytes.
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let read = socket.read(&mut buf).await.unwrap_or(0);
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..read]);
                let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let mut out = String::from(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            );
            out.push_str(&format!("{:x}\r\n{body}\r\n", body.len()));
            if finish {
                out.push_str("0\r\n\r\n");
            }
            let _ = socket.write_all(out.as_bytes()).await;
            let _ = socket.flush().await;
            drop(socket);
        }
    });
    (uri, served)
}
