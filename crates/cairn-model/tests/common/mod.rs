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
