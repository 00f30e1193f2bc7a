//! The journal's one reader. Bytes go in as they arrive — a whole file at
//! once ([`crate::read_journal`] and `verify` do that), or a growing file
//! piece by piece ([`crate::JournalFollower`]) — and every rule below is
//! applied to each complete line once, in order. What cannot be judged yet
//! (a line without its newline, a line that is not a record, a broken link
//! whose blame depends on the line after it) is kept, and judged again with
//! the bytes that follow.
//!
//! Rules, in the order they are applied to each line:
//! 1. A line is the bytes up to a `\n`. Bytes after the last `\n` are a cut
//!    line: part of the torn tail.
//! 2. A line that is not a JSON record header starts the *final region*. The
//!    region is a tolerated torn tail only if no complete record header can
//!    be parsed starting at any `{` inside it; otherwise it is damage at that
//!    seq.
//! 3. Line 1 must be `meta`; its run id (and fork pin) give `h(0)`.
//! 4. Line n must carry `seq` n and `prev` = `h(n-1)`. When `prev` is wrong,
//!    the break is blamed on line n-1 if line n is itself consistent with
//!    line n+1 (someone changed n-1's bytes), or if no complete line follows
//!    it (nothing attests it); else on line n.
//! 5. A record of a newer schema version, or whose body does not match its
//!    kind (a second `meta` among them), is reported only when the chain is
//!    good up to the end, so tampering is always reported as damage first.
//! 6. With the chain good, every `terminal`'s totals must be the fold's at
//!    that point (for a fork read alone, from its first terminal on: see
//!    `TotalsCheck`); the first that is not is damage at its seq, even
//!    before a deferred problem further on (it is checked only over the
//!    records before one).
//! 7. The records reported are those before the first problem; a journal
//!    without a complete `meta` line is damage at seq 1 (its creation was
//!    interrupted).
//!
//! Invariants:
//! - what [`IncrementalReader::report`] says after any sequence of pushes
//!   is what the one-shot reader says of all the bytes pushed, concatenated:
//!   the one-shot reader is this reader given them at once;
//! - a line that continues the chain (rules 1–4) is *consumed*: it is never
//!   read again, and nothing pushed later changes what it was found to be;
//! - records are yielded once each, in order, as their lines are consumed,
//!   up to the first deferred problem (rule 5); the report says how many of
//!   them verify (a later line can show that the last one yielded was
//!   changed, rule 4; a terminal can disagree with the fold, rule 6);
//! - once the report is *settled* (a line that does not continue the chain,
//!   judged for good), no byte pushed later changes it, and none is kept.
//!
//! Nothing here does IO. Each push costs time in the bytes it brings plus
//! those not consumed yet (a cut line, a region being judged).

use std::fmt;
use std::path::Path;

use crate::ahead::{read_line, Ahead, Read};
use crate::chain::ChainHash;
use crate::fold::TotalsCheck;
use crate::reader::{TornTail, VerifyReport};
use crate::record::{Header, MetaHead, Record, RecordBody, SCHEMA_VERSION};
use crate::JournalError;

/// Why the bytes read so far do not make a good journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    Damaged {
        seq: u64,
        offset: u64,
        reason: String,
    },
    Newer {
        seq: u64,
        found: u32,
    },
    WrongRun {
        found: String,
    },
    /// No complete `meta` line (rule 7): damage at seq 1 for a reader of a
    /// finished file; a follower waits for the line instead.
    Unstarted,
}

/// What [`Problem::Unstarted`] is reported as.
const UNSTARTED: &str =
    "the journal holds no complete `meta` record (its creation was interrupted)";

impl Problem {
    /// The first bad seq and what `verify` says of it.
    pub(crate) fn describe(&self, run: &str) -> (u64, String) {
        match self {
            Problem::Damaged {
                seq,
                offset,
                reason,
            } => (*seq, format!("seq {seq} (byte {offset}): {reason}")),
            Problem::Newer { seq, found } => (
                *seq,
                format!("seq {seq} has schema v{found}; this cairn reads up to v{SCHEMA_VERSION}"),
            ),
            Problem::WrongRun { found } => (
                1,
                format!("the meta record names session {found}, not {run}"),
            ),
            Problem::Unstarted => (1, format!("seq 1 (byte 0): {UNSTARTED}")),
        }
    }

    /// The error of reading the journal at `path`; `expected` is the run
    /// it was read as, named when the meta names another.
    pub(crate) fn into_error(self, path: &Path, expected: String) -> JournalError {
        let path = path.to_path_buf();
        match self {
            Problem::Damaged {
                seq,
                offset,
                reason,
            } => JournalError::Damaged {
                path,
                seq,
                offset,
                reason,
            },
            Problem::Newer { seq, found } => JournalError::NewerSchema {
                path,
                seq,
                found,
                supported: SCHEMA_VERSION,
            },
            Problem::WrongRun { found } => JournalError::WrongRun {
                path,
                expected,
                found,
            },
            Problem::Unstarted => JournalError::Damaged {
                path,
                seq: 1,
                offset: 0,
                reason: UNSTARTED.into(),
            },
        }
    }
}

/// What a reader says of the bytes it was given.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    /// How many of the records yielded verify (those before the problem).
    pub records: u64,
    /// `h(records)`, or `h(0)` of the run when there is none.
    pub tail: ChainHash,
    /// Bytes of those records' lines.
    pub valid_len: u64,
    pub torn: Option<TornTail>,
    pub problem: Option<Problem>,
}

/// A point in the chain: `h(n)` and the end of line n.
#[derive(Clone, Copy, Debug)]
struct Mark {
    hash: ChainHash,
    end: u64,
}

/// A problem found on a consumed line (rules 5 and 6), with the chain just
/// before that line.
#[derive(Clone, Debug)]
struct Found {
    problem: Problem,
    seq: u64,
    before: Mark,
}

/// What the bytes after the consumed lines hold.
#[derive(Clone, Debug)]
enum Stop {
    /// Nothing.
    Clean,
    /// A torn tail: a cut line, or a final region holding no record (yet).
    Torn(TornTail),
    /// A line that does not continue the chain.
    Broken {
        problem: Problem,
        /// The last consumed line is blamed (rule 4), not this one.
        blames_last: bool,
        /// No byte appended later can change the judgement.
        settled: bool,
    },
}

/// Why line `walked + 1` is not consumed.
enum Fault {
    /// Not a record header (rule 2): torn or damage, by what follows.
    NotRecord(serde_json::Error),
    /// Its `prev` is not `h(n-1)` (rule 4); the `prev` it states.
    Link(Option<ChainHash>),
    /// Anything else: judged for good.
    Settled(Problem),
}

/// Reads a journal incrementally: push its bytes as they arrive, get each
/// new record once, and ask at any point what the reader makes of the bytes
/// so far (the module's rules; `cairn verify` says the same of them).
///
/// A line without its newline yet is the torn tail ([`TornTail`], `zeros`
/// when it is only NUL bytes: space its writer preallocated) and no
/// problem; the records before it are yielded. Before a complete `meta`
/// line, the report names seq 1, as `verify` does of such a file; a
/// follower waits instead.
///
/// ```
/// use cairn_journal::{IncrementalReader, JournalWriter, Meta, RecordBody, User};
/// use cairn_store::{RunId, Store};
///
/// let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(dir.path()).unwrap();
/// let id = RunId::new();
/// let meta = Meta {
///     run: String::new(), created: "2026-01-01T00:00:00Z".into(),
///     workspace: "/tmp/ws".into(), name: None,
///     fingerprint: None, fork: None, routing: None, system_file: None,
/// };
/// let mut w = JournalWriter::create(&store, &id, meta).unwrap();
/// w.append(&RecordBody::User(User::person("hello"))).unwrap();
/// drop(w);
/// let bytes = std::fs::read(store.journal_path(&id)).unwrap();
///
/// let mut reader = IncrementalReader::new(id.as_str());
/// let cut = bytes.len() - 5; // inside the `user` line
/// assert_eq!(reader.push(&bytes[..cut]).len(), 1); // the meta
/// assert!(reader.report().torn_tail);
/// let rest = reader.push(&bytes[cut..]);
/// assert_eq!(rest[0].0.seq, 2);
/// assert!(reader.report().ok() && !reader.report().torn_tail);
/// ```
pub struct IncrementalReader {
    run: String,
    /// Lines consumed.
    walked: u64,
    /// `h(walked)`; before line 1, `h(0)` of a root run.
    prev: ChainHash,
    /// Bytes of the consumed lines.
    consumed: u64,
    /// The chain before the last consumed line (`h(walked-1)`, its start).
    before_last: Mark,
    /// From line 1 on.
    totals: Option<TotalsCheck>,
    /// The first terminal that disagrees with the fold (rule 6).
    totals_bad: Option<Found>,
    /// The first deferred problem (rule 5).
    deferred: Option<Found>,
    /// Bytes after the consumed lines, kept to be judged again.
    pending: Vec<u8>,
    stop: Stop,
    /// Records are wanted for checking only ([`IncrementalReader::checking`]).
    slim: bool,
}

impl fmt::Debug for IncrementalReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IncrementalReader")
            .field("run", &self.run)
            .field("consumed_lines", &self.walked)
            .field("consumed_bytes", &self.consumed)
            .field("pending_bytes", &self.pending.len())
            .field("stop", &self.stop)
            .finish()
    }
}

impl IncrementalReader {
    /// A reader of the journal of run `run`, given no bytes yet.
    pub fn new(run: &str) -> IncrementalReader {
        let genesis = ChainHash::genesis(run);
        IncrementalReader {
            run: run.to_owned(),
            walked: 0,
            prev: genesis,
            consumed: 0,
            before_last: Mark {
                hash: genesis,
                end: 0,
            },
            totals: None,
            totals_bad: None,
            deferred: None,
            pending: Vec::new(),
            stop: Stop::Clean,
            slim: false,
        }
    }

    /// A reader whose records are wanted for checking only: large buffers
    /// yield them without their texts, calls and outputs (`ahead::slimmed`),
    /// which a check never reads. What it reports is what any reader
    /// reports.
    pub(crate) fn checking(run: &str) -> IncrementalReader {
        IncrementalReader {
            slim: true,
            ..IncrementalReader::new(run)
        }
    }

    /// Takes the next bytes of the journal; returns the records they
    /// complete, in order, each with its exact line (without the newline).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<(Record, String)> {
        let mut out = Vec::new();
        self.feed(bytes, &mut |record, line| {
            // A record parsed from it, so the line is UTF-8.
            out.push((record, String::from_utf8_lossy(line).into_owned()));
        });
        out
    }

    /// What `verify` says of every byte pushed so far.
    pub fn report(&self) -> VerifyReport {
        crate::reader::report_of(self.outcome(), &self.run)
    }

    /// True when no byte pushed later can change the report: a line that
    /// does not continue the chain was judged for good. Until then, a later
    /// line can still turn a torn tail into damage, move the blame for a
    /// broken link, or put a broken chain before a deferred problem.
    pub fn settled(&self) -> bool {
        matches!(self.stop, Stop::Broken { settled: true, .. })
    }

    /// Records yielded so far: the seq of the last one.
    pub fn seq(&self) -> u64 {
        self.yielded().0
    }

    /// `h(seq)` of the last record yielded (`None` before the first).
    pub fn tail(&self) -> Option<ChainHash> {
        let (n, mark) = self.yielded();
        (n > 0).then_some(mark.hash)
    }

    /// The end of the last record yielded, in bytes from the start.
    pub fn offset(&self) -> u64 {
        self.yielded().1.end
    }

    /// Bytes consumed: the lines that continued the chain. Everything after
    /// is kept and judged again (see [`IncrementalReader::forget_unconsumed`]).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Forgets the bytes pushed after [`IncrementalReader::consumed`]: the
    /// next push continues the journal from there. For a file whose end
    /// may have been rewritten since it was read (preallocated zeros
    /// written over, a torn tail cut and appended after).
    pub fn forget_unconsumed(&mut self) {
        self.pending.clear();
        self.stop = Stop::Clean;
    }

    /// The seq and end of the last record yielded: records are yielded up
    /// to the first deferred problem.
    fn yielded(&self) -> (u64, Mark) {
        match &self.deferred {
            Some(d) => (d.seq - 1, d.before),
            None => (self.walked, self.current()),
        }
    }

    fn current(&self) -> Mark {
        Mark {
            hash: self.prev,
            end: self.consumed,
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8], sink: &mut impl FnMut(Record, &[u8])) {
        if self.settled() {
            return;
        }
        if self.pending.is_empty() {
            let used = self.walk(bytes, sink);
            if !self.settled() {
                self.pending.extend_from_slice(&bytes[used..]);
            }
        } else {
            let mut buf = std::mem::take(&mut self.pending);
            buf.extend_from_slice(bytes);
            let used = self.walk(&buf, sink);
            if !self.settled() {
                buf.drain(..used);
                self.pending = buf;
            }
        }
    }

    /// Consumes the lines of `buf` (which starts at `consumed`) that
    /// continue the chain; judges what follows them; returns the bytes
    /// consumed.
    fn walk(&mut self, buf: &[u8], sink: &mut impl FnMut(Record, &[u8])) -> usize {
        let mut ahead = Ahead::of(buf, || self.chain_start(buf), self.slim);
        let mut pos = 0;
        let mut i = 0;
        while pos < buf.len() {
            let Some(end) = next_line(buf, pos) else {
                self.stop = Stop::Torn(self.torn(&buf[pos..]));
                return pos;
            };
            let line = &buf[pos..end];
            let read = ahead.take(i).unwrap_or_else(|| read_line(line));
            if let Err(fault) = self.line(line, read, ahead.link(i), sink) {
                self.stop = self.judge(fault, &buf[pos..], end - pos);
                return pos;
            }
            pos = end + 1;
            i += 1;
        }
        self.stop = Stop::Clean;
        pos
    }

    /// The chain hash the first line of `buf` should state: `h(walked)`,
    /// or before line 1, `h(0)` as its `meta` gives it (a guess for the read
    /// ahead; the walk decides for itself).
    fn chain_start(&self, buf: &[u8]) -> ChainHash {
        if self.walked > 0 {
            return self.prev;
        }
        let first = next_line(buf, 0).map_or(buf, |end| &buf[..end]);
        match serde_json::from_slice::<MetaHead>(first) {
            Ok(MetaHead { fork: Some(f), .. }) => {
                ChainHash::fork_genesis(&f.parent, f.seq, &f.hash)
            }
            _ => self.prev,
        }
    }

    /// Checks line `walked + 1`, as `read`, and consumes it when it
    /// continues the chain (rules 3 and 4), recording a deferred or totals
    /// problem (rules 5 and 6) and yielding its record when there is none
    /// before. `link` is the chain hashed ahead: the hash before the line
    /// and after it.
    fn line(
        &mut self,
        line: &[u8],
        read: Read<'_>,
        link: Option<(ChainHash, ChainHash)>,
        sink: &mut impl FnMut(Record, &[u8]),
    ) -> Result<(), Fault> {
        let seq = self.walked + 1;
        let offset = self.consumed;
        let damaged = |reason: String| Problem::Damaged {
            seq,
            offset,
            reason,
        };
        // What the header says (`ahead`'s first invariant: a record's own
        // header, or the header read on its own), and the record.
        let (v, stated_seq, stated, is_meta, record) = match read {
            Read::Record(r) => (
                r.v,
                r.seq,
                Some(r.prev),
                matches!(r.body, RecordBody::Meta(_)),
                Ok(r),
            ),
            Read::NotRecord { header, record } => {
                let h = header.map_err(Fault::NotRecord)?;
                let kind = h.kind.into_owned();
                (
                    h.v,
                    h.seq,
                    ChainHash::from_hex(&h.prev),
                    kind == "meta",
                    Err((kind, record)),
                )
            }
        };
        if stated_seq != seq {
            return Err(Fault::Settled(damaged(format!(
                "record carries seq {stated_seq} where {seq} was expected"
            ))));
        }
        // Nothing is changed before the line is consumed: it may be judged
        // again, or replaced (`forget_unconsumed`).
        let (prev, fork) = if seq == 1 {
            match serde_json::from_slice::<MetaHead>(line) {
                Ok(m) if is_meta => {
                    if m.run != self.run {
                        return Err(Fault::Settled(Problem::WrongRun { found: m.run }));
                    }
                    match &m.fork {
                        Some(f) => (ChainHash::fork_genesis(&f.parent, f.seq, &f.hash), true),
                        None => (self.prev, false),
                    }
                }
                _ => {
                    return Err(Fault::Settled(damaged(
                        "the first record is not a valid `meta`".into(),
                    )))
                }
            }
        } else {
            (self.prev, false)
        };
        if stated != Some(prev) {
            return Err(Fault::Link(stated));
        }
        // Consumed from here on.
        let before = Mark {
            hash: prev,
            end: offset,
        };
        if seq == 1 {
            self.totals = Some(TotalsCheck::new(fork));
        }
        let defer = |problem| Found {
            problem,
            seq,
            before,
        };
        if v > SCHEMA_VERSION {
            if self.deferred.is_none() {
                self.deferred = Some(defer(Problem::Newer { seq, found: v }));
            }
        } else if self.deferred.is_none() {
            match record {
                Ok(r) if seq > 1 && matches!(r.body, RecordBody::Meta(_)) => {
                    self.deferred = Some(defer(damaged("a second `meta` record".into())));
                }
                Ok(r) => {
                    if self.totals_bad.is_none() {
                        if let Some(Err(bad)) = self.totals.as_mut().map(|t| t.check(&r)) {
                            self.totals_bad = Some(defer(damaged(format!(
                                "the `terminal` record does not match the fold: {bad}"
                            ))));
                        }
                    }
                    sink(r, line);
                }
                Err((kind, e)) => {
                    self.deferred = Some(defer(damaged(format!(
                        "the `{kind}` record does not match its schema: {e}"
                    ))));
                }
            }
        }
        self.before_last = before;
        self.prev = match link {
            Some((before, after)) if before == prev => after,
            _ => prev.next(line),
        };
        self.walked = seq;
        self.consumed = offset + line.len() as u64 + 1;
        Ok(())
    }

    /// Judges the line that was not consumed, the first of `region` (the
    /// bytes after the consumed ones), `len` bytes long.
    fn judge(&self, fault: Fault, region: &[u8], len: usize) -> Stop {
        let seq = self.walked + 1;
        match fault {
            Fault::NotRecord(e) if holds_record(region) => Stop::Broken {
                problem: Problem::Damaged {
                    seq,
                    offset: self.consumed,
                    reason: format!("not a valid record ({e}), yet valid records follow it"),
                },
                blames_last: false,
                settled: true,
            },
            Fault::NotRecord(_) => Stop::Torn(self.torn(region)),
            Fault::Settled(problem) => Stop::Broken {
                problem,
                blames_last: false,
                settled: true,
            },
            Fault::Link(stated) => self.blame(region, len, stated),
        }
    }

    /// Line n (the first `len` bytes of `region`) states `prev` ≠ `h(n-1)`.
    /// Blame n-1 when line n is consistent with line n+1, i.e. n-1's bytes
    /// changed under an intact n, or when no complete line follows.
    fn blame(&self, region: &[u8], len: usize, stated: Option<ChainHash>) -> Stop {
        let seq = self.walked + 1;
        let here_if_stated = stated.map(|s| s.next(&region[..len]));
        let next_end = next_line(region, len + 1);
        let next_prev = next_end.and_then(|e2| {
            serde_json::from_slice::<Header>(&region[len + 1..e2])
                .ok()
                .and_then(|h| ChainHash::from_hex(&h.prev))
        });
        let blames_last = seq > 1
            && match (here_if_stated, next_prev) {
                (Some(a), Some(b)) => a == b,
                // Line n is the last one: nothing attests it, so the
                // earlier record, whose hash line n no longer matches, is
                // the suspect — until a line after it says otherwise.
                (Some(_), None) => next_end.is_none(),
                _ => false,
            };
        let settled = seq == 1 || stated.is_none() || next_end.is_some();
        let problem = if blames_last {
            Problem::Damaged {
                seq: seq - 1,
                offset: self.before_last.end,
                reason: format!(
                    "its bytes no longer match the chain hash that seq {seq} records for it"
                ),
            }
        } else {
            Problem::Damaged {
                seq,
                offset: self.consumed,
                reason: "its `prev` does not match the chain hash of the record before it".into(),
            }
        };
        Stop::Broken {
            problem,
            blames_last,
            settled,
        }
    }

    fn torn(&self, region: &[u8]) -> TornTail {
        TornTail {
            offset: self.consumed,
            len: region.len() as u64,
            zeros: region.iter().all(|&b| b == 0),
        }
    }

    /// What the one-shot reader says of the bytes pushed so far (rules 6
    /// and 7 applied to what the walk found).
    pub(crate) fn outcome(&self) -> Outcome {
        let (problem, records, mark) = match &self.stop {
            Stop::Broken {
                problem,
                blames_last,
                ..
            } => {
                // Records stop before the first problem of either kind: a
                // deferred one is always before the break (it is on a
                // consumed line, the break at or after the last one).
                let (n, mark) = match (&self.deferred, blames_last) {
                    (Some(d), _) => (d.seq - 1, d.before),
                    (None, true) => (self.walked - 1, self.before_last),
                    (None, false) => (self.walked, self.current()),
                };
                (Some(problem.clone()), n, mark)
            }
            Stop::Clean | Stop::Torn(_) => {
                match self.totals_bad.as_ref().or(self.deferred.as_ref()) {
                    Some(f) => (Some(f.problem.clone()), f.seq - 1, f.before),
                    None if self.walked == 0 => (Some(Problem::Unstarted), 0, self.current()),
                    None => (None, self.walked, self.current()),
                }
            }
        };
        let (tail, valid_len) = if records == 0 {
            (ChainHash::genesis(&self.run), 0)
        } else {
            (mark.hash, mark.end)
        };
        Outcome {
            records,
            tail,
            valid_len,
            torn: match &self.stop {
                Stop::Torn(t) => Some(*t),
                _ => None,
            },
            problem,
        }
    }
}

pub(crate) fn next_line(bytes: &[u8], pos: usize) -> Option<usize> {
    memchr::memchr(b'\n', bytes.get(pos..)?).map(|i| pos + i)
}

/// Whether a complete record header can be parsed from any `{` inside
/// `region` up to the next newline. A torn tail never holds one; a damaged
/// record followed by intact ones always does.
fn holds_record(region: &[u8]) -> bool {
    let mut i = 0;
    while i < region.len() {
        let Some(off) = region[i..].iter().position(|&b| b == b'{') else {
            return false;
        };
        let start = i + off;
        let Some(end) = next_line(region, start) else {
            return false;
        };
        if serde_json::from_slice::<Header>(&region[start..end]).is_ok() {
            return true;
        }
        i = start + 1;
    }
    false
}
