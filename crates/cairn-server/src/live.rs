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

use std::convert::Infallible;
use std::sync::{Arc, Mutex, Weak};
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
use crate::stream::{Backlog, Ended, Frame, JournalSeq, LiveSeq, LiveStream, StreamLimits};
use cairn_journal::{JournalError, JournalFollower as Follower};

/// How often a followed journal is read for new records.
const POLL: Duration = Duration::from_millis(25);

/// How long a followed stream waits for a subscriber with no room before
/// it publishes anyway and that subscriber is dropped as a slow client.
const PATIENCE: Duration = Duration::from_secs(1);

/// A session's live stream and the thread that feeds it from its journal.
///
/// Records reach the stream only under the follower's lock, which is never
/// held while waiting: the follower thread reads the journal every
/// [`POLL`] and, when a subscriber has no room, lets go of the lock to wait
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
}

/// The follower's state, under its lock.
struct Reading {
    /// Reads the journal's new records; `None` once reading failed (then
    /// the stream is closed), or for a stream no journal feeds.
    follower: Option<Follower>,
    /// Reading failed: the stream is closed.
    failed: bool,
    /// Read and not yet published, oldest first: (journal seq, frame data).
    unpublished: std::collections::VecDeque<(u64, String)>,
}

impl Followed {
    /// Reads the journal's new records and publishes them; with `patient`,
    /// stops at the first record a full subscriber has no room for and
    /// returns true (the caller waits outside the lock, then calls again).
    /// Reading that fails closes the stream (and later calls do nothing).
    fn catch_up(&self, r: &mut Reading, patient: bool) -> bool {
        if let Some(follower) = r.follower.as_mut() {
            match follower.poll() {
                // The record as the journal holds it (a verified JSON line).
                Ok(new) => r.unpublished.extend(new.into_iter().map(|(rec, line)| {
                    (
                        rec.seq,
                        format!("{{\"journal_seq\":{},\"record\":{line}}}", rec.seq),
                    )
                })),
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
            follower: Mutex::new(Reading {
                follower: None,
                failed: false,
                unpublished: Default::default(),
            }),
        }
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

    /// One turn of the follower thread: `None` once the journal is no
    /// longer followed, else whether it stopped at a full subscriber (and
    /// has waited for room since: it goes on at once).
    fn step(&self) -> Option<bool> {
        let mut r = lock(&self.follower);
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

/// The stream of session `id`, started (and its journal followed) on first
/// use.
pub(crate) fn followed(state: &Shared, id: &cairn_store::RunId) -> Result<Arc<Followed>, ApiError> {
    let streams = || state.streams.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = streams().get(id.as_str()) {
        return Ok(f.clone());
    }
    // The journal is read without the map's lock, so opening a long
    // session never holds up the streams of the others.
    let path = state.store.journal_path(id);
    let mut follower = Follower::open(&path, id.as_str()).map_err(follow_error)?;
    // What the journal holds now is covered: the stream starts after it.
    let now = follower.poll().map_err(follow_error)?;
    let covered = now.last().map_or(0, |(r, _)| r.seq);
    let mut map = streams();
    // Another request may have started it meanwhile: theirs is the one.
    if let Some(f) = map.get(id.as_str()) {
        return Ok(f.clone());
    }
    let f = Arc::new(Followed {
        stream: LiveStream::starting_at(StreamLimits::default(), JournalSeq(covered)),
        follower: Mutex::new(Reading {
            follower: Some(follower),
            failed: false,
            unpublished: Default::default(),
        }),
    });
    map.insert(id.to_string(), f.clone());
    drop(map);
    let weak = Arc::downgrade(&f);
    let run = id.to_string();
    std::thread::Builder::new()
        .name(format!("cairn-follow-{}", &run[..run.len().min(8)]))
        .spawn(move || follow(weak))
        .map_err(|e| ApiError::failed(format!("cannot follow the journal: {e}")))?;
    Ok(f)
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

/// Publishes each new record of the journal until the stream is gone (or
/// its journal stops reading).
fn follow(stream: Weak<Followed>) {
    let mut full = false;
    loop {
        if !full {
            std::thread::sleep(POLL);
        }
        let Some(f) = stream.upgrade() else { return };
        match f.step() {
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
    let f = {
        let state = state.clone();
        let id = id.clone();
        blocking(move || followed(&state, &id)).await?
    };
    let sub = f.stream.subscribe(after).map_err(|e| ApiError {
        status: http::StatusCode::BAD_REQUEST,
        code: "cursor_ahead",
        class: Class::Usage,
        message: e.to_string(),
    })?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(256);
    let store = state.store.clone();
    tokio::spawn(async move {
        let _keep = f;
        let hello = serde_json::json!({"watermark": sub.watermark.0, "head": sub.head.0});
        if tx
            .send(Event::default().event("subscribed").data(hello.to_string()))
            .await
            .is_err()
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
                let records = match read {
                    Ok(Ok(scan)) => scan.records,
                    Ok(Err(e)) => {
                        let _ = tx
                            .send(Event::default().event("error").data(
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
                    if tx
                        .send(Event::default().event("record").data(data))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if gap
                    && tx
                        .send(Event::default().event("gap").data(
                            r#"{"message":"frames of the turn in flight fell out of the ring; its records follow when they are journaled"}"#,
                        ))
                        .await
                        .is_err()
                {
                    return;
                }
                then
            }
        };
        for fr in &frames {
            if tx.send(frame_event(fr)).await.is_err() {
                return;
            }
        }
        let mut live = sub.live;
        loop {
            // A client that went away ends this task at once, not at the
            // next frame of an idle session.
            let next = tokio::select! {
                n = live.next() => n,
                _ = tx.closed() => return,
            };
            match next {
                Ok(fr) => {
                    if tx.send(frame_event(&fr)).await.is_err() {
                        return;
                    }
                }
                Err(Ended::SlowClient) => {
                    let _ = tx
                        .send(Event::default().event("error").data(
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

fn receiver_stream(
    mut rx: tokio::sync::mpsc::Receiver<Event>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|e| e.map(Ok)))
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
