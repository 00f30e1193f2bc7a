//! Loading a run: read its journal in full, check it (and, for a fork, every
//! ancestor prefix it folds over), fold it.

use cairn_journal::{fold, read_journal, JournalError, RunState, Scan};
use cairn_store::{RunId, Store};

use crate::fork::{lineage, Pin};
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
/// [`JournalError::NotFound`], damage and schema errors, and
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

/// The state a resume continues from: the fold of the run's records, for a
/// fork over the verified prefixes of its ancestors; and its receipt.
///
/// # Errors
/// [`SessionError::ForkPrefix`]; a fold error when the records do not start
/// with `meta`.
pub fn state_for_resume(
    store: &Store,
    id: &RunId,
    scan: &Scan,
) -> Result<(RunState, Vec<Pin>), SessionError> {
    let (records, receipt) = lineage(store, id.as_str(), &scan.records)?;
    let mut state = fold(&records).map_err(|e| JournalError::Fold {
        path: store.journal_path(id),
        reason: e.to_string(),
    })?;
    // Counted over the run's own journal, as listings and `verify` count.
    state.records = scan.records.len() as u64;
    Ok((state, receipt))
}
