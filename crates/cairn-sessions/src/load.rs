//! Loading a run: read its journal in full, check it, fold it.

use cairn_journal::{fold, read_journal, JournalError, RunState, Scan};
use cairn_store::{RunId, Store};

/// A run read in full.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The records as read (with any torn tail reported).
    pub scan: Scan,
    /// Their fold.
    pub state: RunState,
}

/// Reads and folds run `id`. Takes no lock: a writer uses
/// [`cairn_journal::JournalWriter::open`], which locks before it reads.
///
/// # Errors
/// [`JournalError::NotFound`], damage and schema errors.
pub fn load(store: &Store, id: &RunId) -> Result<Loaded, JournalError> {
    let path = store.journal_path(id);
    if !path.is_file() {
        return Err(JournalError::NotFound {
            run: id.to_string(),
        });
    }
    let scan = read_journal(&path, id.as_str())?;
    let state = fold_scan(&path, &scan)?;
    Ok(Loaded { scan, state })
}

pub(crate) fn fold_scan(path: &std::path::Path, scan: &Scan) -> Result<RunState, JournalError> {
    fold(&scan.records).map_err(|e| JournalError::Fold {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// The state a resume continues from: the fold of the run's records (for a
/// fork, over the prefix of its ancestors it shares).
///
/// # Errors
/// As [`load`].
pub fn state_for_resume(_store: &Store, id: &RunId, scan: &Scan) -> Result<RunState, JournalError> {
    let path = _store.journal_path(id);
    fold_scan(&path, scan)
}
