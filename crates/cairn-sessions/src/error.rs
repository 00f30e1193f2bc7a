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
    /// Forks pin the session, so removing it would orphan them.
    #[error("session {run} is the parent of fork(s) {}; a fork folds its parent's records on every resume, so removing {run} would leave them unresumable. Remove the forks first, or pass --with-forks to remove them together", forks.join(", "))]
    PinnedByForks {
        /// The session asked for.
        run: String,
        /// The forks that pin it.
        forks: Vec<String>,
    },
    /// Checkpoints name the session.
    #[error("session {run} has checkpoint(s) {} that need its records and snapshots (see `cairn checkpoint ls {run}`); it is kept", checkpoints.join(", "))]
    NamedByCheckpoints {
        /// The session.
        run: String,
        /// The checkpoints that name it.
        checkpoints: Vec<String>,
    },
    /// A session whose records could not be read, so a question about it
    /// (is it a fork of the session being removed?) has no answer.
    #[error("session {run} cannot be read ({reason}), so cairn cannot tell whether it depends on the session being removed; check it with `cairn verify {run}` and remove or repair it first")]
    Unreadable {
        /// The unreadable session.
        run: String,
        /// Why.
        reason: String,
    },
    /// Checkpoints could not be read.
    #[error(transparent)]
    Checkpoint(#[from] cairn_checkpoint::CheckpointError),
    /// The session's workspace versioning failed.
    #[error(transparent)]
    Workspace(#[from] cairn_workspace::WorkspaceError),
}
