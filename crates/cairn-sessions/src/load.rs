//! Loading a run: read its journal in full, check it (and, for a fork, every
//! ancestor prefix it folds over), fold it.
//!
//! Invariant: every `terminal` folded here, the ancestors' included, carries
//! the totals of the fold of the whole lineage at that point (a fork's
//! totals are cumulative over what it inherits); the first that does not is
//! damage at its seq, never a figure a listing or resume uses.

use cairn_journal::{
    check_bytes, fold, read_journal, verify_keeping, JournalError, Record, RecordBody, RunState,
    Scan, TotalsMismatch, VerifyReport,
};
use cairn_store::{RunId, Store};

use crate::fork::{line_bounds, lineage, Pin};
use crate::SessionError;

/// A run read in full.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The run's own records as read (with any torn tail reported).
    pub scan: Scan,
    /// The fold of its lineage: ancestors' pinned prefixes, then its own records.
    pub state: RunState,
    /// For a fork, the pins of the prefixes it consumed, nearest first.
    pub receipt: Vec<Pin>,
}

/// Reads and folds run `id`. Takes no lock: a writer uses
/// [`cairn_journal::JournalWriter::open`], which locks before it reads, then
/// [`state_for_resume`].
///
/// # Errors
/// [`JournalError::NotFound`], damage and schema errors (a terminal whose
/// totals are not the lineage's fold among them), and
/// [`SessionError::ForkPrefix`] for a fork whose ancestry no longer verifies.
pub fn load(store: &Store, id: &RunId) -> Result<Loaded, SessionError> {
    let path = store.journal_path(id);
    if !path.is_file() {
        return Err(JournalError::NotFound {
            run: id.to_string(),
        }
        .into());
    }
    let scan = read_journal(&path, id.as_str())?;
    let (state, receipt) = state_for_resume(store, id, &scan)?;
    Ok(Loaded {
        scan,
        state,
        receipt,
    })
}

/// The workspace versioning of session `id`, whose files are in `root`
/// (its state's `workspace`): what a front end opens to list rewind points,
/// preview, rewind and checkpoint a session it did not start (`cairn
/// serve`, `cairn mcp`). Reads no journal: the root comes from the caller's
/// open [`crate::Session`] ([`crate::Session::tracker`]) or its
/// [`Loaded`] state.
///
/// # Errors
/// The workspace index cannot be opened.
pub fn tracker(
    store: &Store,
    id: &RunId,
    root: &str,
    capture: cairn_workspace::CaptureConfig,
) -> Result<cairn_workspace::Workspace, SessionError> {
    Ok(cairn_workspace::Workspace::open(
        store,
        id,
        std::path::Path::new(root),
        capture,
    )?)
}

/// The state a resume continues from: the fold of the run's records, for a
/// fork over the verified prefixes of its ancestors; and its receipt.
///
/// # Errors
/// [`SessionError::ForkPrefix`] (an ancestor prefix changed, or one of its
/// terminals disagrees with the fold); [`JournalError::Damaged`] at the seq of
/// the run's own first terminal whose totals are not the lineage's fold; a
/// fold error when the records do not start with `meta`.
pub fn state_for_resume(
    store: &Store,
    id: &RunId,
    scan: &Scan,
) -> Result<(RunState, Vec<Pin>), SessionError> {
    // A session that is not a fork folds its own records as they are read
    // (no copy of them).
    if crate::fork::fork_of(&scan.records).is_none() {
        let mut state = fold_lineage(store, id, &scan.records, &[], scan.records.len())?;
        state.records = scan.records.len() as u64;
        return Ok((state, Vec::new()));
    }
    let (records, receipt) = lineage(store, id.as_str(), &scan.records)?;
    let mut state = fold_lineage(store, id, &records, &receipt, scan.records.len())?;
    // Counted over the run's own journal, as listings and `verify` count.
    state.records = scan.records.len() as u64;
    Ok((state, receipt))
}

/// [`state_for_resume`] taking the scan: a session that is not a fork is
/// folded by moving its records' texts into the state rather than copying
/// them (a resume drops the records once folded).
///
/// # Errors
/// As [`state_for_resume`].
pub fn state_for_resume_owned(
    store: &Store,
    id: &RunId,
    scan: Scan,
) -> Result<(RunState, Vec<Pin>), SessionError> {
    if crate::fork::fork_of(&scan.records).is_some() {
        return state_for_resume(store, id, &scan);
    }
    let n = scan.records.len();
    let mut records = scan.records.into_iter();
    let first: Vec<Record> = records.by_ref().take(1).collect();
    let mut state = fold(&first).map_err(|e| JournalError::Fold {
        path: store.journal_path(id),
        reason: e.to_string(),
    })?;
    for r in records {
        state
            .apply_checked_owned(r)
            .map_err(|m| own_mismatch(store, id, m))?;
    }
    state.records = n as u64;
    Ok((state, Vec::new()))
}

/// Folds a lineage — the ancestors' pinned prefixes, root first, then the
/// last `own` records, which are run `id`'s — holding every terminal to the
/// fold so far.
///
/// # Errors
/// As [`state_for_resume`].
pub(crate) fn fold_lineage(
    store: &Store,
    id: &RunId,
    records: &[Record],
    receipt: &[Pin],
    own: usize,
) -> Result<RunState, SessionError> {
    let mut state = fold(records.get(..1).unwrap_or_default()).map_err(|e| JournalError::Fold {
        path: store.journal_path(id),
        reason: e.to_string(),
    })?;
    for (i, r) in records.iter().enumerate().skip(1) {
        if let Err(m) = state.apply_checked(r) {
            let first_own = records.len().saturating_sub(own);
            return Err(if i >= first_own {
                own_mismatch(store, id, m)
            } else {
                ancestor_mismatch(id, receipt, i, m)
            });
        }
    }
    Ok(state)
}

fn own_mismatch(store: &Store, id: &RunId, m: TotalsMismatch) -> SessionError {
    let path = store.journal_path(id);
    // Only on this error path: find where the record starts, for the message.
    let offset = std::fs::read(&path)
        .ok()
        .and_then(|b| line_bounds(&b, m.seq))
        .map_or(0, |(start, _)| start as u64);
    JournalError::Damaged {
        path,
        seq: m.seq,
        offset,
        reason: format!("the `terminal` record does not match the fold of its lineage: {m}"),
    }
    .into()
}

/// The ancestor whose prefix holds position `i` of the lineage: prefixes are
/// laid out root first, i.e. in the receipt's reverse order.
fn ancestor_mismatch(id: &RunId, receipt: &[Pin], i: usize, m: TotalsMismatch) -> SessionError {
    let mut end = 0usize;
    let pin = receipt.iter().rev().find(|p| {
        end = end.saturating_add(usize::try_from(p.seq).unwrap_or(usize::MAX));
        i < end
    });
    let (ancestor, seq) = pin.map_or_else(|| (String::new(), 0), |p| (p.run.clone(), p.seq));
    SessionError::ForkPrefix {
        run: id.to_string(),
        ancestor,
        seq,
        reason: format!(
            "its `terminal` at seq {} does not match the fold: {m}",
            m.seq
        ),
    }
}

/// Verifies session `id` as `cairn verify` reports it: its own chain and
/// records (the journal's check, [`verify_bytes`]); for a fork, every
/// terminal against the fold of its whole lineage, whose pinned prefixes must
/// verify too (a fork whose ancestry does not verify is reported at seq 1:
/// its `meta` pins a prefix that is no longer there); and, once the records
/// hold, every body a `model_call` record names, present in the pool and
/// hashing to its name ([`cairn_calls::check_model_call_objects`]).
///
/// # Errors
/// Only when the journal cannot be read.
pub fn verify(store: &Store, id: &RunId) -> Result<VerifyReport, SessionError> {
    let path = store.journal_path(id);
    let bytes = std::fs::read(&path).map_err(|source| JournalError::Io {
        action: "reading",
        path: path.clone(),
        source,
    })?;
    if !is_fork(&bytes) {
        // A root run's terminals are checked against its own fold as the
        // chain is; what is left is the bodies its model calls name, so
        // only those records are kept (one pass over the journal).
        let (report, calls) = verify_keeping(&bytes, id.as_str(), |r| {
            matches!(r.body, RecordBody::ModelCall(_))
        });
        if !report.ok() {
            return Ok(report);
        }
        return Ok(with_objects(store, &calls, report));
    }
    // A fork: its terminals hold to the fold of its whole lineage, which
    // needs its records. One pass: the chain and the records it vouches for.
    let (report, scan) = check_bytes(&bytes, id.as_str());
    if !report.ok() {
        return Ok(report);
    }
    let failed = |seq: u64, problem: String| {
        let kept = usize::try_from(seq.saturating_sub(1)).unwrap_or(usize::MAX);
        VerifyReport {
            records: kept as u64,
            tail: scan.records.get(kept).map_or(report.tail, |r| r.prev),
            first_bad_seq: Some(seq),
            torn_tail: report.torn_tail,
            preallocated_tail: report.preallocated_tail,
            problem: Some(problem),
        }
    };
    match state_for_resume(store, id, &scan) {
        Ok(_) => {}
        Err(SessionError::Journal(JournalError::Damaged {
            seq,
            offset,
            reason,
            ..
        })) => return Ok(failed(seq, format!("seq {seq} (byte {offset}): {reason}"))),
        Err(e @ SessionError::ForkPrefix { .. }) => return Ok(failed(1, format!("seq 1: {e}"))),
        Err(e) => return Err(e),
    }
    Ok(with_objects(store, &scan.records, report))
}

/// `report`, with what is wrong with the bodies the `model_call` records
/// among `records` name.
fn with_objects(store: &Store, records: &[Record], report: VerifyReport) -> VerifyReport {
    let problems = cairn_calls::check_model_call_objects(store, records);
    if problems.is_empty() {
        report
    } else {
        VerifyReport {
            problem: Some(problems.join("; ")),
            ..report
        }
    }
}

fn is_fork(bytes: &[u8]) -> bool {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    matches!(
        Record::from_line(first).map(|r| r.body),
        Ok(RecordBody::Meta(m)) if m.fork.is_some()
    )
}
