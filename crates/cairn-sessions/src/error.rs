//! Errors of loading sessions and forks.

use cairn_store::ErrorKind;

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
    /// A fork at a node was asked for, but the session's journal holds no
    /// `snapshot` record of that node's boundary to fork at.
    #[error("session {run} has no journaled `{label}` boundary to fork at: forking at a node works with the agent's turn:N nodes, whose boundaries are journaled; nothing was changed")]
    NoForkBoundary {
        /// The session.
        run: String,
        /// The boundary, e.g. `pre:turn:2`.
        label: String,
    },
    /// Files were to go back to before a message, but no model turn ran
    /// after it, so there is nothing to put back.
    #[error("no model turn ran after message {message} of session {run}, so there are no files to put back; nothing was changed (go back in the conversation only)")]
    NoTurnAfter {
        /// The session.
        run: String,
        /// The message's number among the person's messages, from 1.
        message: usize,
    },
    /// The files were restored, but the record of the restore (its bank)
    /// could not be journaled.
    #[error("the files were restored, but journaling the restore failed ({source}); the state before it is banked as snapshot {bank}: `cairn rewind {run} --restore-snapshot {bank}` puts it back")]
    RestoreNotJournaled {
        /// The session.
        run: String,
        /// The bank snapshot that undoes the restore.
        bank: String,
        /// What failed.
        #[source]
        source: Box<SessionError>,
    },
    /// Nothing is named by what was typed for an id (DESIGN §16).
    #[error("no {kind} matches `{given}`: {hint}")]
    NoMatch {
        /// `session`, `snapshot` or `checkpoint`.
        kind: &'static str,
        /// What was typed.
        given: String,
        /// Why, and what to list to find the id.
        hint: String,
    },
    /// What was typed for an id names more than one thing.
    #[error("`{given}` matches {count} {kind}s; give more characters of the id:\n  {}{}", candidates.join("\n  "), if *count > candidates.len() { format!("\n  … and {} more", count - candidates.len()) } else { String::new() })]
    Ambiguous {
        /// `session`, `snapshot` or `checkpoint`.
        kind: &'static str,
        /// What was typed.
        given: String,
        /// How many matched.
        count: usize,
        /// The first of them, each on a line.
        candidates: Vec<String>,
    },
    /// An id is not well formed.
    #[error(transparent)]
    RunId(#[from] cairn_store::RunIdError),
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
    /// What a session owns outside its directory (its stored model
    /// responses) could not be removed; its records were not (a removal
    /// removes them last).
    #[error("removing the stored model responses of session {run} failed ({source}); its records were not removed: fix the cause and run `cairn session rm {run}` again")]
    StoredResponses {
        /// The session.
        run: String,
        /// Why.
        #[source]
        source: cairn_calls::CallsError,
    },
    /// A fork at a checkpoint that another session saved.
    #[error("checkpoint {checkpoint} belongs to session {owner}, not {run} (see `cairn checkpoint ls {run}`)")]
    CheckpointOfAnother {
        /// The checkpoint.
        checkpoint: String,
        /// The session it was saved from.
        owner: String,
        /// The session named.
        run: String,
    },
    /// A fork at a checkpoint whose journal position the session no longer
    /// holds as recorded.
    #[error("session {run}'s journal at seq {seq} no longer matches checkpoint {checkpoint}; nothing was written (`cairn verify {run}` and `cairn checkpoint verify {checkpoint}` say which is damaged)")]
    CheckpointStale {
        /// The checkpoint.
        checkpoint: String,
        /// The session.
        run: String,
        /// The journal position it recorded.
        seq: u64,
    },
    /// Checkpoints could not be read.
    #[error(transparent)]
    Checkpoint(#[from] cairn_checkpoint::CheckpointError),
    /// The session's workspace versioning failed.
    #[error(transparent)]
    Workspace(#[from] cairn_workspace::WorkspaceError),
    /// The object pool failed.
    #[error(transparent)]
    Objects(#[from] cairn_objects::ObjectError),
    /// A remote journal store failed or refused (JetStream).
    #[error(transparent)]
    RemoteJournal(#[from] cairn_journal::RemoteJournalError),
    /// A remote store's manifests could not be read or written (S3).
    #[error("{action} {path} at {remote}: {source}")]
    RemoteFile {
        /// What cairn was doing.
        action: &'static str,
        /// The manifest, below the store root.
        path: String,
        /// The remote.
        remote: String,
        /// The backend's error, which says what to do.
        #[source]
        source: cairn_objects::RemoteError,
    },
    /// A copy (`cairn push`, `cairn pull`) found the two stores holding
    /// different records of the session.
    #[error("the two stores hold different histories of session {run} from seq {seq}; nothing was copied. Look at both (`cairn --store DIR session show {run} --transcript`); to keep one, remove the other copy (`cairn --store DIR session rm {run}`) and copy again")]
    Diverged {
        /// The session.
        run: String,
        /// The first seq whose records differ.
        seq: u64,
    },
    /// A copy found a manifest the destination already holds with other
    /// bytes (manifests are written once and never change).
    #[error("{destination_path} already exists with other bytes than {source_path}: a manifest is written once and never changed, so one of the two stores was changed by hand or is damaged; nothing of the session was copied. Compare the two files and remove the wrong one")]
    ManifestConflict {
        /// The manifest in the store copied from.
        source_path: std::path::PathBuf,
        /// The one in the store copied to.
        destination_path: std::path::PathBuf,
    },
    /// An object a session needs is not in the store it is copied from.
    #[error("object {hash}, which session {run} needs, is missing from the store {}; nothing of the session's journal was copied. `cairn verify {run}` and `cairn checkpoint verify` there say what names it; put the object back from another copy of that store", store.display())]
    SourceObjectMissing {
        /// The session.
        run: String,
        /// The object.
        hash: cairn_objects::ObjectHash,
        /// The store copied from.
        store: std::path::PathBuf,
    },
    /// A snapshot or checkpoint manifest cannot be read or parsed.
    #[error("the manifest {} cannot be used: {reason}; nothing of the session's journal was copied. Repair or remove it (another copy of the store may hold it intact)", path.display())]
    ManifestUnreadable {
        /// The manifest.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A record names an object by something that is not an object name.
    #[error("session {run}: the record at seq {seq} names an object it cannot be copied with: {reason}; nothing of the session was copied")]
    BadObjectName {
        /// The session.
        run: String,
        /// The record.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
    /// A path inside a store is a symbolic link, or another kind of file
    /// than the store keeps there.
    #[error("{} is {what}, where the store keeps a plain {expected}: cairn never follows symbolic links inside a store. Move it out of the store and retry", path.display())]
    NotPlain {
        /// The path.
        path: std::path::PathBuf,
        /// What it is, e.g. `a symbolic link`.
        what: &'static str,
        /// What the store keeps there: `file` or `directory`.
        expected: &'static str,
    },
}

impl SessionError {
    /// What kind of failure this is ([`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            SessionError::Journal(j) => j.kind(),
            SessionError::ForkPrefix { .. }
            | SessionError::PinnedByForks { .. }
            | SessionError::NamedByCheckpoints { .. }
            | SessionError::Diverged { .. }
            | SessionError::ManifestConflict { .. }
            | SessionError::NotPlain { .. } => ErrorKind::Refused,
            SessionError::BadForkPoint { .. }
            | SessionError::NoForkBoundary { .. }
            | SessionError::NoTurnAfter { .. }
            | SessionError::NoMatch { .. }
            | SessionError::Ambiguous { .. }
            | SessionError::CheckpointOfAnother { .. }
            | SessionError::RunId(_) => ErrorKind::Usage,
            SessionError::RemoteJournal(r) => r.kind(),
            SessionError::Unreadable { .. }
            | SessionError::CheckpointStale { .. }
            | SessionError::SourceObjectMissing { .. }
            | SessionError::ManifestUnreadable { .. }
            | SessionError::BadObjectName { .. } => ErrorKind::Integrity,
            SessionError::Objects(o) => {
                ErrorKind::from_flags(o.is_integrity(), o.is_refusal(), false)
            }
            SessionError::Workspace(w) => {
                ErrorKind::from_flags(w.is_integrity(), w.is_refusal(), w.is_usage())
            }
            SessionError::Checkpoint(c) => {
                ErrorKind::from_flags(c.is_integrity(), c.is_refusal(), c.is_usage())
            }
            _ => ErrorKind::Failure,
        }
    }
}
