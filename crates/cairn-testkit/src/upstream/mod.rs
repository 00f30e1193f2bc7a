//! A mock model API: OpenAI's and Anthropic's real wire formats, served on an
//! ephemeral loopback port, answering each request as a [`Script`] says.
//!
//! ```no_run
//! use cairn_testkit::upstream::{Reply, Script, Upstream};
//!
//! let upstream = Upstream::start(Script::always(Reply::text("Hello there").cut_after_events(3)));
//! // point a client at upstream.openai_base_url() or upstream.base_url() …
//! assert_eq!(upstream.count(), 0);
//! ```
//!
//! Routes (every other path answers 404 in the API's error format):
//! - `POST /v1/chat/completions`, `POST /v1/responses`, `GET /v1/models`
//!   (OpenAI);
//! - `POST /v1/messages`, `POST /v1/messages/count_tokens` (Anthropic);
//!   `GET /v1/models` answers in Anthropic's shape when the request carries
//!   `anthropic-version`.
//!
//! The server keeps these promises, which the tests of this crate check:
//! 1. every request is recorded (method, path, query, headers, body, in
//!    arrival order) before it is answered, whatever the answer;
//! 2. an answer is streamed (SSE, one write per event) exactly when the
//!    request's body says `"stream": true`, in the route's own framing —
//!    except a recorded answer ([`Reply::raw_stream`], [`Reply::raw_json`]),
//!    which goes out byte for byte as it was given;
//! 3. the same [`Reply`] to the same request is the same bytes (fixed ids,
//!    fixed `created`), so a replay can be compared byte for byte;
//! 4. a [`Cut`] really closes the TCP connection where it says, after the
//!    bytes before it were flushed, with no terminating chunk;
//! 5. it runs on its own threads, so it serves blocking tests and async
//!    tests alike, and stops when the [`Upstream`] is dropped.
//!
//! Not like the real APIs: the keys of every JSON object come sorted
//! (serde_json's map), which no client depends on.

mod anthropic;
pub mod fixtures;
mod openai;
mod script;
mod wire;

pub use script::{Cut, RecordedRequest, Reply, Script, ToolCall, Usage};

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;

use script::Kind;
use wire::{Answer, Rendered};

/// How long a cut waits, after the last bytes it lets through, before it
/// closes: long enough for the HTTP server to flush them.
const FLUSH_BEFORE_CUT: Duration = Duration::from_millis(5);

/// A running mock upstream; dropping it stops the server and closes every
/// connection.
pub struct Upstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("addr", &self.addr)
            .finish()
    }
}

struct Shared {
    script: Script,
    log: Mutex<Log>,
    changed: Condvar,
}

#[derive(Default)]
struct Log {
    requests: Vec<RecordedRequest>,
    finished: usize,
}

impl Shared {
    fn log(&self) -> MutexGuard<'_, Log> {
        // A panic while holding the lock (a script that panicked) leaves the
        // log itself whole: keep serving it.
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut Log)) {
        f(&mut self.log());
        self.changed.notify_all();
    }
}

impl Upstream {
    /// Starts the server on `127.0.0.1` and an ephemeral port.
    ///
    /// # Panics
    /// No loopback port can be bound or no thread started (a broken test
    /// machine).
    pub fn start(script: Script) -> Upstream {
        let shared = Arc::new(Shared {
            script,
            log: Mutex::new(Log::default()),
            changed: Condvar::new(),
        });
        let (runtime, listener, addr) = crate::serve::bind("cairn-mock-upstream");
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        // Events go out as they are written, as a real API's do: no Nagle
        // delay to make direct calls look slower than they are.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        runtime.spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("cairn mock upstream stopped: {e}");
            }
        });
        Upstream {
            addr,
            shared,
            runtime: Some(runtime),
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: Anthropic's base URL (the SDK adds `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: OpenAI's base URL (`OPENAI_BASE_URL`
    /// includes the `/v1`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log().requests.clone()
    }

    /// How many requests arrived (every route).
    pub fn count(&self) -> usize {
        self.shared.log().requests.len()
    }

    /// How many answers were finished: their last byte handed to the HTTP
    /// server (a whole body counts when it is handed over; a cut answer
    /// never counts).
    pub fn finished(&self) -> usize {
        self.shared.log().finished
    }

    /// Waits until at least `n` requests arrived; false if `timeout` passed
    /// first.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait(timeout, |log| log.requests.len() >= n)
    }

    /// Waits until at least `n` answers were finished ([`Upstream::finished`]);
    /// false if `timeout` passed first.
    pub fn wait_for_finished(&self, n: usize, timeout: Duration) -> bool {
        self.wait(timeout, |log| log.finished >= n)
    }

    fn wait(&self, timeout: Duration, done: impl Fn(&Log) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut log = self.shared.log();
        loop {
            if done(&log) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            log = match self.shared.changed.wait_timeout(log, left) {
                Ok((log, _)) => log,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // Not a plain drop: that blocks, and panics inside an async test.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Which API's conventions (error body, request-id header) a request gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    OpenAi,
    Anthropic,
}

fn flavor(req: &RecordedRequest) -> Flavor {
    if req.path.starts_with("/v1/messages") || req.header("anthropic-version").is_some() {
        Flavor::Anthropic
    } else {
        Flavor::OpenAi
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body.to_vec(),
        // The client went away while sending: nobody to answer.
        Err(_) => return cut_response(),
    };
    let recorded = RecordedRequest {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let mut n = 0;
    shared.update(|log| {
        n = log.requests.len();
        log.requests.push(recorded.clone());
    });
    let reply = shared.script.pick(&recorded);
    if !reply.sleep_first.is_zero() {
        tokio::time::sleep(reply.sleep_first).await;
    }
    let rendered = render(&reply, &recorded);
    let flavor = flavor(&recorded);
    let request_id = format!("req_mock_{n}");
    let mut headers = vec![(
        match flavor {
            Flavor::OpenAi => "x-request-id",
            Flavor::Anthropic => "request-id",
        }
        .to_owned(),
        request_id,
    )];
    headers.extend(reply.headers.iter().cloned());
    send(shared, &reply, rendered, headers)
}

/// The answer `reply` gives to `req`, in the route's format.
fn render(reply: &Reply, req: &RecordedRequest) -> Rendered {
    let flavor = flavor(req);
    if let Kind::Fail { status, body } = &reply.kind {
        let body = match (body, flavor) {
            (Some(body), _) => body.clone(),
            (None, Flavor::OpenAi) => openai::error(*status),
            (None, Flavor::Anthropic) => anthropic::error(*status),
        };
        return Rendered::json(*status, &body);
    }
    if let Kind::Raw {
        status,
        content_type,
        stream,
        body,
    } = &reply.kind
    {
        return if *stream {
            Rendered::Stream {
                events: wire::sse_blocks(body),
            }
        } else {
            Rendered::Whole {
                status: *status,
                content_type,
                body: body.clone(),
            }
        };
    }
    let Some(answer) = Answer::of(reply, req) else {
        return Rendered::json(500, &openai::error(500));
    };
    match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/v1/chat/completions") => openai::chat(&answer, req),
        ("POST", "/v1/responses") => openai::responses(&answer, req),
        ("POST", "/v1/messages") => anthropic::messages(&answer, req),
        ("POST", "/v1/messages/count_tokens") => {
            Rendered::json(200, &anthropic::count_tokens(&answer))
        }
        ("GET", "/v1/models") => Rendered::json(
            200,
            &match flavor {
                Flavor::OpenAi => openai::models(),
                Flavor::Anthropic => anthropic::models(),
            },
        ),
        _ => Rendered::json(
            404,
            &match flavor {
                Flavor::OpenAi => openai::error(404),
                Flavor::Anthropic => anthropic::error(404),
            },
        ),
    }
}

/// One step of sending a streamed body.
enum Step {
    Sleep(Duration),
    Send(Bytes),
    /// Close the connection, after letting what was sent (the status line
    /// and headers at least) be flushed.
    Cut,
    /// Close the connection before anything is flushed.
    Drop,
    /// The last byte was handed over.
    Finish,
}

fn send(
    shared: Arc<Shared>,
    reply: &Reply,
    rendered: Rendered,
    headers: Vec<(String, String)>,
) -> Response {
    let (status, content_type, chunks, whole) = match rendered {
        Rendered::Whole {
            status,
            content_type,
            body,
        } => (status, content_type, vec![body], true),
        Rendered::Stream { events } => (200, "text/event-stream; charset=utf-8", events, false),
    };
    let mut builder = Response::builder()
        .status(status)
        .header("content-type", content_type);
    if !whole {
        builder = builder.header("cache-control", "no-cache");
    }
    for (name, value) in &headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    // A whole body without a cut goes out with its Content-Length; anything
    // else is played step by step.
    let body = if whole && reply.cut.is_none() {
        shared.update(|log| log.finished += 1);
        Body::from(chunks.concat())
    } else {
        let (chunks, end) = match reply.cut {
            None => (chunks, Step::Finish),
            Some(Cut::BeforeResponse) => (Vec::new(), Step::Drop),
            Some(Cut::AfterEvents(k)) if !whole => {
                (chunks.into_iter().take(k).collect(), Step::Cut)
            }
            // A whole body has no events: cut it in the middle.
            Some(Cut::AfterEvents(_)) => {
                let half = chunks.concat().len() / 2;
                (truncate(chunks, half), Step::Cut)
            }
            Some(Cut::AfterBytes(n)) => (truncate(chunks, n), Step::Cut),
        };
        let mut steps = Vec::new();
        for chunk in chunks {
            if !reply.event_delay.is_zero() {
                steps.push(Step::Sleep(reply.event_delay));
            }
            steps.push(Step::Send(Bytes::from(chunk)));
        }
        steps.push(end);
        Body::from_stream(stream_steps(Some(shared), steps))
    };
    match builder.body(body) {
        Ok(response) => response,
        // Only a header from `Reply::with_header` can be invalid.
        Err(e) => {
            let body =
                serde_json::json!({"error": {"message": format!("mock: bad reply header: {e}")}});
            let mut response = Response::new(Body::from(body.to_string()));
            *response.status_mut() = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
            response
        }
    }
}

/// The first `n` bytes of the concatenated chunks, still in chunks.
fn truncate(chunks: Vec<Vec<u8>>, n: usize) -> Vec<Vec<u8>> {
    let mut left = n;
    let mut kept = Vec::new();
    for mut chunk in chunks {
        if left == 0 {
            break;
        }
        chunk.truncate(left);
        left -= chunk.len();
        kept.push(chunk);
    }
    kept
}

/// A response whose body fails at once: hyper then drops the connection
/// before the status line it buffered is flushed, so not a byte goes out.
fn cut_response() -> Response {
    Response::new(Body::from_stream(stream_steps(None, vec![Step::Drop])))
}

/// The body that plays `steps`; `shared` counts a finished answer.
fn stream_steps(
    shared: Option<Arc<Shared>>,
    steps: Vec<Step>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures_util::stream::unfold(
        (steps.into_iter(), shared),
        |(mut steps, shared)| async move {
            loop {
                match steps.next()? {
                    Step::Sleep(d) => tokio::time::sleep(d).await,
                    Step::Send(bytes) => return Some((Ok(bytes), (steps, shared))),
                    step @ (Step::Cut | Step::Drop) => {
                        if matches!(step, Step::Cut) {
                            tokio::time::sleep(FLUSH_BEFORE_CUT).await;
                        }
                        let cut = std::io::Error::new(
                            std::io::ErrorKind::ConnectionAborted,
                            "cairn mock upstream: connection cut as scripted",
                        );
                        return Some((Err(cut), (steps, shared)));
                    }
                    Step::Finish => {
                        if let Some(shared) = &shared {
                            shared.update(|log| log.finished += 1);
                        }
                        return None;
                    }
                }
            }
        },
    )
}
