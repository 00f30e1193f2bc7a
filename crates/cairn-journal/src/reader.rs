//! Reading a journal: the chain check and the torn-tail rule.
//!
//! Rules, in the order they are applied to each line:
//! 1. A line is the bytes up to a `\n`. Bytes after the last `\n` are a cut
//!    line: part of the torn tail.
//! 2. A line that is not a JSON record header starts the *final region*. The
//!    region is a tolerated torn tail only if no complete record can be parsed
//!    from anywhere inside it; otherwise it is damage at that seq.
//! 3. Line 1 must be `meta`; its run id (and fork pin) give `h(0)`.
//! 4. Line n must carry `seq` n and `prev` = `h(n-1)`. When `prev` is wrong, the
//!    break is blamed on line n-1 if line n is itself consistent with line n+1
//!    (someone changed n-1's bytes), else on line n.
//! 5. A record of a newer schema version, or whose body does not match its
//!    kind, is reported only once the chain is known good up to the end, so
//!    tampering is always reported as damage first.
//! 6. With the chain good, every `terminal`'s totals must be the fold's at
//!    that point (for a fork read alone, from its first terminal on: see
//!    `TotalsCheck`); the first that is not is damage at its seq, even
//!    before a deferred problem further on.
//!
//! Nothing here writes: a reader reports a torn tail and ignores it; only the
//! writer, holding the lock, cuts it.

use std::path::Path;

use crate::chain::ChainHash;
use crate::fold::TotalsCheck;
use crate::record::{Header, MetaHead, Record, RecordBody, SCHEMA_VERSION};
use crate::JournalError;

/// An incomplete final region: ignored by readers, cut by the next writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Where it starts (= length of the valid prefix).
    pub offset: u64,
    /// How many bytes it spans.
    pub len: u64,
    /// Every byte of it is NUL: space a writer preallocated and has not
    /// written yet (or a file system's zero fill after a crash), not a cut
    /// record.
    pub zeros: bool,
}

/// A journal read in full.
#[derive(Clone, Debug)]
pub struct Scan {
    /// Every valid record, in order.
    pub records: Vec<Record>,
    /// `h(n)` of the last valid record (`h(0)` when there is none).
    pub tail: ChainHash,
    /// Bytes of valid records.
    pub valid_len: u64,
    /// The torn tail, when there is one.
    pub torn: Option<TornTail>,
}

/// What `verify` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records that verified.
    pub records: u64,
    /// `h(n)` of the last record that verified.
    pub tail: ChainHash,
    /// The first seq that does not verify, if any.
    pub first_bad_seq: Option<u64>,
    /// A torn tail was found (and ignored): a cut record, not only zeros.
    pub torn_tail: bool,
    /// The journal ends in NUL bytes only: space its writer preallocated
    /// (a writer that is running, or one that stopped without cutting it).
    /// Not damage; the next writer cuts it.
    pub preallocated_tail: bool,
    /// What is wrong, when something is.
    pub problem: Option<String>,
}

impl VerifyReport {
    /// True when every record verified (a torn tail alone is not a failure).
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

#[derive(Debug)]
enum Problem {
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
}

struct Walk {
    scan: Scan,
    problem: Option<Problem>,
}

/// Reads and checks the journal at `path` belonging to `run`.
///
/// # Errors
/// IO errors, [`JournalError::Damaged`] (an invalid record followed by valid
/// ones, a broken chain, a body that does not match its kind),
/// [`JournalError::NewerSchema`] and [`JournalError::WrongRun`].
pub fn read_journal(path: &Path, run: &str) -> Result<Scan, JournalError> {
    let bytes = read_all(path)?;
    scan_bytes(&bytes, run).map_err(|p| problem_error(path, p))
}

/// Checks the bytes of a journal as [`read_journal`] does, from memory.
///
/// # Errors
/// As [`read_journal`], with `path` used only in messages.
pub fn scan_journal_bytes(path: &Path, bytes: &[u8], run: &str) -> Result<Scan, JournalError> {
    scan_bytes(bytes, run).map_err(|p| problem_error(path, p))
}

/// Verifies the journal at `path` and reports instead of failing.
///
/// # Errors
/// Only when the file cannot be read.
pub fn verify_journal(path: &Path, run: &str) -> Result<VerifyReport, JournalError> {
    let bytes = read_all(path)?;
    Ok(verify_bytes(&bytes, run))
}

/// Verifies journal bytes in memory.
pub fn verify_bytes(bytes: &[u8], run: &str) -> VerifyReport {
    let w = walk(bytes, run);
    let (first_bad_seq, problem) = match &w.problem {
        None => (None, None),
        Some(Problem::Damaged {
            seq,
            offset,
            reason,
        }) => (
            Some(*seq),
            Some(format!("seq {seq} (byte {offset}): {reason}")),
        ),
        Some(Problem::Newer { seq, found }) => (
            Some(*seq),
            Some(format!(
                "seq {seq} has schema v{found}; this cairn reads up to v{SCHEMA_VERSION}"
            )),
        ),
        Some(Problem::WrongRun { found }) => (
            Some(1),
            Some(format!("the meta record names session {found}, not {run}")),
        ),
    };
    VerifyReport {
        records: w.scan.records.len() as u64,
        tail: w.scan.tail,
        first_bad_seq,
        torn_tail: w.scan.torn.is_some_and(|t| !t.zeros),
        preallocated_tail: w.scan.torn.is_some_and(|t| t.zeros),
        problem,
    }
}

fn torn_at(bytes: &[u8], pos: usize) -> TornTail {
    TornTail {
        offset: pos as u64,
        len: (bytes.len() - pos) as u64,
        zeros: bytes[pos..].iter().all(|&b| b == 0),
    }
}

fn scan_bytes(bytes: &[u8], run: &str) -> Result<Scan, Problem> {
    let w = walk(bytes, run);
    match w.problem {
        None => Ok(w.scan),
        Some(p) => Err(p),
    }
}

fn problem_error(path: &Path, p: Problem) -> JournalError {
    match p {
        Problem::Damaged {
            seq,
            offset,
            reason,
        } => JournalError::Damaged {
            path: path.to_path_buf(),
            seq,
            offset,
            reason,
        },
        Problem::Newer { seq, found } => JournalError::NewerSchema {
            path: path.to_path_buf(),
            seq,
            found,
            supported: SCHEMA_VERSION,
        },
        Problem::WrongRun { found } => JournalError::WrongRun {
            path: path.to_path_buf(),
            expected: path
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            found,
        },
    }
}

fn read_all(path: &Path) -> Result<Vec<u8>, JournalError> {
    std::fs::read(path).map_err(|e| JournalError::io("reading", path, e))
}

fn next_line(bytes: &[u8], pos: usize) -> Option<usize> {
    bytes[pos..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| pos + i)
}

/// Every complete line of `bytes` parsed as a record, in parallel: the
/// walk below still checks each line in order (seq, chain, schema) and
/// takes a parsed record only where it would have parsed it itself, so
/// this changes how fast a journal reads, never what it reads as.
fn parse_lines(bytes: &[u8]) -> Vec<Option<Result<Record, serde_json::Error>>> {
    use rayon::prelude::*;
    let mut ranges = Vec::new();
    let mut pos = 0usize;
    while let Some(end) = next_line(bytes, pos) {
        ranges.push(pos..end);
        pos = end + 1;
    }
    // Small journals are not worth the threads.
    if ranges.len() < 2048 {
        return ranges.into_iter().map(|_| None).collect();
    }
    ranges
        .into_par_iter()
        .with_min_len(256)
        .map(|r| Some(Record::from_line(&bytes[r])))
        .collect()
}

fn walk(bytes: &[u8], run: &str) -> Walk {
    let mut parsed = parse_lines(bytes).into_iter();
    let mut records = Vec::new();
    let mut pos = 0usize;
    let mut prev = ChainHash::genesis(run);
    let mut deferred: Option<Problem> = None;
    // Records before the first deferred problem; the rest are placeholders.
    let mut kept = usize::MAX;
    let mut problem: Option<Problem> = None;
    let mut torn = None;
    let mut fork = false;

    while pos < bytes.len() {
        let seq = records.len() as u64 + 1;
        let damaged = |reason: String| Problem::Damaged {
            seq,
            offset: pos as u64,
            reason,
        };
        let Some(end) = next_line(bytes, pos) else {
            // A cut line: no newline before the end of the file.
            torn = Some(torn_at(bytes, pos));
            break;
        };
        let line = &bytes[pos..end];
        let early = parsed.next().flatten();
        let header: Header = match serde_json::from_slice(line) {
            Ok(h) => h,
            Err(e) => {
                if holds_record(&bytes[pos..]) {
                    problem = Some(damaged(format!(
                        "not a valid record ({e}), yet valid records follow it"
                    )));
                } else {
                    torn = Some(torn_at(bytes, pos));
                }
                break;
            }
        };
        if header.seq != seq {
            problem = Some(damaged(format!(
                "record carries seq {} where {seq} was expected",
                header.seq
            )));
            break;
        }
        if seq == 1 {
            match serde_json::from_slice::<MetaHead>(line) {
                Ok(m) if header.kind == "meta" => {
                    if m.run != run {
                        problem = Some(Problem::WrongRun { found: m.run });
                        break;
                    }
                    if let Some(f) = &m.fork {
                        prev = ChainHash::fork_genesis(&f.parent, f.seq, &f.hash);
                        fork = true;
                    }
                }
                _ => {
                    problem = Some(damaged("the first record is not a valid `meta`".into()));
                    break;
                }
            }
        }
        let stated = ChainHash::from_hex(&header.prev);
        if stated != Some(prev) {
            problem = Some(blame_broken_link(bytes, pos, end, seq, stated));
            break;
        }
        let here = prev.next(line);
        if header.v > SCHEMA_VERSION {
            deferred.get_or_insert(Problem::Newer {
                seq,
                found: header.v,
            });
        } else if deferred.is_none() {
            match early.unwrap_or_else(|| Record::from_line(line)) {
                Ok(r) => {
                    if seq > 1 && matches!(r.body, RecordBody::Meta(_)) {
                        deferred = Some(damaged("a second `meta` record".into()));
                    } else {
                        records.push(r);
                    }
                }
                Err(e) => {
                    deferred = Some(damaged(format!(
                        "the `{}` record does not match its schema: {e}",
                        header.kind
                    )))
                }
            }
        }
        if deferred.is_some() {
            // Keep walking the chain, but stop collecting records.
            kept = kept.min(records.len());
            records.push(placeholder(seq));
        }
        prev = here;
        pos = end + 1;
    }
    if problem.is_none() {
        // The chain holds; a terminal whose totals are not the fold's is
        // damage too, and comes before any deferred problem (it is checked
        // only over the records kept before one).
        let upto = kept.min(records.len());
        problem = check_totals(bytes, &records[..upto], fork).or(deferred);
    }
    // Records from the first problem on (placeholders included) are dropped.
    if let Some(Problem::Damaged { seq, .. } | Problem::Newer { seq, .. }) = &problem {
        kept = kept.min((*seq as usize).saturating_sub(1));
    }
    records.truncate(kept.min(records.len()));
    if records.is_empty() && problem.is_none() {
        // Only a cut meta line: the run never started.
        problem = Some(Problem::Damaged {
            seq: 1,
            offset: 0,
            reason: "the journal holds no complete `meta` record (its creation was interrupted)"
                .into(),
        });
    }
    let tail = records_tail(bytes, &records, run, prev, &problem);
    let valid_len = records_len(bytes, records.len());
    Walk {
        scan: Scan {
            records,
            tail,
            valid_len,
            torn,
        },
        problem,
    }
}

/// The first terminal whose totals disagree with the fold, as damage at its
/// seq (rule 6).
fn check_totals(bytes: &[u8], records: &[Record], fork: bool) -> Option<Problem> {
    let mut check = TotalsCheck::new(fork);
    let bad = records.iter().find_map(|r| check.check(r).err())?;
    Some(Problem::Damaged {
        seq: bad.seq,
        offset: records_len(bytes, (bad.seq as usize).saturating_sub(1)),
        reason: format!("the `terminal` record does not match the fold: {bad}"),
    })
}

/// A stand-in kept only to count positions while walking past a deferred
/// problem; never returned.
fn placeholder(seq: u64) -> Record {
    Record {
        v: 0,
        seq,
        prev: ChainHash([0; 32]),
        ts: String::new(),
        body: RecordBody::User(crate::record::User {
            text: String::new(),
        }),
    }
}

fn records_len(bytes: &[u8], n: usize) -> u64 {
    let mut pos = 0;
    for _ in 0..n {
        match next_line(bytes, pos) {
            Some(end) => pos = end + 1,
            None => break,
        }
    }
    pos as u64
}

fn records_tail(
    bytes: &[u8],
    records: &[Record],
    run: &str,
    walked: ChainHash,
    problem: &Option<Problem>,
) -> ChainHash {
    if problem.is_none() {
        return walked;
    }
    // Recompute up to the last kept record.
    let Some(first) = records.first() else {
        return ChainHash::genesis(run);
    };
    let mut h = first.prev;
    let mut pos = 0;
    for _ in records {
        let Some(end) = next_line(bytes, pos) else {
            break;
        };
        h = h.next(&bytes[pos..end]);
        pos = end + 1;
    }
    h
}

/// Line `n` (at `pos..end`) states `prev` ≠ `h(n-1)`. Blame n-1 when line n is
/// consistent with line n+1, i.e. n-1's bytes changed under an intact n.
fn blame_broken_link(
    bytes: &[u8],
    pos: usize,
    end: usize,
    seq: u64,
    stated: Option<ChainHash>,
) -> Problem {
    let line = &bytes[pos..end];
    let here_if_stated = stated.map(|s| s.next(line));
    let next_prev = next_line(bytes, end + 1).and_then(|e2| {
        serde_json::from_slice::<Header>(&bytes[end + 1..e2])
            .ok()
            .and_then(|h| ChainHash::from_hex(&h.prev))
    });
    let blame_previous = seq > 1
        && match (here_if_stated, next_prev) {
            (Some(a), Some(b)) => a == b,
            // Line n is the last one: nothing attests it, so the earlier
            // record, whose hash line n no longer matches, is the suspect.
            (Some(_), None) => next_line(bytes, end + 1).is_none(),
            _ => false,
        };
    if blame_previous {
        Problem::Damaged {
            seq: seq - 1,
            offset: line_start(bytes, pos) as u64,
            reason: format!(
                "its bytes no longer match the chain hash that seq {seq} records for it"
            ),
        }
    } else {
        Problem::Damaged {
            seq,
            offset: pos as u64,
            reason: "its `prev` does not match the chain hash of the record before it".into(),
        }
    }
}

/// Start of the line before the one starting at `pos`.
fn line_start(bytes: &[u8], pos: usize) -> usize {
    if pos == 0 {
        return 0;
    }
    bytes[..pos - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1)
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
