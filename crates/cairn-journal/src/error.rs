//! The journal's one error type.
//!
//! Policy: every variant names the journal (path or run) and, where it applies,
//! the seq; every message says what to do next. Damage is never repaired
//! silently: only a torn tail (DESIGN §2) is cut, and only by the writer.

use std::fmt;
use std::path::PathBuf;

use cairn_store::ErrorKind;

/// Who holds a journal's writer lock.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockHolder {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// When it took the lock, RFC 3339 UTC.
    pub since: String,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} on {} since {}", self.pid, self.host, self.since)
    }
}

/// What went wrong with a journal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// Reading or opening failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What cairn was doing.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be prepared.
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
    /// No such run.
    #[error("no session {run} in this store: list sessions with `cairn sessions --all`")]
    NotFound {
        /// The id asked for.
        run: String,
    },
    /// A run with this id already exists.
    #[error("session {run} already exists: choose another id")]
    Exists {
        /// The id.
        run: String,
    },
    /// A record does not verify. Everything before `seq` is intact.
    #[error("journal {path} is damaged at seq {seq} (byte {offset}): {reason}. The records before seq {seq} are intact; `cairn verify` shows the details")]
    Damaged {
        /// The journal.
        path: PathBuf,
        /// The first bad seq.
        seq: u64,
        /// Byte offset of the bad record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Written by a newer cairn.
    #[error("journal {path} has a record of schema v{found} at seq {seq}; this cairn reads up to v{supported}: upgrade cairn to read it")]
    NewerSchema {
        /// The journal.
        path: PathBuf,
        /// The record.
        seq: u64,
        /// Its version.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// The journal's meta names another run than its directory.
    #[error("journal {path} belongs to session {found}, not {expected}: it was moved or copied by hand; move it back under runs/{found}")]
    WrongRun {
        /// The journal.
        path: PathBuf,
        /// The directory's id.
        expected: String,
        /// The meta record's id.
        found: String,
    },
    /// A journal being followed is shorter than the lines already read
    /// from it.
    #[error("journal {path} shrank to {len} bytes, below the {consumed} bytes already followed: it was replaced or cut by hand; run `cairn verify` and follow it again")]
    Shrank {
        /// The journal.
        path: PathBuf,
        /// Its length now.
        len: u64,
        /// Bytes already read and verified.
        consumed: u64,
    },
    /// The records were made durable in the local cache of a shared store
    /// and the shared store did not acknowledge them.
    #[error("record(s) {first}.. of session {run} were not stored in the shared store, so they are not written: {source}")]
    Unpublished {
        /// The run.
        run: String,
        /// The first record not acknowledged.
        first: u64,
        /// Why.
        #[source]
        source: Box<crate::RemoteJournalError>,
    },
    /// Another process holds the writer lock.
    #[error("session {run} is being written by another process ({}): wait for it to finish or stop it, then retry", holder.as_ref().map_or_else(|| "holder unknown".to_string(), |h| h.to_string()))]
    Locked {
        /// The run.
        run: String,
        /// Who holds it, when the lock file says.
        holder: Option<LockHolder>,
    },
    /// An earlier write or fsync failed; this writer will not write again.
    #[error("an earlier write or fsync of {path} failed, so this writer stopped (retrying could lose data silently): reopen the session, e.g. with `cairn resume`")]
    Poisoned {
        /// The journal.
        path: PathBuf,
    },
    /// Writing a record failed; the writer is now poisoned.
    #[error("writing to {path} failed: {source}; the record is not durable (is the disk full?)")]
    Write {
        /// The journal.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// fsync failed; the writer is now poisoned.
    #[error("fsync of {path} failed: {source}; the record is not durable and the writer stopped")]
    Sync {
        /// The journal.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record could not be encoded.
    #[error("encoding a record: {0}")]
    Encode(#[from] serde_json::Error),
    /// The append breaks a journal rule (e.g. a second `meta`).
    #[error("invalid append: {0}")]
    InvalidAppend(&'static str),
    /// The records do not fold into a run.
    #[error("journal {path}: {reason}")]
    Fold {
        /// The journal.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl JournalError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        JournalError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// True for errors that mean the bytes on disk do not verify (exit code 3).
    pub fn is_integrity(&self) -> bool {
        matches!(
            self,
            JournalError::Damaged { .. }
                | JournalError::WrongRun { .. }
                | JournalError::Shrank { .. }
                | JournalError::Fold { .. }
        )
    }

    /// What kind of failure this is ([`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            JournalError::Locked { .. } => ErrorKind::Refused,
            JournalError::Unpublished { source, .. } => match source.kind() {
                ErrorKind::Refused => ErrorKind::Refused,
                _ => ErrorKind::Failure,
            },
            JournalError::NotFound { .. } | JournalError::NewerSchema { .. } => ErrorKind::Usage,
            e if e.is_integrity() => ErrorKind::Integrity,
            _ => ErrorKind::Failure,
        }
    }
}
