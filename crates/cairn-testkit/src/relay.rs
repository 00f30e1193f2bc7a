//! A TCP relay between a client and a server that can cut the client's
//! connection at a chosen point of a response: put it between an SDK and the
//! gateway, and the SDK loses its connection for real, mid-stream.
//!
//! ```no_run
//! use cairn_testkit::relay::{Cut, Relay};
//! # let gateway: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
//! let relay = Relay::start(gateway);
//! relay.cut_next(Cut::AfterEvents(3));
//! // point the SDK at relay.openai_base_url(): the next response it gets is
//! // cut after its third SSE event, the ones after pass untouched.
//! ```
//!
//! The relay keeps these promises:
//! 1. bytes are forwarded both ways unchanged, as they arrive;
//! 2. an armed cut fires on the next response that starts on any connection
//!    (once; the responses after it pass), and is used up by that response
//!    even if it ends before the cut point;
//! 3. events and body bytes are counted in the decoded body (chunked framing
//!    removed, `\r` ignored, an event ends at a blank line), so where a chunk
//!    boundary falls does not matter;
//! 4. a cut forwards the bytes up to and including the cut point, then closes
//!    both the client's connection and the relay's connection to the server,
//!    so the server sees its client go away.
//!
//! It does not know which request a response answers, so the body of a
//! response to `HEAD` (which has none) would be misread: use it for `GET` and
//! `POST`.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use crate::upstream::Cut;

/// A running relay; dropping it closes every connection.
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("addr", &self.addr)
            .field("target", &self.shared.target)
            .finish()
    }
}

struct Shared {
    target: SocketAddr,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    armed: Option<Cut>,
    connections: usize,
    responses: usize,
    cuts: usize,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let out = f(&mut self.state());
        self.changed.notify_all();
        out
    }
}

impl Relay {
    /// Starts relaying from an ephemeral loopback port to `target`.
    ///
    /// # Panics
    /// No loopback port can be bound or no thread started.
    pub fn start(target: SocketAddr) -> Relay {
        let shared = Arc::new(Shared {
            target,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let (runtime, listener, addr) = crate::serve::bind("cairn-relay");
        let accepting = Arc::clone(&shared);
        runtime.spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    // Out of file descriptors, say: wait and go on.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                accepting.update(|s| s.connections += 1);
                tokio::spawn(relay_connection(client, Arc::clone(&accepting)));
            }
        });
        Relay {
            addr,
            shared,
            runtime: Some(runtime),
        }
    }

    /// The relay's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (an Anthropic base URL).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1` (an OpenAI base URL).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Arms a cut for the next response that starts; replaces one armed
    /// before that has not fired.
    pub fn cut_next(&self, cut: Cut) {
        self.shared.update(|s| s.armed = Some(cut));
    }

    /// How many client connections were accepted.
    pub fn connections(&self) -> usize {
        self.shared.state().connections
    }

    /// How many responses started (their first byte arrived from the server).
    pub fn responses(&self) -> usize {
        self.shared.state().responses
    }

    /// How many cuts fired.
    pub fn cuts(&self) -> usize {
        self.shared.state().cuts
    }

    /// Waits until at least `n` cuts fired; false if `timeout` passed first.
    pub fn wait_for_cuts(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state();
        while state.cuts < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match self.shared.changed.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn relay_connection(client: TcpStream, shared: Arc<Shared>) {
    // A server that is down: the client sees its connection closed, as it
    // would see the refusal (close rather than reset keeps it simple).
    let Ok(server) = TcpStream::connect(shared.target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    });
    let mut parser = ResponseParser::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match server_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let cut_at = parser.feed(&buf[..n], &shared);
        let end = cut_at.unwrap_or(n);
        if client_write.write_all(&buf[..end]).await.is_err() {
            break;
        }
        if cut_at.is_some() {
            let _ = client_write.flush().await;
            upstream.abort();
            let _ = upstream.await;
            shared.update(|s| s.cuts += 1);
            // Dropping every half closes both connections.
            return;
        }
    }
    let _ = client_write.shutdown().await;
    let _ = upstream.await;
}

/// Where the parser is in the server's byte stream.
#[derive(Debug, Default)]
enum Phase {
    /// Before or inside a status line and headers.
    #[default]
    Head,
    ChunkSize,
    ChunkData(u64),
    ChunkEnd(u8),
    Trailer,
    Length(u64),
    UntilClose,
}

/// Follows the responses on one connection, counting body bytes and SSE
/// events, and says where an armed cut falls.
#[derive(Debug, Default)]
struct ResponseParser {
    phase: Phase,
    /// The head or the chunk-size or trailer line read so far.
    line: Vec<u8>,
    /// The cut that the current response carries.
    cut: Option<Cut>,
    body_bytes: usize,
    events: usize,
    /// The last body byte that was not `\r`.
    last: u8,
}

impl ResponseParser {
    /// Feeds bytes from the server; returns how many of them to forward if
    /// the connection must be cut after them.
    fn feed(&mut self, bytes: &[u8], shared: &Shared) -> Option<usize> {
        for (i, &b) in bytes.iter().enumerate() {
            if self.step(b, shared) {
                // A cut before the response forwards nothing of it.
                return Some(if self.cut == Some(Cut::BeforeResponse) {
                    i
                } else {
                    i + 1
                });
            }
        }
        None
    }

    /// Takes one byte; true when the connection must be cut here.
    fn step(&mut self, b: u8, shared: &Shared) -> bool {
        match self.phase {
            Phase::Head => {
                if self.line.is_empty() {
                    self.cut = shared.update(|s| {
                        s.responses += 1;
                        s.armed.take()
                    });
                    self.body_bytes = 0;
                    self.events = 0;
                    self.last = 0;
                    if self.cut == Some(Cut::BeforeResponse) {
                        return true;
                    }
                }
                self.line.push(b);
                if self.line.ends_with(b"\r\n\r\n") {
                    let head = std::mem::take(&mut self.line);
                    self.phase = body_phase(&head);
                    if matches!(self.phase, Phase::Head) {
                        // A response without a body cannot be cut inside it.
                        self.cut = None;
                    }
                    return self.at_cut_point();
                }
                false
            }
            Phase::ChunkSize => {
                self.line.push(b);
                if b == b'\n' {
                    let line = std::mem::take(&mut self.line);
                    let size = chunk_size(&line);
                    self.phase = match size {
                        Some(0) => Phase::Trailer,
                        Some(n) => Phase::ChunkData(n),
                        // Not HTTP we understand: pass the rest through.
                        None => Phase::UntilClose,
                    };
                }
                false
            }
            Phase::ChunkData(left) => {
                self.phase = if left == 1 {
                    Phase::ChunkEnd(2)
                } else {
                    Phase::ChunkData(left - 1)
                };
                self.body_byte(b)
            }
            Phase::ChunkEnd(left) => {
                self.phase = if left == 1 {
                    Phase::ChunkSize
                } else {
                    Phase::ChunkEnd(left - 1)
                };
                false
            }
            Phase::Trailer => {
                self.line.push(b);
                if b == b'\n' {
                    let blank = self.line == b"\r\n" || self.line == b"\n";
                    self.line.clear();
                    if blank {
                        self.phase = Phase::Head;
                    }
                }
                false
            }
            Phase::Length(left) => {
                self.phase = if left == 1 {
                    Phase::Head
                } else {
                    Phase::Length(left - 1)
                };
                self.body_byte(b)
            }
            Phase::UntilClose => self.body_byte(b),
        }
    }

    fn body_byte(&mut self, b: u8) -> bool {
        self.body_bytes += 1;
        if b != b'\r' {
            if b == b'\n' && self.last == b'\n' {
                self.events += 1;
                self.last = 0;
            } else {
                self.last = b;
            }
        }
        self.at_cut_point()
    }

    fn at_cut_point(&self) -> bool {
        match self.cut {
            Some(Cut::AfterEvents(k)) => self.events == k,
            Some(Cut::AfterBytes(n)) => self.body_bytes == n,
            Some(Cut::BeforeResponse) | None => false,
        }
    }
}

/// How the body after `head` is framed.
fn body_phase(head: &[u8]) -> Phase {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Phase::Head;
    }
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            return Phase::ChunkSize;
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<u64>().ok();
        }
    }
    match length {
        Some(0) => Phase::Head,
        Some(n) => Phase::Length(n),
        None => Phase::UntilClose,
    }
}

/// The size on a chunk-size line (`1a;ext\r\n`).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let hex = text.trim_end().split(';').next()?.trim();
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(armed: Option<Cut>) -> Shared {
        Shared {
            target: SocketAddr::from(([127, 0, 0, 1], 1)),
            state: Mutex::new(State {
                armed,
                ..State::default()
            }),
            changed: Condvar::new(),
        }
    }

    /// The bytes forwarded before the cut when `stream` is fed in pieces of
    /// `piece` bytes.
    fn forwarded(stream: &[u8], cut: Cut, piece: usize) -> Option<Vec<u8>> {
        let shared = shared(Some(cut));
        let mut parser = ResponseParser::default();
        let mut out = Vec::new();
        for part in stream.chunks(piece) {
            if let Some(end) = parser.feed(part, &shared) {
                out.extend_from_slice(&part[..end]);
                return Some(out);
            }
            out.extend_from_slice(part);
        }
        None
    }

    const HEAD: &str = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";

    /// A chunked response whose body is "data: a\n\ndata: b\n\ndata: c\n\n\n",
    /// its event ends split across chunks.
    fn chunked() -> Vec<u8> {
        let mut raw = HEAD.as_bytes().to_vec();
        for piece in ["data: a", "\n\n", "data: b\n\nda", "ta: c\n", "\n\n"] {
            raw.extend_from_slice(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes());
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        raw
    }

    #[test]
    fn cuts_fall_on_the_decoded_body_whatever_the_chunking() {
        let rows: &[(Cut, &str)] = &[
            (Cut::AfterEvents(0), ""),
            (Cut::AfterEvents(1), "7\r\ndata: a\r\n2\r\n\n\n"),
            (
                Cut::AfterEvents(2),
                "7\r\ndata: a\r\n2\r\n\n\n\r\nb\r\ndata: b\n\n",
            ),
            (
                Cut::AfterEvents(3),
                "7\r\ndata: a\r\n2\r\n\n\n\r\nb\r\ndata: b\n\nda\r\n6\r\nta: c\n\r\n2\r\n\n",
            ),
            (Cut::AfterBytes(0), ""),
            (Cut::AfterBytes(8), "7\r\ndata: a\r\n2\r\n\n"),
        ];
        for &(cut, want_body) in rows {
            let want = format!("{HEAD}{want_body}");
            for piece in [1, 2, 5, 1024] {
                let got = forwarded(&chunked(), cut, piece)
                    .map(|b| String::from_utf8_lossy(&b).into_owned());
                assert_eq!(
                    got.as_deref(),
                    Some(want.as_str()),
                    "{cut:?} in pieces of {piece}"
                );
            }
        }
        for piece in [1, 7] {
            assert_eq!(
                forwarded(&chunked(), Cut::BeforeResponse, piece),
                Some(Vec::new())
            );
            // Four events are not there: no cut.
            assert_eq!(forwarded(&chunked(), Cut::AfterEvents(4), piece), None);
        }
    }

    #[test]
    fn a_cut_is_used_by_the_next_response_only() {
        let length = b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nab\n\n";
        let shared = shared(Some(Cut::AfterEvents(1)));
        let mut parser = ResponseParser::default();
        // The first response takes the cut and is cut at its end.
        assert_eq!(parser.feed(length, &shared), Some(length.len()));
        // The next one passes.
        assert_eq!(parser.feed(length, &shared), None);
        assert_eq!(parser.feed(&chunked(), &shared), None);
        let state = shared.state();
        assert_eq!((state.responses, state.armed), (3, None));
    }

    #[test]
    fn carriage_returns_do_not_hide_event_ends() {
        let crlf = b"HTTP/1.1 200 OK\r\n\r\ndata: a\r\n\r\ndata: b\r\n\r\n";
        let got = forwarded(crlf, Cut::AfterEvents(1), 4);
        assert_eq!(
            got.as_deref(),
            Some(&b"HTTP/1.1 200 OK\r\n\r\ndata: a\r\n\r\n"[..])
        );
    }

    #[test]
    fn bodiless_responses_are_skipped() {
        let stream = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n\
            HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nx\n\n";
        let shared = shared(None);
        let mut parser = ResponseParser::default();
        assert_eq!(parser.feed(stream, &shared), None);
        assert_eq!(shared.state().responses, 3);
        assert!(matches!(parser.phase, Phase::Head));
        assert_eq!(parser.events, 1);
    }
}
