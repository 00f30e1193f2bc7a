//! The errors of the call record.

use std::path::PathBuf;

/// What went wrong reading or writing what cairn keeps of model calls.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallsError {
    /// A stored response (or its body) does not read.
    #[error("the stored model response {path} does not read ({reason}); move it aside to let the call be bought again")]
    StoredResponse {
        /// The entry.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The object pool failed.
    #[error(transparent)]
    Objects(#[from] cairn_objects::ObjectError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] cairn_journal::JournalError),
}
