//! Session journals on NATS JetStream (DESIGN §12), a
//! [`cairn_journal::RemoteJournals`], run on a private tokio runtime.
//!
//! # Layout
//! A store `nats://HOST:PORT[,HOST:PORT…]/PREFIX` is:
//! - the stream `CAIRN_<PREFIX>` over the subjects `<PREFIX>.runs.>`; the
//!   journal of session `ID` is the subject `<PREFIX>.runs.<ID>`, one
//!   message per record holding the record's line byte for byte (its `\n`
//!   included);
//! - the key-value bucket `CAIRN_<PREFIX>_leases`: under the key `ID`, who
//!   is writing the session (pid, host, since, until).
//!
//! # Guarantees
//! - Every append carries `Nats-Expected-Last-Subject-Sequence`, the
//!   stream sequence of the journal's last record as this writer read it:
//!   across hosts exactly one writer stores each record seq, and the
//!   other's publish is refused by the server, never stored.
//! - Every append carries a message id, `<ID>.<seq>.<hash of the line>`:
//!   a publish repeated after its acknowledgement was lost is recognised
//!   by the server (within the stream's duplicate window) and answered
//!   with the stored record's ack, so it is adopted, not stored twice;
//!   after the window, the fence refuses it and the stored record is
//!   compared byte for byte and adopted when equal.
//! - Records appended together go as one atomic batch where the server
//!   (2.12 or later) and the stream allow it (`batch.rs`): fenced as one,
//!   stored all or none, one round trip. Elsewhere, and whenever a batch's
//!   outcome is not known, records go one by one as above.
//! - A record counts as appended only when its acknowledgement arrived:
//!   JetStream sends it once the record is stored on the stream's
//!   replicas. A publish whose acknowledgement never comes is retried with
//!   the same id a bounded number of times, then reported
//!   [`RemoteJournalError::NotAcknowledged`].
//! - A stream that could drop records is refused with the setting named
//!   ([`RemoteJournalError::Unsafe`]): retention other than `limits`, a max
//!   age, `discard: old`, any limit on messages or bytes (in total or per
//!   subject), memory storage, or subjects that do not cover the store's.
//!   A missing stream is created with safe settings (and
//!   `deny_delete`/`deny_purge`).
//!
//! - Failures are read from async-nats's typed error kinds and the API's
//!   error codes (`classify.rs`): only a fenced write refused is a race
//!   lost; no answer is [`RemoteJournalError::Unreachable`], retried where
//!   retrying is safe.
//! - The object pool's leases are renewed while held, and records are not
//!   published while a shared one was not kept (`pool.rs`).
//!
//! # Not guaranteed
//! - Writer leases are advice for people and messages: a writer whose
//!   lease lapsed is still fenced by the stream, which is what keeps
//!   records from being lost or doubled.
//! - The server's `max_payload` (1 MiB by default) bounds a record; a
//!   larger one is refused with that limit named.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, kv, stream};
use cairn_journal::{RemoteAppended, RemoteJournalError, RemoteJournals};
use futures_util::StreamExt;
use serde::Deserialize;
use sha2::{Digest, Sha256};

mod batch;
mod classify;
mod lease;
mod pool;
mod read;
mod settings;

use crate::retry::{Backoff, Growth};
use batch::{batch_len, Batched};
use classify::{classify, Failure};
pub use lease::WriterLease;
use settings::{connect, Connected, Location};

/// How a [`JetStreamJournals`] connects and waits.
#[derive(Clone, Debug)]
pub struct JetStreamConfig {
    /// Replicas of a stream this creates (1 on a single server, 3 on a
    /// 3-node cluster); an existing stream keeps its own.
    pub replicas: usize,
    /// How long to wait for the server on connecting.
    pub connect_timeout: Duration,
    /// How long to wait for each acknowledgement.
    pub ack_timeout: Duration,
    /// How many times to send a record again whose acknowledgement did not
    /// come (each with the same message id).
    pub retries: u32,
    /// How long a lease lasts unless renewed, in whole seconds (at least
    /// 2; default 60): a writer lease, renewed as records are appended, and
    /// the object pool's leases, renewed every third of it while held. A
    /// host that stops answering holds them this long at most.
    pub lease: Duration,
}

impl Default for JetStreamConfig {
    fn default() -> Self {
        JetStreamConfig {
            replicas: 1,
            connect_timeout: Duration::from_secs(5),
            ack_timeout: Duration::from_secs(5),
            // With the pauses below, about half a minute: a cluster that
            // lost a node elects a stream leader well within it.
            retries: 20,
            lease: Duration::from_secs(60),
        }
    }
}

/// Session journals in a JetStream stream. Synchronous: requests run on a
/// private runtime and the calling thread waits, so it may be used from
/// any thread.
pub struct JetStreamJournals {
    loc: Location,
    name: String,
    config: JetStreamConfig,
    js: jetstream::Context,
    stream: stream::Stream,
    leases: kv::Store,
    /// Per session, the journal's end as last seen: (records, stream
    /// sequence of the last).
    ends: Mutex<HashMap<String, (u64, u64)>>,
    /// Leases taken through [`RemoteJournals::hold`].
    held: Mutex<HashMap<String, WriterLease>>,
    /// The object pool's leases held, renewed until given up.
    kept: pool::KeptLeases,
    /// Whether records appended together go as one atomic batch
    /// (`batch.rs`); turned off for good when the stream refuses one.
    batches: AtomicBool,
    /// Whether records are read by batched direct gets (`read.rs`).
    direct_batches: bool,
}

impl std::fmt::Debug for JetStreamJournals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamJournals")
            .field("url", &self.name)
            .finish_non_exhaustive()
    }
}

impl Drop for JetStreamJournals {
    fn drop(&mut self) {
        // Each failure is logged; the leases lapse on their own.
        let _ = self.release_held();
        self.give_up_all_pool();
    }
}

impl JetStreamJournals {
    /// Connects to `url` (`nats://HOST:PORT[,HOST:PORT…]/PREFIX[?replicas=N]`)
    /// and checks, or creates, its stream and lease bucket.
    ///
    /// # Errors
    /// [`RemoteJournalError::BadUrl`], [`RemoteJournalError::Unreachable`]
    /// (naming the address), [`RemoteJournalError::Unsafe`] for a stream
    /// that could drop records, [`RemoteJournalError::Failed`].
    pub fn open(
        url: &str,
        config: JetStreamConfig,
    ) -> Result<JetStreamJournals, RemoteJournalError> {
        let loc = Location::parse(url)?;
        let name = loc.url();
        let mut config = config;
        if let Some(r) = loc.replicas {
            config.replicas = r;
        }
        let Connected {
            js,
            stream,
            leases,
            batches,
            direct_batches,
        } = {
            let loc = loc.clone();
            let name = name.clone();
            let config = config.clone();
            run_on(async move { connect(&loc, &name, &config).await })??
        };
        Ok(JetStreamJournals {
            loc,
            name,
            config,
            js,
            stream,
            leases,
            ends: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            kept: Mutex::new(HashMap::new()),
            batches: AtomicBool::new(batches),
            direct_batches,
        })
    }

    /// Whether records appended together go as one atomic batch: the
    /// server is 2.12 or later and the stream allows it (`batch.rs`).
    pub fn atomic_batches(&self) -> bool {
        self.batches.load(Ordering::Relaxed)
    }

    /// Whether records are read by batched direct gets: the server is 2.11
    /// or later and the stream has `allow_direct` (`read.rs`).
    pub fn direct_reads(&self) -> bool {
        self.direct_batches
    }

    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, RemoteJournalError> {
        run_on(fut)
    }

    fn failed(&self, action: &str, reason: impl std::fmt::Display) -> RemoteJournalError {
        RemoteJournalError::Failed {
            remote: self.name.clone(),
            action: action.to_owned(),
            reason: reason.to_string(),
        }
    }

    /// The last message of `run`'s subject: (its stream sequence, its
    /// payload), or `None`.
    fn last_of(&self, run: &str) -> Result<Option<(u64, Vec<u8>)>, RemoteJournalError> {
        self.retrying(|| self.last_of_once(run))
    }

    /// Runs a read again, with pauses, while it fails for want of an
    /// answer (a cluster electing a leader after a node is lost), as a
    /// publish is retried.
    fn retrying<T>(
        &self,
        mut read: impl FnMut() -> Result<T, RemoteJournalError>,
    ) -> Result<T, RemoteJournalError> {
        self.backoff().run(
            |_| read(),
            |e| {
                matches!(
                    e,
                    RemoteJournalError::Failed { .. } | RemoteJournalError::Unreachable { .. }
                )
            },
        )
    }

    /// The pauses between tries of a read or a publish: 0.2 s more each
    /// time, at most 2 s, `retries` times (about half a minute in all with
    /// the default, what a cluster takes to elect a leader).
    fn backoff(&self) -> Backoff {
        Backoff {
            retries: self.config.retries,
            first: Duration::from_millis(200),
            growth: Growth::Linear,
            cap: Duration::from_secs(2),
        }
    }

    fn last_of_once(&self, run: &str) -> Result<Option<(u64, Vec<u8>)>, RemoteJournalError> {
        let stream = self.stream.clone();
        let subject = self.loc.subject(run);
        let got =
            self.run(async move { stream.get_last_raw_message_by_subject(&subject).await })?;
        match got {
            Ok(m) => Ok(Some((m.sequence, m.payload.to_vec()))),
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(classify(&e).into_error(&self.name, "read the last record")),
        }
    }

    /// The stream sequence of record `after` of `run` (0 for none), and
    /// checks that the journal holds exactly `after` records.
    fn fence(&self, run: &str, after: u64) -> Result<Fence, RemoteJournalError> {
        if let Ok(ends) = self.ends.lock() {
            if let Some(&(n, last)) = ends.get(run) {
                if n == after {
                    return Ok(Fence::At(last));
                }
            }
        }
        let Some((last, payload)) = self.last_of(run)? else {
            return Ok(if after == 0 {
                Fence::At(0)
            } else {
                Fence::Short(0)
            });
        };
        let n = record_seq(&payload)
            .ok_or_else(|| self.damaged(run, "its last message is not a record"))?;
        self.note_end(run, n, last);
        Ok(match n.cmp(&after) {
            std::cmp::Ordering::Equal => Fence::At(last),
            std::cmp::Ordering::Less => Fence::Short(n),
            std::cmp::Ordering::Greater => Fence::Ahead,
        })
    }

    fn note_end(&self, run: &str, records: u64, last: u64) {
        if let Ok(mut ends) = self.ends.lock() {
            ends.insert(run.to_owned(), (records, last));
        }
    }

    fn forget_end(&self, run: &str) {
        if let Ok(mut ends) = self.ends.lock() {
            ends.remove(run);
        }
    }

    fn damaged(&self, run: &str, reason: &str) -> RemoteJournalError {
        RemoteJournalError::Damaged {
            remote: self.name.clone(),
            run: run.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn conflict(&self, run: &str, seq: u64) -> RemoteJournalError {
        RemoteJournalError::Conflict {
            remote: self.name.clone(),
            run: run.to_owned(),
            seq,
            holder: self.holder(run).ok().flatten().map(|l| l.holder()),
        }
    }

    /// The number of records in each session's journal, by id.
    ///
    /// # Errors
    /// The stream could not be read.
    pub fn counts(&self) -> Result<Vec<(String, u64)>, RemoteJournalError> {
        let stream = self.stream.clone();
        let filter = self.loc.subjects();
        let strip = format!("{}.runs.", self.loc.prefix);
        let got = self.run(async move {
            let mut subjects = stream
                .info_with_subjects(filter)
                .await
                .map_err(|e| classify(&e))?;
            let mut out = Vec::new();
            while let Some(s) = subjects.next().await {
                let (subject, n) = s.map_err(|e| classify(&e))?;
                if let Some(id) = subject.strip_prefix(&strip) {
                    out.push((id.to_owned(), n as u64));
                }
            }
            Ok::<_, Failure>(out)
        })?;
        let mut out = got.map_err(|f| f.into_error(&self.name, "list the sessions"))?;
        out.sort();
        Ok(out)
    }

    /// Publishes one record, fenced on `last`, with its message id; retries
    /// a lost acknowledgement. Returns the ack's stream sequence, and
    /// whether the server had it already.
    fn publish(
        &self,
        run: &str,
        seq: u64,
        line: &[u8],
        last: u64,
    ) -> Result<Published, RemoteJournalError> {
        let id = message_id(run, seq, line);
        let subject = self.loc.subject(run);
        let tried = self.backoff().run(
            |_| {
                let js = self.js.clone();
                let subject = subject.clone();
                let id = id.clone();
                let payload = bytes::Bytes::copy_from_slice(line);
                let wait = self.config.ack_timeout;
                let got = self
                    .run(async move {
                        let msg = jetstream::message::PublishMessage::build()
                            .payload(payload)
                            .message_id(id)
                            .expected_last_subject_sequence(last);
                        let ack = js.send_publish(subject, msg).await?;
                        match tokio::time::timeout(wait, ack).await {
                            Ok(a) => a,
                            Err(_) => Err(jetstream::context::PublishError::new(
                                PublishErrorKind::TimedOut,
                            )),
                        }
                    })
                    .map_err(Unpublished::Stop)?;
                match got {
                    Ok(ack) => Ok(Published::Stored {
                        sequence: ack.sequence,
                        duplicate: ack.duplicate,
                    }),
                    Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => {
                        Err(Unpublished::Stop(self.failed(
                            &format!("store record {seq} of session {run}"),
                            format!("{e}: the record is {} bytes; raise max_payload in the nats-server configuration", line.len()),
                        )))
                    }
                    Err(e) => match classify(&e) {
                        Failure::Raced => Ok(Published::Fenced),
                        // No responder: in a cluster, while the stream elects a
                        // new leader after a node is lost. Tried again.
                        Failure::Transport(_) if e.kind() == PublishErrorKind::StreamNotFound => {
                            Err(Unpublished::Again(format!(
                                "no server answered for the stream {}",
                                self.loc.stream()
                            )))
                        }
                        // Tried again, with the same message id: one that was
                        // stored is recognised.
                        Failure::Transport(r) | Failure::Refused(r) => Err(Unpublished::Again(r)),
                    },
                }
            },
            |e| matches!(e, Unpublished::Again(_)),
        );
        match tried {
            Ok(p) => Ok(p),
            Err(Unpublished::Stop(e)) => Err(e),
            Err(Unpublished::Again(reason)) => Err(RemoteJournalError::NotAcknowledged {
                remote: self.name.clone(),
                run: run.to_owned(),
                seq,
                reason,
            }),
        }
    }

    /// After the fence refused record `seq`: adopts it when the journal's
    /// record `seq` has exactly `line`'s bytes.
    fn adopt(&self, run: &str, seq: u64, line: &[u8]) -> Result<Option<u64>, RemoteJournalError> {
        self.forget_end(run);
        let Some((last, payload)) = self.last_of(run)? else {
            return Ok(None);
        };
        if record_seq(&payload) == Some(seq) {
            return Ok((payload == line).then_some(last));
        }
        let messages = self.messages_of(run, 1, last)?;
        let k = usize::try_from(seq - 1).unwrap_or(usize::MAX);
        Ok(match messages.get(k) {
            Some((s, p)) if p == line => Some(*s),
            _ => None,
        })
    }

    /// Appends record `seq` alone: published fenced on `last` with its
    /// message id, or, when the fence refuses it, adopted when the journal
    /// holds exactly its bytes there. `last` moves to its stream sequence.
    fn append_one(
        &self,
        run: &str,
        seq: u64,
        line: &[u8],
        last: &mut u64,
        done: &mut RemoteAppended,
    ) -> Result<(), RemoteJournalError> {
        let outcome = if *last == u64::MAX {
            Published::Fenced
        } else {
            self.publish(run, seq, line, *last)?
        };
        match outcome {
            Published::Stored {
                sequence,
                duplicate,
            } => {
                *last = sequence;
                if duplicate {
                    done.adopted += 1;
                } else {
                    done.stored += 1;
                }
            }
            Published::Fenced => match self.adopt(run, seq, line)? {
                Some(s) => {
                    *last = s;
                    done.adopted += 1;
                }
                None => return Err(self.conflict(run, seq)),
            },
        }
        self.note_end(run, seq, *last);
        Ok(())
    }

    /// After a batch of `lines` (records `before+1..`) whose answer was
    /// lost: the stream sequence of its last record when the journal now
    /// ends with exactly those records, read in one request, else `None`
    /// (the records are then found out one by one). A committed batch is
    /// stored at consecutive stream sequences, so its records are the
    /// messages from `end + 1 - n` on.
    fn adopt_batch(
        &self,
        run: &str,
        before: u64,
        lines: &[&[u8]],
    ) -> Result<Option<u64>, RemoteJournalError> {
        self.forget_end(run);
        let n = lines.len() as u64;
        let Some((end, payload)) = self.last_of(run)? else {
            return Ok(None);
        };
        if record_seq(&payload) != Some(before + n) {
            return Ok(None);
        }
        let stored = self.messages_of(run, (end + 1).saturating_sub(n), end)?;
        let same = stored.len() == lines.len()
            && stored.iter().zip(lines).all(|((_, got), line)| got == line);
        Ok(same.then_some(end))
    }
}

/// Why a try of a publish did not store the record.
enum Unpublished {
    /// Worth another try, for this reason.
    Again(String),
    /// Not: this error is the answer.
    Stop(RemoteJournalError),
}

enum Fence {
    /// The journal holds exactly the records expected; its last's stream
    /// sequence.
    At(u64),
    /// It holds fewer: this many.
    Short(u64),
    /// It holds more.
    Ahead,
}

enum Published {
    Stored { sequence: u64, duplicate: bool },
    Fenced,
}

impl RemoteJournals for JetStreamJournals {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn read(&self, run: &str) -> Result<Option<Vec<u8>>, RemoteJournalError> {
        self.read_after(run, 0)
    }

    fn read_many(
        &self,
        runs: &[(String, u64)],
        each: &mut dyn FnMut(&str, Vec<u8>) -> bool,
    ) -> Result<(), RemoteJournalError> {
        self.read_in_one_pass(runs, each)
    }

    fn read_after(&self, run: &str, after: u64) -> Result<Option<Vec<u8>>, RemoteJournalError> {
        let Some((last, payload)) = self.last_of(run)? else {
            return Ok(None);
        };
        let end = record_seq(&payload)
            .ok_or_else(|| self.damaged(run, "its last message is not a record"))?;
        if end <= after {
            return Ok(Some(Vec::new()));
        }
        // Where record `after` is in the stream, when this connection saw it.
        let known = self
            .ends
            .lock()
            .ok()
            .and_then(|e| e.get(run).copied())
            .filter(|&(n, _)| n == after && after > 0);
        let (from, skip) = match known {
            Some((_, s)) => (s + 1, 0),
            None => (1, after),
        };
        let messages = self.messages_of(run, from, last)?;
        let mut out = Vec::new();
        for (i, (_, payload)) in messages
            .iter()
            .enumerate()
            .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        {
            if payload.last() != Some(&b'\n') || payload[..payload.len() - 1].contains(&b'\n') {
                return Err(self.damaged(run, &format!("message {} is not one line", i + 1)));
            }
            out.extend_from_slice(payload);
        }
        self.note_end(run, end, last);
        Ok(Some(out))
    }

    fn append(
        &self,
        run: &str,
        after: u64,
        lines: &[u8],
    ) -> Result<RemoteAppended, RemoteJournalError> {
        self.shares_kept()?;
        let mut done = RemoteAppended::default();
        let mut last = match self.fence(run, after)? {
            Fence::At(last) => last,
            Fence::Short(n) => {
                return Err(self.failed(
                    &format!("append to session {run}"),
                    format!("it holds {n} records, not the {after} this append follows"),
                ))
            }
            Fence::Ahead => u64::MAX,
        };
        let lines: Vec<&[u8]> = lines.split_inclusive(|&b| b == b'\n').collect();
        if let Some(k) = lines.iter().position(|l| l.last() != Some(&b'\n')) {
            return Err(self.failed(
                &format!("append record {} of session {run}", after + k as u64 + 1),
                "it is not a whole line",
            ));
        }
        let mut at = 0;
        while at < lines.len() {
            // The records before this step.
            let before = after + at as u64;
            // Several records, the fence known: one atomic batch (`batch.rs`).
            let mut one_by_one = 1;
            if lines.len() - at >= 2 && last != u64::MAX && self.batches.load(Ordering::Relaxed) {
                let n = batch_len(&lines[at..]);
                let chunk = &lines[at..at + n];
                let stored = match self.publish_batch(run, chunk, last) {
                    Batched::Stored(end) => Some((end, false)),
                    Batched::Unsupported(why) => {
                        tracing::debug!("{}: records go one by one: {why}", self.name);
                        self.batches.store(false, Ordering::Relaxed);
                        None
                    }
                    Batched::Unsure(why) => {
                        tracing::debug!(
                            "{}: a batch of session {run} was not acknowledged: {why}",
                            self.name
                        );
                        match self.adopt_batch(run, before, chunk) {
                            Ok(found) => found.map(|end| (end, true)),
                            // Found out one by one, as below.
                            Err(e) => {
                                tracing::debug!("{}: {e}", self.name);
                                None
                            }
                        }
                    }
                };
                if let Some((end, adopted)) = stored {
                    last = end;
                    at += n;
                    match adopted {
                        true => done.adopted += n as u64,
                        false => done.stored += n as u64,
                    }
                    self.note_end(run, after + at as u64, last);
                    continue;
                }
                // Its records one by one: their fence and comparison find
                // out what was stored.
                one_by_one = n;
            }
            for (k, line) in lines[at..at + one_by_one].iter().enumerate() {
                self.append_one(run, before + k as u64 + 1, line, &mut last, &mut done)?;
            }
            at += one_by_one;
        }
        Ok(done)
    }

    fn hold(&self, run: &str) -> Result<(), RemoteJournalError> {
        self.retrying(|| self.hold_once(run))
    }

    fn let_go(&self, run: &str) {
        let lease = self.held.lock().ok().and_then(|mut h| h.remove(run));
        if let Some(lease) = lease {
            if let Err(e) = self.release(lease) {
                // It lapses on its own.
                tracing::warn!("{e}; the writer lease lapses on its own");
            }
        }
    }

    fn runs(&self) -> Result<Vec<(String, u64)>, RemoteJournalError> {
        self.counts()
    }

    fn pool_share(&self) -> Result<Option<String>, RemoteJournalError> {
        self.retrying(|| self.pool_share_once())
    }

    fn pool_exclusive(&self) -> Result<Option<String>, RemoteJournalError> {
        self.retrying(|| self.pool_exclusive_once())
    }

    fn pool_release(&self, token: &str) {
        if let Err(e) = self.give_up_pool(token) {
            tracing::warn!("{e}; the object pool lease lapses on its own");
        }
    }
}

/// `<run>.<seq>.<first 32 hex digits of the line's SHA-256>`: the same for
/// every attempt to store one record, different for any other record.
fn message_id(run: &str, seq: u64, line: &[u8]) -> String {
    let digest = Sha256::digest(line);
    format!("{run}.{seq}.{}", hex::encode(&digest[..16]))
}

/// The `seq` of a record line, read without parsing the whole record.
fn record_seq(line: &[u8]) -> Option<u64> {
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_slice::<Seq>(line).ok().map(|s| s.seq)
}

/// Runs `fut` on the remote stores' runtime (`bridge.rs`) and waits for it.
fn run_on<T: Send + 'static>(
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, RemoteJournalError> {
    crate::bridge::run(fut).map_err(|e| RemoteJournalError::Failed {
        remote: String::new(),
        action: "wait for the server".into(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_name_the_record_and_its_bytes() {
        assert_eq!(message_id("r", 3, b"a\n"), message_id("r", 3, b"a\n"));
        assert_ne!(message_id("r", 3, b"a\n"), message_id("r", 3, b"b\n"));
        assert_ne!(message_id("r", 3, b"a\n"), message_id("r", 4, b"a\n"));
        assert_eq!(record_seq(br#"{"seq":7,"prev":"x"}"#), Some(7));
        assert_eq!(record_seq(b"nope"), None);
    }
}
