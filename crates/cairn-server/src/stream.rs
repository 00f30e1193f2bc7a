//! One session's live stream (DESIGN §8): the cursor table behind
//! `GET /v1/sessions/{id}/events`.
//!
//! A [`LiveStream`] numbers every frame it publishes with a [`LiveSeq`], keeps
//! the newest frames in a bounded ring, and hands each subscriber the frames
//! after its cursor followed by a live channel. Records of the session's
//! journal travel as record frames; streamed text travels as deltas.
//!
//! Invariants:
//! 1. Live seqs are dense: the stream's frames are numbered 1, 2, 3 … without
//!    gaps; `LiveSeq(0)` is the position before the first frame. A live seq
//!    is a position in this process's stream, never a journal seq: the two
//!    are different types ([`LiveSeq`], [`JournalSeq`]).
//! 2. [`Frame::journal`] never decreases. A client that received every frame
//!    up to frame N holds every journal record up to frame N's `journal`
//!    (the earlier parts of a split record carry the journal seq before it,
//!    so a client holding only part of a record is never told it has it).
//! 3. The ring holds at most [`StreamLimits::max_frames`] frames and
//!    [`StreamLimits::max_bytes`] payload bytes (the oldest go first; the
//!    newest frame always stays), and no frame's payload exceeds
//!    [`StreamLimits::max_frame_bytes`]: a longer payload is split at UTF-8
//!    character boundaries into parts that, concatenated, are the payload.
//! 4. For every frame that left the ring, the journal seq it had reached is
//!    kept exactly (one entry per change of journal seq), so a cursor older
//!    than the ring falls back to the journal with nothing missing and
//!    nothing twice.
//! 5. Subscribing (copying the backlog and registering the live channel)
//!    happens under the same lock as publishing: every frame after the cursor
//!    is in the backlog or on the live channel, exactly once.
//! 6. Publishing never waits for a reader and is not async (an agent's
//!    synchronous event callback publishes). A subscriber whose buffer of
//!    [`StreamLimits::subscriber_frames`] is full when a frame arrives is
//!    dropped from the stream; it reads what was already buffered, then
//!    [`Ended::SlowClient`].
//! 7. The lock is never held across an await; a poisoned lock is recovered
//!    (the state it guards is updated so that a panic between two steps
//!    leaves it consistent enough to keep numbering frames).
//!
//! It does not persist anything: the journal is the durable record, and a
//! live seq means nothing to another server process.
//!
//! ```
//! use cairn_server::stream::{Backlog, JournalSeq, LiveSeq, LiveStream, StreamLimits};
//!
//! let stream = LiveStream::new(StreamLimits::default());
//! stream.publish_record(JournalSeq(1), r#"{"kind":"meta"}"#);
//! let last = stream.publish_delta(r#"{"text":"hel"}"#);
//! let sub = stream.subscribe(Some(LiveSeq(1))).unwrap();
//! assert_eq!(sub.head, last);
//! assert_eq!(sub.watermark, JournalSeq(1));
//! let Backlog::Ring(frames) = sub.backlog else { unreachable!() };
//! assert_eq!(&*frames[0].data, r#"{"text":"hel"}"#);
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::mpsc;

/// A position in a session's live stream: dense (1, 2, 3 … no gaps), per
/// server process; the SSE `id:`. NOT a journal seq.
///
/// `LiveSeq(0)` is the position before the first frame.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct LiveSeq(pub u64);

/// A record's seq in the session's journal (a durable position). Distinct
/// type: the two can never be passed for each other.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct JournalSeq(pub u64);

impl fmt::Display for LiveSeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for JournalSeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The bounds of a stream.
///
/// Values are clamped when the stream is made: `max_frames` and
/// `subscriber_frames` to at least 1, `max_frame_bytes` to at least 4 (one
/// UTF-8 character always fits) and at most `max_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// Most frames in the ring. Default 4,096.
    pub max_frames: usize,
    /// Most payload bytes in the ring. Default 16 MiB.
    pub max_bytes: usize,
    /// Most payload bytes in one frame; longer payloads are split. Default 1 MiB.
    pub max_frame_bytes: usize,
    /// Frames buffered per subscriber before it is a slow client. Default 1,024.
    pub subscriber_frames: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_frames: 4096,
            max_bytes: 16 << 20,
            max_frame_bytes: 1 << 20,
            subscriber_frames: 1024,
        }
    }
}

/// The smallest frame payload limit: the longest UTF-8 character.
const MIN_FRAME_BYTES: usize = 4;

impl StreamLimits {
    fn clamped(self) -> StreamLimits {
        let max_bytes = self.max_bytes.max(MIN_FRAME_BYTES);
        StreamLimits {
            max_frames: self.max_frames.max(1),
            max_bytes,
            max_frame_bytes: self.max_frame_bytes.clamp(MIN_FRAME_BYTES, max_bytes),
            subscriber_frames: self.subscriber_frames.max(1),
        }
    }
}

/// One frame of the live stream.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Its position in the stream.
    pub seq: LiveSeq,
    /// The journal seq covered when this frame was published (monotonic).
    pub journal: JournalSeq,
    /// Some(n) when this frame announces journal record n (a record frame,
    /// or a part of one).
    pub record: Option<JournalSeq>,
    /// Some((index, count)) when a payload over max_frame_bytes was split:
    /// parts 0..count, concatenated in order they are the payload.
    pub part: Option<(u32, u32)>,
    /// The payload (a JSON text, opaque here).
    pub data: Arc<str>,
}

impl Frame {
    /// True when this frame ends its payload: it was not split, or it is the
    /// last part.
    pub fn completes(&self) -> bool {
        self.part.is_none_or(|(i, n)| i + 1 >= n)
    }
}

/// One session's live stream: the ring of recent frames and its subscribers.
///
/// Shared by reference (`Arc<LiveStream>`) between the publisher and the
/// HTTP handlers; every method takes `&self`.
pub struct LiveStream {
    inner: Mutex<Inner>,
}

struct Inner {
    limits: StreamLimits,
    ring: VecDeque<Frame>,
    ring_bytes: usize,
    /// The last live seq used.
    head: LiveSeq,
    /// The journal seq covered by the frames published so far.
    watermark: JournalSeq,
    /// The journal seq covered before the first frame.
    start: JournalSeq,
    /// The live seq before this stream's first frame: 0, or past every seq
    /// an earlier stream of this process may have handed out (see
    /// [`LiveStream::numbered_after`]).
    base: LiveSeq,
    /// The last frame of the newest record published (`LiveSeq(0)`: none yet).
    last_record: LiveSeq,
    /// For frames that left the ring: `(first live seq, journal seq)` where
    /// the journal seq changes, ascending; before the first entry, `start`.
    evicted: Vec<(LiveSeq, JournalSeq)>,
    subscribers: Vec<Subscriber>,
    closed: bool,
}

struct Subscriber {
    tx: mpsc::Sender<Frame>,
    slow: Arc<AtomicBool>,
}

/// What [`LiveStream::subscribe`] returns.
#[derive(Debug)]
pub struct Subscription {
    /// The journal seq already covered at the instant of subscribing: a
    /// client that read a snapshot of the journal up to J fetches records
    /// (J, watermark] and then takes the live frames — nothing between them
    /// is lost. When J is past the watermark (the snapshot saw records not
    /// yet published), the client skips record frames for records ≤ J.
    pub watermark: JournalSeq,
    /// The live seq at the instant of subscribing.
    pub head: LiveSeq,
    /// What to send before the live frames.
    pub backlog: Backlog,
    /// Receiving end for frames after `head`.
    pub live: Live,
}

/// The frames (or journal records) a subscriber gets before the live ones.
#[derive(Clone, Debug)]
pub enum Backlog {
    /// The cursor is inside the ring: exactly the frames after it, up to
    /// head (it may begin with the remaining parts of a split payload).
    Ring(Vec<Frame>),
    /// The cursor is older than the ring: send the journal records
    /// (after, upto] (each carries its journal seq as `rollout_seq` and no
    /// live seq), then `then` (the ring frames published after the record
    /// frame of `upto`: the in-flight turn's deltas), then live. `gap` is true
    /// when those deltas themselves fell out of the ring (then `then` holds
    /// the whole ring and the client is told a gap exists — nothing is
    /// skipped silently).
    ///
    /// A client discards any part of a split payload it received before:
    /// the journal holds the whole record. With `gap` true, `then` may begin
    /// with later parts of a split delta whose first parts were lost; a
    /// client drops parts it cannot complete.
    Journal {
        /// The journal seq that the cursor's frame had reached.
        after: JournalSeq,
        /// The watermark at the instant of subscribing.
        upto: JournalSeq,
        /// Ring frames to send after the records.
        then: Vec<Frame>,
        /// Whether deltas between the cursor and `then` were lost.
        gap: bool,
    },
}

/// The receiving end of a subscription: the frames after
/// [`Subscription::head`].
pub struct Live {
    rx: mpsc::Receiver<Frame>,
    slow: Arc<AtomicBool>,
}

/// Why a subscriber's live frames ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Ended {
    /// The subscriber's buffer was full when a frame was published.
    #[error("slow_client: the subscriber fell too far behind the stream and was disconnected; reconnect with the last seq it received")]
    SlowClient,
    /// The stream was closed or dropped.
    #[error("the stream closed")]
    Closed,
}

/// A cursor a stream cannot serve.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CursorError {
    /// The cursor names a frame not yet published (a cursor from another
    /// server process, or a made-up one).
    #[error("cursor_ahead: live seq {asked} is ahead of the stream's head {head}")]
    Ahead {
        /// The cursor asked for.
        asked: LiveSeq,
        /// The stream's head.
        head: LiveSeq,
    },
    /// The cursor names a frame of an earlier stream of this session that
    /// the server no longer remembers: where it stood in the journal is
    /// unknown, so nothing can be sent after it without a gap or a repeat.
    #[error("cursor_forgotten: live seq {asked} is from a stream this server no longer remembers (this one starts after {base}); read the records after the last journal seq you hold and subscribe without a cursor")]
    Forgotten {
        /// The cursor asked for.
        asked: LiveSeq,
        /// The seq before this stream's first frame.
        base: LiveSeq,
    },
}

impl LiveStream {
    /// An empty stream of a session whose journal is empty (watermark 0).
    pub fn new(limits: StreamLimits) -> Self {
        LiveStream::starting_at(limits, JournalSeq(0))
    }

    /// An empty stream of a session whose journal already holds records up
    /// to `watermark` (a resumed or followed session): a cursor of 0 that
    /// falls out of the ring falls back to the records after `watermark`.
    pub fn starting_at(limits: StreamLimits, watermark: JournalSeq) -> Self {
        LiveStream::numbered_after(limits, LiveSeq(0), watermark)
    }

    /// As [`LiveStream::starting_at`], with the first frame numbered
    /// `base + 1`: a stream that replaces one this process forgot numbers
    /// its frames past every seq the forgotten one handed out, so an old
    /// cursor can never name a new frame. A cursor in `1..=base` is refused
    /// ([`CursorError::Forgotten`]); cursor 0 still means "before the first
    /// frame" (journal seq `watermark`).
    pub fn numbered_after(limits: StreamLimits, base: LiveSeq, watermark: JournalSeq) -> Self {
        let limits = limits.clamped();
        LiveStream {
            inner: Mutex::new(Inner {
                limits,
                ring: VecDeque::new(),
                ring_bytes: 0,
                head: base,
                watermark,
                start: watermark,
                base,
                last_record: base,
                evicted: Vec::new(),
                subscribers: Vec::new(),
                closed: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes journal record `journal` (its JSON). Never blocks on a
    /// reader. Returns the last LiveSeq used (several when split).
    ///
    /// `journal` should be past the watermark. One that is not (a record
    /// published twice, or out of order) is still published, so nobody
    /// misses it, but does not move the watermark; it is logged.
    pub fn publish_record(&self, journal: JournalSeq, data: &str) -> LiveSeq {
        let mut inner = self.lock();
        let before = inner.watermark;
        let covered = if journal > before {
            journal
        } else {
            tracing::warn!(%journal, watermark = %before, "record published at or below the stream's watermark");
            before
        };
        let parts = split(data, inner.limits.max_frame_bytes);
        let count = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            // Only the last part covers the record (invariant 2).
            let at = if i + 1 == count { covered } else { before };
            inner.push(at, Some(journal), part_of(i, count), part);
        }
        inner.watermark = covered;
        inner.last_record = inner.head;
        inner.head
    }

    /// Publishes an ephemeral frame (streamed text) at the current journal seq.
    pub fn publish_delta(&self, data: &str) -> LiveSeq {
        let mut inner = self.lock();
        let at = inner.watermark;
        let parts = split(data, inner.limits.max_frame_bytes);
        let count = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            inner.push(at, None, part_of(i, count), part);
        }
        inner.head
    }

    /// The last live seq published (`LiveSeq(0)` before the first frame).
    pub fn head(&self) -> LiveSeq {
        self.lock().head
    }

    /// The journal seq covered by the frames published so far.
    pub fn watermark(&self) -> JournalSeq {
        self.lock().watermark
    }

    /// The limits in force (after clamping).
    pub fn limits(&self) -> StreamLimits {
        self.lock().limits
    }

    /// How many subscribers are attached (slow and gone ones are removed when
    /// the next frame is published).
    pub fn subscribers(&self) -> usize {
        self.lock().subscribers.len()
    }

    /// The fewest frames any attached subscriber can still take before it
    /// is a slow client (`None`: no subscribers). A publisher that may wait
    /// — one following a journal, which the run never waits for — paces
    /// itself by this instead of dropping readers in a burst.
    pub fn room(&self) -> Option<usize> {
        self.lock()
            .subscribers
            .iter()
            .filter(|s| !s.tx.is_closed())
            .map(|s| s.tx.capacity())
            .min()
    }

    /// How many subscribers are still listening (those whose receiving
    /// end is gone are not counted, though not yet removed).
    pub fn listening(&self) -> usize {
        self.lock()
            .subscribers
            .iter()
            .filter(|s| !s.tx.is_closed())
            .count()
    }

    /// Lets go of every frame in the ring, keeping for each the journal seq
    /// it had reached (invariant 4): a cursor inside the old ring is then
    /// served from the journal, exactly. A stream nobody watches keeps its
    /// cursor table (16 bytes per record published) and not its frames.
    pub fn shed_ring(&self) {
        let mut inner = self.lock();
        while let Some(old) = inner.ring.pop_front() {
            inner.ring_bytes -= old.data.len();
            inner.note_evicted(&old);
        }
        inner.ring.shrink_to_fit();
    }

    /// Whether [`LiveStream::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Subscribes after cursor `after` (None: from now).
    ///
    /// # Errors
    /// [`CursorError::Ahead`] when `after` is past the head.
    pub fn subscribe(&self, after: Option<LiveSeq>) -> Result<Subscription, CursorError> {
        let mut inner = self.lock();
        let head = inner.head;
        let backlog = match after {
            None => Backlog::Ring(Vec::new()),
            Some(asked) if asked > head => return Err(CursorError::Ahead { asked, head }),
            Some(asked) if asked.0 > 0 && asked <= inner.base => {
                return Err(CursorError::Forgotten {
                    asked,
                    base: inner.base,
                })
            }
            Some(n) => inner.backlog_after(n),
        };
        let (tx, rx) = mpsc::channel(inner.limits.subscriber_frames);
        let slow = Arc::new(AtomicBool::new(false));
        if !inner.closed {
            inner.subscribers.push(Subscriber {
                tx,
                slow: Arc::clone(&slow),
            });
        }
        // On a closed stream `tx` is dropped here: the live end is Closed.
        Ok(Subscription {
            watermark: inner.watermark,
            head,
            backlog,
            live: Live { rx, slow },
        })
    }

    /// Ends every subscriber with Ended::Closed (the session ended and the
    /// server drops the stream). Each reads what was already buffered first.
    /// Later subscriptions get their backlog and a live end that is closed.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.subscribers.clear();
    }
}

impl fmt::Debug for LiveStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("LiveStream")
            .field("head", &inner.head)
            .field("watermark", &inner.watermark)
            .field("ring", &inner.ring.len())
            .field("subscribers", &inner.subscribers.len())
            .field("closed", &inner.closed)
            .finish()
    }
}

impl Inner {
    /// Numbers, delivers and keeps one frame.
    fn push(
        &mut self,
        journal: JournalSeq,
        record: Option<JournalSeq>,
        part: Option<(u32, u32)>,
        data: &str,
    ) {
        self.head = LiveSeq(self.head.0 + 1);
        let frame = Frame {
            seq: self.head,
            journal,
            record,
            part,
            data: Arc::from(data),
        };
        self.subscribers
            .retain(|s| match s.tx.try_send(frame.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    // Set before the sender drops, so the reader sees it once the
                    // channel reports disconnection.
                    s.slow.store(true, Ordering::Release);
                    tracing::debug!(seq = %frame.seq, "a slow subscriber was disconnected");
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
        self.ring_bytes += frame.data.len();
        self.ring.push_back(frame);
        self.evict();
    }

    fn evict(&mut self) {
        while self.ring.len() > 1
            && (self.ring.len() > self.limits.max_frames || self.ring_bytes > self.limits.max_bytes)
        {
            let Some(old) = self.ring.pop_front() else {
                break;
            };
            self.ring_bytes -= old.data.len();
            self.note_evicted(&old);
        }
    }

    /// Keeps the journal seq of a frame leaving the ring (invariant 4).
    fn note_evicted(&mut self, old: &Frame) {
        let last = self.evicted.last().map_or(self.start, |e| e.1);
        if old.journal != last {
            self.evicted.push((old.seq, old.journal));
        }
    }

    /// The journal seq frame `n` had reached, for a frame that left the ring
    /// (or `LiveSeq(0)`).
    fn journal_at(&self, n: LiveSeq) -> JournalSeq {
        let i = self.evicted.partition_point(|e| e.0 <= n);
        match i.checked_sub(1).and_then(|i| self.evicted.get(i)) {
            Some(e) => e.1,
            None => self.start,
        }
    }

    /// The backlog for cursor `n` (≤ head).
    fn backlog_after(&self, n: LiveSeq) -> Backlog {
        let front = self
            .ring
            .front()
            .map_or(LiveSeq(self.head.0 + 1), |f| f.seq);
        if n.0 + 1 >= front.0 {
            let skip = to_index(n.0 + 1 - front.0);
            return Backlog::Ring(self.ring.iter().skip(skip).cloned().collect());
        }
        let after = self.journal_at(n);
        let gap = self.last_record.0 + 1 < front.0;
        let then = if gap {
            self.ring.iter().cloned().collect()
        } else {
            let skip = to_index(self.last_record.0 + 1 - front.0);
            self.ring.iter().skip(skip).cloned().collect()
        };
        Backlog::Journal {
            after,
            upto: self.watermark,
            then,
            gap,
        }
    }
}

fn to_index(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `Some((i, count))` for a split payload, `None` for a whole one.
fn part_of(i: usize, count: usize) -> Option<(u32, u32)> {
    // A payload needs more than 4 GiB × max_frame_bytes to overflow a u32.
    let n = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
    (count > 1).then(|| (n(i), n(count)))
}

/// `data` cut at UTF-8 character boundaries into pieces of at most `max`
/// bytes (`max` ≥ 4); one piece when it fits, even when empty.
fn split(data: &str, max: usize) -> Vec<&str> {
    if data.len() <= max {
        return vec![data];
    }
    let mut parts = Vec::with_capacity(data.len() / max + 1);
    let mut rest = data;
    while !rest.is_empty() {
        let mut cut = max.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        parts.push(piece);
        rest = tail;
    }
    parts
}

impl Live {
    /// The next frame, or why the stream ended for this subscriber.
    ///
    /// # Errors
    /// [`Ended::SlowClient`] once the frames buffered before the subscriber
    /// was dropped for being slow are read; [`Ended::Closed`] once the
    /// buffered frames are read after the stream closed.
    pub async fn next(&mut self) -> Result<Frame, Ended> {
        match self.rx.recv().await {
            Some(frame) => Ok(frame),
            None => Err(self.ended()),
        }
    }

    /// The next frame if one is buffered, without waiting.
    ///
    /// # Errors
    /// As [`Live::next`].
    pub fn try_next(&mut self) -> Result<Option<Frame>, Ended> {
        match self.rx.try_recv() {
            Ok(frame) => Ok(Some(frame)),
            Err(mpsc::error::TryRecvError::Empty) => Ok(None),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(self.ended()),
        }
    }

    fn ended(&self) -> Ended {
        if self.slow.load(Ordering::Acquire) {
            Ended::SlowClient
        } else {
            Ended::Closed
        }
    }
}

impl fmt::Debug for Live {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Live")
            .field("buffered", &self.rx.len())
            .field("slow", &self.slow.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_characters_whole_and_bounded() {
        let s = "aé😀b".repeat(50);
        for max in 4..12 {
            let parts = split(&s, max);
            assert!(parts.iter().all(|p| p.len() <= max && !p.is_empty()));
            assert_eq!(parts.concat(), s);
        }
        assert_eq!(split("", 4), vec![""]);
    }

    #[test]
    fn journal_at_is_exact_over_evicted_frames() {
        let s = LiveStream::starting_at(
            StreamLimits {
                max_frames: 2,
                ..StreamLimits::default()
            },
            JournalSeq(7),
        );
        s.publish_delta("a"); // 1 @7
        s.publish_record(JournalSeq(8), "r8"); // 2 @8
        s.publish_delta("b"); // 3 @8
        s.publish_record(JournalSeq(9), "r9"); // 4 @9
        s.publish_delta("c"); // 5 @9
        s.publish_delta("d"); // 6 @9
        let inner = s.lock();
        let want = [7, 7, 8, 8, 9];
        for (n, j) in want.iter().enumerate() {
            assert_eq!(
                inner.journal_at(LiveSeq(n as u64)),
                JournalSeq(*j),
                "at {n}"
            );
        }
        assert_eq!(inner.evicted.len(), 2);
    }
}
