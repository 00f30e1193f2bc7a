//! The gateway's connection loop and how it stops (DESIGN §7).
//!
//! Rules:
//! 1. Every connection is HTTP/1.1 with Nagle off (events go out as they
//!    arrive). A client must send a request's head within
//!    [`GatewayConfig::header_timeout`] (counted from when the connection is
//!    accepted, or on a kept-alive connection from the previous response),
//!    else the connection is closed; its body within
//!    [`GatewayConfig::body_timeout`], else 408 (see `server::read_request`).
//!    A half-sent request holds nothing for longer.
//!    The connection watches what its client does after a whole
//!    response — another request, a clean close, a reset — and that says
//!    whether the client took it (see `delivery`).
//! 2. An accept that fails (no descriptor left) is logged and retried after
//!    a pause; it never stops the gateway. At most
//!    [`GatewayConfig::max_connections`] connections are open at once: while
//!    that many are, nothing is accepted and the next client waits in the
//!    kernel's backlog until one closes (as `serve_router` does, for the
//!    reasons its module doc gives).
//! 3. Stopping has two stages. When `stop` completes the listener is closed
//!    (no new connection), each connection finishes the request it serves
//!    and closes (after a whole response the client has not yet answered,
//!    it waits a little for the client's close, which says whether it took
//!    the response), and the gateway waits for them and for every purchase
//!    still reading its upstream — those are paid for, and are kept. When
//!    `now` completes (at any time: a second signal, a deadline) it waits no
//!    longer: the connections are dropped, the commit queue is closed (what
//!    it already took is committed, nothing after), and the purchases not
//!    stored are reported in [`Stopped`]. What was durable stays durable.
//! 4. Either way the sessions the gateway made are then ended with a
//!    `terminal`; one that cannot be is reported after the others are
//!    ended.
//!
//! [`GatewayConfig::header_timeout`]: crate::GatewayConfig::header_timeout
//! [`GatewayConfig::body_timeout`]: crate::GatewayConfig::body_timeout
//! [`GatewayConfig::max_connections`]: crate::GatewayConfig::max_connections

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::delivery::{Deliveries, Watched};
use crate::inflight::{InFlightPurchase, Running};
use crate::server::{handle, Gateway, Inner};
use crate::GatewayError;

/// How long the loop pauses after an accept fails (rule 2).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// How a gateway stopped (rule 3).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Stopped {
    /// The purchases dropped before their response was stored, oldest
    /// first: empty unless the gateway was told to stop at once while some
    /// were still reading their upstream. A retry buys them again.
    pub unstored: Vec<InFlightPurchase>,
}

/// What a gateway has in flight, for a caller that says what a stop waits
/// for. Cheap to clone; it outlives the gateway.
#[derive(Clone)]
pub struct Activity(Arc<Running>);

impl Activity {
    /// The purchases whose responses are not stored yet, oldest first.
    pub fn purchases(&self) -> Vec<InFlightPurchase> {
        self.0.in_flight()
    }

    /// Client connections open now.
    pub fn connections(&self) -> usize {
        self.0.connections.load(Ordering::SeqCst)
    }
}

impl Gateway {
    /// What it has in flight (see [`Activity`]).
    pub fn activity(&self) -> Activity {
        Activity(self.inner.running.clone())
    }

    /// Serves until `shutdown` completes, then until every connection and
    /// every purchase still reading its upstream is done (however long that
    /// takes), then ends the sessions it made: [`Gateway::serve_until`]
    /// without a `now`.
    ///
    /// # Errors
    /// The sessions cannot be closed.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        self.serve_until(shutdown, std::future::pending())
            .await
            .map(|_| ())
    }

    /// Serves until `stop`, then waits for what is in flight until `now`
    /// (rule 3 of the module doc), then ends the sessions it made.
    ///
    /// # Errors
    /// A session it made cannot be ended (the others still are).
    pub async fn serve_until(
        self,
        stop: impl Future<Output = ()> + Send,
        now: impl Future<Output = ()> + Send,
    ) -> Result<Stopped, GatewayError> {
        let Gateway { inner, listener } = self;
        let (closing, closed) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(
            inner
                .config
                .max_connections
                .clamp(1, Semaphore::MAX_PERMITS),
        ));
        let mut conns = JoinSet::new();
        tokio::pin!(stop);
        tokio::pin!(now);
        let mut at_once = false;
        loop {
            tokio::select! {
                () = &mut stop => break,
                () = &mut now => {
                    at_once = true;
                    break;
                }
                // A place under the cap first, then the accept: dropped
                // unfinished when another branch wins, both give back what
                // they held.
                (permit, accepted) = async {
                    (permits.clone().acquire_owned().await, listener.accept().await)
                } => match (permit, accepted) {
                    (Ok(permit), Ok((tcp, _))) => {
                        if let Err(e) = tcp.set_nodelay(true) {
                            tracing::debug!("TCP_NODELAY not set on a client connection: {e}");
                        }
                        conns.spawn(connection(inner.clone(), tcp, closed.clone(), permit));
                    }
                    (_, Err(e)) => {
                        tracing::warn!("cairn gateway: a connection was not accepted: {e}");
                        tokio::time::sleep(ACCEPT_PAUSE).await;
                    }
                    // The semaphore is never closed.
                    (Err(_), Ok(_)) => {}
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(listener);
        let _ = closing.send(true);
        if !at_once {
            let drained = async {
                while conns.join_next().await.is_some() {}
                inner.running.idle().await;
            };
            tokio::select! {
                () = drained => {}
                () = &mut now => at_once = true,
            }
        }
        let mut stopped = Stopped::default();
        if at_once {
            conns.abort_all();
            inner.committer.close().await;
            stopped.unstored = inner.running.in_flight();
        }
        let closing = inner.clone();
        tokio::task::spawn_blocking(move || closing.sessions.close())
            .await
            .map_err(|e| GatewayError::Internal {
                reason: e.to_string(),
            })??;
        Ok(stopped)
    }
}

/// Serves one client connection (rule 1) until it closes, finishing the
/// request it serves once `closing` turns true; then judges the whole
/// responses it handed over that the client's behaviour has not yet
/// judged, and waits for their delivery marks (see `delivery`). The permit
/// is its place under the cap (rule 2), given back when it ends.
async fn connection(
    g: Arc<Inner>,
    tcp: tokio::net::TcpStream,
    mut closing: watch::Receiver<bool>,
    _place: OwnedSemaphorePermit,
) {
    let _open = Open::new(g.running.clone());
    let header_timeout = g.config.header_timeout;
    let deliveries = Deliveries::new(g.responses.clone());
    let judge = deliveries.clone();
    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let (g, judge) = (g.clone(), judge.clone());
        async move {
            // A request on the connection says the client took the response
            // before it: its mark is made before this request is decided.
            judge.request_arrived();
            judge.marked().await;
            let mut req = req.map(Body::new);
            req.extensions_mut().insert(judge);
            Ok::<_, Infallible>(handle(g, req).await)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let io = TokioIo::new(Watched::new(tcp, deliveries.clone()));
    let mut conn = builder.serve_connection(io, service);
    let mut asked = false;
    loop {
        tokio::select! {
            served = &mut conn => {
                if let Err(e) = served {
                    tracing::debug!("a client connection ended: {e}");
                }
                break;
            }
            _ = closing.wait_for(|c| *c), if !asked => {
                asked = true;
                std::pin::Pin::new(&mut conn).graceful_shutdown();
            }
        }
    }
    if deliveries.pending() {
        // The gateway ended the connection (the client asked, a timeout, a
        // stop) after a whole response: the client's close says the rest.
        conn.into_parts()
            .io
            .into_inner()
            .wait_for_client_close()
            .await;
    }
    deliveries.marked().await;
}

/// Counts an open connection while it lives.
struct Open(Arc<Running>);

impl Open {
    fn new(running: Arc<Running>) -> Open {
        running.connections.fetch_add(1, Ordering::SeqCst);
        Open(running)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}
