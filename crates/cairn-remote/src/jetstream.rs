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
//! # Not guaranteed
//! - Leases are advice for people and messages: a writer whose lease
//!   lapsed is still fenced by the stream, which is what keeps records
//!   from being lost or doubled.
//! - The server's `max_payload` (1 MiB by default) bounds a record; a
//!   larger one is refused with that limit named.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_nats::jetstream::{self, context::PublishErrorKind, kv, stream};
use cairn_journal::{LockHolder, RemoteAppended, RemoteJournalError, RemoteJournals};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
    /// How long a writer lease lasts unless renewed.
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

/// A parsed `nats://` location.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Location {
    /// `HOST:PORT`, one or more.
    servers: Vec<String>,
    prefix: String,
    /// `?replicas=N`, when given.
    replicas: Option<usize>,
}

impl Location {
    fn parse(url: &str) -> Result<Location, RemoteJournalError> {
        let bad = |reason: &str| {
            RemoteJournalError::BadUrl {
            url: url.chars().take(300).collect(),
            reason: format!("{reason}; write it as nats://HOST:PORT/PREFIX (several servers as HOST:PORT,HOST:PORT; PREFIX letters, digits, `_` and `-`)"),
        }
        };
        let rest = url
            .strip_prefix("nats://")
            .ok_or_else(|| bad("it does not start with nats://"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (hosts, prefix) = rest
            .split_once('/')
            .ok_or_else(|| bad("it names no PREFIX"))?;
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if prefix.is_empty()
            || prefix.len() > 64
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(bad("its PREFIX is not 1-64 letters, digits, `_` or `-`"));
        }
        let mut servers = Vec::new();
        for h in hosts.split(',') {
            let Some((host, port)) = h.rsplit_once(':') else {
                return Err(bad(&format!("`{h}` has no :PORT")));
            };
            if host.is_empty() || port.parse::<u16>().is_err() || h.contains('@') {
                return Err(bad(&format!("`{h}` is not HOST:PORT")));
            }
            servers.push(h.to_owned());
        }
        let mut replicas = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("replicas", n)) => match n.parse::<usize>() {
                    Ok(n @ 1..=5) => replicas = Some(n),
                    _ => return Err(bad("replicas is 1 to 5")),
                },
                _ => return Err(bad(&format!("`{pair}` is not a known option (replicas=N)"))),
            }
        }
        Ok(Location {
            servers,
            prefix: prefix.to_owned(),
            replicas,
        })
    }

    fn url(&self) -> String {
        format!("nats://{}/{}", self.servers.join(","), self.prefix)
    }

    fn stream(&self) -> String {
        format!("CAIRN_{}", self.prefix)
    }

    fn subjects(&self) -> String {
        format!("{}.runs.>", self.prefix)
    }

    fn subject(&self, run: &str) -> String {
        format!("{}.runs.{run}", self.prefix)
    }

    fn leases(&self) -> String {
        format!("CAIRN_{}_leases", self.prefix)
    }
}

/// A writer lease as stored in the lease bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Lease {
    pid: u32,
    host: String,
    since: String,
    /// Seconds since the Unix epoch after which the lease has lapsed.
    until: u64,
    /// Distinguishes two leases of one process.
    token: String,
}

impl Lease {
    fn holder(&self) -> LockHolder {
        LockHolder {
            pid: self.pid,
            host: self.host.clone(),
            since: self.since.clone(),
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
    rt: Option<tokio::runtime::Runtime>,
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
        self.release_held();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// A held writer lease; released by [`JetStreamJournals::release`].
#[derive(Debug)]
pub struct WriterLease {
    run: String,
    revision: u64,
    since: String,
    token: String,
    taken: std::time::Instant,
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
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cairn-nats")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| RemoteJournalError::Failed {
                remote: name.clone(),
                action: "start a runtime".into(),
                reason: e.to_string(),
            })?;
        let (js, stream, leases) = {
            let loc = loc.clone();
            let name = name.clone();
            let config = config.clone();
            run_on(&rt, async move { connect(&loc, &name, &config).await })??
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
            rt: Some(rt),
        })
    }

    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, RemoteJournalError> {
        let rt = self
            .rt
            .as_ref()
            .ok_or_else(|| self.failed("run", "shut down"))?;
        run_on(rt, fut)
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
        let mut attempt = 0u32;
        loop {
            match read() {
                Err(RemoteJournalError::Failed { .. }) if attempt < self.config.retries => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(200 * u64::from(attempt.min(10))));
                }
                other => return other,
            }
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
            Err(e) => Err(self.failed("read the last record", e)),
        }
    }

    /// Every message of `run`'s subject through stream sequence `last`, in
    /// order: (stream sequence, payload).
    fn messages_of(
        &self,
        run: &str,
        from: u64,
        last: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, RemoteJournalError> {
        self.retrying(|| self.messages_of_once(run, from, last))
    }

    fn messages_of_once(
        &self,
        run: &str,
        from: u64,
        last: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, RemoteJournalError> {
        let stream = self.stream.clone();
        let subject = self.loc.subject(run);
        let name = self.name.clone();
        let wait = self.config.ack_timeout * 4;
        self.run(async move {
            let fail = |e: &dyn std::fmt::Display| RemoteJournalError::Failed {
                remote: name.clone(),
                action: format!("read {subject}"),
                reason: e.to_string(),
            };
            let consumer = stream
                .create_consumer(jetstream::consumer::pull::OrderedConfig {
                    filter_subject: subject.clone(),
                    deliver_policy: if from <= 1 {
                        jetstream::consumer::DeliverPolicy::All
                    } else {
                        jetstream::consumer::DeliverPolicy::ByStartSequence {
                            start_sequence: from,
                        }
                    },
                    ..Default::default()
                })
                .await
                .map_err(|e| fail(&e))?;
            let mut messages = consumer.messages().await.map_err(|e| fail(&e))?;
            let mut out = Vec::new();
            loop {
                let next = tokio::time::timeout(wait, messages.next())
                    .await
                    .map_err(|_| fail(&"no message arrived in time"))?;
                let Some(m) = next else { break };
                let m = m.map_err(|e| fail(&e))?;
                let info = m.info().map_err(|e| fail(&e))?;
                let seq = info.stream_sequence;
                let pending = info.pending;
                out.push((seq, m.payload.to_vec()));
                if seq >= last || pending == 0 {
                    break;
                }
            }
            Ok(out)
        })?
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

    /// Who holds `run`'s writer lease now, if anyone does.
    fn holder(&self, run: &str) -> Result<Option<Lease>, RemoteJournalError> {
        self.live_lease(run)
    }

    /// Takes the writer lease of `run`: refused while another writer holds
    /// one that has not lapsed.
    ///
    /// # Errors
    /// [`RemoteJournalError::Leased`] naming the holder; others when the
    /// bucket cannot be read or written.
    pub fn lease(&self, run: &str) -> Result<WriterLease, RemoteJournalError> {
        let token = format!("{}-{}", std::process::id(), ulid::Ulid::new());
        let lease = self.new_lease(&token);
        let value = serde_json::to_vec(&lease).map_err(|e| self.failed("write a lease", e))?;
        for _ in 0..3 {
            let leases = self.leases.clone();
            let key = run.to_owned();
            let v = bytes::Bytes::from(value.clone());
            let entry = self
                .run(async move { leases.entry(key).await })?
                .map_err(|e| self.failed("read a lease", e))?;
            let leases = self.leases.clone();
            let key = run.to_owned();
            let revision = match entry {
                None => {
                    self.run(async move { leases.create(key, v).await.map_err(|e| e.to_string()) })?
                }
                Some(e) => {
                    // One this process took (and lost track of in a
                    // retry) is taken again, not refused.
                    let held = (e.operation == kv::Operation::Put)
                        .then(|| serde_json::from_slice::<Lease>(&e.value).ok())
                        .flatten()
                        .filter(|l| l.until > unix_now())
                        .filter(|l| !(l.pid == lease.pid && l.host == lease.host));
                    if let Some(l) = held {
                        return Err(RemoteJournalError::Leased {
                            remote: self.name.clone(),
                            run: run.to_owned(),
                            holder: l.holder(),
                        });
                    }
                    let rev = e.revision;
                    self.run(
                        async move { leases.update(key, v, rev).await.map_err(|e| e.to_string()) },
                    )?
                }
            };
            match revision {
                Ok(revision) => {
                    return Ok(WriterLease {
                        run: run.to_owned(),
                        revision,
                        since: lease.since.clone(),
                        token: token.clone(),
                        taken: std::time::Instant::now(),
                    })
                }
                // Taken or changed between the read and the write: look again.
                Err(_) => continue,
            }
        }
        match self.holder(run)? {
            Some(l) => Err(RemoteJournalError::Leased {
                remote: self.name.clone(),
                run: run.to_owned(),
                holder: l.holder(),
            }),
            None => Err(self.failed("take a lease", "it changed three times while being taken")),
        }
    }

    /// Extends a lease this writer holds by another lease period; refused
    /// when it lapsed and another writer took it.
    ///
    /// # Errors
    /// [`RemoteJournalError::Leased`]; the bucket could not be written.
    pub fn renew(&self, lease: WriterLease) -> Result<WriterLease, RemoteJournalError> {
        if lease.taken + self.config.lease / 2 > std::time::Instant::now() {
            return Ok(lease);
        }
        let value = Lease {
            since: lease.since.clone(),
            ..self.new_lease(&lease.token)
        };
        let value = serde_json::to_vec(&value).map_err(|e| self.failed("write a lease", e))?;
        let leases = self.leases.clone();
        let key = lease.run.clone();
        let rev = lease.revision;
        let got = self.run(async move { leases.update(key, value.into(), rev).await })?;
        match got {
            Ok(revision) => Ok(WriterLease {
                revision,
                taken: std::time::Instant::now(),
                ..lease
            }),
            Err(_) => match self.holder(&lease.run)? {
                Some(l) => Err(RemoteJournalError::Leased {
                    remote: self.name.clone(),
                    run: lease.run.clone(),
                    holder: l.holder(),
                }),
                None => self.lease(&lease.run),
            },
        }
    }

    /// Gives up a lease taken by [`JetStreamJournals::lease`] (nothing
    /// happens when it has lapsed and another writer took it).
    ///
    /// # Errors
    /// The bucket could not be written.
    pub fn release(&self, lease: WriterLease) -> Result<(), RemoteJournalError> {
        let leases = self.leases.clone();
        let WriterLease { run, revision, .. } = lease;
        let done =
            self.run(async move { leases.delete_expect_revision(run, Some(revision)).await })?;
        // A lease another writer took after ours lapsed is theirs to keep.
        let _ = done;
        Ok(())
    }

    /// Gives up every lease taken through [`RemoteJournals::hold`] (a
    /// failure leaves one to lapse).
    pub fn release_held(&self) {
        let held: Vec<WriterLease> = self
            .held
            .lock()
            .map(|mut h| h.drain().map(|(_, l)| l).collect())
            .unwrap_or_default();
        for lease in held {
            if let Err(e) = self.release(lease) {
                tracing::warn!("{e}; the writer lease lapses on its own");
            }
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
                .map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            while let Some(s) = subjects.next().await {
                let (subject, n) = s.map_err(|e| e.to_string())?;
                if let Some(id) = subject.strip_prefix(&strip) {
                    out.push((id.to_owned(), n as u64));
                }
            }
            Ok::<_, String>(out)
        })?;
        let mut out = got.map_err(|e| self.failed("list the sessions", e))?;
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
        let mut reason = String::new();
        for attempt in 0..=self.config.retries {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200 * u64::from(attempt.min(10))));
            }
            let js = self.js.clone();
            let subject = subject.clone();
            let id = id.clone();
            let payload = bytes::Bytes::copy_from_slice(line);
            let wait = self.config.ack_timeout;
            let got = self.run(async move {
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
            })?;
            match got {
                Ok(ack) => {
                    return Ok(Published::Stored {
                        sequence: ack.sequence,
                        duplicate: ack.duplicate,
                    })
                }
                Err(e) => match e.kind() {
                    PublishErrorKind::WrongLastSequence => return Ok(Published::Fenced),
                    PublishErrorKind::MaxPayloadExceeded => {
                        return Err(self.failed(
                            &format!("store record {seq} of session {run}"),
                            format!("{e}: the record is {} bytes; raise max_payload in the nats-server configuration", line.len()),
                        ))
                    }
                    // No responder: in a cluster, while the stream elects a
                    // new leader after a node is lost. Tried again.
                    PublishErrorKind::StreamNotFound => {
                        reason = format!("no server answered for the stream {}", self.loc.stream())
                    }
                    _ => reason = e.to_string(),
                },
            }
        }
        Err(RemoteJournalError::NotAcknowledged {
            remote: self.name.clone(),
            run: run.to_owned(),
            seq,
            reason,
        })
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
        let mut seq = after;
        for line in lines.split_inclusive(|&b| b == b'\n') {
            seq += 1;
            if line.last() != Some(&b'\n') {
                return Err(self.failed(
                    &format!("append record {seq} of session {run}"),
                    "it is not a whole line",
                ));
            }
            let outcome = if last == u64::MAX {
                Published::Fenced
            } else {
                self.publish(run, seq, line, last)?
            };
            match outcome {
                Published::Stored {
                    sequence,
                    duplicate,
                } => {
                    last = sequence;
                    if duplicate {
                        done.adopted += 1;
                    } else {
                        done.stored += 1;
                    }
                    self.note_end(run, seq, last);
                }
                Published::Fenced => match self.adopt(run, seq, line)? {
                    Some(s) => {
                        last = s;
                        done.adopted += 1;
                        self.note_end(run, seq, last);
                    }
                    None => return Err(self.conflict(run, seq)),
                },
            }
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
        let leases = self.leases.clone();
        let key = token.to_owned();
        if let Ok(Err(e)) = self.run(async move { leases.delete(key).await }) {
            tracing::warn!("giving up the pool lease {token}: {e}; it lapses on its own");
        }
    }
}

impl JetStreamJournals {
    fn pool_share_once(&self) -> Result<Option<String>, RemoteJournalError> {
        let key = format!("{POOL_SHARE}{}", ulid::Ulid::new());
        let lease = self.new_lease(&key);
        self.kv_put(&key, &lease, None)?;
        // Taken, then checked: a prune that took its lease first is seen.
        // While it runs the share is kept (for half its life), so a prune
        // that starts after it is refused and this upload goes next: given
        // up and taken again, it could wait behind prune after prune.
        let deadline = std::time::Instant::now() + self.config.lease / 2;
        loop {
            let prune = match self.live_lease(POOL_PRUNE) {
                Ok(p) => p,
                Err(e) => {
                    self.pool_release(&key);
                    return Err(e);
                }
            };
            match prune {
                None => return Ok(Some(key)),
                Some(prune) if std::time::Instant::now() >= deadline => {
                    self.pool_release(&key);
                    return Err(self.pool_leased(prune.holder()));
                }
                Some(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn pool_exclusive_once(&self) -> Result<Option<String>, RemoteJournalError> {
        let lease = self.new_lease(POOL_PRUNE);
        let entry = self.kv_entry(POOL_PRUNE)?;
        let revision = match entry {
            Some(e) if e.operation == kv::Operation::Put => {
                if let Some(l) = serde_json::from_slice::<Lease>(&e.value)
                    .ok()
                    .filter(|l| l.until > unix_now())
                {
                    return Err(self.pool_leased(l.holder()));
                }
                Some(e.revision)
            }
            Some(e) => Some(e.revision),
            None => None,
        };
        self.kv_put(POOL_PRUNE, &lease, Some(revision))?;
        // Taken, then checked: an upload that took its lease first is seen.
        for key in self.kv_keys()? {
            if !key.starts_with(POOL_SHARE) {
                continue;
            }
            if let Some(l) = self.live_lease(&key)? {
                self.pool_release(POOL_PRUNE);
                return Err(self.pool_leased(l.holder()));
            }
        }
        Ok(Some(POOL_PRUNE.to_owned()))
    }
}

/// The key of the pool's exclusive lease (a prune's).
const POOL_PRUNE: &str = "pool.prune";
/// The prefix of the keys of the pool's shared leases (uploads').
const POOL_SHARE: &str = "pool.share.";

impl JetStreamJournals {
    fn hold_once(&self, run: &str) -> Result<(), RemoteJournalError> {
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let lease = match held.remove(run) {
            Some(ours) => self.renew(ours)?,
            None => self.lease(run)?,
        };
        held.insert(run.to_owned(), lease);
        Ok(())
    }

    fn new_lease(&self, token: &str) -> Lease {
        Lease {
            pid: std::process::id(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            since: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            until: unix_now() + self.config.lease.as_secs().max(1),
            token: token.to_owned(),
        }
    }

    fn pool_leased(&self, holder: LockHolder) -> RemoteJournalError {
        RemoteJournalError::Leased {
            remote: self.name.clone(),
            run: "the object pool".into(),
            holder,
        }
    }

    fn kv_entry(&self, key: &str) -> Result<Option<kv::Entry>, RemoteJournalError> {
        let leases = self.leases.clone();
        let key = key.to_owned();
        self.run(async move { leases.entry(key).await })?
            .map_err(|e| self.failed("read a lease", e))
    }

    /// The lease under `key` when it is held and has not lapsed.
    fn live_lease(&self, key: &str) -> Result<Option<Lease>, RemoteJournalError> {
        Ok(self
            .kv_entry(key)?
            .filter(|e| e.operation == kv::Operation::Put)
            .and_then(|e| serde_json::from_slice::<Lease>(&e.value).ok())
            .filter(|l| l.until > unix_now()))
    }

    /// Writes `lease` under `key`: created when `revision` is `None`,
    /// else replacing that revision (`Some(None)`: created as well).
    fn kv_put(
        &self,
        key: &str,
        lease: &Lease,
        revision: Option<Option<u64>>,
    ) -> Result<(), RemoteJournalError> {
        let value: bytes::Bytes = serde_json::to_vec(lease)
            .map_err(|e| self.failed("write a lease", e))?
            .into();
        let leases = self.leases.clone();
        let k = key.to_owned();
        let done = self.run(async move {
            match revision.flatten() {
                Some(rev) => leases
                    .update(k, value, rev)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                None => leases
                    .create(k, value)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            }
        })?;
        done.map_err(|e| match self.live_lease(key) {
            Ok(Some(l)) => self.pool_leased(l.holder()),
            _ => self.failed("take a lease", e),
        })
    }

    fn kv_keys(&self) -> Result<Vec<String>, RemoteJournalError> {
        let leases = self.leases.clone();
        let got = self.run(async move {
            let mut keys = leases.keys().await.map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            while let Some(k) = keys.next().await {
                out.push(k.map_err(|e| e.to_string())?);
            }
            Ok::<_, String>(out)
        })?;
        got.map_err(|e| self.failed("list the leases", e))
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

/// Runs `fut` on `rt` and waits for it (from any thread, inside another
/// runtime too).
fn run_on<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, RemoteJournalError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| RemoteJournalError::Failed {
        remote: String::new(),
        action: "wait for the server".into(),
        reason: "a request's task ended without an answer".into(),
    })
}

async fn connect(
    loc: &Location,
    name: &str,
    config: &JetStreamConfig,
) -> Result<(jetstream::Context, stream::Stream, kv::Store), RemoteJournalError> {
    let failed = |action: &str, reason: String| RemoteJournalError::Failed {
        remote: name.to_owned(),
        action: action.to_owned(),
        reason,
    };
    let addrs: Vec<async_nats::ServerAddr> = loc
        .servers
        .iter()
        .map(|s| format!("nats://{s}").parse())
        .collect::<Result<_, _>>()
        .map_err(|e: std::io::Error| RemoteJournalError::BadUrl {
            url: name.to_owned(),
            reason: e.to_string(),
        })?;
    let client = async_nats::ConnectOptions::new()
        .name("cairn")
        .connection_timeout(config.connect_timeout)
        .request_timeout(Some(config.ack_timeout))
        .connect(addrs)
        .await
        .map_err(|e| RemoteJournalError::Unreachable {
            remote: name.to_owned(),
            reason: e.to_string(),
        })?;
    let js = jetstream::new(client);
    let stream = match js.get_stream(loc.stream()).await {
        Ok(mut s) => {
            let info = s
                .info()
                .await
                .map_err(|e| failed("read the stream's configuration", e.to_string()))?;
            check_stream(loc, name, &info.config)?;
            s
        }
        Err(e) if is_not_found(&e.to_string()) => js
            .create_stream(safe_stream(loc, config.replicas))
            .await
            .map_err(|e| {
                failed(
                    &format!("create the stream {}", loc.stream()),
                    e.to_string(),
                )
            })?,
        Err(e) => {
            return Err(RemoteJournalError::Unreachable {
                remote: name.to_owned(),
                reason: format!("JetStream did not answer ({e}); is the server started with -js?"),
            })
        }
    };
    let leases = match js.get_key_value(loc.leases()).await {
        Ok(kv) => kv,
        Err(_) => {
            // The bucket's stream, made as `nats kv add` makes it: made here
            // rather than by `create_key_value`, which needs an account-info
            // answer that servers before 2.10 do not give.
            // Another host may make it at the same moment: theirs will do.
            let made = js.create_stream(lease_stream(loc, config.replicas)).await;
            js.get_key_value(loc.leases())
                .await
                .map_err(|e| match &made {
                    Err(m) => failed(
                        &format!("create the bucket {}", loc.leases()),
                        m.to_string(),
                    ),
                    Ok(_) => failed(&format!("open the bucket {}", loc.leases()), e.to_string()),
                })?
        }
    };
    Ok((js, stream, leases))
}

fn is_not_found(message: &str) -> bool {
    message.contains("not found") || message.contains("10059")
}

/// The settings a stream this creates has.
fn safe_stream(loc: &Location, replicas: usize) -> stream::Config {
    stream::Config {
        name: loc.stream(),
        description: Some(
            "cairn session journals: one subject per session, one message per record".into(),
        ),
        subjects: vec![loc.subjects()],
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::New,
        max_age: Duration::ZERO,
        max_messages: -1,
        max_bytes: -1,
        max_messages_per_subject: -1,
        max_message_size: -1,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        duplicate_window: Duration::from_secs(120),
        deny_delete: true,
        deny_purge: true,
        allow_direct: true,
        ..Default::default()
    }
}

/// The stream of the lease bucket: one value per key, no age limit.
fn lease_stream(loc: &Location, replicas: usize) -> stream::Config {
    let bucket = loc.leases();
    stream::Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        discard: stream::DiscardPolicy::New,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        duplicate_window: Duration::from_secs(120),
        max_age: Duration::ZERO,
        max_messages: -1,
        max_bytes: -1,
        max_message_size: -1,
        ..Default::default()
    }
}

/// Refuses a stream configuration under which a stored record could go.
fn check_stream(loc: &Location, name: &str, c: &stream::Config) -> Result<(), RemoteJournalError> {
    let refuse = |setting: String, fix: &str| {
        Err(RemoteJournalError::Unsafe {
            remote: name.to_owned(),
            setting: format!("stream {} has {setting}", c.name),
            fix: fix.to_owned(),
        })
    };
    if c.retention != stream::RetentionPolicy::Limits {
        return refuse(
            format!("retention {:?}, which removes records once consumed", c.retention),
            "set retention to limits (`nats stream edit --retention limits` cannot change it: recreate the stream)",
        );
    }
    if !c.max_age.is_zero() {
        return refuse(
            format!("max_age {:?}, which deletes older records", c.max_age),
            "set max_age to 0 (unlimited): `nats stream edit --max-age 0`",
        );
    }
    if c.discard == stream::DiscardPolicy::Old {
        return refuse(
            "discard old, which deletes the oldest records at a limit".into(),
            "set discard to new: `nats stream edit --discard new`",
        );
    }
    for (setting, value) in [
        ("max_msgs", c.max_messages),
        ("max_bytes", c.max_bytes),
        ("max_msgs_per_subject", c.max_messages_per_subject),
    ] {
        if value > 0 {
            return refuse(
                format!("{setting} {value}, a limit on the records kept"),
                &format!("set {setting} to -1 (unlimited)"),
            );
        }
    }
    if c.storage == stream::StorageType::Memory {
        return refuse(
            "memory storage, which loses every record when the server stops".into(),
            "use file storage (recreate the stream with --storage file)",
        );
    }
    if c.max_message_size > 0 && c.max_message_size < 1 << 20 {
        return refuse(
            format!(
                "max_msg_size {}, smaller than a record may be",
                c.max_message_size
            ),
            "set max_msg_size to -1 (the server's max_payload applies)",
        );
    }
    if !c.subjects.iter().any(|s| s == &loc.subjects()) {
        return refuse(
            format!("subjects {:?}, not {}", c.subjects, loc.subjects()),
            &format!("add the subject {} to the stream", loc.subjects()),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        let l = Location::parse("nats://127.0.0.1:4222/team").unwrap();
        assert_eq!(l.servers, vec!["127.0.0.1:4222"]);
        assert_eq!(l.prefix, "team");
        assert_eq!(l.subject("r1"), "team.runs.r1");
        assert_eq!(l.stream(), "CAIRN_team");
        let l = Location::parse("nats://a:1,b:2/x_y-z?replicas=3").unwrap();
        assert_eq!(l.servers, vec!["a:1", "b:2"]);
        assert_eq!(l.replicas, Some(3));
        for bad in [
            "http://a:1/x",
            "nats://a:1",
            "nats://a:1/",
            "nats://a/x",
            "nats://a:99999/x",
            "nats://a:1/x.y",
            "nats://a:1/x/y",
            "nats://u@a:1/x",
            "nats://a:1/x?replicas=9",
            "nats://a:1/x?ttl=3",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn message_ids_name_the_record_and_its_bytes() {
        assert_eq!(message_id("r", 3, b"a\n"), message_id("r", 3, b"a\n"));
        assert_ne!(message_id("r", 3, b"a\n"), message_id("r", 3, b"b\n"));
        assert_ne!(message_id("r", 3, b"a\n"), message_id("r", 4, b"a\n"));
        assert_eq!(record_seq(br#"{"seq":7,"prev":"x"}"#), Some(7));
        assert_eq!(record_seq(b"nope"), None);
    }

    #[test]
    fn unsafe_streams_are_refused_with_the_setting_named() {
        let loc = Location::parse("nats://a:1/t").unwrap();
        assert!(check_stream(&loc, "n", &safe_stream(&loc, 1)).is_ok());
        let cases: Vec<(stream::Config, &str)> = vec![
            (
                stream::Config {
                    max_age: Duration::from_secs(60),
                    ..safe_stream(&loc, 1)
                },
                "max_age",
            ),
            (
                stream::Config {
                    discard: stream::DiscardPolicy::Old,
                    ..safe_stream(&loc, 1)
                },
                "discard",
            ),
            (
                stream::Config {
                    retention: stream::RetentionPolicy::WorkQueue,
                    ..safe_stream(&loc, 1)
                },
                "retention",
            ),
            (
                stream::Config {
                    max_messages_per_subject: 10,
                    ..safe_stream(&loc, 1)
                },
                "max_msgs_per_subject",
            ),
            (
                stream::Config {
                    storage: stream::StorageType::Memory,
                    ..safe_stream(&loc, 1)
                },
                "memory",
            ),
            (
                stream::Config {
                    subjects: vec!["other.>".into()],
                    ..safe_stream(&loc, 1)
                },
                "subjects",
            ),
        ];
        for (c, named) in cases {
            let e = check_stream(&loc, "n", &c).unwrap_err().to_string();
            assert!(e.contains(named), "{e}");
        }
    }
}
