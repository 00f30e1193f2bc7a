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

use async_nats::jetstream;
use async_nats::StatusCode;
use cairn_journal::RemoteJournalError;
use futures_util::StreamExt;

use super::classify::{classify, Failure};
use super::JetStreamJournals;

/// Messages asked for by one batched direct get.
const DIRECT_BATCH: u64 = 1000;

/// The status of the message that ends a batch (`EOB`).
const END_OF_BATCH: u16 = 204;

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
