//! When a client has taken a response (DESIGN §7), which decides whether
//! its retry is served from the store (a response not delivered) or goes
//! upstream as a new sample (one delivered).
//!
//! The only record of it is the response's delivery mark in the store
//! ([`ResponseStore::mark_delivered`], the mark a VM restore takes back
//! with [`ResponseStore::mark_undelivered`]); the `model_call` record is
//! journaled before the end of the response is released (the order of
//! `purchase`), so its `delivered` can only say whether the client was
//! still connected then.
//!
//! Rules:
//! 1. A streamed response is delivered when the client's connection has
//!    taken its final event: the body ends only once the mark is made.
//! 2. A whole (non-streamed) response is judged by what its connection does
//!    after the last byte was handed over, because those bytes may still sit
//!    in socket buffers when a client dies:
//!    - another request on the connection, or a clean close (EOF) once
//!      every byte was flushed, means delivered — a client that closes a
//!      socket with unread data sends a reset, not a clean close;
//!    - a reset, or an error reading or writing, means not delivered;
//!    - when the gateway closes the connection itself (the client asked for
//!      `Connection: close`, an idle kept-alive connection timed out, a
//!      stop), it shuts its side and waits at most [`CLIENT_CLOSE_WAIT`]
//!      for the client's close, judged as above; a client that stays quiet
//!      that long had the whole response written to it and neither reset
//!      nor failed: delivered.
//! 3. A delivery mark is made before the next request on its connection is
//!    handled, and before the connection's task ends; a connection dropped
//!    by a stop at once leaves its responses unmarked (not delivered).
//!    Until its connection has said, a whole response counts as not
//!    delivered: an identical request on another connection meanwhile is
//!    served from the store.
//! 4. Nothing else marks a response; an error response, which has no entry
//!    in the store, may get a mark that means nothing (the next entry put
//!    under its key clears it).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use cairn_calls::ResponseStore;

/// How long a connection the gateway closed waits for its client's close
/// (rule 2).
pub(crate) const CLIENT_CLOSE_WAIT: Duration = Duration::from_secs(2);

/// One chunk of a response body, or the error that cuts it.
pub(crate) type Chunk = Result<Bytes, io::Error>;

/// The whole responses a connection has handed over and not yet judged
/// (rule 2), and the marks it has started. Cheap to clone: one per
/// connection, shared by its IO and its requests.
#[derive(Clone)]
pub(crate) struct Deliveries(Arc<Judge>);

struct Judge {
    responses: ResponseStore,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Keys of the whole responses whose last byte was handed over.
    pending: Vec<String>,
    /// Every byte handed over was written to the socket since.
    flushed: bool,
    /// Marks being made.
    marking: Vec<JoinHandle<()>>,
}

impl Deliveries {
    pub(crate) fn new(responses: ResponseStore) -> Deliveries {
        Deliveries(Arc::new(Judge {
            responses,
            state: Mutex::new(State::default()),
        }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is a list and a flag: whole even after a panic.
        self.0
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The last byte of the whole response `key` was handed to the
    /// connection: judge it by what the connection does next.
    fn expect(&self, key: String) {
        let mut s = self.state();
        s.pending.push(key);
        s.flushed = false;
    }

    /// Whether a response waits to be judged.
    pub(crate) fn pending(&self) -> bool {
        !self.state().pending.is_empty()
    }

    /// The responses waiting are judged: marked when `delivered`.
    fn settle(&self, delivered: bool) {
        let mut s = self.state();
        let keys = std::mem::take(&mut s.pending);
        if keys.is_empty() || !delivered {
            return;
        }
        let responses = self.0.responses.clone();
        s.marking.push(tokio::task::spawn_blocking(move || {
            for key in keys {
                if let Err(e) = responses.mark_delivered(&key) {
                    tracing::warn!("delivery of {key} not recorded: {e}");
                }
            }
        }));
    }

    /// The client sent `n` bytes (0: it closed its side cleanly).
    fn read(&self, n: usize) {
        let flushed = {
            let s = self.state();
            if s.pending.is_empty() {
                return;
            }
            s.flushed
        };
        self.settle(n > 0 || flushed);
    }

    /// A request arrived on the connection: the client took what came
    /// before it, even when its bytes were read along with the response's.
    pub(crate) fn request_arrived(&self) {
        self.settle(true);
    }

    /// Everything handed over was written to the socket.
    fn flushed(&self) {
        self.state().flushed = true;
    }

    /// The client stayed quiet after the gateway closed (rule 2).
    fn quiet(&self) {
        let flushed = self.state().flushed;
        self.settle(flushed);
    }

    /// Waits for the marks started so far.
    pub(crate) async fn marked(&self) {
        let marking = std::mem::take(&mut self.state().marking);
        for m in marking {
            if let Err(e) = m.await {
                tracing::warn!("a delivery mark failed: {e}");
            }
        }
    }
}

/// A client connection as the gateway's HTTP server uses it, telling its
/// [`Deliveries`] what the client does (rule 2).
pub(crate) struct Watched {
    tcp: TcpStream,
    deliveries: Deliveries,
}

impl Watched {
    pub(crate) fn new(tcp: TcpStream, deliveries: Deliveries) -> Watched {
        Watched { tcp, deliveries }
    }

    /// After the gateway closed the connection: shuts its side and waits at
    /// most [`CLIENT_CLOSE_WAIT`] for the client's close, which judges what
    /// still waits (rule 2).
    pub(crate) async fn wait_for_client_close(mut self) {
        use tokio::io::AsyncReadExt;
        // Already shut when the server closed it cleanly; an error here is
        // one the reads below see too.
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut self.tcp).await;
        let mut buf = [0u8; 4096];
        let waited = tokio::time::timeout(CLIENT_CLOSE_WAIT, async {
            while self.deliveries.pending() {
                match self.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        if waited.is_err() {
            self.deliveries.quiet();
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) => self.deliveries.read(buf.filled().len() - before),
            Poll::Ready(Err(_)) => self.deliveries.settle(false),
            Poll::Pending => {}
        }
        polled
    }
}

impl Watched {
    /// Reports a write's failure (rule 2).
    fn wrote<T>(&self, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(_)) = &polled {
            self.deliveries.settle(false);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.wrote(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.wrote(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The server flushes the socket once its own buffer is written out.
        let polled = Pin::new(&mut self.tcp).poll_flush(cx);
        if let Poll::Ready(Ok(())) = &polled {
            self.deliveries.flushed();
        }
        self.wrote(polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.tcp).poll_shutdown(cx);
        self.wrote(polled)
    }
}

/// What the end of a response body means (rules 1 and 2).
pub(crate) enum Ending {
    /// A stream, or a body on a connection the gateway does not watch:
    /// delivered when the last byte was taken (rule 1).
    Taken {
        /// Where the mark goes.
        responses: ResponseStore,
        /// The response's key.
        key: String,
    },
    /// A whole body: judged by what its connection does next (rule 2).
    Judged {
        /// The connection's judge.
        deliveries: Deliveries,
        /// The response's key.
        key: String,
    },
}

impl Ending {
    /// How the response `key` of a request arriving on `conn` is judged.
    pub(crate) fn of(
        responses: &ResponseStore,
        conn: Option<&Deliveries>,
        key: &str,
        streamed: bool,
    ) -> Ending {
        match conn {
            Some(d) if !streamed => Ending::Judged {
                deliveries: d.clone(),
                key: key.to_owned(),
            },
            _ => Ending::Taken {
                responses: responses.clone(),
                key: key.to_owned(),
            },
        }
    }

    /// Runs at the end of the body; a handle when the body must wait for it.
    fn run(self) -> Option<JoinHandle<()>> {
        match self {
            Ending::Taken { responses, key } => Some(tokio::task::spawn_blocking(move || {
                if let Err(e) = responses.mark_delivered(&key) {
                    tracing::warn!("delivery of {key} not recorded: {e}");
                }
            })),
            Ending::Judged { deliveries, key } => {
                deliveries.expect(key);
                None
            }
        }
    }
}

/// The body of a client response: what the purchase sends, in order; the
/// [`Ending`] runs when the last of it was taken (not when the client went
/// away or the stream ended in an error), and the body ends when a stream's
/// mark is made, so a client that read the end of a stream finds it marked.
pub(crate) struct Delivery {
    rx: mpsc::UnboundedReceiver<Chunk>,
    ending: Option<Ending>,
    marking: Option<JoinHandle<()>>,
    failed: bool,
}

impl Delivery {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Chunk>, ending: Ending) -> Self {
        Delivery {
            rx,
            ending: Some(ending),
            marking: None,
            failed: false,
        }
    }
}

impl Stream for Delivery {
    type Item = Chunk;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Chunk>> {
        if let Some(h) = self.marking.as_mut() {
            return match Pin::new(h).poll(cx) {
                Poll::Ready(_) => {
                    self.marking = None;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            };
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Err(e))) => {
                self.failed = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => match (self.failed, self.ending.take()) {
                (false, Some(ending)) => match ending.run() {
                    Some(h) => {
                        self.marking = Some(h);
                        self.poll_next(cx)
                    }
                    None => Poll::Ready(None),
                },
                _ => Poll::Ready(None),
            },
            other => other,
        }
    }
}
