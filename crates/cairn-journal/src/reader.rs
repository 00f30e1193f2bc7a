//! Reading a whole journal: the one reader (`crate::incremental`, where the
//! chain check, the torn-tail rule and the rest are stated) given every byte
//! of the file at once. `verify`, resume, listing and the writer's reopen all
//! read through here; a follower of a growing file feeds the same reader
//! piece by piece, so both always say the same of the same bytes.
//!
//! Nothing here writes: a reader reports a torn tail and ignores it; only the
//! writer, holding the lock, cuts it.

use std::path::Path;

use crate::chain::ChainHash;
use crate::incremental::{IncrementalReader, Outcome};
use crate::record::Record;
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

/// Reads and checks the journal at `path` belonging to `run`.
///
/// # Errors
/// IO errors, [`JournalError::Damaged`] (an invalid record followed by valid
/// ones, a broken chain, a body that does not match its kind),
/// [`JournalError::NewerSchema`] and [`JournalError::WrongRun`].
pub fn read_journal(path: &Path, run: &str) -> Result<Scan, JournalError> {
    let bytes = read_all(path)?;
    scan_journal_bytes(path, &bytes, run)
}

/// Checks the bytes of a journal as [`read_journal`] does, from memory.
///
/// # Errors
/// As [`read_journal`], with `path` used only in messages.
pub fn scan_journal_bytes(path: &Path, bytes: &[u8], run: &str) -> Result<Scan, JournalError> {
    let (scan, outcome) = scan_of(bytes, run);
    match outcome.problem {
        Some(p) => {
            // The run the file was read as, named by its directory.
            let expected = path
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Err(p.into_error(path, expected))
        }
        None => Ok(scan),
    }
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
    verify_keeping(bytes, run, |_| false).0
}

/// Verifies journal bytes in memory, keeping the records `keep` picks of
/// those that verified — for a check after the chain's (the bodies a
/// `model_call` names). A record kept may lack its texts, calls and
/// outputs (`ahead::slimmed`): what it says of itself otherwise is whole.
pub fn verify_keeping(
    bytes: &[u8],
    run: &str,
    keep: impl Fn(&Record) -> bool,
) -> (VerifyReport, Vec<Record>) {
    let mut reader = IncrementalReader::checking(run);
    let mut kept = Vec::new();
    reader.feed(bytes, &mut |record, _line| {
        if keep(&record) {
            kept.push(record);
        }
    });
    let outcome = reader.outcome();
    kept.retain(|r| r.seq <= outcome.records);
    (report_of(outcome, run), kept)
}

/// Verifies journal bytes in memory and keeps what verified, in one pass:
/// the report [`verify_bytes`] gives, and the records before the first
/// problem with the tail and length they end at (a `verify` that goes on to
/// check what the records name reads them once).
pub fn check_bytes(bytes: &[u8], run: &str) -> (VerifyReport, Scan) {
    let (scan, outcome) = scan_of(bytes, run);
    (report_of(outcome, run), scan)
}

/// The one reader given `bytes` at once: the records before the first
/// problem, with the tail and length they end at, and what it found.
fn scan_of(bytes: &[u8], run: &str) -> (Scan, Outcome) {
    let mut reader = IncrementalReader::new(run);
    // One record a line: room for them all at once, not by doubling.
    let mut records = Vec::with_capacity(memchr::memchr_iter(b'\n', bytes).count());
    reader.feed(bytes, &mut |record, _line| records.push(record));
    let outcome = reader.outcome();
    records.truncate(usize::try_from(outcome.records).unwrap_or(usize::MAX));
    let scan = Scan {
        records,
        tail: outcome.tail,
        valid_len: outcome.valid_len,
        torn: outcome.torn,
    };
    (scan, outcome)
}

/// The report of what a reader found.
pub(crate) fn report_of(o: Outcome, run: &str) -> VerifyReport {
    let (first_bad_seq, problem) = match o.problem.as_ref().map(|p| p.describe(run)) {
        Some((seq, text)) => (Some(seq), Some(text)),
        None => (None, None),
    };
    VerifyReport {
        records: o.records,
        tail: o.tail,
        first_bad_seq,
        torn_tail: o.torn.is_some_and(|t| !t.zeros),
        preallocated_tail: o.torn.is_some_and(|t| t.zeros),
        problem,
    }
}

fn read_all(path: &Path) -> Result<Vec<u8>, JournalError> {
    std::fs::read(path).map_err(|e| JournalError::io("reading", path, e))
}
