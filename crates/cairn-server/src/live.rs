//! `GET /v1/sessions/{id}/events`: a session's live stream over SSE, with
//! the reconnect rules of DESIGN §8.
//!
//! Every session watched has one [`Followed`] stream, fed by a thread that
//! follows its journal as it grows (whoever writes it: this server, or a
//! CLI run in another process) and publishes each new record as a frame.
//!
//! On the wire:
//! - `event: subscribed`, first: `{"watermark": J, "head": N}` — the
//!   journal seq already covered and the live seq at the instant of
//!   subscribing; a client that read the records up to some J' fetches
//!   `(J', J]` with `GET …/records` and loses nothing;
//! - `event: record`, `id: N` (the live seq): `{"journal_seq", "record"}`;
//! - `event: record` without `id`: a record read back from the journal for
//!   a cursor older than the ring, `{"rollout_seq", "record"}`;
//! - `event: part`, `id: N`: one piece of a frame over 1 MiB,
//!   `{"part": [i, n], "text"}`; the texts of parts 0..n joined are the
//!   frame's data;
//! - `event: gap`: frames of the turn in flight fell out of the ring;
//! - `event: error`: `{"code": "slow_client" | "integrity" | …}`, then the
//!   stream ends. A cursor ahead of the head is refused before the stream
//!   starts (400, `cursor_ahead`).
//!
//! Bounds — nothing a client does makes the server hold more:
//! 1. At most [`LiveLimits::max_subscribers`] streams are served at once,
//!    over all sessions; one more is answered 503 `busy` with
//!    `Retry-After`, before anything is opened for it.
//! 2. Each event waits at most [`LiveLimits::send_timeout`] for its client
//!    to take it. A client that takes nothing for that long is dropped: its
//!    task ends and the events queued for it are let go at once, whether
//!    or not its connection ever closes. (Publishing never waits for it:
//!    the stream drops it as a slow client first, stream.rs invariant 6.)
//! 3. A session's stream is *awake* — a thread following its journal every
//!    `POLL`, the journal file open — only while a subscriber holds it
//!    ([`Watch`]) or a run of this server drives it. When the last
//!    subscriber has been gone for [`LiveLimits::linger`] (a client that
//!    reconnects at once finds the ring as it left it; each subscriber
//!    gone holds a timer that long, nothing more) and no run drives it, it
//!    falls *asleep*: the thread ends, the file is closed, the ring's
//!    frames are let go, and only its cursor table stays (the journal seq
//!    of each record's frame, 16 bytes a record; [`LiveStream::shed_ring`]).
//!    A subscriber that comes back wakes it: the journal is opened again
//!    and the records past the stream's watermark become its next frames.
//!    So a reconnect with any cursor of that stream is served exactly as
//!    stream.rs promises — from the journal when its frame left the ring
//!    (as every frame does on falling asleep) — and the live seqs go on
//!    where they were.
//! 4. At most [`LiveLimits::max_asleep`] streams sleep; past that, the one
//!    asleep longest is forgotten. A stream made after that numbers its
//!    frames past every seq a forgotten one handed out
//!    ([`LiveStream::numbered_after`]), so an old cursor can never name a
//!    new frame: it is refused (400 `cursor_forgotten`), as a cursor of
//!    another server process is (`cursor_ahead`).
//!
//! Not bounded here: a cursor older than the ring reads the session's
//! journal whole (as `GET …/records` does; the journal crate has no paged
//! reader), at most one such read per admitted subscriber.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;

use crate::api::{blocking, session_id};
use crate::error::{ApiError, Class};
use crate::http::Shared;
use crate::stream::{
    Backlog, CursorError, Ended, Frame, JournalSeq, LiveSeq, LiveStream, StreamLimits,
};
use cairn_journal::{JournalError, JournalFollower as Follower, Record};

/// How often a followed journal is read for new records.
const POLL: Duration = Duration::from_millis(25);

/// How long a followed stream waits for a subscriber with no room before
/// it publishes anyway and that subscriber is dropped as a slow client.
const PATIENCE: Duration = Duration::from_secs(1);

/// The bounds of the live stream route (the module doc says what each
/// guarantees).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveLimits {
    /// Most subscribers at once, over all sessions; one more is answered
    /// 503 with `Retry-After`. Default 256 (at least 1).
    pub max_subscribers: usize,
    /// Longest wait for a client to take one event before it is dropped.
    /// Default 30 s.
    pub send_timeout: Duration,
    /// Most streams kept asleep (their cursor tables) after their last
    /// subscriber left; past it the one asleep longest is forgotten.
    /// Default 1,024.
    pub max_asleep: usize,
    /// How long a stream stays awake after its last subscriber left, so
    /// one that reconnects at once is served from the ring. Default 10 s.
    pub linger: Duration,
}

impl Default for LiveLimits {
    fn default() -> Self {
        LiveLimits {
            max_subscribers: 256,
            send_timeout: Duration::from_secs(30),
            max_asleep: 1024,
            linger: Duration::from_secs(10),
        }
    }
}

/// The live route's state beside the streams themselves: its bounds, the
/// subscribers' permits, and what the forgotten streams handed out.
pub struct LiveState {
    limits: LiveLimits,
    permits: Arc<tokio::sync::Semaphore>,
    /// The highest live seq any forgotten stream handed out (changed under
    /// the streams' lock).
    forgotten: AtomicU64,
    /// Counts streams falling asleep, to tell which has slept longest.
    ticks: AtomicU64,
}

impl LiveState {
    /// The state of a server with `limits`.
    pub fn new(limits: LiveLimits) -> LiveState {
        LiveState {
            limits,
            permits: Arc::new(tokio::sync::Semaphore::new(limits.max_subscribers.max(1))),
            forgotten: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
        }
    }
}

impl Default for LiveState {
    fn default() -> Self {
        LiveState::new(LiveLimits::default())
    }
}

/// A session's live stream and the thread that feeds it from its journal.
///
/// Records reach the stream only under the follower's lock, which is never
/// held while waiting: the follower thread reads the journal every
/// `POLL` and, when a subscriber has no room, lets go of the lock to wait
/// (records read and not yet published wait with the lock's state). A run
/// this server drives publishes each piece of its streamed text
/// ([`Followed::publish_delta`]) under the same lock, after reading the
/// journal and publishing everything before it: a client sees every record
/// the run wrote before a piece of text before that text, and every record
/// written after it after it — one ordered stream. The run waits for a
/// read of the journal's new bytes, never for a reader.
pub struct Followed {
    /// The stream.
    pub stream: LiveStream,
    /// The journal's reader and what it read and has not yet published.
    follower: Mutex<Reading>,
    /// Subscribers holding the stream ([`Watch`]); changed only under the
    /// streams' lock, so falling asleep and being watched never cross.
    watchers: AtomicUsize,
    /// Whether a journal feeds it (false: a detached stream, which never
    /// sleeps; its publisher removes it).
    journal: bool,
}

/// The follower's state, under its lock.
struct Reading {
    /// Reads the journal's new records; `None` once reading failed (then
    /// the stream is closed), while asleep, or for a stream no journal
    /// feeds.
    follower: Option<Follower>,
    /// Reading failed: the stream is closed.
    failed: bool,
    /// Read and not yet published, oldest first: (journal seq, frame data).
    unpublished: std::collections::VecDeque<(u64, String)>,
    /// Counts wakings and fallings asleep: a follower thread whose
    /// generation is past ends (a stream woken again gets a new thread).
    generation: u64,
    /// When it fell asleep ([`LiveState::ticks`]); `None` while awake.
    asleep: Option<u64>,
}

impl Reading {
    fn new(follower: Option<Follower>) -> Reading {
        Reading {
            follower,
            failed: false,
            unpublished: Default::default(),
            generation: 0,
            asleep: None,
        }
    }
}

/// A record as a frame's data: the record as the journal holds it (a
/// verified JSON line).
fn record_frame((rec, line): (Record, String)) -> (u64, String) {
    (
        rec.seq,
        format!("{{\"journal_seq\":{},\"record\":{line}}}", rec.seq),
    )
}

impl Followed {
    /// Reads the journal's new records and publishes them; with `patient`,
    /// stops at the first record a full subscriber has no room for and
    /// returns true (the caller waits outside the lock, then calls again).
    /// Reading that fails closes the stream (and later calls do nothing).
    fn catch_up(&self, r: &mut Reading, patient: bool) -> bool {
        if let Some(follower) = r.follower.as_mut() {
            match follower.poll() {
                Ok(new) => r.unpublished.extend(new.into_iter().map(record_frame)),
                Err(e) => {
                    tracing::warn!("following a journal stopped: {e}");
                    r.follower = None;
                    r.failed = true;
                }
            }
        }
        while let Some((seq, data)) = r.unpublished.front() {
            if patient && self.stream.room() == Some(0) {
                return true;
            }
            self.stream.publish_record(JournalSeq(*seq), data);
            r.unpublished.pop_front();
        }
        if r.failed {
            self.stream.close();
        }
        false
    }

    /// A stream no journal feeds: what is published into it is all it
    /// carries (a benchmark's direct publisher, a test's).
    pub fn detached(stream: LiveStream) -> Followed {
        Followed {
            stream,
            follower: Mutex::new(Reading::new(None)),
            watchers: AtomicUsize::new(0),
            journal: false,
        }
    }

    /// Whether the stream needs no waking: its journal is followed, or
    /// reading it failed (the stream is closed), or no journal feeds it.
    fn is_awake(&self) -> bool {
        let r = lock(&self.follower);
        r.follower.is_some() || r.failed || !self.journal
    }

    /// Publishes a piece of a run's streamed text after every record the
    /// journal holds by now.
    pub fn publish_delta(&self, data: &str) {
        let mut r = lock(&self.follower);
        self.catch_up(&mut r, false);
        if !r.failed {
            self.stream.publish_delta(data);
        }
    }

    /// One turn of the follower thread of `generation`: `None` once the
    /// journal is no longer followed (or followed by a newer thread), else
    /// whether it stopped at a full subscriber (and has waited for room
    /// since: it goes on at once).
    fn step(&self, generation: u64) -> Option<bool> {
        let mut r = lock(&self.follower);
        if r.generation != generation {
            return None;
        }
        let full = self.catch_up(&mut r, true);
        let following = r.follower.is_some() || !r.unpublished.is_empty();
        drop(r);
        if full {
            wait_for_room(&self.stream);
        }
        following.then_some(full)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The record frame's data.
fn record_data(key: &str, seq: u64, record: &serde_json::Value) -> String {
    let mut m = serde_json::Map::new();
    m.insert(key.into(), seq.into());
    m.insert("record".into(), record.clone());
    serde_json::Value::Object(m).to_string()
}

/// The stream of session `id`, made (and its journal followed) on first
/// use, woken if it was asleep. A run of this server takes it this way:
/// while the run drives the session, the stream does not fall asleep.
pub(crate) fn followed(state: &Shared, id: &cairn_store::RunId) -> Result<Arc<Followed>, ApiError> {
    awake(state, id, false)
}

/// A subscriber's hold on a session's stream: while one is held, the stream
/// stays awake; the last one let go puts it to sleep (unless a run of this
/// server drives the session).
pub(crate) struct Watch {
    state: Shared,
    id: String,
    /// The stream.
    pub(crate) f: Arc<Followed>,
}

impl Watch {
    /// Holds the stream of session `id`, woken if it was asleep.
    pub(crate) fn new(state: &Shared, id: &cairn_store::RunId) -> Result<Watch, ApiError> {
        Ok(Watch {
            state: state.clone(),
            id: id.to_string(),
            f: awake(state, id, true)?,
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let (state, id, f) = (self.state.clone(), self.id.clone(), self.f.clone());
        let linger = state.live.limits.linger;
        let leave = move || leave(&state, &id, &f);
        // The hold lasts `linger` more, so a client reconnecting at once
        // finds the ring; falling asleep takes locks a follower thread may
        // hold while it reads, so it runs off the async workers.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(async move {
                tokio::time::sleep(linger).await;
                drop(tokio::task::spawn_blocking(leave));
            })),
            Err(_) => leave(),
        }
    }
}

fn streams(state: &Shared) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Followed>>> {
    lock(&state.streams)
}

/// The stream of `id`, awake; with `watch`, counted as held by one more
/// subscriber.
fn awake(state: &Shared, id: &cairn_store::RunId, watch: bool) -> Result<Arc<Followed>, ApiError> {
    let take = |f: &Arc<Followed>| {
        if watch {
            f.watchers.fetch_add(1, Ordering::SeqCst);
        }
        f.clone()
    };
    if let Some(f) = streams(state).get(id.as_str()).filter(|f| f.is_awake()) {
        return Ok(take(f));
    }
    // The journal is read without the map's lock, so opening a long
    // session never holds up the streams of the others.
    let path = state.store.journal_path(id);
    let mut follower = Follower::open(&path, id.as_str()).map_err(follow_error)?;
    let now = follower.poll().map_err(follow_error)?;
    let mut map = streams(state);
    let f = match map.get(id.as_str()) {
        // Another request woke it meanwhile: theirs is the one.
        Some(f) if f.is_awake() => return Ok(take(f)),
        Some(f) => f.clone(),
        None => {
            // What the journal holds now is covered: the stream starts
            // after it, numbered past every forgotten stream's seqs.
            let covered = now.last().map_or(0, |(r, _)| r.seq);
            let base = LiveSeq(state.live.forgotten.load(Ordering::SeqCst));
            let f = Arc::new(Followed {
                stream: LiveStream::numbered_after(
                    StreamLimits::default(),
                    base,
                    JournalSeq(covered),
                ),
                follower: Mutex::new(Reading::new(None)),
                watchers: AtomicUsize::new(0),
                journal: true,
            });
            map.insert(id.to_string(), f.clone());
            f
        }
    };
    // Records written while it slept (none for a new stream) are its next
    // frames; the thread of this waking publishes them.
    let generation = {
        let mut r = lock(&f.follower);
        let past = f.stream.watermark().0;
        r.unpublished = now
            .into_iter()
            .filter(|(rec, _)| rec.seq > past)
            .map(record_frame)
            .collect();
        r.follower = Some(follower);
        r.asleep = None;
        r.generation += 1;
        r.generation
    };
    let weak = Arc::downgrade(&f);
    let run = id.to_string();
    let spawned = std::thread::Builder::new()
        .name(format!("cairn-follow-{}", &run[..run.len().min(8)]))
        .spawn(move || follow(weak, generation));
    if let Err(e) = spawned {
        fall_asleep(state, &mut map, id.as_str());
        return Err(ApiError::failed(format!("cannot follow the journal: {e}")));
    }
    Ok(take(&f))
}

/// A subscriber of `id` let go of `f`: the last one puts it to sleep.
fn leave(state: &Shared, id: &str, f: &Arc<Followed>) {
    let mut map = streams(state);
    if f.watchers.fetch_sub(1, Ordering::SeqCst) > 1 {
        return;
    }
    if map.get(id).is_some_and(|g| Arc::ptr_eq(f, g)) {
        fall_asleep(state, &mut map, id);
    }
}

/// A run of this server ended: the stream of `id` falls asleep if nobody
/// watches it.
pub(crate) fn run_ended(state: &Shared, id: &str) {
    let mut map = streams(state);
    fall_asleep(state, &mut map, id);
}

/// Puts the stream of `id` to sleep when nobody watches it and no run of
/// this server drives it (a stream whose reading failed is removed, so the
/// next subscriber tries again); then forgets the streams asleep longest
/// past [`LiveLimits::max_asleep`]. Called under the streams' lock.
fn fall_asleep(state: &Shared, map: &mut HashMap<String, Arc<Followed>>, id: &str) {
    let Some(f) = map.get(id).cloned() else {
        return;
    };
    if !f.journal || f.watchers.load(Ordering::SeqCst) > 0 || state.runs.is_running(id) {
        return;
    }
    {
        let mut r = lock(&f.follower);
        if r.failed {
            drop(r);
            map.remove(id);
            return;
        }
        if r.asleep.is_some() {
            return;
        }
        // The thread sees a newer generation and ends; dropping the
        // follower closes the journal. What was read and not published is
        // read again on waking (it is past the watermark).
        r.follower = None;
        r.unpublished = Default::default();
        r.generation += 1;
        r.asleep = Some(state.live.ticks.fetch_add(1, Ordering::SeqCst));
    }
    f.stream.shed_ring();
    let mut asleep: Vec<(u64, String)> = map
        .iter()
        .filter_map(|(k, f)| lock(&f.follower).asleep.map(|t| (t, k.clone())))
        .collect();
    let over = asleep.len().saturating_sub(state.live.limits.max_asleep);
    if over == 0 {
        return;
    }
    asleep.sort_unstable();
    for (_, k) in asleep.into_iter().take(over) {
        if let Some(old) = map.remove(&k) {
            state
                .live
                .forgotten
                .fetch_max(old.stream.head().0, Ordering::SeqCst);
            old.stream.close();
        }
    }
}

/// A journal that cannot be read is a failure; one that does not verify
/// is an integrity error.
fn follow_error(e: JournalError) -> ApiError {
    match e {
        JournalError::Io { .. } => ApiError::failed(e.to_string()),
        e => ApiError {
            status: http::StatusCode::INTERNAL_SERVER_ERROR,
            code: "integrity",
            class: Class::Integrity,
            message: e.to_string(),
        },
    }
}

/// Waits until every subscriber can take a frame, or until one has had no
/// room for [`PATIENCE`]: the follower only lags the journal, which the run
/// never waits for, so a burst (a long batch appended at once) reaches
/// readers that keep reading, while one that stopped is dropped as a slow
/// client by the next publish.
fn wait_for_room(stream: &LiveStream) {
    let since = std::time::Instant::now();
    while stream.room() == Some(0) && since.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Publishes each new record of the journal until the stream is gone,
/// asleep or woken by another thread, or its journal stops reading.
fn follow(stream: Weak<Followed>, generation: u64) {
    let mut full = false;
    loop {
        if !full {
            std::thread::sleep(POLL);
        }
        let Some(f) = stream.upgrade() else { return };
        match f.step(generation) {
            Some(stopped) => full = stopped,
            None => return,
        }
    }
}

/// `?resume_from=N`.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    /// The last live seq the client has (also `Last-Event-ID`).
    pub resume_from: Option<u64>,
}

fn frame_event(f: &Frame) -> Event {
    let e = Event::default().id(f.seq.0.to_string());
    match f.part {
        Some((i, n)) => e
            .event("part")
            .data(serde_json::json!({"part": [i, n], "text": &*f.data}).to_string()),
        None if f.record.is_some() => e.event("record").data(&*f.data),
        None => e.event("delta").data(&*f.data),
    }
}

/// The receiving end of a client's events, owned by the response body.
type Inbox = Arc<Mutex<Option<tokio::sync::mpsc::Receiver<Event>>>>;

/// The events on their way to one client: the subscriber task's end, and
/// a weak hold on the body's receiving end (weak: a body dropped with its
/// connection drops the receiver, which ends the task).
struct Outbox {
    tx: tokio::sync::mpsc::Sender<Event>,
    rx: Weak<Mutex<Option<tokio::sync::mpsc::Receiver<Event>>>>,
    within: Duration,
}

impl Outbox {
    /// Queues `e` for the client; false when the client went away, or took
    /// nothing for `within` — then the events queued for it are let go now,
    /// not when (if ever) its connection closes, and the response ends.
    async fn send(&self, e: Event) -> bool {
        match tokio::time::timeout(self.within, self.tx.send(e)).await {
            Ok(sent) => sent.is_ok(),
            Err(_) => {
                tracing::debug!(
                    "a client that took no event for {:?} was dropped",
                    self.within
                );
                if let Some(rx) = self.rx.upgrade() {
                    lock(&rx).take();
                }
                false
            }
        }
    }
}

/// The 503 of a server serving as many streams as it may.
fn busy(max: usize) -> Response {
    let mut resp = ApiError {
        status: http::StatusCode::SERVICE_UNAVAILABLE,
        code: "busy",
        class: Class::Failure,
        message: format!(
            "this server already serves {max} live streams; retry after a moment, or close a stream you no longer read"
        ),
    }
    .into_response();
    resp.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    resp
}

/// `GET /v1/sessions/{id}/events[?resume_from=N]`.
pub async fn events(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = session_id(&state, &id)?;
    let last_event = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.trim().parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("Last-Event-ID `{v}` is not a live seq"))
            })
        })
        .transpose()?;
    let after = q.resume_from.or(last_event).map(LiveSeq);
    // Before anything is opened: a flood of subscribers holds no more than
    // the cap's worth of threads, files and buffers.
    let Ok(permit) = state.live.permits.clone().try_acquire_owned() else {
        return Ok(busy(state.live.limits.max_subscribers));
    };
    let watch = {
        let state = state.clone();
        let id = id.clone();
        blocking(move || Watch::new(&state, &id)).await?
    };
    let sub = watch.f.stream.subscribe(after).map_err(|e| ApiError {
        status: http::StatusCode::BAD_REQUEST,
        code: match e {
            CursorError::Forgotten { .. } => "cursor_forgotten",
            _ => "cursor_ahead",
        },
        class: Class::Usage,
        message: e.to_string(),
    })?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(256);
    let rx: Inbox = Arc::new(Mutex::new(Some(rx)));
    let out = Outbox {
        tx,
        rx: Arc::downgrade(&rx),
        within: state.live.limits.send_timeout,
    };
    let store = state.store.clone();
    tokio::spawn(async move {
        // Held until the task ends: the permit, and the stream awake.
        let _permit = permit;
        let _watch = watch;
        let hello = serde_json::json!({"watermark": sub.watermark.0, "head": sub.head.0});
        if !out
            .send(Event::default().event("subscribed").data(hello.to_string()))
            .await
        {
            return;
        }
        let frames = match sub.backlog {
            Backlog::Ring(frames) => frames,
            Backlog::Journal {
                after,
                upto,
                then,
                gap,
            } => {
                let read = {
                    let store = store.clone();
                    let id = id.clone();
                    tokio::task::spawn_blocking(move || {
                        cairn_journal::read_journal(&store.journal_path(&id), id.as_str())
                    })
                    .await
                };
                let records =
                    match read {
                        Ok(Ok(scan)) => scan.records,
                        Ok(Err(e)) => {
                            out.send(Event::default().event("error").data(
                            serde_json::json!({"code": "integrity", "message": e.to_string()})
                                .to_string(),
                        ))
                        .await;
                            return;
                        }
                        Err(_) => return,
                    };
                for r in records
                    .iter()
                    .filter(|r| r.seq > after.0 && r.seq <= upto.0)
                {
                    let value = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
                    let data = record_data("rollout_seq", r.seq, &value);
                    if !out.send(Event::default().event("record").data(data)).await {
                        return;
                    }
                }
                if gap
                    && !out
                        .send(Event::default().event("gap").data(
                            r#"{"message":"frames of the turn in flight fell out of the ring; its records follow when they are journaled"}"#,
                        ))
                        .await
                {
                    return;
                }
                then
            }
        };
        for fr in &frames {
            if !out.send(frame_event(fr)).await {
                return;
            }
        }
        let mut live = sub.live;
        loop {
            // A client that went away ends this task at once, not at the
            // next frame of an idle session.
            let next = tokio::select! {
                n = live.next() => n,
                _ = out.tx.closed() => return,
            };
            match next {
                Ok(fr) => {
                    if !out.send(frame_event(&fr)).await {
                        return;
                    }
                }
                Err(Ended::SlowClient) => {
                    out.send(Event::default().event("error").data(
                        r#"{"code":"slow_client","message":"this client fell too far behind and was disconnected; reconnect with resume_from"}"#,
                    ))
                    .await;
                    return;
                }
                Err(Ended::Closed) => return,
            }
        }
    });
    let stream = receiver_stream(rx);
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// The response body: the events queued, until the task ends (or let go of
/// them: a client too slow to take one).
fn receiver_stream(rx: Inbox) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::poll_fn(move |cx| match lock(&rx).as_mut() {
        Some(rx) => rx.poll_recv(cx).map(|e| e.map(Ok)),
        None => Poll::Ready(None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_journal::{JournalWriter, Meta, RecordBody, User};

    /// A run's text, published right after the run appended a record, comes
    /// after that record on the stream — not when the follower's next poll
    /// gets to it (the record would then arrive after the text).
    #[test]
    fn a_runs_text_comes_after_every_record_it_wrote_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = cairn_store::Store::open(dir.path().join("store")).unwrap();
        let id = cairn_store::RunId::new();
        let meta = Meta {
            run: id.to_string(),
            created: cairn_journal::now_rfc3339(),
            workspace: "/nowhere".into(),
            name: None,
            fingerprint: None,
            fork: None,
            routing: None,
            system_file: None,
        };
        let mut writer = JournalWriter::create(&store, &id, meta).unwrap();
        let state: Shared = Arc::new(crate::http::AppState {
            store: store.clone(),
            token: None,
            login: None,
            streams: Default::default(),
            launcher: None,
            runs: Default::default(),
            live: Default::default(),
        });
        let f = followed(&state, &id).unwrap();
        let mut sub = f.stream.subscribe(None).unwrap();
        const N: usize = 40;
        for k in 0..N {
            writer
                .append(&RecordBody::User(User {
                    text: format!("record {k}"),
                    origin: None,
                }))
                .unwrap();
            f.publish_delta(&format!("{{\"text\":\"after {k}\"}}"));
        }
        let mut order = Vec::new();
        let since = std::time::Instant::now();
        while order.len() < 2 * N && since.elapsed() < Duration::from_secs(10) {
            match sub.live.try_next().unwrap() {
                Some(frame) => order.push(match frame.record {
                    Some(_) => "record",
                    None => "text",
                }),
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        let want: Vec<&str> = (0..N).flat_map(|_| ["record", "text"]).collect();
        assert_eq!(order, want);
    }
}
