//! Serving an [`axum::Router`] with every connection bounded: the one
//! connection loop of `cairn serve` and `cairn mcp --listen` (the gateway
//! keeps its own, which watches deliveries, with the same timeouts).
//!
//! Rules ([`serve_router`]):
//! 1. At most [`ListenBounds::max_connections`] connections are open at
//!    once. While that many are, the listener is not polled: the next
//!    client waits in the kernel's backlog (past the backlog, its connect
//!    is not answered: it retries, then times out) and is accepted as soon
//!    as a connection closes. Accepting
//!    and closing at once would instead fail every client while a peer
//!    holds the connections; waiting, a client is served once one closes,
//!    and rules 2 and 3 close a connection that sends nothing within the
//!    timeouts. No descriptor is opened past the cap.
//! 2. Every connection is HTTP/1.1 (kept alive between requests; a response
//!    may stream for as long as it lasts, as server-sent events do) with
//!    Nagle off. A request's head must arrive within
//!    [`ListenBounds::header_timeout`], counted from when the connection is
//!    accepted or, on a kept-alive connection, from the previous response;
//!    else the connection is closed.
//! 3. A request's body must arrive within [`ListenBounds::body_timeout`] of
//!    its head: past that, reading it fails, the request is answered 408
//!    with `Connection: close` (whatever the handler made of the failure),
//!    and the connection is closed. A handler that does not read the body
//!    does not wait for it: the connection is closed after its response.
//! 4. An accept that fails (no descriptor left) is logged (a `tracing`
//!    warning, target `cairn_gateway::listen`) and retried after a pause; it
//!    never stops the server.
//! 5. When `stop` completes the listener is closed, each connection
//!    finishes the request it serves and closes, and [`serve_router`]
//!    returns once every connection is closed.
//!
//! Not bounded here: how long a client may take to read a response (a
//! stream's producer decides that, as `cairn serve`'s live stream drops a
//! slow client).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// How long the loop pauses after an accept fails (rule 4).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The default of [`ListenBounds::max_connections`]: well above the viewers
/// and clients one store has (each live stream a browser follows holds a
/// connection), well below a process's usual 1,024 descriptors.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// What a client can make [`serve_router`] hold (rules 1 to 3).
#[derive(Clone, Copy, Debug)]
pub struct ListenBounds {
    /// Connections open at once, at least 1. Default
    /// [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// A request's head must arrive within this. Default 30 s.
    pub header_timeout: Duration,
    /// A request's body must arrive within this of its head. Default 60 s.
    pub body_timeout: Duration,
}

impl Default for ListenBounds {
    fn default() -> Self {
        ListenBounds {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves `app` on `listener` within `bounds` until `stop` completes, then
/// until every connection is closed (the rules of the module doc). Nothing
/// a client does, and no failed accept, ends it.
pub async fn serve_router(
    listener: TcpListener,
    app: axum::Router,
    bounds: ListenBounds,
    stop: impl Future<Output = ()> + Send,
) {
    let permits = Arc::new(Semaphore::new(
        bounds.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let (closing, closed) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(stop);
    loop {
        // A permit first, then the accept (rule 1): dropped unfinished when
        // another branch wins, both give back what they held.
        let next = async {
            let permit = permits.clone().acquire_owned().await;
            (permit, listener.accept().await)
        };
        tokio::select! {
            () = &mut stop => break,
            (permit, accepted) = next => match (permit, accepted) {
                (Ok(permit), Ok((tcp, _))) => {
                    conns.spawn(connection(tcp, app.clone(), bounds, closed.clone(), permit));
                }
                (_, Err(e)) => {
                    tracing::warn!(
                        "cairn: a connection was not accepted ({e}); trying again in {} ms",
                        ACCEPT_PAUSE.as_millis()
                    );
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
                // The semaphore is never closed.
                (Err(_), Ok(_)) => {}
            },
            Some(done) = conns.join_next(), if !conns.is_empty() => {
                if let Err(e) = done {
                    tracing::warn!("cairn: a connection's task failed: {e}");
                }
            }
        }
    }
    drop(listener);
    let _ = closing.send(true);
    while conns.join_next().await.is_some() {}
}

/// Serves one connection (rules 2 and 3) until it closes, finishing the
/// request it serves once `closing` turns true. The permit is its place
/// under the cap, given back when it ends.
async fn connection(
    tcp: TcpStream,
    app: axum::Router,
    bounds: ListenBounds,
    mut closing: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY not set on a client connection: {e}");
    }
    let body_timeout = bounds.body_timeout;
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(answer(app, req, body_timeout).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout);
    let conn = builder.serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let mut asked = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!("a client connection ended: {e}");
                }
                break;
            }
            _ = closing.wait_for(|c| *c), if !asked => {
                asked = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// `app`'s answer to `req`, its body read within `body_timeout` of now
/// (rule 3).
async fn answer(
    app: axum::Router,
    req: http::Request<Incoming>,
    body_timeout: Duration,
) -> Response {
    let late = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| {
        Body::new(Timed {
            body,
            deadline: Box::pin(tokio::time::sleep(body_timeout)),
            late: late.clone(),
            after: body_timeout,
        })
    });
    let service = TowerToHyperService::new(app);
    let response = match hyper::service::Service::call(&service, req).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    if !late.load(Ordering::SeqCst) {
        return response;
    }
    let body = serde_json::json!({"error": {
        "code": "request_timeout",
        "message": format!(
            "the request body did not arrive within {} s of its head; send it whole, or raise the server's --body-timeout",
            body_timeout.as_secs_f64()
        ),
    }});
    let mut r = (StatusCode::REQUEST_TIMEOUT, body.to_string()).into_response();
    let headers = r.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // The rest of the body may still come: the connection cannot carry
    // another request.
    headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// A request body that fails once its deadline passes before its end.
struct Timed {
    body: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    /// Set when the deadline failed a read.
    late: Arc<AtomicBool>,
    after: Duration,
}

/// Why a request body could not be read to its end.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// It did not arrive within the body timeout.
    #[error("the request body did not arrive within {} s", .0.as_secs_f64())]
    Late(Duration),
    /// The connection failed.
    #[error(transparent)]
    Read(#[from] hyper::Error),
}

impl hyper::body::Body for Timed {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(BodyError::Read)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.late.store(true, Ordering::SeqCst);
            return Poll::Ready(Some(Err(BodyError::Late(this.after))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
