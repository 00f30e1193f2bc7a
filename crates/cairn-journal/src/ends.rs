//! Reading a journal from its ends, without reading the rest: what a lister
//! needs to vouch for a projection in a few small reads.
//!
//! Invariants:
//! - nothing here verifies the whole chain. What is returned is what the
//!   bytes read attest: the first line's `h(1)`, computed from its own
//!   genesis; and a suffix of lines each of whose chain hash is the `prev`
//!   of the next, ending in the last line's `h(n)`. A caller compares those
//!   hashes with ones it kept from a full verification (a projection's
//!   binding) before believing anything else about the journal;
//! - the suffix reaches back to the last record that is not bookkeeping
//!   (`RecordBody::is_bookkeeping`), so the status it gives is the fold's
//!   (`Tail::status`);
//! - every read is bounded ([`MAX_END_BYTES`]); a journal whose ends do not
//!   fit, or that does not end in complete, parseable, linked lines, gives
//!   `None` and the caller reads it in full;
//! - nothing here writes.

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::chain::ChainHash;
use crate::fold::Status;
use crate::record::{Record, RecordBody, Terminal, SCHEMA_VERSION};
use crate::JournalError;

/// The most bytes read from either end of a journal before giving up and
/// leaving it to a full read.
pub const MAX_END_BYTES: u64 = 1024 * 1024;

/// The last complete line of a journal, read from its end in O(1).
#[derive(Clone, Debug)]
pub struct TailRecord {
    /// The record.
    pub record: Record,
    /// `h(seq)`: SHA-256 of its `prev` and its bytes.
    pub hash: ChainHash,
    /// Length of the journal file.
    pub len: u64,
    /// Its mtime, nanoseconds since the epoch (see [`mtime_ns`]).
    pub mtime_ns: i64,
}

/// A file's mtime in nanoseconds since the epoch, as projections bind it.
pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// Reads the last record from the end of the file without reading the rest.
///
/// Returns `None` when the file does not end in one complete, parseable record
/// line (a torn tail, damage, or an empty file): the caller then reads the
/// whole journal. The chain is NOT verified here; the hash is what the last
/// line itself attests.
///
/// # Errors
/// Only IO errors.
pub fn read_tail_record(path: &Path) -> Result<Option<TailRecord>, JournalError> {
    let f = std::fs::File::open(path).map_err(|e| JournalError::io("opening", path, e))?;
    let meta = f
        .metadata()
        .map_err(|e| JournalError::io("reading metadata of", path, e))?;
    let (len, mtime_ns) = (meta.len(), mtime_ns(&meta));
    let Some(tail) = read_suffix(&f, path, len, |_| true)? else {
        return Ok(None);
    };
    let Some((record, hash)) = tail.into_iter().last() else {
        return Ok(None);
    };
    Ok(Some(TailRecord {
        record,
        hash,
        len,
        mtime_ns,
    }))
}

/// The first record of a journal and the chain hash it attests.
#[derive(Clone, Debug)]
pub struct Head {
    /// The record (a `meta`, seq 1).
    pub record: Record,
    /// `h(1)`: SHA-256 of the genesis its own run id (and fork pin) give and
    /// of its bytes. Not its stated `prev`: a changed first line hashes to
    /// another value.
    pub hash: ChainHash,
}

/// Reads the first record (the `meta`) without reading the rest.
///
/// # Errors
/// IO errors, or [`JournalError::Damaged`] at seq 1 when the first line is not
/// a complete meta record within [`MAX_END_BYTES`].
pub fn read_head_record(path: &Path) -> Result<Record, JournalError> {
    read_head(path).map(|h| h.record)
}

/// Reads the first record and computes its `h(1)`.
///
/// # Errors
/// As [`read_head_record`].
pub fn read_head(path: &Path) -> Result<Head, JournalError> {
    let mut f = std::fs::File::open(path).map_err(|e| JournalError::io("opening", path, e))?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = f
            .read(&mut chunk)
            .map_err(|e| JournalError::io("reading", path, e))?;
        let from = buf.len();
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf[from..].iter().position(|&b| b == b'\n') {
            break Some(from + i);
        }
        if n == 0 || buf.len() as u64 > MAX_END_BYTES {
            break None;
        }
    };
    let bad = |reason: &str| JournalError::Damaged {
        path: path.to_path_buf(),
        seq: 1,
        offset: 0,
        reason: reason.into(),
    };
    let end = end.ok_or_else(|| bad("the journal holds no complete `meta` record"))?;
    head_of(&buf[..end]).ok_or_else(|| bad("the first record is not a valid `meta`"))
}

fn head_of(line: &[u8]) -> Option<Head> {
    let record = Record::from_line(line).ok()?;
    let RecordBody::Meta(m) = &record.body else {
        return None;
    };
    if record.seq != 1 {
        return None;
    }
    let genesis = match &m.fork {
        Some(f) => ChainHash::fork_genesis(&f.parent, f.seq, &f.hash),
        None => ChainHash::genesis(&m.run),
    };
    let hash = genesis.next(line);
    Some(Head { record, hash })
}

/// The end of a journal: its last records back to the last one that is not
/// bookkeeping, each linked to the next by the chain.
#[derive(Clone, Debug)]
pub struct Tail {
    /// Oldest first. The first is the last record that is not bookkeeping
    /// (a `terminal`, a work record, or the `meta`); the rest are bookkeeping.
    pub records: Vec<Record>,
    /// `h(n)` of the last record.
    pub hash: ChainHash,
}

impl Tail {
    /// The last record (`read_ends` never returns an empty tail).
    pub fn last(&self) -> Option<&Record> {
        self.records.last()
    }

    /// The last terminal, when nothing but bookkeeping follows it.
    pub fn terminal(&self) -> Option<&Terminal> {
        match self.records.first().map(|r| &r.body) {
            Some(RecordBody::Terminal(t)) => Some(t),
            _ => None,
        }
    }

    /// The run's status, as the fold gives it: the last terminal's reason,
    /// or `running` when work follows it or there is none.
    pub fn status(&self) -> Status {
        self.terminal()
            .map_or(Status::Running, |t| Status::Ended(t.reason))
    }
}

/// Both ends of a journal, from one open and a few bounded reads.
#[derive(Clone, Debug)]
pub struct Ends {
    /// The first record.
    pub head: Head,
    /// The last records.
    pub tail: Tail,
    /// Length of the journal file.
    pub len: u64,
    /// Its mtime in nanoseconds (see [`mtime_ns`]).
    pub mtime_ns: i64,
}

/// Reads the ends of the journal of `run` at `path` (see the module doc).
///
/// Returns `None` when they cannot be read cheaply and consistently: a torn
/// tail, damage at either end, a suffix of bookkeeping longer than
/// [`MAX_END_BYTES`], a first record that names another run. The caller then
/// reads the whole journal.
///
/// # Errors
/// Only IO errors.
pub fn read_ends(path: &Path, run: &str) -> Result<Option<Ends>, JournalError> {
    let f = std::fs::File::open(path).map_err(|e| JournalError::io("opening", path, e))?;
    read_ends_of(&f, path, run)
}

/// [`read_ends`] of a journal already open (`path` names it in errors).
///
/// # Errors
/// Only IO errors.
pub fn read_ends_of(
    f: &std::fs::File,
    path: &Path,
    run: &str,
) -> Result<Option<Ends>, JournalError> {
    let meta = f
        .metadata()
        .map_err(|e| JournalError::io("reading metadata of", path, e))?;
    let (len, mtime_ns) = (meta.len(), mtime_ns(&meta));
    let Some(suffix) = read_suffix(f, path, len, |r| !r.body.is_bookkeeping())? else {
        return Ok(None);
    };
    let (Some(&(_, hash)), Some(head)) = (suffix.last(), read_head_at(f, path, len)?) else {
        return Ok(None);
    };
    match &head.record.body {
        RecordBody::Meta(m) if m.run == run => {}
        _ => return Ok(None),
    }
    if let Some((first, h1)) = suffix.first() {
        // The suffix reached the start: it must chain from the genesis.
        if first.seq == 1 && *h1 != head.hash {
            return Ok(None);
        }
    }
    let records: Vec<Record> = suffix.into_iter().map(|(r, _)| r).collect();
    Ok(Some(Ends {
        head,
        tail: Tail { records, hash },
        len,
        mtime_ns,
    }))
}

/// Where the written bytes of a file of `len` bytes end: before the NUL
/// bytes that end it (a writer's preallocated space), found by reading
/// back from the end. `None` when more than [`MAX_END_BYTES`] of them would
/// have to be read.
fn written_end(f: &std::fs::File, path: &Path, len: u64) -> Result<Option<u64>, JournalError> {
    // Mostly the last byte is a newline: start small.
    let mut window: u64 = 64;
    let mut end = len;
    while end > 0 {
        if len - end >= MAX_END_BYTES {
            return Ok(None);
        }
        let take = window.min(end);
        let buf = read_at(f, path, end - take, take)?;
        match buf.iter().rposition(|&b| b != 0) {
            Some(i) => return Ok(Some(end - take + i as u64 + 1)),
            None => end -= take,
        }
        window = (window * 4).min(64 * 1024);
    }
    Ok(Some(0))
}

fn read_head_at(f: &std::fs::File, path: &Path, len: u64) -> Result<Option<Head>, JournalError> {
    let mut window: u64 = 1024;
    loop {
        let take = window.min(len);
        let buf = read_at(f, path, 0, take)?;
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => return Ok(head_of(&buf[..end])),
            None if take == len || window >= MAX_END_BYTES => return Ok(None),
            None => window = window.saturating_mul(4).min(MAX_END_BYTES),
        }
    }
}

fn read_at(f: &std::fs::File, path: &Path, offset: u64, n: u64) -> Result<Vec<u8>, JournalError> {
    // `n` is at most MAX_END_BYTES and at most the file's length.
    let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
    f.read_exact_at(&mut buf, offset)
        .map_err(|e| JournalError::io("reading", path, e))?;
    Ok(buf)
}

/// The last lines of `f` (of length `len`), parsed, oldest first, each with
/// its chain hash; back to and including the last record for which `stop`
/// holds (or record 1). `None` when the end is not complete, parseable and
/// linked within [`MAX_END_BYTES`].
fn read_suffix(
    f: &std::fs::File,
    path: &Path,
    len: u64,
    stop: impl Fn(&Record) -> bool,
) -> Result<Option<Vec<(Record, ChainHash)>>, JournalError> {
    let mut window: u64 = 1024;
    loop {
        let take = window.min(len);
        let buf = read_at(f, path, len - take, take)?;
        if buf.last() == Some(&0) {
            // A running writer's preallocated space (NUL bytes) ends the
            // file: the records end before it.
            return match written_end(f, path, len)? {
                Some(end) if end < len => read_suffix(f, path, end, stop),
                _ => Ok(None),
            };
        }
        if buf.last() != Some(&b'\n') {
            return Ok(None);
        }
        match suffix_in(&buf[..buf.len() - 1], take == len, &stop) {
            Walked::Done(s) => return Ok(Some(s)),
            Walked::Invalid => return Ok(None),
            Walked::NeedMore if take == len || window >= MAX_END_BYTES => return Ok(None),
            Walked::NeedMore => window = window.saturating_mul(4).min(MAX_END_BYTES),
        }
    }
}

enum Walked {
    Done(Vec<(Record, ChainHash)>),
    Invalid,
    NeedMore,
}

/// Walks `body` (the window without its final newline) backwards line by
/// line. `whole` says the window starts at the file's start, so its first
/// line is complete.
fn suffix_in(body: &[u8], whole: bool, stop: &impl Fn(&Record) -> bool) -> Walked {
    let mut out: Vec<(Record, ChainHash)> = Vec::new();
    let mut end = body.len();
    loop {
        let start = match body[..end].iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if whole => 0,
            None => return Walked::NeedMore,
        };
        let line = &body[start..end];
        let Ok(record) = Record::from_line(line) else {
            return Walked::Invalid;
        };
        if record.v > SCHEMA_VERSION {
            return Walked::Invalid;
        }
        let hash = record.prev.next(line);
        if let Some((next, _)) = out.last() {
            // Linked: this line's hash is what the next one states, and the
            // seqs are consecutive.
            if next.prev != hash || record.seq.checked_add(1) != Some(next.seq) {
                return Walked::Invalid;
            }
        }
        let done = stop(&record) || record.seq == 1;
        out.push((record, hash));
        if done {
            out.reverse();
            return Walked::Done(out);
        }
        if start == 0 {
            // The file's first line is not seq 1.
            return Walked::Invalid;
        }
        end = start - 1;
    }
}
