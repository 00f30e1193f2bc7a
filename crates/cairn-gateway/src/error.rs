//! The gateway's errors. What a client sees is decided by the server (a
//! status and a JSON body); these are what the library reports.

use std::path::PathBuf;

/// What went wrong in the gateway or its store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
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
    /// The session failed.
    #[error(transparent)]
    Session(#[from] cairn_sessions::SessionError),
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] cairn_journal::JournalError),
}
