//! What the mock upstream answers: a [`Script`] picks a [`Reply`] for each
//! [`RecordedRequest`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

/// One request as the mock upstream received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `POST`, `GET`, …
    pub method: String,
    /// The path, without the query: `/v1/chat/completions`.
    pub path: String,
    /// The query string without its `?` (`beta=true`), if there was one.
    pub query: Option<String>,
    /// Every header in the order received; names are lower case (HTTP/1
    /// names are case-insensitive and hyper reports them so).
    pub headers: Vec<(String, String)>,
    /// The body, byte for byte.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, or `None` when it is not JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// Whether the body asks for a streamed answer (`"stream": true`).
    pub fn is_stream(&self) -> bool {
        self.json()
            .and_then(|j| j.get("stream").and_then(Value::as_bool))
            .unwrap_or(false)
    }

    /// The body's `model`, if it names one.
    pub fn model(&self) -> Option<String> {
        self.json()
            .and_then(|j| j.get("model").and_then(Value::as_str).map(str::to_owned))
    }

    /// How many turns the model has already taken in the conversation the
    /// request carries (what [`Script::by_turn`] answers by):
    /// 1. Chat Completions and Messages: the `assistant` messages in
    ///    `messages`;
    /// 2. Responses: the runs of consecutive model-made items in `input`
    ///    (`function_call`, `reasoning`, or an `assistant` message), since one
    ///    turn can make several;
    /// 3. anything else: 0.
    pub fn turn(&self) -> usize {
        let Some(body) = self.json() else { return 0 };
        if let Some(messages) = body.get("messages").and_then(Value::as_array) {
            return messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .count();
        }
        let Some(input) = body.get("input").and_then(Value::as_array) else {
            return 0;
        };
        let by_model = |item: &Value| {
            let kind = item.get("type").and_then(Value::as_str);
            let role = item.get("role").and_then(Value::as_str);
            matches!(kind, Some("function_call") | Some("reasoning")) || role == Some("assistant")
        };
        let mut runs = 0;
        let mut in_run = false;
        for item in input {
            let model_made = by_model(item);
            if model_made && !in_run {
                runs += 1;
            }
            in_run = model_made;
        }
        runs
    }
}

/// A tool call the mock model makes.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The call's id (`call_1`, `call_2`, … in both APIs unless given).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments; sent as a JSON string to OpenAI, as an object to
    /// Anthropic, streamed in pieces of at most 16 bytes.
    pub arguments: Value,
    /// The arguments' text exactly as this mock model writes it (its
    /// spacing and key order), when given; else `arguments` written
    /// compactly, keys sorted. What is streamed, and what OpenAI's whole
    /// bodies carry.
    pub raw: Option<String>,
}

/// Token counts the mock reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Input (prompt) tokens, cached ones included.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Of the input tokens, how many were read from the provider's cache.
    pub cached_input_tokens: u64,
}

/// Where a response is cut: the TCP connection is closed there, with no
/// terminating chunk, no `[DONE]`, no `message_stop`. Each cut applies to a
/// streamed answer and to a whole one alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Close before any byte of the response (status line included).
    BeforeResponse,
    /// Close after the first `k` SSE events; the status line and headers are
    /// sent even for `k` = 0. A whole answer, which has no events, is cut
    /// after half its body.
    AfterEvents(usize),
    /// Close after the first `n` bytes of the body. A whole answer cut so is
    /// sent chunked, since its length cannot be honoured.
    AfterBytes(usize),
}

/// What the mock answers one request with.
///
/// Built from [`Reply::text`], [`Reply::deltas`], [`Reply::tool_call`],
/// [`Reply::fail`] or [`Reply::drop_connection`], then adjusted. Whether the
/// answer is streamed, and in which API's format, follows the request (its
/// path and its `stream` flag). Defaults: the model is the request's, usage
/// is 25 input tokens and one output token per piece sent, no delays, no cut,
/// fixed ids and a fixed `created` time (so that the same reply is the same
/// bytes each time).
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) kind: Kind,
    pub(crate) model: Option<String>,
    pub(crate) usage: Option<Usage>,
    pub(crate) id: Option<String>,
    pub(crate) stop: Option<String>,
    pub(crate) event_delay: Duration,
    pub(crate) sleep_first: Duration,
    pub(crate) cut: Option<Cut>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) reasoning: Option<Reasoning>,
}

/// A reasoning item the mock model produces before its output (Responses
/// only): a summary and the opaque `encrypted_content` a client with
/// `store: false` must send back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reasoning {
    pub(crate) summary: String,
    pub(crate) encrypted_content: String,
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// Text pieces (one SSE delta each) then tool calls.
    Answer {
        pieces: Vec<String>,
        tools: Vec<ToolCall>,
    },
    /// An error status; `None` gives the API's own error body.
    Fail { status: u16, body: Option<Value> },
    /// Exactly these bytes, whatever the route and the request's `stream`
    /// flag: a `text/event-stream` body sent one SSE event (up to and with
    /// its blank line) per write, or a whole body with `status`.
    Raw {
        status: u16,
        content_type: &'static str,
        stream: bool,
        body: Vec<u8>,
    },
}

impl Reply {
    fn answer(pieces: Vec<String>, tools: Vec<ToolCall>) -> Reply {
        Reply {
            kind: Kind::Answer { pieces, tools },
            model: None,
            usage: None,
            id: None,
            stop: None,
            event_delay: Duration::ZERO,
            sleep_first: Duration::ZERO,
            cut: None,
            headers: Vec::new(),
            reasoning: None,
        }
    }

    /// Answers `text`, streamed one word (with the space before it) per delta.
    pub fn text(text: &str) -> Reply {
        Reply::answer(split_words(text), Vec::new())
    }

    /// Answers `n` deltas of made-up text (`"w0 w1 w2 …"`): the shape of the
    /// benchmark's 200-event responses.
    pub fn deltas(n: usize) -> Reply {
        let pieces = (0..n)
            .map(|i| {
                if i == 0 {
                    "w0".to_owned()
                } else {
                    format!(" w{i}")
                }
            })
            .collect();
        Reply::answer(pieces, Vec::new())
    }

    /// Answers with one tool call (id `call_1`) and no text; add more with
    /// [`Reply::with_tool_call`].
    pub fn tool_call(name: &str, arguments: Value) -> Reply {
        Reply::answer(Vec::new(), Vec::new()).with_tool_call(name, arguments)
    }

    /// Fails with `status` and the API's own error body (OpenAI's
    /// `{"error": {…}}`, Anthropic's `{"type": "error", …}`, with the error
    /// type that status has in that API).
    pub fn fail(status: u16) -> Reply {
        let mut reply = Reply::answer(Vec::new(), Vec::new());
        reply.kind = Kind::Fail { status, body: None };
        reply
    }

    /// Fails with `status` and exactly `body`.
    pub fn fail_with(status: u16, body: Value) -> Reply {
        let mut reply = Reply::fail(status);
        reply.kind = Kind::Fail {
            status,
            body: Some(body),
        };
        reply
    }

    /// Answers exactly `body`, a recorded `text/event-stream` response (a
    /// provider's shape the renderers do not make), with status 200 whatever
    /// the route and the request's `stream` flag; one write per SSE event (a
    /// block ended by a blank line; bytes after the last one go out last),
    /// so [`Cut::AfterEvents`] cuts between events. Model, usage, id, stop
    /// and text settings do not apply.
    pub fn raw_stream(body: impl Into<Vec<u8>>) -> Reply {
        let mut reply = Reply::answer(Vec::new(), Vec::new());
        reply.kind = Kind::Raw {
            status: 200,
            content_type: "text/event-stream; charset=utf-8",
            stream: true,
            body: body.into(),
        };
        reply
    }

    /// Answers exactly `body`, a recorded whole JSON response, with status
    /// 200 whatever the route and the request's `stream` flag.
    pub fn raw_json(body: impl Into<Vec<u8>>) -> Reply {
        Reply::raw_body(200, body)
    }

    /// Answers exactly `body` as an `application/json` body with `status`
    /// (a provider's error body, or its error inside a 200), whatever the
    /// request asked for.
    pub fn raw_body(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        let mut reply = Reply::answer(Vec::new(), Vec::new());
        reply.kind = Kind::Raw {
            status,
            content_type: "application/json",
            stream: false,
            body: body.into(),
        };
        reply
    }

    /// Reads the request and closes the connection without a byte of answer
    /// (what a crashed server does; SDKs retry it).
    pub fn drop_connection() -> Reply {
        Reply::text("").cut(Cut::BeforeResponse)
    }

    /// Replaces the text, one word per delta.
    pub fn with_text(mut self, text: &str) -> Reply {
        if let Kind::Answer { pieces, .. } = &mut self.kind {
            *pieces = split_words(text);
        }
        self
    }

    /// Re-splits the text into `n` deltas of nearly equal length (fewer when
    /// it has fewer than `n` characters).
    pub fn in_deltas(mut self, n: usize) -> Reply {
        if let Kind::Answer { pieces, .. } = &mut self.kind {
            let chars: Vec<char> = pieces.concat().chars().collect();
            let n = n.clamp(1, chars.len().max(1));
            let size = chars.len().div_ceil(n).max(1);
            *pieces = chars.chunks(size).map(|c| c.iter().collect()).collect();
        }
        self
    }

    /// Adds a tool call after the text (ids `call_1`, `call_2`, … in order).
    pub fn with_tool_call(self, name: &str, arguments: Value) -> Reply {
        self.push_tool_call(name, arguments, None)
    }

    /// Adds a tool call whose arguments the model writes exactly as `text`
    /// (spaced, keys in any order, or not JSON at all, which is then the
    /// parsed `arguments` as a JSON string).
    pub fn with_raw_tool_call(self, name: &str, text: &str) -> Reply {
        let arguments =
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()));
        self.push_tool_call(name, arguments, Some(text.to_owned()))
    }

    fn push_tool_call(mut self, name: &str, arguments: Value, raw: Option<String>) -> Reply {
        if let Kind::Answer { tools, .. } = &mut self.kind {
            let id = format!("call_{}", tools.len() + 1);
            tools.push(ToolCall {
                id,
                name: name.to_owned(),
                arguments,
                raw,
            });
        }
        self
    }

    /// Names the tool calls `{prefix}1`, `{prefix}2`, … instead of `call_1`,
    /// `call_2`, … (a conversation of several turns wants ids unique across
    /// them, as real ones are).
    pub fn with_call_ids(mut self, prefix: &str) -> Reply {
        if let Kind::Answer { tools, .. } = &mut self.kind {
            for (i, tool) in tools.iter_mut().enumerate() {
                tool.id = format!("{prefix}{}", i + 1);
            }
        }
        self
    }

    /// Produces a reasoning item before the output, with this summary and
    /// this `encrypted_content` (the Responses API only; the other routes
    /// ignore it).
    pub fn with_reasoning(mut self, summary: &str, encrypted_content: &str) -> Reply {
        self.reasoning = Some(Reasoning {
            summary: summary.to_owned(),
            encrypted_content: encrypted_content.to_owned(),
        });
        self
    }

    /// Reports these token counts (no cached tokens).
    pub fn with_usage(self, input_tokens: u64, output_tokens: u64) -> Reply {
        self.with_full_usage(Usage {
            input_tokens,
            output_tokens,
            cached_input_tokens: 0,
        })
    }

    /// Reports these token counts.
    pub fn with_full_usage(mut self, usage: Usage) -> Reply {
        self.usage = Some(usage);
        self
    }

    /// Names this model in the answer instead of the request's.
    pub fn with_model(mut self, model: &str) -> Reply {
        self.model = Some(model.to_owned());
        self
    }

    /// Uses this response id instead of the fixed default.
    pub fn with_id(mut self, id: &str) -> Reply {
        self.id = Some(id.to_owned());
        self
    }

    /// Uses this finish reason (OpenAI) or stop reason (Anthropic), e.g.
    /// `length` or `max_tokens`, instead of the natural one.
    pub fn with_stop(mut self, stop: &str) -> Reply {
        self.stop = Some(stop.to_owned());
        self
    }

    /// Waits `delay` before each SSE event.
    pub fn event_delay(mut self, delay: Duration) -> Reply {
        self.event_delay = delay;
        self
    }

    /// Waits `delay` before answering at all (before the status line).
    pub fn sleep_first(mut self, delay: Duration) -> Reply {
        self.sleep_first = delay;
        self
    }

    /// Closes the connection where `cut` says.
    pub fn cut(mut self, cut: Cut) -> Reply {
        self.cut = Some(cut);
        self
    }

    /// A streamed answer is cut after `k` events: [`Cut::AfterEvents`].
    pub fn cut_after_events(self, k: usize) -> Reply {
        self.cut(Cut::AfterEvents(k))
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// `"a b  c"` → `["a", " b", "  c"]`: each word with the spaces before it.
fn split_words(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() && in_word {
            pieces.push(std::mem::take(&mut current));
            in_word = false;
        }
        if !c.is_whitespace() {
            in_word = true;
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

type Pick = dyn Fn(&RecordedRequest) -> Reply + Send + Sync;

/// Picks the [`Reply`] for each request. Every request is given to the
/// script, whatever its path: a reply's failure, delay or cut applies to any
/// route, its content only to the model routes (`count_tokens` reports its
/// input tokens).
#[derive(Clone)]
pub struct Script {
    pick: Arc<Pick>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Script(..)")
    }
}

impl Script {
    /// Every request gets `reply`.
    pub fn always(reply: Reply) -> Script {
        Script::from_fn(move |_| reply.clone())
    }

    /// The n-th request (counting from 0, every route) gets `replies[n]`;
    /// once they run out the last one repeats. An empty list answers 500.
    pub fn sequence(replies: Vec<Reply>) -> Script {
        let seen = AtomicUsize::new(0);
        Script::from_fn(move |_| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            match replies.get(n).or(replies.last()) {
                Some(reply) => reply.clone(),
                None => Reply::fail(500),
            }
        })
    }

    /// A request at turn t ([`RecordedRequest::turn`]) gets `replies[t]`, the
    /// last one past the end: the same conversation always gets the same
    /// answer, however often it is sent (what an agent that is killed and
    /// re-run needs). An empty list answers 500.
    pub fn by_turn(replies: Vec<Reply>) -> Script {
        Script::from_fn(move |req| {
            let t = req.turn();
            match replies.get(t).or(replies.last()) {
                Some(reply) => reply.clone(),
                None => Reply::fail(500),
            }
        })
    }

    /// `pick` chooses each reply; it runs on the server's threads.
    pub fn from_fn(pick: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> Script {
        Script {
            pick: Arc::new(pick),
        }
    }

    pub(crate) fn pick(&self, req: &RecordedRequest) -> Reply {
        (self.pick)(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_their_leading_spaces() {
        let rows: &[(&str, &[&str])] = &[
            ("", &[]),
            ("a", &["a"]),
            ("a b", &["a", " b"]),
            ("a  b c", &["a", "  b", " c"]),
            (" a", &[" a"]),
            ("a ", &["a", " "]),
            ("héllo wörld", &["héllo", " wörld"]),
        ];
        for (text, want) in rows {
            assert_eq!(split_words(text), *want, "{text:?}");
        }
    }

    #[test]
    fn in_deltas_splits_into_at_most_n_pieces_that_join_to_the_text() {
        for (text, n, pieces) in [("abcdef", 3, 3), ("abcdef", 4, 3), ("ab", 5, 2), ("", 3, 0)] {
            let Kind::Answer { pieces: got, .. } = Reply::text(text).in_deltas(n).kind else {
                panic!("an answer");
            };
            assert_eq!(got.concat(), text);
            assert_eq!(got.len(), pieces, "{text:?} in {n}");
        }
    }

    fn request(body: Value) -> RecordedRequest {
        RecordedRequest {
            method: "POST".into(),
            path: "/v1/x".into(),
            query: None,
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        }
    }

    #[test]
    fn turn_counts_the_models_turns_in_each_api() {
        use serde_json::json;
        let rows = [
            (json!({"messages": [{"role": "user"}]}), 0),
            (
                json!({"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]}),
                1,
            ),
            (
                json!({"input": [{"role": "user"}, {"type": "function_call"}, {"type": "function_call"},
                 {"type": "function_call_output"}, {"type": "function_call_output"},
                 {"type": "reasoning"}, {"role": "assistant", "type": "message"}, {"role": "user"}]}),
                2,
            ),
            (json!({"input": "hello"}), 0),
            (json!([1, 2]), 0),
        ];
        for (body, want) in rows {
            assert_eq!(request(body.clone()).turn(), want, "{body}");
        }
    }
}
