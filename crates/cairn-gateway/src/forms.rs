//! The response forms of the three recorded APIs (DESIGN §7): streamed
//! (server-sent events) and whole (one JSON body), read as they pass and
//! converted into each other so a stored response can be served in the form a
//! retry asks for.
//!
//! | [`Api`] | route | final event | usage |
//! |---|---|---|---|
//! | [`Api::ChatCompletions`] | `/v1/chat/completions` | `data: [DONE]` (or a chunk carrying `error`) | the last usage reported, wherever the server puts it ([`cairn_model::chat_completion_usage`]: `usage`, a choice's `usage`, `x_groq.usage`): `prompt_tokens`, `completion_tokens` |
//! | [`Api::Responses`] | `/v1/responses` | `response.completed`, `response.incomplete`, `response.failed` or `error` (no `[DONE]` follows; one that does is held with it) | the final event's `response.usage`: `input_tokens`, `output_tokens` |
//! | [`Api::Messages`] | `/v1/messages` | `message_stop` or `error` | `message_start.message.usage`, then `message_delta.usage` field by field; input = `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens` |
//!
//! # Holding back the end
//!
//! [`StreamWatch`] is fed the upstream's bytes as they arrive, in any split,
//! and says which of them may be forwarded at once: [`StreamWatch::forwardable`]
//! is an offset such that
//!
//! 1. every byte before it belongs to a whole event that has been read and is
//!    not the final one (partial events are held until they are whole, since
//!    any of them could turn out to be the final one);
//! 2. once the final event has begun to arrive and been read, it is the
//!    offset where that event's block begins, for good: the final event and
//!    everything after it wait until the response is durable;
//! 3. it never decreases, and never passes the start of the final event;
//! 4. after [`StreamWatch::finish`], when no final event came (a provider that
//!    ends a chat stream without `[DONE]`), it is the whole stream: there is
//!    no event to hold, so what the server holds is the end of the body
//!    itself. (The end of the body always waits for durability.)
//!
//! # Completeness
//!
//! A response is complete ([`Parsed::complete`]) when the upstream finished
//! it, whatever the stop reason (a `max_tokens` or `length` cut is complete:
//! it is kept and replayed like any other):
//! - chat: no `error` chunk, and `[DONE]` was seen, or every choice seen has a
//!   `finish_reason` (the usage chunk may never come: a server ignoring
//!   `stream_options`, a client not asking for it; the usage is then unknown);
//! - Responses: `response.completed` or `response.incomplete` was seen, and
//!   no `error` event (`response.failed` is final but not a response to keep);
//! - Messages: `message_start` was seen, no `error` event, and `message_stop`
//!   or a stop reason was seen. A block still open then does not count: a
//!   real stream cut by `max_tokens` inside a `tool_use` block sends no
//!   `content_block_stop` for it.
//!
//! What a response says about each of its answers ([`Parsed::choices`]):
//! every chat choice by `index`, with its `finish_reason` and `refusal`; the
//! one message of the Messages API with its `stop_reason` and `stop_details`
//! (verbatim); the one response of the Responses API with its `status` and
//! `incomplete_details`.
//!
//! # Conversions
//!
//! [`stream_to_whole`] assembles the body the non-streamed call would have
//! returned; [`whole_to_stream`] writes a stream an SDK accepts for a whole
//! body. `stream_to_whole(whole_to_stream(w)) == w` for the bodies the APIs
//! return, and `stream → whole → stream → whole` is stable. The JSON written
//! has its object keys in sorted order; SDKs do not care.

mod chat;
mod messages;
mod responses;

use std::fmt;

use cairn_journal::{Choice, Usage};
use cairn_model::{FramedEvent, SseFramer};
use serde_json::Value;

/// One of the recorded APIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    /// OpenAI `POST /v1/chat/completions`.
    ChatCompletions,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// Anthropic `POST /v1/messages`.
    Messages,
}

impl Api {
    /// The recorded API a request path names (its query ignored): exactly
    /// `/v1/chat/completions`, `/v1/responses` or `/v1/messages`; `None` for
    /// any other path (those are passed through unrecorded).
    pub fn of_path(path: &str) -> Option<Api> {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        match path {
            "/v1/chat/completions" => Some(Api::ChatCompletions),
            "/v1/responses" => Some(Api::Responses),
            "/v1/messages" => Some(Api::Messages),
            _ => None,
        }
    }

    /// The route, `/v1/...`.
    pub fn path(self) -> &'static str {
        match self {
            Api::ChatCompletions => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
        }
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Api::ChatCompletions => "OpenAI chat completions",
            Api::Responses => "OpenAI responses",
            Api::Messages => "Anthropic messages",
        })
    }
}

/// What a response says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The tokens used, when the response reported them (rules in the module
    /// doc; a field missing from a usage object counts 0).
    pub usage: Option<Usage>,
    /// The model that answered, as the response names it.
    pub model: Option<String>,
    /// Whether the upstream finished the response (module doc).
    pub complete: bool,
    /// How each answer ended, in index order (module doc).
    pub choices: Vec<Choice>,
}

/// Why a stored response cannot be converted to the other form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormError {
    /// The stream ends before the response is complete.
    #[error(
        "the stored {api} stream is not a complete response (it ends before its final event): \
         it cannot be served as a whole body; send the request upstream"
    )]
    Incomplete {
        /// The API.
        api: Api,
    },
    /// The stream carries the upstream's error instead of a response.
    #[error(
        "the stored {api} stream ends in an upstream error ({message}): it has no whole form; \
         serve it as stored or send the request upstream"
    )]
    UpstreamError {
        /// The API.
        api: Api,
        /// The error's message, as the upstream wrote it.
        message: String,
    },
    /// An event's data is not the JSON the API sends.
    #[error(
        "event at byte {offset} of the stored {api} stream is not JSON ({reason}): \
         the stream cannot be converted; serve it as stored"
    )]
    BadEvent {
        /// The API.
        api: Api,
        /// Offset of the event's block in the stream.
        offset: u64,
        /// What the JSON parser said.
        reason: String,
    },
    /// The body is not JSON.
    #[error(
        "the stored {api} body is not JSON ({reason}): it cannot be streamed; serve it as stored"
    )]
    NotJson {
        /// The API.
        api: Api,
        /// What the JSON parser said.
        reason: String,
    },
    /// An event of the stream outgrew the limit without ending: the stream
    /// is not read further.
    #[error(
        "an event of the {api} stream is over {limit} bytes without ending; the stream is not \
         read further (the limit is --max-event-mb)"
    )]
    EventTooLarge {
        /// The API.
        api: Api,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body is JSON but not a response of the API (an error body, say).
    #[error("the stored {api} body is not a response ({reason}): it cannot be streamed; serve it as stored")]
    NotAResponse {
        /// The API.
        api: Api,
        /// What is missing.
        reason: String,
    },
}

/// The per-API state of a watched stream.
#[derive(Debug)]
enum Track {
    Chat(chat::Track),
    Responses(responses::Track),
    Messages(messages::Track),
}

impl Track {
    fn new(api: Api) -> Track {
        match api {
            Api::ChatCompletions => Track::Chat(chat::Track::default()),
            Api::Responses => Track::Responses(responses::Track::default()),
            Api::Messages => Track::Messages(messages::Track::default()),
        }
    }

    /// Reads one event; true when it is the final one.
    fn event(&mut self, ev: &FramedEvent) -> bool {
        match self {
            Track::Chat(t) => t.event(ev),
            Track::Responses(t) => t.event(ev),
            Track::Messages(t) => t.event(ev),
        }
    }

    fn parsed(&self) -> Parsed {
        match self {
            Track::Chat(t) => t.parsed(),
            Track::Responses(t) => t.parsed(),
            Track::Messages(t) => t.parsed(),
        }
    }

    /// The upstream's error message, when the stream carried one.
    fn error(&self) -> Option<&str> {
        match self {
            Track::Chat(t) => t.error.as_deref(),
            Track::Responses(t) => t.error.as_deref(),
            Track::Messages(t) => t.error.as_deref(),
        }
    }
}

/// Watches a streamed response as its bytes pass (see the module doc for
/// what [`StreamWatch::forwardable`] promises).
///
/// Feed it `text/event-stream` bodies. A body that is not one (a JSON error
/// sent in place of a stream) has no blank line, so all of it is held until
/// [`StreamWatch::finish`], and then forwardable.
///
/// ```
/// use cairn_gateway::{Api, StreamWatch};
///
/// let mut w = StreamWatch::new(Api::ChatCompletions);
/// w.feed(b"data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\nda")?;
/// assert_eq!(w.forwardable(), 70); // the first event; `da` could be `[DONE]`
/// w.feed(b"ta: [DONE]\n\n")?;
/// assert_eq!(w.forwardable(), 70); // held until the response is durable
/// w.finish();
/// assert_eq!(w.final_event_at(), Some(70));
/// assert_eq!(w.parsed().model.as_deref(), Some("m"));
/// # Ok::<(), cairn_gateway::FormError>(())
/// ```
///
/// It holds at most one event's bytes ([`StreamWatch::max_event`], default
/// 32 MiB): an event that grows past it without ending stops the watch
/// ([`FormError::EventTooLarge`]).
#[derive(Debug)]
pub struct StreamWatch {
    api: Api,
    parser: SseFramer,
    track: Track,
    final_at: Option<u64>,
    finished: bool,
}

impl StreamWatch {
    /// A watcher at the start of a streamed response of `api`.
    pub fn new(api: Api) -> StreamWatch {
        StreamWatch {
            api,
            parser: SseFramer::default(),
            track: Track::new(api),
            final_at: None,
            finished: false,
        }
    }

    /// Sets the largest event held, in bytes (default 32 MiB). Call it
    /// before the first [`StreamWatch::feed`].
    pub fn max_event(mut self, bytes: usize) -> StreamWatch {
        self.parser = SseFramer::limited(bytes);
        self
    }

    /// The API watched.
    pub fn api(&self) -> Api {
        self.api
    }

    /// Reads the next bytes of the stream (any split).
    ///
    /// # Errors
    /// [`FormError::EventTooLarge`] once an event outgrew the limit; the
    /// watch then reads nothing more, and [`StreamWatch::forwardable`] stays
    /// where it was.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), FormError> {
        for ev in self.parser.feed(bytes) {
            self.see(&ev);
        }
        if self.parser.overflowed() {
            return Err(FormError::EventTooLarge {
                api: self.api,
                limit: self.parser.max_event(),
            });
        }
        Ok(())
    }

    /// Ends the stream: reads an event left without its blank line. Call it
    /// once, after the last [`StreamWatch::feed`].
    pub fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            if let Some(ev) = self.parser.finish() {
                self.see(&ev);
            }
        }
    }

    fn see(&mut self, ev: &FramedEvent) {
        if self.track.event(ev) && self.final_at.is_none() {
            self.final_at = Some(ev.start);
        }
    }

    /// Bytes before this offset may be forwarded now; the rest is held until
    /// the response is durable (module doc).
    pub fn forwardable(&self) -> u64 {
        match self.final_at {
            Some(at) => at,
            None if self.finished => self.parser.fed(),
            None => self.parser.boundary(),
        }
    }

    /// Where the final event's block begins, once it has been read.
    pub fn final_event_at(&self) -> Option<u64> {
        self.final_at
    }

    /// Bytes fed so far.
    pub fn fed(&self) -> u64 {
        self.parser.fed()
    }

    /// Usage, model and completeness so far (final after
    /// [`StreamWatch::finish`]).
    pub fn parsed(&self) -> Parsed {
        self.track.parsed()
    }

    /// Whether the response is complete so far.
    pub fn complete(&self) -> bool {
        self.parsed().complete
    }

    /// The provider's own error, when the stream carried one in place of
    /// the rest of its response (a chunk carrying `error`, an `error`
    /// event, `response.failed`): its message, then its code or type in
    /// parentheses when it gave one.
    pub fn upstream_error(&self) -> Option<&str> {
        self.track.error()
    }
}

/// Usage, model and completeness of a whole (non-streamed) body. A body that
/// is not JSON, or not a response of `api` (an error body), gives no usage,
/// no model and `complete: false`.
pub fn parse_whole(api: Api, json: &[u8]) -> Parsed {
    let Ok(v) = serde_json::from_slice::<Value>(json) else {
        return Parsed::default();
    };
    match api {
        Api::ChatCompletions => chat::parse_whole(&v),
        Api::Responses => responses::parse_whole(&v),
        Api::Messages => messages::parse_whole(&v),
    }
}

/// The provider's error, when the whole body `json` is one instead of a
/// response (whatever its HTTP status): a non-null `error` at the top
/// (OpenAI-compatible servers' `{"error": {…}}`, Anthropic's `{"type":
/// "error", "error": {…}}`, a Responses body that `failed`), or, for chat,
/// a choice that ended with `finish_reason: "error"` (OpenRouter puts the
/// error inside it). The text is as [`StreamWatch::upstream_error`]'s.
pub(crate) fn whole_error(api: Api, json: &[u8]) -> Option<String> {
    let v = serde_json::from_slice::<Value>(json).ok()?;
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        return Some(error_text(e));
    }
    if api != Api::ChatCompletions {
        return None;
    }
    v.get("choices")?
        .as_array()?
        .iter()
        .find(|c| c.get("finish_reason").and_then(Value::as_str) == Some("error"))
        .map(|c| match c.get("error").filter(|e| !e.is_null()) {
            Some(e) => error_text(e),
            None => "the choice ended with finish_reason \"error\"".to_owned(),
        })
}

/// A provider's error object as one line: its `message` (the whole object
/// when it has none), then its `code`, else its `type`, in parentheses —
/// `Overloaded (overloaded_error)`, `Provider disconnected unexpectedly
/// (502)`. The `type` of a Responses `error` event, `error`, says nothing
/// and is left out.
fn error_text(e: &Value) -> String {
    let message = match (e.as_str(), e.get("message").and_then(Value::as_str)) {
        (Some(m), _) | (None, Some(m)) => m.to_owned(),
        (None, None) => e.to_string(),
    };
    let named = |v: &Value| match v {
        Value::String(s) if !s.is_empty() && s != "error" => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let code = e
        .get("code")
        .and_then(named)
        .or_else(|| e.get("type").and_then(named));
    match code {
        Some(c) => format!("{message} ({c})"),
        None => message,
    }
}

/// The whole body an SDK would have received for the streamed response
/// `sse`: a `chat.completion`, the final `response` object, or the `message`.
///
/// # Errors
/// [`FormError::UpstreamError`] when the stream carries an error,
/// [`FormError::Incomplete`] when it is not a complete response,
/// [`FormError::BadEvent`] when an event the conversion needs is not JSON.
pub fn stream_to_whole(api: Api, sse: &[u8]) -> Result<Vec<u8>, FormError> {
    let mut parser = SseFramer::default();
    let mut events = parser.feed(sse);
    if parser.overflowed() {
        return Err(FormError::EventTooLarge {
            api,
            limit: parser.max_event(),
        });
    }
    events.extend(parser.finish());
    let mut track = Track::new(api);
    for ev in &events {
        track.event(ev);
    }
    if let Some(message) = track.error() {
        return Err(FormError::UpstreamError {
            api,
            message: message.to_owned(),
        });
    }
    if !track.parsed().complete {
        return Err(FormError::Incomplete { api });
    }
    let whole = match api {
        Api::ChatCompletions => chat::assemble(&events)?,
        Api::Responses => responses::assemble(&events)?,
        Api::Messages => messages::assemble(&events)?,
    };
    Ok(whole.to_string().into_bytes())
}

/// A streamed response an SDK accepts for the whole body `json`: chat chunks,
/// a usage chunk and `data: [DONE]`; Messages' `message_start`, blocks,
/// `message_delta` and `message_stop`; Responses' `response.created`, the
/// output item, part and text events, and the final response event.
///
/// # Errors
/// [`FormError::NotJson`] when the body is not JSON,
/// [`FormError::NotAResponse`] when it is not a response of `api`.
pub fn whole_to_stream(api: Api, json: &[u8]) -> Result<Vec<u8>, FormError> {
    let whole: Value = serde_json::from_slice(json).map_err(|e| FormError::NotJson {
        api,
        reason: e.to_string(),
    })?;
    let mut out = Vec::new();
    match api {
        Api::ChatCompletions => chat::stream(&whole, &mut out)?,
        Api::Responses => responses::stream(&whole, &mut out)?,
        Api::Messages => messages::stream(&whole, &mut out)?,
    }
    Ok(out)
}

/// An event's data as JSON.
fn event_json(api: Api, ev: &FramedEvent) -> Result<Value, FormError> {
    serde_json::from_str(&ev.data).map_err(|e| FormError::BadEvent {
        api,
        offset: ev.start,
        reason: e.to_string(),
    })
}

/// Appends one event: `event: NAME` (when given), `data: JSON`, a blank line.
fn write_event(out: &mut Vec<u8>, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    // Serialising a Value cannot fail; its text holds no raw newline.
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// The `u64` at `field` of `v`, 0 when absent.
fn count(v: &Value, field: &str) -> u64 {
    v.get(field).and_then(Value::as_u64).unwrap_or(0)
}

/// A non-empty string at `field` of `v`.
fn text<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_is_told_from_a_response_whatever_its_status() {
        let rows: &[(Api, &str, Option<&str>)] = &[
            (
                Api::ChatCompletions,
                r#"{"error":{"message":"bad key","type":"invalid_request_error","code":null}}"#,
                Some("bad key (invalid_request_error)"),
            ),
            (
                Api::ChatCompletions,
                r#"{"error":{"code":502,"message":"Provider returned error"}}"#,
                Some("Provider returned error (502)"),
            ),
            (
                Api::ChatCompletions,
                r#"{"error":"upstream timed out"}"#,
                Some("upstream timed out"),
            ),
            (
                Api::ChatCompletions,
                r#"{"choices":[{"index":0,"finish_reason":"error","message":{"content":""},"error":{"code":502,"message":"high demand"}}]}"#,
                Some("high demand (502)"),
            ),
            (
                Api::ChatCompletions,
                r#"{"choices":[{"index":0,"finish_reason":"error","message":{"content":""}}]}"#,
                Some("the choice ended with finish_reason \"error\""),
            ),
            (
                Api::ChatCompletions,
                r#"{"choices":[{"index":0,"finish_reason":"stop","message":{"content":"hi"}}],"error":null}"#,
                None,
            ),
            (
                Api::Messages,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#,
                Some("Overloaded (overloaded_error)"),
            ),
            (
                Api::Messages,
                r#"{"type":"message","content":[],"stop_reason":"end_turn"}"#,
                None,
            ),
            (
                Api::Messages,
                r#"{"type":"message","choices":[{"finish_reason":"error"}]}"#,
                None,
            ),
            (
                Api::Responses,
                r#"{"object":"response","status":"failed","error":{"code":"server_error","message":"The model failed."}}"#,
                Some("The model failed. (server_error)"),
            ),
            (
                Api::Responses,
                r#"{"object":"response","status":"completed","error":null}"#,
                None,
            ),
            (
                Api::Responses,
                r#"{"type":"error","code":null,"message":"Something went wrong"}"#,
                None,
            ),
            (Api::ChatCompletions, "<html>502</html>", None),
        ];
        for (api, body, want) in rows {
            assert_eq!(
                whole_error(*api, body.as_bytes()).as_deref(),
                *want,
                "{api}: {body}"
            );
        }
        // An error event's own `type` says nothing and is left out.
        let event =
            serde_json::json!({"type": "error", "code": null, "message": "Something went wrong"});
        assert_eq!(error_text(&event), "Something went wrong");
    }
}
