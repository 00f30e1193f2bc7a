use std::path::PathBuf;

/// What went wrong while touching the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No store location could be derived from the environment.
    #[error("no store location: set CAIRN_STORE or --store, or set HOME or XDG_STATE_HOME")]
    NoLocation,
    /// A file-system operation on a store path failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What cairn was doing, e.g. "creating directory".
        action: &'static str,
        /// The path it was doing it to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        StoreError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// What kind of failure an error is, for every front end alike: the CLI's
/// exit code (DESIGN §10), the server's status, the MCP server's error.
/// Each library error says its own kind (`kind()`), so no front end
/// matches on error text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request cannot work as given: a bad argument, a missing file or
    /// key, a session that does not exist (exit 2).
    Usage,
    /// Refused to protect the record: a lock held elsewhere, a resume
    /// guard, a divergence (exit 4).
    Refused,
    /// Stored bytes do not verify (exit 3).
    Integrity,
    /// Anything else that went wrong while working (exit 1).
    Failure,
}

impl ErrorKind {
    /// The kind of an error that is integrity damage, a refusal or bad
    /// usage by the flags its type reports, in that order of precedence.
    pub fn from_flags(integrity: bool, refusal: bool, usage: bool) -> ErrorKind {
        if integrity {
            ErrorKind::Integrity
        } else if refusal {
            ErrorKind::Refused
        } else if usage {
            ErrorKind::Usage
        } else {
            ErrorKind::Failure
        }
    }
}
