//! Reading ahead of the walk: the lines of a large buffer parsed on every
//! core while one of them hashes the chain, so that the walk
//! (`crate::incremental`) — which still checks each line in order — does no
//! parsing and no hashing of its own on the hot path.
//!
//! Invariants: this changes how fast a journal reads, never what it reads
//! as.
//! - A line is read as a record first; only when that fails is its header
//!   read on its own (what the walk needs to judge it). A line that reads as
//!   a record has a header that reads with the same `v`, `seq`, `prev` and
//!   `kind` (the record's header is the stricter of the two), so the walk
//!   takes those from the record.
//! - The chain is hashed from a guessed start (`h(0)` from the first
//!   line's `meta`, or the reader's `h(walked)`), and each hash is handed to
//!   the walk with the hash it was computed from: the walk takes it only
//!   when that is the `h(n-1)` it computed itself, else hashes the line.

use std::ops::Range;

use crate::chain::ChainHash;
use crate::incremental::next_line;
use crate::record::{Header, Record, RecordBody};

/// A line as read: a record, or why it is not one.
// The large variant is the common one: boxing it would cost an allocation
// a line to shrink the rare one.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Read<'a> {
    /// It reads as a record.
    Record(Record),
    /// It does not; its header, read on its own, or why that failed too.
    NotRecord {
        header: Result<Header<'a>, serde_json::Error>,
        record: serde_json::Error,
    },
}

/// Reads one line (module doc, first invariant).
pub(crate) fn read_line(line: &[u8]) -> Read<'_> {
    match Record::from_line(line) {
        Ok(r) => Read::Record(r),
        Err(record) => Read::NotRecord {
            header: serde_json::from_slice::<Header>(line),
            record,
        },
    }
}

/// The lines of a buffer, read ahead; empty for a buffer too small to be
/// worth the threads (the walk then reads each line itself).
pub(crate) struct Ahead<'a> {
    reads: Vec<Option<Read<'a>>>,
    /// The hash the chain was started from.
    start: ChainHash,
    /// `after[i]`: the chain after line `i`, from `start`.
    after: Vec<ChainHash>,
}

impl Default for Ahead<'_> {
    fn default() -> Self {
        Ahead {
            reads: Vec::new(),
            start: ChainHash([0; 32]),
            after: Vec::new(),
        }
    }
}

impl<'a> Ahead<'a> {
    /// Reads the complete lines of `buf` ahead, hashing the chain from the
    /// hash `start` gives (asked only when the buffer is read ahead).
    /// Fewer than 2,048 lines are not worth the threads; no line is shorter
    /// than its header (about 100 bytes), so a short buffer is not counted.
    ///
    /// `slim`: the records are wanted for checking only (`verify`), so the
    /// texts a check never reads are dropped where they were parsed, on
    /// every core ([`slimmed`]), instead of being held until the walk.
    pub(crate) fn of(buf: &'a [u8], start: impl FnOnce() -> ChainHash, slim: bool) -> Ahead<'a> {
        use rayon::prelude::*;
        if buf.len() < 128 * 1024 {
            return Ahead::default();
        }
        let ranges = lines(buf);
        if ranges.len() < 2048 {
            return Ahead::default();
        }
        let start = start();
        let (after, reads) = rayon::join(
            || {
                let mut h = start;
                ranges
                    .iter()
                    .map(|r| {
                        h = h.next(&buf[r.clone()]);
                        h
                    })
                    .collect()
            },
            || {
                ranges
                    .par_iter()
                    .with_min_len(256)
                    .map(|r| match read_line(&buf[r.clone()]) {
                        Read::Record(rec) if slim => Some(Read::Record(slimmed(rec))),
                        read => Some(read),
                    })
                    .collect()
            },
        );
        Ahead {
            reads,
            start,
            after,
        }
    }

    /// Line `i` as read ahead, once.
    pub(crate) fn take(&mut self, i: usize) -> Option<Read<'a>> {
        self.reads.get_mut(i).and_then(Option::take)
    }

    /// The chain hash before line `i` as hashed ahead, and after it.
    pub(crate) fn link(&self, i: usize) -> Option<(ChainHash, ChainHash)> {
        let after = *self.after.get(i)?;
        let before = match i.checked_sub(1) {
            None => self.start,
            Some(j) => *self.after.get(j)?,
        };
        Some((before, after))
    }
}

/// `record` without what only a reader of the conversation needs (texts,
/// calls, outputs): what every check of the reader reads — its header, its
/// kind, a turn's usage and cost, a terminal, a `meta`, a `model_call` — is
/// left as it was.
pub(crate) fn slimmed(mut record: Record) -> Record {
    match &mut record.body {
        RecordBody::User(u) => u.text = String::new(),
        RecordBody::Assistant(a) => {
            a.text = String::new();
            a.tool_calls = Vec::new();
            a.thinking = Vec::new();
            a.reasoning = None;
            a.items = Vec::new();
        }
        RecordBody::ToolResult(t) => t.output = String::new(),
        _ => {}
    }
    record
}

/// The complete lines of `buf`, without their newlines.
fn lines(buf: &[u8]) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut pos = 0usize;
    while let Some(end) = next_line(buf, pos) {
        ranges.push(pos..end);
        pos = end + 1;
    }
    ranges
}
