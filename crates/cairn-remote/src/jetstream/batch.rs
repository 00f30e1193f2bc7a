//! Records appended as one atomic batch (nats-server 2.12 and later,
//! ADR-50): an append of several records is one round trip, not one per
//! record.
//!
//! # The rules
//! - A batch is sent only to a stream whose configuration, as the server
//!   reports it, allows atomic publishing (`allow_atomic`), on a server of
//!   2.12 or later. A server before 2.12 drops that setting and ignores
//!   the batch headers, storing each message on its own, unfenced: it is
//!   never sent one.
//! - The batch's first message carries the fence
//!   (`Nats-Expected-Last-Subject-Sequence`: the stream sequence of the
//!   journal's last record as this writer read it). The server checks it
//!   when the batch commits, under the stream's lock, and stores every
//!   record of the batch or none, at consecutive stream sequences: so the
//!   whole batch is fenced as each single record is. (A fence on a later
//!   message is checked against the batch's own earlier messages, so it is
//!   put on the first alone.)
//! - A batch takes no message ids (the server refuses them there). A
//!   batch whose acknowledgement was lost is not sent again: the records
//!   are then published one by one (`publish` in `mod.rs`), whose fence is
//!   refused when the batch was stored, and whose comparison of the stored
//!   bytes adopts them. Whatever went wrong, nothing is reported stored
//!   unless an acknowledgement naming this batch and its size arrived.
//!
//! # Not guaranteed
//! - A batch the server has staged but not committed (the connection cut
//!   before the commit) is abandoned by the server after its timeout (10 s
//!   by default), holding one of its in-flight batch slots until then.

use std::time::Duration;

use async_nats::header::{
    NATS_BATCH_COMMIT, NATS_BATCH_COMMIT_FINAL, NATS_BATCH_ID, NATS_BATCH_SEQUENCE,
    NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
};
use async_nats::HeaderMap;
use serde::Deserialize;

use super::JetStreamJournals;

/// At most this many records in one batch (the server's ceiling is 1,000
/// by default).
const BATCH_RECORDS: usize = 256;
/// A batch is closed once it holds this many bytes.
const BATCH_BYTES: usize = 4 << 20;

/// API error codes that say the stream or server takes no atomic batch:
/// atomic publishing disabled, an unsupported header, batch publishing
/// disabled.
const NO_BATCHES: [u64; 3] = [10174, 10177, 10205];

/// The oldest server version that takes atomic batches.
const FIRST_VERSION: (u64, u64) = (2, 12);

/// What came of a batch.
pub(super) enum Batched {
    /// Stored, every record: the stream sequence of its last.
    Stored(u64),
    /// Not stored, or not known to be: publish the records one by one.
    Unsure(String),
    /// The stream takes no batches; publish one by one from now on.
    Unsupported(String),
}

/// How many of `lines` (at least two) go in the next batch.
pub(super) fn batch_len(lines: &[&[u8]]) -> usize {
    let mut bytes = 0;
    let mut n = 0;
    for line in lines.iter().take(BATCH_RECORDS) {
        if n >= 2 && bytes + line.len() > BATCH_BYTES {
            break;
        }
        bytes += line.len();
        n += 1;
    }
    n
}

/// Whether a server of `version` ("2.15.1", "v2.12.0-beta") takes atomic
/// batches.
pub(super) fn batches_from(version: &str) -> bool {
    at_least(version, FIRST_VERSION)
}

/// Whether a server of `version` answers batched direct gets (2.11 and
/// later; `read.rs`).
pub(super) fn direct_batches_from(version: &str) -> bool {
    at_least(version, (2, 11))
}

fn at_least(version: &str, first: (u64, u64)) -> bool {
    let mut parts = version
        .trim_start_matches('v')
        .split(['.', '-'])
        .map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= first,
        _ => false,
    }
}

/// The server's answer to a batch's commit.
#[derive(Deserialize)]
struct Ack {
    #[serde(default)]
    error: Option<ApiError>,
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    batch: Option<String>,
    #[serde(default)]
    count: Option<u64>,
}

#[derive(Deserialize)]
struct ApiError {
    #[serde(default)]
    err_code: u64,
    #[serde(default)]
    description: String,
}

/// What `reply` (the commit's answer) says of batch `id` of `n` records.
fn read_ack(reply: &[u8], id: &str, n: usize) -> Batched {
    let ack: Ack = match serde_json::from_slice(reply) {
        Ok(a) => a,
        Err(e) => return Batched::Unsure(format!("the acknowledgement does not parse: {e}")),
    };
    if let Some(e) = ack.error {
        let reason = format!("{} (code {})", e.description, e.err_code);
        return match NO_BATCHES.contains(&e.err_code) {
            true => Batched::Unsupported(reason),
            false => Batched::Unsure(reason),
        };
    }
    if ack.batch.as_deref() == Some(id) && ack.count == Some(n as u64) && ack.seq >= n as u64 {
        Batched::Stored(ack.seq)
    } else {
        // Not this batch's acknowledgement: a server that ignored the
        // batch. What it stored is found out one record at a time.
        Batched::Unsupported("the server acknowledged the batch as a single message".into())
    }
}

impl JetStreamJournals {
    /// Publishes `lines` (records of `run` after the one at stream
    /// sequence `last`) as one atomic batch, fenced on `last`.
    pub(super) fn publish_batch(&self, run: &str, lines: &[&[u8]], last: u64) -> Batched {
        let client = self.js.client();
        let subject = self.loc.subject(run);
        let wait: Duration = self.config.ack_timeout;
        let id = ulid::Ulid::new().to_string();
        let n = lines.len();
        let payloads: Vec<bytes::Bytes> = lines
            .iter()
            .map(|l| bytes::Bytes::copy_from_slice(l))
            .collect();
        let batch = id.clone();
        let sent = self.run(async move {
            let mut payloads = payloads.into_iter().enumerate().peekable();
            while let Some((i, payload)) = payloads.next() {
                let mut headers = HeaderMap::new();
                headers.insert(NATS_BATCH_ID, batch.as_str());
                headers.insert(NATS_BATCH_SEQUENCE, (i + 1).to_string().as_str());
                if i == 0 {
                    headers.insert(
                        NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
                        last.to_string().as_str(),
                    );
                }
                if payloads.peek().is_some() {
                    // Not waited for: the commit's answer speaks for all.
                    client
                        .publish_with_headers(subject.clone(), headers, payload)
                        .await
                        .map_err(|e| e.to_string())?;
                    continue;
                }
                headers.insert(NATS_BATCH_COMMIT, NATS_BATCH_COMMIT_FINAL);
                let reply = client.request_with_headers(subject.clone(), headers, payload);
                return match tokio::time::timeout(wait, reply).await {
                    Ok(Ok(m)) => Ok(m.payload),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("no acknowledgement came in time".to_string()),
                };
            }
            Err("an empty batch".to_string())
        });
        match sent {
            Ok(Ok(reply)) => read_ack(&reply, &id, n),
            Ok(Err(reason)) => Batched::Unsure(reason),
            Err(e) => Batched::Unsure(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_servers_from_2_12_take_batches() {
        for (v, want) in [
            ("2.9.10", false),
            ("2.11.8", false),
            ("2.12.0", true),
            ("v2.12.0-beta.1", true),
            ("2.15.1", true),
            ("3.0.0", true),
            ("", false),
            ("garbage", false),
        ] {
            assert_eq!(batches_from(v), want, "{v}");
        }
        assert!(direct_batches_from("2.11.0") && !direct_batches_from("2.10.26"));
    }

    #[test]
    fn a_batch_is_stored_only_on_its_own_acknowledgement() {
        let stored = |reply: &str| matches!(read_ack(reply.as_bytes(), "B", 3), Batched::Stored(9));
        assert!(stored(r#"{"stream":"S","seq":9,"batch":"B","count":3}"#));
        // Another batch's, another size's, a plain message's.
        assert!(!stored(r#"{"stream":"S","seq":9,"batch":"C","count":3}"#));
        assert!(!stored(r#"{"stream":"S","seq":9,"batch":"B","count":2}"#));
        assert!(matches!(
            read_ack(br#"{"stream":"S","seq":9}"#, "B", 3),
            Batched::Unsupported(_)
        ));
        // A fence refused: not stored, found out one by one.
        assert!(matches!(
            read_ack(
                br#"{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"S","seq":0}"#,
                "B",
                3
            ),
            Batched::Unsure(r) if r.contains("wrong last sequence")
        ));
        assert!(matches!(
            read_ack(
                br#"{"error":{"code":400,"err_code":10174,"description":"atomic publish is disabled"}}"#,
                "B",
                3
            ),
            Batched::Unsupported(_)
        ));
        assert!(matches!(read_ack(b"", "B", 3), Batched::Unsure(_)));
    }

    #[test]
    fn batches_are_bounded_in_records_and_bytes() {
        let small = vec![&b"x\n"[..]; 1000];
        assert_eq!(batch_len(&small), BATCH_RECORDS);
        let big_line = vec![b'y'; BATCH_BYTES / 2];
        let big = vec![&big_line[..]; 5];
        assert_eq!(batch_len(&big), 2);
        let huge_line = vec![b'z'; BATCH_BYTES + 1];
        let huge = vec![&huge_line[..]; 3];
        // Two at least: a batch of one is a plain publish.
        assert_eq!(batch_len(&huge), 2);
        assert_eq!(batch_len(&small[..3]), 3);
    }
}
