//! Reading a session's records from the stream: by batched direct gets on
//! a server of 2.11 or later (one request answers with up to a thousand
//! messages of the subject, found by the server's index of subjects), else
//! through an ordered consumer, whose creation a server may pay for with a
//! pass over the stream.
//!
//! Either way a read returns the subject's messages in stream order, each
//! with its stream sequence, through the last one asked for; a read that
//! gets no answer in time fails as a transport error (retried by the
//! caller), never as a short journal.
//!
//! Many journals at once ([`JetStreamJournals::read_in_one_pass`]) are read
//! in one pass over the stream, through one ordered consumer of every
//! session's subject: a new host's first listing of a store of 10,000
//! sessions is one consumer, not 10,000 (on a server before 2.11, each of
//! those is a pass over the stream of its own).

use std::collections::HashMap;

use async_nats::jetstream;
use async_nats::StatusCode;
use bytes::Bytes;
use cairn_journal::RemoteJournalError;
use futures_util::StreamExt;

use super::classify::{classify, Failure};
use super::{record_seq, JetStreamJournals};

/// Messages asked for by one batched direct get.
const DIRECT_BATCH: u64 = 1000;

/// The status of the message that ends a batch (`EOB`).
const END_OF_BATCH: u16 = 204;

/// Messages a pass over the stream brings back from the runtime at a time,
/// and the bytes of payload after which it brings them back sooner.
const PASS_HOP: usize = 1024;
const PASS_HOP_BYTES: usize = 8 << 20;

/// A journal being gathered by a pass over the stream.
struct Gathering {
    run: String,
    /// The records to hand: the count the caller was given.
    want: u64,
    lines: Vec<u8>,
    records: u64,
    /// The stream sequence of the last record gathered.
    last: u64,
}

impl JetStreamJournals {
    /// Every message of `run`'s subject through stream sequence `last`, in
    /// order: (stream sequence, payload).
    pub(super) fn messages_of(
        &self,
        run: &str,
        from: u64,
        last: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, RemoteJournalError> {
        self.retrying(|| match self.direct_batches {
            true => self.messages_direct(run, from, last),
            false => self.messages_by_consumer(run, from, last),
        })
    }

    /// [`cairn_journal::RemoteJournals::read_many`] in one pass over the
    /// stream, through its last message when the pass began. A journal is
    /// handed as soon as its `want` records are gathered; those still short
    /// at the end are handed as they are. Only the journals not yet handed
    /// are held in memory: journals written one after another are handed
    /// one after another. A pass cut off is begun again (retried as a read
    /// is), past what it handed.
    pub(super) fn read_in_one_pass(
        &self,
        runs: &[(String, u64)],
        each: &mut dyn FnMut(&str, Vec<u8>) -> bool,
    ) -> Result<(), RemoteJournalError> {
        let mut wanted: HashMap<String, Gathering> = runs
            .iter()
            .map(|(run, want)| {
                let gathering = Gathering {
                    run: run.clone(),
                    want: *want,
                    lines: Vec::new(),
                    records: 0,
                    last: 0,
                };
                (self.loc.subject(run), gathering)
            })
            .collect();
        let mut stopped = false;
        self.retrying(|| self.pass(&mut wanted, &mut stopped, each))?;
        if stopped {
            return Ok(());
        }
        // What the stream held fewer records of than asked for, by run id
        // (the order `runs` came in, since a listing is sorted).
        let mut short: Vec<Gathering> = wanted.into_values().filter(|g| g.records > 0).collect();
        short.sort_unstable_by(|a, b| a.run.cmp(&b.run));
        for g in short {
            if !self.hand(g, each)? {
                break;
            }
        }
        Ok(())
    }

    /// One pass of [`JetStreamJournals::read_in_one_pass`].
    fn pass(
        &self,
        wanted: &mut HashMap<String, Gathering>,
        stopped: &mut bool,
        each: &mut dyn FnMut(&str, Vec<u8>) -> bool,
    ) -> Result<(), RemoteJournalError> {
        // A pass begun again gathers again what the last one had not handed.
        for g in wanted.values_mut() {
            g.lines.clear();
            g.records = 0;
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let stream = self.stream.clone();
        let filter = self.loc.subjects();
        let name = self.name.clone();
        let wait = self.config.ack_timeout * 4;
        let action = "read every session's records";
        let fail =
            move |e: &(dyn std::error::Error + 'static)| classify(e).into_error(&name, action);
        let started = self.run(async move {
            let end = stream
                .get_info()
                .await
                .map_err(|e| fail(&e))?
                .state
                .last_sequence;
            let consumer = stream
                .create_consumer(jetstream::consumer::pull::OrderedConfig {
                    filter_subject: filter,
                    deliver_policy: jetstream::consumer::DeliverPolicy::All,
                    ..Default::default()
                })
                .await
                .map_err(|e| fail(&e))?;
            let messages = consumer.messages().await.map_err(|e| fail(&e))?;
            Ok::<_, RemoteJournalError>((messages, end))
        })??;
        let (mut messages, end) = started;
        let mut at = 0;
        while at < end && !wanted.is_empty() {
            let name = self.name.clone();
            let (back, hop, drained) = self.run(async move {
                let fail = |f: Failure| f.into_error(&name, action);
                let mut hop: Vec<(u64, async_nats::Subject, Bytes)> = Vec::new();
                let mut bytes = 0;
                while hop.len() < PASS_HOP && bytes < PASS_HOP_BYTES {
                    let next = match tokio::time::timeout(wait, messages.next()).await {
                        Ok(next) => next,
                        Err(_) => {
                            let lost = Failure::Transport("no message arrived in time".into());
                            return Err(fail(lost));
                        }
                    };
                    let Some(m) = next else { break };
                    let m = m.map_err(|e| fail(classify(&e)))?;
                    let info = m.info().map_err(|e| fail(classify(&*e)))?;
                    let (seq, pending) = (info.stream_sequence, info.pending);
                    bytes += m.payload.len();
                    hop.push((seq, m.subject.clone(), m.payload.clone()));
                    // Nothing more to wait for: the end of the pass, or
                    // of the stream (its last message was not this pass's).
                    if seq >= end || pending == 0 {
                        return Ok((messages, hop, true));
                    }
                }
                Ok((messages, hop, false))
            })??;
            messages = back;
            let Some(&(reached, _, _)) = hop.last() else {
                break;
            };
            at = if drained { end } else { reached };
            for (seq, subject, payload) in hop {
                if seq > end {
                    break;
                }
                let Some(g) = wanted.get_mut(subject.as_str()) else {
                    continue;
                };
                if payload.last() != Some(&b'\n') || payload[..payload.len() - 1].contains(&b'\n') {
                    let reason = format!("message {} is not one line", g.records + 1);
                    return Err(self.damaged(&g.run, &reason));
                }
                g.lines.extend_from_slice(&payload);
                g.records += 1;
                g.last = seq;
                if g.records < g.want {
                    continue;
                }
                let Some(done) = wanted.remove(subject.as_str()) else {
                    continue;
                };
                if !self.hand(done, each)? {
                    *stopped = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Hands a gathered journal to `each`, noting its end as a read does.
    fn hand(
        &self,
        g: Gathering,
        each: &mut dyn FnMut(&str, Vec<u8>) -> bool,
    ) -> Result<bool, RemoteJournalError> {
        let body = g.lines.strip_suffix(b"\n").unwrap_or(&g.lines);
        let last_line = body.rsplit(|&b| b == b'\n').next().unwrap_or_default();
        let records = record_seq(last_line)
            .ok_or_else(|| self.damaged(&g.run, "its last message is not a record"))?;
        self.note_end(&g.run, records, g.last);
        Ok(each(&g.run, g.lines))
    }

    /// [`JetStreamJournals::messages_of`] through an ordered consumer (any
    /// server).
    fn messages_by_consumer(
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
            let action = format!("read {subject}");
            let fail =
                |e: &(dyn std::error::Error + 'static)| classify(e).into_error(&name, &action);
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
                    .map_err(|_| {
                        Failure::Transport("no message arrived in time".into())
                            .into_error(&name, &action)
                    })?;
                let Some(m) = next else { break };
                let m = m.map_err(|e| fail(&e))?;
                let info = m.info().map_err(|e| fail(&*e))?;
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

    /// [`JetStreamJournals::messages_of`] by batched direct gets (2.11 and
    /// later, a stream with `allow_direct`).
    fn messages_direct(
        &self,
        run: &str,
        from: u64,
        last: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, RemoteJournalError> {
        let client = self.js.client();
        let api = format!("$JS.API.DIRECT.GET.{}", self.loc.stream());
        let subject = self.loc.subject(run);
        let name = self.name.clone();
        let wait = self.config.ack_timeout * 4;
        self.run(async move {
            let action = format!("read {subject}");
            let fail = |f: Failure| f.into_error(&name, &action);
            let inbox = client.new_inbox();
            let mut answers = client
                .subscribe(inbox.clone())
                .await
                .map_err(|e| fail(classify(&e)))?;
            let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut next = from.max(1);
            while next <= last {
                let ask = serde_json::json!({
                    "seq": next,
                    "next_by_subj": subject,
                    "batch": DIRECT_BATCH,
                });
                client
                    .publish_with_reply(api.clone(), inbox.clone(), ask.to_string().into())
                    .await
                    .map_err(|e| fail(classify(&e)))?;
                let before = out.len();
                loop {
                    let answer = tokio::time::timeout(wait, answers.next())
                        .await
                        .map_err(|_| fail(Failure::Transport("no message arrived in time".into())))?
                        .ok_or_else(|| fail(Failure::Transport("the connection closed".into())))?;
                    match answer.status {
                        None => {
                            let seq = answer
                                .headers
                                .as_ref()
                                .and_then(|h| h.get("Nats-Sequence"))
                                .and_then(|v| v.as_str().parse::<u64>().ok())
                                .ok_or_else(|| {
                                    fail(Failure::Refused(
                                        "a direct get answered without its sequence".into(),
                                    ))
                                })?;
                            if seq <= last && out.last().is_none_or(|&(s, _)| s < seq) {
                                out.push((seq, answer.payload.to_vec()));
                            }
                        }
                        Some(s) if s.as_u16() == END_OF_BATCH => break,
                        // Nothing (more) on the subject from there.
                        Some(StatusCode::NOT_FOUND) => return Ok(out),
                        Some(s) => {
                            return Err(fail(Failure::Refused(format!(
                                "a direct get answered {s} {}",
                                answer.description.unwrap_or_default()
                            ))))
                        }
                    }
                }
                match out.last() {
                    Some(&(s, _)) if out.len() > before => next = s + 1,
                    _ => break,
                }
            }
            Ok(out)
        })?
    }
}
