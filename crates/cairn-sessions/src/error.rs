//! Errors of loading sessions and forks.

/// What went wrong with a session as a whole (beyond its own journal).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session's own journal failed to read or verify.
    #[error(transparent)]
    Journal(#[from] cairn_journal::JournalError),
    /// A fork's pinned ancestor prefix no longer matches its pin.
    #[error("session {run} is a fork whose pinned prefix of {ancestor} (seq {seq}) is no longer intact: {reason}. The fork cannot be resumed; fork again from a session that verifies")]
    ForkPrefix {
        /// The fork.
        run: String,
        /// The ancestor whose prefix changed.
        ancestor: String,
        /// The pinned seq.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
    /// A fork request names a seq the parent does not have.
    #[error("session {run} has {records} records; --at must be between 1 and {records}")]
    BadForkPoint {
        /// The parent.
        run: String,
        /// Its record count.
        records: u64,
    },
    /// The store could not be written.
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
}
